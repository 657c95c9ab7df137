"""The curriculum: train tasks only, samplers, adaptive convergence, exact resume."""

import random

import pytest

from gymsmith.core import Split
from gymsmith.curriculum import AdaptiveSampler, Curriculum, CurriculumState, FixedSampler, UniformSampler
from gymsmith.registry import split_of


def synthetic_agent(seed=0):
    """Succeeds with probability 1 - difficulty: success falls as difficulty rises."""
    rng = random.Random(seed)
    return lambda task: rng.random() < 1.0 - task.difficulty


def test_adaptive_sampler_converges_into_its_band_and_never_yields_heldout():
    sampler = AdaptiveSampler(band=(0.3, 0.7), start=0.0)
    cur = Curriculum(["ops"], sampler, base_seed=1)
    agent = synthetic_agent()
    outcomes, seen = [], []
    for _ in range(600):
        task = cur.next_task()
        seen.append(task)
        outcomes.append(agent(task))
        cur.feedback(task, accepted=outcomes[-1])
    assert all(split_of(t.id) is Split.TRAIN for t in seen)
    assert cur.skipped_heldout > 0  # held-out ids did come up, and were skipped
    late = sum(outcomes[-300:]) / 300  # acceptance once converged, over more outcomes than one noisy window
    assert 0.3 <= late <= 0.7, late
    assert sum(outcomes[:40]) / 40 > 0.7  # it started easy: above the band before it ramped up
    assert 0.3 <= sampler.level["ops"] <= 0.7  # success = 1 - d, so the band means d in [0.3, 0.7]
    assert max(t.difficulty for t in seen[:10]) <= 0.05  # it starts easy ...
    assert sum(t.difficulty for t in seen[-100:]) / 100 > 0.25  # ... and ramps up


def test_resume_continues_exactly():
    agent = synthetic_agent(3)
    a = Curriculum(["ops"], AdaptiveSampler(), base_seed=2)
    for _ in range(50):
        t = a.next_task()
        a.feedback(t, accepted=agent(t))
    saved = a.state().model_dump_json()
    b = Curriculum.from_state(CurriculumState.model_validate_json(saved))
    assert [a.next_task().id for _ in range(20)] == [b.next_task().id for _ in range(20)]


def test_fixed_and_uniform_samplers():
    fixed = Curriculum(["ops"], FixedSampler(value=0.4))
    assert {fixed.next_task().difficulty for _ in range(10)} == {0.4}
    uniform = Curriculum(["ops"], UniformSampler(low=0.2, high=0.3))
    assert all(0.2 <= uniform.next_task().difficulty <= 0.3 for _ in range(20))
    with pytest.raises(ValueError, match="low <= high"):
        UniformSampler(low=0.9, high=0.1)
    with pytest.raises(ValueError, match="band must satisfy"):
        AdaptiveSampler(band=(0.8, 0.2))
    with pytest.raises(ValueError, match="at least one family"):
        Curriculum([], FixedSampler(value=0.1))
