"""`gymsmith repos ...`: register real packages and list them (a thin layer over `gymsmith.repos`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from gymsmith.repos.manifest import RepoError

repos_app = typer.Typer(no_args_is_help=True, help="Register real Python packages as sources of code tasks.")
err = Console(stderr=True)
_DIR = typer.Option(None, "--repos-dir", help="Where registered repositories live (default: $GYMSMITH_REPOS, "
                    "else ~/.local/share/gymsmith/repos). Other commands read $GYMSMITH_REPOS.")


def _one_line(exc: BaseException) -> None:
    err.print(f"[bold red]error:[/] {' '.join(str(exc).split())}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@repos_app.command("add")
def add(spec: str = typer.Argument(..., help="NAME==VERSION, a pinned package from the index (e.g. toolz==1.0.0)."),
        path: Optional[Path] = typer.Option(None, "--path", help="Take the source from this local checkout instead."),
        repos_dir: Optional[Path] = _DIR,
        test_dep: list[str] = typer.Option([], "--test-dep", help="An extra test dependency for the layer, repeatable."),
        runs: int = typer.Option(3, help="Whole-suite runs (at least 3): tests passing in every run are reliable.")) -> None:
    """Fetch a pure-Python package with its tests, build its sandbox layer once, run its suite, record what holds."""
    from gymsmith.repos.build import add_repo

    try:
        m = add_repo(spec, path=path, repos_dir=repos_dir, test_deps=tuple(test_dep), runs=runs,
                     say=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))
    except RepoError as exc:
        _one_line(exc)
    sys.stdout.write(json.dumps({"repository": m.spec, "collected": m.baseline.collected,
                                 "reliable": len(m.baseline.reliable), "flaky": len(m.baseline.flaky),
                                 "failing": len(m.baseline.failing), "suite_seconds": m.baseline.suite_seconds,
                                 "call_check_tests": m.call_tests(), "call_check_files": len(m.call_suites),
                                 "source_files": len(m.source_files)}) + "\n")


@repos_app.command("list")
def list_(repos_dir: Optional[Path] = _DIR,
          as_json: bool = typer.Option(False, "--json", help="One JSON object per repository.")) -> None:
    """Registered repositories with their suite figures."""
    from gymsmith.repos.manifest import list_repos, repos_dir as where

    repos = list_repos(repos_dir)
    for m in repos:
        row = {"repository": m.spec, "reliable": len(m.baseline.reliable), "collected": m.baseline.collected,
               "flaky": len(m.baseline.flaky), "suite_seconds": min(m.baseline.suite_seconds),
               "call_check_tests": m.call_tests(), "source_files": len(m.source_files)}
        sys.stdout.write((json.dumps(row) if as_json else "  ".join(f"{k}={v}" for k, v in row.items())) + "\n")
    if not repos and not as_json:
        err.print(f"no repository registered in {where(repos_dir)}; add one with `gymsmith repos add NAME==VERSION`",
                  markup=False)


@repos_app.command("remove")
def remove(spec: str = typer.Argument(..., help="NAME==VERSION (or NAME if one version is registered)."),
           repos_dir: Optional[Path] = _DIR) -> None:
    """Unregister a repository: tasks can no longer be drawn from it (stored rollouts are kept)."""
    from gymsmith.repos.manifest import remove_repo

    try:
        m = remove_repo(spec, repos_dir)
    except RepoError as exc:
        _one_line(exc)
    err.print(f"removed {m.spec}", markup=False, highlight=False)
