"""Train vs held-out divergence over time: the gap between train and held-out reward, with a bootstrap
confidence interval per period, and an alarm when it widens past a threshold (the policy is fitting the
training tasks rather than the skill).

A gap means something only between rollouts of one family by one agent: `divergence` measures one such
group (and refuses rows that mix families or agents), `divergence_groups` measures each (family, agent)
group on its own. Both splits come from one run when the run was made with `gymsmith run FAMILY
--with-heldout N` (or given its held-out sample later with `gymsmith eval FAMILY --pair RUN`).

Each report has a `Status`:

==============  =====================================================================  ==========
status          when                                                                   CLI exit
==============  =====================================================================  ==========
``alarm``       the latest gap is above the threshold with its whole 95% interval and     1
                wider than the first period's gap by the threshold
``ok``          two or more periods with both splits, and no alarm                        0
``one_period``  exactly one period with both splits: its gap is shown, a trend needs two  0
``insufficient`` no period with both splits (no rollouts, or one split only, or the        3
                splits never in the same period): nothing was measured
==============  =====================================================================  ==========
"""

from __future__ import annotations

import datetime as dt
import enum
import html
import math
import random
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, cast

from pydantic import BaseModel

DEFAULT_THRESHOLD = 0.10
BOOTSTRAP = 1000
AUDIT_PURPOSE = "audit"  # runs made by `gymsmith check` (RunConfig.purpose), left out unless asked for


class Status(str, enum.Enum):
    """What a divergence report could conclude (see the module docstring for the table)."""

    OK = "ok"
    ALARM = "alarm"
    ONE_PERIOD = "one_period"
    INSUFFICIENT = "insufficient"


class Period(BaseModel):
    label: str
    train_n: int
    heldout_n: int
    train_reward: float | None
    heldout_reward: float | None
    train_acceptance: float | None
    heldout_acceptance: float | None
    gap: float | None  # train minus held-out mean reward; None unless the period has both splits
    gap_low: float | None  # bootstrap 95% interval of the gap
    gap_high: float | None


class DivergenceReport(BaseModel):
    family: str | None = None  # the one family measured (None for rows that name none)
    agent: str | None = None  # the one agent measured
    by: str = "run"
    periods: list[Period]
    threshold: float
    status: Status
    alarm: bool  # status is ALARM
    reason: str
    drift_warning: str | None = None  # set when the rollouts ran on different fingerprints of the family

    @property
    def measured(self) -> list[Period]:
        """The periods with both splits (and so a gap)."""
        return [p for p in self.periods if p.gap is not None]

    @property
    def group(self) -> str:
        return f"{self.family or '?'} / {self.agent or '?'}"

    def line(self) -> str:
        """One line: the status, the group, the latest period with both splits (train and held-out means, the gap and
        its interval), and the status. Without such a period, the reason nothing was measured."""
        if not self.measured:
            return f"{self.status.value}: {self.group}: {self.reason}"
        p = self.measured[-1]
        return (f"{self.status.value}: {self.group}, {p.label}: train {p.train_reward:.3f} (n={p.train_n}), held-out "
                f"{p.heldout_reward:.3f} (n={p.heldout_n}), gap {p.gap:+.3f} (95% CI {p.gap_low:+.3f}..{p.gap_high:+.3f})")


class MixedRowsError(ValueError):
    """Rollouts of several families or agents were given to one divergence measurement."""


def _period_key(row: dict[str, Any], by: str, index: int) -> str:
    if by == "run":
        return row["run_id"]
    if by == "day":
        return dt.datetime.fromtimestamp(row["started_at"], dt.timezone.utc).strftime("%Y-%m-%d")
    if by.startswith("n:"):
        size = int(by[2:])
        return f"rollouts {index // size * size}-{index // size * size + size - 1}"
    raise ValueError(f"by={by!r}: expected 'run', 'day' or 'n:SIZE' (e.g. n:500)")


def _check_by(by: str) -> None:
    if by in ("run", "day"):
        return
    if by.startswith("n:") and by[2:].isdigit() and int(by[2:]) > 0:
        return
    raise ValueError(f"by={by!r}: expected 'run', 'day' or 'n:SIZE' (e.g. n:500)")


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _bootstrap_gap(train: list[float], held: list[float], rng: random.Random) -> tuple[float, float]:
    # both lists are non-empty (the caller checks), so each mean is a float
    gaps = sorted(cast(float, _mean(rng.choices(train, k=len(train)))) - cast(float, _mean(rng.choices(held, k=len(held))))
                  for _ in range(BOOTSTRAP))
    return gaps[int(0.025 * BOOTSTRAP)], gaps[int(0.975 * BOOTSTRAP) - 1]


