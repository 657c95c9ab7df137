"""What a sandbox looks up leaves nothing on the host for a later sandbox to time (sandbox/sharedfs.py).

A lookup of a missing name on a disk filesystem leaves a negative dentry that outlives the sandbox (attacker 32
read a correct rollout's repair from them by timing and was accepted). These tests count negative dentries with
the kernel's own counter (`/proc/sys/fs/dentry-state`, field 5) around 20,000 lookups: host-wide, so other
processes move it a little, but never by thousands in a second on this machine; the disk control shows the
count does move when the channel is open.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from pathlib import Path

import pytest

from gymsmith.sandbox import sharedfs
from gymsmith.sandbox.base import SandboxError
from gymsmith.sandbox.bwrap import BwrapSandbox, bwrap_path
from gymsmith.sandbox.workspace import CowWorkspace

LOOKUPS = 20_000
pytestmark = pytest.mark.skipif(bwrap_path() is None or os.geteuid() != 0, reason="needs bubblewrap and root")

STAT_MISSING = """
import os, sys
for d in sys.argv[1:]:
    for i in range({n}):
        try:
            os.stat(f"{{d}}/.probe-{tag}-{{i}}")
        except OSError:
            pass
"""


def negative_dentries() -> int:
    return int(Path("/proc/sys/fs/dentry-state").read_text().split()[4])


def left_since(before: int, *, wait_s: float = 20.0) -> int:
    """Negative dentries added since `before`, once what was unmounted is gone: the kernel may finish releasing a
    detached mount (and its dentries) after the unmount returns, late on a loaded machine (a CI run once counted
    the 10,000 host lookups of the test below still there right after the overlay's unmount, and another, with four
    red-team helpers running beside it, 5 s after). A real leak stays: the least count seen over `wait_s` is kept
    (the wait ends as soon as the count drops)."""
    deadline = time.monotonic() + wait_s
    least = negative_dentries() - before
    while least >= LOOKUPS * 0.1 and time.monotonic() < deadline:
        time.sleep(0.25)
        least = min(least, negative_dentries() - before)
    return least


def test_the_channel_exists_on_disk_and_not_on_tmpfs(tmp_path):
    """The kernel property the defence rests on: lookups of missing names are remembered on disk, not on tmpfs."""
    disk = tmp_path / "disk"
    disk.mkdir()
    assert not sharedfs.on_tmpfs(disk), "tmp_path is expected on a disk filesystem here"
    tmpfs = sharedfs.scratch("probe-")
    try:
        before = negative_dentries()
        for i in range(LOOKUPS):
            os.path.exists(disk / f"missing-{i}")
        on_disk = negative_dentries() - before
        before = negative_dentries()
        for i in range(LOOKUPS):
            os.path.exists(tmpfs / f"missing-{i}")
        on_tmpfs = negative_dentries() - before
    finally:
        os.rmdir(tmpfs)
    assert on_disk > LOOKUPS * 0.9, on_disk
    assert on_tmpfs < LOOKUPS * 0.1, on_tmpfs


def test_every_read_only_bind_of_a_sandbox_comes_from_tmpfs(tmp_path):
    job = sharedfs.scratch("jobs-test-")
    try:
        with BwrapSandbox(tmp_path, extra_ro={str(job): "/jobs"}) as sb:
            binds = [(o, s) for _, o, s, _ in sharedfs.bind_mounts(sb._args) if o in sharedfs.READ_ONLY_BINDS]
            assert len(binds) > 10
            assert [s for _, s in binds if not sharedfs.on_tmpfs(s)] == []
    finally:
        os.rmdir(job)


def test_lookups_in_a_sandbox_leave_no_negative_dentry_on_the_host(tmp_path):
    """A command that looks up 20,000 missing names in the system directories, the standard library, the runtime's
    packages, /jobs and its workspace (a workspace overlay over a pristine tree) leaves almost none behind."""
    pristine = tmp_path / "pristine"
    (pristine / "pkg").mkdir(parents=True)
    (pristine / "pkg" / "mod.py").write_text("x = 1\n")
    job = sharedfs.scratch("jobs-test-")
    try:
        with CowWorkspace() as ws:
            ws.restore(pristine)
            assert ws.mode == "overlay"
            with BwrapSandbox(ws.path, extra_ro={str(job): "/jobs"}) as sb:
                dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/bin", os.path.dirname(os.__file__),
                        sb.runtime.site_dirs[0], "/jobs", "/workspace/pkg"]
                dirs = [d for d in dirs if d and sb.exec(["test", "-d", d]).exit_code == 0]
                assert len(dirs) >= 5, dirs
                script = STAT_MISSING.format(n=LOOKUPS // len(dirs), tag=os.getpid())
                sb.exec(["python3", "-c", "pass"])  # the interpreter's own start-up lookups are not the probe's
                before = negative_dentries()
                r = sb.exec(["python3", "-c", script, *dirs], timeout=120)
                # the workspace overlay keeps its own until the next rollout's restore and reset end it, as the
                # code environment's reset does
                ws.restore(pristine)
                sb.reset()
                sb.exec(["true"])
                left = left_since(before)
            assert r.exit_code == 0, r.stderr
            # ... and the same lookups from the host's tools, through the workspace, leave none either
            before = negative_dentries()
            for i in range(LOOKUPS // 2):
                os.path.exists(ws.path / "pkg" / f"host-{i}")
            ws.restore(pristine)
            host_left = left_since(before)
    finally:
        os.rmdir(job)
    assert left < LOOKUPS * 0.1, f"{left} negative dentries left by {LOOKUPS} lookups in {dirs}"
    assert host_left < LOOKUPS * 0.1, host_left


def test_stage_copies_once_per_content_and_leaves_covered_subtrees_empty(tmp_path):
    src = tmp_path / "tree"
    (src / "keep" / "sub").mkdir(parents=True)
    (src / "keep" / "sub" / "a.txt").write_text("a")
    (src / "hidden").mkdir()
    (src / "hidden" / "secret.txt").write_text("s")
    os.symlink("keep/sub/a.txt", src / "link")
    (src / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "run.sh", 0o755)
    staged = Path(sharedfs.stage(str(src), {str(src / "hidden")}))
    assert sharedfs.on_tmpfs(staged)
    assert (staged / "keep" / "sub" / "a.txt").read_text() == "a"
    assert os.readlink(staged / "link") == "keep/sub/a.txt"
    assert os.stat(staged / "run.sh").st_mode & stat.S_IXUSR
    assert (staged / "hidden").is_dir() and list((staged / "hidden").iterdir()) == []  # a mount point, empty
    assert sharedfs.stage(str(src), {str(src / "hidden")}) == str(staged)  # the same content: the same copy
    assert sharedfs.stage(str(staged)) == str(staged)  # already on tmpfs: used as it is
    (src / "keep" / "b.txt").write_text("b")
    sharedfs._staged.clear()  # a new process: the content is looked at again
    changed = Path(sharedfs.stage(str(src), {str(src / "hidden")}))
    assert changed != staged and (changed / "keep" / "b.txt").read_text() == "b"


def test_a_shared_directory_off_tmpfs_is_refused_with_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("GYMSMITH_SHARED_FS", str(tmp_path / "shared"))
    with pytest.raises(SandboxError, match="not on tmpfs.*GYMSMITH_SHARED_FS"):
        sharedfs.root()
    with pytest.raises(SandboxError, match="not on tmpfs"):
        BwrapSandbox(Path(tempfile.mkdtemp(dir=tmp_path)))
