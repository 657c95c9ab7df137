"""Diversity audit: deterministic scripted agents collapse onto one path per task; the random agent does not; across
a goal kind's tasks, paths, final states and (browser observations) page structures are counted."""

import json
import subprocess
import sys

from gymsmith.audit.diversity import diversity, diversity_by_kind, entropy_bits, normalised_call, page_structure
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore


def test_collapse_is_flagged_and_exploration_is_not(tmp_path):
    db = tmp_path / "d.db"
    store = TrajectoryStore(db)
    # oracle and greedy ignore the episode seed (apart from simulated faults, off here): one path per task
    run(RunConfig(run_id="div", seeds=5, agents=["oracle", "greedy", "random"],
                  taskset=TaskSetSpec(family="ops", count=6, knobs={"difficulty": [0.0, 1.0], "fidelity": 0.0})), store)
    rows = {r.agent: r for r in diversity(store, ["div"])}
    assert rows["oracle"].mean_distinct_paths == 1.0 and rows["oracle"].collapsed_tasks == 6
    assert rows["oracle"].warning and "collapsed" in rows["oracle"].warning
    assert rows["greedy"].mean_distinct_final_states == 1.0
    assert rows["random"].mean_distinct_paths >= 4.0 and rows["random"].mean_path_entropy_bits > 1.5
    assert rows["random"].warning is None
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "audit", "diversity", "--store", str(db)],
                         capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "COLUMNS": "250"})
    assert out.returncode == 0 and "collapsed" in out.stdout


def test_normalisation_and_entropy():
    from collections import Counter

    assert normalised_call("ship_order", '{"order_id": 1}') == normalised_call("ship_order", '{"order_id": 2}')
    assert normalised_call("ship_order", '{"order_id": ') == 'ship_order"malformed"'
    assert entropy_bits(Counter({"a": 1, "b": 1})) == 1.0 and entropy_bits(Counter({"a": 4})) == 0.0


# -- across the tasks of each goal kind (issue 21, "what to show") ---------------------------------------------------
def _page(url: str, *elements: tuple[str, str, str]) -> str:
    return json.dumps({"text": "", "data": {"url": url, "elements": [
        {"id": i + 1, "role": role, "label": label, "name": name, **({"href": label} if role == "link" else {})}
        for i, (role, label, name) in enumerate(elements)]}})


def test_a_page_structure_is_its_layout_and_words_not_its_records():
    rows = [("link", f"/orders/{n}", "") for n in (17, 4021, 5)]
    base = _page("/orders?page=2", ("textbox", "Search", "q"), *rows, ("button", "Next", ""))
    assert page_structure(base) == page_structure(_page("/orders?page=9", ("textbox", "Search", "q"), *rows[:1],
                                                        ("button", "Next", "")))  # other records, one row
    assert page_structure(base) == page_structure(_page("/orders?page=2", ("textbox", "Search", "q"), *rows * 10,
                                                        ("button", "Next", "")))  # thirty rows
    assert page_structure(base) != page_structure(_page("/orders?page=2", ("textbox", "Find", "q"), *rows,
                                                        ("button", "Next", "")))  # a synonym
    assert page_structure(base) != page_structure(_page("/orders?page=2", ("button", "Next", ""), *rows,
                                                        ("textbox", "Search", "q")))  # another order
    assert page_structure(base) != page_structure(_page("/orders?page=2&sort=1", ("textbox", "Search", "q"), *rows,
                                                        ("button", "Next", "")))  # another query
    assert page_structure(json.dumps({"text": "3 orders shipped", "data": {"shipped": 3}})) is None
    assert page_structure("not json") is None


def test_by_kind_counts_paths_across_a_kinds_tasks_and_final_states_within_each(tmp_path):
    db = tmp_path / "k.db"
    store = TrajectoryStore(db)
    run(RunConfig(run_id="kinds", seeds=2, agents=["oracle", "random"],
                  taskset=TaskSetSpec(family="ops", count=8, base_seed=43, heldout_fraction=0.0,
                                      knobs={"difficulty": [0.0, 1.0], "fidelity": 0.0})), store)
    rows = {(r.agent, r.kind): r for r in diversity_by_kind(store, ["kinds"])}
    kinds = {kind for _, kind in rows}
    assert kinds <= {"fulfil", "resource", "staff", "billing"} and len(kinds) >= 3
    assert sum(rows[("oracle", k)].tasks for k in kinds) == 8
    for kind in kinds:
        oracle, random = rows[("oracle", kind)], rows[("random", kind)]
        assert oracle.rollouts == 2 * oracle.tasks and oracle.mean_distinct_final_states == 1.0  # the seed is ignored
        assert oracle.distinct_paths <= oracle.tasks < random.distinct_paths  # random: a new path nearly every time
        assert random.mean_distinct_final_states is not None and random.distinct_page_structures is None
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "audit", "diversity", "--by-kind", "--json", "--store",
                          str(db)], capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert {(r["agent"], r["kind"]): r["distinct_paths"] for r in json.loads(out.stdout)} == \
        {key: r.distinct_paths for key, r in rows.items()}


def test_a_varied_web_site_shows_an_agent_more_page_structures(tmp_path):
    """The same goal kind's tasks at variation 0 (one canonical site) and 1 (seeded skins): the oracle meets the
    same few page structures on every task of the first, and more on the second (real Chromium, real site)."""
    store = TrajectoryStore(tmp_path / "w.db")
    for run_id, variation in (("plain", 0.0), ("varied", 1.0)):
        run(RunConfig(run_id=run_id, agents=["oracle"], taskset=TaskSetSpec(
            family="web", count=4, heldout_fraction=0.0,
            knobs={"difficulty": 0.3, "kind": "address", "variation": variation})), store)
    (plain,), (varied,) = diversity_by_kind(store, ["plain"]), diversity_by_kind(store, ["varied"])
    assert plain.kind == varied.kind == "address" and plain.tasks == varied.tasks == 4
    assert plain.distinct_page_structures is not None and varied.distinct_page_structures is not None
    assert varied.distinct_page_structures > plain.distinct_page_structures + 4
