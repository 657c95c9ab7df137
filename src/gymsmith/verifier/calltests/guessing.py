"""Which hidden tests only a computation passes: checks pinned to values the agent cannot read or assemble.

The agent's code runs beside a test's driver and can replace what the driver reports (docs/verifier.md,
properties 4 and 9), so passing a hidden test proves the code computes something only when the test's every
check needs a value the agent has no copy of. A red-team agent passed hidden tests by reporting, for each
observation, the value nearest to the buggy one among what it could read: the driver's own literals (a
round trip such as `str(parse(s)) == s` expects its input) and the shown tests' expected values turned from
bytes into str (a hidden test that is the shown one's text twin).

A second attacker passed the tests left by applying simple transformations to the test's inputs: separators
removed (`camelize('Camel_Case') == 'CamelCase'`), a number counted on (`'rc.9'` -> `'rc.10'`, `'3.4.5'` ->
`'4.0.0'`), whitespace and comments dropped, a class name with `()`. Values are therefore also compared by
*shape* (lower case, letters and digits only, every run of digits one `0`): a value whose shape is the shape of
a readable string with characters left out is guessable too. A third passed them by adding to an input: a plural
(`tableize('html') == 'htmls'`), a suffix or a prefix; a value whose shape is a readable shape of at least
MIN_GROWN characters with up to MAX_ADDED characters put in is guessable as well, and so is a number written in a
readable text (the port of `'http://h:82/'`), now that variants move the digits of texts. A fourth memorised the
release's tests and, for a variant whose input swapped one word of a release test's input, swapped the new word into
the same place of that test's answer (number-parser: `'... son fifty seis ...'` -> `'... son fifty 6 ...'`): a text
whose words are a readable text's, up to MAX_SWAPPED of them replaced by readable words in the same places, is
guessable too.

`Candidates` gathers what an agent can read (every literal and identifier of the task's files and of the
drivers that run beside its code); `guessable(value)` says whether a value is one of them, a piece of one, one
of their shapes with characters left out, or assembled from such; `pinned(test)` whether every check of a test
holds only for a value that is not.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

from gymsmith.verifier.calltests.compiler import Approx, Check, CompiledTest

SMALL_NUMBER = 16  # |n| up to this is guessed by counting, whatever the task shows
MAX_SUBSEQUENCE = 2000  # longer shapes are only looked for whole
MAX_ADDED = 2   # characters a forger may add to a readable shape (a plural 's', a suffix 'ed', a prefix)
MIN_GROWN = 4   # shorter shapes are not grown: any short value holds a few readable letters
MAX_SWAPPED = 2  # words of a readable text a forger may replace in place (the words a variant swapped in its input)
_SEPARATOR = "\x00"
_DIGITS = re.compile(r"[0-9]+")
_NUMERAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_WORD = re.compile(r"\w+")


class Candidates:
    """What an agent can read, normalised for `guessable`: strings (lower case; bytes decoded) and numbers."""

    def __init__(self) -> None:
        self.strings: set[str] = set()
        self.numbers: set[float] = set()
        self._text: str | None = None
        self._shapes: tuple[str, list[tuple[str, frozenset[str]]]] | None = None
        self._words: tuple[frozenset[str], dict[int, list[tuple[str, ...]]]] | None = None

    @classmethod
    def of(cls, sources: Iterable[str]) -> "Candidates":
        """The candidates of Python `sources` (files that do not parse add their words)."""
        found = cls()
        for source in sources:
            found.add_source(source)
        return found

    @classmethod
    def merged(cls, *parts: "Candidates", strings: Iterable[str] = (), numbers: Iterable[float] = ()) -> "Candidates":
        """The union of `parts`, plus already-normalised `strings` and `numbers`."""
        out = cls()
        out.strings = set(strings).union(*(p.strings for p in parts))
        out.numbers = set(numbers).union(*(p.numbers for p in parts))
        return out

    def add_source(self, source: str) -> None:
        self._text = self._shapes = self._words = None
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            self.strings.update(w.lower() for w in source.split())
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant):
                self.add(node.value)
            elif isinstance(node, ast.Name):
                self.add(node.id)
            elif isinstance(node, ast.Attribute):
                self.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.add(node.name)
            elif isinstance(node, ast.arg):
                self.add(node.arg)
            elif isinstance(node, ast.keyword) and node.arg:
                self.add(node.arg)

    def add(self, value: Any) -> None:
        self._text = self._shapes = self._words = None
        if isinstance(value, bytes):
            value = _text(value)
        if isinstance(value, str):
            self.strings.add(value.lower())
            try:
                self.numbers.add(float(value))
            except (ValueError, OverflowError):
                pass
            # a number written in a text is read from it: the port of 'http://h:82/' is 82
            self.numbers.update(_number(float(n)) for n in _NUMERAL.findall(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.numbers.add(_number(value))
            self.strings.add(repr(value).lower())

    def _haystack(self) -> str:
        if self._text is None:
            self._text = _SEPARATOR.join(sorted(self.strings))
        return self._text

    def _shape_index(self) -> tuple[str, list[tuple[str, frozenset[str]]]]:
        if self._shapes is None:
            shapes = sorted({shape(x) for x in self.strings} - {""})
            self._shapes = (_SEPARATOR.join(shapes), [(x, frozenset(x)) for x in shapes])
        return self._shapes

    def _shape_readable(self, text: str) -> bool:
        """Whether `shape(text)` is a readable string's shape with characters left out (a subsequence of it), or
        with up to MAX_ADDED characters put in (it is a subsequence of `shape(text)`)."""
        wanted = shape(text)
        if not wanted:
            return True  # only punctuation and spaces
        joined, shapes = self._shape_index()
        if wanted in joined:
            return True
        if len(wanted) > MAX_SUBSEQUENCE:
            return False
        letters = frozenset(wanted)
        for candidate, has in shapes:
            if len(candidate) > len(wanted) and letters <= has:
                rest = iter(candidate)
                if all(ch in rest for ch in wanted):
                    return True
            elif MIN_GROWN <= len(candidate) < len(wanted) <= len(candidate) + MAX_ADDED and has <= letters:
                rest = iter(wanted)
                if all(ch in rest for ch in candidate):
                    return True
        return False

    def _word_index(self) -> tuple[frozenset[str], dict[int, list[tuple[str, ...]]]]:
        if self._words is None:
            texts = {tuple(_WORD.findall(x)) for x in self.strings}
            by_count: dict[int, list[tuple[str, ...]]] = {}
            for words in sorted(texts):
                if len(words) >= 2:
                    by_count.setdefault(len(words), []).append(words)
            self._words = (frozenset(w for words in texts for w in words), by_count)
        return self._words

    def _words_swapped(self, text: str) -> bool:
        """Whether `text` has the words of a readable text of as many words, but up to MAX_SWAPPED (fewer than all)
        replaced in place by readable words."""
        words = tuple(_WORD.findall(text))
        if len(words) < 2:
            return False
        readable, by_count = self._word_index()
        if not all(w in readable for w in words):
            return False  # a word no file holds: no swap of readable words makes it
        allowed = min(MAX_SWAPPED, len(words) - 1)
        for other in by_count.get(len(words), ()):
            differ = 0
            for a, b in zip(words, other):
                if a != b:
                    differ += 1
                    if differ > allowed:
                        break
            else:
                return True
        return False

    def guessable(self, value: Any) -> bool:
        """Whether an agent could report `value` without computing it: one bit (None, True, False), a small
        number, a number it can read or one more or less, a string it can read (any case; bytes as text), a piece
        of one, its shape with characters left out or a few put in (`shape`), one with a few of its words swapped
        for readable ones, a container of such, or a value of another type (assumed guessable: nothing here can
        tell)."""
        if value is None or isinstance(value, bool):
            return True
        if isinstance(value, (int, float)):  # a readable number, or one counted on or back from it, or negated
            return abs(value) <= SMALL_NUMBER or any(sign * _number(value) + d in self.numbers
                                                     for sign in (1, -1) for d in (-1, 0, 1))
        if isinstance(value, bytes):
            value = _text(value)
        if isinstance(value, str):
            text = value.lower()
            return (len(text) <= 1 or _SEPARATOR in text or text in self._haystack() or self._shape_readable(text)
                    or self._words_swapped(text))
        if isinstance(value, Approx):
            return self.guessable(value.expected)
        if isinstance(value, dict):
            return all(self.guessable(k) and self.guessable(v) for k, v in value.items())
        if isinstance(value, (tuple, list, set, frozenset)):
            return all(self.guessable(v) for v in value)
        return True


def shape(text: str) -> str:
    """`text` lower case, letters and digits only, every run of digits one `0`: 'Camel_Case' -> 'camelcase',
    'rc.10' -> 'rc0', '4.0.0' -> '000' (a forger changes digits and punctuation, not the words)."""
    return _DIGITS.sub("0", "".join(ch for ch in text.lower() if ch.isalnum()))


def _number(value: int | float) -> float:
    """`value` as a float; an int too large for one stays as large as a float goes (10**400 is not an error)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _pinned(check: Check, candidates: Candidates) -> bool:
    kind = check[0]
    if kind == "cmp":
        operands = [check[1], *(c for _, c in check[2])]
        return (all(op == "==" for op, _ in check[2])
                and any(o[0] == "const" and not candidates.guessable(o[1]) for o in operands))
    if kind in ("and", "or"):  # an `or` holds on its easiest branch
        return bool(check[1]) and all(_pinned(c, candidates) for c in check[1])
    return False  # a truth value, a negation, an expected exception: one bit


