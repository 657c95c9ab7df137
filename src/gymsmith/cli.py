"""The `gymsmith` command line: a thin layer over the Python API (every command is a plain call)."""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional, cast

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.markup import escape
from rich.table import Table

from gymsmith.agents.model import ModelAgentConfig
from gymsmith.cli_support import (OneLineErrors, emit_json, error_line, fail, id_column, open_store, preflight,
                                  print_table, require_runs)
from gymsmith.core import logs
from gymsmith.core.errors import GymsmithError, SplitPolicyError, StoreError
from gymsmith.core.types import RolloutStatus, Split
from gymsmith.registry import DEFAULT_HELDOUT_FRACTION, TaskSetSpec, build_taskset, get_family, list_families, split_of
from gymsmith.repos.cli import repos_app
from gymsmith.runner.episode import DEFAULT_MAX_RECORD_BYTES
from gymsmith.runner.driver import run as run_config
from gymsmith.runner.local import RunConfig, SummaryRow, error_reasons, summarize
from gymsmith.runner.recovery import WORKER_DEATH_RETRIES
from gymsmith.store import DEFAULT_STORE, TrajectoryStore
from gymsmith.verifier.policies import DEFAULT_POLICY

app = typer.Typer(cls=OneLineErrors, add_completion=False, no_args_is_help=True,
                  help="Build, run and audit verifiable RL environments for LLM agents.")
tasks_app = typer.Typer(no_args_is_help=True, help="Generate and inspect tasks.")
runs_app = typer.Typer(no_args_is_help=True, help="Inspect stored runs.")
audit_app = typer.Typer(no_args_is_help=True, help="Audits over stored rollouts.")
sandbox_app = typer.Typer(no_args_is_help=True, help="Run commands in the sandbox, to debug environments and limits.")


@app.callback()
def _options(log_level: str = typer.Option(None, "--log-level", metavar="LEVEL",
                                           help="Diagnostics on stderr from this level up: DEBUG, INFO, WARNING (default; "
                                                "else $GYMSMITH_LOG_LEVEL) or ERROR.")) -> None:
    try:
        logs.configure(log_level)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


app.add_typer(tasks_app, name="tasks")
app.add_typer(runs_app, name="runs")
app.add_typer(audit_app, name="audit")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(repos_app, name="repos")
console = Console()
err = Console(stderr=True)


