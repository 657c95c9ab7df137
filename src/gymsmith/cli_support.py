"""What every `gymsmith` command shares, so that none surprises (docs: README, "The command line"):

- a user error is one line on stderr naming the flag and what was expected, exit code 2, no traceback
  (`OneLineErrors` for what click refuses, `error_line` for what gymsmith refuses);
- read-only commands refuse a store that does not exist (`open_store`), and unknown run ids (`require_runs`);
- tables never cut ids (`id_column`, `print_table`) and `--json` writes JSON and nothing else to stdout (`emit_json`);
- a run is refused before anything is stored or shown when its flags are bad (`preflight`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segments
from rich.table import Column, Table
from rich.text import Text
from typer.core import TyperGroup

from gymsmith.core.errors import GymsmithError, KnobError, StoreError
from gymsmith.store import TrajectoryStore

USER_ERROR = 2  # exit code of every user error, as click uses for its own

# pydantic field names that are not spelled like their flag ("--" + the name with dashes otherwise)
_FLAGS = {"paired_heldout": "--with-heldout", "knobs": "--knob", "base_url": "--model-url", "model": "--model-name",
          "api_key_env": "--model-key-env", "idle_timeout_s": "--idle-timeout", "token": "--token-env"}
_BOUNDS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"), "less_than_equal": ("le", "<="),
           "less_than": ("lt", "<")}

_err = Console(stderr=True, soft_wrap=True)  # soft wrap: a long message stays one line when piped


def one_line(message: str) -> str:
    """`message` on a single line (an exception's text may span several)."""
    return " ".join(str(message).split())


def print_error(message: str) -> None:
    """Print `error: MESSAGE` as one line on stderr."""
    _err.print(Text.assemble(("error:", "bold red"), " ", one_line(message)))


def fail(message: str) -> NoReturn:
    """Print `message` as a user error and exit with code 2."""
    print_error(message)
    raise typer.Exit(USER_ERROR)


def error_line(exc: BaseException) -> str:
    """The one line a user sees for `exc`: a ValidationError names the flag of each bad field and its bound."""
    if isinstance(exc, ValidationError):
        return "; ".join(_validation_part(e) for e in exc.errors(include_url=False))
    return one_line(str(exc))


def _validation_part(e: Mapping[str, Any]) -> str:
    field = str(e["loc"][-1]) if e["loc"] else "value"
    flag = _FLAGS.get(field, "--" + field.replace("_", "-"))
    bound = _BOUNDS.get(e["type"])
    if bound and bound[0] in e.get("ctx", {}):
        expected = f"expected a number {bound[1]} {e['ctx'][bound[0]]}"
    elif e["type"] == "string_pattern_mismatch":
        expected = f"expected text matching {e['ctx']['pattern']}"
    else:
        expected = e["msg"].removeprefix("Value error, ").replace("Input should be", "expected")
    shown = e.get("input")
    return f"{flag} {shown!r}: {expected}" if isinstance(shown, (str, int, float)) else f"{flag}: {expected}"


class OneLineErrors(TyperGroup):
    """The command group: what click refuses (an unknown option, a value of the wrong type, a missing argument)
    is printed as one line, exit 2, instead of a usage block and a framed panel."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D102
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as e:  # typer's own copy of click's exceptions derives from it
            if type(e).__name__ == "NoArgsIsHelpError":  # `gymsmith` alone, or a group alone: typer showed the help
                sys.exit(e.exit_code)
            where = f" (see {e.ctx.command_path} --help)" if getattr(e, "ctx", None) else ""
            print_error(e.format_message() + where)
            sys.exit(e.exit_code)
        except typer.Abort:
            print_error("aborted")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)  # an Exit(code) comes back as its code; a command returns None


# -- stores and runs ------------------------------------------------------------------------------------------------

def open_store(location: str, *, create: bool) -> TrajectoryStore:
    """Open the store at `location` (the `--store` flag). With `create=False` (a command that only reads) a
    SQLite file that does not exist is refused instead of made empty: a mistyped path must not look like an empty
    store. Raises StoreError naming --store for that, and for a file that is not a database."""
    try:
        return TrajectoryStore(location, create=create)
    except StoreError as exc:
        raise StoreError(f"--store {location}: {one_line(str(exc))}") from None


def require_runs(store: TrajectoryStore, run_ids: list[str], *, flag: str = "--run", location: str = "") -> None:
    """Raise StoreError naming the first of `run_ids` that `store` does not hold, the latest runs it does hold and
    how to list them all."""
    for run_id in run_ids:
        if not store.run_exists(run_id):
            latest = ", ".join(r.run_id for r in store.runs()[-5:]) or "none"
            where = location or store.location
            raise StoreError(f"no run {run_id!r} in {where} ({flag}); latest runs: {latest}; list them all with "
                             f"gymsmith runs list --store {where}")


# -- output ---------------------------------------------------------------------------------------------------------

def emit_json(value: Any) -> None:
    """Write `value` (pydantic models and lists of them included) to stdout as one JSON document, and nothing else."""
    def plain(v: Any) -> Any:
        if isinstance(v, BaseModel):
            return v.model_dump(mode="json")
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    sys.stdout.write(json.dumps(plain(value), indent=2, default=str) + "\n")


def id_column(header: str) -> Column:
    """A table column holding ids: never wrapped, never cut (see `print_table`)."""
    return Column(header, no_wrap=True)


def print_table(console: Console, table: Table) -> None:
    """Print `table` at least as wide as its ids (`id_column`s) and title need, even when the terminal or a pipe
    (80 columns) is narrower: an id cut or folded cannot be copied. Other columns still wrap to fit."""
    title = len(str(table.title)) if table.title else 0
    table.min_width = max(table.min_width or 0, title)
    need = Measurement.get(console, console.options.update_width(1_000_000), table).minimum
    options = console.options.update_width(max(console.width, need))  # console.print(width=) cannot exceed it
    console.print(Segments(console.render(table, options)), crop=False)


# -- runs -----------------------------------------------------------------------------------------------------------

def preflight(config) -> None:
    """Refuse a run (a `gymsmith.runner.RunConfig`) with an unknown family, agent or knob, a knob value out of its
    range or a split it may not use, before a store is opened or anything is shown. Raises GymsmithError or
    ValueError (the runner raises the same ones later, for callers of the Python API)."""
    from gymsmith.registry import get_family
    from gymsmith.runner.local import agent_factories, check_split_policy

    check_split_policy(config)
    family = get_family(config.taskset.family)
    try:
        agent_factories(config, family)
    except ValueError as exc:
        raise GymsmithError(f"--agents: {one_line(str(exc))}") from None
    declared = {k.name: k for k in family.knobs}
    for name, value in config.taskset.knobs.items():
        flag = "--difficulty" if name == "difficulty" else f"--knob {name}"
        if name not in declared:
            raise KnobError(f"{flag}: unknown knob {name!r}; {family.name!r} declares {sorted(declared)}")
        for v in value if isinstance(value, (list, tuple)) else [value]:
            try:
                declared[name].validate_value(v)
            except KnobError as exc:
                raise KnobError(f"{flag}: {exc}") from None
