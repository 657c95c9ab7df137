"""Reusing a run id resumes that run, so it must not silently mix two configs in one run.

What the rollouts depend on (the task set, agents, seeds, group size, limits, reward policy, model) must match
the config the run was recorded with; how they are run (concurrency, batch, retries, backend, the model
server's address) may change between resumes, and `paired_heldout` may grow (`gymsmith eval --pair` adds
held-out tasks to a training run).
"""

from __future__ import annotations

import json
from typing import Any

from gymsmith.core.errors import GymsmithError

IDENTITY = ("purpose", "taskset", "agents", "seeds", "group", "max_steps", "time_limit_s", "policy", "step_rewards",
            "model", "max_record_mib")
# where the server lives and how calls are retried are not the agent's behaviour (a model server that moved may
# resume the run: `--retry-errors` with a new --model-url)
_MODEL_OPERATIONAL = frozenset({"base_url", "api_key_env", "timeout_s", "max_retries", "backoff_s"})


class RunReuseError(GymsmithError, ValueError):
    """A run id was reused with a config whose rollouts would not be comparable with those already stored."""


def _differences(stored: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, stored value, new value) for each identity field that differs. A field the stored config lacks (a
    run recorded by an older gymsmith) is not compared."""
    out: list[tuple[str, Any, Any]] = []
    for key in IDENTITY:
        if key not in stored or key not in new:
            continue
        old, now = stored[key], new[key]
        if key in ("taskset", "model") and isinstance(old, dict) and isinstance(now, dict):
            skip = _MODEL_OPERATIONAL if key == "model" else frozenset()
            out += [(sub, old[sub], now[sub]) for sub in sorted(old.keys() & now.keys() - skip) if old[sub] != now[sub]]
        elif old != now:
            out.append((key, old, now))
    return out


def check_reuse(run_id: str, stored: dict[str, Any] | None, new: dict[str, Any]) -> None:
    """Refuse to resume run `run_id`, recorded with config `stored` (None: a new run, always fine), with the config
    `new` (both as `RunConfig.model_dump(mode="json")`) when they differ in what the rollouts depend on.

    Raises RunReuseError naming the first difference and the way out."""
    if stored is None:
        return
    diffs = _differences(stored, new)
    if not diffs:
        return
    field, old, now = diffs[0]
    more = f" (and {len(diffs) - 1} more difference(s))" if len(diffs) > 1 else ""
    raise RunReuseError(f"reusing run id {run_id!r} (--run-id) resumes that run, but it was recorded with {field} "
                        f"{json.dumps(old)}, not {json.dumps(now)}{more}: use a new --run-id, or the run's own "
                        "flags to resume it (gymsmith runs show shows what it holds)")
