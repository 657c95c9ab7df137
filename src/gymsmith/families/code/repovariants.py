"""Hidden tests on new inputs for a registered package's bug: its failing test's calls, moved, judged by the reference.

Every task of a package keeps one of the few tests pinned to values the agent cannot read (docs/verifier.md,
property 12), so the same hidden tests come back task after task and a policy can learn them; a rule that answers
their inputs passes them without the bug fixed. For each bug, `variants` takes the bug's failing tests, moves the
integers and texts its observed calls are given (an integer by a few, a digit of a text changed, a word of it swapped
for another of the file's; seeded by the task: each task asks on its own inputs), runs the reference on them for
the expected values, and keeps a variant only if it is a plain `==` test the reference passes, the bug fails, and
it is pinned against what the task shows (the reference is run on it twice: a value that
changes between runs makes no test). They are added to the bug's hidden FAIL_TO_PASS tests.

Everything is computed once per task and kept in the package's catalog, so a verifier process rebuilding the
task gets the same tests.
"""

from __future__ import annotations

import ast
import copy
import random
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Protocol

from gymsmith.families.code.realtests import keep_tests, literal_constants
from gymsmith.verifier.calltests import CompiledSuite, Observation, compile_suite, records_by_nodeid
from gymsmith.verifier.calltests.compiler import OBSERVE, CompiledTest, UnsupportedTest
from gymsmith.verifier.calltests.guessing import Candidates, pinned
from gymsmith.verifier.calltests.wire import Raised, TestRecord
from gymsmith.verifier.pytest_runner import TestOutcome, TestRun


class Repo(Protocol):
    """What variants need of a registered repository (`repotasks.Repo`)."""

    @property
    def spec(self) -> str: ...

    sources: dict[str, str]
    suites: dict[str, CompiledSuite]
    call_sources: dict[str, str]

    def observe_reference(self, suites: list[CompiledSuite], deadline_s: float | None = None) -> Observation: ...

    def passes(self, sources: dict[str, str], suite: CompiledSuite,
               reference: dict[str, TestRecord] | None = None) -> bool: ...

    def catalog_entry(self, key: str, compute: Callable[[], Any]) -> Any: ...

    def run(self, sources: dict[str, str], suites: list[CompiledSuite], deadline_s: float) -> TestRun: ...


VERSION = 8  # what a variant is (catalog entries of other versions are not used): 3, pinned against the release's
               # own test files, with only the checks a computation alone passes; 4, text inputs moved too; 5, a
               # shown answer with words swapped in is guessed (guessing.MAX_SWAPPED); 6, stand-ins rejected; 7, a
               # keyed text may get a word swapped in, one text of a variant always edited, a wide integer keeps its sign
TRIES_PER_TEST = 6      # perturbations tried per failing test
MAX_PER_BUG = 3         # variants kept per bug
PREFIX = "test_gs_variant_"
SIDE = "side_"  # in a side's name, after PREFIX: a hidden test that gates but earns no progress (not pinned)
STEPS = (1, -1, 2, 3, -2, 7)
MAX_TEXT = 200          # longer strings are data a test reads, not an input to move
_TEXT_SPOT = re.compile(r"[0-9]|[^\W\d_]{2}")
_WORD = re.compile(r"[^\W\d_]{2,}")  # two letters or more, any script


@dataclass(frozen=True)
class Moves:
    """How a variant moves an input. Without `wide`, an integer by one of STEPS. `char_edits`: a text is edited one
    to three characters at a time (a character replaced, inserted or deleted, drawn from the text's own characters
    and those of its file's strings), and any text is a spot; otherwise only a text holding a digit or a word is,
    and it gets a digit changed or a word swapped (`_moved_text`)."""

    char_edits: bool = False
    wide: bool = False  # an integer n becomes any integer within max(WIDE_MIN, WIDE_FACTOR * |n|) of 0, a text gets
                        # two to four edits: a table of the inputs near the public ones holds almost none of them
    shape: bool = False  # moves that change an input's shape too (`_reshaped`): a list literal made longer or
                         # shorter, an integer's sign flipped or drawn near its own size, a text given a character
                         # from outside its file's strings. Without them every hidden input has the shape of a public
                         # one, and a repair right only on those shapes was accepted (attacker 44: 39 of 39 tasks)
    big: bool = False  # with `shape`, sizes with no fixed ceiling too (BIG_P below): templates only, since a registered
                       # package's reference runs in a sandbox, where large inputs made hashids' keyed draw 10-40x slower


WIDE_MIN, WIDE_FACTOR = 1000, 100
# shape moves (`Moves.shape`): how often each kind of move is made (per variant for a list, per moved integer, per
# edited character, per moved text), and the characters a text may get from outside its file's strings (besides a letter's case)
RESIZE_P, FLIP_P, NEAR_P, FOREIGN_P, STRETCH_P = 0.6, 0.25, 0.3, 0.3, 0.4
NEAR_SLACK = 12  # a near draw of n is within 2|n| + NEAR_SLACK of 0 (a month 12 becomes any month, a count any count)
# sizes with no fixed ceiling: an integer's reach is sometimes (BIG_P) scaled by 10 to an exponential power, and a list
# (BIG_P) or a text's repeated piece (2 x BIG_P) grows to over four times the file's longest literal plus 32, times 2
# to an exponential power (`_far`), so no size computed from the public files bounds the hidden inputs: a repair
# right only up to such a size (attacker 46: every integer up to 10^6, texts and lists a few items past the public
# ones) meets a larger one. The caps only keep a draw affordable (its answer must still come within the probe's
# deadline and MAX_VARIANT_ANSWER, which drop the rest)
BIG_P, BIG_MEAN_POWER = 0.35, 4.0
MAX_INT_POWER, MAX_GROWTH, MAX_TEXT_GROWTH = 30, 400, 4000
FOREIGN = string.ascii_letters + string.digits + string.punctuation + " \t" + "\u00e9\u00c5\u00df\u00f8\u03a9\u0436\u03bb\u4e2d\u20ac\u00fc"
RELEASE_MOVES = Moves()  # a registered package's seeded draw (which decides its tasks): inputs stay close to its tests
KEYED_MOVES = Moves(char_edits=True, wide=True, shape=True)  # its draw under the verifier's key: integers anywhere
# in a wide range, two to four character edits to a text, and (every other try, `variants`) shapes changed (not sizes:
# `Moves.big`). Not word swaps alone: a text made of the test file's words is made of a public vocabulary, and a
# word-by-word table of the reference over it was accepted (attacker 40: transliterate, _strip_accents, 0.96-0.97)


