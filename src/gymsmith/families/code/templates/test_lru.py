import pytest

from lru import LRUCache


def test_default_capacity_is_two():
    assert LRUCache().capacity == 2


def test_rejects_zero_capacity():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_get_missing_returns_default():
    assert LRUCache(2).get("x", 7) == 7


def test_put_then_get():
    c = LRUCache(2)
    c.put("a", 1)
    assert c.get("a") == 1


def test_evicts_least_recently_used():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("c", 3)
    assert c.get("a") is None and c.get("c") == 3


def test_get_refreshes_recency():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.get("a")
    c.put("c", 3)
    assert c.keys() == ["a", "c"]


def test_len_never_exceeds_capacity():
    c = LRUCache(3)
    for i in range(10):
        c.put(i, i)
    assert len(c) == 3


def test_overwrite_keeps_single_entry():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("a", 5)
    assert len(c) == 1 and c.get("a") == 5


def test_capacity_one_keeps_latest():
    c = LRUCache(1)
    c.put("a", 1)
    c.put("b", 2)
    assert c.keys() == ["b"]
