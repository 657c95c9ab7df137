"""A real package's test module, reduced to the tests the call-check compiler can split safely.

Real suites use helpers, classes, fixtures and loops of assertions that the compiler (`verifier/calltests/
compiler.py`) refuses, since it cannot keep their comparisons on the trusted side. Rather than weaken it,
each module is cut down to what it does accept: imports (not from pytest), `NAME = <literal>` constants, and
argument-free test functions that compile one by one. `@pytest.mark.parametrize` with literal argument
values is expanded into one argument-free test per case (`test_x__case0`, ...), whose arguments become local
literals, so the expected values among them stay on the trusted side like any other literal. A
`unittest.TestCase` method that uses `self` only for assertions (`self.assertEqual(a, b)` -> `assert a == b`,
`assertTrue`, `assertIn`, `assertIsNone`, `assertRaises` as a context or a call, ...) becomes the top-level
test `test_Class__method`; classes with set-up (`setUp`, fixtures, other helpers) are dropped. Everything
else is dropped; a kept test that needed something dropped fails on the reference and is left out when the
repository is registered.
"""

from __future__ import annotations

import ast
import copy
from typing import cast

from gymsmith.verifier.calltests.compiler import UnsupportedTest, _is_literal, compile_suite

CASE = "__case"   # test_x__case3: the fourth case of a parametrized test_x


def method_name(cls: str, method: str) -> str:
    """test_TestX__test_y: the method test_y of the class TestX, as a top-level test."""
    return f"test_{cls}__{method}"

BINARY = {"assertEqual": ast.Eq, "assertEquals": ast.Eq, "assertNotEqual": ast.NotEq, "assertIs": ast.Is,
          "assertIsNot": ast.IsNot, "assertIn": ast.In, "assertNotIn": ast.NotIn, "assertGreater": ast.Gt,
          "assertGreaterEqual": ast.GtE, "assertLess": ast.Lt, "assertLessEqual": ast.LtE,
          "assertListEqual": ast.Eq, "assertTupleEqual": ast.Eq, "assertDictEqual": ast.Eq, "assertSetEqual": ast.Eq}
UNARY = {"assertTrue": None, "assert_": None, "assertFalse": "not", "assertIsNone": ast.Is, "assertIsNotNone": ast.IsNot}
SETUP = {"setUp", "setUpClass", "tearDown", "tearDownClass", "setup_method", "setup_class", "teardown_method",
         "setup", "teardown", "__init__"}


def base_name(test: str) -> str:
    """The test function (or Class__method) a reduced test came from: its case suffix removed."""
    return test.split(CASE)[0]


def visible_tests(source: str) -> set[str]:
    """Names of a test file's tests as the reducer names them (top-level functions and test_Class__method)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            out.add(node.name)
        elif isinstance(node, ast.ClassDef):
            out |= {method_name(node.name, n.name) for n in node.body
                    if isinstance(n, ast.FunctionDef) and n.name.startswith("test")}
    return out


def _self_call(node: ast.AST) -> tuple[str, ast.Call] | None:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"):
        return node.func.attr, node
    return None


def _assertion(call: ast.Call, name: str) -> ast.stmt | None:
    args = call.args
    if name in BINARY and len(args) >= 2 and not any(k.arg != "msg" for k in call.keywords):
        return ast.Assert(test=ast.Compare(left=args[0], ops=[BINARY[name]()], comparators=[args[1]]))
    if name in UNARY and len(args) >= 1 and not any(k.arg != "msg" for k in call.keywords):
        op = UNARY[name]
        if op is None:
            return ast.Assert(test=args[0])
        if op == "not":
            return ast.Assert(test=ast.UnaryOp(op=ast.Not(), operand=args[0]))
        # the rest of UNARY's values are comparison operator classes
        return ast.Assert(test=ast.Compare(left=args[0], ops=[cast(type[ast.cmpop], op)()],
                                           comparators=[ast.Constant(None)]))
    if name == "assertRaises" and len(args) >= 2 and not call.keywords:
        return ast.With(items=[ast.withitem(_raises(args[0]))],
                        body=[ast.Expr(ast.Call(func=args[1], args=list(args[2:]), keywords=[]))])
    return None


def _raises(exc: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Attribute(ast.Name("pytest", ast.Load()), "raises", ast.Load()), args=[exc], keywords=[])


def _convert_method(cls: str, fn: ast.FunctionDef) -> ast.FunctionDef | None:
    """A TestCase method as a plain test function, or None if it uses `self` for anything but assertions."""
    if fn.decorator_list or [a.arg for a in fn.args.args] != ["self"]:
        return None
    body: list[ast.stmt] = []
    for stmt in fn.body:
        call = _self_call(stmt.value) if isinstance(stmt, ast.Expr) else None
        if call is not None:
            converted = _assertion(call[1], call[0])
            if converted is None:
                return None
            body.append(converted)
        elif (isinstance(stmt, ast.With) and len(stmt.items) == 1 and stmt.items[0].optional_vars is None
              and (c := _self_call(stmt.items[0].context_expr)) is not None and c[0] == "assertRaises"
              and len(c[1].args) == 1 and not c[1].keywords):
            body.append(ast.With(items=[ast.withitem(_raises(c[1].args[0]))], body=stmt.body))
        else:
            body.append(stmt)
    # type_params is a field from Python 3.12 on (mypy checks against 3.11's ast, which has none)
    new = ast.FunctionDef(  # type: ignore[call-arg]
        name=method_name(cls, fn.name), args=ast.arguments([], [], None, [], [], None, []), body=body,
        decorator_list=[], returns=None, type_comment=None, type_params=[], lineno=fn.lineno)
    if any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(new)):
        return None
    return ast.fix_missing_locations(new)


def _convert_class(cls: ast.ClassDef) -> list[ast.FunctionDef]:
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    helpers = {n for n in names if not n.startswith("test")}
    if cls.decorator_list or helpers & SETUP or any(isinstance(n, ast.Assign | ast.AnnAssign) for n in cls.body):
        return []
    out = []
    for n in cls.body:
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test"):
            converted = _convert_method(cls.name, n)
            if converted is not None:
                out.append(converted)
    return out


def literal_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """A module's `NAME = <literal>` constants: name -> the literal's node (`ast.literal_eval` reads it)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            out[node.targets[0].id] = node.value
    return out


