"""Is the shaped reward a good proxy for the hidden checks? Validate it before scaling rollouts.

Per family: the rank correlation (Spearman) between the shaped reward and acceptance, acceptance in each
shaped-reward bucket, and a warning when high shaped reward comes with low acceptance (the policy could
climb the shaping without solving anything).
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel

from gymsmith.store.sql import TrajectoryStore

BUCKETS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0001)
HIGH_SHAPED = 0.6
LOW_ACCEPTANCE = 0.5


class Bucket(BaseModel):
    low: float
    high: float
    rollouts: int
    acceptance: float | None


class RewardValidation(BaseModel):
    family: str
    rollouts: int
    spearman: float | None
    buckets: list[Bucket]
    warning: str | None = None


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):  # ties share their mean rank
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation; None when either side is constant or there are fewer than 3 points."""
    if len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return None if not vx or not vy else cov / (vx * vy) ** 0.5


def validate(points: dict[str, list[tuple[float, bool]]]) -> list[RewardValidation]:
    """`points[family]` = (shaped reward, accepted) per rollout."""
    out = []
    for family, pts in sorted(points.items()):
        buckets = []
        for low, high in zip(BUCKETS, BUCKETS[1:]):
            inside = [a for s, a in pts if low <= s < high]
            buckets.append(Bucket(low=low, high=min(1.0, high), rollouts=len(inside),
                                  acceptance=sum(inside) / len(inside) if inside else None))
        high_shaped = [a for s, a in pts if s >= HIGH_SHAPED]
        warning = None
        if high_shaped and sum(high_shaped) / len(high_shaped) < LOW_ACCEPTANCE:
            warning = (f"{len(high_shaped)} rollouts have shaped reward >= {HIGH_SHAPED} but only "
                       f"{sum(high_shaped) / len(high_shaped):.0%} are accepted: the shaping rewards something "
                       "other than solving the task")
        out.append(RewardValidation(family=family, rollouts=len(pts), buckets=buckets, warning=warning,
                                    spearman=spearman([s for s, _ in pts], [float(a) for _, a in pts])))
    return out


def reward_validation(store: TrajectoryStore, run_ids: list[str] | None = None) -> list[RewardValidation]:
    """Shaped reward recomputed from the stored components (independent of the policy used for training)."""
    rows = store.scored_rows(run_ids)
    sums = store.component_sums(r["rollout_id"] for r in rows)
    points: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for r in rows:
        if r["rollout_id"] in sums:  # rollouts without components (a failure's rejection) say nothing of shaping
            total, weight = sums[r["rollout_id"]]
            points[r["family"]].append((round(total / weight, 9) if weight else 0.0, bool(r["accepted"])))  # sum order varies
    return validate(points)
