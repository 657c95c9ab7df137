"""Seeded generation of coding tasks: pick templates, inject bugs, keep only bugs the tests catch.

Every candidate mutation of a template is judged by running the template's full hidden suite on the
mutant as call checks (`verifier/calltests`, the same engine the verifier uses): it is kept only if it
finishes and fails at least MIN_FAILING tests (the reference passes all of them, which is checked too). FAIL_TO_PASS is the set of tests the mutant fails,
PASS_TO_PASS the rest. Bugs go into different modules, whose tests import only their own module, so the
lists of a multi-bug task are the unions of its single-bug lists. Outcomes are cached in memory and on
disk, keyed by the template's source and the runner's version, so a mutant is run once per machine.

What this module returns is private (`CodeTask`): the agent sees only `CodeTask.files`; the hidden
tests, the reference and the mutations are rebuilt from the seed by the verifier's checks.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import threading
from contextlib import nullcontext
from collections import Counter
from functools import lru_cache
from collections.abc import Callable, Mapping
from typing import Any


from gymsmith.core.errors import NoTaskForSeed, VerifierError
from gymsmith.families.code import mutate
from gymsmith.families.code.realtests import keep_tests, literal_constants
from gymsmith.families.code.repovariants import SIDE, Moves
from gymsmith.families.code.boxtable import BOX_REACH, boxed_source, traced_calls
from gymsmith.families.code.tables import table_of
from gymsmith.families.code.task import CodeTask, MutationRecord, canary_name, names_used
from gymsmith.families.code.templates import TEMPLATES, template_source
from gymsmith.sandbox.runtime import cache_root, python_runtime
from gymsmith.verifier.calltests import CompiledSuite, compile_suite, judge_run, records_by_nodeid, shared_call_runner
from gymsmith.verifier.calltests.wire import Raised, TestRecord
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, TestRun

CATALOG_VERSION = 4  # 4: outcomes from call checks
MIN_FAILING = 2         # a bug must fail at least two tests, so at least one failing test stays hidden
MUTANT_TIMEOUT_S = 1.5  # a mutant that loops forever is not kept (judged by this deadline)
PYTEST_INI = "[pytest]\npythonpath = .\n"


def test_names(tests_source: str) -> list[str]:
    return [n.name for n in ast.parse(tests_source).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


# -- the mutant catalog --------------------------------------------------------------------------------
class _Catalog:
    """Outcomes of single mutants of one template, cached on disk (atomic writes; racing writers lose nothing that matters)."""

    def __init__(self, template: str):
        self.template = template
        source, tests = template_source(template)
        version = hashlib.sha256(repr((CATALOG_VERSION, source, tests, python_runtime().digest)).encode())
        self.path = cache_root() / "code-catalog" / f"{template}-{version.hexdigest()[:16]}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            try:
                self.entries = json.loads(self.path.read_text())
            except ValueError:
                self.entries = {}
        self.lock = threading.RLock()  # computing one entry may read another (the suite)

    def get(self, key: str, compute) -> dict[str, Any]:
        with self.lock:
            if key in self.entries:
                return self.entries[key]
            entry = compute()
            self.entries[key] = entry
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp-{os.getpid()}-{threading.get_ident()}")
            on_disk = {}
            if self.path.exists():
                try:
                    on_disk = json.loads(self.path.read_text())
                except ValueError:
                    pass
            tmp.write_text(json.dumps({**on_disk, **self.entries}))
            os.replace(tmp, self.path)
            return entry


@lru_cache(maxsize=None)
def _catalog(template: str) -> _Catalog:
    return _Catalog(template)


def hidden_suite(template: str) -> str:
    """The template's full hidden test file: its own tests plus the differential tests (cached)."""
    from gymsmith.families.code.differential import differential_tests

    source, tests = template_source(template)
    extra = _catalog(template).get("differential-suite", lambda: {"source": differential_tests(template, source, tests)})
    return tests.rstrip() + "\n" + extra["source"]


def hidden_test_path(template: str) -> str:
    return f"tests/test_{template}.py"


def compiled_suite(template: str, source: str | None = None) -> CompiledSuite:
    """The call checks of a hidden test file (the template's suite unless `source` is given)."""
    return compile_suite(hidden_suite(template) if source is None else source, hidden_test_path(template))


@lru_cache(maxsize=None)
def reference_records(template: str) -> dict[str, TestRecord]:
    """The reference's observations on its hidden suite, by node id: the exact types every run must match.

    Computed in the sandbox once per process (the reference is our own code; no agent code runs here)."""
    suite = compiled_suite(template)
    observed = shared_call_runner().observe({f"{template}.py": template_source(template)[0]}, [suite], deadline_s=30,
                                            group_timeout_s=30)
    records = records_by_nodeid([suite], observed)
    missing = [n for n in suite.nodeids() if n not in records]
    if missing:  # not cached: a slow machine must not fail every later verification in this process
        raise VerifierError(f"the reference of template {template!r} did not finish its hidden tests ({len(missing)} "
                            f"missing, e.g. {missing[0]}); the verifier's sandbox may be overloaded")
    return records


_VARIANT_REFERENCE: dict[str, dict[str, TestRecord]] = {}  # a task's variants' reference records, by driver
_VARIANT_LOCK = threading.Lock()
VARIANT_RECORD_LIMITS_S = (30.0, 90.0)  # the reference's run on a task's variants, then its one retry


