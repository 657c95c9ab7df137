"""Shaped reward validated against the hidden checks."""

from gymsmith.audit.reward import reward_validation, spearman, validate
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore


def test_ops_shaping_predicts_acceptance(tmp_path):
    store = TrajectoryStore(tmp_path / "r.db")
    run(RunConfig(run_id="rv", taskset=TaskSetSpec(family="ops", count=60, base_seed=8),
                  agents=["oracle", "greedy", "random", "null"]), store)
    [ops] = reward_validation(store, ["rv"])
    assert ops.rollouts == 240 and ops.spearman > 0.7, ops
    assert ops.warning is None
    top = ops.buckets[-1]
    assert top.rollouts > 60 and top.acceptance > 0.75  # partial solves (9 of 10 orders on time) live here too
    assert all(b.acceptance in (None, 0.0) for b in ops.buckets[:2])


def test_warns_when_high_shaping_comes_without_acceptance():
    """Synthetic points (a deliberately bad shaping, which no built-in family has)."""
    points = {"bad": [(0.9, False)] * 30 + [(0.95, True)] * 5 + [(0.1, False)] * 20}
    [bad] = validate(points)
    assert bad.warning and "only 14% are accepted" in bad.warning


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert spearman([1, 1, 1], [1, 2, 3]) is None
