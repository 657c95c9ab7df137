"""The cheapest legal roster that covers a week's missing shifts.

A pure function of data every agent can read (the staff table, the shift needs, the shifts already in the
roster); no randomness. The generator makes this roster the oracle's witness, and the hidden checks price
an agent's roster against it (`ops.checks`, staff economy), so a roster that costs more than it must scores
below the cheapest one (found by red-teaming: economy was measured against the generator's random roster,
so a cheaper roster and the random one both scored 1.0).

The model is a min-cost flow. Source -> staff member (capacity: the shifts the labour rules still allow
them this week: at most `max_days` working days and `max_hours_week` hours, less what they already work)
-> (staff member, day) (capacity 1: one shift a day; only days they are available and not already working)
-> (day, warehouse) slot (capacity: the people still missing there) -> sink. A unit of flow is one shift,
costing the member's wage for `shift_hours`. Successive shortest paths (a FIFO label-correcting search, since
residual edges have negative costs) give the cheapest flow of every size, and capacities are integers, so the cheapest
flow that covers every missing shift is a roster, and the cheapest one.

`most_kept` uses the same flow to credit an agent's partial roster: how many of its shifts a legal roster
within the budget can keep (a shift every finishing roster must remove is no progress).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shift:
    """One shift of the roster: who works, which day, where, and what it costs."""

    staff_id: int
    day: int
    warehouse_id: int
    cost_cents: int


CACHE_SIZE = 2048  # distinct flow problems whose answer is kept (a roster: a few dozen small tuples)
_SOLVED: dict[str, list[Shift] | None] = {}


class NoRoster(ValueError):
    """The labour rules leave too few people to cover the missing shifts."""


class _Graph:
    """A residual graph in parallel lists (edge i ^ 1 is edge i's reverse): the flow is most of a staffing
    check's time, and list lookups by index are what Python does fastest."""

    def __init__(self) -> None:
        self.to: list[int] = []
        self.capacity: list[int] = []  # left on each edge
        self.cost: list[int] = []
        self.out: dict[int, list[int]] = {}

    def add(self, a: int, b: int, capacity: int, cost: int) -> int:
        for frm, to, cap, c in ((a, b, capacity, cost), (b, a, 0, -cost)):
            self.out.setdefault(frm, []).append(len(self.to))
            self.to.append(to)
            self.capacity.append(cap)
            self.cost.append(c)
        return len(self.to) - 2

    def cheapest_flow(self, source: int, sink: int, want: int) -> int:
        """Push up to `want` units from source to sink along cheapest paths; returns the units pushed."""
        to, capacity, cost, out, none = self.to, self.capacity, self.cost, self.out, ()
        pushed = 0
        while pushed < want:
            # shortest paths in the residual graph (negative edges: a FIFO label-correcting search, i.e.
            # Bellman-Ford that only rescans nodes whose distance fell)
            dist, via, queued = {source: 0}, {}, {source}
            frontier = deque([source])
            while frontier:
                node = frontier.popleft()
                queued.discard(node)
                d = dist[node]
                for i in out.get(node, none):
                    if capacity[i] > 0:
                        t, nd = to[i], d + cost[i]
                        if t not in dist or nd < dist[t]:
                            dist[t], via[t] = nd, i
                            if t not in queued:
                                queued.add(t)
                                frontier.append(t)
            if sink not in dist:
                break
            path, node = [], sink
            while node != source:
                path.append(via[node])
                node = to[via[node] ^ 1]
            amount = min([want - pushed] + [capacity[i] for i in path])
            for i in path:
                capacity[i] -= amount
                capacity[i ^ 1] += amount
            pushed += amount
        return pushed


def cheapest_roster(staff: Iterable[Mapping[str, Any]], missing: Mapping[tuple[int, int], int],
                    rostered: Iterable[Mapping[str, Any]], *, shift_hours: int, max_days: int) -> list[Shift]:
    """The cheapest shifts that cover `missing` under the labour rules, sorted by (day, warehouse, staff).

    `staff`: rows with id, max_hours_week, hourly_cents and unavailable_days (comma-separated days);
    `missing`: (day, warehouse) -> people still needed there; `rostered`: the shifts already in the week
    (staff_id, day, hours), which count against each person's days and hours. Among rosters of the same
    cost the search picks one by the order of `staff`, of the days and of its queue: the same inputs always give
    the same roster.
    Raises NoRoster when no legal roster covers every missing shift.
    """
    roster = _roster(list(staff), missing, list(rostered), shift_hours, max_days, {})
    if roster is None:
        raise NoRoster(f"the labour rules leave too few people to cover {sum(missing.values())} missing shifts")
    return roster


def most_kept(staff: Iterable[Mapping[str, Any]], missing: Mapping[tuple[int, int], int],
              rostered: Iterable[Mapping[str, Any]], keep: Iterable[tuple[int, int, int]], budget_cents: int, *,
              shift_hours: int, max_days: int) -> int | None:
    """How many of the shifts `keep` ((staff_id, day, warehouse), e.g. an agent's partial roster) a legal roster
    that covers `missing` and costs at most `budget_cents` can keep; None when no such roster exists at all.

    Each shift of `keep` is given a bonus B off its cost and the cheapest roster is found for that B: with B
    above every wage the roster keeps as many as any legal roster can, and B = 0 is the cheapest roster. A
    binary search on B finds the roster keeping the most within the budget among those the bonuses reach (as
    B grows, a cheapest roster keeps more of `keep` and costs more). It is a lower bound on the true most, and
    exact whenever the roster keeping all it can is within the budget (an honest partial roster)."""
    staff, rostered, keep = list(staff), list(rostered), set(keep)

    def solve(bonus: int) -> tuple[int, int] | None:
        roster = _roster(staff, missing, rostered, shift_hours, max_days, dict.fromkeys(keep, bonus))
        if roster is None:
            return None
        return sum((s.staff_id, s.day, s.warehouse_id) in keep for s in roster), sum(s.cost_cents for s in roster)

    cheapest = solve(0)
    if cheapest is None or cheapest[1] > budget_cents:
        return None
    top = 1 + sum(s["hourly_cents"] for s in staff) * shift_hours
    most = solve(top)
    if most is not None and most[1] <= budget_cents:
        return most[0]
    best, lo, hi = cheapest[0], 0, top  # solve(lo) fits the budget, solve(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = solve(mid)
        if found is not None and found[1] <= budget_cents:
            lo, best = mid, max(best, found[0])
        else:
            hi = mid
    return best


def _roster(staff: list[Mapping[str, Any]], missing: Mapping[tuple[int, int], int], rostered: list[Mapping[str, Any]],
            shift_hours: int, max_days: int, bonus: Mapping[tuple[int, int, int], int]) -> list[Shift] | None:
    """`_solve_roster`, solved once per distinct input: every verification of a task prices the same start state
    (each sample of a group, each per-step value), and the flow is most of a staffing check's time."""
    bonus = {k: v for k, v in bonus.items() if v}  # a zero bonus changes nothing
    key = repr(([sorted(dict(s).items()) for s in staff], sorted(missing.items()),
                [sorted(dict(r).items()) for r in rostered], shift_hours, max_days, sorted(bonus.items())))
    if key not in _SOLVED:
        if len(_SOLVED) >= CACHE_SIZE:
            _SOLVED.pop(next(iter(_SOLVED)))  # the oldest
        _SOLVED[key] = _solve_roster(staff, missing, rostered, shift_hours, max_days, bonus)
    roster = _SOLVED[key]
    return None if roster is None else list(roster)


def _solve_roster(staff: list[Mapping[str, Any]], missing: Mapping[tuple[int, int], int], rostered: list[Mapping[str, Any]],
            shift_hours: int, max_days: int, bonus: Mapping[tuple[int, int, int], int]) -> list[Shift] | None:
    """The roster of least cost (each shift's wage, less its `bonus` by (staff_id, day, warehouse)) covering
    `missing`, or None when the rules leave too few people. `Shift.cost_cents` is the wage, never less."""
    used_days: dict[int, set[int]] = {}
    used_hours: dict[int, int] = {}
    for s in rostered:
        used_days.setdefault(s["staff_id"], set()).add(s["day"])
        used_hours[s["staff_id"]] = used_hours.get(s["staff_id"], 0) + s["hours"]
    slots = sorted((slot, n) for slot, n in missing.items() if n > 0)
    need = sum(n for _, n in slots)
    if not need:
        return []
    graph, source, sink = _Graph(), 0, 1
    slot_node = {slot: 2 + i for i, (slot, _) in enumerate(slots)}
    for slot, n in slots:
        graph.add(slot_node[slot], sink, n, 0)
    days_needed = sorted({day for day, _ in slot_node})
    next_node = 2 + len(slots)
    choices: list[tuple[int, int, int, int, int]] = []  # (edge, staff, day, warehouse, cost)
    for s in staff:
        off = {int(d) for d in str(s["unavailable_days"] or "").split(",") if d.strip()}
        busy = used_days.get(s["id"], set())
        room = min(max_days - len(busy), (s["max_hours_week"] - used_hours.get(s["id"], 0)) // shift_hours)
        days = [d for d in days_needed if d not in off and d not in busy]
        if room <= 0 or not days:
            continue
        person, next_node = next_node, next_node + 1
        graph.add(source, person, room, 0)
        wage = s["hourly_cents"] * shift_hours
        for day in days:
            person_day, next_node = next_node, next_node + 1
            graph.add(person, person_day, 1, 0)
            for (d, w), node in slot_node.items():
                if d == day:
                    edge = graph.add(person_day, node, 1, wage - bonus.get((s["id"], d, w), 0))
                    choices.append((edge, s["id"], d, w, wage))
    if graph.cheapest_flow(source, sink, need) < need:
        return None
    return sorted((Shift(sid, d, w, wage) for edge, sid, d, w, wage in choices if graph.capacity[edge] == 0),
                  key=lambda shift: (shift.day, shift.warehouse_id, shift.staff_id))