def pinned(test: CompiledTest, candidates: Candidates) -> bool:
    """Whether every check of `test` is an `==` (alone or in `and`/`or`) with a constant that `candidates`
    cannot guess: whichever of its checks the code fails, passing it takes computing that value. A test that
    expects an exception is never pinned (the reference's exception class is guessed from the test's name)."""
    return bool(test.checks) and not test.raise_slots and all(_pinned(c, candidates) for c in test.checks)



def _expectations(check: Check) -> Iterable[tuple[list[int], Any]]:
    """(the slots compared, the constant) of every `==` with a constant in `check`."""
    kind = check[0]
    if kind == "cmp" and any(op == "==" for op, _ in check[2]):
        operands = (check[1], *(c for _, c in check[2]))
        slots = [o[1] for o in operands if o[0] == "slot"]
        yield from ((slots, o[1]) for o in operands if o[0] == "const")
    elif kind in ("and", "or"):
        for part in check[1]:
            yield from _expectations(part)


def echoes_an_input(test: CompiledTest) -> bool:
    """Whether a check of `test` expects back what the observed expression hands the code: one of its inputs (a
    round trip `decode(encode(s)) == s`, an invariant `sum(split(t, k)) == t`, a default `get('x', 7) == 7`, a whole
    iterable it walks: `[from_roman(to_roman(n)) for n in range(1, 400)] == list(range(1, 400))`), or a container of
    them. The code under test receives those inputs in that expression's calls, so it can hand them back without
    computing anything: a red-team agent remembered what its broken `to_roman` returned and had `from_roman` answer
    the number it came from. Such a test gates but proves no progress. (`pinned` implies not this.)"""
    observed = _observed_expressions(test)
    for slots, value in (e for check in test.checks for e in _expectations(check)):
        if isinstance(value, Approx):
            value = value.expected
        for slot in slots:
            given = _inputs_of(observed.get(slot), test)
            if _key(value) in given or (isinstance(value, list | tuple | set | frozenset) and value
                                        and all(_key(v) in given for v in value)):
                return True
    return False