def _guard(fn):
    """Turn user errors into one clear line and exit code 2, instead of a traceback."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (GymsmithError, ValueError, ValidationError) as exc:
            fail(error_line(exc))
    return wrapper


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _knobs(pairs: list[str], difficulty: Optional[str]) -> dict[str, Any]:
    knobs: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"--knob {pair!r}: expected NAME=VALUE or NAME=LOW:HIGH")
        name, value = pair.split("=", 1)
        knobs[name] = _range_or_value(value, f"--knob {name}")
    if difficulty is not None:
        knobs["difficulty"] = _range_or_value(difficulty, "--difficulty")
    return knobs


def _range_or_value(text: str, what: str) -> Any:
    if ":" in text:
        low, _, high = text.partition(":")
        try:
            return [float(low), float(high)]
        except ValueError:
            raise ValueError(f"{what} {text!r}: expected LOW:HIGH numbers") from None
    return _parse_value(text)


@app.command()
@_guard
def families(as_json: bool = typer.Option(False, "--json", help="Print the families as JSON.")) -> None:
    """List registered task families with their knobs and agents."""
    if as_json:
        return emit_json(list_families())
    table = Table("family", "version", "source", "knobs", "agents")
    for f in list_families():
        knobs = ", ".join(f"{k.name}[{'|'.join(k.choices)}]" if k.choices else f"{k.name}[{k.low:g}..{k.high:g}]"
                          for k in f.knobs)
        table.add_row(f.name, f.version, f.source, knobs, ", ".join(f.agents))
    console.print(table)


@tasks_app.command("sample")
@_guard
def tasks_sample(family: str, seed: int = typer.Option(0, help="Generator seed."),
                 difficulty: Optional[float] = typer.Option(None, help="Difficulty in [0, 1]."),
                 knob: list[str] = typer.Option([], help="NAME=VALUE, repeatable."),
                 as_json: bool = typer.Option(False, "--json", help="Print the TaskSpec as JSON.")) -> None:
    """Generate one task. The same seed and knobs always give the same task (and id)."""
    knobs = _knobs(knob, None if difficulty is None else str(difficulty))
    task = get_family(family).generate(seed, **knobs)
    if as_json:
        sys.stdout.write(task.model_dump_json(indent=2) + "\n")
        return
    console.print(f"[bold]{task.id}[/]  split={split_of(task.id).value}  difficulty={task.difficulty}")
    console.print(f"knobs: {task.knobs}")
    console.print(task.goal)


@tasks_app.command("from-file")
@_guard
def tasks_from_file(path: Path = typer.Argument(..., help="A YAML task file naming a local git repository (see docs/code.md)."),
                    out: Optional[Path] = typer.Option(None, help="Also write the TaskSpec JSON here (e.g. for `gymsmith mcp code --task FILE`).")) -> None:
    """Validate a bring-your-own-repository task file, run its tests (FAIL_TO_PASS must fail at `commit` and pass on
    `solution_commit`, PASS_TO_PASS pass on both) and print its TaskSpec as JSON."""
    from gymsmith.families.code.byo import load_task_file

    task = load_task_file(path)
    text = task.model_dump_json(indent=2)
    if out:
        out.write_text(text)
    sys.stdout.write(text + "\n")


@tasks_app.command("list")
@_guard
def tasks_list(family: str, count: int = 10, split: str = "all", base_seed: int = 0,
               difficulty: str = typer.Option("0:1", help="VALUE or LOW:HIGH."),
               knob: list[str] = typer.Option([], help="NAME=VALUE or NAME=LOW:HIGH, repeatable."),
               as_json: bool = typer.Option(False, "--json", help="One TaskSpec JSON per line.")) -> None:
    """List a reproducible task set."""
    spec = TaskSetSpec(family=family, count=count, split=cast(Any, split), base_seed=base_seed,  # pydantic checks it
                       knobs=_knobs(knob, difficulty))
    tasks = build_taskset(spec)
    if as_json:
        for t in tasks:
            sys.stdout.write(t.model_dump_json() + "\n")
        return
    table = Table(id_column("task id"), "split", "difficulty", "kind", "goal")
    for t in tasks:
        table.add_row(t.id, split_of(t.id).value, f"{t.difficulty:.2f}", str(t.knobs.get("kind", "")), t.goal[:70] + "…")
    print_table(console, table)


def print_summary(rows: list[SummaryRow], title: str) -> None:
    table = Table("split", id_column("agent"), "difficulty", "rollouts", "errors", "mean reward", "acceptance", title=title)
    for r in rows:
        table.add_row(r.split, r.agent, r.difficulty_bin, str(r.rollouts), str(r.errors),
                      "—" if r.mean_reward is None else f"{r.mean_reward:.3f}",
                      "—" if r.acceptance is None else f"{r.acceptance:.1%}")
    print_table(console, table)


def execute(config: RunConfig, store_path: str, *, show_progress: bool = True, backend: str = "local",
            address: Optional[str] = None, tasks: Optional[list] = None, as_json: bool = False) -> TrajectoryStore:
    """Run `config` (or only `tasks` of it) into the store with a progress bar; print the summary of the whole
    run (as JSON with `as_json`). Shared by run, eval and demo. Bad flags are refused before the store is opened."""
    if backend not in ("local", "ray"):
        raise ValueError(f"--backend {backend!r}: expected 'local' or 'ray'")
    preflight(config)
    store = open_store(store_path, create=True)
    columns = (TextColumn(f"[bold]{config.run_id}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[last]}"))
    bar = Progress(*columns, console=err, disable=not show_progress, transient=False)
    try:
        job = None  # the bar starts with the first report: a run refused before it starts shows none

        def report(done: int, total: int, t) -> None:
            nonlocal job
            if job is None:
                bar.start()
                job = bar.add_task("rollouts", total=None, last="")
            last = "" if t is None else f"{t.agent}: {t.status.value}" + ("" if t.reward is None else f" r={t.reward.value:.2f}")
            bar.update(job, completed=done, total=total, last=last)

        def died(task_id: str, agent: str, seed: int, deaths: int) -> None:
            then = "run again on a fresh worker" if deaths <= WORKER_DEATH_RETRIES else "stored as an infrastructure error"
            bar.console.print(f"[yellow]a worker died during {agent} (seed {seed}) on task {task_id} "
                              f"(death {deaths} of this rollout): {then}[/]")

        if backend == "ray":
            from gymsmith.runner.ray_backend import run_on_ray

            run_on_ray(config, store, address=address, progress=report, collect=False, on_actor_death=died, tasks=tasks)
        else:
            run_config(config, store, progress=report, collect=False, on_worker_death=died, tasks=tasks)
    finally:
        if job is not None:
            bar.stop()
    rows = summarize(store.rollout_rows([config.run_id]), by_bin=False)
    if as_json:
        emit_json(rows)
    else:
        print_summary(rows, f"run {config.run_id}")
    return store


def fail_on_errors(store: TrajectoryStore, run_id: str, *, tolerate: bool) -> None:
    """Exit 1 when any rollout of the run ended in an infrastructure error (it has no reward: a run whose every
    rollout failed must not look like a success), naming the count and the first reason; with `tolerate`,
    only warn."""
    rows = store.rollout_rows([run_id])
    errors = [r for r in rows if r["status"] == RolloutStatus.ERROR]
    if not errors:
        return
    first = (errors[0].get("error") or "no reason recorded").splitlines()[0][:300]
    kinds = Counter(r.get("error_kind") or "unknown" for r in errors)  # unknown: stored before schema 10
    line = (f"{len(errors)} of {len(rows)} rollouts of run {run_id} ended in an infrastructure error (no reward; "
            f"{', '.join(f'{k} {n}' for k, n in kinds.most_common())}); first: {first}")
    reasons = error_reasons(rows)
    why = "".join(f"\n  {n} x {escape(reason)}" for reason, n in reasons[:3]) + (
        f"\n  and {len(reasons) - 3} more distinct reason(s), in the store's rollouts.error" if len(reasons) > 3 else "")
    if tolerate:
        err.print(f"[yellow]warning:[/] {escape(line)}{why}", soft_wrap=True)
        return
    err.print(f"[red]error:[/] {escape(line)}{why}\nRun them again with: gymsmith run --retry-errors {run_id}"
              + ("" if store.location.startswith("sqlite:") and DEFAULT_STORE in store.location else " --store STORE")
              + ". Pass --tolerate-errors to exit 0 anyway.", soft_wrap=True)
    raise typer.Exit(1)


def _positive(**values: float | None) -> None:
    """Exit 2 naming the first flag (`--max-steps` for max_steps) whose value is given and not positive."""
    for name, value in values.items():
        if value is not None and not value > 0:
            fail(f"--{name.replace('_', '-')} {value}: expected a positive number")


def _check_model_endpoint(config: RunConfig) -> None:
    """One request to the model endpoint before a run that uses it (`agents.endpoint.check_endpoint`): one line
    and exit 2 when it is down or does not serve the model, instead of every rollout failing through its retries."""
    import os

    from gymsmith.agents.endpoint import check_endpoint

    model = config.model
    if model is None or "model" not in config.agents:
        return
    key = os.environ.get(model.api_key_env) if model.api_key_env else None
    check_endpoint(model.base_url, model.model, api_key=key or None)


def _model_url(url: str) -> str:
    """--model-url checked for its shape (scheme, host); a ValueError of one line naming the flag otherwise."""
    from gymsmith.agents.endpoint import validate_base_url

    try:
        return validate_base_url(url)
    except ValueError as exc:
        raise ValueError(f"--model-url: {exc}") from None


def _run_command(purpose: str, family: str, count: int, agents: str, seeds: int, run_id: Optional[str], store: str,
                 difficulty: str, knob: list[str], base_seed: int, concurrency: int, max_steps: int, policy: str,
                 model_url: Optional[str] = None, model_name: Optional[str] = None,
                 model_key_env: str = "OPENAI_API_KEY", backend: str = "local", address: Optional[str] = None,
                 paired_heldout: int = 0, group: Optional[int] = None, step_rewards: bool = False, tolerate_errors: bool = False,
                 as_json: bool = False,
                 engine: str = "auto", max_in_flight: Optional[int] = None,
                 max_record_mib: Optional[float] = None) -> None:
    if engine not in ("auto", "async", "pool"):
        raise ValueError(f"--engine {engine!r}: expected auto, async or pool")
    model = None
    if model_url or model_name:
        if not (model_url and model_name):
            raise ValueError("--model-url and --model-name go together (the endpoint and the model it serves)")
        model = ModelAgentConfig(base_url=_model_url(model_url), model=model_name, api_key_env=model_key_env or None)
    config = RunConfig(model=model, run_id=run_id or f"{purpose}-{family}-{time.strftime('%Y%m%d-%H%M%S')}", purpose=cast(Any, purpose),
                       taskset=TaskSetSpec(family=family, count=count, split="train" if purpose == "train" else "heldout",
                                           base_seed=base_seed, knobs=_knobs(knob, difficulty)),
                       agents=[a.strip() for a in agents.split(",") if a.strip()], seeds=seeds,
                       concurrency=concurrency, max_steps=max_steps, policy=policy, paired_heldout=paired_heldout,
                       step_rewards=step_rewards, group=group,
                       engine=cast(Any, engine), max_in_flight=max_in_flight,  # pydantic checks these
                       max_record_mib=DEFAULT_MAX_RECORD_BYTES / 2**20 if max_record_mib is None else max_record_mib)
    _check_model_endpoint(config)
    fail_on_errors(execute(config, store, backend=backend, address=address, as_json=as_json), config.run_id,
                   tolerate=tolerate_errors)


_PAIR_FIXED = ("agents", "seeds", "run_id", "difficulty", "knob", "base_seed", "max_steps", "policy", "model_url",
               "model_name", "model_key_env", "step_rewards", "max_record_mib")


def _pair_command(ctx: typer.Context, family: str, run_id: str, count: int, store: str, concurrency: int, backend: str,
                  address: Optional[str], tolerate_errors: bool = False, as_json: bool = False) -> None:
    """`gymsmith eval FAMILY --pair RUN`: add `count` held-out tasks to training run RUN, with its agents, seeds,
    knobs, limits and policy (read from the stored run config), under the same run id."""
    sources = {n: ctx.get_parameter_source(n) for n in _PAIR_FIXED}  # typer vendors click: compare enum names
    given = [f"--{n.replace('_', '-')}" for n, src in sources.items() if src is not None and src.name == "COMMANDLINE"]
    if given:
        raise ValueError(f"--pair {run_id} takes agents, seeds, knobs, limits and policy from that run; "
                         f"drop {', '.join(given)}")
    s = open_store(store, create=False)
    stored = s.run_config(run_id)
    if stored is None:
        known = ", ".join(r.run_id for r in s.runs() if r.purpose == "train")[-400:] or "none"
        raise GymsmithError(f"--pair {run_id!r}: no such run in {store}; training runs there: {known}")
    try:
        config = RunConfig.model_validate(stored)
    except ValidationError as exc:
        raise GymsmithError(f"--pair {run_id!r}: its stored config is not a run config this gymsmith reads "
                            f"({exc.error_count()} errors); make a new paired run with gymsmith run --with-heldout") from None
    if config.purpose != "train":
        raise GymsmithError(f"--pair {run_id!r} is an {config.purpose} run; pair a training run (purpose train), "
                            "whose rollouts are all train tasks")
    if config.taskset.family != family:
        raise GymsmithError(f"--pair {run_id!r} ran family {config.taskset.family!r}, not {family!r}: "
                            f"use gymsmith eval {config.taskset.family} --pair {run_id}")
    config = config.model_copy(update={"paired_heldout": count, "concurrency": concurrency})
    _check_model_endpoint(config)
    store_ = execute(config, store, backend=backend, address=address, tasks=build_taskset(cast(TaskSetSpec, config.heldout_taskset())),
                     as_json=as_json)
    try:
        fail_on_errors(store_, run_id, tolerate=tolerate_errors)
    finally:
        store_.close()


_AGENTS = typer.Option("oracle,greedy,random,null", help="Comma-separated agent names ('model' needs --model-url).")
_MODEL_URL = typer.Option(None, help="OpenAI-compatible endpoint for the agent 'model', e.g. http://127.0.0.1:8000/v1.")
_MODEL_NAME = typer.Option(None, help="Model name the endpoint serves.")
_MODEL_KEY = typer.Option("OPENAI_API_KEY", help="Environment variable holding the API key ('' for none).")
_BACKEND = typer.Option("local", help="local (worker processes on this machine) or ray.")
_TOLERATE = typer.Option(False, "--tolerate-errors", help="Exit 0 even when rollouts ended in an infrastructure error "
                         "(by default the run exits 1, naming how many and the first reason).")
_ADDRESS = typer.Option(None, help="Ray cluster address; without it a local Ray instance is started.")
_SUMMARY_JSON = typer.Option(False, "--json", help="Print the run's summary as JSON (progress stays on stderr).")


_SEEDS = typer.Option(1, help="Episode seeds per task and agent.")
_RUN_ID = typer.Option(None, help="Reuse an id to resume a run.")
_STORE = typer.Option(DEFAULT_STORE, help="SQLite path or database URL.")
_DIFFICULTY = typer.Option("0:1", help="VALUE or LOW:HIGH.")
_KNOB = typer.Option([], help="NAME=VALUE or NAME=LOW:HIGH, repeatable.")
_CONCURRENCY = typer.Option(2, help="Rollouts at once (worker processes, or Ray actors).")
_MAX_STEPS = typer.Option(300, help="Step limit per rollout.")
_SESSION_TIME_LIMIT = typer.Option(None, help="Seconds an episode may last (none by default: the client's model sets "
                                   "the pace); the call that passes it ends the episode, verified.")
_POLICY = typer.Option(DEFAULT_POLICY, help="shaped | sparse | shaped_gated")
_ALLOW_HELDOUT = typer.Option(False, help="Serve held-out tasks too (evaluation); by default they are refused: held-out "
                              "tasks never train.")
_HELDOUT_FRACTION = typer.Option(DEFAULT_HELDOUT_FRACTION, min=0.0, max=0.99, help="The split's held-out fraction.")
_RETRY_FIXED = ("count", "agents", "seeds", "run_id", "difficulty", "knob", "base_seed", "max_steps", "policy",
                "model_name", "with_heldout", "step_rewards", "group", "max_record_mib")


def _retry_command(ctx: typer.Context, family: Optional[str], run_id: str, store: str, concurrency: int, backend: str,
                   address: Optional[str], model_url: Optional[str], model_key_env: str, tolerate_errors: bool) -> None:
    """`gymsmith run --retry-errors RUN`: run again, with RUN's stored config, each of its rollouts stored as an
    infrastructure error; each new result replaces its error row and nothing else stored changes. Only where and
    how to run may change: --concurrency, --backend, --address, and the endpoint's --model-url and --model-key-env
    (a server that moved)."""
    given = [f"--{n.replace('_', '-')}" for n in _RETRY_FIXED + ("model_url", "model_key_env")
             if (src := ctx.get_parameter_source(n)) is not None and src.name == "COMMANDLINE"]
    fixed = [g for g in given if g not in ("--model-url", "--model-key-env")]
    if fixed:
        raise ValueError(f"--retry-errors {run_id}: the run's tasks, agents, seeds and limits are its own; drop "
                         f"{', '.join(fixed)}")
    s = open_store(store, create=False)
    stored = s.run_config(run_id)
    if stored is None:
        latest = ", ".join(r.run_id for r in s.runs()[-5:]) or "none"
        raise GymsmithError(f"--retry-errors {run_id!r}: no such run in {store}; latest runs: {latest}")
    try:
        config = RunConfig.model_validate(stored)
    except ValidationError as exc:
        raise GymsmithError(f"--retry-errors {run_id!r}: its stored config is not one this gymsmith reads "
                            f"({exc.error_count()} errors)") from None
    if family is not None and family != config.taskset.family:
        raise GymsmithError(f"--retry-errors {run_id!r} ran family {config.taskset.family!r}, not {family!r}")
    rows = s.rollout_rows([run_id])
    errors = [r for r in rows if r["status"] == RolloutStatus.ERROR]
    if not errors:
        console.print(f"run {run_id}: no rollout is stored as an infrastructure error; nothing to retry")
        return
    first_of = {r["task_id"]: r["rollout_id"] for r in reversed(errors)}
    tasks = [s.task_of(first_of[t]) for t in dict.fromkeys(r["task_id"] for r in errors)]
    update: dict[str, Any] = {"retry_errors": True, "concurrency": concurrency}
    if config.purpose == "train":  # held-out tasks paired later (eval --pair) belong to the run as well
        update["paired_heldout"] = max(config.paired_heldout, len({r["task_id"] for r in rows if r["split"] == "heldout"}))
    if config.model is not None and ("--model-url" in given or "--model-key-env" in given):
        moved: dict[str, str | None] = {"base_url": _model_url(model_url)} if "--model-url" in given and model_url else {}
        if "--model-key-env" in given:
            moved["api_key_env"] = model_key_env or None
        update["model"] = config.model.model_copy(update=moved)
    config = config.model_copy(update=update)
    _check_model_endpoint(config)
    console.print(f"run {run_id}: running again {len(errors)} rollout(s) stored as infrastructure errors")
    store_ = execute(config, store, backend=backend, address=address, tasks=tasks)
    try:
        fail_on_errors(store_, run_id, tolerate=tolerate_errors)
    finally:
        store_.close()


_RUNS = typer.Option([], help="Run id, repeatable; all if omitted.")
_JSON = typer.Option(False, "--json", help="Print the result as JSON instead of a table.")


def _reading(store: str, run_ids: list[str], flag: str = "--run") -> TrajectoryStore:
    """The store a read-only command reads: it must exist, and hold every run named."""
    opened = open_store(store, create=False)
    require_runs(opened, run_ids, flag=flag, location=store)
    return opened


_GROUP = typer.Option(None, min=1, max=1024, help="Sample N rollouts per task and agent as a group (GRPO; pass@k "
                      "in eval): distinct episode seeds, one group id stored for all N; --seeds then counts groups.")
_ENGINE = typer.Option("auto", help="async: model-bound rollouts as coroutines in one process, up to --max-in-flight "
                       "at once (runner.async_engine); pool: one rollout per worker process (--concurrency); auto: "
                       "async when an agent is 'model'.")
_MAX_IN_FLIGHT = typer.Option(None, min=1, max=100_000, help="The async engine's rollouts at once; default sized to "
                              "this machine (ops: as many as a quarter of the free memory holds, and three quarters if "
                              "each reached --max-record-mib, at most 4096; code: "
                              "32 per core; web: 2 per core).")
_MAX_RECORD_MIB = typer.Option(None, min=0.001, max=1 << 20, help="What one rollout's record may hold in memory, "
                               "in MiB (observations, actions, model turns); a rollout past it is the agent's failure, "
                               "reward 0. Default 16; the async engine's in-flight default leaves room for every "
                               "rollout to reach it.")
_STEP_REWARDS = typer.Option(False, "--step-rewards", help="Store each step's progress and step reward, valued by the "
                             "verifier (one verification per step that changes the state; docs/trainers.md).")


@app.command()
@_guard
def run(ctx: typer.Context, family: Optional[str] = typer.Argument(None, help="The task family, e.g. ops (not needed "
                                                        "with --retry-errors)."),
        count: int = typer.Option(20, help="Tasks in the task set."), agents: str = _AGENTS,
        seeds: int = _SEEDS, run_id: Optional[str] = _RUN_ID, store: str = _STORE, difficulty: str = _DIFFICULTY,
        knob: list[str] = _KNOB, base_seed: int = 0, concurrency: int = _CONCURRENCY, max_steps: int = _MAX_STEPS,
        policy: str = _POLICY, model_url: Optional[str] = _MODEL_URL, model_name: Optional[str] = _MODEL_NAME,
        model_key_env: str = _MODEL_KEY, backend: str = _BACKEND, address: Optional[str] = _ADDRESS,
        with_heldout: int = typer.Option(0, min=0, help="Also evaluate on this many held-out tasks of the same task "
                                         "set, in the same run id (for `gymsmith audit divergence`)."),
        group: Optional[int] = _GROUP,
        retry_errors: Optional[str] = typer.Option(None, "--retry-errors", metavar="RUN_ID", help="Run again the "
                                                   "rollouts of RUN_ID stored as infrastructure errors (its own "
                                                   "config; each result replaces its error row)."),
        step_rewards: bool = _STEP_REWARDS, tolerate_errors: bool = _TOLERATE, as_json: bool = _SUMMARY_JSON,
        engine: str = _ENGINE, max_in_flight: Optional[int] = _MAX_IN_FLIGHT,
        max_record_mib: Optional[float] = _MAX_RECORD_MIB) -> None:
    """Run agents on train-split tasks (held-out tasks only through `eval`, or evaluated alongside with --with-heldout).
    Exits 1 when any rollout ended in an infrastructure error, unless --tolerate-errors; --retry-errors RUN_ID runs
    those again. With the agent 'model', the endpoint is asked first (exit 2 when it is down or lacks the model)."""
    if retry_errors is not None:
        return _retry_command(ctx, family, retry_errors, store, concurrency, backend, address, model_url, model_key_env,
                              tolerate_errors)
    if family is None:
        raise ValueError("missing FAMILY: expected e.g. `gymsmith run ops` (or `gymsmith run --retry-errors RUN_ID`)")
    _run_command("train", family, count, agents, seeds, run_id, store, difficulty, knob, base_seed, concurrency, max_steps,
                 policy, model_url, model_name, model_key_env, backend, address, paired_heldout=with_heldout, group=group,
                 step_rewards=step_rewards, tolerate_errors=tolerate_errors, as_json=as_json,
                 engine=engine, max_in_flight=max_in_flight, max_record_mib=max_record_mib)



@app.command("eval")
@_guard
def eval_(ctx: typer.Context, family: str, count: int = typer.Option(20, help="Held-out tasks to evaluate on."),
          agents: str = _AGENTS,
          seeds: int = _SEEDS, run_id: Optional[str] = _RUN_ID, store: str = _STORE, difficulty: str = _DIFFICULTY,
          knob: list[str] = _KNOB, base_seed: int = 0, concurrency: int = _CONCURRENCY, max_steps: int = _MAX_STEPS,
          policy: str = _POLICY, model_url: Optional[str] = _MODEL_URL, model_name: Optional[str] = _MODEL_NAME,
          model_key_env: str = _MODEL_KEY, backend: str = _BACKEND, address: Optional[str] = _ADDRESS,
          pair: Optional[str] = typer.Option(None, help="A training run id: add the held-out tasks to it, with its "
                                             "agents and config (for `gymsmith audit divergence`)."),
          step_rewards: bool = _STEP_REWARDS, tolerate_errors: bool = _TOLERATE, as_json: bool = _SUMMARY_JSON,
          engine: str = _ENGINE, max_in_flight: Optional[int] = _MAX_IN_FLIGHT, group: Optional[int] = _GROUP,
          max_record_mib: Optional[float] = _MAX_RECORD_MIB) -> None:
    """Evaluate agents on held-out tasks only (with --pair, inside an existing training run). Exits 1 when any
    rollout ended in an infrastructure error, unless --tolerate-errors."""
    if pair is not None:
        return _pair_command(ctx, family, pair, count, store, concurrency, backend, address, tolerate_errors, as_json)
    _run_command("eval", family, count, agents, seeds, run_id, store, difficulty, knob, base_seed, concurrency, max_steps,
                 policy, model_url, model_name, model_key_env, backend, address, step_rewards=step_rewards,
                 tolerate_errors=tolerate_errors, as_json=as_json, group=group,
                 engine=engine, max_in_flight=max_in_flight, max_record_mib=max_record_mib)


def _check_progress(family: str, line: str) -> None:
    """One progress line of `gymsmith check` for `family`, on stderr."""
    err.print(f"check {family}: {line}", markup=False, highlight=False, soft_wrap=True)


@app.command()
@_guard
def check(families: list[str] = typer.Argument(..., help="Families to check, e.g. ops."),
          size: int = typer.Option(40, help="Tasks per family (all splits, difficulty 0-1)."),
          store: str = _STORE, base_seed: int = 0, concurrency: int = _CONCURRENCY,
          as_json: bool = typer.Option(False, "--json", help="Print the outcomes as JSON."),
          tolerate_errors: bool = typer.Option(False, "--tolerate-errors", help="Report rollouts that ended in an "
                                               "infrastructure error as a warning, not a failed check."),
          source: Optional[str] = typer.Option(None, "--source", help="code only: check tasks from this registered "
                                               "repository (NAME or NAME==VERSION; `gymsmith repos list`).")) -> None:
    """The environments' own regression suite; exits 1 if any check fails (a rollout ending in an infrastructure
    error fails one, naming the count and the first reason). Results are kept in the store.
    Progress (per family and per task) goes to stderr."""
    from gymsmith.audit.check import check_family, to_json

    s = open_store(store, create=True)
    for f in families:
        get_family(f)  # an unknown family is refused before any other runs
    outcomes = [o for f in families for o in check_family(
        f, store=s, size=size, base_seed=base_seed, concurrency=concurrency, tolerate_errors=tolerate_errors,
        knobs={"source": source} if source else None,
        progress=functools.partial(_check_progress, f))]
    if as_json:
        sys.stdout.write(to_json(outcomes) + "\n")
    else:
        table = Table("family", "check", "result", "detail", title="gymsmith check")
        for o in outcomes:
            result = {"pass": "[green]PASS[/]", "warn": "[yellow]WARN[/]", "fail": "[red]FAIL[/]"}[o.status.value]
            table.add_row(o.family, o.name, result, o.detail)
        console.print(table)
    failed = [o for o in outcomes if o.status.value == "fail"]
    warned = [o for o in outcomes if o.status.value == "warn"]
    (err if as_json else console).print(f"{len(outcomes) - len(failed) - len(warned)} passed, {len(failed)} failed"
                                        + (f", {len(warned)} warnings" if warned else ""))  # stdout: JSON only
    if failed:
        raise typer.Exit(1)


@app.command("replay")
@_guard
def replay_(rollout_id: str, store: str = _STORE,
            as_json: bool = typer.Option(False, "--json", help="Print the replay report as JSON (exit codes unchanged).")) -> None:
    """Re-execute a stored rollout in a fresh environment; diff observations and final state (exit 1 on a difference)."""
    from gymsmith.audit.replay import replay

    report = replay(open_store(store, create=False), rollout_id)
    if as_json:
        emit_json(report)
        if not report.identical:
            raise typer.Exit(1)
        return
    if report.identical:
        console.print(f"[green]identical[/]: {report.steps_compared} steps and the final state "
                      f"({report.final_state_replayed}) replay exactly")
        return
    console.print(f"[red]differs[/] after replaying {rollout_id}: {report.first_difference}")
    raise typer.Exit(1)


@audit_app.command("diversity")
@_guard
def audit_diversity(store: str = _STORE, run: list[str] = _RUNS, as_json: bool = _JSON,
                    by_kind: bool = typer.Option(False, "--by-kind", help="Across the tasks of each goal kind: "
                                                 "distinct paths, final states per task and page structures met.")
                    ) -> None:
    """Distinct tool-call paths and final states per task, path entropy, and a warning on collapse (--by-kind:
    across each goal kind's tasks)."""
    from gymsmith.audit.diversity import diversity, diversity_by_kind

    if by_kind:
        rows = diversity_by_kind(_reading(store, run), run or None)
        if as_json:
            return emit_json(rows)
        table = Table("family", id_column("agent"), "kind", "tasks", "rollouts", "distinct paths",
                      "final states/task", "page structures", title="trajectory diversity by goal kind")
        for k in rows:
            table.add_row(k.family, k.agent, k.kind, str(k.tasks), str(k.rollouts), str(k.distinct_paths),
                          "-" if k.mean_distinct_final_states is None else f"{k.mean_distinct_final_states:.2f}",
                          "-" if k.distinct_page_structures is None else str(k.distinct_page_structures))
        print_table(console, table)
        return
    results = diversity(_reading(store, run), run or None)
    if as_json:
        return emit_json(results)
    table = Table("family", id_column("agent"), "tasks", "rollouts", "paths/task", "final states/task", "entropy (bits)",
                  "collapsed", "warning", title="trajectory diversity")
    for r in results:
        table.add_row(r.family, r.agent, str(r.tasks), str(r.rollouts), f"{r.mean_distinct_paths:.2f}",
                      f"{r.mean_distinct_final_states:.2f}", f"{r.mean_path_entropy_bits:.2f}", str(r.collapsed_tasks),
                      r.warning or "")
    print_table(console, table)


@audit_app.command("divergence")
@_guard
def audit_divergence(store: str = _STORE, run: list[str] = _RUNS,
                     by: str = typer.Option("run", help="Period: run, day or n:SIZE (every SIZE rollouts)."),
                     threshold: float = typer.Option(0.10, help="Gap (train minus held-out reward) that raises the alarm."),
                     family: Optional[str] = typer.Option(None, help="Only this family (default: each family on its own)."),
                     agent: Optional[str] = typer.Option(None, help="Only this agent (default: each agent on its own)."),
                     include_checks: bool = typer.Option(False, help="Also read the runs `gymsmith check` made "
                                                         "(left out unless named with --run)."),
                     plot: Optional[Path] = typer.Option(None, help="Write an SVG plot here (one per family and agent: "
                                                         "NAME-FAMILY-AGENT.svg when there are several)."),
                     as_json: bool = typer.Option(False, "--json", help="Print the reports as JSON.")) -> None:
    """Train vs held-out reward per period for each (family, agent), the gap with a bootstrap 95% interval, and a
    status: ok, alarm, one_period (one gap, no trend yet) or insufficient (nothing measured).
    Exit 1 on an alarm, else 3 if any group measured nothing, else 0."""
    from rich.markup import escape

    from gymsmith.audit.divergence import divergence_groups, exit_code, select_rows, write_plot

    rows, skipped = select_rows(_reading(store, run), run or None, include_checks=include_checks)
    reports = divergence_groups(rows, by=by, threshold=threshold, family=family, agent=agent)
    if as_json:
        sys.stdout.write(json.dumps({"reports": [r.model_dump(mode="json") for r in reports],
                                     "left_out_check_runs": skipped}, indent=2) + "\n")
        raise typer.Exit(exit_code(reports))
    fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    colour = {"ok": "green", "alarm": "red", "one_period": "yellow", "insufficient": "yellow"}
    for rep in reports:
        table = Table("period", "train n", "held-out n", "train reward", "held-out reward", "gap", "95% CI",
                      title=f"divergence: {rep.group} (by {rep.by})")
        for p in rep.periods:
            ci = "—" if p.gap_low is None else f"{p.gap_low:+.3f}..{p.gap_high:+.3f}"
            table.add_row(p.label, str(p.train_n), str(p.heldout_n), fmt(p.train_reward), fmt(p.heldout_reward),
                          "—" if p.gap is None else f"{p.gap:+.3f}", ci)
        if rep.periods:
            console.print(table)
        status = rep.status.value
        console.print(f"[{colour[status]}]{status}[/]{escape(rep.line()[len(status):])}", soft_wrap=True)
        if rep.measured:
            console.print(f"  {rep.reason}", soft_wrap=True)
        if rep.drift_warning:
            console.print(f"  [yellow]warning[/]: {rep.drift_warning}", soft_wrap=True)
        if plot:
            where = plot if len(reports) == 1 else plot.with_name(
                f"{plot.stem}-{rep.family}-{rep.agent}{plot.suffix or '.svg'}".replace(":", "_").replace("/", "_"))
            console.print(f"  plot: {write_plot(rep, where)}", soft_wrap=True)
    if skipped:
        console.print(f"left out {len(skipped)} run(s) made by gymsmith check (--include-checks to read them)")
    raise typer.Exit(exit_code(reports))


@audit_app.command("hacking")
@_guard
def audit_hacking(store: str = _STORE, run: list[str] = _RUNS,
                  top: float = typer.Option(0.2, help="Share of rollouts, by reward, to examine."),
                  limit: int = typer.Option(20, help="Flags to show."), as_json: bool = _JSON) -> None:
    """Rank the top of the reward distribution by the tells of reward hacking, with the reason for each flag."""
    from gymsmith.audit.hacking import hacking_audit

    flags = hacking_audit(_reading(store, run), run or None, top_share=top)
    if as_json:
        return emit_json(flags[:limit])
    table = Table("score", id_column("rollout"), id_column("agent"), "reward", "reasons",
                  title=f"reward-hacking audit: {len(flags)} flagged")
    for f in flags[:limit]:
        table.add_row(f"{f.score:.1f}", f.rollout_id, f.agent + (" (privileged)" if f.privileged else ""), f"{f.reward:.2f}",
                      "; ".join(f.reasons))
    print_table(console, table)
    if flags:
        console.print(f"inspect one with: gymsmith replay {flags[0].rollout_id} --store {store}")


@audit_app.command("reward")
@_guard
def audit_reward(store: str = _STORE, run: list[str] = _RUNS,
                 ladder: Optional[str] = typer.Option(None, "--ladder", metavar="FAMILY", help="Run the reward ladder "
                                                      "of FAMILY instead: partial oracles, null, trivial, random and every "
                                                      "red-team agent on --count tasks; exit 1 when it fails."),
                 count: int = typer.Option(30, min=1, help="Tasks for --ladder."),
                 seed: int = typer.Option(0, help="Base seed of the --ladder tasks."),
                 concurrency: int = typer.Option(2, min=1, max=64, help="Parallel rollouts for --ladder."),
                 policy: str = _POLICY,
                 markdown: bool = typer.Option(False, "--markdown", help="Print the --ladder tables as Markdown."),
                 as_json: bool = typer.Option(False, "--json", help="Print the report (or the --ladder report) as JSON.")) -> None:
    """How well the shaped reward predicts hidden acceptance, per family; warns on high shaping without acceptance.
    With --ladder FAMILY: does the reward rise with real progress, and pay nothing for none (docs/reward.md)?"""
    from gymsmith.audit.reward import reward_validation

    if ladder is not None:
        _ladder(ladder, open_store(store, create=True), count=count, seed=seed, concurrency=concurrency, policy=policy,
                markdown=markdown, as_json=as_json)
        return

    validations = reward_validation(_reading(store, run), run or None)
    if as_json:
        return emit_json(validations)
    for v in validations:
        table = Table("shaped reward", "rollouts", "acceptance",
                      title=f"{v.family}: {v.rollouts} rollouts, Spearman "
                            f"{'—' if v.spearman is None else f'{v.spearman:.3f}'}")
        for b in v.buckets:
            table.add_row(f"{b.low:.1f}-{b.high:.1f}", str(b.rollouts), "—" if b.acceptance is None else f"{b.acceptance:.0%}")
        console.print(table)
        if v.warning:
            console.print(f"[yellow]warning[/] ({v.family}): {v.warning}")



def _ladder(family: str, store: TrajectoryStore, *, count: int, seed: int, concurrency: int, policy: str,
            markdown: bool, as_json: bool) -> None:
    from gymsmith.audit.ladder import ladder_agents, run_ladder, to_markdown
    from gymsmith.verifier.policies import get_policy

    get_policy(policy)
    agents = ladder_agents(family)
    if not as_json:
        console.print(f"reward ladder of {family}: {len(agents)} agents on {count} tasks ({len(agents) * count} rollouts) ...")
    report = run_ladder(family, store, count=count, base_seed=seed, concurrency=concurrency, policy=policy, agents=agents)
    if as_json:
        print(report.model_dump_json(indent=2))
    elif markdown:
        print(to_markdown(report))
    else:
        f = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
        table = Table("rung", "sub-goals done", "mean reward", "accepted",
                      title=f"{family} reward ladder: {report.tasks} tasks, Spearman {f(report.spearman)}, strictly "
                            f"increasing on {report.strictly_increasing}/{report.tasks}")
        for r in report.rungs:
            table.add_row(f"oracle@{r.level}", f"{r.done:.2f}", f(r.mean_reward), f"{r.accepted}/{r.rollouts}")
        print_table(console, table)
        others = Table(id_column("agent"), "mean reward", "max reward", "accepted", "tasks above null", title="agents doing no "
                       "real work (null, trivial, red team) and references (random, greedy)")
        for a in report.agents:
            others.add_row(a.agent, f(a.mean_reward), f(a.max_reward), f"{a.accepted}/{a.rollouts}", str(a.above_null))
        print_table(console, others)
        for line in report.failures:
            console.print(f"[red]FAIL[/] {line}")
        for line in report.examples[:3]:
            console.print(f"  e.g. {line}")
        console.print(f"{'PASS' if report.passed else 'FAIL'}; rollouts in run {report.run_id}")
    if not report.passed:
        raise typer.Exit(1)

@app.command()
@_guard
def serve(host: str = typer.Option("127.0.0.1", help="Address to bind; beyond loopback a token is required."),
          port: int = 8700, token_env: str = typer.Option("GYMSMITH_TOKEN", help="Environment variable with the bearer token."),
          max_sessions: int = 16, idle_timeout: float = typer.Option(600.0, help="Seconds before an idle session is closed."),
          policy: str = _POLICY, store: Optional[str] = typer.Option(None, help="Store in which task ids are looked up."),
          family: list[str] = typer.Option([], help="Family to serve, repeatable; default: every registered one."),
          max_steps: int = _MAX_STEPS, time_limit: Optional[float] = _SESSION_TIME_LIMIT,
          allow_heldout: bool = _ALLOW_HELDOUT, heldout_fraction: float = _HELDOUT_FRACTION) -> None:
    """Serve environments as sessions over HTTP and WebSocket (the verifier stays here)."""
    import os

    import uvicorn

    from gymsmith.server.app import UVICORN_LIMITS, ServerSettings, create_app

    _positive(max_steps=max_steps, time_limit=time_limit)
    if store:
        open_store(store, create=False)  # a mistyped --store is refused here, not made an empty store
    settings = ServerSettings(host=host, port=port, token=os.environ.get(token_env) or None, max_sessions=max_sessions,
                              idle_timeout_s=idle_timeout, policy=policy, store=store, families=family or None,
                              max_steps=max_steps, time_limit_s=time_limit, allow_heldout=allow_heldout,
                              heldout_fraction=heldout_fraction)
    uvicorn.run(create_app(settings), host=host, port=port, log_level="warning", **UVICORN_LIMITS)


@app.command("mcp")
@_guard
def mcp_(family: str, task: Optional[str] = typer.Option(None, help="A task id (looked up in --store), or a TaskSpec JSON file or text."),
         seed: Optional[int] = typer.Option(None, help="Generate the family's task for this seed instead."),
         difficulty: Optional[float] = None, knob: list[str] = _KNOB, episode_seed: int = 0, policy: str = _POLICY,
         store: str = _STORE, max_steps: int = _MAX_STEPS, time_limit: Optional[float] = _SESSION_TIME_LIMIT,
         allow_heldout: bool = _ALLOW_HELDOUT, heldout_fraction: float = _HELDOUT_FRACTION) -> None:
    """Expose one task's tools over MCP on stdio; the call that ends the episode (submit, a limit) reports the reward."""
    import anyio

    from gymsmith.mcp_server import resolve_task, serve_stdio

    if task is None and seed is None:
        raise ValueError("give --task FILE or --seed N")
    try:
        chosen = resolve_task(family, task=task, seed=seed, knobs=_knobs(knob, None if difficulty is None else str(difficulty)),
                              store=store)
    except StoreError as exc:  # a task id looked up in a store that is missing (a mistyped --store) or broken
        raise StoreError(f"--store {store}: {exc}") from None
    _positive(max_steps=max_steps, time_limit=time_limit)
    if not allow_heldout and split_of(chosen.id, heldout_fraction=heldout_fraction) is not Split.TRAIN:
        raise SplitPolicyError(f"task {chosen.id} is in the held-out split (held-out fraction {heldout_fraction:g}), "
                               "which never trains; pass --allow-heldout to serve it for evaluation")
    anyio.run(lambda: serve_stdio(chosen, episode_seed=episode_seed, policy=policy, max_steps=max_steps,
                                  time_limit_s=time_limit or math.inf))


@app.command()
@_guard
def report(runs: list[str] = typer.Argument(..., help="Run ids."), store: str = _STORE,
           out: Path = typer.Option(Path("runs/report.html"), help="Output HTML file."),
           max_trajectories: int = typer.Option(200, help="Trajectory sections to include (flagged ones first).")) -> None:
    """One self-contained HTML report: tables, reward distributions, divergence, diversity, flags, trajectories."""
    from gymsmith.report.full import write_report

    console.print(f"report: {write_report(_reading(store, runs, 'RUNS'), runs, out, max_trajectories=max_trajectories)}")


@app.command()
@_guard
def view(store: str = _STORE, port: int = 8701) -> None:
    """Browse the store (runs, summaries, trajectories) at http://127.0.0.1:PORT (loopback only)."""
    import uvicorn

    from gymsmith.report.viewer import create_viewer

    console.print(f"serving {store} at http://127.0.0.1:{port}")
    uvicorn.run(create_viewer(open_store(store, create=False)), host="127.0.0.1", port=port, log_level="warning")


@runs_app.command("list")
@_guard
def runs_list(store: str = DEFAULT_STORE, as_json: bool = _JSON) -> None:
    """Runs in the store."""
    runs = open_store(store, create=False).runs()
    if as_json:
        return emit_json(runs)
    table = Table(id_column("run id"), "purpose", "created", "rollouts", "errors", "version")
    for r in runs:
        table.add_row(r.run_id, r.purpose, time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at)),
                      str(r.rollouts), str(r.errors), r.package_version)
    print_table(console, table)