def _drift(rows: list[dict[str, Any]]) -> str | None:
    """A warning when rollouts of the same family ran on different environment fingerprints (different
    families always have different ones, so they are never compared)."""
    by_family: dict[Any, set[str]] = defaultdict(set)
    for r in rows:
        if r.get("fingerprint"):
            by_family[r.get("family")].add(r["fingerprint"])
    notes = []
    for family, prints in sorted(by_family.items(), key=lambda kv: str(kv[0])):
        if len(prints) > 1:
            ps = sorted(prints)
            notes.append(f"{'these' if family is None else family} rollouts ran on {len(ps)} different environment "
                         f"fingerprints ({', '.join(ps[:4])})")
    return "; ".join(notes) + ": a gap may come from the environment changing, not the policy" if notes else None


def _distinct(rows: list[dict[str, Any]], key: str) -> list[str]:
    return sorted({r[key] for r in rows if r.get(key) is not None})


def divergence(rows: list[dict[str, Any]], *, by: str = "run", threshold: float = DEFAULT_THRESHOLD, seed: int = 0,
               family: str | None = None, agent: str | None = None) -> DivergenceReport:
    """Measure one (family, agent) group: its periods in time order (by the first rollout in each), the gap in
    each period that has both splits, and a `Status`. `family` and `agent` select rows; rows without those keys
    (synthetic ones) count as one group. Error rollouts are left out.

    The alarm sounds when the latest period's gap is above `threshold` with its whole 95% interval, and wider
    than the first period's gap by `threshold`; it needs two periods with both splits.
    Raises ValueError for a bad `by`, MixedRowsError (a ValueError) when the selected rows span several
    families or agents: use `divergence_groups`, or choose a family and an agent.
    """
    _check_by(by)
    rows = [r for r in rows if (family is None or r.get("family") == family) and (agent is None or r.get("agent") == agent)]
    families, agents = _distinct(rows, "family"), _distinct(rows, "agent")
    if len(families) > 1 or len(agents) > 1:
        mixed = [f"families {families}" if len(families) > 1 else "", f"agents {agents}" if len(agents) > 1 else ""]
        raise MixedRowsError(f"these rollouts mix {' and '.join(m for m in mixed if m)}: a train vs held-out gap "
                             "compares one family by one agent; choose a family and an agent (--family, --agent), "
                             "or measure each (family, agent) group on its own (divergence_groups)")
    family = family or (families[0] if families else None)
    agent = agent or (agents[0] if agents else None)
    scored = sorted((r for r in rows if r["reward"] is not None), key=lambda r: r["started_at"])
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, r in enumerate(scored):
        groups[_period_key(r, by, i)].append(r)
    rng = random.Random(seed)
    periods = []
    for label, rs in sorted(groups.items(), key=lambda kv: kv[1][0]["started_at"]):
        train = [r["reward"] for r in rs if r["split"] == "train"]
        held = [r["reward"] for r in rs if r["split"] == "heldout"]
        acc = lambda split: _mean([float(bool(r["accepted"])) for r in rs if r["split"] == split])  # noqa: E731
        low = high = gap = None
        if train and held:
            gap = cast(float, _mean(train)) - cast(float, _mean(held))
            low, high = _bootstrap_gap(train, held, rng)
        periods.append(Period(label=label, train_n=len(train), heldout_n=len(held), train_reward=_mean(train),
                              heldout_reward=_mean(held), train_acceptance=acc("train"), heldout_acceptance=acc("heldout"),
                              gap=gap, gap_low=low, gap_high=high))
    base: dict[str, Any] = dict(family=family, agent=agent, by=by, periods=periods, threshold=threshold, drift_warning=_drift(scored))
    measured = [p for p in periods if p.gap is not None]
    if not measured:
        return DivergenceReport(**base, status=Status.INSUFFICIENT, alarm=False,
                                reason=_why_insufficient(scored, by, family))
    if len(measured) == 1:
        p = measured[0]
        return DivergenceReport(**base, status=Status.ONE_PERIOD, alarm=False,
                                reason=f"one period with both splits: gap {p.gap:+.3f} (95% CI {p.gap_low:+.3f}.."
                                       f"{p.gap_high:+.3f}) in {p.label}; whether it widens (the alarm) needs at "
                                       "least two such periods")
    first, last = measured[0], measured[-1]
    # a measured period has a gap, and so its interval (both are set together)
    alarm = cast(float, last.gap_low) > threshold and cast(float, last.gap) - cast(float, first.gap) > threshold
    reason = (f"gap {last.gap:+.3f} (95% CI {last.gap_low:+.3f}..{last.gap_high:+.3f}) in {last.label}, "
              f"was {first.gap:+.3f} in {first.label}; threshold {threshold}")
    return DivergenceReport(**base, status=Status.ALARM if alarm else Status.OK, alarm=alarm, reason=reason)


