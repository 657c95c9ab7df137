"""Many writers at once into one store — SQLite (WAL) and a real PostgreSQL server — lose nothing."""

import multiprocessing as mp

import pytest

from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore, export_parquet

WRITERS, PER_WRITER = 8, 40


def _writer(location: str, template_json: str, task_json: str, writer: int, barrier) -> None:
    from gymsmith.core import TaskSpec, Trajectory

    store = TrajectoryStore(location)
    template, task = Trajectory.model_validate_json(template_json), TaskSpec.model_validate_json(task_json)
    barrier.wait()  # all writers start together
    for i in range(PER_WRITER):
        t = template.model_copy(update={"rollout_id": f"w{writer}-{i}", "seed": writer * 1000 + i})
        assert store.add(t, task)
    store.close()


def _template(tmp_path):
    src = TrajectoryStore(tmp_path / "template.db")
    [t] = run(RunConfig(run_id="conc", taskset=TaskSetSpec(family="ops", count=1), agents=["greedy"]), src)
    task = next(iter(src.rollout_rows()))["task"]
    return t, task


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_eight_concurrent_writers_lose_nothing(backend, tmp_path, request):
    location = str(tmp_path / "many.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    template, task_json = _template(tmp_path)
    store = TrajectoryStore(location)
    store.create_run("conc", purpose="train", config={})
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(location, template.model_dump_json(), task_json, w, barrier))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    rows = store.rollout_rows(["conc"])
    assert len(rows) == WRITERS * PER_WRITER
    assert len({r["rollout_id"] for r in rows}) == WRITERS * PER_WRITER
    back = store.trajectory("w7-39")
    assert len(back.steps) == len(template.steps) and back.reward == template.reward
    out = tmp_path / f"{backend}.parquet"
    assert export_parquet(store, out, run_ids=["conc"]) == WRITERS * PER_WRITER  # the server is the session's: its runs
