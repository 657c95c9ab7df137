"""Registering a repository: fetch it, build its sandbox layer once, run its suite, record what holds.

    add_repo("toolz==1.0.0")                 # from the package index
    add_repo("toolz==1.0.0", path=checkout)   # from a local checkout (no network needed)

Steps, each refusing with one RepoError line: the source (`fetch`); its layout (pure Python, has tests);
a read-only layer of site-packages for the sandboxes (pytest as the sandboxes already have it, plus the
package's runtime dependencies and any `test_deps`, installed once with pip; nothing is installed at run
time and the sandboxes have no network); the whole suite run with pytest in a fresh sandbox `runs` times
(tests passing every time are reliable, the others flaky or failing; a suite whose reliable share is
below MIN_PASSING is refused); then every test file reduced to call checks (`code.realtests`) and run on the
reference `runs` times in the call-check server: the tests that finish and pass every time, with the same
observations, are what the verifier may use. The manifest is written last, so a failed registration
leaves nothing registered (and an earlier registration of the same version is kept until the new one is done).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gymsmith.core.errors import VerifierError
from gymsmith.repos.fetch import copy_local, fetch_sdist, layout, read_layout
from gymsmith.repos.manifest import Baseline, CallSuiteRecord, RepoError, RepoManifest, repo_path, write_manifest
from gymsmith.sandbox.runtime import PythonRuntime, layer_runtime, python_runtime
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, fresh_pytest

MIN_PASSING = 0.9   # share of the collected tests that must pass reliably
SUITE_TIMEOUT_S = 600
# a test file that cannot be imported (a helper module or dependency the sdist lacks) must not stop the others;
# run_baseline counts it as failing
PYTEST_INI = "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider --continue-on-collection-errors\n"


def _requirements(requires: list[str]) -> list[str]:
    """Runtime requirements (no extras) whose markers hold on this interpreter."""
    from packaging.requirements import Requirement

    out = []
    for text in requires:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append(str(req).split(";")[0].strip())
    return out


def build_layer(target: Path, requirements: list[str]) -> dict[str, str]:
    """pytest's sandbox packages plus `requirements` (pip, from the index) in `target`; name -> version."""
    base = python_runtime()
    shutil.copytree(base.packages_dir, target)
    if requirements:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(target),
                               *requirements], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise RepoError(f"installing the test dependencies {requirements} failed: {tail}")
    versions = dict(base.packages)
    for info in target.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        versions.setdefault(name, version)
    return versions


def run_baseline(files: dict[str, str], tests: list[str], runtime: PythonRuntime, runs: int) -> Baseline:
    """The whole suite with pytest in a fresh sandbox, `runs` times. A test file with tests that reports none (it
    could not be imported) counts as one failing entry, `PATH (not collected)`."""
    outcomes, seconds, collected = [], [], 0
    with_tests = [t for t in tests if re.search(r"^\s*(async\s+)?def test|^class Test", files.get(t, ""), re.M)]
    for i in range(runs):
        started = time.perf_counter()
        run = fresh_pytest(files, tests, timeout=SUITE_TIMEOUT_S, runtime=runtime, ini=PYTEST_INI)
        seconds.append(round(time.perf_counter() - started, 3))
        if run.status is not RunStatus.COMPLETED:
            raise RepoError(f"the test suite did not finish in the sandbox (run {i + 1}: {run.status.value})")
        # JUnit names a class's tests 'tests/test_x/TestY.py::test_z' (see pytest_runner._parse_junit)
        reported = {n.split("::", 1)[0] for n in run.outcomes}
        uncollected = {f"{t} (not collected)": TestOutcome.ERROR for t in with_tests
                       if t not in reported and not any(r.startswith(t.removesuffix(".py") + "/") for r in reported)}
        outcomes.append({**run.outcomes, **uncollected})
        collected = collected or len(outcomes[-1])
    names = sorted(set().union(*outcomes))
    passes = {n: sum(o.get(n) is TestOutcome.PASSED for o in outcomes) for n in names}
    return Baseline(runs=runs, collected=collected, reliable=[n for n in names if passes[n] == runs],
                    flaky=[n for n in names if 0 < passes[n] < runs], failing=[n for n in names if passes[n] == 0],
                    suite_seconds=seconds)


