import pytest

from ratelimit import TokenBucket, admitted


def test_starts_full():
    assert TokenBucket(3).tokens == 3


def test_rejects_zero_capacity():
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_allows_up_to_capacity_at_once():
    b = TokenBucket(2, now=0)
    assert [b.allow(0), b.allow(0), b.allow(0)] == [True, True, False]


def test_refills_over_time():
    b = TokenBucket(1, refill_per_tick=1)
    b.allow(0)
    assert b.allow(1)


def test_refill_is_capped():
    b = TokenBucket(2, refill_per_tick=5)
    b.allow(0)
    b._refill(10)
    assert b.tokens == 2


def test_cost_larger_than_tokens():
    assert not TokenBucket(2).allow(0, cost=3)


def test_wait_time_zero_when_available():
    assert TokenBucket(2).wait_time(0) == 0


def test_wait_time_rounds_up():
    b = TokenBucket(4, refill_per_tick=3)
    b.allow(0, cost=4)
    assert b.wait_time(0, cost=4) == 2


def test_wait_time_without_refill():
    b = TokenBucket(1, refill_per_tick=0)
    b.allow(0)
    assert b.wait_time(0) is None


def test_time_going_backwards():
    b = TokenBucket(1, now=5)
    with pytest.raises(ValueError):
        b.allow(4)


def test_admitted_sequence():
    assert admitted(TokenBucket(2, refill_per_tick=1), [0, 0, 0, 1, 3, 3, 3]) == [0, 0, 1, 3, 3]