def _why_insufficient(scored: list[dict[str, Any]], by: str, family: str | None) -> str:
    fam = family or "FAMILY"
    fix = f"run both in one run with `gymsmith run {fam} --with-heldout N` or `gymsmith eval {fam} --pair RUN`"
    if not scored:
        return "no scored rollouts: nothing to measure"
    splits = {r["split"] for r in scored}
    if splits == {"train"}:
        return f"only train rollouts ({len(scored)}), no held-out ones to compare with: {fix}"
    if splits == {"heldout"}:
        return f"only held-out rollouts ({len(scored)}), no train ones to compare with: {fix}"
    return (f"train and held-out rollouts never fall in the same period (by {by}), so no gap can be computed: "
            f"{fix}, or choose another --by")


def divergence_groups(rows: list[dict[str, Any]], *, by: str = "run", threshold: float = DEFAULT_THRESHOLD, seed: int = 0,
                      family: str | None = None, agent: str | None = None) -> list[DivergenceReport]:
    """One `divergence` report per (family, agent) group among `rows` (after selecting `family` and `agent`),
    sorted by family then agent. Without any matching row: one INSUFFICIENT report saying so.
    Raises ValueError for a bad `by`."""
    _check_by(by)
    chosen = [r for r in rows if (family is None or r.get("family") == family) and (agent is None or r.get("agent") == agent)]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in chosen:
        groups[(r.get("family") or "", r.get("agent") or "")].append(r)
    if not groups:
        wanted = " and ".join(x for x in (family and f"family {family!r}", agent and f"agent {agent!r}") if x)
        return [DivergenceReport(family=family, agent=agent, by=by, periods=[], threshold=threshold,
                                 status=Status.INSUFFICIENT, alarm=False,
                                 reason="no rollouts" + (f" of {wanted}" if wanted else "") + " in the selected runs")]
    return [divergence(rs, by=by, threshold=threshold, seed=seed) for _, rs in sorted(groups.items())]