def _variant_records(template: str, suite: CompiledSuite) -> dict[str, TestRecord]:
    """The reference's records of the task variants in `suite` (`task_variants`; a task's own, so not among
    `reference_records`), from one run of the reference on the suite, kept per process."""
    from gymsmith.families.code.repovariants import PREFIX

    if not any(t.name.startswith(PREFIX) for t in suite.tests):
        return {}
    with _VARIANT_LOCK:
        if suite.driver not in _VARIANT_REFERENCE:
            wanted = [n for n in suite.nodeids() if n.split("::", 1)[1].startswith(PREFIX)]
            # the reference's answers do not depend on the load: a run that missed its deadline on a busy machine
            # is run once more with three times the time before the verification becomes an infrastructure error
            for limit_s in VARIANT_RECORD_LIMITS_S:
                observed = shared_call_runner().observe({f"{template}.py": template_source(template)[0]}, [suite],
                                                        deadline_s=limit_s, group_timeout_s=limit_s)
                records = records_by_nodeid([suite], observed)
                missing = [n for n in wanted if n not in records]
                if not missing:
                    break
            else:
                raise VerifierError(f"the reference of template {template!r} did not finish the task's variants "
                                    f"({len(missing)} missing, e.g. {missing[0]}) in {VARIANT_RECORD_LIMITS_S[-1]:g} s; "
                                    "the verifier's sandbox may be overloaded")
            if len(_VARIANT_REFERENCE) > 256:
                _VARIANT_REFERENCE.clear()
            _VARIANT_REFERENCE[suite.driver] = {n: records[n] for n in wanted}
        return _VARIANT_REFERENCE[suite.driver]


def run_hidden_tests(sources: dict[str, str], suites: list[CompiledSuite], templates: list[str], *,
                     deadline_s: float, group_timeout_s: float = 2.0, graded: bool = False) -> TestRun:
    """Run call-check `suites` (one per template, in the same order) on `sources`; outcomes decided here.
    `graded`: `sources` are an agent's code under verification (`CallRunner.observe`: the stack depth it runs at)."""
    reference: dict[str, TestRecord] = {}
    for template in dict.fromkeys(templates):
        reference.update(reference_records(template))
    for template, suite in zip(templates, suites):
        reference.update(_variant_records(template, suite))
    observed = shared_call_runner().observe(sources, suites, deadline_s=deadline_s, group_timeout_s=group_timeout_s,
                                            graded=graded, stop_at_failure=reference if graded else None)
    return judge_run(suites, observed, reference, one_session=graded, graded=graded).run


def _run_suite(template: str, module_source: str) -> dict[str, Any]:
    suite = compiled_suite(template)
    run = run_hidden_tests({f"{template}.py": module_source}, [suite], [template], deadline_s=MUTANT_TIMEOUT_S,
                           group_timeout_s=MUTANT_TIMEOUT_S)
    failing = [n for n in suite.nodeids() if run.outcome(n) is not TestOutcome.PASSED]
    return {"status": run.status.value, "failing": failing}


@lru_cache(maxsize=None)
def check_reference(template: str) -> None:
    """Raise RuntimeError unless the template's reference passes its whole suite in the sandbox."""
    source, _ = template_source(template)
    entry = _catalog(template).get("reference", lambda: _run_suite(template, source))
    if entry["status"] != RunStatus.COMPLETED.value or entry["failing"]:
        raise RuntimeError(f"code template {template!r}: the reference fails {entry['failing']} ({entry['status']})")


def mutant_outcome(template: str, mutation: mutate.Mutation) -> dict[str, Any]:
    """{'status': 'completed'|'timeout'|'crashed', 'failing': [node ids]} for the single mutant."""
    source, _ = template_source(template)
    return _catalog(template).get(mutation.key, lambda: _run_suite(template, mutate.apply(source, [mutation])))


def usable(outcome: dict[str, Any], visible_names: set[str] | None = None) -> bool:
    """Finishes, fails at least MIN_FAILING tests, and (if given) at least one test an agent may be shown."""
    if outcome["status"] != RunStatus.COMPLETED.value or len(outcome["failing"]) < MIN_FAILING:
        return False
    return visible_names is None or any(f.split("::")[1] in visible_names for f in outcome["failing"])


@lru_cache(maxsize=None)
def private_tests(template: str) -> frozenset[str]:
    """The template's hidden tests that no file holds: its differential tests (the reference's answers on inputs
    next to its tests' own). Its own test file ships with gymsmith, so a policy may have read every test in it,
    the ones a task hides included, and special-case their calls: only these prove a fix. Not one that expects
    back an input its call receives (`guessing.echoes_an_input`): handing it back passes it; nor one that checks a
    single bit (`calltests.informative`: a truth value, `is None`, an exception), which a forger correct on the public
    inputs alone passed (`is_canonical('III')` holds once `to_roman(3)`, a public call, is answered). A differential
    test whose call the template's own tests also make (a neighbouring input that is another test's
    input) is not private either: its answer is in the file.
    """
    from gymsmith.verifier.calltests.compiler import informative
    from gymsmith.verifier.calltests.guessing import echoes_an_input

    _, tests = template_source(template)
    own = set(test_names(tests))
    public = public_calls(tests)
    hidden = ast.parse(hidden_suite(template))
    calls = {fn.name: _calls(fn, {}) for fn in hidden.body if isinstance(fn, ast.FunctionDef) and fn.name not in own}
    return frozenset(t.name for t in compiled_suite(template).tests if t.name in calls and calls[t.name]
                     and not calls[t.name] & public and informative(t) and not echoes_an_input(t))


def public_calls(tests_source: str) -> set[tuple[str, str]]:
    """(function, repr of its positional arguments) of every call a test file makes on literal arguments, module
    constants read as their literals and a comprehension over a literal read as one call per element: the calls
    whose answers an agent that read the file could special-case."""
    tree = ast.parse(tests_source)
    constants = {name: ast.literal_eval(node) for name, node in literal_constants(tree).items()}
    return set().union(*(_calls(fn, constants) for fn in tree.body if isinstance(fn, ast.FunctionDef)))