@runs_app.command("show")
@_guard
def runs_show(run_id: str, store: str = DEFAULT_STORE, by_difficulty: bool = True, as_json: bool = _JSON) -> None:
    """Summary of one run: mean reward and acceptance by split, agent and difficulty bin."""
    rows = summarize(_reading(store, [run_id], "RUN_ID").rollout_rows([run_id]), by_bin=by_difficulty)
    if as_json:
        return emit_json(rows)
    print_summary(rows, f"run {run_id}")


@app.command()
@_guard
def export(parquet: Optional[Path] = typer.Option(None, help="Output Parquet file (--format rollouts)."),
           store: str = DEFAULT_STORE, run: list[str] = typer.Option([], help="Run id, repeatable; all runs if omitted."),
           fmt: str = typer.Option("rollouts", "--format", help="rollouts: one row per rollout, to --parquet; trainer: "
                                   "token ids, logprobs and loss mask of model rollouts (docs/trainers.md), to --out."),
           out: Optional[Path] = typer.Option(None, help="Output file of --format trainer: NAME.parquet or NAME.jsonl."),
           gamma: Optional[float] = typer.Option(None, help="--format trainer: the trainer's discount per step (0 < "
                                                 "gamma <= 1; 1.0 if it does not discount), required for runs with "
                                                 "step rewards: they become gamma V(s') - V(s) (docs/trainers.md).")
           ) -> None:
    """Export stored rollouts (steps, with their progress and step rewards, and reward components nested) to Parquet;
    with --format trainer, the model rollouts as token sequences for a GRPO/PPO trainer."""
    if fmt == "trainer":
        return _export_trainer(store, run, out or parquet, gamma)
    if gamma is not None:
        raise ValueError("--gamma is for --format trainer (the rollouts format keeps the stored step rewards)")
    if fmt != "rollouts":
        raise ValueError(f"--format {fmt!r}: expected rollouts or trainer")
    if parquet is None or out is not None:
        raise ValueError("--format rollouts writes to --parquet PATH (--out is for --format trainer)")
    from gymsmith.store import export_parquet  # pyarrow only when exporting

    n = export_parquet(_reading(store, run), parquet, run_ids=run or None)
    console.print(f"wrote {n} rollouts to {parquet}")


