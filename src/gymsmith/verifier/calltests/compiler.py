"""Split a plain pytest test module into what may run beside untrusted code and what must not.

A hidden test such as

    def test_evicts():
        c = LRUCache(2)
        c.put("a", 1)
        assert c.get("a") is None and len(c) == 1

becomes two halves:
- the **driver** (sent into the sandbox, run beside the agent's code): the test's statements with each
  assertion replaced by *observations* of the values the agent's code computes —
  `_gymsmith_observe(0, lambda: c.get("a"))`, `_gymsmith_observe(1, lambda: len(c))`. It holds the call
  inputs and nothing else: no expected value, no comparison, no reference implementation.
- the **checks** (kept in the trusted verifier process): `slot 0 is None and slot 1 == 1`, evaluated on
  the observed values once they are decoded into plain builtins (see `judge.py`).

`with pytest.raises(E): ...` becomes `with _gymsmith_raises(k, E): ...` in the driver (which records whether the
exception is an instance of the very class E the test named) and the check "slot k raised E (or a subclass)" on the
trusted side. `pytest.approx(x)` stays on the trusted side.

What is supported (anything else raises UnsupportedTest, naming the file, line and construct):
module level: docstrings, imports (`import pytest` is dropped), `NAME = <literal>` constants and
argument-free `test*` functions; inside a test: any statement without `assert` or `pytest` in it, `assert
<expr>` at the test's top level, and `with pytest.raises(E[, F...]):` blocks without assertions. An
operand of an assertion is *trusted* (evaluated by the verifier) when it is built only from literals,
literal constants and a few pure builtins (`list`, `range`, `sorted`, ...); anything else is observed. A
comparison needs a trusted operand: `assert actual == expected` with `expected` computed by the test is not
supported, since both values would be computed beside the agent's code, which could report one for the other.
`and`, `or`, `not` and comparisons are always evaluated on the trusted side, so no `__eq__`, `__bool__`
or `__contains__` of the agent's choosing decides an outcome. The driver observes every operand of an assertion
(it cannot know which ones Python would skip): `assert a and b` at the top is two assertions, and an observed
operand Python evaluates only depending on an earlier one (after the first operand of `or` or of an inner `and`,
after a chained comparison's first pair) is not supported, so the code under test is asked for exactly the values
pytest asks it for in every assertion that holds.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeGuard, cast

OBSERVE = "_gymsmith_observe"
RAISES = "_gymsmith_raises"
# Pure builtins the trusted side may apply to literals (a constant such as list(range(1, 400)) or "x" * 12).
SAFE_BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "all", "any", "bool", "dict", "float", "frozenset", "int", "len", "list", "max", "min", "range",
    "reversed", "round", "set", "sorted", "str", "sum", "tuple")}
# Builtins whose result is a decision (a truth value) about their argument: never run beside the code under test.
DECIDING_BUILTINS = {"all", "any", "bool", "callable", "hasattr", "isinstance", "issubclass"}
COMPARE_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
               ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


class UnsupportedTest(ValueError):
    """A test module uses a construct the call-check compiler cannot split safely."""


@dataclass(frozen=True)
class Approx:
    """pytest.approx, on the trusted side: a float (or a sequence of them) within a tolerance."""

    expected: Any
    rel: float | None = None
    abs: float | None = None


# A check is a small expression tree, evaluated by judge.evaluate:
#   ("slot", k) | ("const", value) | ("not", x) | ("and", [x...]) | ("or", [x...])
#   | ("cmp", left, [(op, right), ...]) | ("raised", k, (("builtins", "ValueError"), ("", "UnbalancedEntry")))
Check = tuple


def leaves(check: Check, *, identity: bool = True) -> Iterator[Check]:
    """The leaves of `check` ("slot", "const" and "raised" nodes) at any depth, in order. `identity=False` leaves out
    the operands of a comparison made only of `is`/`is not`, which runs no method of theirs."""
    kind = check[0]
    if kind in ("and", "or"):
        for part in check[1]:
            yield from leaves(part, identity=identity)
    elif kind == "not":
        yield from leaves(check[1], identity=identity)
    elif kind == "cmp":
        if identity or not all(op in ("is", "is not") for op, _ in check[2]):
            yield from leaves(check[1], identity=identity)
            for _, right in check[2]:
                yield from leaves(right, identity=identity)
    else:
        yield check


@dataclass(frozen=True)
class CompiledTest:
    name: str
    slots: int                    # observations the driver must send, numbered 0..slots-1 in order
    checks: tuple[Check, ...]     # all must hold (trusted side only)
    raise_slots: frozenset[int] = frozenset()  # slots that record an expected exception, not a value
    statements: tuple[str, ...] = ()  # the driver's statements, unparsed (what the test asks of the code)
    inputs: frozenset[str] = frozenset()  # reprs of the literals the driver passes to the code under test
    joined: frozenset[int] = frozenset()  # checks that are a later part of the previous check's `assert a and b`


@dataclass(frozen=True)
class CompiledSuite:
    path: str                     # the test file, e.g. 'tests/test_lru.py' (node ids are f"{path}::{name}")
    driver: str                   # Python source of the driver module: safe to show the code under test
    tests: tuple[CompiledTest, ...] = field(default_factory=tuple)

    def nodeids(self) -> list[str]:
        return [f"{self.path}::{t.name}" for t in self.tests]


def _where(path: str, node: ast.AST) -> str:
    return f"{path}:{getattr(node, 'lineno', '?')}"


def _mentions_pytest_or_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) or (isinstance(n, ast.Name) and n.id == "pytest") for n in ast.walk(node))


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _mutable(value: Any) -> bool:
    """Whether a literal value holds a list, dict or set (something the code under test can change in place)."""
    if isinstance(value, list | dict | set):
        return True
    return isinstance(value, tuple) and any(_mutable(v) for v in value)


def _passed_names(body: list[ast.stmt]) -> set[str]:
    """Names the driver hands to the code under test: read in a statement that is not an assertion, or inside a call,
    an attribute or an item access an assertion makes (which the driver runs)."""
    names: set[str] = set()
    for stmt in body:
        nodes: list[ast.AST] = [stmt]
        if isinstance(stmt, ast.Assert):
            nodes = [n for n in ast.walk(stmt.test) if isinstance(n, ast.Call | ast.Attribute | ast.Subscript)]
        names |= {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return names


class _Compiler:
    def __init__(self, path: str, constants: dict[str, Any], passed_constants: frozenset[str] = frozenset()):
        self.path = path
        self.module_constants = constants
        # module constants holding containers that some test hands to the code under test: the code may change them,
        # so an assertion reads them as the driver holds them, as pytest would (`rpc`: changes are seen there)
        self.passed_constants = passed_constants

    # -- trusted expressions ------------------------------------------------------------------
    def trusted(self, node: ast.expr, env: dict[str, Any]) -> bool:
        """Built only from literals, known literal constants and SAFE_BUILTINS: the verifier computes it."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return node.id in env
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return all(not isinstance(e, ast.Starred) and self.trusted(e, env) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and self.trusted(k, env) for k in node.keys) and all(self.trusted(v, env) for v in node.values)
        if isinstance(node, ast.UnaryOp):
            return isinstance(node.op, ast.USub | ast.UAdd | ast.Not) and self.trusted(node.operand, env)
        if isinstance(node, ast.BinOp):
            return self.trusted(node.left, env) and self.trusted(node.right, env)
        if isinstance(node, ast.Call):
            args_ok = all(not isinstance(a, ast.Starred) and self.trusted(a, env) for a in node.args) and \
                all(k.arg is not None and self.trusted(k.value, env) for k in node.keywords)
            if isinstance(node.func, ast.Name) and node.func.id in SAFE_BUILTINS:
                return args_ok
            return self._is_approx(node) and args_ok
        return False

    @staticmethod
    def _is_approx(node: ast.expr) -> TypeGuard[ast.Call]:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "approx"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "pytest")

    def constant(self, node: ast.expr, env: dict[str, Any]) -> Any:
        """Evaluate a trusted expression (our own test source) with nothing but literals and SAFE_BUILTINS."""
        if self._is_approx(node):
            kw = {k.arg: self.constant(k.value, env) for k in node.keywords}
            unknown = set(kw) - {"rel", "abs"}
            if len(node.args) != 1 or unknown:
                raise UnsupportedTest(f"{_where(self.path, node)}: pytest.approx takes one value and rel=/abs= only")
            return Approx(self.constant(node.args[0], env), kw.get("rel"), kw.get("abs"))
        code = compile(ast.Expression(body=node), self.path, "eval")
        return eval(code, {"__builtins__": SAFE_BUILTINS}, dict(env))  # noqa: S307 - trusted source, literals only

    # -- assertions -----------------------------------------------------------------------------
    def split(self, node: ast.expr, env: dict[str, Any], hoisted: list[ast.expr]) -> Check:
        """The trusted check for `node`; the operands computed by the code under test go to `hoisted`."""
        if self.trusted(node, env):
            return ("const", self.constant(node, env))
        if isinstance(node, ast.BoolOp):
            return ("and" if isinstance(node.op, ast.And) else "or", [self.split(v, env, hoisted) for v in node.values])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ("not", self.split(node.operand, env, hoisted))
        if isinstance(node, ast.Compare):
            left = self.operand(node.left, env, hoisted)
            pairs = []
            for op, right in zip(node.ops, node.comparators):
                if type(op) not in COMPARE_OPS:
                    raise UnsupportedTest(f"{_where(self.path, node)}: comparison {type(op).__name__}")
                pairs.append((COMPARE_OPS[type(op)], self.operand(right, env, hoisted)))
            return ("cmp", left, pairs)
        return self.operand(node, env, hoisted)

    def operand(self, node: ast.expr, env: dict[str, Any], hoisted: list[ast.expr]) -> Check:
        if self.trusted(node, env):
            return ("const", self.constant(node, env))
        if _mentions_pytest_or_assert(node) or any(isinstance(n, ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom)
                                                   for n in ast.walk(node)):
            raise UnsupportedTest(f"{_where(self.path, node)}: cannot observe {ast.unparse(node)[:80]!r}")
        if any(isinstance(n, ast.Compare | ast.BoolOp | ast.IfExp) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))
               or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in DECIDING_BUILTINS)
               for n in ast.walk(node)):
            # a comparison made beside the code under test would be decided by its __eq__/__bool__: observe
            # the values and compare them here instead (e.g. `[f(n) for n in ns] == [...]`, not `all(f(n) == ...)`)
            raise UnsupportedTest(f"{_where(self.path, node)}: {ast.unparse(node)[:80]!r} decides something beside "
                                  "the code under test; compare observed values in the assertion instead")
        hoisted.append(node)
        return ("slot", len(hoisted) - 1)

    # -- a test function ------------------------------------------------------------------------
    def test(self, fn: ast.FunctionDef, module_names: set[str]) -> tuple[ast.FunctionDef, CompiledTest]:
        a = fn.args
        if fn.decorator_list or a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
            raise UnsupportedTest(f"{_where(self.path, fn)}: {fn.name} must be an undecorated function without arguments")
        env = dict(self.module_constants)
        # local NAME = <literal>: the verifier knows it too (it may be an expected value)
        local_literals: dict[str, ast.Assign] = {}
        assigned: dict[str, int] = {}
        for stmt in fn.body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    assigned[n.id] = assigned.get(n.id, 0) + 1
        for stmt in fn.body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and assigned.get(stmt.targets[0].id) == 1 and _is_literal(stmt.value)):
                local_literals[stmt.targets[0].id] = stmt
                env[stmt.targets[0].id] = ast.literal_eval(stmt.value)
        # any other name the test binds is computed beside the code under test, whatever a module constant of that
        # name holds (`text = decode(encode("hello")); assert text == "hello"` was judged constant == constant: a
        # seventy-ninth attacker)
        for name in _bound_names(fn.body):
            if name not in local_literals:
                env.pop(name, None)
        # a list, dict or set the test hands to the code under test may be changed by it: an assertion naming one is
        # judged on the value the driver holds then, not on its literal (a test that checks an input is unchanged
        # passed a fix that emptied it), unless nothing else in the assertion is an expected value
        passed = _passed_names(fn.body) | (self.passed_constants - set(local_literals))
        changeable = {name for name in env if name in passed and _mutable(env[name])}
        observed_env = {k: v for k, v in env.items() if k not in changeable}
        body: list[ast.stmt] = []
        checks: list[Check] = []
        raise_slots: set[int] = set()
        joined: set[int] = set()
        slots = 0

        def observe(expr: ast.expr) -> ast.stmt:
            nonlocal slots
            call = ast.Expr(ast.Call(func=ast.Name(OBSERVE, ast.Load()),
                                     args=[ast.Constant(slots), ast.Lambda(args=ast.arguments([], [], None, [], [], None, []),
                                                                            body=expr)], keywords=[]))
            slots += 1
            return call

        for stmt in fn.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                continue  # a docstring
            if isinstance(stmt, ast.Assert):
                # `assert a and b` is `assert a` then `assert b` under pytest (b runs only if a holds, and the test
                # stops at the first that fails): each part is an assertion of its own
                for part_no, part in enumerate(_conjuncts(stmt.test)):
                    if part_no:
                        joined.add(len(checks))
                    hoisted: list[ast.expr] = []
                    check = self.split(part, observed_env, hoisted)
                    if changeable and _self_judged(check):
                        hoisted = []
                        check = self.split(part, env, hoisted)
                    if _self_judged(check):
                        raise UnsupportedTest(f"{_where(self.path, stmt)}: the assertion compares values that are all "
                                              "computed beside the code under test (no expected value the verifier holds)")
                    if _conditional_slot(check):
                        raise UnsupportedTest(
                            f"{_where(self.path, stmt)}: {ast.unparse(part)[:80]!r} asks the code under test for a value "
                            "only if an earlier operand decides so (`or`, `and` inside an expression, a chained "
                            "comparison); the driver cannot know that without the expected values, so it would call code "
                            "pytest skips: write separate assertions")
                    checks.append(_renumber(check, slots))
                    body.extend(observe(h) for h in hoisted)
                continue
            if isinstance(stmt, ast.With) and len(stmt.items) == 1 and self._is_raises(stmt.items[0].context_expr):
                item = stmt.items[0]
                if item.optional_vars is not None:
                    raise UnsupportedTest(f"{_where(self.path, stmt)}: `pytest.raises(...) as name` is not supported")
                expected = self._exception_names(cast(ast.Call, item.context_expr), module_names)  # _is_raises: a call
                for inner in stmt.body:
                    if _mentions_pytest_or_assert(inner):
                        raise UnsupportedTest(f"{_where(self.path, inner)}: no assert or pytest inside pytest.raises")
                checks.append(("raised", slots, expected))
                raise_slots.add(slots)
                # the classes as the test names them go to the driver too: it tells whether the raised exception is an
                # instance of one of them, as pytest does (a class of the same name is not the class: `judge`)
                named = cast(ast.Call, item.context_expr).args[0]
                body.append(ast.With(items=[ast.withitem(ast.Call(func=ast.Name(RAISES, ast.Load()),
                                                                  args=[ast.Constant(slots), named], keywords=[]))],
                                     body=stmt.body))
                slots += 1
                continue
            if _mentions_pytest_or_assert(stmt):
                raise UnsupportedTest(f"{_where(self.path, stmt)}: assertions must be top-level statements of the test "
                                      "(not inside loops, conditions or functions)")
            body.append(stmt)
        # a literal only the checks use stays out of the driver: it is an expected value, not an input
        used = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        body = [s for s in body if not any(s is a for name, a in local_literals.items() if name not in used)]
        # type_params is a field from Python 3.12 on (mypy checks against 3.11's ast, which has none)
        driver = ast.FunctionDef(name=fn.name, args=fn.args, body=body or [ast.Pass()], decorator_list=[],  # type: ignore[call-arg]
                                 returns=None, type_comment=None, type_params=[])
        return driver, CompiledTest(name=fn.name, slots=slots, checks=tuple(checks), raise_slots=frozenset(raise_slots),
                                    statements=tuple(ast.unparse(ast.fix_missing_locations(b)) for b in body),
                                    inputs=_inputs(body, env), joined=frozenset(joined))

    def _is_raises(self, node: ast.expr) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "raises"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "pytest")

    def _exception_names(self, call: ast.Call, module_names: set[str]) -> tuple[tuple[str, str], ...]:
        if len(call.args) != 1 or call.keywords:
            raise UnsupportedTest(f"{_where(self.path, call)}: pytest.raises takes one exception (or a tuple) here")
        target = call.args[0]
        items = target.elts if isinstance(target, ast.Tuple) else [target]
        out = []
        for item in items:
            if not isinstance(item, ast.Name):
                raise UnsupportedTest(f"{_where(self.path, call)}: pytest.raises needs exception names")
            if isinstance(getattr(builtins, item.id, None), type) and issubclass(getattr(builtins, item.id), BaseException):
                out.append(("builtins", item.id))
            elif item.id in module_names:
                out.append(("", item.id))  # a class of the code under test: by name here, and the driver checks it is the class (judge)
            else:
                raise UnsupportedTest(f"{_where(self.path, call)}: unknown exception {item.id!r}")
        return tuple(out)


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """Every name the statements bind: assigned, a loop or `with` target, an exception's name, a def, class or import."""
    names: set[str] = set()
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                names.add(n.id)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                names.add(n.name)
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(n.name)
            elif isinstance(n, ast.alias):
                names.add((n.asname or n.name).partition(".")[0])
            elif isinstance(n, ast.MatchAs | ast.MatchStar) and n.name:
                names.add(n.name)
    return names


