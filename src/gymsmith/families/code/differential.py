"""Differential hidden tests: the template's own calls, on neighbouring inputs, checked against the reference.

A test suite checks each behaviour on a few literal inputs; code that special-cases exactly those inputs
passes it (the `hardcode_outputs` exploit did, on 2 of 200 tasks, before this module existed). For every
call `f(literal, ...)` of a module-level function in a template's tests, we derive variants (integers
moved by +1, -1, +7; integers inside tuples and lists moved by +1), run the REFERENCE on each in the
sandbox with a time limit per call, and keep the ones whose result is a plain literal (or an exception
type). They become hidden test functions asserting the same result. Computed once per template and
cached with the mutant catalog.
"""

from __future__ import annotations

import ast
import json
from typing import Any, cast

from gymsmith.sandbox.base import VERIFIER_CPU_WEIGHT, Limits

EVAL_LIMITS = Limits(memory_mb=512, pids=16, cpu_s=30, timeout_s=60, output_bytes=4 << 20, cpu_weight=VERIFIER_CPU_WEIGHT)
PER_CALL_S = 1
MAX_PER_FUNCTION = 8
MAX_PER_TEMPLATE = 60

_EVALUATOR = r'''
import json, signal, sys
namespace = {}
exec(compile(open("reference.py").read(), "reference.py", "exec"), namespace)
class Slow(Exception):
    pass
def alarm(*_):
    raise Slow()
signal.signal(signal.SIGALRM, alarm)
out = []
for name, args in json.load(open("calls.json")):
    signal.alarm(%d)
    try:
        value = namespace[name](*eval(args))
        signal.alarm(0)
        text = repr(value)
        import ast
        ast.literal_eval(text)
        out.append(["value", text])
    except Slow:
        out.append(["slow", ""])
    except Exception as exc:
        signal.alarm(0)
        out.append(["raises", type(exc).__name__ if type(exc).__module__ == "builtins" else ""])
    finally:
        signal.alarm(0)
print(json.dumps(out))
''' % PER_CALL_S


def _variants(node: ast.expr) -> list[ast.expr]:
    """Neighbours of one literal argument."""
    value = ast.literal_eval(node)
    out: list[Any] = []
    if isinstance(value, bool):
        return []
    if isinstance(value, str):
        out = [value + value[-1]] + ([value[1:]] if len(value) > 1 else []) if value else []
    elif isinstance(value, int):
        out = [value + 1, value - 1, value + 7] if value > 0 else [value + 1, value + 7]
    elif isinstance(value, tuple | list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        out = [type(value)(v + 1 for v in value)]
    elif isinstance(value, tuple | list) and value and all(isinstance(v, tuple | list) for v in value):
        if all(all(isinstance(x, int) and not isinstance(x, bool) for x in v) for v in value):
            out = [type(value)(type(v)(x + 1 for x in v) for v in value)]
    return [ast.parse(repr(v), mode="eval").body for v in out]


def candidate_calls(module_source: str, tests_source: str) -> list[tuple[str, str]]:
    """(function name, repr of the argument tuple) for every neighbour of every literal call in the tests."""
    functions = {n.name for n in ast.parse(module_source).body if isinstance(n, ast.FunctionDef)}
    tree = ast.parse(tests_source)
    constants = {}  # module-level NAME = literal in the tests (e.g. a graph), usable as literal arguments
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                ast.literal_eval(stmt.value)
                constants[stmt.targets[0].id] = stmt.value
            except ValueError:
                pass
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions):
            continue
        if node.keywords or not node.args:
            continue
        node = ast.Call(func=node.func, keywords=[],
                        args=[constants.get(a.id, a) if isinstance(a, ast.Name) else a for a in node.args])
        try:
            for a in node.args:
                ast.literal_eval(a)
        except ValueError:
            continue
        for i, arg in enumerate(node.args):
            for variant in _variants(arg):
                args = [ast.unparse(a) for a in node.args]
                args[i] = ast.unparse(variant)
                key = (cast(ast.Name, node.func).id, "(" + ", ".join(args) + ",)")  # the call's own name (above)
                if key not in seen:
                    seen.add(key)
                    out.append(key)
    return out


def evaluate(module_source: str, calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Run the reference on each call in a sandbox: [('value', repr) | ('raises', ExcName) | ('slow', '')]."""
    import tempfile
    from pathlib import Path

    from gymsmith.sandbox import open_sandbox

    if not calls:
        return []
    with tempfile.TemporaryDirectory(prefix="gymsmith-diff-") as tmp:
        (Path(tmp) / "reference.py").write_text(module_source)
        (Path(tmp) / "calls.json").write_text(json.dumps(calls))
        (Path(tmp) / "evaluate.py").write_text(_EVALUATOR)
        with open_sandbox(Path(tmp), limits=EVAL_LIMITS) as sb:
            result = sb.exec(["python3", "evaluate.py"], timeout=EVAL_LIMITS.timeout_s)
    if not result.ok:
        raise RuntimeError(f"evaluating the reference failed: {result.stderr[-500:]}")
    return [tuple(x) for x in json.loads(result.stdout)]


def differential_tests(template: str, module_source: str, tests_source: str) -> str:
    """Source of hidden test functions pinning the reference's behaviour on neighbouring inputs."""
    calls = candidate_calls(module_source, tests_source)
    results = evaluate(module_source, calls)
    lines, names = [], set()
    per_function: dict[str, int]
    kept, per_function = 0, {}
    for (name, args), (kind, text) in zip(calls, results):
        if kept >= MAX_PER_TEMPLATE or kind == "slow" or (kind == "raises" and not text):
            continue
        if per_function.get(name, 0) >= MAX_PER_FUNCTION:
            continue
        per_function[name] = per_function.get(name, 0) + 1
        kept += 1
        test = f"test_{name}_on_nearby_input_{kept}"
        names.add(name)
        if kind == "value":
            value = ast.literal_eval(text)
            expected = f"pytest.approx({text})" if isinstance(value, float) else text
            lines.append(f"def {test}():\n    assert {name}(*{args}) == {expected}\n")
        else:
            lines.append(f"def {test}():\n    with pytest.raises({text}):\n        {name}(*{args})\n")
    if not lines:
        return ""
    header = f"import pytest\n\nfrom {template} import {', '.join(sorted(names))}\n"
    return "\n\n# differential: the reference's results on inputs next to the visible ones\n" + header + "\n\n" + "\n\n".join(lines)