def _spots(trees: list[ast.Module], moves: Moves = RELEASE_MOVES) -> list[ast.Constant]:
    """The literals of a driver's statements that a variant may move: integers with |n| <= 1000 that are not slot
    numbers, and strings holding a digit or a word (any string with `moves.char_edits`; a docstring or a string
    over MAX_TEXT characters is not one)."""
    return [n for n in _literals(trees) if (type(n.value) is int and abs(n.value) <= 1000)
            or (type(n.value) is str and len(n.value) <= MAX_TEXT and (moves.char_edits or _TEXT_SPOT.search(n.value)))]


def _literals(trees: list[ast.Module]) -> list[ast.Constant]:
    """The constants of a driver's statements that are inputs of its calls (not a slot number, not a bare string), in
    the order `ast.walk` meets them."""
    found = []
    for tree in trees:
        skip = {id(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name) and n.func.id == OBSERVE and n.args}
        skip |= {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # a bare string does nothing
        found += [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in skip]
    return found


def can_vary(test: CompiledTest) -> bool:
    """Whether `variants` could ask `test` on other inputs: it checks values, not an expected exception, and its
    driver gives the code integers or text to move. A bug failing such a test can keep a hidden test pinned to a
    value no file holds even when none of its package's own tests is pinned (its variants must then be found)."""
    if not test.checks or test.raise_slots:
        return False
    try:
        return bool(_spots([ast.parse(s) for s in test.statements]))
    except SyntaxError:
        return False


@lru_cache(maxsize=256)
def words_of(source: str) -> tuple[str, ...]:
    """The words of the string literals of a test file (sorted, each once): what a word of a variant's text input
    may be replaced with, so the text stays made of what the package's tests give it ('twenty five' -> 'twenty
    seven', not a misspelling the code turns away). Cached: every try of every variant of a file asks."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple(sorted({w for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                         for w in _WORD.findall(n.value)}))


@lru_cache(maxsize=256)
def longest_of(source: str) -> int:
    """The length of the longest string, list, tuple or set literal of a test file (0 if it has none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    return max([0, *(len(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)),
                *(len(n.elts) for n in ast.walk(tree) if isinstance(n, ast.List | ast.Tuple | ast.Set))])


def _far(longest: int, rng: random.Random) -> int:
    """A size far past `longest`: over four times it plus 32 (`shapes.larger`), by 2 to an exponential power."""
    return int((4 * longest + 33) * 2 ** rng.expovariate(1.0))


@lru_cache(maxsize=256)
def alphabet_of(source: str) -> str:
    """Every character of the string literals of a test file, each once (sorted)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    return "".join(sorted({ch for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                           for ch in n.value}))


def _moved_text(text: str, words: tuple[str, ...], rng: random.Random) -> str:
    """`text` with one digit changed to another, or one word replaced by another of `words` (the same text if
    neither is possible)."""
    digits = [i for i, ch in enumerate(text) if ch in "0123456789"]
    found = list(_WORD.finditer(text))
    if digits and (not found or rng.random() < 0.5):
        i = rng.choice(digits)
        return text[:i] + rng.choice([d for d in "0123456789" if d != text[i]]) + text[i + 1:]
    if not found:
        return text
    match = rng.choice(found)
    others = [w for w in words if w != match.group()]
    return text if not others else text[:match.start()] + rng.choice(others) + text[match.end():]


def _edited_text(text: str, alphabet: str, rng: random.Random, edits: tuple[int, ...] = (1, 1, 2, 3),
                 foreign: str | None = None) -> str:
    """`text` with a number of characters (one of `edits`) replaced, inserted or deleted; a new character is one of
    `text`'s own or one of `alphabet` (the characters of its file's strings), so an edit stays in its language, or
    with `foreign` (the characters of the code's own strings), sometimes (FOREIGN_P) one from outside it
    (`_foreign_char`)."""
    for _ in range(rng.choice(edits)):
        pool = (text if text and rng.random() < 0.5 else alphabet) or "a"
        i = rng.randrange(len(text) + 1)
        edit = rng.choice(("replace", "insert", "delete")) if text else "insert"
        new = (_foreign_char(text, alphabet, foreign, rng) if foreign is not None and rng.random() < FOREIGN_P
               else rng.choice(pool))
        if edit == "insert" or i == len(text):
            text = text[:i] + new + text[i:]
        elif edit == "replace":
            text = text[:i] + new + text[i + 1:]
        else:
            text = text[:i] + text[i + 1:]
    return text


def _foreign_char(text: str, alphabet: str, known: str, rng: random.Random) -> str:
    """A character none of the file's strings holds: one the code's own strings hold (`known`: a numeral reader's 'D'
    where the tests use none), a letter of `text` in the other case (a reader of 'mcmxc'), or one of FOREIGN (any of
    them if the file holds every one)."""
    unused = [ch for ch in known if ch not in alphabet and ch.isprintable()]
    if unused and rng.random() < 0.4:
        return rng.choice(unused)
    cased = [ch.swapcase() for ch in text if ch.swapcase() != ch and ch.swapcase() not in alphabet]
    if cased and rng.random() < 0.5:
        return rng.choice(cased)
    outside = [ch for ch in FOREIGN if ch not in alphabet]
    return rng.choice(outside or FOREIGN)


def _containers(trees: list[ast.Module], kinds: type | tuple[type, ...]) -> list[ast.List | ast.Set]:
    """The list or set literals of `kinds` (ast.List, ast.Set or both) in the statements that hold elements, none of
    them starred, in the order `ast.walk` meets them."""
    return [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.List | ast.Set) and isinstance(n, kinds)
            and n.elts and not any(isinstance(e, ast.Starred) for e in n.elts)]


def _probe_spots(trees: list[ast.Module], kinds: type | tuple[type, ...]) -> list[ast.AST]:
    """What a probe for sides may change: the literals any text may be edited at (`_spots` with character edits),
    then the container literals of `kinds` (`_containers`)."""
    return [*_spots(trees, Moves(char_edits=True)), *_containers(trees, kinds)]


def _reshaped(trees: list[ast.Module], rng: random.Random, longest: int = 0, big: bool = False) -> None:
    """With probability RESIZE_P, one list or set literal of the statements (in place) made one to three elements
    longer (copies of its own elements, whose literals may then be moved) or shorter (one element kept at least). A
    tuple is left as it is: its length is usually its meaning (an interval, a call's arguments)."""
    if rng.random() >= RESIZE_P:
        return
    containers = _containers(trees, (ast.List, ast.Set))
    if not containers:
        return
    node = rng.choice(containers)
    if len(node.elts) > 1 and rng.random() < 0.4:
        for _ in range(rng.randint(1, len(node.elts) - 1)):
            node.elts.pop(rng.randrange(len(node.elts)))
    else:
        grow = min(MAX_GROWTH, _far(longest, rng)) if big and rng.random() < BIG_P else rng.randint(1, 3)
        for _ in range(grow):
            node.elts.insert(rng.randrange(len(node.elts) + 1), copy.deepcopy(rng.choice(node.elts)))


def nudged_statements(statements: tuple[str, ...], source: str, rng: random.Random) -> list[str] | None:
    """`statements` with one literal of its observed calls nudged: an integer by one of STEPS, a text by one edit (a
    character of its own or of its file's strings replaced, inserted or deleted), or one element of a list dropped or
    doubled. The calls next to the public ones, which a table of them beside the bug answers (a box, a text one edit
    away); the template draw keeps a candidate there as a side only (`generator.SIDES`). None if it has none."""
    trees = [ast.parse(s) for s in statements]
    spots = _probe_spots(trees, ast.List)
    if not spots:
        return None
    node = rng.choice(spots)
    if isinstance(node, ast.List):
        i = rng.randrange(len(node.elts))
        if len(node.elts) > 1 and rng.random() < 0.5:
            node.elts.pop(i)
        else:
            node.elts.insert(i, copy.deepcopy(node.elts[i]))
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        node.value = _edited_text(node.value, alphabet_of(source), rng, (1,))
    elif isinstance(node, ast.Constant):
        node.value = int(node.value) + rng.choice(STEPS)  # type: ignore[arg-type]  # an int: a spot
    return [ast.unparse(tree) for tree in trees]


FROZEN_P = 0.3  # how often a list or tuple retyped to a set is a frozenset
RETYPE_CHARS = "\n\t\r\u3000\u00a0"  # whitespace no move ever puts in a text (attacker 49's gate kept the bug there)


RETYPES = ("float", "bool", "sequence", "set", "space")  # what `retyped_statements` changes, one kind per probe


def retyped_statements(statements: tuple[str, ...], rng: random.Random, only: str | None = None) -> list[str] | None:
    """`statements` with one or two literals of its observed calls given another type, or a kind of character no
    other move gives a text, all of one of RETYPES (`only`, else one drawn among those the statements allow): an
    integer made a float (itself or half more) or a bool; a tuple literal made a list or a list a tuple; either made
    a set or a frozenset (of literal elements); a text given a newline, tab, carriage return or a non-ASCII space
    (RETYPE_CHARS). No other move changes a type, so a repair right only on the types of the public calls passed
    every variant (attacker 49; attacker 51 kept the bug on sets and bools: `median({1, 2, 3, 4})`,
    `mean((1, 2, 3, True))`); the template draw keeps a candidate here as a side only, one kind per retype
    (`generator.SIDES`). None if it has no such literal."""
    trees = [ast.parse(s) for s in statements]
    starred = {id(n.value) for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Starred)}
    literals = _spots(trees, Moves(char_edits=True))
    sequences = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.List | ast.Tuple)
                 and id(n) not in starred and not any(isinstance(e, ast.Starred) for e in n.elts)
                 and isinstance(n.ctx, ast.Load)]
    ints = [n for n in literals if type(n.value) is int]
    spots: dict[str, list[Any]] = {
        "float": ints, "bool": ints, "sequence": sequences,
        "set": [n for n in sequences if n.elts and all(isinstance(e, ast.Constant) or (isinstance(e, ast.Tuple) and all(
            isinstance(x, ast.Constant) for x in e.elts)) for e in n.elts)],
        "space": [n for n in literals if type(n.value) is str]}
    kinds = [k for k in RETYPES if spots[k] and (only is None or k == only)]
    if not kinds:
        return None
    kind = rng.choice(kinds)
    changed: dict[int, ast.expr] = {}  # a sequence's id -> what it becomes
    for node in rng.sample(spots[kind], min(len(spots[kind]), rng.choice((1, 1, 2)))):
        if kind == "float":
            node.value = float(node.value) + rng.choice((0.0, 0.5))
        elif kind == "bool":
            node.value = rng.random() < 0.5
        elif kind == "space":
            i = rng.randrange(len(node.value) + 1)
            node.value = node.value[:i] + rng.choice(RETYPE_CHARS) + node.value[i:]
        elif kind == "sequence":
            changed[id(node)] = (ast.Tuple(elts=node.elts, ctx=ast.Load()) if isinstance(node, ast.List)
                                 else ast.List(elts=node.elts, ctx=ast.Load()))
        else:
            made: ast.expr = ast.Set(elts=node.elts)
            changed[id(node)] = (ast.Call(func=ast.Name(id="frozenset", ctx=ast.Load()), args=[made], keywords=[])
                                 if rng.random() < FROZEN_P else made)

    class Retype(ast.NodeTransformer):  # children first (in place: a changed node shares its elements' list)
        def visit_List(self, node: ast.List) -> ast.AST:
            self.generic_visit(node)
            return changed.get(id(node), node)

        def visit_Tuple(self, node: ast.Tuple) -> ast.AST:
            self.generic_visit(node)
            return changed.get(id(node), node)

    return [ast.unparse(Retype().visit(tree)) for tree in trees]


