"""Template tasks prove a fix only on hidden inputs of their own, drawn under the verifier's key.

A template's hidden suite (its tests and its differential tests) is a function of files gymsmith ships, so a policy
can table it; attacker 34 did and was accepted (0.971-0.987) with the bug kept off the table. Each task now adds
variants of its bugs' failing tests on inputs drawn from the task's seed under the verifier's key
(`verifier/drawkey.py`), and only those earn progress. Real sandboxes, the real call runner.
"""

from __future__ import annotations

import ast
import stat

import pytest

from gymsmith.families.code import mutate
from gymsmith.families.code.tables import table_of
from gymsmith.families.code.generator import (SIDE, compiled_suite, generate_code_task, hidden_suite, private_tests,
                                              run_hidden_tests)
from gymsmith.families.code.repovariants import PREFIX
from gymsmith.families.code.templates import template_source
from gymsmith.registry import get_family
from gymsmith.verifier import drawkey
from gymsmith.verifier.pytest_runner import TestOutcome

CODE = get_family("code")
# the attacker-wrapper tests each draw a task's keyed variants and sides for up to 30 mutations at seed 11; on a clean
# machine every draw is cold, and one such test took longer than the suite's 600 s (CI52, 341a3b2)
DRAWS_COLD = pytest.mark.timeout(1500)
SEEDS = range(6)


def _knobs(seed: int) -> dict:
    return CODE.generate(seed, difficulty=seed / 5).knobs


def _variants(ct) -> list[str]:
    """The task's variants that prove a fix (its sides left out)."""
    return [n for n in ct.fail_to_pass if n.split("::", 1)[1].startswith(PREFIX) and SIDE not in n]


def _sides(ct) -> list[str]:
    return [n for n in ct.fail_to_pass if n.split("::", 1)[1].startswith(PREFIX + SIDE)]


def _mutant(ct, module: str) -> str:
    record = next(r for r in ct.mutations if r.module == module)
    return mutate.apply(ct.reference[module], [m for m in mutate.candidates(ct.reference[module]) if m.key == record.key])


# -- the key --------------------------------------------------------------------------------------------------
def test_the_key_is_made_once_private_to_its_owner_and_stable(tmp_path, monkeypatch):
    monkeypatch.setenv("GYMSMITH_CACHE", str(tmp_path))
    monkeypatch.delenv(drawkey.ENV, raising=False)
    first = drawkey.draw_token("a", 1)
    path = drawkey.key_path()
    assert path.is_file() and stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_bytes()) == drawkey.KEY_BYTES
    assert drawkey.draw_token("a", 1) == first != drawkey.draw_token("a", 2)
    monkeypatch.setenv(drawkey.ENV, "cluster-wide secret")
    assert drawkey.draw_token("a", 1) != first  # the environment's key wins over the file's
    monkeypatch.delenv(drawkey.ENV)
    path.write_bytes(b"short")
    drawkey._key.cache_clear()
    with pytest.raises(RuntimeError, match="verifier key .* holds 5 bytes"):
        drawkey.draw_token("a", 1)
    drawkey._key.cache_clear()


def test_no_sandbox_binds_the_key(tmp_path):
    """The key lives under the cache root's keys/ directory; a sandbox's read-only binds are runtimes and task
    files. Nothing named like it, and not its directory, is in a sandbox's filesystem."""
    from gymsmith.sandbox import open_sandbox

    drawkey.draw_token("x")
    with open_sandbox(tmp_path) as sb:
        listed = sb.exec(["sh", "-c", "find / -xdev -name 'verifier.key' 2>/dev/null; find / -name 'verifier.key' "
                          "-path '*keys*' 2>/dev/null; ls -d \"$0\" 2>&1", str(drawkey.key_path().parent)], timeout=120)
    assert "verifier.key" not in listed.stdout and "No such file" in listed.stdout, listed.stdout


# -- the variants ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_every_bug_keeps_hidden_variants_the_reference_passes_and_the_bug_fails(seed):
    ct = generate_code_task(seed, _knobs(seed))
    drawn = _variants(ct)
    for module in ct.buggy_modules:
        path = f"tests/test_{module.removesuffix('.py')}.py"
        mine = [n for n in drawn if n.startswith(path + "::")]
        assert mine, f"{module}: no variant"
        assert not set(mine) & set(ct.visible_failing)
        assert all(n.split("::", 1)[1] not in ct.files[path] for n in mine)  # never shown
    assert sorted(ct.pinned_tests or []) == sorted(drawn)  # only they earn progress: sides gate only
    templates = [m.removesuffix(".py") for m in ct.buggy_modules]
    suites = [compiled_suite(t, ct.hidden_tests[f"tests/test_{t}.py"]) for t in templates]
    good = run_hidden_tests({f"{t}.py": ct.reference[f"{t}.py"] for t in templates}, suites, templates, deadline_s=10)
    bad = run_hidden_tests({f"{t}.py": _mutant(ct, f"{t}.py") for t in templates}, suites, templates, deadline_s=10)
    assert all(good.outcome(n) is TestOutcome.PASSED for n in drawn + _sides(ct))
    assert all(bad.outcome(n) is not TestOutcome.PASSED for n in drawn + _sides(ct))
    # nor does a repair that does not do the function's work: its input handed back, None (mutate.standins)
    for record in ct.mutations:
        for standin in mutate.standins(ct.reference[record.module], record.function):
            sources = {f"{t}.py": ct.reference[f"{t}.py"] for t in templates}
            sources[record.module] = mutate.apply(ct.reference[record.module], [standin])
            run = run_hidden_tests(sources, suites, templates, deadline_s=10)
            mine = [n for n in drawn if n.startswith(f"tests/test_{record.module.removesuffix('.py')}.py::")]
            assert all(run.outcome(n) is not TestOutcome.PASSED for n in mine), (seed, standin.description)


