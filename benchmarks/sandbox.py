"""Sandbox and verifier costs, each against its baseline in the same run. Prints one JSON line per result.

- `sandbox_reset`: restoring a workspace of 200, 2,000 and 20,000 files to its pristine state. Ours: the
  copy-on-write workspace (overlayfs over the pristine tree, fresh tmpfs upper layer). Baseline: remove
  the dirty copy and `shutil.copytree` the pristine tree again. `flat` compares our reset at each size with
  ours at 200 files (1.0 = size does not matter). `first_restore_ms`: the tree's first restore, which also locks
  its files in memory (sandbox/residency.py; later restores of the same tree do not walk it again).
- `sandbox_exec`: running `/bin/true` in the bubblewrap sandbox versus a plain `subprocess.run`; `added_ms`
  is the sandbox's cost per command (median of interleaved runs).
- `verifications`: hidden-test verifications of real `code` tasks (buggy and fixed repositories) as the
  verifier runs them (call checks in the warm call server, outcomes decided on the trusted side), and
  through the warm pytest runner, versus a fresh `python -m pytest` in a new sandbox per verification;
  verifications per second and the ratios.

Usage: python benchmarks/sandbox.py [--quick]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gymsmith.sandbox import CowWorkspace, open_sandbox

QUICK = "--quick" in sys.argv


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def make_tree(root: Path, files: int) -> None:
    for i in range(files):
        d = root / f"pkg{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"# module {i}\nVALUE = {i}\n" + "x = 1\n" * 40)


def bench_reset(files: int, repeats: int, base_ours: float | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        pristine, copy_dst = Path(tmp) / "pristine", Path(tmp) / "copy"
        make_tree(pristine, files)
        ours, baseline = [], []
        with CowWorkspace() as ws:
            t = time.perf_counter()
            ws.restore(pristine)  # the first restore of a tree locks its files in memory (sandbox/residency.py)
            first = time.perf_counter() - t
            for _ in range(repeats):
                (ws.path / "pkg000" / "mod00000.py").write_text("dirty\n")  # a rollout changed something
                t = time.perf_counter()
                ws.restore(pristine)
                ours.append(time.perf_counter() - t)
                t = time.perf_counter()
                shutil.rmtree(copy_dst, ignore_errors=True)
                shutil.copytree(pristine, copy_dst, symlinks=True)
                baseline.append(time.perf_counter() - t)
            mode = ws.mode
        o, b = statistics.median(ours) * 1000, statistics.median(baseline) * 1000
        emit(bench="sandbox_reset", files=files, mode=mode, ours_ms=round(o, 3), baseline_copytree_ms=round(b, 3),
             ratio=round(b / o, 1), flat=round(o / base_ours, 2) if base_ours else 1.0, repeats=repeats,
             first_restore_ms=round(first * 1000, 3))
        return o


def bench_exec(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, open_sandbox(Path(tmp)) as sb:
        sb.exec(["/bin/true"])  # starts the sandbox (its command server); later commands reuse it
        plain, boxed = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            subprocess.run(["/bin/true"], capture_output=True)
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            sb.exec(["/bin/true"])
            boxed.append(time.perf_counter() - t)
        p, s = statistics.median(plain) * 1000, statistics.median(boxed) * 1000
        emit(bench="sandbox_exec", plain_ms=round(p, 3), sandbox_ms=round(s, 3), added_ms=round(s - p, 3),
             target_added_ms=5.0, ratio=round(s / p, 2), repeats=repeats, limits=sorted(sb.enforced()))


def bench_verifications(n: int) -> None:
    """The verifier's path for generated tasks (call checks, warm) against a fresh `python -m pytest` per verification."""
    from gymsmith.families.code.env import code_task
    from gymsmith.families.code.generator import PYTEST_INI, compiled_suite, run_hidden_tests
    from gymsmith.registry import TaskSetSpec, build_taskset
    from gymsmith.verifier.pytest_runner import LEAN_ARGS, WarmPytest, fresh_pytest

    jobs = []
    for i, task in enumerate(build_taskset(TaskSetSpec(family="code", count=n, base_seed=4000, knobs={"difficulty": [0.0, 1.0]}))):
        ct = code_task(task)
        sources = {m: (ct.reference[m] if i % 2 else ct.files[m]) for m in ct.modules}
        templates = [p.removeprefix("tests/test_").removesuffix(".py") for p in sorted(ct.hidden_tests)]
        jobs.append((sources, ct.hidden_tests, [compiled_suite(t, ct.hidden_tests[f"tests/test_{t}.py"]) for t in templates], templates))
    timings = {}
    run_hidden_tests(jobs[0][0], jobs[0][2], jobs[0][3], deadline_s=10)  # start the server and the reference runs
    t = time.perf_counter()
    for sources, _, suites, templates in jobs:
        run_hidden_tests(sources, suites, templates, deadline_s=10)
    timings["calls"] = time.perf_counter() - t
    with WarmPytest() as warm:
        warm.run({**jobs[0][0], **jobs[0][1]})
        t = time.perf_counter()
        for sources, hidden, _, _ in jobs:
            warm.run({**sources, **hidden, "pytest.ini": PYTEST_INI}, extra_args=LEAN_ARGS)
        timings["pytest"] = time.perf_counter() - t
    t = time.perf_counter()
    for sources, hidden, _, _ in jobs:
        fresh_pytest({**sources, **hidden, "pytest.ini": PYTEST_INI}, extra_args=LEAN_ARGS)
    timings["fresh"] = time.perf_counter() - t
    per_s = {k: n / v for k, v in timings.items()}
    emit(bench="verifications", tasks=n, warm_per_s=round(per_s["calls"], 1), warm_pytest_per_s=round(per_s["pytest"], 1),
         fresh_pytest_per_s=round(per_s["fresh"], 2), ratio=round(per_s["calls"] / per_s["fresh"], 1),
         ratio_warm_pytest=round(per_s["pytest"] / per_s["fresh"], 1), target_ratio=10)


def main() -> None:
    base = None
    for files in (200, 2000, 20000):
        o = bench_reset(files, repeats=3 if QUICK or files == 20000 else 10, base_ours=base)
        base = base or o
    bench_exec(repeats=30 if QUICK else 200)
    bench_verifications(10 if QUICK else 40)


if __name__ == "__main__":
    main()
