"""Curriculum: a stream of train-split tasks whose difficulty a sampler controls."""

from gymsmith.curriculum.stream import (
    AdaptiveSampler,
    Curriculum,
    CurriculumState,
    FixedSampler,
    Sampler,
    UniformSampler,
)

__all__ = ["AdaptiveSampler", "Curriculum", "CurriculumState", "FixedSampler", "Sampler", "UniformSampler"]
