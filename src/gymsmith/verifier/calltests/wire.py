"""The result channel from the sandbox, read on the trusted side: strict, bounded, data only.

The driver process (which runs the agent's code, so everything it sends may be forged) writes one JSON
object per line on a private pipe:

    {"test": i}                                    test i of the group starts
    {"slot": k, "v": VALUE}                        slot k observed a value
    {"slot": k, "raised": [[module, qualname], ...]}   slot k raised: the exception class's MRO
    {"slot": k, "raised": [...], "is": bool}       in `pytest.raises(E)`: and whether it is an instance of E
    {"done": i, "ok": true} | {"done": i, "ok": false, "error": "TypeName"}
    {"done": i, "ok": false, "error": "TypeName", "ended": true}   and pytest's session ends here (an interrupt)
    {"import_error": "TypeName"}                   the driver's imports (the code under test) failed

VALUE is tagged so that every builtin type survives exactly: null, true, false, a JSON string, or one of
{"i": "<decimal>"}, {"f": "<repr>"}, {"b": "<hex>"}, {"l": [...]}, {"t": [...]}, {"s": [...]}, {"fs": [...]},
{"d": [[k, v], ...]}, {"x": "<type name>"} (a value of any other type: never equal to anything).

`read_stream` turns the bytes into per-test records of decoded plain builtins. Anything malformed —
not JSON, an unknown tag, a slot out of order or twice, a test out of order, an oversized number, too
deep a value — makes the whole stream MALFORMED: honest code never writes to this pipe, so a stream that
is not exactly the protocol was written by the code under test, and every test it carries fails.
"""

from __future__ import annotations

import enum
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 64
MAX_INT_DIGITS = 4000      # below CPython's int/str conversion limit
MAX_ITEMS = 50_000         # values in one stream, all slots together (a hidden test observes a few hundred)
MAX_SAME_HASH = 8          # elements of one set (or keys of one dict) sharing a hash: more is an attack on hashing
DECODE_BUDGET_S = 10.0     # decoding is linear in the (bounded) size, ~1 s at the bound; a backstop, never reached


class Malformed(ValueError):
    """The stream is not exactly the protocol."""


class Opaque:
    """A value the driver could not express as plain data (an object of another type): equal to nothing."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<opaque {self.type_name[:60]}>"


@dataclass(frozen=True)
class Raised:
    """Slot outcome: the expression raised. `mro` lists (module, qualname) of the exception's classes; `taken`, in a
    `pytest.raises` block, whether the driver found it an instance of a class the test named (None elsewhere)."""

    mro: tuple[tuple[str, str], ...]
    taken: bool | None = None


class StreamStatus(str, enum.Enum):
    OK = "ok"
    MALFORMED = "malformed"


@dataclass
class TestRecord:
    __test__ = False
    slots: list[Any] = field(default_factory=list)   # decoded values or Raised, in slot order
    finished: bool = False                            # {"done": i, "ok": true} arrived
    error: str | None = None                          # the driver's statements raised (an uncaught exception)
    ended: bool = False                               # ... and pytest's session would end there (KeyboardInterrupt)


@dataclass
class Stream:
    status: StreamStatus
    tests: dict[int, TestRecord]
    import_error: str | None = None
    reason: str = ""


def _distinct_hashes(items: list[Any]) -> None:
    """Refuse elements built to collide: equal hashes of unequal values make a set or dict quadratic to build.

    Python's hashes of ints, floats and tuples are the same in every process, so such values are easy to make."""
    counts: dict[int, int] = {}
    for item in items:
        try:
            h = hash(item)
        except TypeError:
            raise Malformed("unhashable set element or dict key") from None
        counts[h] = counts.get(h, 0) + 1
        if counts[h] > MAX_SAME_HASH:
            raise Malformed("set elements or dict keys built to share a hash")


class _Decoder:
    def __init__(self) -> None:
        self.items = 0
        self.deadline = time.monotonic() + DECODE_BUDGET_S

    def value(self, v: Any, depth: int = 0) -> Any:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise Malformed("too many values")
        if self.items % 1024 == 0 and time.monotonic() > self.deadline:
            raise Malformed("too slow to decode")
        if depth > MAX_DEPTH:
            raise Malformed("value nested too deeply")
        if v is None or v is True or v is False or type(v) is str:
            return v
        if type(v) is not dict or len(v) != 1:
            raise Malformed(f"not a tagged value: {type(v).__name__}")
        (tag, body), = v.items()
        if tag == "i":
            if type(body) is not str or not (0 < len(body) <= MAX_INT_DIGITS) or body.count("-") > 1 \
                    or not ((digits := body.lstrip("-")).isascii() and digits.isdigit()):
                raise Malformed("bad integer")
            return int(body)
        if tag == "f":
            if type(body) is not str or len(body) > 40:
                raise Malformed("bad float")
            try:
                out = float(body)
            except ValueError:
                raise Malformed("bad float") from None
            if math.isnan(out) and body not in ("nan", "-nan"):
                raise Malformed("bad float")
            return out
        if tag == "b":
            if type(body) is not str:
                raise Malformed("bad bytes")
            try:
                return bytes.fromhex(body)
            except ValueError:
                raise Malformed("bad bytes") from None
        if tag == "x":
            if type(body) is not str:
                raise Malformed("bad opaque value")
            return Opaque(body[:200])
        if type(body) is not list:
            raise Malformed(f"bad container {tag!r}")
        if tag in ("l", "t", "s", "fs"):
            items = [self.value(x, depth + 1) for x in body]
            if tag == "l":
                return items
            if tag == "t":
                return tuple(items)
            _distinct_hashes(items)
            return set(items) if tag == "s" else frozenset(items)
        if tag == "d":
            pairs = []
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise Malformed("bad dict item")
                pairs.append((self.value(pair[0], depth + 1), self.value(pair[1], depth + 1)))
            _distinct_hashes([k for k, _ in pairs])
            mapping = dict(pairs)
            if len(mapping) != len(pairs):
                raise Malformed("duplicate dict key")
            return mapping
        raise Malformed(f"unknown tag {tag!r}")


