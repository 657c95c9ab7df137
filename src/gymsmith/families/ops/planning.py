"""The fewest units a fulfilment plan must buy, per product, and the cheapest plan that buys only those.

Pure functions of data every agent can read (the due orders, the stock available on day 0, the active
suppliers); no randomness. The generator builds the oracle's witness from `fewest_units` (and the
purchasing budget from its cost); the hidden checks call it on the pristine database to bound purchases.

The model. Each due order ships whole from one warehouse, no later than its due day. Units available on
day 0 are `on_hand - reserved` (reserved stock is promised to other customers). A purchase placed on day 0
from an active supplier arrives at the chosen warehouse on day `lead_days` (placing it later only makes it
later, so day 0 is the best case). For one product and one assignment of its due orders to warehouses,
take each warehouse's orders by (due day, id): the cumulative shortfall after order k is
``max(0, quantity of orders 1..k - available)``, which never falls. Every unit of the final shortfall
must be bought, and no plan for that assignment needs more: ship each order on its due day (or as soon as
its warehouse's stock allows); the units that the shortfall adds at order k must arrive by k's due day,
so each is bought from the cheapest active supplier with ``lead_days <= due day``, and the assignment is
impossible when no such supplier exists. Products do not share stock or suppliers, so each product is
searched on its own: every assignment of its due orders to warehouses (at most 3^12 for 12 orders and
three warehouses; generated tasks have at most two due orders per product). The result for a product is
the assignment with the fewest units, and the cheapest among those (ties: the first assignment in
`itertools.product` order over warehouses sorted by id, so it is deterministic).

Whether the budget allows it: the generator sets the purchasing budget from the cost of these plans (plus
slack), so buying every product's fewest units is always affordable; the checks verify that on every task
(`ops.checks`), so the minimum of each product is the minimum any valid plan needs, and all of them at once
are reachable by one plan.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_ASSIGNMENTS = 3 ** 12  # per product; beyond it the search would be too slow for a verifier


@dataclass(frozen=True)
class Purchase:
    """Units of one product bought on day 0 from one supplier for one warehouse."""

    product_id: int
    supplier_id: int
    warehouse_id: int
    quantity: int
    unit_cost_cents: int
    lead_days: int


@dataclass(frozen=True)
class ProductPlan:
    """The plan for one product that buys the fewest units (cheapest among such plans)."""

    product_id: int
    units: int
    cost_cents: int
    warehouse_of: Mapping[int, int]  # due order id -> the warehouse it ships from
    purchases: tuple[Purchase, ...]


class NoPlan(ValueError):
    """Some due order of the product cannot ship on time under any assignment (no supplier is quick enough)."""


def _plan_for(assignment: tuple[int, ...], orders: list[dict[str, Any]], available: Mapping[tuple[int, int], int],
              offers: list[dict[str, Any]], product_id: int, today: int = 0,
              arriving: Mapping[int, list[tuple[int, int]]] | None = None) -> tuple[int, int, tuple[Purchase, ...]] | None:
    """(units, cost, purchases) of one assignment of `orders` to warehouses, or None if some order cannot be
    served in time. `arriving`: warehouse -> (arrival day, units) of purchase orders already placed."""
    by_warehouse: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for order, w in zip(orders, assignment):
        by_warehouse[w].append(order)
    units = cost = 0
    bought: dict[tuple[int, int], int] = defaultdict(int)  # (supplier, warehouse) -> units
    for w in sorted(by_warehouse):
        stock = max(0, available.get((w, product_id), 0))
        incoming = (arriving or {}).get(w, [])
        demand = shortfall = 0
        for order in sorted(by_warehouse[w], key=lambda o: (o["due_day"], o["id"])):
            demand += order["quantity"]
            supply = stock + sum(n for day, n in incoming if day <= order["due_day"])
            more = max(0, demand - supply) - shortfall
            if more <= 0:
                continue
            in_time = [s for s in offers if today + s["lead_days"] <= order["due_day"]]
            if not in_time:
                return None
            s = min(in_time, key=lambda s: (s["unit_cost_cents"], s["lead_days"], s["id"]))
            shortfall += more
            bought[(s["id"], w)] += more
            cost += more * s["unit_cost_cents"]
        units += shortfall
    by_id = {s["id"]: s for s in offers}
    purchases = tuple(Purchase(product_id, sid, w, q, by_id[sid]["unit_cost_cents"], by_id[sid]["lead_days"])
                      for (sid, w), q in sorted(bought.items()))
    return units, cost, purchases


Best = tuple[int, int, tuple[int, ...], tuple[Purchase, ...]]  # units, cost, assignment, purchases


def _per_product(orders: Iterable[Mapping[str, Any]], warehouses: Iterable[int], available: Mapping[tuple[int, int], int],
                 suppliers: Iterable[Mapping[str, Any]], today: int = 0, incoming: Iterable[tuple[int, int, int, int]] = ()
                 ) -> Iterator[tuple[int, list[dict[str, Any]], list[Best]]]:
    """Per product of `orders` (by id): its orders (by id), and every assignment of them to warehouses that
    serves them all in time, as (units, cost, assignment, purchases), in `itertools.product` order."""
    whs = sorted(set(warehouses))
    by_product: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for o in orders:
        by_product[o["product_id"]].append(dict(o))
    offers: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in suppliers:
        if s["active"]:
            offers[s["product_id"]].append(dict(s))
    arriving: dict[int, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for w, p, units, day in incoming:
        arriving[p][w].append((day, units))
    for pid in sorted(by_product):
        mine = sorted(by_product[pid], key=lambda o: o["id"])
        if len(whs) ** len(mine) > MAX_ASSIGNMENTS:
            raise ValueError(f"product {pid} has {len(mine)} due orders over {len(whs)} warehouses: too many "
                             "assignments to search")
        feasible = []
        for assignment in itertools.product(whs, repeat=len(mine)):
            found = _plan_for(assignment, mine, available, offers[pid], pid, today, arriving[pid])
            if found is not None:
                feasible.append((found[0], found[1], assignment, found[2]))
        yield pid, mine, feasible


def _search(orders: Iterable[Mapping[str, Any]], warehouses: Iterable[int], available: Mapping[tuple[int, int], int],
            suppliers: Iterable[Mapping[str, Any]], today: int = 0,
            incoming: Iterable[tuple[int, int, int, int]] = ()) -> dict[int, tuple[list[dict[str, Any]], Best | None]]:
    """Per product of `orders`: its orders (by id) and the assignment buying the fewest units, then the
    cheapest (ties: the first in `itertools.product` order), or None when no assignment serves them all."""
    return {pid: (mine, min(feasible, key=lambda b: b[:2], default=None))
            for pid, mine, feasible in _per_product(orders, warehouses, available, suppliers, today, incoming)}


@dataclass(frozen=True)
class Completion:
    """One way to finish a product's open due orders from a state part-way through: the units it still buys,
    what they cost, and the warehouse each order ships from."""

    units: int
    cost_cents: int
    warehouse_of: Mapping[int, int]  # due order id -> warehouse


def completions(orders: Iterable[Mapping[str, Any]], warehouses: Iterable[int], today: int,
                stock_now: Mapping[tuple[int, int], int], incoming: Iterable[tuple[int, int, int, int]],
                suppliers: Iterable[Mapping[str, Any]]) -> dict[int, list[Completion]]:
    """From a state part-way through a task: per product of `orders` (the due orders not yet shipped), every
    assignment of them to warehouses that can still ship each whole from one warehouse by its due day, with
    the fewest units that assignment must still buy and their cost (cheapest among those); an empty list
    when no plan can serve them any more.

    The model of `fewest_units`, from day `today` instead of day 0: `stock_now` is (warehouse, product) ->
    units free now (on hand, minus what other customers' orders hold; what these orders hold themselves
    counts as free, since an allocation can be released); `incoming` lists open purchase orders as
    (warehouse, product, units, arrival day); a purchase placed now from an active supplier arrives on day
    ``today + lead_days``. For one assignment, a warehouse's orders are taken by (due day, id); the units
    that must be bought by order k's due day are ``max(0, demand of orders 1..k - stock now - units
    arriving there by that day)``, the running maximum of which is what the assignment buys, each unit
    from the cheapest supplier that arrives in time for the first order that needs it.

    The checks use it to decide whether the goal can still be reached, and to credit only the steps some
    finishing plan keeps (an allocation at the warehouse that plan ships the order from)."""
    return {pid: [Completion(units, cost, {o["id"]: w for o, w in zip(mine, assignment)})
                  for units, cost, assignment, _ in feasible]
            for pid, mine, feasible in _per_product(orders, warehouses, stock_now, suppliers, today, incoming)}


def fewest_units(orders: Iterable[Mapping[str, Any]], warehouses: Iterable[int],
                 available: Mapping[tuple[int, int], int], suppliers: Iterable[Mapping[str, Any]]) -> dict[int, ProductPlan]:
    """Per product of `orders`, the plan buying the fewest units (then the cheapest) that ships them all on time.

    `orders`: the due orders (id, product_id, quantity, due_day); `warehouses`: warehouse ids;
    `available`: (warehouse, product) -> units available on day 0 (on hand minus reserved; absent is 0);
    `suppliers`: supplier rows (id, product_id, unit_cost_cents, lead_days, active; inactive ones are
    ignored). Raises NoPlan when a product's orders cannot all ship on time, ValueError when a product
    has too many due orders for the exhaustive search.
    """
    plans: dict[int, ProductPlan] = {}
    for pid, (mine, best) in _search(orders, warehouses, available, suppliers).items():
        if best is None:
            raise NoPlan(f"no assignment ships every due order of product {pid} on time")
        plans[pid] = ProductPlan(pid, best[0], best[1], {o["id"]: w for o, w in zip(mine, best[2])}, best[3])
    return plans
