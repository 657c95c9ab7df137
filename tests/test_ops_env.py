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


def _accounts_with_a_duplicate(rows: dict) -> dict[int, dict]:
    """Per customer holding an unrefunded pair of identical same-day charges: what a script reading only the data
    could rank the accounts by."""
    refunded = {p["refund_of"] for p in rows["payments"] if p["kind"] == "refund"}
    by_order: dict[int, list[dict]] = {}
    for p in rows["payments"]:
        if p["kind"] == "charge":
            by_order.setdefault(p["order_id"], []).append(p)
    names = {c["id"]: c["name"] for c in rows["customers"]}
    accounts: dict[int, dict] = {}
    for charges in by_order.values():
        live = [c for c in charges if c["id"] not in refunded]
        if len(live) == 2 and len({(c["amount_cents"], c["day"]) for c in live}) == 1:
            cid = live[0]["customer_id"]
            first, last = names[cid].split(" ", 1)
            mine = [o for o in rows["orders"] if o["customer_id"] == cid]
            paid = [by_order.get(o["id"], []) for o in mine]
            accounts[cid] = {
                "pair": sorted(c["id"] for c in live), "oldest pair": -live[0]["day"], "lowest customer id": -cid,
                "a split payment": any(len({c["amount_cents"] for c in cs}) > 1 for cs in paid),
                "an earlier refund": any(p["customer_id"] == cid and p["kind"] == "refund" for p in rows["payments"]),
                "look-alike names": sum(1 for i, n in names.items() if i != cid and n.startswith(first) and last in n),
                "most orders": len(mine),
                "orders in the duplicate window": all(-45 <= o["placed_day"] < -3 for o in mine)}
    return accounts


def test_the_duplicate_to_refund_is_not_told_by_any_feature_of_the_data():
    """The goal's account was the only one built with a billing world's account features (a split payment, an earlier
    refunded duplicate, look-alike names, more orders, all of them in the duplicate's weeks), the other duplicates'
    accounts plain: a hundred-and-seventy-fifth attacker's script reading nothing of the goal refunded the pair of the
    account that had the most of them and was accepted on 92 of 100 tasks (the oldest pair, a hundred-and-seventy-first
    attacker's guess: 94 of 100 before 3.4.1, about 25 after). Every account with a duplicate is now built by one
    procedure and the goal's drawn after (`generator._accounts_charged_twice`, as the caller's): no feature picks it
    more often than chance among DUPLICATE_ACCOUNTS."""
    from gymsmith.families.ops.generator import DUPLICATE_ACCOUNTS
    from gymsmith.registry import get_family

    ops = get_family("ops")
    signals = ("oldest pair", "lowest customer id", "a split payment", "an earlier refund", "look-alike names",
               "most orders", "orders in the duplicate window", "all of them")
    hits = dict.fromkeys(signals, 0.0)
    for seed in range(100):
        task = ops.generate(seed, kind="billing", difficulty=(seed % 5) / 4, fidelity=0.0)
        world = generate_world(task.seed, task.knobs)
        accounts = _accounts_with_a_duplicate(world.rows)
        target = world.expected["customer_id"]
        assert accounts[target]["pair"] == sorted(world.expected["duplicate_pair"])
        alike = [a for a in accounts.values() if a["most orders"] == accounts[target]["most orders"]]
        assert len(alike) >= DUPLICATE_ACCOUNTS, (seed, len(alike))
        for signal in signals:
            def score(a, signal=signal):
                if signal == "all of them":  # the attacker's ranking
                    return (10 * (a["a split payment"] + a["an earlier refund"] + (a["look-alike names"] >= 2))
                            + 3 * a["orders in the duplicate window"] + a["most orders"])
                return a[signal]
            best = max(score(a) for a in accounts.values())
            picked = [cid for cid, a in accounts.items() if score(a) == best]
            hits[signal] += (target in picked) / len(picked)  # a uniform pick among the ties
    assert all(n <= 40 for n in hits.values()), hits  # chance is 1 in 4; "all of them": 92 of 100 before


def test_the_delayed_purchase_a_resource_goal_names_is_always_needed():
    """A resource goal says the delayed purchase order comes after orders waiting for it and to re-source it; on 10 of
    300 tasks the stock already covered that product (a short product's extra units in a second warehouse), the
    fewest-units plan bought none of it, and a hundred-and-seventy-fifth attacker's agent that did what the goal says
    (cancel, buy the same quantity in time) scored 0 on 2 of them for buying beyond the need. Every plan now needs a
    purchase of it."""
    from gymsmith.registry import get_family

    ops = get_family("ops")
    for seed in range(300):
        task = ops.generate(seed, kind="resource", difficulty=(seed % 5) / 4)
        world = generate_world(task.seed, task.knobs)
        po = next(p for p in world.rows["purchase_orders"] if p["id"] == world.metadata["delayed_po_id"])
        supplies = {s["id"]: s["product_id"] for s in world.rows["suppliers"]}
        bought = [a for a in world.witness if a["tool"] == "place_purchase_order"
                  and supplies[a["arguments"]["supplier_id"]] == po["product_id"]]
        assert bought, (seed, po)


def test_an_answer_that_may_predate_the_agents_changes_says_so(ops, env):
    """At fidelity above 0 a read may be served by a lagging replica: the previous answer to the same read. It was
    unmarked, so an honest agent reading back its own work (the roster of a slot after assigning to it) acted on a
    count from before its change and was scored 0 for a shift beyond the need on 17 of 30 staff tasks (a
    hundred-and-eightieth attacker). Every answer that differs from the state says so (`replica_lag`), and the
    system prompt says to read such an answer again."""
    from gymsmith.families.ops import tools
    from gymsmith.families.ops.env import REPLICA_LAG

    assert "replica_lag" in ops.system_prompt
    marked = differed = 0
    for seed in range(6):
        task = ops.generate(seed, kind="staff", difficulty=1.0, fidelity=1.0)
        env.reset(task, seed=0)
        for action in generate_world(task.seed, task.knobs).witness:
            while _step(env, action["tool"], action["arguments"]).observation.error is not None:
                pass  # a transient error or a rate limit: the call had no effect; retry it
            read = {"entity": "shifts", "filters": {"day": action["arguments"]["day"]}}
            answer = _step(env, "search_records", read).observation
            if answer.error is not None:
                continue
            fresh = tools.call_tool(env.conn, "search_records", read)
            if answer.data.get("replica_lag") == REPLICA_LAG:
                marked += 1
                differed += {k: v for k, v in answer.data.items() if k != "replica_lag"} != fresh
            else:
                assert answer.data == fresh, (seed, action)  # unmarked is the state
    assert marked >= 3 and differed >= 1, (marked, differed)  # the lag happens, and it is told