def _export_trainer(store: str, run_ids: list[str], out: Optional[Path], gamma: Optional[float]) -> None:
    from gymsmith.store.trainer import export_trainer  # pyarrow only when exporting

    if out is None:
        raise ValueError("--format trainer: expected --out NAME.parquet or NAME.jsonl")
    done = export_trainer(_reading(store, run_ids), out, run_ids=run_ids or None, gamma=gamma)
    console.print(f"wrote {done.rows} rows ({done.rollouts} rollouts) to {out}; left out {done.left_out_errors} "
                  f"infrastructure errors and {done.left_out_without_tokens} rollouts without token ids")


@sandbox_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@_guard
def sandbox_exec(ctx: typer.Context,
                 workspace: Optional[Path] = typer.Option(None, help="Directory mounted read-write at /workspace "
                                                          "(default: a new empty one, removed afterwards)."),
                 allow: list[str] = typer.Option([], help="HOST:PORT reachable through the egress proxy; repeatable."),
                 backend: str = typer.Option("bwrap", help="bwrap, or local (NO isolation)."),
                 memory: int = typer.Option(1024, help="Memory limit in MiB."), pids: int = typer.Option(256, help="Process limit."),
                 cpu: int = typer.Option(120, help="CPU seconds per process."), timeout: float = typer.Option(60.0, help="Wall clock, seconds."),
                 file_size: int = typer.Option(64, help="Largest file in MiB."), tmp: int = typer.Option(64, help="/tmp size in MiB."),
                 quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the limits and the result line."),
                 as_json: bool = typer.Option(False, "--json", help="Print one JSON object (limits, exit code, output, "
                                              "refused egress) on stdout instead of CMD's output and the table.")) -> None:
    """Run CMD in a sandbox: `gymsmith sandbox exec [OPTIONS] -- CMD...`. Prints which limits hold and how; exits with CMD's code."""
    import shutil
    import tempfile

    from gymsmith.sandbox import Limits, open_sandbox

    cmd = list(ctx.args)
    if not cmd:
        raise ValueError("no command given: use `gymsmith sandbox exec [OPTIONS] -- CMD...`")
    made = workspace is None
    where = Path(tempfile.mkdtemp(prefix="gymsmith-sandbox-")) if workspace is None else workspace
    if not where.is_dir():
        raise ValueError(f"--workspace {where} is not a directory")
    limits = Limits(memory_mb=memory, pids=pids, cpu_s=cpu, timeout_s=timeout, file_size_mb=file_size, tmp_mb=tmp)
    try:
        with open_sandbox(where, backend=backend, limits=limits, allow=allow) as sb:
            if as_json:
                result = sb.exec(cmd, timeout=timeout)
                proxy = getattr(sb, "proxy", None)  # the bwrap backend's egress proxy
                emit_json({"backend": sb.backend, "limits": sb.enforced(), "exit_code": result.exit_code,
                           "killed": result.killed.value if result.killed else None, "duration_s": result.duration_s,
                           "unsafe": result.unsafe, "stdout": result.stdout, "stderr": result.stderr,
                           "stdout_truncated": result.stdout_truncated, "stderr_truncated": result.stderr_truncated,
                           "egress_refused": [e.target for e in (proxy.refused() if proxy else [])]})
                raise typer.Exit(result.exit_code)
            if not quiet:
                table = Table("limit", "enforced by", title=f"sandbox ({sb.backend})")
                for name, how in sb.enforced().items():
                    table.add_row(name, f"[red]{how}[/]" if ("NOT" in how or "UNSAFE" in how) else how)
                err.print(table)
            result = sb.exec(cmd, timeout=timeout)
            sys.stdout.write(result.stdout)
            sys.stderr.write(result.stderr)
            if not quiet:
                killed = f", killed by the {result.killed.value} limit" if result.killed else ""
                err.print(f"exit code {result.exit_code}{killed}, {result.duration_s:.3f} s"
                          + ("  [red]UNSAFE: no isolation[/]" if result.unsafe else ""))
                proxy = getattr(sb, "proxy", None)  # the bwrap backend's egress proxy
                refused = proxy.refused() if proxy else []
                for event in refused:
                    err.print(f"egress refused: {event.target}")
    finally:
        if made:
            shutil.rmtree(where, ignore_errors=True)
    raise typer.Exit(result.exit_code)


@app.command()
@_guard
def demo(store: str = DEFAULT_STORE, train_tasks: int = 200, heldout_tasks: int = 50,
         out: Path = typer.Option(Path("runs/demo-summary.html"), help="HTML summary path.")) -> None:
    """ops and code end to end: train and held-out tasks across difficulties, scripted and red-team agents, checked claims."""
    from gymsmith.demo import run_demo

    if not run_demo(store=store, train_tasks=train_tasks, heldout_tasks=heldout_tasks, html_path=out, execute=execute,
                    print_summary=print_summary, console=console):
        raise typer.Exit(1)


if __name__ == "__main__":  # pragma: no cover
    app()
