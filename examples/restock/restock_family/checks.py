"""Restock's hidden checks: progress is the share of low items brought to target; any other change is a violation."""
from gymsmith.core.types import RewardComponent
from gymsmith.envs.sqlite_world import load_image, open_snapshot
from gymsmith.verifier.protocol import CheckResult

from restock_family import WORLD, pristine_image


def verify(task, final_state):
    start, final = load_image(pristine_image(task.seed, task.knobs)[0]), open_snapshot(str(final_state))
    low = {k: r for k, r in WORLD.rows(start, "items").items() if r["units"] < r["minimum"]}
    changes = WORLD.diff(start, final).get("items", {"added": [], "removed": [], "changed": []})
    wrong = changes["added"] + changes["removed"] + [new for old, new in changes["changed"]
                                                      if (old["id"],) not in low or new["units"] > new["target"]]
    done = sum(WORLD.rows(final, "items")[k]["units"] == r["target"] for k, r in low.items())
    return CheckResult(components={"restocked": RewardComponent(value=done / len(low), weight=1.0)},
                       gate_failures=[f"{len(low) - done} low items not at target"] if done < len(low) else [],
                       violations=[f"collateral change: item {r['id']}" for r in wrong])
