"""`gymsmith view`: the store as browsable pages — runs, a run's summary, and each trajectory."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from gymsmith.core.errors import StoreError
from gymsmith.report.full import STYLE, _e, _Raw, _table, _trajectory_section
from gymsmith.runner.local import summarize
from gymsmith.store.sql import TrajectoryStore


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{_e(title)}</title>'
                        f'<style>{STYLE}</style></head><body><p><a href="/">all runs</a></p>{body}</body></html>')


def create_viewer(store: TrajectoryStore) -> FastAPI:
    app = FastAPI(title="gymsmith viewer")

    @app.get("/", response_class=HTMLResponse)
    def runs() -> HTMLResponse:
        rows = [[f'<a href="/runs/{_e(r.run_id)}">{_e(r.run_id)}</a>', r.purpose, r.rollouts, r.errors] for r in store.runs()]
        return _page("runs", "<h1>Runs</h1>" + _table(["run", "purpose", "rollouts", "errors"],
                                                      [[_Raw(c[0]), *c[1:]] for c in rows]))

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run(run_id: str) -> HTMLResponse:
        rows = store.rollout_rows([run_id])
        if not rows:
            raise HTTPException(404, f"no run {run_id!r}")
        summary = _table(["split", "agent", "difficulty", "rollouts", "mean reward", "acceptance"],
                         [[r.split, r.agent, r.difficulty_bin, r.rollouts,
                           "—" if r.mean_reward is None else f"{r.mean_reward:.3f}",
                           "—" if r.acceptance is None else f"{r.acceptance:.1%}"] for r in summarize(rows)])
        listing = _table(["rollout", "agent", "task", "reward", "status"],
                         [[_Raw(f'<a href="/rollouts/{_e(r["rollout_id"])}">{_e(r["rollout_id"])}</a>'), r["agent"],
                           r["task_id"], "—" if r["reward"] is None else f"{r['reward']:.3f}", r["status"]] for r in rows])
        return _page(run_id, f"<h1>Run {_e(run_id)}</h1>{summary}<h2>Rollouts</h2>{listing}")

    @app.get("/rollouts/{rollout_id}", response_class=HTMLResponse)
    def rollout(rollout_id: str) -> HTMLResponse:
        try:
            t = store.trajectory(rollout_id)
        except StoreError as exc:
            raise HTTPException(404, str(exc)) from None
        return _page(rollout_id, f'<p><a href="/runs/{_e(t.run_id)}">run {_e(t.run_id)}</a></p>{_trajectory_section(t)}')

    return app


