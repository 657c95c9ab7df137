"""Shared files held in memory (`sandbox/residency.py`): what is locked, for how long, and in a forked child.

The containment test (`test_sandbox_containment.py::test_attack_carry_bits_in_the_residency_of_shared_pages`)
shows the property end to end in a real sandbox; these check the API it rests on, on real locked memory
(`VmLck` of /proc/self/status)."""

from __future__ import annotations

import os

from gymsmith.sandbox import residency
from gymsmith.sandbox.bwrap import shared_files


def _locked_kib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmLck:"):
            return int(line.split()[1])
    raise AssertionError("no VmLck in /proc/self/status")


def _tree(root, sizes):
    for rel, size in sizes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))


def test_hold_locks_every_file_of_its_tree_but_what_it_skips_and_walks_it_once(tmp_path):
    _tree(tmp_path, {"a.py": 9000, "pkg/b.so": 20000, "hidden/c": 50000, "empty": 0})
    os.symlink("/usr/lib", tmp_path / "link")  # a link is not followed
    before_bytes, before_kib = residency.locked_bytes(), _locked_kib()
    residency.hold([str(tmp_path)], skip={str(tmp_path / "hidden")})
    assert residency.locked_bytes() - before_bytes == 29000
    assert _locked_kib() - before_kib >= 28  # 3 + 5 pages of 4 KiB at least
    residency.hold([str(tmp_path)], skip={str(tmp_path / "hidden")})  # held already: not walked, not locked twice
    assert residency.locked_bytes() - before_bytes == 29000


def test_held_trees_stay_locked_and_a_forked_child_locks_them_again(tmp_path):
    """mlock is not inherited: a child forked from a process that holds the shared files would read them
    unlocked (a zygote's children start sandboxes); its next hold locks every mapping again, even if another thread
    of the parent held the module's lock at the fork (the child would otherwise wait for it forever)."""
    import select
    import signal
    import threading

    _tree(tmp_path, {"lib.so": 64 * 1024})
    residency.hold([str(tmp_path)])
    residency.hold([str(tmp_path)])  # walked once
    held = _locked_kib()
    assert held >= 64
    entered, leave = threading.Event(), threading.Event()

    def busy():  # another thread holds the module's lock when the process forks
        with residency._lock:
            entered.set()
            leave.wait(10)

    holder = threading.Thread(target=busy)
    holder.start()
    entered.wait(10)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report VmLck before and after its first hold
        try:
            before = _locked_kib()
            residency.hold([])
            os.write(write, f"{before} {_locked_kib()}".encode())
        finally:
            os._exit(0)
    leave.set()
    holder.join()
    os.close(write)
    answered = select.select([read], [], [], 20)[0]
    if not answered:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert answered, "the forked child never got the lock"
    before, after = map(int, os.read(read, 100).split())
    os.close(read)
    assert before < held <= after + 4, (before, held, after)


def test_shared_files_are_the_read_only_sources_less_what_later_mounts_cover():
    args = ["--ro-bind", "/usr/bin", "/usr/bin", "--proc", "/proc",
            "--ro-bind", "/opt/py/lib", "/opt/py/lib",
            "--tmpfs", "/opt/py/lib/test", "--remount-ro", "/opt/py/lib/test",
            "--ro-bind", "/cache/runtime", "/opt/py/lib/site-packages",
            "--bind", "/tmp/ws", "/workspace", "--ro-bind", "/jobs", "/run/jobs",
            "--ro-bind", "/src/proc.py", "/run/sandbox/proc.py"]
    roots, skip = shared_files(args, live={"/jobs"})
    assert roots == ["/usr/bin", "/opt/py/lib", "/cache/runtime", "/src/proc.py"]
    assert skip == {"/opt/py/lib/test", "/opt/py/lib/site-packages"}


def test_a_leased_tree_stays_locked_for_the_next_lease_until_idle_trees_hold_too_many_files(tmp_path, monkeypatch):
    """A task's pristine tree is restored for each of its rollouts: the lease keeps it locked between them, so a
    restore does not walk it again, and a rebuilt tree (another root directory) is locked afresh. Trees no lease
    holds are let go, least recently used first, once they hold more than KEEP_FILES files."""
    import shutil

    monkeypatch.setattr(residency, "KEEP_FILES", 3)
    _tree(tmp_path / "flush", {"1": 1, "2": 1, "3": 1, "4": 1})
    residency.lease(str(tmp_path / "flush")).release()  # lets go of idle trees earlier tests left (and this one)
    one, two = tmp_path / "one", tmp_path / "two"
    _tree(one, {"a": 5000, "b": 5000})
    _tree(two, {"c": 7000, "d": 7000})
    base = residency.locked_bytes()
    first = residency.lease(str(one))
    again = residency.lease(str(one))
    assert residency.locked_bytes() - base == 10000
    first.release()
    again.release()
    assert residency.locked_bytes() - base == 10000  # kept for the next rollout of the task
    shutil.rmtree(one)
    _tree(one, {"a": 6000})  # rebuilt: its old files are let go, the new one locked
    rebuilt = residency.lease(str(one))
    assert residency.locked_bytes() - base == 6000
    other = residency.lease(str(two))
    rebuilt.release()  # idle trees now hold 1 file: kept
    assert residency.locked_bytes() - base == 20000
    other.release()  # idle: 3 files, not over KEEP_FILES
    assert residency.locked_bytes() - base == 20000
    _tree(tmp_path / "three", {"e": 3000, "f": 3000})
    residency.lease(str(tmp_path / "three")).release()  # 5 idle files: least recently leased first, down to 3
    assert residency.locked_bytes() - base == 6000  # only "three" (2 files) is kept
