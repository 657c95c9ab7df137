"""Task registry: families, knobs, splits and reproducible task sets."""

from gymsmith.registry.family import DIFFICULTY, Family, FamilyInfo, Knob, KnobKind, resolve_knobs
from gymsmith.registry.registry import as_generated, get_family, list_families, register_family, reload_families
from gymsmith.registry.split import DEFAULT_HELDOUT_FRACTION, split_of
from gymsmith.registry.taskset import TaskSetSpec, build_taskset

__all__ = [
    "DEFAULT_HELDOUT_FRACTION", "DIFFICULTY", "Family", "FamilyInfo", "Knob", "KnobKind", "TaskSetSpec",
    "as_generated", "build_taskset", "get_family", "list_families", "register_family", "reload_families", "resolve_knobs",
    "split_of",
]
