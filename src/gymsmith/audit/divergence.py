"""Train vs held-out divergence over time: the gap between train and held-out reward, with a bootstrap
confidence interval per period, and an alarm when it widens past a threshold (the policy is fitting the
training tasks rather than the skill)."""

from __future__ import annotations

import datetime as dt
import html
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel

DEFAULT_THRESHOLD = 0.10
BOOTSTRAP = 1000


class Period(BaseModel):
    label: str
    train_n: int
    heldout_n: int
    train_reward: float | None
    heldout_reward: float | None
    train_acceptance: float | None
    heldout_acceptance: float | None
    gap: float | None
    gap_low: float | None
    gap_high: float | None


class DivergenceReport(BaseModel):
    periods: list[Period]
    threshold: float
    alarm: bool
    reason: str
    drift_warning: str | None = None  # set when the rollouts ran on different environment fingerprints


def _period_key(row: dict[str, Any], by: str, index: int) -> str:
    if by == "run":
        return row["run_id"]
    if by == "day":
        return dt.datetime.fromtimestamp(row["started_at"], dt.timezone.utc).strftime("%Y-%m-%d")
    if by.startswith("n:"):
        size = int(by[2:])
        return f"rollouts {index // size * size}-{index // size * size + size - 1}"
    raise ValueError(f"by={by!r}: expected 'run', 'day' or 'n:SIZE' (e.g. n:500)")


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _bootstrap_gap(train: list[float], held: list[float], rng: random.Random) -> tuple[float, float]:
    gaps = sorted(_mean(rng.choices(train, k=len(train))) - _mean(rng.choices(held, k=len(held)))
                  for _ in range(BOOTSTRAP))
    return gaps[int(0.025 * BOOTSTRAP)], gaps[int(0.975 * BOOTSTRAP) - 1]


def divergence(rows: list[dict[str, Any]], *, by: str = "run", threshold: float = DEFAULT_THRESHOLD,
               seed: int = 0) -> DivergenceReport:
    """Periods in time order (by the first rollout in each). The alarm sounds when the latest period's gap is
    above `threshold` with its whole 95% interval, and wider than the first period's gap by `threshold`.
    Error rollouts are left out. Raises ValueError for a bad `by`."""
    rows = sorted((r for r in rows if r["reward"] is not None), key=lambda r: r["started_at"])
    prints = sorted({r.get("fingerprint") for r in rows if r.get("fingerprint")})
    drift = (f"these rollouts ran on {len(prints)} different environment fingerprints ({', '.join(prints[:4])}): "
             "a gap may come from the environment changing, not the policy" if len(prints) > 1 else None)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[_period_key(r, by, i)].append(r)
    rng = random.Random(seed)
    periods = []
    for label, rs in sorted(groups.items(), key=lambda kv: kv[1][0]["started_at"]):
        train = [r["reward"] for r in rs if r["split"] == "train"]
        held = [r["reward"] for r in rs if r["split"] == "heldout"]
        acc = lambda split: _mean([float(bool(r["accepted"])) for r in rs if r["split"] == split])  # noqa: E731
        low = high = gap = None
        if train and held:
            gap = _mean(train) - _mean(held)
            low, high = _bootstrap_gap(train, held, rng)
        periods.append(Period(label=label, train_n=len(train), heldout_n=len(held), train_reward=_mean(train),
                              heldout_reward=_mean(held), train_acceptance=acc("train"), heldout_acceptance=acc("heldout"),
                              gap=gap, gap_low=low, gap_high=high))
    measured = [p for p in periods if p.gap is not None]
    if len(measured) < 2:
        return DivergenceReport(periods=periods, threshold=threshold, alarm=False, drift_warning=drift,
                                reason="need at least two periods with both train and held-out rollouts")
    first, last = measured[0], measured[-1]
    alarm = last.gap_low > threshold and last.gap - first.gap > threshold
    reason = (f"gap {last.gap:+.3f} (95% CI {last.gap_low:+.3f}..{last.gap_high:+.3f}) in {last.label}, "
              f"was {first.gap:+.3f} in {first.label}; threshold {threshold}")
    return DivergenceReport(periods=periods, threshold=threshold, alarm=alarm, reason=reason, drift_warning=drift)


def write_plot(report: DivergenceReport, path: str | Path) -> Path:
    """An SVG line chart of train and held-out mean reward per period, with the gap's interval shaded."""
    w, h, pad = 640, 300, 40
    ps = [p for p in report.periods if p.train_reward is not None or p.heldout_reward is not None]
    n = max(1, len(ps) - 1)
    x = lambda i: pad + i * (w - 2 * pad) / n  # noqa: E731
    y = lambda v: h - pad - v * (h - 2 * pad)  # noqa: E731

    def line(attr: str, colour: str) -> str:
        pts = " ".join(f"{x(i):.1f},{y(getattr(p, attr)):.1f}" for i, p in enumerate(ps) if getattr(p, attr) is not None)
        return f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts}"/>'

    labels = "".join(f'<text x="{x(i):.1f}" y="{h - 10}" font-size="10" text-anchor="middle">{html.escape(p.label[-12:])}</text>'
                     for i, p in enumerate(ps))
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif">'
           f'<rect width="{w}" height="{h}" fill="white"/>'
           f'<line x1="{pad}" y1="{y(0)}" x2="{w - pad}" y2="{y(0)}" stroke="#999"/>'
           f'<line x1="{pad}" y1="{y(1)}" x2="{w - pad}" y2="{y(1)}" stroke="#ddd"/>'
           f'{line("train_reward", "#4a7bd0")}{line("heldout_reward", "#d0704a")}{labels}'
           f'<text x="{pad}" y="20" font-size="12">train (blue) vs held-out (orange) mean reward'
           f'{" — ALARM" if report.alarm else ""}</text></svg>')
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(svg, encoding="utf-8")
    return path
