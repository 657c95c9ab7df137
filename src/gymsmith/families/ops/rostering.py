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
costing the member's wage for `shift_hours`. Successive shortest paths (Bellman-Ford, since residual edges
have negative costs) give the cheapest flow of every size, and capacities are integers, so the cheapest
flow that covers every missing shift is a roster, and the cheapest one.
"""

from __future__ import annotations

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


class NoRoster(ValueError):
    """The labour rules leave too few people to cover the missing shifts."""


class _Graph:
    def __init__(self) -> None:
        self.edges: list[list[int]] = []  # [to, capacity left, cost]; edge i ^ 1 is its reverse
        self.out: dict[int, list[int]] = {}

    def add(self, a: int, b: int, capacity: int, cost: int) -> int:
        for frm, to, cap, c in ((a, b, capacity, cost), (b, a, 0, -cost)):
            self.out.setdefault(frm, []).append(len(self.edges))
            self.edges.append([to, cap, c])
        return len(self.edges) - 2

    def cheapest_flow(self, source: int, sink: int, want: int) -> int:
        """Push up to `want` units from source to sink along cheapest paths; returns the units pushed."""
        pushed = 0
        while pushed < want:
            dist, via = {source: 0}, {}
            changed = True
            while changed:  # Bellman-Ford over the residual graph
                changed = False
                for node, d in list(dist.items()):
                    for i in self.out.get(node, ()):
                        to, cap, cost = self.edges[i]
                        if cap > 0 and d + cost < dist.get(to, d + cost + 1):
                            dist[to], via[to] = d + cost, i
                            changed = True
            if sink not in dist:
                break
            path, node = [], sink
            while node != source:
                path.append(via[node])
                node = self.edges[via[node] ^ 1][0]
            amount = min([want - pushed] + [self.edges[i][1] for i in path])
            for i in path:
                self.edges[i][1] -= amount
                self.edges[i ^ 1][1] += amount
            pushed += amount
        return pushed


def cheapest_roster(staff: Iterable[Mapping[str, Any]], missing: Mapping[tuple[int, int], int],
                    rostered: Iterable[Mapping[str, Any]], *, shift_hours: int, max_days: int) -> list[Shift]:
    """The cheapest shifts that cover `missing` under the labour rules, sorted by (day, warehouse, staff).

    `staff`: rows with id, max_hours_week, hourly_cents and unavailable_days (comma-separated days);
    `missing`: (day, warehouse) -> people still needed there; `rostered`: the shifts already in the week
    (staff_id, day, hours), which count against each person's days and hours. Ties between rosters of the
    same cost are broken by the order of `staff` and of the days, so the result is deterministic.
    Raises NoRoster when no legal roster covers every missing shift.
    """
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
                    choices.append((graph.add(person_day, node, 1, wage), s["id"], d, w, wage))
    if graph.cheapest_flow(source, sink, need) < need:
        raise NoRoster(f"the labour rules leave too few people to cover {need} missing shifts")
    return sorted((Shift(sid, d, w, wage) for edge, sid, d, w, wage in choices if graph.edges[edge][1] == 0),
                  key=lambda shift: (shift.day, shift.warehouse_id, shift.staff_id))
