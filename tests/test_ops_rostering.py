"""The cheapest legal roster (`ops.rostering.cheapest_roster`) against exhaustive search on small weeks, and
the staff economy built on it: a roster dearer than the cheapest scores below it."""

from __future__ import annotations

import itertools
import random

import pytest

from gymsmith.families.ops.rostering import NoRoster, cheapest_roster

HOURS, MAX_DAYS = 8, 2


def _legal(shifts, staff, rostered):
    by_id = {s["id"]: s for s in staff}
    for sid in {s for s, _, _ in shifts}:
        days = [d for s, d, _ in shifts if s == sid] + [r["day"] for r in rostered if r["staff_id"] == sid]
        hours = HOURS * len([1 for s, _, _ in shifts if s == sid]) + sum(r["hours"] for r in rostered if r["staff_id"] == sid)
        off = {int(d) for d in by_id[sid]["unavailable_days"].split(",") if d}
        if len(days) != len(set(days)) or len(days) > MAX_DAYS or hours > by_id[sid]["max_hours_week"] or off & set(days):
            return False
    return True


def _brute(staff, missing, rostered):
    """The cheapest cost over every way to fill each missing place with a person (or None)."""
    places = [slot for slot, n in sorted(missing.items()) for _ in range(n)]
    best = None
    for people in itertools.product([s["id"] for s in staff], repeat=len(places)):
        shifts = [(sid, d, w) for sid, (d, w) in zip(people, places)]
        if _legal(shifts, staff, rostered):
            cost = sum(next(s["hourly_cents"] for s in staff if s["id"] == sid) * HOURS for sid, _, _ in shifts)
            best = cost if best is None else min(best, cost)
    return best


def _week(rng):
    staff = [{"id": 10 + i, "max_hours_week": rng.choice([8, 16, 24]), "hourly_cents": rng.randint(15, 40) * 100,
              "unavailable_days": ",".join(map(str, rng.sample(range(3), rng.randint(0, 1))))} for i in range(rng.randint(2, 4))]
    missing = {(d, w): rng.randint(0, 2) for d in range(3) for w in (1, 2) if rng.random() < 0.6}
    while sum(missing.values()) > 5:  # keep the exhaustive search small
        missing[max(missing, key=missing.get)] -= 1
    rostered = [{"staff_id": s["id"], "day": day, "hours": HOURS} for s in staff if rng.random() < 0.3
                for day in [rng.choice([d for d in range(3) if str(d) not in s["unavailable_days"].split(",")])]]
    return staff, missing, rostered


def test_cheapest_roster_matches_exhaustive_search_on_300_small_weeks():
    rng = random.Random(7)
    solved = refused = 0
    for _ in range(300):
        staff, missing, rostered = _week(rng)
        expected = _brute(staff, missing, rostered)
        if expected is None:
            with pytest.raises(NoRoster):
                cheapest_roster(staff, missing, rostered, shift_hours=HOURS, max_days=MAX_DAYS)
            refused += 1
            continue
        roster = cheapest_roster(staff, missing, rostered, shift_hours=HOURS, max_days=MAX_DAYS)
        shifts = [(s.staff_id, s.day, s.warehouse_id) for s in roster]
        assert _legal(shifts, staff, rostered)
        for slot, n in missing.items():
            assert sum(1 for s in roster if (s.day, s.warehouse_id) == slot) == n
        assert sum(s.cost_cents for s in roster) == expected
        solved += 1
    assert solved > 100 and refused > 10  # both outcomes are exercised


def test_cheapest_roster_prefers_the_cheaper_person_and_is_deterministic():
    staff = [{"id": 1, "max_hours_week": 40, "hourly_cents": 3000, "unavailable_days": ""},
             {"id": 2, "max_hours_week": 40, "hourly_cents": 2000, "unavailable_days": "1"}]
    missing = {(0, 1): 1, (1, 1): 1}
    roster = cheapest_roster(staff, missing, [], shift_hours=HOURS, max_days=MAX_DAYS)
    assert [(s.staff_id, s.day) for s in roster] == [(2, 0), (1, 1)]  # 2 is off on day 1
    assert roster == cheapest_roster(staff, missing, [], shift_hours=HOURS, max_days=MAX_DAYS)


def test_each_distinct_flow_is_solved_once_and_the_answer_is_not_shared(monkeypatch):
    """Every verification of a task prices the same start state: the flow is solved once per distinct input
    (a zero bonus is no bonus), and what a caller does with the roster it gets does not reach the next caller."""
    from gymsmith.families.ops import rostering

    rng = random.Random(5)
    staff, missing, rostered = _week(rng)
    solved = []
    real = rostering._solve_roster
    monkeypatch.setattr(rostering, "_solve_roster", lambda *a: solved.append(a) or real(*a))
    monkeypatch.setattr(rostering, "_SOLVED", {})
    try:
        first = cheapest_roster(staff, missing, rostered, shift_hours=HOURS, max_days=MAX_DAYS)
    except NoRoster:
        pytest.skip("this seed's week has no roster")
    first.clear()
    again = cheapest_roster(staff, missing, rostered, shift_hours=HOURS, max_days=MAX_DAYS)
    assert len(solved) == 1 and again == real(staff, missing, rostered, HOURS, MAX_DAYS, {}) and again
    rostering._roster(staff, missing, rostered, HOURS, MAX_DAYS, {(staff[0]["id"], 0, 1): 0})
    assert len(solved) == 1
    other = [dict(s, hourly_cents=s["hourly_cents"] + 1) for s in staff]
    cheapest_roster(other, missing, rostered, shift_hours=HOURS, max_days=MAX_DAYS)
    assert len(solved) == 2  # another input is solved