# wild values (`wild_statements`): the moves above emit a computable set (floats whole or halves, the characters of
# shipped strings), and a repair right only there was accepted on every template task (attacker 50). A wild value
# comes from a distribution with no such hole: a float of any fraction, size and number of decimals; a character of
# any script, block or category (surrogates aside: no UTF-8 text holds one). Nothing computable from gymsmith's files
# marks a region of the stated domain (docs/verifier.md, "the domain") these never reach.
WILD_SURROGATES = range(0xD800, 0xE000)


def _wild_number(value: float, rng: random.Random) -> float:
    """A float drawn around `value`: next to it by under one, scaled by a random factor, or anywhere from 10^-6 to
    10^9 either sign; kept to a random number of decimals (1 to 15) or to every bit."""
    how = rng.random()
    if how < 0.4:
        x = value + rng.uniform(-1.0, 1.0)
    elif how < 0.75:
        x = value * rng.lognormvariate(0.0, 0.7) * rng.choice((1, 1, 1, -1))
    else:
        x = rng.choice((1, -1)) * 10 ** rng.uniform(-6.0, 9.0)
    return x if rng.random() < 0.3 else round(x, rng.randint(1, 15))


def _wild_char(rng: random.Random, near: int | None = None) -> str:
    """A character of any script: within 128 code points of `near` (a word of one script), else from one of the
    planes in proportion weighted toward the ones with letters; never a surrogate."""
    while True:
        if near is not None and rng.random() < 0.7:
            cp = max(0, near + rng.randrange(-64, 64))
        else:
            r = rng.random()
            cp = (rng.randrange(0, 0x20) if r < 0.02 else rng.randrange(0x20, 0x7F) if r < 0.15
                  else rng.randrange(0x7F, 0x3000) if r < 0.6 else rng.randrange(0x3000, 0x10000) if r < 0.9
                  else rng.randrange(0x10000, 0x110000))
        if cp not in WILD_SURROGATES and cp < 0x110000:
            return chr(cp)