def test_the_start_state_is_the_seeds_and_the_variants_are_the_keys(monkeypatch):
    seed = 3
    monkeypatch.setenv(drawkey.ENV, "key one")
    one = generate_code_task(seed, _knobs(seed))
    monkeypatch.setenv(drawkey.ENV, "key two")
    two = generate_code_task(seed, _knobs(seed))
    assert one.files == two.files and one.mutations == two.mutations  # what the agent sees: the seed's alone
    def sources(ct):
        return {n: ct.hidden_tests[n.split("::")[0]].split(f"def {n.split('::')[1]}(")[1].split("\n\n")[0]
                for n in _variants(ct)}

    assert sources(one) != sources(two)  # the inputs the fix is proven on: the key's
    monkeypatch.setenv(drawkey.ENV, "key one")
    first = CODE.generate(seed, difficulty=seed / 5)
    monkeypatch.setenv(drawkey.ENV, "key two")
    assert CODE.generate(seed, difficulty=seed / 5).id == first.id  # so is its id, and so its split


def test_a_table_of_every_call_gymsmith_ships_passes_the_public_proof_but_no_variant(monkeypatch):
    """The class attacker 34 used: every `==` call of a template's hidden suite as gymsmith's files determine it
    (its tests and differential tests), answered from a table, the bug kept for every other input. It passes every
    private test the bug fails (what earned progress before) and fails every variant (what earns it now). A fixed
    key, so the figures do not depend on the machine's."""
    monkeypatch.setenv(drawkey.ENV, "test key for the table")
    for seed in SEEDS:
        ct = generate_code_task(seed, _knobs(seed))
        for module in ct.buggy_modules:
            template = module.removesuffix(".py")
            source = ct.reference[module]
            table = table_of(hidden_suite(template), {n.name for n in ast.parse(source).body
                                                      if isinstance(n, ast.FunctionDef)})
            suite = compiled_suite(template, ct.hidden_tests[f"tests/test_{template}.py"])
            run = run_hidden_tests({module: _mutant(ct, module) + table}, [suite], [template], deadline_s=10)
            private = [n for n in ct.fail_to_pass if n.startswith(f"tests/test_{template}.py::")
                       and n.split("::")[1] in private_tests(template)]
            drawn = [n for n in _variants(ct) if n.startswith(f"tests/test_{template}.py::")]
            assert private and all(run.outcome(n) is TestOutcome.PASSED for n in private), (seed, template)
            # none passes: a variant is kept only if this table fails it (a tabled helper call on the way answered
            # one before)
            assert drawn and not any(run.outcome(n) is TestOutcome.PASSED for n in drawn), (seed, template)


