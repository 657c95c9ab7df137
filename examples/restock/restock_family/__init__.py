"""Restock: bring every item below its minimum up to its target, and touch nothing else (a gymsmith family)."""
import os
import random
from typing import Annotated

from gymsmith.agents.base import NullAgent, RandomAgent
from gymsmith.core.errors import StaleTaskError
from gymsmith.core.types import Action, ActionErrorKind, Observation, StartStateRef, TaskSpec
from gymsmith.envs.base import FinalState, ToolEnvironment, ToolRefusal
from gymsmith.envs.sqlite_world import SqliteWorld, load_image
from gymsmith.envs.toolkit import Param, Toolbox
from gymsmith.registry.family import DIFFICULTY, resolve_knobs

WORLD = SqliteWorld({"items": "id INTEGER PRIMARY KEY, units INTEGER NOT NULL, minimum INTEGER NOT NULL, target INTEGER NOT NULL"})
TOOLS = Toolbox()


def start_rows(seed, knobs):
    rng = random.Random(seed)
    items = [dict(id=i, units=rng.randint(0, 20), minimum=8, target=15) for i in range(1, 4 + int(8 * knobs["difficulty"]))]
    if all(r["units"] >= 8 for r in items):
        items[0]["units"] = 3  # always some work to do
    return {"items": items}


pristine_image = WORLD.image_cache(start_rows)


@TOOLS.tool(read_only=True)
def list_items(conn) -> dict:
    """Every item with its units on hand, its minimum and its target."""
    return {"items": [dict(zip(("id", "units", "minimum", "target"), r)) for r in conn.execute("SELECT * FROM items")]}


@TOOLS.tool
def restock(conn, item_id: Annotated[int, Param(minimum=1, maximum=100)], units: Annotated[int, Param(minimum=1, maximum=100)]) -> dict:
    """Add units to an item's stock."""
    if conn.execute("UPDATE items SET units = units + ? WHERE id = ?", (units, item_id)).rowcount == 0:
        raise ToolRefusal(ActionErrorKind.NOT_FOUND, f"no item {item_id}")
    return {"item_id": item_id, "added": units}


@TOOLS.tool
def submit(conn) -> dict:
    """Declare the task finished."""
    return {"submitted": True}


class RestockEnv(ToolEnvironment):
    def _reset(self, task, seed):
        image, digest = pristine_image(task.seed, task.knobs)
        StaleTaskError.check(task.id, task.start_state.digest, digest)
        self.conn = load_image(image)
        return Observation(text=task.goal, data=list_items(self.conn))

    def _call(self, name, arguments):
        return Observation(text="ok", data=TOOLS.functions[name](self.conn, **arguments))

    def state_hash(self):
        return WORLD.digest(self.conn)

    def final_state(self, directory):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "final.sqlite").write_bytes(self.conn.serialize())
        os.chmod(directory / "final.sqlite", 0o444)
        return FinalState(kind="sqlite", path=str(directory / "final.sqlite"), digest=self.state_hash())

    def close(self):
        pass


class Oracle:
    name = "oracle"

    def reset(self, task, observation, *, seed):
        self.calls = [Action(tool="restock", arguments={"item_id": i["id"], "units": i["target"] - i["units"]})
                      for i in observation.data["items"] if i["units"] < i["minimum"]] + [Action(tool="submit", arguments={})]

    def act(self, observation):
        return self.calls.pop(0)


class RestockFamily:
    name, version, checks_module, knobs = "restock", "1.0.0", "restock_family.checks", (DIFFICULTY,)

    def generate(self, seed, **knobs):
        knobs = resolve_knobs(self.knobs, knobs, lambda d: {})
        return TaskSpec(family=self.name, family_version=self.version, seed=seed, knobs=knobs, tools=TOOLS.tool_specs(),
                        goal="Restock every item below its minimum to exactly its target; change nothing else. Then submit.",
                        start_state=StartStateRef(kind="sqlite", digest=pristine_image(seed, knobs)[1]))

    def make_env(self):
        return RestockEnv()

    def agents(self):
        return {"oracle": Oracle, "null": NullAgent, "random": RandomAgent}