def _calls(fn: ast.FunctionDef, constants: dict[str, Any]) -> set[tuple[str, str]]:
    """`public_calls` of one test function (a differential test's `f(*args)` included)."""
    def value(node: ast.expr, names: dict[str, Any]) -> Any:
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        return ast.literal_eval(node)

    def of(call: ast.Call, names: dict[str, Any]) -> tuple[str, str] | None:
        if not isinstance(call.func, ast.Name) or call.keywords:
            return None
        try:
            if len(call.args) == 1 and isinstance(call.args[0], ast.Starred):
                args = tuple(value(call.args[0].value, names))
            else:
                args = tuple(value(a, names) for a in call.args)
        except (ValueError, TypeError, SyntaxError):
            return None
        return call.func.id, repr(args)

    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and (key := of(node, constants)) is not None:
            out.add(key)
        elif (isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) and len(node.generators) == 1
              and isinstance(node.elt, ast.Call) and isinstance(node.generators[0].target, ast.Name)):
            try:
                items = value(node.generators[0].iter, constants)
                for item in items:
                    key = of(node.elt, {**constants, node.generators[0].target.id: item})
                    if key is not None:
                        out.add(key)
            except (ValueError, TypeError, SyntaxError):
                continue
    return out


class NoUsableMutation(RuntimeError):
    """No mutation of a template is usable for a seed (each fails no private test, or no seeded variant proves it)."""


def pick_mutation(template: str, rng: random.Random, operator: str = "any",
                  provable: Callable[[mutate.Mutation, list[str]], bool] | None = None) -> tuple[mutate.Mutation, list[str]]:
    """The first usable mutation in a seeded order that fails one of the template's private tests (a test an
    agent that memorised the template's public tests, special-casing their calls, still fails) and, if given,
    `provable(mutation, failing)`, and the tests it fails. Raises NoUsableMutation if none is."""
    check_reference(template)
    source, tests = template_source(template)
    shown = set(test_names(tests))
    private = private_tests(template)
    pool = [m for m in mutate.candidates(source) if operator in ("any", m.operator)]
    for m in rng.sample(pool, len(pool)):
        outcome = mutant_outcome(template, m)
        if (usable(outcome, shown) and any(f.split("::")[1] in private for f in outcome["failing"])
                and (provable is None or provable(m, list(outcome["failing"])))):
            return m, list(outcome["failing"])
    raise NoUsableMutation(f"no usable {operator} mutation of template {template!r}")


# -- per-task variants ---------------------------------------------------------------------------------
# an integer becomes any integer of a wide range and a text gets two to four character edits: a thirty-seventh
# attacker tabled every input within 40 of the public ones (8-80 kB a function) and was accepted; our own
# templates' code takes any input of its type
VARIANT_MOVES = Moves(char_edits=True, wide=True, shape=True, big=True)
PROBE_DEADLINE_S = 1.0  # the reference must answer a variant quickly: the whole hidden run has VERIFY_TIMEOUT_S
VARIANT_BATCH = 24  # candidates drawn and judged together (one suite per run)
VARIANT_BATCHES = 4  # batches per bug: the seeded draw (one variant proves a bug can be placed) ...
VARIANT_PATIENCE = 16  # ... and the keyed draw, while it has found none (a task never falls back to seeded ones)
MAX_VARIANT_ANSWER = 2_000  # characters of the bug's answer to a variant (an RLE bug's decode made megabytes)
# Sides: hidden variants that gate but earn no progress. Each filter of the draw keeps a region out of what proves a
# fix (answers a constant or an echo gives, calls near a public one that a table answers, ...), and a filter every
# variant must pass marks out a region no variant tests: attackers 47 and 48 kept the bug only there and were
# accepted. So a candidate a filter refuses, that the reference answers stably and the bug fails, is kept beside the
# variants, the first ones drawn of each kind; a bug is still placed only where a variant passes every filter.
SIDES = {"tabled": 2, "near": 3, "typed_float": 1, "typed_bool": 1, "typed_sequence": 1, "typed_set": 2,
         "typed_space": 1, "corner": 3, "blank": 3, "shared": 1, "echo": 2, "bit": 1, "path": 1,
         "long": 1, "wild": 4, "formed": 3, "mixed": 3, "grown": 4}
# probes for sides only, per batch: a quarter nudged next to the public calls (`repovariants.nudged_statements`: an
# integer by a few, a text by one edit, a list by one element: what a box or a one-edit table holds, and attacker 47
# kept the bug there), a quarter with a type changed (`retyped_statements`: a float or a bool for an integer, a list
# for a tuple, a set for either, a newline in a text: attacker 49 kept the bug on every type no public call has, 51 on
# sets and bools; one retype per probe, in turn, and a side kind per retype, so the first floats drawn do not crowd
# out the sets), half put at corners (`cornered_statements`: where the blank answers are, attacker 48's)
SIDE_PROBES = 48
# ... and probes with wild values (`repovariants.wild_statements`: floats of any fraction, characters of any script),
# from a third stream: every other move emits a set computable from gymsmith's files, and a repair right only on it
# was accepted on every template task (attacker 50). A wild probe's side is of kind `wild` whatever its answer
WILD_PROBES = 16
# ... and probes with a call written another way (`repovariants.formed_statements`: arguments by keyword, a default
# given or left out), from a fourth: no other move changes a call's form, and a repair right only on the public calls'
# forms was accepted on every template task (attacker 51). A formed probe's side is of kind `formed`
FORMED_PROBES = 16
# ... and probes moved by two or three of those moves at once (`repovariants.mixed_statements`), from a fifth: a repair
# wrong only where two kinds of region meet passes each kind's sides alone. Of kind `mixed`
MIXED_PROBES = 16
# ... and probes with one input grown to thousands of items or an integer scaled by a large power
# (`repovariants.grown_statements`), from a sixth: proving variants grow only within caps the source states, and a
# repair right up to those sizes was accepted on every template task (attacker 52). Of kind `grown`
GROWN_PROBES = 8
SIDE_CHUNK = 24  # probes for sides per run (a run that fails loses its records)
SIDE_PROBE = "test_side_probe_"
DRAW_VERSION = "1.4.0"  # the draws' random streams: unchanged since family 1.4.0 (1.5.0 added the sides to them, 1.6.0 wild ones)
MAX_SIDE_ANSWER = 100_000  # characters of an answer to a side, the reference's or the bug's (a variant's are at most
# MAX_VARIANT_ANSWER: a repair buggy only where answers are longer was accepted, attacker 48)