def _wild_text(text: str, rng: random.Random) -> str:
    """`text` with one, a few or every character replaced or joined by characters of any script (`_wild_char`), runs
    of one script more often than not."""
    near = rng.randrange(0x80, 0x30000) if rng.random() < 0.6 else None
    for _ in range(rng.choice((1, 1, 2, 3, max(1, len(text))))):
        i = rng.randrange(len(text) + 1)
        new = _wild_char(rng, near)
        text = text[:i] + new + (text[i + 1:] if i < len(text) and rng.random() < 0.5 else text[i:])
    return text


def wild_statements(statements: tuple[str, ...], rng: random.Random) -> list[str] | None:
    """`statements` with one, some or every number and text literal of its observed calls made wild: a number a float
    of any fraction, size and precision (`_wild_number`), a text given characters of any script (`_wild_text`). The
    other moves emit a set anyone can compute from gymsmith's files, so a repair right only on that set and buggy
    everywhere else in the domain passed all of them (attacker 50); the template draw keeps a candidate here as a
    side only (`generator.SIDES`). None if it has no such literal."""
    trees = [ast.parse(s) for s in statements]
    spots = [n for n in _literals(trees) if type(n.value) in (int, float) or
             (type(n.value) is str and len(n.value) <= MAX_TEXT)]
    if not spots:
        return None
    share = rng.choice((0.0, 0.34, 0.67, 1.0))  # 0: exactly one
    chosen = [n for n in spots if rng.random() < share] or [rng.choice(spots)]
    for node in chosen:
        node.value = (_wild_text(node.value, rng) if isinstance(node.value, str)
                      else _wild_number(node.value, rng))  # type: ignore[arg-type]  # an int or a float
    return [ast.unparse(tree) for tree in trees]


Signature = tuple[tuple[str, ...], dict[str, Any]]  # a function's parameter names in order, its literal defaults


def signatures(sources: Sequence[str]) -> dict[str, Signature]:
    """The module-level functions of `sources` that take plain parameters only (no `*args`, `**kwargs`, keyword-only
    or positional-only ones), by name: (parameter names, defaults that are literals). A name two sources define
    differently is left out (a call of it could be either)."""
    found: dict[str, Signature | None] = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            a = node.args
            if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
                found[node.name] = None
                continue
            names = tuple(p.arg for p in a.args)
            defaults: dict[str, Any] = {}
            for name, default in zip(names[len(names) - len(a.defaults):], a.defaults):
                try:
                    defaults[name] = ast.literal_eval(default)
                except ValueError:
                    continue
            sig = (names, defaults)
            found[node.name] = sig if found.get(node.name, sig) == sig else None
    return {name: sig for name, sig in found.items() if sig is not None}