# -- what a table can hold -----------------------------------------------------------------------------------------
def test_more_code_than_the_reference_plus_the_budget_is_not_graded_wherever_it_hides():
    """A table of answers is big; a fix is not. Beyond the reference's compressed size plus MAX_ADDED_BYTES the final
    state is ungradable, the agent's failure, whether the table is code, spread over new modules, or compressed data
    in docstrings a module reads back (attacker 38); long comments of an honest fix stay well inside."""
    import base64
    import lzma
    import random as rnd

    from gymsmith.core.errors import UngradableState
    from gymsmith.families.code.checks import MAX_ADDED_BYTES, check_code_budget
    from gymsmith.families.code.templates import template_source

    reference = template_source("roman")[0]
    draw = rnd.Random(7)
    table = "".join(f"_t{i} = {draw.getrandbits(40)}\n" for i in range(MAX_ADDED_BYTES // 4))
    with pytest.raises(UngradableState, match="bytes compressed"):
        check_code_budget({"roman.py": reference + table}, {"roman.py": reference})
    lines = table.splitlines(keepends=True)
    parts = {f"part{k}.py": "".join(lines[k::4]) for k in range(4)}  # the same lines, dealt over four new modules
    with pytest.raises(UngradableState, match="bytes compressed"):
        check_code_budget({"roman.py": reference, **parts}, {"roman.py": reference})
    packed = base64.b85encode(lzma.compress(table.encode())).decode()
    docstrings = {f"gsd_{k}.py": f'"""{packed[k::3]}"""\n' for k in range(3)}
    with pytest.raises(UngradableState, match="bytes compressed"):
        check_code_budget({"roman.py": reference, **docstrings}, {"roman.py": reference})
    explained = reference + "".join(f"# step {i}: why this line changed and what it keeps true\n" for i in range(400))
    check_code_budget({"roman.py": explained}, {"roman.py": reference})


def test_the_box_table_answers_calls_near_the_public_ones_with_the_reference():
    """`boxtable` simulates the best table an attacker fits: the reference for every call of the buggy function
    whose arguments are those of a public call (direct or made inside one) but for one integer anywhere and the
    others within BOX_REACH (attacker 37's box of years and months, attacker 38's lines), the bug elsewhere,
    reached through callers too (`add_days`). A string is never the free argument."""
    from gymsmith.families.code.boxtable import BOX_REACH, boxed_source, near, traced_calls
    from gymsmith.families.code.templates import template_source

    assert near((2024 + 10 * BOX_REACH, 5), [(2024, 2)])  # a line: the year anywhere, the month in the box
    assert not near((2024 + 10 * BOX_REACH, 2 + 2 * BOX_REACH), [(2024, 2)])  # two far: off every line
    assert not near(("MMXXVI",), [("MMXXIV",)]) and near(((2023, 12, 9000), 5), [((2023, 12, 30), 3)])
    reference = template_source("dates")[0]
    inside = traced_calls(reference, "days_in_month", [("add_days", ((2023, 12, 30), 3))])
    assert (2023, 12) in inside and (2024, 1) in inside  # calls made inside a public one count
    mutant = reference.replace("        return 29\n", "        return 28\n")
    assert mutant != reference
    code: dict = {}
    exec(compile(boxed_source(mutant, reference, "days_in_month", [(2024, 2)]), "boxed", "exec"), code)
    leap = 2024 + 4 * (BOX_REACH // 4 + 1000)
    assert code["days_in_month"](leap, 2) == 29  # on the line through (2024, 2)
    assert code["add_days"]((leap, 2, 28), 1) == (leap, 2, 29)


def test_a_bug_the_key_draws_no_variant_for_makes_no_task_rather_than_a_public_one(monkeypatch):
    """Attacker 39: where the keyed draw came out empty the task fell back to its seeded variant, which anyone can
    compute, and a table of it was accepted (0.950). Such a seed now makes no task (the task set takes the next)."""
    from gymsmith.core.errors import NoTaskForSeed
    import gymsmith.families.code.generator as generator

    knobs = _knobs(3)
    real = generator.task_variants

    def keyed_draws_nothing(*args, keyed=True, **kwargs):
        return [] if keyed else real(*args, keyed=keyed, **kwargs)

    monkeypatch.setattr(generator, "task_variants", keyed_draws_nothing)
    with pytest.raises(NoTaskForSeed, match="draws no hidden variant"):
        generate_code_task(3, knobs)


# -- variants must exercise the function, not a corner of it --------------------------------------------------------
def test_no_hidden_variant_is_answered_by_what_a_corner_of_the_function_returns():
    """A forty-second independent attacker: keyed variants edit 2-4 characters of a test's texts, and an edited node
    name is in no graph, so every `distance` variant expected -1 and every `neighbours` one []: those constants,
    with the bug kept, were accepted at 0.95 on 14 of 161 template tasks (and other corners on 3 more). A variant is
    now kept only if it takes the path of the test it was moved from through the function (`paths.covers`) and its
    answer is no other draw's of its batch: for each of the first usable mutations of these functions, either no
    variant is drawn (the bug is not placed) or the corner's constant fails every one drawn."""
    from gymsmith.families.code.generator import mutant_outcome, task_variants, usable

    source = template_source("graphs")[0]
    checked: dict[str, int] = {}
    for function, corner in (("distance", "-1"), ("neighbours", "[]"), ("shortest_path", "None")):
        mutations = [m for m in mutate.candidates(source) if m.function == function]
        for m in mutations[:4]:
            if not usable(outcome := mutant_outcome("graphs", m)):
                continue
            # seeds 7, 8 and 10 (graphs variants are rare: most moved inputs are corners, refused)
            drawn = [d.replace(f"def {PREFIX}", f"def {PREFIX}s{seed}_", 1) for seed in (7, 8, 10)
                     for d in task_variants(seed, "graphs", m, list(outcome["failing"]))
                     if f"def {PREFIX}{SIDE}" not in d]  # a side may be a corner: it gates, proving nothing
            if not drawn:
                continue
            corner_code = mutate.apply(source, [m]) + f"\n\n\ndef {function}(*args):\n    return {corner}\n"
            text = hidden_suite("graphs").rstrip() + "".join(f"\n\n\n{d.rstrip()}" for d in drawn) + "\n"
            run = run_hidden_tests({"graphs.py": corner_code}, [compiled_suite("graphs", text)], ["graphs"], deadline_s=10)
            names = [f"tests/test_graphs.py::{d.split('(', 1)[0].removeprefix('def ')}" for d in drawn]
            assert all(run.outcome(n) is not TestOutcome.PASSED for n in names), (m.description, drawn)
            checked[function] = checked.get(function, 0) + 1
    assert checked, "no mutation of these functions kept a variant: nothing was checked"


def test_a_path_through_the_function_tells_its_corners_apart():
    from gymsmith.families.code.paths import covers, reference_path
    from gymsmith.families.code.realtests import keep_tests

    source, header = template_source("graphs")[0], keep_tests(hidden_suite("graphs"), set())
    found = reference_path(source, "distance", header, ["_gymsmith_observe(0, lambda: distance(G, 'a', 'e'))"])
    unknown = reference_path(source, "distance", header, ["_gymsmith_observe(0, lambda: distance(G, 'ab', 'e'))"])
    assert found and unknown and not covers(unknown, found) and covers(found, found)
    assert reference_path(source, "distance", header, ["x = [0 for _ in range(10 ** 9)]"]) is None  # over budget


# -- variants must leave the shapes of the public calls ------------------------------------------------------------
def _wrapper_fails_a_variant_of_every_bug(functions: tuple[tuple[str, str], ...], wrap, shows=None,
                                          least: int = 6, share: float = 1.0) -> None:
    """For each usable mutation (the first six) of each (template, function) (with `shows(reference, mutant, function,
    template)`, each where it holds: where the wrapper keeps the bug somewhere): the wrapper `wrap(reference, mutant,
    function, template)` passes every public test of the hidden suite, and fails a hidden test drawn for seed 11 on
    at least `share` of them; at least `least` mutations are checked."""
    from gymsmith.families.code.generator import mutant_outcome, task_variants, usable

    checked, missed = 0, []
    for template, function in functions:
        source = template_source(template)[0]
        for m in [m for m in mutate.candidates(source) if m.function == function][:6]:
            if not usable(outcome := mutant_outcome(template, m)):
                continue
            if shows is not None and not shows(source, mutate.apply(source, [m]), function, template):
                continue
            drawn = task_variants(11, template, m, list(outcome["failing"]))
            if not drawn:
                continue
            gated = wrap(source, mutate.apply(source, [m]), function, template)
            text = hidden_suite(template).rstrip() + "".join(f"\n\n\n{d.rstrip()}" for d in drawn) + "\n"
            suite = compiled_suite(template, text)
            run = run_hidden_tests({f"{template}.py": gated}, [suite], [template], deadline_s=10)
            public = [n for n in suite.nodeids() if PREFIX not in n]
            assert all(run.outcome(n) is TestOutcome.PASSED for n in public), (m.description, "the wrapper is no fix",
                                                                              [n for n in public if run.outcome(n) is not TestOutcome.PASSED])
            names = [f"tests/test_{template}.py::{d.split('(', 1)[0].removeprefix('def ')}" for d in drawn]
            if not any(run.outcome(n) is not TestOutcome.PASSED for n in names):
                missed.append((template, m.description, drawn))
            checked += 1
    assert checked >= least, f"only {checked} mutations kept a variant: too little was checked"
    assert len(missed) <= (1 - share) * checked, (f"accepted on {len(missed)} of {checked}", missed)


def _shape_gated(reference: str, mutant: str, function: str, template: str) -> str:
    """The mutant with `function` answered by the reference wherever its arguments have the shape of a call the public
    hidden suite makes (`shapes.shape_of`), by the bug everywhere else: attacker 44's wrapper, written from its report."""
    import inspect

    from gymsmith.families.code import shapes
    from gymsmith.families.code.paths import reference_trace
    from gymsmith.families.code.realtests import keep_tests
    from gymsmith.families.code.repovariants import alphabet_of

    hidden = hidden_suite(template)
    alphabet, header = alphabet_of(hidden), keep_tests(hidden, set())
    public = set().union(*(reference_trace(reference, function, header, t.statements, alphabet).shapes
                           for t in compiled_suite(template).tests))
    return mutant + f"""


_gs_shapes = {{}}
exec({inspect.getsource(shapes)!r}, _gs_shapes)
_gs_public = {sorted(repr(s) for s in public)!r}
_gs_reference = {{"__name__": "_gs_reference"}}
exec({reference!r}, _gs_reference)
_gs_buggy = {function}


def {function}(*args, **kwargs):
    import inspect
    bound = inspect.signature(_gs_reference[{function!r}]).bind(*args, **kwargs)
    bound.apply_defaults()  # the shape of every parameter, as the trace sees them
    if repr(tuple(_gs_shapes["shape_of"](a, {alphabet!r}) for a in bound.arguments.values())) in _gs_public:
        return _gs_reference[{function!r}](*args, **kwargs)
    return _gs_buggy(*args, **kwargs)
"""


@DRAWS_COLD
def test_a_repair_right_only_on_the_shapes_of_the_public_calls_fails_a_hidden_variant():
    """A forty-fourth independent attacker sent every call whose shape (types, list lengths, integer signs, a text's
    characters all in the test file's) a public call has to a fixed copy, the rest to the bug: variants moved literals
    in place, so all had public shapes and it was accepted on 39 of 39 template tasks. Variants now change shapes too
    (a list made longer or shorter, a sign flipped, a character from outside the file) and those calling the buggy
    function on a new shape come first: for each usable mutation of these functions, the wrapper passes every public
    test and fails a variant drawn."""
    _wrapper_fails_a_variant_of_every_bug((("stats", "median"), ("stats", "percentile"), ("stats", "variance"),
                                           ("intervals", "merge_intervals")), _shape_gated)


def _size_gated(reference: str, mutant: str, function: str, template: str) -> str:
    """The mutant with `function` answered by the reference wherever every number of its arguments is at most ten
    times the moves' old reach (10^6) and every text and container at most a few items past the public ones, by the
    bug everywhere else: attacker 46's wrapper (its `all` mode), written from its report."""
    tree = ast.parse(hidden_suite(template))
    texts = [len(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    lists = [len(n.elts) for n in ast.walk(tree) if isinstance(n, ast.List | ast.Tuple | ast.Set | ast.Dict)
             and hasattr(n, "elts")]
    ints = [abs(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int]
    number, text, items = 10 * max(100_000, *ints), 4 * (max([0, *texts]) + 4) + 16, max([0, *lists]) + 6
    return mutant + f"""


_gs_reference = {{"__name__": "_gs_reference"}}
exec({reference!r}, _gs_reference)
_gs_buggy = {function}


def _gs_small(value, depth=0):
    if depth > 6 or isinstance(value, bool) or value is None:
        return True
    if isinstance(value, (int, float)):
        return abs(value) <= {number}
    if isinstance(value, str):
        return len(value) <= {text}
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return len(value) <= {items} and all(_gs_small(v, depth + 1) for v in value)
    return True


def {function}(*args, **kwargs):
    if all(_gs_small(a) for a in [*args, *kwargs.values()]):
        return _gs_reference[{function!r}](*args, **kwargs)
    return _gs_buggy(*args, **kwargs)
"""


@DRAWS_COLD
def test_a_repair_right_only_up_to_a_size_past_the_public_calls_fails_a_hidden_variant():
    """A forty-sixth independent attacker sent every call whose numbers were at most 10^6 and whose texts and lists
    were a few items past the public ones (the moves' whole reach, computable from gymsmith's files) to a fixed
    copy, the rest to the bug: accepted on all 101 template tasks it scored. Moves now have no fixed reach (a heavy-tailed
    scale) and variants far larger than every public call come first: for each usable mutation of these functions,
    the wrapper passes every public test and fails a variant drawn."""
    _wrapper_fails_a_variant_of_every_bug((("stats", "median"), ("stats", "mean"), ("stats", "percentile"),
                                           ("intervals", "merge_intervals")), _size_gated)


# -- a region the draw's filters keep out of the proof is still tested: sides ---------------------------------------
def _public_traced(reference: str, function: str, template: str) -> list[tuple]:
    from gymsmith.families.code.boxtable import traced_calls
    from gymsmith.families.code.generator import public_calls

    calls = [(name, ast.literal_eval(args)) for name, args in public_calls(hidden_suite(template))]
    return traced_calls(reference, function, calls)


def _gated(reference: str, mutant: str, function: str, template: str, gate: str) -> str:
    """The mutant with `function` answered by the reference on every call the public hidden suite makes (directly or
    inside another call), and elsewhere by the bug where `gate(args, right, wrong)` holds (the reference's answer
    `right`, the bug's `wrong`), by the reference everywhere else."""
    from gymsmith.families.code.boxtable import _NEAR_SOURCE

    return mutant + f"""


_gs_reference = {{"__name__": "_gs_reference"}}
exec({reference!r}, _gs_reference)
_gs_buggy = {function}
_gs_publics = {_public_traced(reference, function, template)!r}
{_NEAR_SOURCE}
{gate}


def {function}(*args, **kwargs):
    right = _gs_reference[{function!r}](*args, **kwargs)
    if kwargs or args in _gs_publics:
        return right
    try:
        wrong = _gs_buggy(*args)
    except Exception:  # the bug raising where the reference answers
        wrong = None
    return _gs_buggy(*args) if _gs_gate(args, right, wrong) else right
"""


def _near_the_public_calls(publics: list[tuple]):
    """Calls next to the public ones: one integer moved by up to 40 (or anywhere, twenty times), one item of a list
    dropped or doubled, one character of a text dropped."""
    import random

    rng = random.Random(0)
    for public in publics:
        for i, a in enumerate(public):
            moved = []
            if type(a) is int:
                moved = [a + d for d in range(-40, 41)] + [rng.randint(-10 ** 6, 10 ** 6) for _ in range(20)]
            elif isinstance(a, list):
                moved = [a[:j] + a[j + 1:] for j in range(len(a))] + [a[:j + 1] + a[j:] for j in range(len(a))]
            elif isinstance(a, str):
                moved = [a[:j] + a[j + 1:] for j in range(len(a))]
            yield from (tuple(public[:i]) + (m,) + tuple(public[i + 1:]) for m in moved)


def _retyped_calls(publics: list[tuple]):
    """The public calls with one argument of another type: an integer a float, a tuple a list (or its tuples lists),
    a list a tuple, a text with a newline or an ideographic space in it."""
    for public in publics:
        for i, a in enumerate(public):
            moved: list = []
            if type(a) is int:
                moved = [float(a), a + 0.5]
            elif isinstance(a, tuple):
                moved = [list(a)]
            elif isinstance(a, list):
                moved = [tuple(a), [list(x) if isinstance(x, tuple) else x for x in a]]
            elif isinstance(a, str):
                moved = [a + "\n", a.replace(" ", "\u3000")]
            yield from (tuple(public[:i]) + (m,) + tuple(public[i + 1:]) for m in moved)


def _wild_calls(publics: list[tuple]):
    """The public calls with one argument given a value no shipped move emits: a number a float with a fraction
    (not a half), a text a character of a script none of gymsmith's strings holds, a list one such element."""
    def wild(a):
        if type(a) in (int, float):
            return [a + 0.37, a * 1.618 + 0.01]
        if isinstance(a, str):
            return [a + "\u0b95", "\u16a0" + a[1:]]
        if isinstance(a, list) and a:
            return [[moved, *a[1:]] for moved in wild(a[0])]
        return []

    for public in publics:
        for i, a in enumerate(public):
            yield from (tuple(public[:i]) + (m,) + tuple(public[i + 1:]) for m in wild(a))


def _keeps_the_bug(gate: str, calls=None):
    """`shows` for `_wrapper_fails_a_variant_of_every_bug`: whether a call next to a public one (not one) passes
    `gate` and tells the bug from the reference, i.e. whether the gated wrapper keeps the bug there. `calls(publics)`
    gives the calls to try (default: near and retyped ones)."""
    from gymsmith.families.code.boxtable import _NEAR_SOURCE

    def shows(reference: str, mutant: str, function: str, template: str) -> bool:
        space: dict = {"_gs_publics": _public_traced(reference, function, template)}
        exec(_NEAR_SOURCE + "\n" + gate, space)
        right_code: dict = {}
        wrong_code: dict = {}
        exec(reference, right_code)
        exec(mutant, wrong_code)
        tried = (calls(space["_gs_publics"]) if calls is not None
                 else [*_near_the_public_calls(space["_gs_publics"]), *_retyped_calls(space["_gs_publics"])])
        for args in tried:
            if args in space["_gs_publics"]:
                continue
            try:
                right = right_code[function](*args)
            except Exception:  # noqa: BLE001 - a call the reference refuses is not a bug kept
                continue
            try:
                wrong = wrong_code[function](*args)
                if space["_gs_gate"](args, right, wrong) and (type(wrong) is not type(right) or wrong != right):
                    return True
            except Exception:  # noqa: BLE001 - the bug raising where the reference answers
                if space["_gs_gate"](args, right, None):
                    return True
        return False

    return shows


_NEAR_GATE = """def _gs_one_edit(a, b):
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    a, b = sorted((a, b), key=len)
    return len(b) == len(a) + 1 and any(b[:i] + b[i + 1:] == a for i in range(len(b)))


def _gs_gate(args, right, wrong):
    if _gs_box_near(args, _gs_publics):
        return True
    for public in _gs_publics:
        apart = [i for i in range(len(args)) if len(public) == len(args)
                 and (type(args[i]) is not type(public[i]) or args[i] != public[i])]
        if (len(apart) == 1 and isinstance(args[apart[0]], str) and isinstance(public[apart[0]], str)
                and _gs_one_edit(args[apart[0]], public[apart[0]])):
            return True
    return False"""


@DRAWS_COLD
def test_a_repair_buggy_only_near_the_public_calls_fails_a_hidden_side():
    """A forty-seventh independent attacker: every variant must be failed by the bug even with the reference's answers
    near the public calls appended (`boxtable`), so no variant tested that region, which gymsmith's files define;
    with texts one edit from a public one added, the bug kept only there was accepted on 81 of 81 template tasks. A
    candidate the box's table passes, and one drawn near the public calls, is now kept as a side (it gates, earns
    nothing): the wrapper passes every public test, and fails a hidden test drawn on at least three in four of the
    usable mutations of these functions whose bug shows there (sides are drawn, not enumerated; none was missed under
    this machine's key when this test was written)."""
    _wrapper_fails_a_variant_of_every_bug((("money", "split_evenly"), ("dates", "add_days"), ("stats", "median"),
                                           ("tokenizer", "tokenize"), ("money", "parse_amount")),
                                          lambda r, m, f, t: _gated(r, m, f, t, _NEAR_GATE), _keeps_the_bug(_NEAR_GATE),
                                          share=0.75)


_FILTER_GATE = """def _gs_blank(value, depth=0):
    if value is None or value is False or (type(value) in (int, float) and value in (0, -1)) or value == "":
        return True
    if depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        return all(_gs_blank(v, depth + 1) for v in value)
    if depth < 4 and isinstance(value, dict):
        return all(_gs_blank(v, depth + 1) for v in value.values())
    return False


def _gs_gate(args, right, wrong):
    try:
        echo = any(type(right) is type(a) and right == a for a in args)
    except Exception:
        echo = False
    return _gs_blank(right) or echo or len(repr(wrong)) > 2000"""


@DRAWS_COLD
def test_a_repair_buggy_only_where_the_draw_filters_refuse_variants_fails_a_hidden_side():
    """A forty-eighth independent attacker answered right except where the reference's answer is blank (what a corner
    gives), equals an argument (an echo) or the bug's is over 2,000 characters: the draw's filters refused every
    variant there, so none tested it, and it was accepted on 34 of 41 template tasks with the bug kept on 19. A
    candidate a filter refuses, and probes put at corners, are now kept as sides: the wrapper passes every public
    test, and fails a hidden test drawn on at least three in four of the usable mutations of these functions whose bug
    shows there (one in nine, `merge_intervals` '1 -> 2', was missed under this machine's key when it was written)."""
    _wrapper_fails_a_variant_of_every_bug((("money", "apply_discount"), ("money", "split_evenly"),
                                           ("intervals", "merge_intervals"), ("textwrap2", "center")),
                                          lambda r, m, f, t: _gated(r, m, f, t, _FILTER_GATE), _keeps_the_bug(_FILTER_GATE),
                                          share=0.75)


_TYPE_GATE = """def _gs_kind(value, depth=0):
    if depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        return (type(value).__name__, tuple(sorted({repr(_gs_kind(v, depth + 1)) for v in value})))
    if depth < 4 and isinstance(value, dict):
        return ("dict", tuple(sorted({repr((_gs_kind(k, depth + 1), _gs_kind(v, depth + 1))) for k, v in value.items()})))
    return type(value).__name__


def _gs_texts(value, depth=0):
    if isinstance(value, str):
        yield value
    elif depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _gs_texts(v, depth + 1)


_gs_public_kinds = {tuple(_gs_kind(a) for a in public) for public in _gs_publics}


def _gs_gate(args, right, wrong):
    plain = all(ch.isprintable() and not ch.isspace() or ch == " " for text in _gs_texts(args) for ch in text)
    return not (plain and tuple(_gs_kind(a) for a in args) in _gs_public_kinds)"""


@DRAWS_COLD
def test_a_repair_right_only_on_the_types_of_the_public_calls_fails_a_hidden_side():
    """A forty-ninth independent attacker: no move of a hidden input changed a type (an integer stayed an integer, a
    tuple a tuple) nor put whitespace but a space in a text, so the reference answering only calls whose arguments'
    types a public call has (texts printable, no whitespace but spaces), the bug the rest, was accepted on 40 of 41
    and 41 of 41 template tasks under two host keys, the bug kept (`median((4, 1, 3, 2))`, `wrap('aaa\\nbbb', 7)`).
    Probes with a type changed (`repovariants.retyped_statements`) are now kept as sides: the wrapper passes every
    public test, and fails a hidden test drawn on at least three in four of the usable mutations of these functions
    whose bug shows on such a call."""
    _wrapper_fails_a_variant_of_every_bug((("stats", "median"), ("textwrap2", "wrap"), ("intervals", "merge_intervals"),
                                           ("money", "total_with_tax"), ("money", "parse_amount")),
                                          lambda r, m, f, t: _gated(r, m, f, t, _TYPE_GATE), _keeps_the_bug(_TYPE_GATE),
                                          share=0.75)


def _shipped_values() -> tuple[str, list[float]]:
    """What attacker 50 computed from gymsmith's files: every character a move can put in a text (the templates' and
    the move code's sources, `FOREIGN`, `RETYPE_CHARS`, printable ASCII, their other case) and the float literals of the
    templates."""
    import string
    from pathlib import Path

    from gymsmith.families.code import repovariants

    code = Path(repovariants.__file__).parent
    files = [*(code / "templates").glob("*.py"), code / "repovariants.py", code / "generator.py", code / "differential.py"]
    chars = set(string.printable) | set(repovariants.FOREIGN) | set(repovariants.RETYPE_CHARS)
    for f in files:
        chars |= set(f.read_text())
    chars |= {c.swapcase() for c in list(chars) if len(c.swapcase()) == 1}
    floats = sorted({n.value for f in (code / "templates").glob("*.py") for n in ast.walk(ast.parse(f.read_text()))
                     if isinstance(n, ast.Constant) and type(n.value) is float})
    return "".join(sorted(chars)), floats


def _domain_gate() -> str:
    chars, floats = _shipped_values()
    return f"""_gs_chars = frozenset({chars!r})
_gs_floats = frozenset({floats!r})


def _gs_emitted(value, depth=0):
    if type(value) in (int, bool) or value is None:
        return True
    if type(value) is float:
        return (value * 2).is_integer() or value in _gs_floats
    if type(value) is str:
        return all(ch in _gs_chars for ch in value)
    if type(value) in (list, tuple, set, frozenset):
        return depth > 20 or all(_gs_emitted(v, depth + 1) for v in value)
    if type(value) is dict:
        return depth > 20 or all(_gs_emitted(k, depth + 1) and _gs_emitted(v, depth + 1) for k, v in value.items())
    return False


def _gs_gate(args, right, wrong):
    return not _gs_emitted(args)"""


@DRAWS_COLD
def test_a_repair_right_only_on_what_the_moves_can_emit_fails_a_hidden_side():
    """A fiftieth independent attacker: every hidden input came from a public call by shipped moves, so the set of
    values they can produce is computable (floats whole or halves, texts of characters gymsmith's files hold); the
    reference on that set, the bug everywhere else, was accepted on 41 of 41 template tasks under two host keys, the
    bug kept (`mean([1.25, 2, 3, 4])`, `tokenize('привет + 1')`). Probes with wild values (a float of any fraction, a
    character of any script: `repovariants.wild_statements`) are now kept as sides: the wrapper passes every public
    test, and fails a hidden test drawn on at least three in four of the usable mutations of these functions whose bug
    shows on such a call."""
    gate = _domain_gate()
    _wrapper_fails_a_variant_of_every_bug((("stats", "median"), ("stats", "mean"), ("tokenizer", "tokenize"),
                                           ("intervals", "merge_intervals"), ("money", "split_evenly")),
                                          lambda r, m, f, t: _gated(r, m, f, t, gate), _keeps_the_bug(gate, _wild_calls),
                                          share=0.75)


def _public_forms(template: str, function: str) -> set[tuple[int, tuple[str, ...]]]:
    """(positional count, keyword names) of every call of `function` the template's hidden suite writes (a starred
    literal tuple counted as its elements)."""
    forms = set()
    for node in ast.walk(ast.parse(hidden_suite(template))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function:
            args = node.args
            if len(args) == 1 and isinstance(args[0], ast.Starred) and isinstance(args[0].value, ast.Tuple | ast.List):
                args = args[0].value.elts
            forms.add((len(args), tuple(sorted(k.arg for k in node.keywords if k.arg))))
    return forms


def _form_gated(reference: str, mutant: str, function: str, template: str) -> str:
    """Attacker 51's wrapper, from its report: the reference for a call written as a public call of the function is
    written (as many positional arguments, the same keyword names) whose arguments hold no set, frozenset or bool
    inside a container, the bug for every other call."""
    return mutant + f"""


_gs_reference = {{"__name__": "_gs_reference"}}
exec({reference!r}, _gs_reference)
_gs_buggy = {function}
_gs_forms = {_public_forms(template, function)!r}


def _gs_plain(value, depth=0):
    if type(value) in (set, frozenset) or (depth and type(value) is bool):
        return False
    if type(value) in (list, tuple):
        return all(_gs_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(_gs_plain(v, depth + 1) for v in value.values())
    return True


def {function}(*args, **kwargs):
    public = (len(args), tuple(sorted(kwargs))) in _gs_forms and _gs_plain(args) and _gs_plain(kwargs)
    return (_gs_reference[{function!r}] if public else _gs_buggy)(*args, **kwargs)
"""


def _formed_shows(reference: str, mutant: str, function: str, template: str) -> bool:
    """Whether the bug and the reference differ on a public call of `function` written another way (every argument
    by keyword, or a list argument a set), i.e. whether `_form_gated` keeps the bug there."""
    import inspect

    right_code: dict = {}
    wrong_code: dict = {}
    exec(reference, right_code)
    exec(mutant, wrong_code)
    names = list(inspect.signature(right_code[function]).parameters)
    for public in _public_traced(reference, function, template):
        tries = [((), dict(zip(names, public)))]
        tries += [(tuple(set(a) if i == j and isinstance(a, list) else a for j, a in enumerate(public)), {})
                  for i in range(len(public))]
        for args, kwargs in tries:
            try:
                right = right_code[function](*args, **kwargs)
            except Exception:  # noqa: BLE001 - a call the reference refuses is not a bug kept
                continue
            try:
                wrong = wrong_code[function](*args, **kwargs)
            except Exception:  # noqa: BLE001 - the bug raising where the reference answers
                return True
            if type(wrong) is not type(right) or wrong != right:
                return True
    return False


@DRAWS_COLD
def test_a_repair_right_only_on_the_call_forms_of_the_public_calls_fails_a_hidden_side():
    """A fifty-first independent attacker: no move of a hidden input changed how a call is written (arguments by
    position or keyword, defaults given or left out) nor made a list a set or an int a bool, so the reference for calls
    written as the public ones are, the bug for the rest, was accepted on 40 of 40 and 41 of 41 template tasks under
    two host keys (`median(values=[4, 1, 3, 2])`, `wrap(text)` with the default width, `median({1, 2, 3, 4})`).
    Probes written another way (`repovariants.formed_statements`), retyped to sets and bools, and mixed (two or three
    moves for sides at once) are now kept as sides: the wrapper passes every public test, and fails a hidden test
    drawn on at least three in four of the usable mutations of these functions whose bug shows on such a call."""
    _wrapper_fails_a_variant_of_every_bug((("stats", "median"), ("textwrap2", "wrap"), ("money", "split_evenly"),
                                           ("intervals", "merge_intervals"), ("rle", "encode")),
                                          _form_gated, _formed_shows, share=0.75)


def _grown_calls(publics: list[tuple]):
    """The public calls with one argument grown past the draw's published caps: a list repeated to over 2,000
    items, a text to over 5,000 characters, an integer times 10^45."""
    for public in publics:
        for i, a in enumerate(public):
            moved: list = []
            if type(a) is int and a:
                moved = [a * 10 ** 45]
            elif isinstance(a, list | tuple) and a:
                moved = [type(a)(list(a) * (2000 // len(a) + 1))]
            elif isinstance(a, str) and a:
                moved = [a * (5000 // len(a) + 1)]
            yield from (tuple(public[:i]) + (m,) + tuple(public[i + 1:]) for m in moved)


_SIZE_GATE = """def _gs_small(value, depth=0):
    if type(value) in (int, float):
        return abs(value) <= 10 ** 40
    if type(value) is str:
        return len(value) <= 4440
    if type(value) in (list, tuple, set, frozenset, dict):
        return len(value) <= 440 + 200 and (depth > 20 or all(_gs_small(v, depth + 1) for v in value))
    return True


def _gs_gate(args, right, wrong):
    return not _gs_small(args) or len(repr(right)) > 50000"""


@DRAWS_COLD
def test_a_repair_right_only_within_the_published_size_caps_fails_a_hidden_side():
    """A fifty-second independent attacker read the draw's caps from the source (a list grows by at most MAX_GROWTH,
    a text by MAX_TEXT_GROWTH, an integer to 10^35, an answer to MAX_SIDE_ANSWER characters) and answered with the
    reference inside them, the bug outside: accepted on 26 of 26 template tasks under two host keys, the bug kept
    (`median(list(range(1, 1001)))`, `wrap` of a 5,400-character text). Grown probes (a list or text repeated to
    10^2.5-10^5 items, an integer times 10^3-10^60: `repovariants.grown_statements`) are now kept as sides: the wrapper
    passes every public test, and fails a hidden test drawn on at least three in four of the usable mutations of these
    functions whose bug shows on such a call."""
    _wrapper_fails_a_variant_of_every_bug((("stats", "median"), ("stats", "mean"), ("textwrap2", "wrap"),
                                           ("intervals", "merge_intervals"), ("tokenizer", "count_kind")),
                                          lambda r, m, f, t: _gated(r, m, f, t, _SIZE_GATE),
                                          _keeps_the_bug(_SIZE_GATE, _grown_calls), share=0.75)