def _raised(body: Any, taken: Any = None) -> Raised:
    if type(body) is not list or not body or len(body) > 64 or not (taken is None or type(taken) is bool):
        raise Malformed("bad exception record")
    mro = []
    for entry in body:
        if type(entry) is not list or len(entry) != 2 or not all(type(x) is str and len(x) <= 200 for x in entry):
            raise Malformed("bad exception record")
        mro.append((entry[0], entry[1]))
    return Raised(tuple(mro), taken)


def _int_field(message: dict, key: str, limit: int) -> int:
    value = message.get(key)
    if type(value) is not int or not (0 <= value < limit):
        raise Malformed(f"bad {key!r}")
    return value


class StreamReader:
    """Decodes a group's stream as its bytes arrive (`feed`), so the trusted side can judge each assertion while the
    driver waits for the verdict (`runner.CallRunner.observe(stop_at_failure=...)`). The first thing that is not
    exactly the protocol makes the whole stream MALFORMED, and nothing fed after that is read."""

    def __init__(self, slots_per_test: list[int]):
        self.slots_per_test = slots_per_test
        self.decoder = _Decoder()
        self.tests: dict[int, TestRecord] = {}
        self.current: int | None = None   # the test started and not yet done
        self.import_error: str | None = None
        self.malformed = ""
        self._pending = b""

    def feed(self, data: bytes) -> list[tuple[int, int]]:
        """Read every complete line of `data` (with what was left of the last feed); returns the (test, slot) of each
        slot observed in it, in order."""
        if self.malformed:
            return []
        *lines, self._pending = (self._pending + data).split(b"\n")
        self.decoder.deadline = time.monotonic() + DECODE_BUDGET_S
        observed = []
        try:
            for line in lines:
                slot = self._line(line)
                if slot is not None:
                    observed.append(slot)
        except Malformed as exc:
            self.malformed = str(exc) or "malformed"
        return observed

    def stream(self) -> Stream:
        """The stream once every byte is fed (an unfinished last line is read as a line)."""
        if self._pending and not self.malformed:
            pending, self._pending = self._pending, b""
            try:
                self._line(pending)
            except Malformed as exc:
                self.malformed = str(exc) or "malformed"
        if self.malformed:
            return Stream(status=StreamStatus.MALFORMED, tests={}, reason=self.malformed)
        return Stream(status=StreamStatus.OK, tests=self.tests, import_error=self.import_error)

    def _line(self, line: bytes) -> tuple[int, int] | None:
        try:
            message = json.loads(line.decode())
        except UnicodeDecodeError:
            raise Malformed("not UTF-8") from None
        except (ValueError, RecursionError):
            raise Malformed("a line that is not JSON") from None
        if type(message) is not dict:
            raise Malformed("a line that is not an object")
        keys, tests, current = set(message), self.tests, self.current
        if keys == {"import_error"}:
            if tests or self.import_error is not None or type(message["import_error"]) is not str:
                raise Malformed("import error out of place")
            self.import_error = message["import_error"][:200]
        elif keys == {"test"}:
            i = _int_field(message, "test", len(self.slots_per_test))
            if current is not None or i in tests or self.import_error is not None or (tests and i != max(tests) + 1) or (not tests and i != 0):
                raise Malformed("test started out of order")
            tests[i], self.current = TestRecord(), i
        elif "slot" in keys and keys in ({"slot", "v"}, {"slot", "raised"}, {"slot", "raised", "is"}):
            if current is None:
                raise Malformed("observation outside a test")
            record = tests[current]
            k = _int_field(message, "slot", self.slots_per_test[current])
            if k != len(record.slots):
                raise Malformed("slot out of order")
            record.slots.append(self.decoder.value(message["v"]) if "v" in message
                                else _raised(message["raised"], message.get("is")))
            return current, k
        elif "done" in keys and keys <= {"done", "ok", "error", "ended"}:
            if current is None or message.get("done") != current or type(message.get("ok")) is not bool:
                raise Malformed("test finished out of order")
            record = tests[current]
            if message["ok"]:
                if keys != {"done", "ok"} or len(record.slots) != self.slots_per_test[current]:
                    raise Malformed("test finished without all its observations")
                record.finished = True
            else:
                error = message.get("error")
                if type(error) is not str or message.get("ended", True) is not True:
                    raise Malformed("bad error")
                record.error = error[:200]
                record.ended = "ended" in keys
            self.current = None
        else:
            raise Malformed("unknown message")
        return None


def read_stream(data: bytes, slots_per_test: list[int]) -> Stream:
    """Decode the driver's bytes for a group whose tests have `slots_per_test` slots each."""
    reader = StreamReader(slots_per_test)
    reader.feed(data)
    return reader.stream()


def signature(value: Any) -> str:
    """The exact type structure of a decoded value: equal signatures mean equal types all the way down."""
    t = type(value)
    if t in (list, tuple):
        return f"{t.__name__}[{','.join(signature(v) for v in value)}]"
    if t in (set, frozenset):
        return f"{t.__name__}{{{','.join(sorted(signature(v) for v in value))}}}"
    if t is dict:
        return "dict{" + ",".join(sorted(f"{signature(k)}:{signature(v)}" for k, v in value.items())) + "}"
    if t is Raised:
        return "raised"
    if t is Opaque:
        return f"opaque:{value.type_name}"
    return t.__name__