def _observed_expressions(test: CompiledTest) -> dict[int, ast.expr]:
    """Slot -> the expression the driver observes in it."""
    from gymsmith.verifier.calltests.compiler import OBSERVE

    out = {}
    for statement in test.statements:
        try:
            tree = ast.parse(statement)
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == OBSERVE and len(n.args) == 2
                    and isinstance(n.args[0], ast.Constant) and type(n.args[0].value) is int
                    and isinstance(n.args[1], ast.Lambda)):
                out[n.args[0].value] = n.args[1].body
    return out


def _key(value: Any) -> Any:
    """A value as the code could hand it back: sequences as tuples, bytes as text, str in lower case; a bool is
    not the number it equals."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list | tuple | range):
        return tuple(_key(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(_key(v) for v in value)
    if isinstance(value, bytes):
        return _text(value).lower()
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, dict):
        return tuple(sorted((repr(_key(k)), repr(_key(v))) for k, v in value.items()))
    return value


def _inputs_of(expression: ast.expr | None, test: CompiledTest) -> set[Any]:
    """The values `expression` hands the code, whole: each largest sub-expression of literals and pure builtins
    (`[5, 1, 3]`, `range(1, 400)`, not the 3 inside the list) and the constants it names (a local literal of the
    test by its value; a module constant by every container value the test names)."""
    from gymsmith.verifier.calltests.compiler import SAFE_BUILTINS

    out: set[Any] = set()
    if expression is None:
        return out

    def add(value: Any) -> None:
        try:
            out.add(_key(value))
        except TypeError:  # unhashable: not something an `==` with a constant could expect anyway
            pass

    def evaluate(node: ast.expr) -> Any:
        return eval(compile(ast.Expression(body=node), "<input>", "eval"), {"__builtins__": SAFE_BUILTINS})  # noqa: S307

    locals_, assigned = {}, set()
    for statement in test.statements:
        try:
            tree = ast.parse(statement)
        except SyntaxError:
            continue
        assigned |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for n in tree.body:
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                    and _literal_only(n.value)):
                locals_[n.targets[0].id] = n.value
    inside = {id(child) for node in ast.walk(expression) if isinstance(node, ast.expr) and _literal_only(node)
              for child in ast.walk(node) if child is not node}
    named = False
    for node in ast.walk(expression):
        if isinstance(node, ast.Name) and node.id not in SAFE_BUILTINS:
            if node.id in locals_:
                node = locals_[node.id]
            else:
                named = named or node.id not in assigned  # a module constant (an object the test made is not)
                continue
        elif not isinstance(node, ast.expr) or id(node) in inside or not _literal_only(node):
            continue
        try:
            add(evaluate(node))
        except Exception:  # noqa: BLE001 - a huge range, a type error: not an input this test hands over
            continue
    if named:  # a module constant: whichever container the test names
        for text in test.inputs:
            try:
                value = ast.literal_eval(text)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(value, list | tuple | set | frozenset | dict | str | bytes):
                add(value)
    return out

def _literal_only(node: ast.expr) -> bool:
    from gymsmith.verifier.calltests.compiler import SAFE_BUILTINS

    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in SAFE_BUILTINS:
            return False
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in SAFE_BUILTINS):
            return False
        if isinstance(n, ast.Attribute | ast.Lambda | ast.Starred | ast.comprehension | ast.NamedExpr):
            return False
    return True
