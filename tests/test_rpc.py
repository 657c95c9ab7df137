"""The link between a call check's driver and the package process (`verifier/calltests/rpc.py`).

Two real processes on real pipes, as `server.py` runs them, without the sandbox around them (the sandboxed path,
namespaces included, is tested in test_calltests.py). The driver side is this test process; the package side is
a forked child that imports a small package from a temporary directory.
"""

from __future__ import annotations

import os
import sys

import pytest

from gymsmith.verifier.calltests import rpc

PACKAGE = '''
import os

class Money:
    def __init__(self, cents):
        self.cents = cents
    def __add__(self, other):
        return Money(self.cents + (other.cents if isinstance(other, Money) else other))
    __radd__ = __add__
    def __eq__(self, other):
        return isinstance(other, Money) and other.cents == self.cents
    def __hash__(self):
        return hash(self.cents)

class Opaque:
    pass

class Oops(ValueError):
    pass

def double(x):
    return 2 * x

def count(n):
    for i in range(n):
        yield i

def apply(fn, *args):
    return fn(*args)

def peek(obj, name):
    return getattr(obj, name)

def fail():
    raise Oops("no")

def first_of(iterable):
    return next(iter(iterable))

def sort_in_place(items):
    items.sort()

def push_first(rows, value):
    rows[0].append(value)

def append(items, value):
    items.append(value)
    return items

def same(a, b):
    return a is b

_SEEN = []

def seen_before(x):
    found = any(s is x for s in _SEEN)
    _SEEN.append(x)
    return found

class Keeper:
    def __init__(self, table):
        self.table = table
    def put(self, key, value):
        self.table[key] = value
    def total(self):
        return sum(self.table.values())

class Bag:
    def __init__(self):
        self.items = []
    def add(self, x):
        self.items.append(x)
    def view(self):
        return self.items
    def count(self):
        return len(self.items)

def garble():
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):  # every descriptor it holds, whatever its number
        if fd > 2:
            try:
                os.write(fd, b"not the protocol\\n")
            except OSError:
                pass
    return 1
'''


@pytest.fixture()
def link(tmp_path):
    (tmp_path / "pkg.py").write_text(PACKAGE)
    requests_r, requests_w = os.pipe()
    answers_r, answers_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the package process
        try:
            keep = sorted((requests_r, answers_w))
            os.closerange(3, keep[0])  # as server.py: the package process holds its link and nothing else
            os.closerange(keep[0] + 1, keep[1])
            os.closerange(keep[1] + 1, 1 << 16)
            sys.path.insert(0, str(tmp_path))
            rpc.Link(requests_r, answers_w, rpc.PackagePolicy()).serve_forever()
        finally:
            os._exit(0)
    os.close(requests_r)
    os.close(answers_w)
    driver = rpc.Link(answers_r, requests_w, rpc.DriverPolicy("tests.test_x"))
    yield driver
    os.close(requests_w)
    os.waitpid(pid, 0)


def test_plain_values_cross_exactly_and_objects_stay_with_the_package(link):
    pkg = link.request("import", "pkg", ((),))
    assert type(pkg.double(21)) is int and pkg.double(21) == 42
    assert pkg.double([1, "a"]) == [1, "a", 1, "a"] and type(pkg.double((1,))) is tuple
    assert pkg.double(b"ab") == b"abab" and pkg.double(1.5) == 3.0
    assert pkg.apply(len, range(5)) == 5  # a builtin by name, a range by value
    money = pkg.Money(5)
    assert isinstance(money, link.Proxy) and money.cents == 5
    assert (money + 1).cents == 6 and (1 + money).cents == 6  # the package's own __add__ and __radd__
    assert money == pkg.Money(5) and money != pkg.Money(6) and hash(money) == hash(5)
    opaque = pkg.Opaque()
    assert opaque == opaque and opaque != pkg.Opaque()  # identity, with no bouncing between the sides


def test_iteration_callbacks_and_exceptions(link):
    pkg = link.request("import", "pkg", ((),))
    assert list(pkg.count(4)) == [0, 1, 2, 3]
    assert pkg.apply(lambda x, y: x * y, 6, 7) == 42  # the package calls back the test's function
    assert pkg.first_of(x * 3 for x in [5, 6]) == 15   # and iterates the test's generator
    with pytest.raises(ValueError) as raised:
        pkg.fail()
    assert type(raised.value).__name__ == "Oops" and rpc.exception_mro(raised.value)[0] == ["pkg", "Oops"]
    with pytest.raises(AttributeError):
        pkg.double.no_such_attribute  # noqa: B018 - the package's AttributeError is the builtin one here


