"""A run killed with SIGKILL mid-way, rerun under the same id: every rollout exactly once, none half-written."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

from gymsmith.store import TrajectoryStore

TASKS, AGENTS = 80, ["oracle", "greedy", "random", "null"]


def _count(db):
    try:
        with sqlite3.connect(db, timeout=30) as c:
            return c.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _processes_mentioning(text):
    """Pids whose command line contains `text` (forked pool workers share the run's command line)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def _run(db):
    return [sys.executable, "-m", "gymsmith.cli", "run", "ops", "--count", str(TASKS), "--agents", ",".join(AGENTS),
            "--run-id", "killed", "--store", str(db), "--concurrency", "2"]


def test_sigkill_then_resume(tmp_path):
    db = tmp_path / "resume.db"
    proc = subprocess.Popen(_run(db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while _count(db) < 40 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    at_kill = _count(db)
    # no worker or verifier process outlives the killed run
    deadline = time.time() + 15
    while _processes_mentioning(str(db)) and time.time() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(db)) == []
    total = TASKS * len(AGENTS)
    assert 0 < at_kill < total, f"the run was not interrupted mid-way ({at_kill} of {total})"

    done = subprocess.run(_run(db), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    with sqlite3.connect(db) as c:
        keys = c.execute("SELECT task_id, agent, seed FROM rollouts WHERE run_id = 'killed'").fetchall()
        assert len(keys) == total and len(set(keys)) == total
        # every stored rollout is whole: its step rows and reward components are all there
        broken = c.execute("""SELECT r.rollout_id FROM rollouts r
                              LEFT JOIN (SELECT rollout_id, COUNT(*) n FROM steps GROUP BY rollout_id) s USING (rollout_id)
                              WHERE COALESCE(s.n, 0) != r.n_steps""").fetchall()
        assert broken == []
        no_components = c.execute("""SELECT COUNT(*) FROM rollouts r WHERE r.status != 'error' AND NOT EXISTS
                                     (SELECT 1 FROM reward_components c WHERE c.rollout_id = r.rollout_id)""").fetchone()[0]
        assert no_components == 0
        assert c.execute("SELECT COUNT(*) FROM rollouts WHERE status = 'error'").fetchone()[0] == 0
    runs = TrajectoryStore(db).runs()
    assert [(r.run_id, r.rollouts) for r in runs] == [("killed", total)]
