"""Sampling in groups for GRPO (issue 17 item 3): `RunConfig.group` / `gymsmith run --group N` runs N rollouts per
(task, agent) with distinct episode seeds and stores their group id, from which group-relative advantages are
computed; the exports carry it; a store of schema 7 gains the column (and the turns table) when opened."""

from __future__ import annotations

import sqlite3
from collections import defaultdict

import pyarrow.parquet as pq
import pytest

from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore, export_parquet
from gymsmith.store.trainer import group_advantages


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    db = tmp_path_factory.mktemp("groups") / "g.db"
    store = TrajectoryStore(db)
    # fulfilment tasks with faults the episode seed draws: greedy's rewards differ within a group (ops 3.4.1's billing
    # tasks, with other customers' duplicates, are ones greedy fails on every seed)
    taskset = TaskSetSpec(family="ops", count=3, base_seed=4, knobs={"kind": "fulfil", "fidelity": 0.6})
    config = RunConfig(run_id="grp", taskset=taskset, agents=["greedy"],
                       seeds=2, group=4, concurrency=1, max_steps=40)
    run(config, store, collect=False)
    return db, store, config


def test_groups_have_distinct_seeds_one_task_and_agent_and_a_stored_id(grouped):
    _, store, config = grouped
    rows = store.rollout_rows(["grp"])
    assert len(rows) == 3 * 2 * 4  # tasks x groups (seeds) x group size
    groups = defaultdict(list)
    for r in rows:
        groups[r["group_id"]].append(r)
    assert len(groups) == 3 * 2 and None not in groups
    for members in groups.values():
        assert len(members) == 4 and len({(m["task_id"], m["agent"]) for m in members}) == 1
        seeds = sorted(m["seed"] for m in members)
        assert seeds in ([0, 1, 2, 3], [4, 5, 6, 7])  # distinct episode seeds, group g = seeds g*4 .. g*4+3
        assert members[0]["group_id"] == config.group_id(members[0]["task_id"], "greedy", seeds[0])
    assert store.trajectory(rows[0]["rollout_id"]).group_id == rows[0]["group_id"]
    # resuming the run id runs nothing more
    assert run(config, store) == [] and len(store.rollout_rows(["grp"])) == 24


def test_group_relative_advantages_from_the_store(grouped):
    _, store, _ = grouped
    rows = store.rollout_rows(["grp"])
    advantage = group_advantages(rows)
    groups = defaultdict(list)
    for r in rows:
        groups[r["group_id"]].append(r)
    spread = 0
    for members in groups.values():
        values = [advantage[m["rollout_id"]] for m in members]
        assert sum(values) == pytest.approx(0.0, abs=1e-6)  # centred on the group's mean
        by_reward = sorted(members, key=lambda m: m["reward"])
        assert [advantage[m["rollout_id"]] for m in by_reward] == sorted(values)  # ordered as the rewards
        spread += len({m["reward"] for m in members}) > 1
    assert spread >= 1  # greedy meets seeded faults: its rewards differ within a group, so some advantages are not 0
    assert group_advantages([{**rows[0], "group_id": None}]) == {rows[0]["rollout_id"]: None}


def test_exports_carry_the_group_id(grouped, tmp_path):
    _, store, _ = grouped
    export_parquet(store, tmp_path / "r.parquet", run_ids=["grp"])
    exported = {r["rollout_id"]: r["group_id"] for r in pq.read_table(tmp_path / "r.parquet").to_pylist()}
    assert exported == {r["rollout_id"]: r["group_id"] for r in store.rollout_rows(["grp"])}


def test_a_schema_7_store_gains_group_ids_and_turns_and_keeps_its_rollouts(grouped, tmp_path):
    db, _, _ = grouped
    old = tmp_path / "seven.db"
    with sqlite3.connect(db) as src, sqlite3.connect(old) as dst:
        src.backup(dst)
    with sqlite3.connect(old) as c:  # what gymsmith with schema 7 wrote
        c.execute("DROP TABLE turns")
        c.execute("ALTER TABLE rollouts DROP COLUMN group_id")
        c.execute("DROP TABLE alembic_version")  # stores of schema 7 were made before the store used Alembic
    store = TrajectoryStore(old)
    rows = store.rollout_rows(["grp"])
    assert len(rows) == 24 and {r["group_id"] for r in rows} == {None}
    with sqlite3.connect(old) as c:
        assert "turns" in {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_the_async_engine_labels_groups_too(tmp_path):
    store = TrajectoryStore(tmp_path / "a.db")
    config = RunConfig(run_id="grp-async", taskset=TaskSetSpec(family="ops", count=1, base_seed=4), agents=["greedy"],
                       group=3, engine="async", max_steps=40)
    run(config, store, collect=False)
    rows = store.rollout_rows(["grp-async"])
    assert sorted(r["seed"] for r in rows) == [0, 1, 2]
    assert {r["group_id"] for r in rows} == {config.group_id(rows[0]["task_id"], "greedy", 0)}


def test_run_and_eval_take_group_from_the_command_line(tmp_path):
    """`gymsmith run --group N` and `gymsmith eval --group N` (pass@k on held-out tasks) store groups of N."""
    import subprocess
    import sys

    db = tmp_path / "c.db"
    for command, run_id in (("run", "r"), ("eval", "e")):
        out = subprocess.run([sys.executable, "-m", "gymsmith.cli", command, "ops", "--count", "2", "--agents", "random",
                              "--group", "3", "--run-id", run_id, "--store", str(db)], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT run_id, split, count(*), count(DISTINCT group_id), count(DISTINCT seed) FROM rollouts "
                         "GROUP BY run_id ORDER BY run_id").fetchall()
    assert rows == [("e", "heldout", 6, 2, 3), ("r", "train", 6, 2, 3)]
