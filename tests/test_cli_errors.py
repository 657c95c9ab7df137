"""The command line never surprises (issue 19, item 6): every user error is one line on stderr naming the flag and
what was expected, exit code 2, no traceback, and nothing stored changes; unknown run ids and missing stores are
errors; tables never cut ids; `--json` on every command that prints a table gives pure JSON on stdout; long
commands show progress; a broken plug-in family is reported and skipped.

Most cases run the real command in this process through typer's CliRunner (a subprocess per case would cost
seconds of imports each); those that depend on a fresh process (entry-point discovery, a pipe, a real traceback)
run `python -m gymsmith.cli`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gymsmith
from gymsmith.cli import app
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore

from conftest import write_distribution

SRC = str(Path(gymsmith.__file__).parents[1])  # a subprocess runs the code under test, wherever it was imported from
LONG_RUN_ID = "a-run-id-long-enough-to-be-cut-by-an-80-column-table-" + "x" * 40


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A store holding two tiny ops runs: `r1` (null agent, 1 task) and a run with a 93-character id."""
    path = tmp_path_factory.mktemp("store") / "s.db"
    store = TrajectoryStore(path)
    for run_id in ("r1", LONG_RUN_ID):
        run(RunConfig(run_id=run_id, taskset=TaskSetSpec(family="ops", count=1), agents=["null"], concurrency=1),
            store, collect=False)
    store.close()
    return path


@pytest.fixture
def db(stored, tmp_path) -> Path:
    """A private copy of the stored runs, so each test can show it left the file as it was."""
    copy = tmp_path / "s.db"
    shutil.copy(stored, copy)
    return copy


def snapshot(path: Path) -> tuple[str, dict[str, int]]:
    """The file's bytes (hashed) and the row count of each table."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    conn.close()
    return digest, counts


def env(*paths: Path, **more: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join([*map(str, paths), SRC]), **more}


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def assert_user_error(result, *needles: str) -> str:
    """Exit 2, exactly one line on stderr, containing every needle; no traceback; nothing on stdout."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output and "validation error" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


# -- bad values of a flag -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, needles", [
    (["--count", "0"], ["--count", "0", ">= 1"]),
    (["--count", "-3"], ["--count", "-3", ">= 1"]),
    (["--seeds", "0"], ["--seeds", ">= 1"]),
    (["--seeds", "5000"], ["--seeds", "<= 1000"]),
    (["--concurrency", "0"], ["--concurrency", ">= 1"]),
    (["--concurrency", "65"], ["--concurrency", "<= 64"]),
    (["--max-steps", "0"], ["--max-steps", ">= 1"]),
    (["--policy", "generous"], ["--policy", "generous", "shaped"]),
    (["--run-id", "has space"], ["--run-id", "has space"]),
    (["--count", "abc"], ["--count", "integer"]),
    (["--seeds", "x"], ["--seeds", "integer"]),
    (["--difficulty", "2"], ["--difficulty", "2"]),
    (["--knob", "speed=3"], ["--knob", "speed"]),
    (["--agents", "genius"], ["--agents", "genius", "oracle"]),
    (["--backend", "foo"], ["--backend", "foo"]),
])
def test_a_bad_run_flag_is_one_line_naming_it_and_changes_nothing(db, args, needles):
    before = snapshot(db)
    line = assert_user_error(cli("run", "ops", "--count", "1", "--agents", "null", *args, "--store", str(db)), *needles)
    for internal in ("TaskSetSpec", "RunConfig", "max_steps", "run_id", "errors.pydantic.dev"):
        assert internal not in line
    assert snapshot(db) == before


def test_a_bad_eval_flag_is_one_line_too(db):
    before = snapshot(db)
    assert_user_error(cli("eval", "ops", "--count", "0", "--store", str(db)), "--count", ">= 1")
    assert snapshot(db) == before


def test_a_bad_flag_on_a_new_store_creates_no_store(tmp_path):
    assert_user_error(cli("run", "ops", "--count", "1", "--difficulty", "7", "--store", str(tmp_path / "new.db")),
                      "--difficulty")
    assert not (tmp_path / "new.db").exists()


def test_a_usage_error_is_one_line():
    assert_user_error(cli("runs", "list", "--nope"), "--nope")
    assert_user_error(cli("tasks", "list", "ops", "--count", "many"), "--count", "integer")


# -- stores ---------------------------------------------------------------------------------------------------------

