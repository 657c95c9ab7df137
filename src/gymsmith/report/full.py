"""`gymsmith report RUN...`: one self-contained HTML file (no scripts, no external assets).

Summary tables, reward distributions by split, agent and difficulty (inline SVG), train vs held-out
divergence, trajectory diversity, reward-hacking flags, and a section per trajectory with every step.
"""

from __future__ import annotations

import html
import time
from collections import defaultdict
from pathlib import Path

from gymsmith.audit.divergence import Status, divergence_groups, plot_svg
from gymsmith.audit.diversity import diversity
from gymsmith.audit.hacking import hacking_audit, is_privileged
from gymsmith.core.types import Trajectory
from gymsmith.runner.local import summarize
from gymsmith.store.sql import TrajectoryStore

STYLE = """body{font:14px system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}th{background:#f3f3f3}
pre{white-space:pre-wrap;margin:0;font-size:12px}section{margin:1.5em 0}.err{color:#b00}.ok{color:#070}.warn{color:#a60}
nav a{margin-right:1em}"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _table(headers: list[str], rows: list[list[object]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if isinstance(c, _Raw) else _e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class _Raw(str):
    """Already-escaped HTML for a table cell."""


def histogram_svg(values: list[float], title: str, bins: int = 10) -> str:
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int(v * bins))] += 1
    w, h, pad = 260, 120, 20
    top = max(counts) or 1
    bw = (w - 2 * pad) / bins
    bars = "".join(f'<rect x="{pad + i * bw:.1f}" y="{h - pad - c / top * (h - 2 * pad):.1f}" width="{bw - 2:.1f}" '
                   f'height="{c / top * (h - 2 * pad):.1f}" fill="#4a7bd0"><title>{i / bins:.1f}-{(i + 1) / bins:.1f}: {c}</title></rect>'
                   for i, c in enumerate(counts))
    return (f'<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
            f'aria-label="{_e(title)}"><text x="{pad}" y="12" font-size="11">{_e(title)} (n={len(values)})</text>'
            f'{bars}<text x="{pad}" y="{h - 5}" font-size="9">0</text><text x="{w - pad}" y="{h - 5}" font-size="9">1</text></svg>')


def _trajectory_section(t: Trajectory) -> str:
    comps = ""
    if t.reward:
        comps = _table(["component", "value", "weight", "detail"],
                       [[n, f"{c.value:.3f}", c.weight, c.detail] for n, c in t.reward.components.items()])
    steps = _table(["#", "tool call", "observation"],
                   [[s.index, _Raw(f"<pre>{_e(s.action.tool)} {_e(s.action.arguments_text())}</pre>"),
                     _Raw(f'<pre class="{"err" if s.observation.error else ""}">{_e(s.observation.text[:1500])}</pre>')]
                    for s in t.steps])
    reward = "error: " + _e(t.error) if t.reward is None else f"reward {t.reward.value:.3f}, accepted {t.reward.accepted}"
    return (f'<section id="rollout-{_e(t.rollout_id)}" class="trajectory"><h3>{_e(t.agent)} on {_e(t.task_id)} '
            f'(seed {t.seed}, {t.split.value}, difficulty {t.difficulty:.2f})</h3><p>{reward}; status {t.status.value}; '
            f'{len(t.steps)} steps</p><details><summary>start observation</summary><pre>{_e(t.reset_observation.text[:3000])}'
            f'</pre></details>{comps}{steps}</section>')


_STATUS_CLASS = {Status.OK: "ok", Status.ALARM: "err", Status.ONE_PERIOD: "warn", Status.INSUFFICIENT: "warn"}
_STATUS_TEXT = {Status.OK: "ok", Status.ALARM: "ALARM", Status.ONE_PERIOD: "one period only (a gap, no trend yet)",
                Status.INSUFFICIENT: "not enough data"}


def _divergence_section(rows: list[dict]) -> str:
    """Train vs held-out by run, for each (family, agent) on its own: a table of every group's periods, then per
    group its status (never shown as ok unless it is) and its plot."""
    reports = divergence_groups(rows, by="run")
    fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    table = _table(["family", "agent", "period", "train n", "held-out n", "train reward", "held-out reward", "gap", "95% CI"],
                   [[d.family, d.agent, p.label, p.train_n, p.heldout_n, fmt(p.train_reward), fmt(p.heldout_reward),
                     "—" if p.gap is None else f"{p.gap:+.3f}", "—" if p.gap_low is None else f"{p.gap_low:+.3f}..{p.gap_high:+.3f}"]
                    for d in reports for p in d.periods], "divergence")
    groups = "".join(
        f'<div class="divergence-group" data-status="{d.status.value}"><h3>{_e(d.group)}</h3>'
        f'<p class="{_STATUS_CLASS[d.status]}"><b>{_e(_STATUS_TEXT[d.status])}</b>: {_e(d.reason)}</p>'
        + (f'<p class="err">{_e(d.drift_warning)}</p>' if d.drift_warning else "") + plot_svg(d) + "</div>"
        for d in reports)
    return ('<section id="divergence"><h2>Train vs held-out</h2><p>The gap is train minus held-out mean reward, by run, '
            'for one family and one agent at a time, with a bootstrap 95% interval. A run holds both splits when made '
            'with <code>gymsmith run FAMILY --with-heldout N</code> or <code>gymsmith eval FAMILY --pair RUN</code>.</p>'
            + table + groups + "</section>")


def write_report(store: TrajectoryStore, run_ids: list[str], path: str | Path, *, max_trajectories: int = 200) -> Path:
    """Write the report for `run_ids` to `path`; returns it. Trajectory sections are capped at
    `max_trajectories` (the first of each run, then by order), and the report says how many it left out."""
    rows = store.rollout_rows(run_ids)
    if not rows:
        raise ValueError(f"no rollouts stored for runs {run_ids}")
    parts = [f"<h1>gymsmith report</h1><p>Runs: {_e(', '.join(run_ids))}. {len(rows)} rollouts. "
             f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')}.</p>",
             '<nav><a href="#summary">summary</a><a href="#distributions">distributions</a><a href="#divergence">divergence</a>'
             '<a href="#diversity">diversity</a><a href="#flags">audit flags</a><a href="#trajectories">trajectories</a></nav>']
    summary = summarize(rows, by_bin=True)
    parts.append('<section id="summary"><h2>Summary</h2>' + _table(
        ["split", "agent", "difficulty", "rollouts", "errors", "mean reward", "acceptance"],
        [[r.split, r.agent, r.difficulty_bin, r.rollouts, r.errors, "—" if r.mean_reward is None else f"{r.mean_reward:.3f}",
          "—" if r.acceptance is None else f"{r.acceptance:.1%}"] for r in summary], "summary") + "</section>")
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["reward"] is not None:
            groups[f"{r['split']} · {r['agent']}"].append(r["reward"])
    parts.append('<section id="distributions"><h2>Reward distributions</h2>' +
                 "".join(histogram_svg(v, k) for k, v in sorted(groups.items())) + "</section>")
    parts.append(_divergence_section(rows))
    dv = diversity(store, run_ids)
    parts.append('<section id="diversity"><h2>Trajectory diversity</h2>' + _table(
        ["family", "agent", "tasks", "paths/task", "final states/task", "entropy (bits)", "warning"],
        [[d.family, d.agent, d.tasks, f"{d.mean_distinct_paths:.2f}", f"{d.mean_distinct_final_states:.2f}",
          f"{d.mean_path_entropy_bits:.2f}", d.warning or ""] for d in dv]) + "</section>")
    flags = hacking_audit(store, run_ids, exclude_privileged=True)
    privileged = sorted({r["agent"] for r in rows if is_privileged(r["agent"], r["family"])})
    note = ("Privileged agents are left out of this ranking: they know the answer by construction (the oracle "
            "rebuilds the witness from the seed, as the verifier does), so they show the tells without hacking. "
            + (f"Left out here: {', '.join(privileged)}." if privileged else "None ran in these runs."))
    parts.append('<section id="flags"><h2>Reward-hacking flags</h2>' + f'<p class="privileged-note">{_e(note)}</p>' + _table(
        ["score", "rollout", "agent", "reward", "reasons"],
        [[f"{f.score:.1f}", _Raw(f'<a href="#rollout-{_e(f.rollout_id)}">{_e(f.rollout_id)}</a>'), f.agent,
          f"{f.reward:.2f}", "; ".join(f.reasons)] for f in flags[:50]], "flags") + "</section>")
    flagged = {f.rollout_id for f in flags[:50]}
    chosen = [r for r in rows if r["rollout_id"] in flagged]
    chosen += [r for r in rows if r["rollout_id"] not in flagged][: max(0, max_trajectories - len(chosen))]
    sections = "".join(_trajectory_section(store.trajectory(r["rollout_id"])) for r in chosen)
    left = len(rows) - len(chosen)
    parts.append(f'<section id="trajectories"><h2>Trajectories</h2><p>{len(chosen)} shown'
                 + (f", {left} left out (raise --max-trajectories, or use gymsmith view)" if left else "") + f"</p>{sections}</section>")
    page = f'<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>gymsmith report</title><style>{STYLE}</style></head><body>{"".join(parts)}</body></html>'
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
