"""Replay of stored trajectories: exact on a real rollout, and a tampered record is caught at its step."""

import sqlite3
import subprocess
import sys

import pytest

from gymsmith.audit import replay
from gymsmith.core import StoreError
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    db = tmp_path_factory.mktemp("replay") / "r.db"
    store = TrajectoryStore(db)
    out = run(RunConfig(run_id="rp", taskset=TaskSetSpec(family="ops", count=6, base_seed=5, knobs={"difficulty": [0.5, 1.0]}),
                        agents=["greedy", "random"]), store)
    return db, store, out


def test_replay_is_exact_for_every_stored_rollout(stored):
    _, store, out = stored
    for t in out:
        report = replay(store, t.rollout_id)
        assert report.identical, report.first_difference
        assert report.steps_compared == len(t.steps) and report.final_state_replayed == t.final_state_hash


def test_a_tampered_observation_is_found_at_its_step(stored, tmp_path):
    db, _, out = stored
    t = max(out, key=lambda t: len(t.steps))
    copy = tmp_path / "tampered.db"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    with sqlite3.connect(copy) as c:
        c.execute("UPDATE steps SET observation = replace(observation, '\"day\"', '\"dia\"') "
                  "WHERE rollout_id = ? AND idx = (SELECT MIN(idx) FROM steps WHERE rollout_id = ? AND observation LIKE '%\"day\"%')",
                  (t.rollout_id, t.rollout_id))
        assert c.total_changes == 1
    report = replay(TrajectoryStore(copy), t.rollout_id)
    assert not report.identical and "differs" in report.first_difference and "step " in report.first_difference
    cli = subprocess.run([sys.executable, "-m", "gymsmith.cli", "replay", t.rollout_id, "--store", str(copy)],
                         capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert cli.returncode == 1 and "differs" in cli.stdout


def test_replay_of_an_unknown_rollout(stored):
    _, store, _ = stored
    with pytest.raises(StoreError, match="no rollout 'nope'"):
        replay(store, "nope")