def call_suites(files: dict[str, str], test_files: list[str], runtime: PythonRuntime, runs: int) -> list[CallSuiteRecord]:
    """Each test file as call checks, keeping the tests the reference passes `runs` times alike."""
    from gymsmith.families.code.realtests import reduce_module
    from gymsmith.verifier.calltests import CallRunner, compile_suite, judge_run, records_by_nodeid

    sources = {p: t for p, t in files.items() if p not in test_files}
    reduced = {}
    for path in test_files:
        if path.rsplit("/", 1)[-1] == "conftest.py":
            continue
        text, dropped = reduce_module(files[path], path)
        suite = compile_suite(text, path) if text else None
        if suite is not None and suite.tests:
            reduced[path] = (text, suite, dropped)
    suites = [s for _, s, _ in reduced.values()]
    if not suites:
        return []
    with CallRunner(runtime=runtime) as runner:
        observations = [runner.observe(sources, suites, deadline_s=120, group_timeout_s=60) for _ in range(runs)]
    reference = records_by_nodeid(suites, observations[0])
    passing = set(reference)
    for observed in observations:
        run = judge_run(suites, observed, reference).run
        passing &= {n for n, o in run.outcomes.items() if o is TestOutcome.PASSED}
    out = []
    for path, (text, suite, dropped) in reduced.items():
        names = [t.name for t in suite.tests if f"{path}::{t.name}" in passing]
        if names:
            from gymsmith.families.code.realtests import keep_tests

            out.append(CallSuiteRecord(path=path, source=keep_tests(text, set(names)), tests=names,
                                       dropped=dropped + len(suite.tests) - len(names)))
    return out


def add_repo(spec: str, *, path: Path | None = None, repos_dir: Path | None = None, test_deps: tuple[str, ...] = (),
             runs: int = 3, say: Callable[[str], None] = lambda line: None) -> RepoManifest:
    """Register `spec` ('NAME==VERSION'); returns its manifest. Raises RepoError (one line) for a package that
    cannot be registered, VerifierError if the sandbox cannot run."""
    name, sep, version = spec.partition("==")
    if not sep or not name or not version:
        raise RepoError(f"expected NAME==VERSION (a pinned package), got {spec!r}")
    if runs < 3:
        raise RepoError(f"--runs must be at least 3 (flaky tests are found by repetition), got {runs}")
    target = repo_path(name, version, repos_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        say(f"fetching {spec}" + (f" from {path}" if path else " from the package index"))
        fetched = copy_local(path, staging / "fetch") if path else fetch_sdist(name, version, staging / "fetch")
        lay = layout(fetched.root, name)
        files = read_layout(fetched.root, lay)
        tree = staging / "tree"
        for rel, text in files.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text)
        requirements = _requirements(fetched.requires) + list(test_deps)
        say(f"building its sandbox layer (pytest{', ' + ', '.join(requirements) if requirements else ''})")
        staging_layer = staging / "layer"
        versions = build_layer(staging_layer, requirements)
        runtime = layer_runtime(staging_layer, versions)
        tests = [t for t in lay.test_files if t.rsplit("/", 1)[-1] != "conftest.py" and t in files]
        say(f"running its suite ({len(tests)} test files) {runs} times in the sandbox")
        baseline = run_baseline(files, tests, runtime, runs)
        share = len(baseline.reliable) / baseline.collected if baseline.collected else 0.0
        if not baseline.collected:
            raise RepoError(f"pytest collected no test of {spec} in the sandbox (a test dependency missing from its "
                            "layer? name it with --test-dep)")
        if not baseline.reliable or share < MIN_PASSING:
            raise RepoError(f"the test suite of {spec} does not pass in the sandbox: {len(baseline.reliable)} of "
                            f"{baseline.collected} tests pass reliably (at least {MIN_PASSING:.0%} needed; e.g. failing: "
                            f"{', '.join(baseline.failing[:3])})")
        say(f"suite: {len(baseline.reliable)}/{baseline.collected} reliable, {len(baseline.flaky)} flaky, "
            f"{min(baseline.suite_seconds):.1f} s; reducing its tests to call checks")
        suites = call_suites(files, lay.test_files, runtime, runs)
        if not suites:
            raise RepoError(f"no test of {spec} can be run as call checks (plain test functions with top-level asserts); "
                            "the verifier would have nothing to check tasks with")
        manifest = RepoManifest(name=name, version=version, origin=fetched.origin, sha256=fetched.sha256,
                                packages=lay.packages, source_files=lay.source_files, test_files=lay.test_files,
                                data_files=[p for p in lay.data_files if p in files],
                                layer_packages=versions, baseline=baseline, call_suites=suites, python=sys.version.split()[0])
        shutil.rmtree(staging / "fetch", ignore_errors=True)
        write_manifest(staging, manifest)
        old = target.with_name(f".{target.name}.old")
        if target.exists():
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)
        say(f"registered {spec}: {manifest.call_tests()} call-check tests in {len(suites)} files")
        return manifest
    except VerifierError as exc:
        raise RepoError(f"the sandbox could not run the tests of {spec}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