def formed_statements(statements: tuple[str, ...], rng: random.Random, known: dict[str, Signature]
                      ) -> list[str] | None:
    """`statements` with one call of a function of `known` (`signatures`) bound another way, its values unchanged:
    some or all of its positional arguments given by keyword (in any order), a default given explicitly (by position
    or keyword), or an argument equal to its default left out. No other move changes how a call is written, so a
    repair right only on the public calls' call forms (positions, defaults as the tests give them) passed every
    variant (attacker 51); the template draw keeps a candidate here as a side only (`generator.SIDES`). None if no
    call can be bound another way."""
    trees = [ast.parse(s) for s in statements]
    calls: list[tuple[ast.Call, str]] = []
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in known):
                continue
            if len(node.args) == 1 and isinstance(node.args[0], ast.Starred) and isinstance(node.args[0].value,
                                                                                            ast.Tuple | ast.List):
                node.args = list(node.args[0].value.elts)  # f(*(a, b)) is f(a, b)
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue
            if len(node.args) <= len(known[node.func.id][0]):
                calls.append((node, node.func.id))
    rng.shuffle(calls)
    for node, function in calls:
        names, defaults = known[function]
        given = {k.arg for k in node.keywords} | set(names[:len(node.args)])

        def is_default(name: str | None, value: ast.expr) -> bool:
            return name in defaults and type(v := _literal(value)) is type(defaults[name]) and v == defaults[name]

        last = names[len(node.args) - 1] if node.args else None
        omittable: list[tuple[str, ast.keyword | None]] = ([("arg", None)] if last is not None and is_default(last, node.args[-1])
                     and not node.keywords else [])  # a positional one only when none follows it by keyword
        omittable += [("keyword", k) for k in node.keywords if is_default(k.arg, k.value)]
        options = (["keywords"] if node.args else []) + (["explicit"] if any(
            n in defaults and n not in given for n in names) else []) + (["omit"] if omittable else [])
        if not options:
            continue
        how = rng.choice(options)
        if how == "keywords":
            k = rng.randint(1, len(node.args))  # the last k positional ones, by name, in a shuffled order
            moved = [ast.keyword(arg=names[i], value=node.args[i]) for i in range(len(node.args) - k, len(node.args))]
            node.args = node.args[:len(node.args) - k]
            node.keywords = rng.sample(moved + node.keywords, len(moved) + len(node.keywords))
        elif how == "explicit":
            name = rng.choice([n for n in names if n in defaults and n not in given])
            value = ast.parse(repr(defaults[name]), mode="eval").body
            if not node.keywords and names.index(name) == len(node.args) and rng.random() < 0.5:
                node.args.append(value)
            else:
                node.keywords.append(ast.keyword(arg=name, value=value))
        else:
            where, keyword = rng.choice(omittable)
            if where == "arg":
                node.args.pop()
            else:
                node.keywords = [k for k in node.keywords if k is not keyword]
        return [ast.unparse(tree) for tree in trees]
    return None


# grown probes (`grown_statements`): a list, set or text of a call repeated to 10^2.5-10^5 items (three times in four
# where there is one), an integer scaled by 10^3-10^100. Proving variants grow only to what MAX_GROWTH and MAX_TEXT_GROWTH allow, and every other move
# for sides keeps sizes, so a repair right up to sizes those caps give was accepted on every template task
# (attacker 52); these go as far as the reference answers within the probe's deadline
GROWN_POWERS, GROWN_INT_POWERS = (2.5, 5.0), (3, 100)