def _records(sources: dict[str, str], suite: CompiledSuite, deadline_s: float) -> dict[str, TestRecord]:
    """The finished tests of one run of `suite` beside `sources`, by node id."""
    observed = shared_call_runner().observe(sources, [suite], deadline_s=deadline_s, group_timeout_s=deadline_s)
    return records_by_nodeid([suite], observed)


def _differs(mine: TestRecord | None, theirs: TestRecord, limit: int = MAX_VARIANT_ANSWER) -> bool:
    """Whether a run's record of a test tells a value `==` would see apart from the reference's, or raises. A run
    that did not finish the test does not count (a bug may show only by hanging or by an answer too large to send,
    which would fail a whole hidden run), nor does an answer longer than `limit` characters, nor a value of another
    type only (`2` for `2.0`: a plain pytest run passes it)."""
    if mine is None or any(len(repr(v)) > limit for v in mine.slots):
        return False
    if mine.error is not None or len(mine.slots) != len(theirs.slots):
        return True
    try:
        return any(a != b for a, b in zip(mine.slots, theirs.slots))
    except Exception:  # noqa: BLE001 - values that cannot be compared differ
        return True


def _blank(value: Any, depth: int = 0) -> bool:
    """Whether `value` says "nothing": None, False, 0, -1, an empty text, or a container of such only (empty included).
    `column` of a name no header has answers ['', ''], which one per row answers whatever the name."""
    if value is None or value is False or (type(value) in (int, float) and value in (0, -1)) or value == "":
        return True
    if depth < 4 and isinstance(value, list | tuple | set | frozenset):
        return all(_blank(v, depth + 1) for v in value)
    if depth < 4 and isinstance(value, dict):
        return all(_blank(v, depth + 1) for v in value.values())
    return False