def _inputs(body: list[ast.stmt], env: dict[str, Any]) -> frozenset[str]:
    """The literals a driver gives the code under test (slot numbers aside; named constants by value)."""
    skip = {id(n.args[0]) for stmt in body for n in ast.walk(stmt)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in (OBSERVE, RAISES) and n.args}
    out = set()
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Constant) and id(n) not in skip:
                out.add(repr(n.value))
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in env:
                out.add(repr(env[n.id]))
    return frozenset(out)


def _conjuncts(node: ast.expr) -> list[ast.expr]:
    """The operands of a top-level `and`, flattened (`a and (b and c)`: a, b, c); else the expression itself."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [part for value in node.values for part in _conjuncts(value)]
    return [node]


def _has_slot(check: Check) -> bool:
    return _holds(check, "slot")


def _conditional_slot(check: Check) -> bool:
    """Whether `check` observes a value that Python evaluates only depending on an earlier operand's outcome: an
    operand of `and`/`or` after the first, or a chained comparison's operand after its first pair. The driver runs
    every observation of an assertion unconditionally (it holds no expected value to decide with), so such a value
    would be asked of the code under test where pytest never asks it: a tell (`assert one() == 1 or two() == 2`
    called `two` under the verifier alone)."""
    kind = check[0]
    if kind in ("and", "or"):
        return _conditional_slot(check[1][0]) or any(_has_slot(c) for c in check[1][1:])
    if kind == "not":
        return _conditional_slot(check[1])
    if kind == "cmp":
        return (_conditional_slot(check[1]) or _conditional_slot(check[2][0][1])
                or any(_has_slot(c) for _, c in check[2][1:]))
    return False


def _renumber(check: Check, offset: int) -> Check:
    """Slots of one assertion are numbered from 0; shift them after the test's earlier slots."""
    kind = check[0]
    if kind == "slot":
        return ("slot", check[1] + offset)
    if kind in ("and", "or"):
        return (kind, [_renumber(c, offset) for c in check[1]])
    if kind == "not":
        return ("not", _renumber(check[1], offset))
    if kind == "cmp":
        return ("cmp", _renumber(check[1], offset), [(op, _renumber(r, offset)) for op, r in check[2]])
    return check


