"""The ops environment: bad tool calls become error observations, business rules hold, resets are exact."""

import json

import pytest

from gymsmith.core import Action, ActionErrorKind
from gymsmith.families.ops.generator import generate_world


@pytest.fixture
def env(ops):
    e = ops.make_env()
    yield e
    e.close()


def _task(ops, kind, seed=3, **knobs):
    return ops.generate(seed, kind=kind, difficulty=0.3, fidelity=0.0, **knobs)


def _step(env, tool, arguments):
    return env.step(Action(tool=tool, arguments=arguments))


def test_malformed_json_is_an_error_observation(ops, env):
    env.reset(_task(ops, "fulfil"), seed=0)
    r = _step(env, "ship_order", '{"order_id": 10')
    assert r.observation.error.kind is ActionErrorKind.MALFORMED_JSON
    assert "not valid JSON" in r.observation.text and "ship_order" in r.observation.text
    assert not r.done and env.invalid_actions == 1
    assert _step(env, "ship_order", "[1, 2]").observation.error.kind is ActionErrorKind.MALFORMED_JSON
    assert _step(env, "get_status", "{}").observation.error is None  # the rollout continues
    assert env.invalid_actions == 2


def test_unknown_tool_suggests_close_names(ops, env):
    env.reset(_task(ops, "fulfil"), seed=0)
    r = _step(env, "ship_ordr", {"order_id": 1001})
    assert r.observation.error.kind is ActionErrorKind.UNKNOWN_TOOL
    assert "Did you mean ship_order" in r.observation.text
    assert env.invalid_actions == 1


@pytest.mark.parametrize("arguments, fragment", [
    ({}, "'order_id' is a required property"),
    ({"order_id": "1001"}, "order_id: '1001' is not of type 'integer'"),
    ({"order_id": 0}, "order_id: 0 is less than the minimum of 1"),
    ({"order_id": 1001, "rush": True}, "Additional properties are not allowed"),
])
def test_schema_violations_are_explained(ops, env, arguments, fragment):
    env.reset(_task(ops, "fulfil"), seed=0)
    before = env.state_hash()
    r = _step(env, "ship_order", arguments)
    assert r.observation.error.kind is ActionErrorKind.INVALID_ARGUMENTS
    assert fragment in r.observation.error.message
    assert env.state_hash() == before


def _capture_then_allocate(ops):
    """A task whose witness captures a payment and then allocates that order from stock at once."""
    for seed in range(300):
        task = ops.generate(seed, kind="fulfil", difficulty=0.2, fidelity=0.0, constraints=1)
        w = generate_world(task.seed, task.knobs).witness
        for a, b in zip(w, w[1:]):
            if a["tool"] == "capture_payment" and b["tool"] == "allocate_stock":
                return task, b["arguments"]
    raise AssertionError("no generated task has an unpaid order in stock")


def test_unpaid_orders_do_not_ship_and_refusals_change_nothing(ops, env):
    task, allocation = _capture_then_allocate(ops)
    env.reset(task, seed=0)
    assert _step(env, "allocate_stock", allocation).observation.error is None
    before = env.state_hash()
    r = _step(env, "ship_order", {"order_id": allocation["order_id"]})
    assert r.observation.error.kind is ActionErrorKind.RULE_VIOLATION
    assert "not fully paid" in r.observation.error.message
    assert env.state_hash() == before
    assert _step(env, "capture_payment", {"order_id": allocation["order_id"]}).observation.error is None
    assert _step(env, "ship_order", {"order_id": allocation["order_id"]}).observation.data["status"] == "shipped"


def test_budget_and_missing_records(ops, env):
    env.reset(_task(ops, "fulfil"), seed=0)
    suppliers = _step(env, "search_records", {"entity": "suppliers", "filters": {"active": 1}}).observation.data["rows"]
    before = env.state_hash()
    r = _step(env, "place_purchase_order", {"supplier_id": suppliers[0]["id"], "warehouse_id": 1, "quantity": 1000})
    assert r.observation.error.kind is ActionErrorKind.RULE_VIOLATION and "purchasing budget exceeded" in r.observation.text
    assert env.state_hash() == before
    r = _step(env, "get_record", {"entity": "orders", "id": 999999})
    assert r.observation.error.kind is ActionErrorKind.NOT_FOUND
    r = _step(env, "search_records", {"entity": "orders", "filters": {"colour": "red"}})
    assert r.observation.error.kind is ActionErrorKind.INVALID_ARGUMENTS and "fields are" in r.observation.text