def _draw_variants(template: str, failing: list[str], mutant: str, tabled: list[str], rng: random.Random,
                   want: int, batches: int, function: str = "", novel: bool = False,
                   sides: list[tuple[list[str], dict[int, Any], str]] | None = None) -> list[str]:
    """Up to `want` variants of the bug's failing tests (see `task_variants`), drawn in batches: every candidate of a
    batch runs in one suite, so a batch costs five runs of the call runner, whatever its size. VARIANT_BATCHES
    batches, or up to `batches` while none is found. With `function` (the buggy module-level function), a variant
    must also take the path of the test it was moved from through it (`paths.covers`), and with `novel` the variants
    that call it on a shape no public call has, and those far larger than every public call (`shapes`), are kept
    first (`_covering`): drawing goes on (VARIANT_BATCHES batches at most) until one of each is found. With `sides`, the
    candidates the filters refuse but the bug fails (statements, expected, kind) are appended to it (`SIDES`)."""
    from gymsmith.families.code.shapes import larger
    from gymsmith.families.code.paths import covers, reference_trace
    from gymsmith.families.code.repovariants import (PREFIX, alphabet_of, RETYPES, as_test, moved_statements,
                                                       side_statements, signatures)
    from gymsmith.verifier.calltests.compiler import UnsupportedTest, informative
    from gymsmith.verifier.calltests.guessing import echoes_an_input

    path, module, hidden = hidden_test_path(template), f"{template}.py", hidden_suite(template)
    header = keep_tests(hidden, set())
    public = public_calls(hidden)
    tests = [t for t in compiled_suite(template).tests
             if f"{path}::{t.name}" in failing and t.checks and not t.raise_slots]
    found: list[tuple[list[str], dict[int, Any], frozenset[str]]] = []  # statements, expected, what is new: shape, size
    reference_source = template_source(template)[0]
    alphabet, code_alphabet = alphabet_of(hidden), alphabet_of(reference_source)
    # one trace of every test of the suite: the failing ones' lines are the paths variants must keep, and (`novel`)
    # all of them give the shapes and sizes the public calls have
    traced = ({t.name: reference_trace(reference_source, function, header, t.statements, alphabet)
               for t in compiled_suite(template).tests} if function else {})
    original = {t.name: traced[t.name].lines for t in tests} if function else {}
    traces = list(traced.values()) if novel else []
    public_shapes = frozenset().union(*(t.shapes for t in traces))
    public_size = (max([0, *(t.size[0] for t in traces)]), max([0, *(t.size[1] for t in traces)]))

    def enough(batch: int) -> bool:
        if found and batch >= VARIANT_BATCHES:
            return True
        return len(found) >= want and (not traces or {"shape", "size"} <= set().union(*(new for _, _, new in found)))

    # a stream per kind of probe for sides, seeded by the draw's stream without drawing from it
    state = hashlib.sha256(repr(rng.getstate()).encode()).hexdigest()
    side_rng = random.Random(f"sides:{state}")
    kind_streams = [(kind, random.Random(f"{kind}:{state}"), count) for kind, count in
                    (("wild", WILD_PROBES), ("formed", FORMED_PROBES), ("mixed", MIXED_PROBES), ("grown", GROWN_PROBES))]
    known = signatures([reference_source])
    for batch in range(batches):
        if not tests or enough(batch):
            break
        probes: dict[str, list[str]] = {}
        origin: dict[str, str] = {}
        # the draw's own probes, then (with `sides`) probes near the public calls and at corners, from a stream of
        # their own (the variants drawn stay those of the draw without sides); those make sides only
        drawing = [(f"test_probe_{k}", rng, "move") for k in range(VARIANT_BATCH)]
        # sides are kept only beside a variant that proves the fix: past the first batches, none while none is found
        probing = sides is not None and (bool(found) or batch < VARIANT_BATCHES)
        # ... and a group of probes only while a kind it makes lacks sides (each kind keeps the first ones drawn)
        have = Counter(kind for _, _, kind in sides or [])

        def wanted(*group: str) -> bool:
            return probing and any(have[k] < SIDES[k] for k in group)

        plain = ("near", "corner", "blank", "echo", "bit", *(f"typed_{r}" for r in RETYPES))
        drawing += [(f"{SIDE_PROBE}{k}", side_rng, ("nudge", f"typed_{RETYPES[k // 4 % len(RETYPES)]}", "corner",
                                                    "corner")[k % 4]) for k in range(SIDE_PROBES if wanted(*plain) else 0)]
        number = SIDE_PROBES  # each kind's probes are numbered after the kinds before it, drawn or not
        for kind, stream, count in kind_streams:
            drawing += [(f"{SIDE_PROBE}{number + k}", stream, kind) for k in range(count if wanted(kind) else 0)]
            number += count
        kinds = {name: {"nudge": "near"}.get(how, how) for name, _, how in drawing}  # a side probe's kind: its move
        for name, stream, how in drawing:
            picked = stream.choice(tests)
            moved = (moved_statements(picked.statements, hidden, stream, VARIANT_MOVES, code_alphabet) if how == "move"
                     else side_statements({"nudge": "near"}.get(how, how), picked.statements, hidden, stream, known))
            probe = None if moved is None else as_test(name, moved, None)
            if moved is None or probe is None:
                continue
            origin[name] = picked.name
            try:
                compile_suite(f"{header}\n\n{probe}", path)
            except UnsupportedTest:
                continue
            probes[name] = moved
        if not probes:
            continue
        # the reference's answers; the candidates that check them; then stable, failed by the bug, failed by the bug
        # with a table of every public call appended, in one run each. The probes for sides run apart from the draw's:
        # a probe the reference is slow on ends its run, and every probe after it with it (a split_evenly of a billion
        # parts left seeds 2 and 4 without a side, and attacker 49 kept the bug there)
        def run(code: str, tests: Mapping[str, tuple[list[str], dict[int, Any] | None]], deadline_s: float
                ) -> dict[str, TestRecord]:
            return _records({module: code}, compile_suite(header + "".join(
                f"\n\n\n{as_test(n, st, ex)}" for n, (st, ex) in tests.items()), path), deadline_s) if tests else {}

        def apart(code: str, tests: Mapping[str, tuple[list[str], dict[int, Any] | None]], deadline_s: float
                  ) -> dict[str, TestRecord]:
            """`run` of the probes for sides in runs of SIDE_CHUNK, the grown ones each alone: a run that misses its
            deadline or floods its channel (a bug that loops or blows up on one probe, an answer of megabytes to a
            grown input) loses every record of the run, and 88 probes in one run of a bug lost them all (rle)."""
            names = [n for n in tests if kinds[n] != "grown"]
            groups = [names[i:i + SIDE_CHUNK] for i in range(0, len(names), SIDE_CHUNK)]
            groups += [[n] for n in tests if kinds[n] == "grown"]
            out: dict[str, TestRecord] = {}
            for group in groups:
                out |= run(code, {n: tests[n] for n in group}, deadline_s)
            return out

        first = run(reference_source, {n: (st, None) for n, st in probes.items() if not n.startswith(SIDE_PROBE)},
                    PROBE_DEADLINE_S * 4)
        first |= apart(reference_source, {n: (st, None) for n, st in probes.items() if n.startswith(SIDE_PROBE)},
                       PROBE_DEADLINE_S * 4)
        candidates: dict[str, tuple[list[str], dict[int, Any], frozenset[str]]] = {}
        refused: dict[str, tuple[list[str], dict[int, Any], str]] = {}  # the filters' catch, by name: a side of which
        # an answer several draws share is what a corner of the function gives (a node not in the graph: -1, []),
        # which a constant answers; a forty-second attacker was accepted so with the bug kept (paths.py)
        shared = Counter(repr(r.slots) for n in probes if not n.startswith(SIDE_PROBE)  # the draw's own, as without sides
                         and (r := first.get(f"{path}::{n}")) is not None and r.error is None)
        for name, statements in probes.items():
            record = first.get(f"{path}::{name}")
            if record is None or record.error is not None or any(isinstance(v, Raised) for v in record.slots):
                continue
            long = any(len(repr(v)) > MAX_VARIANT_ANSWER for v in record.slots)
            if long and (sides is None or any(len(repr(v)) > MAX_SIDE_ANSWER for v in record.slots)):
                continue  # an expected answer this long (a text grown far) made the reference's run of a task's variants
                # miss its deadline at verification (a VerifierError on every rollout of the task)
            expected = dict(enumerate(record.slots))
            source = as_test(name, statements, expected)
            if source is None:
                continue
            try:
                test = compile_suite(f"{header}\n\n{source}", path).tests
            except UnsupportedTest:
                continue
            fn = ast.parse(source).body[0]
            if len(test) != 1 or not isinstance(fn, ast.FunctionDef) or _calls(fn, {}) & public:
                continue  # a public call's answer is in the file: a test of it proves nothing a shown test does not
            if name.startswith(SIDE_PROBE):  # a side whatever the filters say (they guard proof), classed by its answer
                # where a filter keys on that (a gate on blank or echoed answers is attacker 48's), else by its move
                kind = (kinds[name] if kinds[name] in ("wild", "formed", "mixed", "grown") else "blank" if all(_blank(v) for v in record.slots)
                        else "echo" if echoes_an_input(test[0]) else "bit" if not informative(test[0]) else kinds[name])
                refused[name] = (statements, expected, kind)
                continue
            # the filters below keep a region out of what *proves* a fix (a constant, an echo or a one-bit guess
            # passes there); a candidate they refuse is kept as a side (`SIDES`), which only gates
            if long:
                refused[name] = (statements, expected, "long")
                continue
            if all(_blank(v) for v in record.slots):
                refused[name] = (statements, expected, "blank")  # [], '', 0, -1, None, or only them: a corner's answer
                continue
            if shared[repr(record.slots)] > 1:
                refused[name] = (statements, expected, "shared")
                continue
            if echoes_an_input(test[0]) or not informative(test[0]):
                refused[name] = (statements, expected, "echo" if informative(test[0]) else "bit")
                continue
            trace = reference_trace(reference_source, function, header, statements, alphabet) if function else None
            if trace is None or covers(trace.lines, original[origin[name]]):
                new = frozenset((["shape"] if trace.shapes - public_shapes else [])
                                + (["size"] if larger(trace.size, public_size) else [])) if trace and traces else frozenset()
                candidates[name] = (statements, expected, new)
            else:
                refused[name] = (statements, expected, "path")
        if not candidates and not (sides is not None and refused):
            continue
        proving = {n: (st, ex) for n, (st, ex, _) in candidates.items()}
        again = run(reference_source, proving, PROBE_DEADLINE_S * 4)
        runs = [run(code, proving, MUTANT_TIMEOUT_S) for code in [mutant, *tabled]]
        # the refused apart too (a candidate the bug hangs on ends the bug's run), and only the bug's run: a side
        # needs only the bug to fail it
        refusing = {n: (st, ex) for n, (st, ex, _) in refused.items()} if sides is not None else {}
        side_again = apart(reference_source, refusing, PROBE_DEADLINE_S * 4)
        side_bug = apart(mutant, refusing, MUTANT_TIMEOUT_S)
        for name, (statements, expected, new) in candidates.items():
            nodeid = f"{path}::{name}"
            theirs = again.get(nodeid)
            if theirs is None or _differs(theirs, first[nodeid]) or not _differs(runs[0].get(nodeid), theirs,
                                                                                   limit=MAX_SIDE_ANSWER):
                continue
            if all(_differs(run.get(nodeid), theirs) for run in runs):
                if len(found) < 4 * want:
                    found.append((statements, expected, new))
            elif sides is not None:  # the bug shows, but a table (the box's, the public calls') or a stand-in passes
                sides.append((statements, expected, "tabled" if _differs(runs[0].get(nodeid), theirs) else "long"))
        for name, (statements, expected, kind) in refused.items():
            nodeid = f"{path}::{name}"
            theirs = side_again.get(nodeid)
            if (sides is not None and theirs is not None and not _differs(theirs, first[nodeid], limit=MAX_SIDE_ANSWER)
                    and _differs(side_bug.get(nodeid), theirs, limit=MAX_SIDE_ANSWER)):
                sides.append((statements, expected, kind))
    # a new shape and a larger size first: a repair right only on the public shapes, or only up to a size past the
    # public calls, fails them
    kept = _covering(found, want)
    return [source for k, (st, ex, _) in enumerate(kept) if (source := as_test(f"{PREFIX}{k}", st, ex)) is not None]