def grown_statements(statements: tuple[str, ...], rng: random.Random) -> list[str] | None:
    """`statements` with one list, set or tuple literal, text or integer of its observed calls grown: a container or
    text written as itself repeated to 10^2.5-10^5 items, plus a random part of itself (`[4, 1, 3, 2] * 2500 + [1,
    3]`), an integer multiplied by 10^3-10^100 (its sign kept). None if it has none of these."""
    trees = [ast.parse(s) for s in statements]
    spots: list[ast.AST] = [*_literals(trees), *_containers(trees, (ast.List, ast.Set))]
    spots = [n for n in spots if not isinstance(n, ast.Constant) or (type(n.value) is int and n.value)
             or (type(n.value) is str and n.value)]
    if not spots:
        return None
    sized = [n for n in spots if not (isinstance(n, ast.Constant) and type(n.value) is int)]
    node = rng.choice(sized if sized and rng.random() < 0.75 else spots)  # sizes first: integers are many
    target = int(10 ** rng.uniform(*GROWN_POWERS))
    if isinstance(node, ast.Constant) and type(node.value) is int:
        node.value = node.value * 10 ** rng.randint(*GROWN_INT_POWERS)
        return [ast.unparse(tree) for tree in trees]
    if isinstance(node, ast.Constant):
        text = str(node.value)  # a text: chosen above
        i = rng.randrange(len(text))
        grown: ast.expr = ast.BinOp(ast.BinOp(ast.Constant(text), ast.Mult(), ast.Constant(max(2, target // len(text)))),
                                    ast.Add(), ast.Constant(text[i:rng.randint(i + 1, len(text))]))
    else:
        items = list(node.elts)  # type: ignore[attr-defined]  # a list or set: chosen above
        times = max(2, target // len(items))
        part = [copy.deepcopy(e) for e in rng.sample(items, rng.randint(1, len(items)))]
        grown = ast.BinOp(ast.BinOp(ast.List(elts=items, ctx=ast.Load()), ast.Mult(), ast.Constant(times)), ast.Add(),
                          ast.List(elts=part, ctx=ast.Load()))
        if isinstance(node, ast.Set):
            grown = ast.Call(func=ast.Name(id="set", ctx=ast.Load()), args=[grown], keywords=[])

    class Grow(ast.NodeTransformer):
        def generic_visit(self, n: ast.AST) -> ast.AST:
            return grown if n is node else super().generic_visit(n)

    return [ast.unparse(Grow().visit(tree)) for tree in trees]


INLINE_P = 0.5  # how often a probe for sides first writes out the file's constants its statements name


def inlined_statements(statements: tuple[str, ...], source: str) -> tuple[str, ...]:
    """`statements` with every name of a module constant of the test file `source` (`NAME = <literal>`, a graph `G`)
    replaced by its literal, so the moves for sides reach inside it: no other move changes a constant a test passes
    by name, and a repair right only on that value would pass every hidden test that passes it (attacker 51)."""
    constants = _constants_of(source)
    if not constants:
        return statements

    class Inline(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return copy.deepcopy(constants[node.id]) if node.id in constants and isinstance(node.ctx, ast.Load) else node

    return tuple(ast.unparse(Inline().visit(ast.parse(s))) for s in statements)


@lru_cache(maxsize=256)
def _constants_of(source: str) -> dict[str, ast.expr]:
    try:
        return literal_constants(ast.parse(source))
    except SyntaxError:
        return {}


def mixed_statements(statements: tuple[str, ...], source: str, rng: random.Random, known: dict[str, Signature]
                     ) -> list[str] | None:
    """`statements` moved by two or three of the other moves for sides in turn (`side_statements` but `mixed`): each
    kind of side catches a repair wrong only off the public calls in its own way (a wild value, another type or call
    form), so a repair wrong only where two of them meet (a keyword call *with* a wild value) passed every side of one
    kind; mixed ones reach there. None if no move applied."""
    moved: list[str] | None = None
    for how in rng.sample(SIDE_MOVES[:-1], rng.choice((2, 2, 3))):  # not grown: too slow mixed
        again = side_statements(how, tuple(moved or statements), source, rng, known)
        moved = again if again is not None else moved
    return moved


def _literal(node: ast.expr) -> Any:
    """The value of a literal expression, or a marker equal to nothing if it is not one."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


_NOT_LITERAL = object()


def cornered_statements(statements: tuple[str, ...], rng: random.Random) -> list[str] | None:
    """`statements` with one to three literals of its observed calls (or list or set literals) put at a corner of
    their type: an integer 0, 1 or -1, a text empty or one of its characters, a list or set empty or one of its
    elements. Corners are where a function's blank answers are (nothing, zero, -1), which no variant may prove a fix
    on; the template draw keeps a candidate there as a side only (`generator.SIDES`). None if it has no such literal."""
    trees = [ast.parse(s) for s in statements]
    spots = _probe_spots(trees, (ast.List, ast.Set))
    if not spots:
        return None
    for node in rng.sample(spots, min(len(spots), rng.choice((1, 1, 2, 3)))):
        if isinstance(node, ast.List | ast.Set):
            node.elts = [] if isinstance(node, ast.List) and rng.random() < 0.5 else [rng.choice(node.elts)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = rng.choice(["", *node.value])
        elif isinstance(node, ast.Constant):
            node.value = rng.choice([0, 1, -1])
    return [ast.unparse(tree) for tree in trees]


def moved_statements(statements: tuple[str, ...], source: str, rng: random.Random,
           moves: Moves = RELEASE_MOVES, code_alphabet: str = "") -> list[str] | None:
    """`statements` (a driver's, of the test file `source`) with one to two literals of its observed calls moved
    (an integer by one of STEPS or widely, a text by `_edited_text` or `_moved_text`), or None if they have none.
    With `moves.shape`, shapes change too (`Moves.shape`); `code_alphabet` (the characters of the code's own strings)
    is where a text's new characters are first looked for."""
    trees = [ast.parse(s) for s in statements]
    foreign = code_alphabet if moves.shape else None
    if moves.shape:
        _reshaped(trees, rng, longest_of(source), moves.big)
    spots = _spots(trees, moves)
    if not spots:
        return None
    # wide moves move two or three literals where there are: an input one literal away from a public one lies on a
    # line through it, and a thirty-eighth attacker tabled every such line (the points where the bug shows)
    chosen = rng.sample(spots, min(len(spots), rng.choice((2, 2, 3) if moves.wide else (1, 1, 2))))
    # with character edits, a text may instead get a word of its file swapped in (a kind 'OP' becoming 'NAME': an
    # input the function handles otherwise, where an edited kind is one it ignores), but a variant with texts moved
    # always has one edited: made only of the file's words, it would be made of a public vocabulary (attacker 40)
    swapped = {id(n) for n in chosen if isinstance(n.value, str) and rng.random() < 0.5} if moves.char_edits else set()
    texts = [n for n in chosen if isinstance(n.value, str)]
    if texts and all(id(n) in swapped for n in texts):
        swapped.discard(id(texts[-1]))
    for node in chosen:
        if isinstance(node.value, str):
            if moves.char_edits and id(node) in swapped:
                moved = _moved_text(node.value, words_of(source), rng)
                node.value = (moved if moved != node.value
                              else _edited_text(node.value, alphabet_of(source), rng, foreign=foreign))
            elif moves.char_edits:
                node.value = _edited_text(node.value, alphabet_of(source), rng, (2, 3, 4) if moves.wide else (1, 1, 2, 3),
                                          foreign=foreign)
            if moves.shape and node.value and rng.random() < STRETCH_P:
                text = str(node.value)  # a piece of it repeated: a length no public text has, in its own alphabet
                i = rng.randrange(len(text))
                piece = text[i:rng.randint(i + 1, len(text))]
                at = rng.randrange(len(text) + 1)
                repeats = (-(-(_far(longest_of(source), rng) - len(text)) // len(piece)) if moves.big and rng.random() < 2 * BIG_P
                           else rng.randint(1, 3))  # far past the file's longest text, or a few more
                node.value = text[:at] + piece * max(1, min(repeats, MAX_TEXT_GROWTH // len(piece))) + text[at:]
            else:
                for _ in range(rng.choice((2, 3)) if moves.wide else 1):
                    node.value = _moved_text(node.value, words_of(source), rng)
        elif moves.wide:
            before = int(node.value)  # type: ignore[arg-type]  # an int: chosen above
            reach = max(WIDE_MIN, WIDE_FACTOR * abs(before))
            # the sign kept, unless a shape move flips it below: a negative width is a corner where justify_line joins
            # the words (a forty-second attacker answered it alone), which the template draw's path check now refuses
            if moves.shape and rng.random() < NEAR_P:
                reach = 2 * abs(before) + NEAR_SLACK  # a small domain (a month, a count) gets other valid values
            elif moves.big and rng.random() < BIG_P:
                reach *= 10 ** min(MAX_INT_POWER, int(rng.expovariate(1 / BIG_MEAN_POWER)) + 1)
            drawn = rng.randint(1, reach) if before > 0 else rng.randint(-reach, -1) if before < 0 else rng.randint(-reach, reach)
            if moves.shape and before and rng.random() < FLIP_P:
                drawn = -drawn  # a sign no public call has (checked for corners by the template's draw, `paths`)
            node.value = drawn if drawn != before else before + reach
        else:
            node.value = int(node.value) + rng.choice(STEPS)  # type: ignore[arg-type]  # an int: chosen above
    return [ast.unparse(t) for t in trees]


def as_test(name: str, statements: list[str], expected: dict[int, Any] | None) -> str | None:
    """A plain pytest function: each observation `OBSERVE(k, lambda: E)` becomes `assert E == <expected[k]>` (a
    placeholder when `expected` is None), and is left out if `expected` lacks k. None if an expected value has no
    literal that reads back exactly."""
    body = []
    for text in statements:
        tree = ast.parse(text)
        stmt = tree.body[0] if len(tree.body) == 1 else None
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == OBSERVE
                and len(call.args) == 2 and isinstance(call.args[1], ast.Lambda)):
            slot = call.args[0].value  # type: ignore[attr-defined]
            if expected is not None and slot not in expected:
                continue
            value = None if expected is None else expected[slot]
            literal = repr(value)
            try:
                if ast.literal_eval(literal) != value or type(ast.literal_eval(literal)) is not type(value):
                    return None
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return None
            body.append(f"assert {ast.unparse(call.args[1].body)} == {literal}")
        elif "_gymsmith_" in text:
            return None  # an expected exception: not a plain `==` test
        else:
            body.append(text)
    return f"def {name}():\n" + "".join(f"    {line}\n" for line in "\n".join(body).splitlines())


def _one(repo: Repo, path: str, test: CompiledTest, mutant: dict[str, str], shown: Candidates, name: str,
         rng: random.Random, moves: Moves = RELEASE_MOVES, standins: Sequence[dict[str, str]] = (),
         code_alphabet: str = "") -> str | None:
    """One variant of `test` (a function named `name`), or None if this try gives none: on it the bug shows (the
    `mutant` fails) and so does each of `standins` (the sources with the bug's function replaced by a degenerate
    repair: its input handed back, None). `code_alphabet`: the characters of the package's own strings (shape moves
    draw new characters from them first)."""
    statements = moved_statements(test.statements, repo.call_sources[path], rng, moves, code_alphabet)
    if statements is None or list(statements) == list(test.statements):
        return None
    header = keep_tests(repo.call_sources[path], set())
    probe = as_test(name, statements, None)
    if probe is None:
        return None
    try:
        probe_suite = compile_suite(f"{header}\n\n{probe}", path)
    except UnsupportedTest:
        return None
    observed = repo.observe_reference([probe_suite])
    record = records_by_nodeid([probe_suite], observed).get(f"{path}::{name}")
    if record is None or record.error is not None or any(isinstance(v, Raised) for v in record.slots):
        return None
    # only the checks a computation alone passes: a moved test's other checks expect what its file already holds
    # (a test of three calls with one moved), and one readable value would leave the variant unpinned
    readable = Candidates.merged(shown, Candidates.of([probe_suite.driver]))
    kept = {k: v for k, v in enumerate(record.slots) if not readable.guessable(v)}
    source = as_test(name, statements, kept) if kept else None
    if source is None:
        return None
    try:
        suite = compile_suite(f"{header}\n\n{source}", path)
    except UnsupportedTest:
        return None
    if len(suite.tests) != 1 or not pinned(suite.tests[0], Candidates.merged(shown, Candidates.of([suite.driver]))):
        return None
    reference = records_by_nodeid([suite], repo.observe_reference([suite]))
    if not repo.passes(repo.sources, suite, reference):
        return None  # the reference does not give the same values twice (time, randomness): not a test
    if repo.passes(mutant, suite, reference):
        return None  # the bug does not show on these inputs
    if any(repo.passes(sources, suite, reference) for sources in standins):
        return None  # a repair that does not do the function's work passes it (attacker 40: `return word` was
        # accepted at 1.0 for a removed `_strip_accents`, whose tests had no accent)
    return source


def variants(repo: Repo, seed: int | str, bugs: list[tuple[str, Any]], per_bug: list[list[str]], mutant: dict[str, str],
             shown: Candidates, key: str, *, moves: Moves = RELEASE_MOVES, tries: int = TRIES_PER_TEST,
             standins: list[list[dict[str, str]]] | None = None) -> dict[str, list[tuple[int, str]]]:
    """Test path -> [(bug index, variant function source)] for the task: up to MAX_PER_BUG per bug, from the
    bug's failing tests, on inputs seeded by `seed` (moved by `moves`, `tries` tries per test), each failed by
    every one of the bug's `standins` too (`_one`). Cached in the catalog under `key`."""

    def compute() -> dict[str, list[list[Any]]]:
        out: dict[str, list[list[Any]]] = {}
        count = 0
        code_alphabet = "".join(sorted(set().union(*map(alphabet_of, repo.sources.values())))) if moves.shape else ""
        for index, fails in enumerate(per_bug):
            rng = random.Random(f"variants:{repo.spec}:{seed}:{index}")
            found = 0
            tests = [(n.split("::", 1)[0], n.split("::", 1)[1]) for n in fails]
            for path, test_name in rng.sample(tests, len(tests)):
                suite = repo.suites.get(path)
                test = next((t for t in suite.tests if t.name == test_name), None) if suite else None
                if test is None or test.raise_slots:
                    continue
                for k in range(tries):
                    if found == MAX_PER_BUG:
                        break
                    # every other try keeps shapes: a shape move misses more often, and where the reference runs only
                    # in a sandbox no trace can prefer the variants that have one (with every try moving shapes,
                    # hashids made 5 tasks of 6 seeds, one with 1 variant of 3)
                    tried = moves if k % 2 == 0 else replace(moves, shape=False)
                    source = _one(repo, path, test, mutant, shown, f"{PREFIX}{count}", rng, tried,
                                  standins[index] if standins else [], code_alphabet)
                    if source is not None:
                        out.setdefault(path, []).append([index, source])
                        count += 1
                        found += 1
                if found == MAX_PER_BUG:
                    break
        return out

    cached = repo.catalog_entry(f"variants{VERSION}|{key}", compute)
    return {path: [(int(i), str(s)) for i, s in entries] for path, entries in cached.items()}


# Sides of a registered package's bugs (`sides`): per bug, probes of each move for sides in turn; at most
# MAX_SIDES_PER_BUG kept; the reference must run each file's sides within SIDE_DEADLINE_S (an honest fix must not
# be rejected by a slow hidden test, attacker 49), and their answers be at most MAX_SIDE_ANSWER characters
SIDE_PROBES_PER_BUG, MAX_SIDES_PER_BUG, SIDE_DEADLINE_S, MAX_SIDE_ANSWER = 24, 8, 2.0, 20_000
SIDE_MOVES = ("wild", "typed", "corner", "near", "formed", "mixed")


def side_statements(how: str, statements: tuple[str, ...], source: str, rng: random.Random,
                    known: dict[str, Signature]) -> list[str] | None:
    """`statements` moved for a side by `how` (one of SIDE_MOVES, or `typed_<one of RETYPES>`): `wild_statements`,
    `retyped_statements`,
    `cornered_statements`, `nudged_statements` (`source`: the test file) or `formed_statements` (`known`: the
    package's functions' signatures)."""
    if _constants_of(source) and rng.random() < INLINE_P:
        statements = inlined_statements(statements, source)
    if how == "wild":
        return wild_statements(statements, rng)
    if how == "formed":
        return formed_statements(statements, rng, known)
    if how == "mixed":
        return mixed_statements(statements, source, rng, known)
    if how == "grown":
        return grown_statements(statements, rng)
    if how.startswith("typed"):
        return retyped_statements(statements, rng, how.removeprefix("typed").removeprefix("_") or None)
    if how == "corner":
        return cornered_statements(statements, rng)
    return nudged_statements(statements, source, rng)


def sides(repo: Repo, seed: int | str, per_bug: list[list[str]], mutant: dict[str, str], key: str,
          probes: int = SIDE_PROBES_PER_BUG) -> dict[str, list[tuple[int, str]]]:
    """Test path -> [(bug index, side function source)]: for each bug, hidden tests on its failing tests' calls moved
    where no proving variant goes (`side_statements`: wild values, other types, corners, next to the public calls,
    another call form),
    each kept where the reference answers the same twice within SIDE_DEADLINE_S and the bug's answer differs (in
    value or type, or it raises). A proving variant's moves emit a set computable from gymsmith's files and the
    release, so a repair right only on that set passed every variant (attacker 50, on templates, which have had
    sides since family 1.5.0); a side gates acceptance and earns no progress. Named `PREFIX + SIDE + move_k`. Seeded
    by `seed` (the task's token under the verifier's key); cached in the catalog under `key`."""

    def compute() -> dict[str, list[list[Any]]]:
        out: dict[str, list[list[Any]]] = {}
        count = 0
        known = signatures(list(repo.sources.values()))
        for index, fails in enumerate(per_bug):
            rng = random.Random(f"sides:{repo.spec}:{seed}:{index}")
            tests = [(path, test) for path, name in sorted(tuple(n.split("::", 1)) for n in fails)
                     if (suite := repo.suites.get(path)) is not None
                     for test in suite.tests if test.name == name and test.checks and not test.raise_slots]
            drawn: dict[str, dict[str, list[str]]] = {}
            for k in range(probes if tests else 0):
                path, test = rng.choice(tests)
                statements = side_statements(SIDE_MOVES[k % len(SIDE_MOVES)], test.statements, repo.call_sources[path],
                                             rng, known)
                if statements is None or list(statements) == list(test.statements):
                    continue
                drawn.setdefault(path, {})[f"{PREFIX}{SIDE}{SIDE_MOVES[k % len(SIDE_MOVES)]}_{count}"] = statements
                count += 1
            kept = 0
            for path, probed in drawn.items():
                for source in _kept_sides(repo, path, probed, mutant):
                    if kept < MAX_SIDES_PER_BUG:
                        out.setdefault(path, []).append([index, source])
                        kept += 1
        return out

    cached = repo.catalog_entry(f"sides{VERSION}|{key}", compute)
    return {path: [(int(i), str(s)) for i, s in entries] for path, entries in cached.items()}


def _compiled(header: str, tests: dict[str, str], path: str) -> CompiledSuite | None:
    """One suite of the `tests` (name -> source) that compile beside `header`, or None if none does."""
    fine = {}
    for name, source in tests.items():
        try:
            compile_suite(f"{header}\n\n{source}", path)
        except UnsupportedTest:
            continue
        fine[name] = source
    return compile_suite(header + "".join(f"\n\n\n{s}" for s in fine.values()), path) if fine else None


def _kept_sides(repo: Repo, path: str, probed: dict[str, list[str]], mutant: dict[str, str]) -> list[str]:
    """The sides of `probed` (name -> statements of the test file `path`) the reference answers stably and in time
    and the bug fails, as test sources, in order."""
    header = keep_tests(repo.call_sources[path], set())
    first = _compiled(header, {n: t for n, st in probed.items() if (t := as_test(n, st, None)) is not None}, path)
    if first is None:
        return []
    records = records_by_nodeid([first], repo.observe_reference([first], 2 * SIDE_DEADLINE_S))  # a wild value
    # may keep the reference busy (num2words of a huge float): what it does not answer soon is no side
    answered = {}
    for name, statements in probed.items():
        record = records.get(f"{path}::{name}")
        if (record is None or record.error is not None or any(isinstance(v, Raised) for v in record.slots)
                or any(len(repr(v)) > MAX_SIDE_ANSWER for v in record.slots)):
            continue
        if (source := as_test(name, statements, dict(enumerate(record.slots)))) is not None:
            answered[name] = source
    suite = _compiled(header, answered, path)
    if suite is None:
        return []
    again = repo.run(repo.sources, [suite], SIDE_DEADLINE_S)  # against the reference's own first run of it
    buggy = repo.run(mutant, [suite], SIDE_DEADLINE_S)
    return [answered[t.name] for t, nodeid in zip(suite.tests, suite.nodeids())
            if again.outcome(nodeid) is TestOutcome.PASSED and buggy.outcome(nodeid) is TestOutcome.FAILED]
