"""A training task stream: train-split tasks only, difficulty chosen by a sampler, state saved and resumed.

    cur = Curriculum(["ops"], AdaptiveSampler(band=(0.3, 0.7)))
    task = cur.next_task()
    ...  # roll it out
    cur.feedback(task, accepted=reward.accepted)
    saved = cur.state().model_dump_json()   # later: Curriculum.from_state(CurriculumState.model_validate_json(saved))

Held-out tasks are never yielded: a generated task whose id falls in the held-out split is skipped.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, model_validator

from gymsmith.core.types import Split, TaskSpec
from gymsmith.registry import DEFAULT_HELDOUT_FRACTION, get_family, split_of


class Sampler(Protocol):
    """Chooses the difficulty of the next task of a family and learns from outcomes."""

    def difficulty(self, family: str, rng: random.Random) -> float: ...

    def update(self, family: str, difficulty: float, accepted: bool) -> None: ...

    def state(self) -> dict[str, Any]: ...


class FixedSampler(BaseModel):
    """Always the same difficulty."""

    kind: Literal["fixed"] = "fixed"
    value: float = Field(ge=0.0, le=1.0)

    def difficulty(self, family: str, rng: random.Random) -> float:
        return self.value

    def update(self, family: str, difficulty: float, accepted: bool) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return self.model_dump()


class UniformSampler(BaseModel):
    """Uniform in [low, high]."""

    kind: Literal["uniform"] = "uniform"
    low: float = Field(default=0.0, ge=0.0, le=1.0)
    high: float = Field(default=1.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> "UniformSampler":
        if self.low > self.high:
            raise ValueError(f"uniform sampler needs low <= high, got low={self.low} high={self.high}")
        return self

    def difficulty(self, family: str, rng: random.Random) -> float:
        return round(rng.uniform(self.low, self.high), 4)

    def update(self, family: str, difficulty: float, accepted: bool) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return self.model_dump()


class AdaptiveSampler(BaseModel):
    """Per family, moves difficulty to keep the recent acceptance rate inside `band`.

    After each outcome, once `window // 2` outcomes are known: above the band, difficulty rises by
    `step`; below it, it falls by `step`. Tasks are drawn within `jitter` of the current level.
    """

    kind: Literal["adaptive"] = "adaptive"
    band: tuple[float, float] = (0.3, 0.7)
    start: float = Field(default=0.0, ge=0.0, le=1.0)
    step: float = Field(default=0.02, gt=0.0, le=0.5)
    window: int = Field(default=40, ge=4)
    jitter: float = Field(default=0.05, ge=0.0, le=0.5)
    level: dict[str, float] = Field(default_factory=dict, description="Current difficulty per family.")
    recent: dict[str, list[bool]] = Field(default_factory=dict, description="Last `window` outcomes per family.")

    @model_validator(mode="after")
    def _band(self) -> "AdaptiveSampler":
        low, high = self.band
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(f"band must satisfy 0 <= low < high <= 1, got {self.band}")
        return self

    def difficulty(self, family: str, rng: random.Random) -> float:
        centre = self.level.setdefault(family, self.start)
        return round(min(1.0, max(0.0, centre + rng.uniform(-self.jitter, self.jitter))), 4)

    def update(self, family: str, difficulty: float, accepted: bool) -> None:
        outcomes = deque(self.recent.get(family, []), maxlen=self.window)
        outcomes.append(bool(accepted))
        self.recent[family] = list(outcomes)
        if len(outcomes) < self.window // 2:
            return
        rate = sum(outcomes) / len(outcomes)
        level = self.level.setdefault(family, self.start)
        if rate > self.band[1]:
            self.level[family] = min(1.0, level + self.step)
        elif rate < self.band[0]:
            self.level[family] = max(0.0, level - self.step)

    def acceptance(self, family: str) -> float | None:
        outcomes = self.recent.get(family, [])
        return sum(outcomes) / len(outcomes) if outcomes else None

    def state(self) -> dict[str, Any]:
        return self.model_dump()


SAMPLERS: dict[str, type[FixedSampler | UniformSampler | AdaptiveSampler]] = {
    "fixed": FixedSampler, "uniform": UniformSampler, "adaptive": AdaptiveSampler}


class CurriculumState(BaseModel):
    """Everything needed to resume a stream exactly where it stopped."""

    families: list[str]
    sampler: dict[str, Any]
    base_seed: int
    heldout_fraction: float
    draws: int = Field(description="Generator calls made so far (seeds base_seed*1_000_003 + draws...).")
    rng_state: Any = Field(description="State of the stream's Random, as random.getstate() returns it.")


class Curriculum:
    """Yields train-split tasks; the sampler sets difficulty; `feedback` reports outcomes."""

    def __init__(self, families: list[str], sampler: Sampler, *, base_seed: int = 0,
                 heldout_fraction: float = DEFAULT_HELDOUT_FRACTION):
        if not families:
            raise ValueError("a curriculum needs at least one family")
        for f in families:
            get_family(f)  # raises UnknownFamilyError early
        self.families, self.sampler = list(families), sampler
        self.base_seed, self.heldout_fraction = base_seed, heldout_fraction
        self.rng = random.Random(f"curriculum:{base_seed}")
        self.draws = 0
        self.skipped_heldout = 0

    def next_task(self) -> TaskSpec:
        """The next train-split task. Held-out draws are skipped (and counted in `skipped_heldout`)."""
        while True:
            family = self.families[self.draws % len(self.families)]
            difficulty = self.sampler.difficulty(family, self.rng)
            seed = self.base_seed * 1_000_003 + self.draws
            self.draws += 1
            task = get_family(family).generate(seed, difficulty=difficulty)
            if split_of(task.id, heldout_fraction=self.heldout_fraction) is Split.TRAIN:
                return task
            self.skipped_heldout += 1

    def __iter__(self):
        while True:
            yield self.next_task()

    def feedback(self, task: TaskSpec, *, accepted: bool) -> None:
        self.sampler.update(task.family, task.difficulty, accepted)

    def state(self) -> CurriculumState:
        return CurriculumState(families=self.families, sampler=self.sampler.state(), base_seed=self.base_seed,
                               heldout_fraction=self.heldout_fraction, draws=self.draws, rng_state=self.rng.getstate())

    @classmethod
    def from_state(cls, state: CurriculumState) -> "Curriculum":
        sampler = SAMPLERS[state.sampler["kind"]].model_validate(state.sampler)
        cur = cls(state.families, sampler, base_seed=state.base_seed, heldout_fraction=state.heldout_fraction)
        cur.draws = state.draws
        version, internal, gauss = state.rng_state
        cur.rng.setstate((version, tuple(internal), gauss))
        return cur