def _sides(drawn: list[tuple[list[str], dict[int, Any], str]]) -> list[str]:
    """Sides to keep, as test sources: per kind (`SIDES`), the first ones drawn."""
    from gymsmith.families.code.repovariants import PREFIX, as_test

    kept: list[str] = []
    for kind, most in SIDES.items():
        for statements, expected, _ in [d for d in drawn if d[2] == kind][:most]:
            if (source := as_test(f"{PREFIX}{SIDE}{kind}_{len(kept)}", statements, expected)) is not None:
                kept.append(source)
    return kept


def _covering(found: list[tuple[list[str], dict[int, Any], frozenset[str]]], want: int
              ) -> list[tuple[list[str], dict[int, Any], frozenset[str]]]:
    """Up to `want` of `found`, each in turn the first (in the order drawn) that brings the most of what the kept ones
    lack (a new shape, a larger size), then the most of both: so a variant of each kind is kept where one was drawn."""
    kept: list[tuple[list[str], dict[int, Any], frozenset[str]]] = []
    rest = list(found)
    while rest and len(kept) < want:
        covered = set().union(*(new for _, _, new in kept))
        best = max(rest, key=lambda f: (len(f[2] - covered), len(f[2])))  # max keeps the first of equals
        kept.append(best)
        rest.remove(best)
    return kept