def test_a_file_that_is_not_a_database_is_one_line_in_a_real_process(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_text("these are my notes, not a database\n" * 50)
    before = bogus.read_bytes()
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "runs", "list", "--store", str(bogus)],
                         capture_output=True, text=True, timeout=120, env=env())
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "--store" in out.stderr and "not a database" in out.stderr and "Traceback" not in out.stderr
    assert bogus.read_bytes() == before


@pytest.mark.parametrize("args", [
    ["runs", "list"], ["runs", "show", "r1"], ["export", "--parquet", "{tmp}/x.parquet"], ["audit", "diversity"],
    ["audit", "divergence"], ["audit", "hacking"], ["audit", "reward"], ["replay", "nosuch"], ["report", "r1"],
    ["mcp", "ops", "--task", "ops-0123456789abcdef0123"], ["serve", "--port", "1"],
])
def test_a_read_only_command_refuses_a_missing_store_and_creates_none(tmp_path, args):
    missing = tmp_path / "typo.db"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert_user_error(cli(*args, "--store", str(missing)), "--store", str(missing), "runs/gymsmith.db")
    assert not missing.exists()


def test_a_command_that_writes_may_create_its_store(tmp_path):
    new = tmp_path / "sub" / "new.db"
    result = cli("run", "ops", "--count", "1", "--agents", "null", "--concurrency", "1", "--store", str(new))
    assert result.exit_code == 0, result.output
    assert new.exists()


# -- unknown run ids ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["export", "--parquet", "{tmp}/x.parquet", "--run", "nosuch"], ["audit", "diversity", "--run", "nosuch"],
    ["audit", "divergence", "--run", "nosuch"], ["audit", "hacking", "--run", "nosuch"],
    ["audit", "reward", "--run", "nosuch"], ["runs", "show", "nosuch"], ["report", "nosuch"],
    ["export", "--parquet", "{tmp}/x.parquet", "--run", "r1", "--run", "nosuch"],
])
def test_an_unknown_run_id_is_an_error_naming_how_to_list_runs(db, tmp_path, args):
    before = snapshot(db)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert_user_error(cli(*args, "--store", str(db)), "'nosuch'", "gymsmith runs list")
    assert snapshot(db) == before
    assert not (tmp_path / "x.parquet").exists()


# -- reusing a run id -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, what", [
    (["--agents", "oracle"], "agents"), (["--agents", "null", "--seeds", "2"], "seeds"),
    (["--agents", "null", "--count", "2"], "count"), (["--agents", "null", "--policy", "sparse"], "policy"),
    (["--agents", "null", "--difficulty", "0.5"], "knobs"),
])
def test_reusing_a_run_id_with_another_config_is_refused(db, args, what):
    before = snapshot(db)
    line = assert_user_error(cli("run", "ops", "--count", "1", "--run-id", "r1", *args, "--concurrency", "1",
                                 "--store", str(db)), "--run-id", "r1", what)
    assert "new --run-id" in line
    assert snapshot(db)[1] == before[1]


def test_resuming_a_run_id_with_the_same_config_is_fine(db):
    """Only what the rollouts depend on must match: another --concurrency resumes the run (nothing left to do)."""
    before = snapshot(db)
    result = cli("run", "ops", "--count", "1", "--agents", "null", "--run-id", "r1", "--concurrency", "2",
                 "--store", str(db))
    assert result.exit_code == 0, result.output
    assert snapshot(db)[1] == before[1]


# -- ids are never cut ----------------------------------------------------------------------------------------------

def test_ids_are_never_cut_when_piped_at_80_columns(stored, tmp_path):
    db = tmp_path / "s.db"
    shutil.copy(stored, db)
    listing = subprocess.run([sys.executable, "-m", "gymsmith.cli", "runs", "list", "--store", str(db)],
                             capture_output=True, text=True, timeout=120, env=env(COLUMNS="80"))
    assert listing.returncode == 0, listing.stderr
    assert LONG_RUN_ID in listing.stdout  # whole, on one line
    show = cli("runs", "show", LONG_RUN_ID, "--store", str(db))
    assert show.exit_code == 0 and LONG_RUN_ID in show.stdout, show.output
    tasks = json.loads(cli("tasks", "list", "ops", "--count", "3", "--json").stdout.splitlines()[0])
    table = cli("tasks", "list", "ops", "--count", "3")
    assert tasks["id"] in table.stdout, table.stdout


