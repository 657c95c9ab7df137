"""Finding families: built-ins, the `gymsmith.families` entry-point group, and explicit registration."""

from __future__ import annotations

import logging
import threading
from importlib.metadata import entry_points

from gymsmith.core.errors import GymsmithError, NotGeneratedError, UnknownFamilyError
from gymsmith.core.types import TaskSpec
from gymsmith.registry.family import Family, FamilyInfo

ENTRY_POINT_GROUP = "gymsmith.families"
_BUILTINS = {"ops": "gymsmith.families.ops:OpsFamily", "code": "gymsmith.families.code:CodeFamily",
             "web": "gymsmith.families.web:WebFamily"}

_lock = threading.Lock()
_registered: dict[str, tuple[Family, str]] = {}
_broken: dict[str, str] = {}  # entry-point name -> why it failed to load
_loaded = False
log = logging.getLogger(__name__)


def register_family(family: Family, *, source: str = "register_family") -> Family:
    """Register a family instance under `family.name` (a later registration replaces it)."""
    if not isinstance(family, Family):
        raise TypeError(f"{family!r} does not implement the Family protocol (name, version, knobs, "
                        "checks_module, generate, make_env, agents)")
    with _lock:
        _registered[family.name] = (family, source)
    return family


def _load(target: str, source: str) -> None:
    module_name, _, attr = target.partition(":")
    module = __import__(module_name, fromlist=[attr])
    obj = getattr(module, attr)
    register_family(obj() if isinstance(obj, type) else obj, source=source)


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    for name, target in _BUILTINS.items():
        _load(target, "builtin")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.value in _BUILTINS.values():
            continue  # our own package's entry point for a built-in
        try:
            _load(ep.value, f"entry point {ep.name} = {ep.value}")
        except Exception as exc:  # a broken plug-in names itself and is skipped; it must not break every family
            _broken[ep.name] = " ".join(f"{type(exc).__name__}: {exc}".split())
            log.warning("skipped family entry point %r (%s): it failed to load: %s", ep.name, ep.value, _broken[ep.name])
    _loaded = True


def get_family(name: str) -> Family:
    """Return the family registered as `name`. Raises UnknownFamilyError with close matches (and, for a plug-in
    that failed to load, why)."""
    _ensure_loaded()
    try:
        return _registered[name][0]
    except KeyError:
        raise UnknownFamilyError(name, _registered, broken=_broken.get(name)) from None


def list_families() -> list[FamilyInfo]:
    """Every registered family, sorted by name."""
    _ensure_loaded()
    return [FamilyInfo(name=n, version=f.version, source=src, knobs=list(f.knobs), agents=sorted(f.agents()))
            for n, (f, src) in sorted(_registered.items())]


def reload_families() -> None:
    """Forget discovered families and scan again (for plug-ins installed while running)."""
    global _loaded
    with _lock:
        _registered.clear()
        _broken.clear()
        _loaded = False


def as_generated(family: Family, task: TaskSpec) -> TaskSpec:
    """The task `family` generates from `task`'s seed and knobs, if that is `task` (its id hashes its whole JSON, so
    any edit changes it); raises NotGeneratedError naming why not. What serves a task sent in full plays only what the
    family makes: a start state, tools and an id (and so a split) of the sender's are refused (a hundred-and-sixty-fourth
    attacker gave a held-out task one more metadata key, whose id fell in the train split, and `gymsmith mcp` served it
    and paid 1.0)."""
    if task.family != family.name or task.family_version != family.version:
        raise NotGeneratedError(f"task {task.id} is of {task.family} {task.family_version}; this plays "
                                f"{family.name} {family.version}")
    try:
        made = family.generate(task.seed, **task.knobs)
    except GymsmithError as exc:
        raise NotGeneratedError(f"task {task.id}: its knobs do not generate a task here: {exc}") from None
    if made.id != task.id:  # ids hash the JSON, so `true` for 1.0 differs too
        raise NotGeneratedError(f"task {task.id} is not what {family.name} {family.version} generates from its seed "
                                f"and knobs (that is {made.id}): edited, or made by other code")
    return made
