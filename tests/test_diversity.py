"""Diversity audit: deterministic scripted agents collapse onto one path per task; the random agent does not."""

import subprocess
import sys

from gymsmith.audit.diversity import diversity, entropy_bits, normalised_call
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