def _parametrize_cases(fn: ast.FunctionDef, constants: dict[str, ast.expr]) -> list[dict[str, ast.expr]] | None:
    """The cases of literal `@pytest.mark.parametrize` decorators (their product), or None if not expandable.
    `constants`: the module's `NAME = <literal>` values, which a decorator may name."""
    cases: list[dict[str, ast.expr]] = [{}]
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and ast.unparse(dec.func) in ("pytest.mark.parametrize", "mark.parametrize")
                and len(dec.args) == 2 and not dec.keywords):
            return None
        names_node, values_node = dec.args
        if isinstance(values_node, ast.Name) and values_node.id in constants:
            values_node = constants[values_node.id]
        if not _is_literal(names_node) or not isinstance(values_node, ast.List | ast.Tuple):
            return None
        names = ast.literal_eval(names_node)
        names = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
        rows = []
        for value in values_node.elts:
            if not _is_literal(value):
                return None
            if len(names) == 1:
                rows.append({names[0]: value})
            elif isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(names):
                rows.append(dict(zip(names, value.elts)))
            else:
                return None
        cases = [{**c, **r} for c in cases for r in rows]
    args = [a.arg for a in fn.args.args]
    if fn.args.posonlyargs or fn.args.kwonlyargs or fn.args.vararg or fn.args.kwarg or set(args) != set(cases[0]):
        return None
    return cases


def _expand(fn: ast.FunctionDef, constants: dict[str, ast.expr]) -> list[ast.FunctionDef]:
    if not fn.decorator_list:
        return [fn]
    cases = _parametrize_cases(fn, constants)
    if not cases:
        return []
    out = []
    for i, case in enumerate(cases):
        new = copy.deepcopy(fn)
        new.name, new.decorator_list = f"{fn.name}{CASE}{i}", []
        new.args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        new.body = [ast.Assign(targets=[ast.Name(k, ast.Store())], value=copy.deepcopy(v), lineno=fn.lineno)
                    for k, v in case.items()] + new.body
        out.append(ast.fix_missing_locations(new))
    return out


def reduce_module(source: str, path: str) -> tuple[str, int]:
    """(the module cut down to what compiles as call checks, how many tests were dropped).

    The result compiles with `compile_suite` (it may have no tests). A module that does not parse gives ("", 0)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "", 0
    header: list[ast.stmt] = []
    candidates: list[ast.FunctionDef] = []
    constants: dict[str, ast.expr] = {}
    dropped = 0
    for node in tree.body:
        if isinstance(node, ast.Import):
            header.append(node)
        elif isinstance(node, ast.ImportFrom):
            if not (node.module or "").startswith(("pytest", "_pytest")) and node.level == 0:
                header.append(node)
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and _is_literal(node.value)):
            header.append(node)
            constants[node.targets[0].id] = node.value
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            expanded = _expand(node, constants)
            dropped += not expanded
            candidates += expanded
        elif isinstance(node, ast.ClassDef):
            converted = _convert_class(node)
            dropped += sum(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in node.body) - len(converted)
            candidates += converted
    kept, names = [], set()
    for fn in candidates:
        if fn.name in names:
            dropped += 1
            continue
        try:
            compile_suite(ast.unparse(ast.Module(body=[*header, fn], type_ignores=[])), path)
        except (UnsupportedTest, RecursionError, ValueError):
            dropped += 1
            continue
        kept.append(fn)
        names.add(fn.name)
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=[*header, *kept], type_ignores=[]))) + "\n", dropped


def keep_tests(tests_source: str, keep: set[str]) -> str:
    """The test file with only the test functions in `keep` (imports and shared data stay, formatting intact)."""
    lines = tests_source.splitlines(keepends=True)
    drop: list[tuple[int, int]] = []
    for fn in ast.parse(tests_source).body:
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_") and fn.name not in keep:
            start = fn.lineno - 1 - len(fn.decorator_list)
            end = cast(int, fn.end_lineno)  # set on every parsed node
            while end < len(lines) and not lines[end].strip():
                end += 1  # the blank lines after it go too
            drop.append((start, end))
    for start, end in reversed(drop):
        del lines[start:end]
    return "".join(lines).rstrip() + "\n"
