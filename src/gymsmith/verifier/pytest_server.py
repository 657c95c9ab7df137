"""The warm pytest runner. Runs INSIDE a verifier sandbox, with only the standard library and pytest.

It imports pytest and every built-in plugin once, then serves jobs read as JSON lines on stdin:
    {"id": 1, "dir": "/jobs/1", "args": ["-p", "no:cacheprovider", ...], "timeout": 30}
For each job it forks: the child runs `pytest.main` in the job directory and writes per-test outcomes
to a pipe; the parent waits with a deadline. Agent code is imported only in the child, so the parent
stays as clean as it started. After each job every other process in the sandbox is killed, so nothing a
job left behind can touch the next one. A test that runs beside the code it tests can be forged by that
code: this runner is for repositories brought by users; generated tasks use call checks
(`calltests/server.py`). Replies are JSON lines on stdout:
    {"id": 1, "status": "completed"|"timeout"|"crashed", "collected": [...], "outcomes": {nodeid: outcome}}
"""

import gc
import json
import os
import pkgutil
import resource
import select
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pid1 import kill_others, private_world, set_dumpable, world_works  # noqa: E402 - mounted next to this file

sys.path.pop(0)

import _pytest
import pytest

for _mod in pkgutil.iter_modules(_pytest.__path__, "_pytest."):  # the warm part: import every built-in plugin once
    try:
        __import__(_mod.name)
    except Exception:  # noqa: BLE001 - an optional plugin that cannot load here is loaded (or not) by pytest itself
        pass


class Collector:
    """A pytest plugin that streams each test's outcome to the parent as it happens (a timeout keeps them)."""

    def __init__(self, fd):
        self.fd = fd

    def send(self, message):
        os.write(self.fd, (json.dumps(message) + "\n").encode())

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            # a failure in setup or teardown is an error of the test; a skip in setup is a skip
            outcome = "error" if report.when != "call" and report.outcome == "failed" else report.outcome
            self.send({"test": report.nodeid, "outcome": outcome})




class KeepListed:
    """A pytest plugin that runs only the listed node ids, in the order pytest collects them: the run is given their
    files whole, so the tests run in the order a `python -m pytest` of the suite runs them, not the list's."""

    def __init__(self, keep):
        self.keep = frozenset(keep)

    @pytest.hookimpl(trylast=True)  # after the repository's own hooks, whose order it keeps
    def pytest_collection_modifyitems(self, config, items):
        dropped = [item for item in items if item.nodeid not in self.keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.nodeid in self.keep]


# what `python -m pytest` counts against the recursion limit above pytest's `_main`: runpy's `_run_module_as_main` and
# `_run_code`, its `exec` (a C call the interpreter counts), pytest's `__main__` and `_console_main`
PYTHON_M_PYTEST_LEVELS = 5


def run_child(job, write_fd):
    os.setpgid(0, 0)
    # before the code under test: nothing it writes outlives this job, and in a pid namespace of its own it can name
    # no process that outlives it (the server's priority and limits are the same host uid's to change)
    # ... and its files are its own copy, on a file system of its own (pid1.private_world)
    here, there = job["dir"], private_world(own_pids=True, job_dir=job["dir"], name=job.get("name", "job"))
    args = [there + a[len(here):] if a == here or a.startswith(here + "/") else a for a in job["args"]]
    set_dumpable(True)  # the job's own processes may inspect each other; the server stays closed
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.chdir(there)
    if job.get("path_first"):  # as `python -m pytest` runs: the directory it runs in first on the path
        sys.path.insert(0, there)
    collector = Collector(write_fd)
    error = None
    # the frames code under test has left, as under `python -m pytest` (the task's command, in the same runtime): what
    # sits above pytest's `_main` there is PYTHON_M_PYTEST_LEVELS; here this server's frames and `pytest.main`. Code counts them
    # by recursing to RecursionError (pure code, no rule can see it): a hundred-and-sixty-first attacker's fix held
    # only at this runner's count, one below `python -m pytest`'s (accepted 0.96 on 3 of 3 repositories)
    depth, frame = 1, sys._getframe()
    while frame.f_back is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(sys.getrecursionlimit() + depth + 1 - PYTHON_M_PYTEST_LEVELS)  # +1: `pytest.main`
    try:
        plugins = [collector] if job.get("keep") is None else [collector, KeepListed(job["keep"])]
        code = int(pytest.main(args, plugins=plugins))
    except BaseException as exc:  # noqa: BLE001 - report what was seen before the crash
        code, error = -1, repr(exc)[:500]
    collector.send({"exit_code": code, "error": error})
    os._exit(0)






def merge(outcomes, test, outcome):
    """A test's outcome is its worst report: a passed call with a failing teardown is an error."""
    if outcomes.get(test) in (None, "passed"):
        outcomes[test] = outcome


MAX_REPORT_BYTES = 8 << 20  # what one test process may write on its pipe


def run_once(job, args, deadline, only=None):
    """Fork a child running pytest.main(args); (status, outcomes, end message). With `only`, outcomes for any
    other node id are ignored: a test process speaks for its own test and nothing else."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        run_child({**job, "args": args}, w)
    os.close(w)
    buf, size, outcomes, end, status = b"", 0, {}, None, "completed"
    while end is None:
        left = deadline - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        ready, _, _ = select.select([r], [], [], left)
        if not ready:
            continue
        data = os.read(r, 1 << 20)
        if not data:
            break
        size += len(data)
        if size > MAX_REPORT_BYTES:
            break  # flooded: whatever it said, it did not finish properly
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not ours: the code under test wrote to an inherited descriptor
            if not isinstance(message, dict):
                continue
            if isinstance(message.get("test"), str) and isinstance(message.get("outcome"), str):
                if only is None or message["test"] == only:
                    merge(outcomes, message["test"], message["outcome"])
            elif "exit_code" in message:
                end = message
    os.close(r)
    kill_others()
    if end is None and status != "timeout":
        status = "crashed"  # the test process died before pytest finished
    return status, outcomes, end


def serve_one(job):
    deadline = time.monotonic() + float(job.get("timeout", 60))
    if not job.get("isolate"):
        status, outcomes, end = run_once(job, job["args"], deadline)
        return {"id": job["id"], "status": status, "outcomes": outcomes, "exit_code": (end or {}).get("exit_code"),
                "error": (end or {}).get("error")}
    # one fresh process per test, forked from this server before any code under test is imported: no test can
    # wrap, replace or see another, and a crash or hang costs only its own test
    outcomes, status = {}, "completed"
    for nodeid in job["tests"]:
        if time.monotonic() >= deadline:
            status = "timeout"
            break
        one, got, _ = run_once(job, [*job["args"], nodeid], deadline, only=nodeid)
        outcomes.update(got)
        if one == "timeout":
            status = "timeout"
            break
        if one == "crashed" and status == "completed":
            status = "crashed"
    return {"id": job["id"], "status": status, "outcomes": outcomes, "exit_code": None, "error": None}


def main():
    set_dumpable(False)
    gc.freeze()  # everything imported so far is shared with each forked job without copy-on-write churn
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    out = sys.stdout
    if not world_works():
        out.write(json.dumps({"ready": False, "error": "cannot give a job its own namespaces (user, mount, ipc)"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ready": True, "pytest": pytest.__version__}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        reply = serve_one(job)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        reply["cpu"] = usage.ru_utime + usage.ru_stime  # the host replaces it before its CPU limit could end a job
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