def _holds(check: Check, leaf: str) -> bool:
    """Whether `check` has a leaf of kind `leaf` ("const", "slot") among its operands, at any depth."""
    return any(node[0] == leaf for node in leaves(check))


def _trusted(check: Check) -> bool:
    """Whether `check` reads a value the verifier holds (a literal, a literal constant)."""
    return _holds(check, "const")


def _self_judged(check: Check) -> bool:
    """Whether a comparison in `check` has only observed operands, e.g. `actual == expected` with `expected`
    computed in the test. Both would be computed beside the agent's code, which can report one side's value for
    the other (a red-team agent did): such a comparison decides nothing the agent could not forge."""
    kind = check[0]
    if kind == "cmp":
        return not _trusted(check)
    if kind in ("and", "or"):
        return any(_self_judged(c) for c in check[1])
    if kind == "not":
        return _self_judged(check[1])
    return False


def _one_bit(value: Any) -> bool:
    return value is None or isinstance(value, bool)


def _rich(check: Check) -> bool:
    """Whether `check` holds only for a value that cannot be guessed in a bit: an `==` against a verifier-held
    constant that is not True, False or None (a truth test, `is None`, `!=` or an expected exception can)."""
    kind = check[0]
    if kind == "cmp":
        operands = [check[1], *(c for _, c in check[2])]
        return any(op == "==" for op, _ in check[2]) and any(o[0] == "const" and not _one_bit(o[1]) for o in operands)
    if kind == "and":
        return any(_rich(c) for c in check[1])
    if kind == "or":
        return all(_rich(c) for c in check[1])
    return False


