"""Per-sandbox cgroups for memory and process limits (v2 unified, or v1 memory + pids), where the host allows.

A group lives under `<controller root>/gymsmith/`. Groups left by a process that died are removed the next
time a group is made, so a killed run does not leak them.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

ROOT = Path(os.environ.get("GYMSMITH_CGROUP_ROOT", "/sys/fs/cgroup"))
_counter = itertools.count()


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def detect() -> tuple[str, dict[str, Path]] | None:
    """('v2', {'unified': dir}) or ('v1', {'memory': dir, 'pids': dir}) where we may create groups; else None."""
    controllers = ROOT / "cgroup.controllers"
    if controllers.exists():
        have = set(controllers.read_text().split())
        if {"memory", "pids"} <= have and _writable(ROOT):
            return "v2", {"unified": ROOT}
        return None
    v1 = {c: ROOT / c for c in ("memory", "pids")}
    if all(_writable(p) for p in v1.values()):
        return "v1", v1
    return None


class Cgroup:
    """One group per sandbox, in each controller hierarchy. Every process of the sandbox is put in it."""

    def __init__(self, version: str, dirs: dict[str, Path]):
        self.version, self.dirs = version, dirs
        self.procs_files = [str(d / "cgroup.procs") for d in dirs.values()]

    @classmethod
    def create(cls, *, memory_bytes: int, pids: int) -> "Cgroup | None":
        """A new group with these limits, or None if this host does not let us make one."""
        found = detect()
        if found is None:
            return None
        version, roots = found
        name = f"sbx-{os.getpid()}-{next(_counter)}"
        dirs = {}
        try:
            for ctrl, root in roots.items():
                parent = root / "gymsmith"
                parent.mkdir(exist_ok=True)
                if version == "v2":
                    _enable_controllers(root, parent)
                _collect_stale(parent)
                (parent / name).mkdir()
                dirs[ctrl] = parent / name
            group = cls(version, dirs)
            if version == "v2":
                d = dirs["unified"]
                (d / "memory.max").write_text(str(memory_bytes))
                _try_write(d / "memory.swap.max", "0")
                (d / "pids.max").write_text(str(pids))
            else:
                (dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
                _try_write(dirs["memory"] / "memory.memsw.limit_in_bytes", str(memory_bytes))
                (dirs["pids"] / "pids.max").write_text(str(pids))
            return group
        except OSError:
            for d in dirs.values():
                _remove(d)
            return None

    def attach(self, pid: int) -> None:
        """Move `pid` into the group (called in the child between fork and exec, so keep it to plain writes)."""
        data = str(pid).encode()
        for path in self.procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def pids(self) -> list[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            try:
                out |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return sorted(out)

    def kill_all(self, keep: frozenset[int] = frozenset()) -> None:
        """SIGKILL every process in the group but `keep` until none is left (a fork racing the kill is caught next round)."""
        for _ in range(50):
            pids = [p for p in self.pids() if p not in keep]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit, so far."""
        if self.version == "v2":
            path = self.dirs["unified"] / "memory.events"
        else:
            path = self.dirs["memory"] / "memory.oom_control"
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def close(self) -> None:
        self.kill_all()
        for d in self.dirs.values():
            _remove(d)


def _try_write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError:
        pass  # optional knob (swap accounting off on this host)


def _enable_controllers(root: Path, parent: Path) -> None:
    for d in (root, parent):
        _try_write(d / "cgroup.subtree_control", "+memory +pids")


def _remove(d: Path) -> None:
    for _ in range(100):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # still has processes: they are being killed
            for pid in (d / "cgroup.procs").read_text().split() if (d / "cgroup.procs").exists() else []:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)


def _collect_stale(parent: Path) -> None:
    """Remove groups whose creating process is gone (a run killed before it could clean up)."""
    for d in parent.glob("sbx-*-*"):
        try:
            owner = int(d.name.split("-")[1])
        except ValueError:
            continue
        if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
            _remove(d)