def select_rows(store: Any, run_ids: Iterable[str] | None = None, *,
                include_checks: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """The rollout rows a divergence audit reads from `store` (a TrajectoryStore), and the run ids left out.

    Runs made by `gymsmith check` (purpose 'audit': the environment testing itself, on every split, with red-team
    agents) are left out unless `include_checks`, or unless they are named in `run_ids`."""
    named = list(run_ids) if run_ids else None
    rows = store.rollout_rows(named)
    if include_checks or named:
        return rows, []
    audits = {r.run_id for r in store.runs() if r.purpose == AUDIT_PURPOSE}
    return [r for r in rows if r["run_id"] not in audits], sorted(audits & {r["run_id"] for r in rows})


def exit_code(reports: list[DivergenceReport]) -> int:
    """1 if any report sounds the alarm; else 3 if any measured nothing (INSUFFICIENT); else 0."""
    if any(r.status is Status.ALARM for r in reports):
        return 1
    if any(r.status is Status.INSUFFICIENT for r in reports):
        return 3
    return 0


# -- the plot ------------------------------------------------------------------------------------------------
TRAIN_COLOUR, HELDOUT_COLOUR, GAP_COLOUR, CI_COLOUR, THRESHOLD_COLOUR = "#4a7bd0", "#d0704a", "#222", "#bbb", "#c0392b"


def _fmt_tick(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v else "0"


def plot_svg(report: DivergenceReport) -> str:
    """The report as an inline SVG (no scripts, no external assets).

    Top panel: train and held-out mean reward per period, y axis 0..1 with ticks. Bottom panel: the gap (train
    minus held-out) per period with its 95% interval (bars and a band), the alarm threshold as a dashed line and
    zero as a solid one. x axis: the period labels. A legend names each mark. When no period has both splits the
    gap panel says "not enough data" and why; with no scored rollout at all, the whole plot does."""
    e = html.escape
    w, left, right = 680, 64, 16
    title = f"{report.group}: train vs held-out reward, by {report.by} — {report.status.value.upper()}"
    ps = [p for p in report.periods if p.train_reward is not None or p.heldout_reward is not None]
    if not ps:
        lines = textwrap.wrap(report.reason, 100)[:4]
        h = 70 + 15 * len(lines)
        return (f'<svg class="divergence" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
                f'role="img" aria-label="{e(title)}"><rect width="{w}" height="{h}" fill="white" stroke="#ccc"/>'
                f'<text x="12" y="22" font-size="13" font-weight="bold">{e(title)}</text>'
                f'<text x="12" y="48" font-size="13" fill="{THRESHOLD_COLOUR}">not enough data</text>'
                + "".join(f'<text x="12" y="{68 + 15 * k}" font-size="11">{e(t)}</text>' for k, t in enumerate(lines)) + "</svg>")
    h = 470
    top, mid_h, gap_top, gap_h, axis_y = 56, 150, 262, 150, 430
    plot_w = w - left - right
    n = len(ps)
    x = lambda i: left + (i + 0.5) * plot_w / n  # noqa: E731
    y_r = lambda v: top + (1 - v) * mid_h  # noqa: E731
    bounds = [abs(v) for p in ps for v in (p.gap, p.gap_low, p.gap_high) if v is not None] + [report.threshold * 1.5, 0.2]
    span = min(1.0, math.ceil(max(bounds) * 5 - 1e-9) / 5)  # 0.2, 0.4, ... 1.0: ticks at round values
    y_g = lambda v: gap_top + (span - max(-span, min(span, v))) / (2 * span) * gap_h  # noqa: E731
    out = [f'<svg class="divergence" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'role="img" aria-label="{e(title)}"><rect width="{w}" height="{h}" fill="white" stroke="#ccc"/>',
           f'<text x="12" y="20" font-size="13" font-weight="bold">{e(title)}</text>']
    # legend
    lx: float = left
    for label, mark in (("train", f'<line x1="0" y1="0" x2="18" y2="0" stroke="{TRAIN_COLOUR}" stroke-width="2"/>'),
                        ("held-out", f'<line x1="0" y1="0" x2="18" y2="0" stroke="{HELDOUT_COLOUR}" stroke-width="2"/>'),
                        ("gap (train − held-out)", f'<line x1="0" y1="0" x2="18" y2="0" stroke="{GAP_COLOUR}" stroke-width="2"/>'),
                        ("gap 95% CI", f'<rect x="0" y="-5" width="18" height="10" fill="{CI_COLOUR}" opacity="0.6"/>'),
                        (f"alarm threshold {report.threshold:g}",
                         f'<line x1="0" y1="0" x2="18" y2="0" stroke="{THRESHOLD_COLOUR}" stroke-width="1.5" stroke-dasharray="5,3"/>')):
        out.append(f'<g class="legend" transform="translate({lx},38)">{mark}<text x="22" y="4" font-size="11">{e(label)}</text></g>')
        lx += 30 + 6.2 * len(label)
    # reward panel: y axis 0..1 with ticks
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + mid_h}" stroke="#333"/>')
    for v in (0, 0.25, 0.5, 0.75, 1):
        out.append(f'<line x1="{left - 4}" y1="{y_r(v):.1f}" x2="{w - right}" y2="{y_r(v):.1f}" stroke="{"#999" if v == 0 else "#eee"}"/>'
                   f'<text x="{left - 7}" y="{y_r(v) + 4:.1f}" font-size="10" text-anchor="end">{_fmt_tick(v)}</text>')
    out.append(f'<text transform="translate(16,{top + mid_h / 2:.0f}) rotate(-90)" font-size="11" text-anchor="middle">'
               'mean reward</text>')
    for attr, colour in (("train_reward", TRAIN_COLOUR), ("heldout_reward", HELDOUT_COLOUR)):
        pts = [(x(i), y_r(getattr(p, attr)), p) for i, p in enumerate(ps) if getattr(p, attr) is not None]
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b, _ in pts)}"/>')
        for a, b, p in pts:
            out.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3.5" fill="{colour}"><title>{e(p.label)}: {attr.split("_")[0]} '
                       f'{getattr(p, attr):.3f}</title></circle>')
    # gap panel: y axis -span..span with ticks, zero, threshold, CI band and bars
    out.append(f'<line x1="{left}" y1="{gap_top}" x2="{left}" y2="{gap_top + gap_h}" stroke="#333"/>')
    for v in (-span, -span / 2, 0, span / 2, span):
        out.append(f'<line x1="{left - 4}" y1="{y_g(v):.1f}" x2="{w - right}" y2="{y_g(v):.1f}" stroke="{"#777" if v == 0 else "#eee"}"/>'
                   f'<text x="{left - 7}" y="{y_g(v) + 4:.1f}" font-size="10" text-anchor="end">{"+" if v > 0 else ""}{_fmt_tick(v)}</text>')
    out.append(f'<text transform="translate(16,{gap_top + gap_h / 2:.0f}) rotate(-90)" font-size="11" text-anchor="middle">'
               'gap (train − held-out)</text>')
    out.append(f'<line class="threshold" x1="{left}" y1="{y_g(report.threshold):.1f}" x2="{w - right}" y2="{y_g(report.threshold):.1f}" '
               f'stroke="{THRESHOLD_COLOUR}" stroke-width="1.5" stroke-dasharray="5,3"><title>alarm threshold '
               f'{report.threshold:g}</title></line>')
    gaps = [(i, p) for i, p in enumerate(ps) if p.gap is not None]
    if gaps:
        if len(gaps) > 1:
            band = [f"{x(i):.1f},{y_g(p.gap_high):.1f}" for i, p in gaps] + [f"{x(i):.1f},{y_g(p.gap_low):.1f}" for i, p in reversed(gaps)]
            out.append(f'<polygon class="ci" points="{" ".join(band)}" fill="{CI_COLOUR}" opacity="0.35"/>')
        for i, p in gaps:
            out.append(f'<g class="ci-bar" stroke="#888" stroke-width="1.5"><line x1="{x(i):.1f}" y1="{y_g(p.gap_low):.1f}" '
                       f'x2="{x(i):.1f}" y2="{y_g(p.gap_high):.1f}"/><line x1="{x(i) - 5:.1f}" y1="{y_g(p.gap_low):.1f}" '
                       f'x2="{x(i) + 5:.1f}" y2="{y_g(p.gap_low):.1f}"/><line x1="{x(i) - 5:.1f}" y1="{y_g(p.gap_high):.1f}" '
                       f'x2="{x(i) + 5:.1f}" y2="{y_g(p.gap_high):.1f}"/></g>')
        out.append(f'<polyline fill="none" stroke="{GAP_COLOUR}" stroke-width="2" '
                   f'points="{" ".join(f"{x(i):.1f},{y_g(p.gap):.1f}" for i, p in gaps)}"/>')
        for i, p in gaps:
            out.append(f'<circle cx="{x(i):.1f}" cy="{y_g(p.gap):.1f}" r="3.5" fill="{GAP_COLOUR}"><title>{e(p.label)}: gap '
                       f'{p.gap:+.3f} (95% CI {p.gap_low:+.3f}..{p.gap_high:+.3f})</title></circle>')
    else:
        lines = textwrap.wrap(report.reason, 95)[:3]
        box_y = gap_top + gap_h / 2 - 12
        out.append(f'<rect x="{left + 6}" y="{box_y - 16:.0f}" width="{plot_w - 12}" height="{26 + 14 * len(lines)}" '
                   f'fill="white" stroke="#ddd"/><text x="{left + 12}" y="{box_y:.0f}" font-size="13" fill="{THRESHOLD_COLOUR}">'
                   'not enough data: no period has both train and held-out rollouts, so there is no gap</text>'
                   + "".join(f'<text x="{left + 12}" y="{box_y + 16 + 14 * k:.0f}" font-size="10">{e(t)}</text>'
                             for k, t in enumerate(lines)))
    # x axis: period labels (every k-th when crowded)
    out.append(f'<line x1="{left}" y1="{axis_y - 14}" x2="{w - right}" y2="{axis_y - 14}" stroke="#333"/>')
    step = max(1, math.ceil(n / 8))
    for i, p in enumerate(ps):
        out.append(f'<line x1="{x(i):.1f}" y1="{axis_y - 14}" x2="{x(i):.1f}" y2="{axis_y - 10}" stroke="#333"/>')
        if i % step == 0 or i == n - 1:
            text = p.label if len(p.label) <= 18 else "…" + p.label[-17:]
            out.append(f'<text x="{x(i):.1f}" y="{axis_y + 2}" font-size="10" text-anchor="middle">{e(text)}<title>{e(p.label)}</title></text>')
    out.append(f'<text x="{left + plot_w / 2:.0f}" y="{h - 14}" font-size="11" text-anchor="middle">period (by {e(report.by)})</text>')
    out.append("</svg>")
    return "".join(out)


def write_plot(report: DivergenceReport, path: str | Path) -> Path:
    """Write `plot_svg(report)` to `path` (parent folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(plot_svg(report), encoding="utf-8")
    return path