def informative(test: CompiledTest) -> bool:
    """Whether passing `test` is evidence the code computes something: one of its checks needs a value beyond one
    bit. The driver runs beside the agent's code, which can tell a hidden test from its driver and report whatever
    it likes; a test whose every check is a truth value, an `is None` or an expected exception is passed by a
    guess (a red-team agent was accepted on semver doing nothing else), so such tests gate but prove no progress."""
    return any(_rich(c) for c in test.checks)


@lru_cache(maxsize=256)
def compile_suite(source: str, path: str) -> CompiledSuite:
    """Compile the plain pytest module `source` (at `path` in the job) into a driver and trusted checks.

    Raises UnsupportedTest naming the file, the line and what is not supported.
    """
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise UnsupportedTest(f"{path}: not valid Python ({exc.msg}, line {exc.lineno})") from None
    header: list[ast.stmt] = []
    constants: dict[str, Any] = {}
    imported: set[str] = set()
    functions: list[ast.FunctionDef] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.Import):
            kept = [a for a in node.names if a.name != "pytest"]
            if kept:
                header.append(ast.Import(names=kept))
            continue
        if isinstance(node, ast.ImportFrom):
            if node.module == "pytest" or (node.module or "").startswith(("pytest.", "_pytest")):
                raise UnsupportedTest(f"{_where(path, node)}: imports from pytest are not supported")
            imported |= {a.asname or a.name for a in node.names}
            header.append(node)
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _is_literal(node.value):
            constants[node.targets[0].id] = ast.literal_eval(node.value)
            header.append(node)  # an input as well (e.g. a graph the tests pass to the functions)
            continue
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            functions.append(node)
            continue
        raise UnsupportedTest(f"{_where(path, node)}: only imports, literal constants and test functions are supported "
                              f"at module level, not {type(node).__name__}")
    passed = frozenset(n for fn in functions for n in _passed_names(fn.body) if n in constants and _mutable(constants[n]))
    compiler = _Compiler(path, constants, passed)
    drivers, tests, seen = [], [], set()
    for fn in functions:
        if fn.name in seen:
            raise UnsupportedTest(f"{_where(path, fn)}: test {fn.name} is defined twice")
        seen.add(fn.name)
        driver, test = compiler.test(fn, imported)
        drivers.append(driver)
        tests.append(test)
    module = ast.Module(body=[*header, *drivers], type_ignores=[])
    return CompiledSuite(path=path, driver=ast.unparse(ast.fix_missing_locations(module)) + "\n", tests=tuple(tests))
