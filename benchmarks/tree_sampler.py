"""The CPU time and memory of a process tree, sampled from a process of its own (benchmarks/model_bound.py).

Run as a script by `TreeMemory`: `python tree_sampler.py ROOT EXCLUDE INTERVAL_S` prints "ready" once it has
taken the CPU baseline, samples until its stdin closes, then prints one JSON line of figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` so far (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


class TreeMemory:
    """Samples the memory and CPU time of process `root` and its descendants (but `exclude`'s subtree and the
    sampler itself) until stopped; keeps the peaks of the summed RSS and PSS, in MiB, and the CPU seconds each
    process used since the start (a process that ends between two samples loses at most one interval's).

    The sampling runs in a process of its own (this file, run as a script; it imports nothing of gymsmith): on a thread of the benchmark's
    process it took the engine's GIL for about 0.6 s of a 9 s run (py-spy), and so slowed what it measured."""

    def __init__(self, exclude: int | None, interval_s: float = 0.25):
        self.exclude, self.interval_s = exclude, interval_s
        self.peak_rss = self.peak_pss = self.cpu = 0.0
        self.peak_processes = 0
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "TreeMemory":
        self._proc = subprocess.Popen([sys.executable, __file__, str(os.getpid()),
                                       str(self.exclude or 0), str(self.interval_s)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        self._proc.stdout.readline()  # "ready": its first sample (the CPU baseline) is taken
        return self

    def __exit__(self, *exc) -> None:
        assert self._proc is not None
        out, _ = self._proc.communicate("")  # stdin closed: a last sample, then the figures
        figures = json.loads(out.strip().splitlines()[-1])
        self.peak_rss, self.peak_pss = figures["peak_rss"], figures["peak_pss"]
        self.peak_processes, self.cpu = figures["peak_processes"], figures["cpu"]


class _TreeSampler:
    """The sampling process's side of TreeMemory."""

    def __init__(self, root: int, exclude: int, interval_s: float):
        self.root, self.exclude, self.interval_s = root, exclude, interval_s
        self.peak_rss = self.peak_pss = 0.0
        self.peak_processes = 0
        self._cpu_start: dict[int, float] = {pid: cpu_seconds(pid) or 0.0 for pid in self._tree()}
        self._cpu_last: dict[int, float] = dict(self._cpu_start)

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            if pid in (self.exclude, os.getpid()):
                continue
            out.append(pid)
            todo += children.get(pid, [])
        return out

    def run(self) -> None:
        stop = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        print("ready", flush=True)
        while not stop.wait(self.interval_s):
            self._sample()
        self._sample()
        cpu = sum(last - self._cpu_start.get(pid, 0.0) for pid, last in self._cpu_last.items())
        print(json.dumps(dict(peak_rss=self.peak_rss, peak_pss=self.peak_pss, peak_processes=self.peak_processes,
                              cpu=cpu)), flush=True)

    def _sample(self) -> None:
        rss = pss = 0
        pids = self._tree()
        for pid in pids:
            used = cpu_seconds(pid)
            if used is not None:
                self._cpu_last[pid] = used
            try:
                rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
                        break
            except (OSError, ValueError, IndexError):
                continue
        self.peak_rss = max(self.peak_rss, rss / 2**20)
        self.peak_pss = max(self.peak_pss, pss / 2**20)
        self.peak_processes = max(self.peak_processes, len(pids))


if __name__ == "__main__":
    _TreeSampler(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])).run()