def test_labour_rules(ops, env):
    env.reset(ops.generate(3, kind="staff", difficulty=0.0, fidelity=0.0, constraints=0), seed=0)
    staff = _step(env, "search_records", {"entity": "staff"}).observation.data["rows"][0]
    assert staff["max_hours_week"] == 40 and staff["unavailable_days"] == ""
    for day in range(5):
        r = _step(env, "assign_shift", {"staff_id": staff["id"], "day": day, "warehouse_id": 1})
        assert r.observation.error is None, r.observation.text
    r = _step(env, "assign_shift", {"staff_id": staff["id"], "day": 5, "warehouse_id": 1})
    assert r.observation.error.kind is ActionErrorKind.RULE_VIOLATION and "the limit is 5" in r.observation.text
    r = _step(env, "assign_shift", {"staff_id": staff["id"], "day": 0, "warehouse_id": 1})
    assert r.observation.error.kind is ActionErrorKind.RULE_VIOLATION and "one shift per person per day" in r.observation.text


def test_submit_ends_the_episode(ops, env):
    env.reset(_task(ops, "billing"), seed=0)
    assert _step(env, "submit", {}).done
    r = _step(env, "get_status", {})
    assert r.done and r.observation.error.kind is ActionErrorKind.EPISODE_OVER


def test_reset_is_exact(ops, env):
    task = _task(ops, "fulfil")
    env.reset(task, seed=0)
    assert env.state_hash() == task.start_state.digest
    for a in generate_world(task.seed, task.knobs).witness:
        env.step(Action(**a))
    assert env.state_hash() != task.start_state.digest
    env.reset(task, seed=0)
    assert env.state_hash() == task.start_state.digest


def test_faults_are_seeded_and_retryable(ops, env):
    task = ops.generate(5, kind="fulfil", difficulty=0.5, fidelity=1.0)

    def trace(seed):
        env.reset(task, seed=seed)
        return [json.dumps(_step(env, "get_status", {}).observation.model_dump(), sort_keys=True) for _ in range(60)]

    a, b = trace(0), trace(0)
    assert a == b
    assert any("transient" in x or "rate_limited" in x for x in a)
    assert trace(1) != a


@pytest.mark.parametrize("kind", ["fulfil", "resource", "billing"])
def test_an_id_says_nothing_of_which_records_the_goal_means(kind):
    """Built goal first, a fulfilment task's due orders held ids 1001 to 1000+n and their customers 101 to 100+n on
    every task, and a billing task's duplicate pair the first payment ids: the leak a hundred-and-sixty-eighth attacker
    used in the web family (an id told which record the goal means; a script never reading the goal was accepted).
    Orders and payments now take ids in time order, as a real system issues them, and customers in a seeded order."""
    from gymsmith.families.ops.generator import generate_world
    from gymsmith.registry import get_family

    ops, firsts, customers = get_family("ops"), [], []
    for seed in range(30):
        task = ops.generate(seed, kind=kind, difficulty=0.5)
        world = generate_world(task.seed, task.knobs)
        if kind == "billing":
            firsts.append(world.expected["duplicate_pair"][0])
            customers.append(world.expected["customer_id"])
        else:
            targets = set(world.expected["targets"])
            firsts.append(min(targets))
            customers.append(next(o["customer_id"] for o in world.rows["orders"] if o["id"] == min(targets)))
    assert len(set(firsts)) >= 15 and len(set(customers)) >= 15, (sorted(firsts), sorted(customers))


MIN_CANDIDATES = 3  # the goal's duplicate and OTHER_DUPLICATES others


def test_the_duplicate_to_refund_is_not_told_by_its_age_or_by_being_the_only_one():
    """A hundred-and-seventy-first attacker's script read nothing of a billing goal and refunded the oldest unrefunded
    pair of identical same-day charges: accepted on 58 of 60 tasks (the goal's duplicate was the only one at low
    difficulty, and placed older than the look-alikes' at high). Other customers now have real duplicates at every
    difficulty, drawn on the days the goal's is; the same guess is right about one time in three."""
    from gymsmith.families.ops.generator import generate_world
    from gymsmith.registry import get_family

    ops, right = get_family("ops"), 0
    for seed in range(100):
        task = ops.generate(seed, kind="billing", difficulty=(seed % 5) / 4, fidelity=0.0)
        world = generate_world(task.seed, task.knobs)
        refunded = {p["refund_of"] for p in world.rows["payments"] if p["kind"] == "refund"}
        pairs: dict = {}
        for p in world.rows["payments"]:
            if p["kind"] == "charge" and p["id"] not in refunded:
                pairs.setdefault((p["order_id"], p["day"], p["amount_cents"]), []).append(p["id"])
        candidates = sorted(sorted(ids) for ids in pairs.values() if len(ids) >= 2)
        assert sorted(world.expected["duplicate_pair"]) in candidates and len(candidates) >= MIN_CANDIDATES
        right += candidates[0] == sorted(world.expected["duplicate_pair"])
    assert right <= 45, right  # 94 of 100 before