# -- --json ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["families"], ["runs", "list", "--store", "{db}"], ["runs", "show", "r1", "--store", "{db}"],
    ["audit", "diversity", "--store", "{db}"], ["audit", "divergence", "--store", "{db}"],
    ["audit", "hacking", "--store", "{db}"], ["audit", "reward", "--store", "{db}"],
    ["run", "ops", "--count", "1", "--agents", "null", "--run-id", "r1", "--concurrency", "1", "--store", "{db}"],
    ["eval", "ops", "--count", "1", "--agents", "null", "--concurrency", "1", "--store", "{db}"],
])
def test_every_command_that_prints_a_table_has_pure_json(db, args):
    result = cli(*[a.replace("{db}", str(db)) for a in args], "--json")
    assert result.exit_code in (0, 3), result.output  # divergence exits 3 when nothing could be measured
    json.loads(result.stdout)  # the whole of stdout, nothing after it


def test_replay_json_is_the_report_and_keeps_the_exit_code(db):
    rollout = TrajectoryStore(db).rollout_rows(["r1"])[0]["rollout_id"]
    result = cli("replay", rollout, "--store", str(db), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # the whole of stdout
    assert report["rollout_id"] == rollout and report["identical"] is True and report["steps_compared"] >= 1


def test_sandbox_exec_json_is_one_object_with_the_commands_output_and_code():
    """A real bubblewrap sandbox; the command's own output goes into the object, not around it."""
    result = cli("sandbox", "exec", "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert result.exit_code == 3, result.output
    done = json.loads(result.stdout)
    assert (done["exit_code"], done["stdout"], done["stderr"], done["backend"]) == (3, "out\n", "err\n", "bwrap")
    assert done["limits"] and done["killed"] is None and done["egress_refused"] == []


def test_tasks_list_json_is_one_object_per_line():
    result = cli("tasks", "list", "ops", "--count", "2", "--json")
    assert result.exit_code == 0
    assert [json.loads(line)["family"] for line in result.stdout.splitlines()] == ["ops", "ops"]


# -- gymsmith check: pure JSON and progress on stderr ---------------------------------------------------------------

def test_check_json_is_pure_and_progress_goes_to_stderr(plugin_path, tmp_path):
    """The test plug-in family (its agents submit at once) keeps this to seconds; ops, code and web run the same
    code path."""
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "check", "plugfam", "--size", "2", "--json",
                          "--concurrency", "1", "--store", str(tmp_path / "c.db")], capture_output=True, text=True,
                         timeout=300, env=env(plugin_path))
    outcomes = json.loads(out.stdout)  # stdout is JSON and nothing else
    assert {o["family"] for o in outcomes} == {"plugfam"}
    progress = out.stderr.splitlines()
    assert any(line.startswith("check plugfam:") and "rollouts" in line for line in progress), out.stderr
    assert any("task " in line for line in progress), out.stderr  # per task
    assert any(line.startswith("check plugfam: done") for line in progress), out.stderr


# -- plug-ins -------------------------------------------------------------------------------------------------------

def test_a_broken_plugin_is_reported_in_one_line_and_skipped(plugin_path, tmp_path):
    (tmp_path / "brokenfam.py").write_text("raise RuntimeError('this plug-in is broken')\n")
    write_distribution(tmp_path, "brokenfam", {"broken": "brokenfam:Family"})
    with_broken = env(tmp_path, plugin_path)
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "families", "--json"], capture_output=True, text=True,
                         timeout=120, env=with_broken)
    assert out.returncode == 0, out.stderr
    assert {"ops", "code", "web", "plugfam"} <= {f["name"] for f in json.loads(out.stdout)}
    warnings = out.stderr.splitlines()
    assert len(warnings) == 1 and "broken" in warnings[0] and "this plug-in is broken" in warnings[0], out.stderr
    assert "Traceback" not in out.stderr
    sample = subprocess.run([sys.executable, "-m", "gymsmith.cli", "tasks", "sample", "ops", "--json"],
                            capture_output=True, text=True, timeout=120, env=with_broken)
    assert sample.returncode == 0 and json.loads(sample.stdout)["family"] == "ops", sample.stderr
    named = subprocess.run([sys.executable, "-m", "gymsmith.cli", "tasks", "sample", "broken"],
                           capture_output=True, text=True, timeout=120, env=with_broken)
    assert named.returncode == 2 and "unknown family 'broken'" in named.stderr and "failed to load" in named.stderr