def test_the_package_reaches_nothing_of_the_driver_but_what_the_test_handed_it(link):
    pkg = link.request("import", "pkg", ((),))
    secret = {"expected": 42}

    def handed(x):
        return x + len(secret)

    class Handed:
        def __call__(self, x):
            return x + len(secret)

    for name in ("__globals__", "__code__", "__closure__", "__builtins__", "__dict__"):
        with pytest.raises(AttributeError):
            pkg.peek(Handed(), name)
    # a function is a function of the package's own there (`rpc.Link._function`): its insides are the package's
    assert pkg.peek(handed, "__qualname__").endswith("handed")
    with pytest.raises(AttributeError):
        pkg.peek((x for x in [1]), "gi_frame")
    assert pkg.peek(handed, "__name__") == "handed" and pkg.apply(handed, 1) == 2
    # the driver never resolves a name or runs a recipe the package sends
    for forged in ({"std": ["os", "system"]}, {"rd": [{"std": ["os", "system"]}, {"t": ["true"]}, None, None, None]}):
        with pytest.raises(rpc.LinkBroken):
            link.decode(forged)


def test_a_package_that_breaks_the_protocol_breaks_the_link_for_good(link):
    pkg = link.request("import", "pkg", ((),))
    with pytest.raises(rpc.LinkBroken):
        pkg.garble()
    with pytest.raises(rpc.LinkBroken):
        pkg.double(1)


def test_the_code_changes_the_tests_containers_as_it_would_in_one_process(link):
    """Lists, dicts, sets and bytearrays cross by value, but what either side does to one the other holds is seen
    there as in one process: an argument sorted or emptied in place, a dict an object keeps and fills later, a list
    the package hands out and changes afterwards, the test's change to one the package kept. And the same container
    is the same object on the other side each time it crosses (a seventy-ninth attacker's fix emptied the caller's
    graph unseen; code could tell the verifier by `is` on an argument passed twice)."""
    pkg = link.request("import", "pkg", ((),))
    items = [3, 1, 2]
    pkg.sort_in_place(items)
    assert items == [1, 2, 3]
    assert pkg.append(items, 4) is items and items == [1, 2, 3, 4]
    grid = [[1], [2]]
    row = grid[0]
    pkg.push_first(grid, 9)
    assert grid == [[1, 9], [2]] and grid[0] is row  # nested containers changed in place, not replaced
    assert pkg.same(items, items) is True and pkg.same(items, [1, 2, 3, 4]) is False
    assert pkg.seen_before(items) is False and pkg.seen_before(items) is True and pkg.seen_before([1]) is False
    table = {"a": 1}
    keeper = pkg.Keeper(table)
    keeper.put("b", 2)  # a call that does not pass `table`
    assert table == {"a": 1, "b": 2}
    table["c"] = 4  # the test's change, to a dict the package kept
    assert keeper.total() == 7
    bag = pkg.Bag()
    view = bag.view()
    bag.add("x")
    assert view == ["x"] and bag.view() is view
    view.append("y")
    assert bag.count() == 2
    flags = {1, 2}
    pkg.apply(lambda s: s.discard(1), flags)  # the test's own function, called back with the test's set
    assert flags == {2} and pkg.apply(len, flags) == 1
    data = bytearray(b"ab")
    pkg.apply(lambda b: b.extend(b"c"), data)
    assert data == bytearray(b"abc")


def test_containers_that_crossed_are_forgotten_when_neither_side_holds_them(link):
    pkg = link.request("import", "pkg", ((),))
    for i in range(3000):
        assert pkg.append([i], i) == [i, i]
    assert len(link.shared) < 300


def test_a_package_cannot_change_containers_it_was_never_given(link):
    """A change the package sends for a container the test never handed it, or of another kind, breaks the link."""
    pkg = link.request("import", "pkg", ((),))
    items = [1]
    pkg.append(items, 2)
    sid = link.shared_ids[id(items)]
    for forged in ([[sid + 1000, "l", []]], [[sid, "d", []]], [[sid, "l", {"l": []}]], [["1", "l", []]]):
        with pytest.raises(rpc.LinkBroken):
            link.receive_shares({"s": forged})
        link.broken = None
    assert items == [1, 2]