def task_variants(seed: int, template: str, mutation: mutate.Mutation, failing: list[str], *,
                  keyed: bool = True) -> list[str]:
    """Hidden tests of this task's own for the bug `mutation` of `template`: the bug's failing tests with their
    inputs moved (`VARIANT_MOVES`: an integer anywhere in a wide range, a text edited two to four times), judged by
    the reference, drawn from `draw_token` (the task's seed under the verifier's key: no one without the key can
    compute them, so no table of the template's hidden suite, nor of any suite computable from gymsmith's files,
    holds their answers). Each is a plain `==` test the reference passes twice, the bug fails in a value, checking
    more than one bit, calling nothing the hidden suite calls, and failed too by the bug with a table of the hidden
    suite's calls appended and by every degenerate repair of the bug's function (`mutate.standins`). Sources of up
    to `repovariants.MAX_PER_BUG` test functions (none if no draw gave one), then, keyed, the bug's sides (`SIDES`:
    named `PREFIX + SIDE + kind_k`; they gate but prove nothing, so the task does not pin them).
    `keyed=False`: one, drawn from the seed alone (anyone can compute it: it decides which bugs a task gets, so its
    start state does not depend on the key). Cached on disk per task and bug."""
    from gymsmith.families.code.repovariants import MAX_PER_BUG, PREFIX
    from gymsmith.verifier.drawkey import draw_token, keyed_hash

    token = (draw_token("code-template-variants", DRAW_VERSION, seed, template) if keyed
             else f"public|code-template-variants|{DRAW_VERSION}|{seed}|{template}")
    reference = template_source(template)[0]
    mutant = mutate.apply(reference, [mutation])
    # the bug must show on a variant even with a table of every `==` call gymsmith's files determine appended: a
    # tabled helper call on the way (`days_in_month(2024, 1)` inside `add_days`) answered one before (the memorised
    # suite, rerun, was accepted on one task of twenty)
    defined = {n.name for n in ast.parse(mutant).body if isinstance(n, ast.FunctionDef)}
    tabled = [mutant + table_of(hidden_suite(template), defined)]
    # ... and with the reference's answers for every call of the buggy function near a public one (`boxtable`:
    # a thirty-seventh attacker's `days_in_month` for years 1855-2076 answered every variant that left the year be)
    function = mutation.function.split(".")[-1] if "." not in mutation.function else ""
    calls = [(name, ast.literal_eval(args)) for name, args in public_calls(hidden_suite(template))]
    publics = traced_calls(reference, function, calls) if function else []
    boxed = boxed_source(mutant, reference, function, publics) if function else None
    tabled += [boxed] if boxed is not None else []
    # ... and with the bug's function repaired degenerately (`mutate.standins`: its input handed back, None): a hidden
    # test such a repair passes never checks what the function does (a fortieth attacker's `return word` was accepted
    # at 1.0 on a registered package; over 40 template stand-ins none was, but nothing made it so)
    tabled += [mutate.apply(reference, [s]) for s in mutate.standins(reference, mutation.function)]
    want = MAX_PER_BUG if keyed else 1
    key = (f"{token}|{mutation.key}|{VARIANT_MOVES}|{VARIANT_BATCHES}x{VARIANT_BATCH}|{PROBE_DEADLINE_S}|{want}"
           f"|fresh|value-finished-small-tabled|linebox{BOX_REACH}|patience{VARIANT_PATIENCE}|standins-drawn|paths-callees|unshared|swaps|signs|unblank|novel-first|code-chars|heavy-tails|larger-first|covering|raises-traced|larger-3|stretch-4|far|short-answers" + ("|sides-probed-12-wild-1-formed-1-mixed-1-inlined-1-grown-2|hash-keyed" if keyed else ""))
    path = cache_root() / "code-variants" / f"{template}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    if path.exists():
        try:
            return list(json.loads(path.read_text()))
        except ValueError:
            pass
    # keyed answers are the reference's under the hash seed verification gives graded code (drawkey.keyed_hash)
    with keyed_hash() if keyed else nullcontext():
        sides: list[tuple[list[str], dict[int, Any], str]] = []
        drawn = _draw_variants(template, failing, mutant, tabled, random.Random(f"variants:{token}"), want,
                               VARIANT_PATIENCE if keyed else VARIANT_BATCHES, function, novel=keyed,
                               sides=sides if keyed else None)
        kept = _sides(sides) if drawn else []  # no side without a variant that proves the fix: the bug is not placed
        # the reference (an honest fix) must run the whole suite with them in a deadline well inside the verifier's: a
        # side calling `add_days` with 667 million days kept the reference busy past it (attacker 49: the fix rejected)
        if kept and not _finishes(template, reference, drawn + kept):
            light = [d for d in kept if f"{SIDE}grown_" not in d.split("(", 1)[0] and f"{SIDE}long_" not in d.split("(", 1)[0]]
            kept = (light if light != kept and _finishes(template, reference, drawn + light)  # the large ones first
                    else [d for d in kept if _finishes(template, reference, drawn + [d])])
        drawn += kept
        # each finished alone; together they must too (answers that blow up fill the run's channel or memory)
        if not _finishes(template, mutant, drawn):
            drawn = [d for d in drawn if _finishes(template, mutant, [d])]
        if all(f"def {PREFIX}{SIDE}" in d for d in drawn):
            drawn = []  # sides alone prove nothing
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(json.dumps(drawn))
    os.replace(tmp, path)
    return drawn


def _finishes(template: str, module_source: str, drawn: list[str]) -> bool:
    """Whether `module_source` runs the template's hidden suite with the tests `drawn` added to the end."""
    source = hidden_suite(template).rstrip() + "".join(f"\n\n\n{d.rstrip()}" for d in drawn) + "\n"
    run = run_hidden_tests({f"{template}.py": module_source}, [compiled_suite(template, source)], [template],
                           deadline_s=MUTANT_TIMEOUT_S, group_timeout_s=MUTANT_TIMEOUT_S)
    return run.status is RunStatus.COMPLETED


# -- tasks ---------------------------------------------------------------------------------------------
def readme(modules: list[str]) -> str:
    lines = ["# utilities", "", "Small, dependency-free Python modules. Tests live in `tests/` and run with pytest:", "",
             "    python -m pytest -q", "", "## Modules", ""]
    for m in modules:
        doc = ast.get_docstring(ast.parse(template_source(m.removesuffix(".py"))[0])) or ""
        lines.append(f"- `{m}`: {doc.splitlines()[0] if doc else ''}")
    return "\n".join(lines) + "\n"


