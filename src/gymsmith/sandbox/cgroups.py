"""Per-sandbox cgroups for memory, process and CPU-share limits (v2 unified, or v1 memory + pids [+ cpu]), where
the host allows.

The CPU share (`cpu.weight`, v1 `cpu.shares`) matters under contention only: a sandbox's processes, however many
and in whatever sessions, together get CPU in proportion to its weight against the other sandboxes'. Agent sandboxes
run at a low weight and the verifier's at the kernel's default (`base.Limits.cpu_weight`), so that a rollout filling
every core with busy processes cannot slow a verification until its reference misses its deadline (an
eighty-fourth attacker turned 3 of 3 verifications into infrastructure errors that way, an innocent one among them).

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
    """('v2', {'unified': dir}) or ('v1', {'memory': dir, 'pids': dir[, 'cpu': dir]}) where we may create groups;
    else None."""
    controllers = ROOT / "cgroup.controllers"
    if controllers.exists():
        have = set(controllers.read_text().split())
        if {"memory", "pids"} <= have and _writable(ROOT):
            return "v2", {"unified": ROOT}
        return None
    v1 = {c: ROOT / c for c in ("memory", "pids")}
    if all(_writable(p) for p in v1.values()):
        if _writable(ROOT / "cpu") and (ROOT / "cpu" / "cpu.shares").exists():
            v1["cpu"] = ROOT / "cpu"
        return "v1", v1
    return None


def v1_shares(weight: int) -> int:
    """cgroup v1's cpu.shares for a v2 cpu.weight (default 100 is 1024; the least is 2)."""
    return max(2, round(weight * 1024 / 100))


class Cgroup:
    """One group per sandbox, in each controller hierarchy. Every process of the sandbox is put in it."""

    def __init__(self, version: str, dirs: dict[str, Path]):
        self.version, self.dirs = version, dirs
        self.procs_files = [str(d / "cgroup.procs") for d in dirs.values()]

    @classmethod
    def create(cls, *, memory_bytes: int, pids: int, cpu_weight: int = 100) -> "Cgroup | None":
        """A new group with these limits, or None if this host does not let us make one (a host without a CPU
        controller we may use gets the memory and process limits alone)."""
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
                _try_write(d / "cpu.weight", str(cpu_weight))
            else:
                (dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
                _try_write(dirs["memory"] / "memory.memsw.limit_in_bytes", str(memory_bytes))
                (dirs["pids"] / "pids.max").write_text(str(pids))
                if "cpu" in dirs:
                    (dirs["cpu"] / "cpu.shares").write_text(str(v1_shares(cpu_weight)))
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

    def cpu_weight(self) -> int | None:
        """The group's CPU weight as the kernel holds it (v1: its cpu.shares as a weight), None without a CPU
        controller."""
        try:
            if self.version == "v2":
                return int((self.dirs["unified"] / "cpu.weight").read_text())
            if "cpu" in self.dirs:
                return round(int((self.dirs["cpu"] / "cpu.shares").read_text()) * 100 / 1024)
        except (OSError, ValueError):
            pass
        return None

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
        _try_write(d / "cgroup.subtree_control", "+cpu")  # apart: a host without it keeps the others


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
