"""Reproducible task sets: a family, knob ranges, a count, a split and a base seed."""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from gymsmith.core.errors import KnobError, NoTaskForSeed, TaskSetError
from gymsmith.core.types import Split, TaskSpec
from gymsmith.registry.family import KnobKind
from gymsmith.registry.registry import get_family
from gymsmith.registry.split import DEFAULT_HELDOUT_FRACTION, split_of

KnobRange = tuple[float, float]


class TaskSetSpec(BaseModel):
    """Everything needed to rebuild the same list of tasks.

    `knobs` maps a knob name to a fixed value or a ``[low, high]`` range sampled per task.
    """

    family: str
    count: int = Field(ge=1, le=1_000_000)
    split: Literal["train", "heldout", "all"] = "train"
    base_seed: int = 0
    knobs: dict[str, Any] = Field(default_factory=lambda: {"difficulty": [0.0, 1.0]})
    heldout_fraction: float = Field(default=DEFAULT_HELDOUT_FRACTION, ge=0.0, le=1.0)

    @field_validator("knobs")
    @classmethod
    def _ranges_well_formed(cls, knobs: dict[str, Any]) -> dict[str, Any]:
        for name, value in knobs.items():
            if isinstance(value, (list, tuple)):
                if len(value) != 2 or not all(isinstance(v, (int, float)) for v in value) or value[0] > value[1]:
                    raise ValueError(f"knob range {name}={value!r} must be [low, high] numbers with low <= high")
        return knobs


def _draw_knobs(spec: TaskSetSpec, rng: random.Random) -> dict[str, Any]:
    family = get_family(spec.family)
    declared = {k.name: k for k in family.knobs}
    drawn: dict[str, Any] = {}
    for name, value in spec.knobs.items():
        if name not in declared:
            raise KnobError(f"unknown knob {name!r} in task set; {spec.family!r} declares {sorted(declared)}")
        if isinstance(value, (list, tuple)):
            low, high = value
            if declared[name].kind is KnobKind.INT:
                drawn[name] = rng.randint(int(low), int(high))
            else:
                drawn[name] = round(low + (high - low) * rng.random(), 4)
        else:
            drawn[name] = value
    return drawn


def build_taskset(spec: TaskSetSpec) -> list[TaskSpec]:
    """Return `spec.count` tasks of `spec.split`, the same list for the same spec.

    Task i is generated with seed ``base_seed * 1_000_003 + i`` and knobs drawn from a Random seeded by
    the same pair, so growing `count` keeps every earlier task; a seed that makes no task (NoTaskForSeed) is
    skipped. Raises TaskSetError if the split cannot be filled (for example heldout with heldout_fraction=0),
    KnobError on bad knobs.
    """
    want = None if spec.split == "all" else Split(spec.split)
    family = get_family(spec.family)
    if want is Split.HELDOUT and spec.heldout_fraction == 0.0 or want is Split.TRAIN and spec.heldout_fraction == 1.0:
        raise TaskSetError(f"split {spec.split!r} is empty with heldout_fraction={spec.heldout_fraction}")
    tasks: list[TaskSpec] = []
    skipped = 0
    max_draws = spec.count * 100 + 1000
    for i in range(max_draws):
        seed = spec.base_seed * 1_000_003 + i
        rng = random.Random(f"taskset:{spec.family}:{seed}")
        try:
            task = family.generate(seed, **_draw_knobs(spec, rng))
        except NoTaskForSeed:
            skipped += 1
            continue
        if want is None or split_of(task.id, heldout_fraction=spec.heldout_fraction) is want:
            tasks.append(task)
            if len(tasks) == spec.count:
                return tasks
    raise TaskSetError(f"found only {len(tasks)} {spec.split} tasks of {spec.count} in {max_draws} draws"
                       + (f" ({skipped} seeds made no task)" if skipped else ""))