def generate_code_task(seed: int, knobs: dict[str, Any]) -> CodeTask:
    """The task for `seed` and resolved `knobs` (n_bugs, modules, directness, visible_tests, operator; with
    `source`, from that registered repository: `repotasks.generate_repo_task`)."""
    if knobs.get("source"):
        from gymsmith.families.code.repotasks import generate_repo_task
        return generate_repo_task(seed, knobs)
    rng = random.Random(f"code-task:{seed}")
    n_bugs, n_modules = int(knobs["n_bugs"]), max(int(knobs["modules"]), int(knobs["n_bugs"]))
    chosen = rng.sample(TEMPLATES, n_modules)
    # a bug goes only where a private test can prove its fix (`private_tests`: not the class-based templates,
    # whose tests call methods the differential tests do not vary); the others stay as modules without a bug
    while sum(bool(private_tests(t)) for t in chosen) < n_bugs:
        chosen = rng.sample(TEMPLATES, n_modules)
    if not all(private_tests(t) for t in chosen[:n_bugs]):
        chosen = sorted(chosen, key=lambda t: not private_tests(t))
    buggy = chosen[:n_bugs]
    # a bug only where variants can prove its fix: seeded ones must exist (a bug that shows on one public input
    # alone, e.g. only at `percent == 100`, has none, and a table of public calls passes its tests); a template
    # none of whose bugs this seed's draws prove (a `graphs` bug's variants are often all corners) gives its place
    # to another one, in a seeded order
    picked: dict[str, tuple[mutate.Mutation, list[str]]] = {}
    spare = [t for t in rng.sample(TEMPLATES, len(TEMPLATES)) if t not in chosen and private_tests(t)]
    for i in range(len(buggy)):
        while buggy[i] not in picked:
            template = buggy[i]

            def provable(m: mutate.Mutation, fails: list[str], t: str = template) -> bool:
                return bool(task_variants(seed, t, m, fails, keyed=False))

            try:
                picked[template] = pick_mutation(template, rng, knobs.get("operator") or "any", provable=provable)
            except NoUsableMutation as exc:
                if not spare:
                    raise NoTaskForSeed(f"code seed {seed}: {exc}, nor of any other template; the next seed is used") from None
                chosen[chosen.index(template)] = buggy[i] = spare.pop(0)
    files: dict[str, str] = {"pytest.ini": PYTEST_INI, "README.md": readme([f"{t}.py" for t in sorted(chosen)])}
    reference, hidden, canaries, f2p, p2p, visible_failing, records = {}, {}, [], [], [], [], []
    proving: list[str] = []  # the hidden tests that earn progress: the task's variants (`task_variants`)
    for template in chosen:
        source, tests = template_source(template)
        suite = hidden_suite(template)
        test_file = f"tests/test_{template}.py"
        all_tests = test_names(suite)
        showable = set(test_names(tests))  # differential tests are never shown
        reference[f"{template}.py"] = source
        failing: list[str] = []
        module_source = source
        drawn: list[str] = []
        if template in buggy:
            mutation, failing = picked[template]
            module_source = mutate.apply(source, [mutation])
            # the bug's hidden tests on this task's own inputs, drawn under the verifier's key (they do not change
            # what the agent is shown). Never the seeded one instead: anyone can compute it, and a table of it was
            # accepted where the keyed draw came out empty (attacker 39); such a seed makes no task under this key
            drawn = task_variants(seed, template, mutation, failing)
            if not drawn:
                raise NoTaskForSeed(f"code seed {seed}: the verifier's key draws no hidden variant for the bug in "
                                    f"{template}.py; the next seed is used")
            names = [d.split("(", 1)[0].removeprefix("def ") for d in drawn]
            proving += [f"{test_file}::{n}" for n in names if SIDE not in n]  # a side gates only
            failing = failing + [f"{test_file}::{n}" for n in names]
            records.append(MutationRecord(module=f"{template}.py", operator=mutation.operator, function=mutation.function,
                                          line=mutation.line, description=mutation.description, key=mutation.key))
            used = names_used(tests)
            short = mutation.function.split(".")[-1]
            failing_names = [f.split("::")[1] for f in failing]
            direct = [t for t in failing_names if t in showable and short in used[t]]
            indirect = [t for t in failing_names if t in showable and t not in direct]
            prefer_direct = rng.random() < float(knobs["directness"])
            pool = (direct or indirect) if prefer_direct else (indirect or direct)
            shown = rng.choice(sorted(pool))
            visible_failing.append(f"{test_file}::{shown}")
            passing = [t for t in all_tests if t in showable and t not in failing_names]
            extra = rng.sample(passing, min(len(passing), max(0, int(knobs["visible_tests"]) - 1)))
            keep = {shown, *extra}
        else:
            pool = [t for t in all_tests if t in showable]
            keep = set(rng.sample(pool, min(len(pool), int(knobs["visible_tests"]))))
        files[f"{template}.py"] = module_source
        files[test_file] = keep_tests(tests, keep)
        canary = canary_name(rng, set(all_tests))
        hidden[test_file] = (suite.rstrip() + "".join(f"\n\n\n{d.rstrip()}" for d in drawn)
                             + f"\n\n\ndef {canary}():\n    assert 0\n")
        canaries.append(f"{test_file}::{canary}")
        f2p += failing
        p2p += [f"{test_file}::{t}" for t in all_tests if f"{test_file}::{t}" not in failing]
    return CodeTask(files=files, modules=sorted(f"{t}.py" for t in chosen), buggy_modules=sorted(f"{t}.py" for t in buggy),
                    reference=reference, hidden_tests=hidden, canaries=sorted(canaries), fail_to_pass=sorted(f2p),
                    pass_to_pass=sorted(p2p), visible_failing=sorted(visible_failing), mutations=records,
                    pinned_tests=sorted(proving))
