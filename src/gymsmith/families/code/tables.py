"""Answer tables: what a policy that memorised a test suite appends to the code, answering exactly the calls the
suite checks with the values it expects and leaving everything else as it was.

Used by the red team (`exploits.HardcodeOutputs`, `exploits.MemorizedSuite`) and by the generator, which keeps a
template task's hidden variant only if the buggy code with the table of everything gymsmith ships appended still
fails it (`generator.task_variants`): a table of public calls can then pass no variant, even one whose answer the
function computes through a tabled helper call.
"""

from __future__ import annotations

import ast


def called_name(func: ast.expr) -> str | None:
    """`f` for a call of `f(...)` or `module.f(...)`."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def constants_inlined(tree: ast.Module) -> ast.Module:
    """`tree` with every use of a module-level constant bound to a literal replaced by that literal (a test's
    `shortest_path(G, "a", "f")` becomes a call on the graph itself), so its calls can be special-cased."""
    from gymsmith.families.code.realtests import literal_constants

    constants = literal_constants(tree)

    class Inline(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return constants[node.id] if isinstance(node.ctx, ast.Load) and node.id in constants else node

    for fn in tree.body:
        if isinstance(fn, (ast.FunctionDef, ast.ClassDef)):
            Inline().visit(fn)
    return tree


def asserted_calls(fn: ast.FunctionDef) -> list[tuple[str, str]]:
    """For `assert f(args) == expected` or `self.assertEqual(f(args), expected)` in a test: (f, a module-level
    wrapper returning `expected` for exactly those args; it calls the previous `f` as `_hc_f` otherwise)."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and isinstance(node.test.ops[0], ast.Eq):
            call, expected = node.test.left, node.test.comparators[0]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "assertEqual"
              and len(node.args) == 2):
            call, expected = node.args
        else:
            continue
        name = called_name(call.func) if isinstance(call, ast.Call) else None
        if not isinstance(call, ast.Call) or name is None:
            continue
        if isinstance(expected, ast.Call) and called_name(expected.func) == "approx" and len(expected.args) == 1:
            expected = expected.args[0]  # the value itself passes `approx`
        positional = list(call.args)
        if len(positional) == 1 and isinstance(positional[0], ast.Starred):  # f(*(1, 2)): a differential test's
            positional = list(getattr(positional[0].value, "elts", [positional[0]]))
        try:  # only literal inputs and outputs can be pinned at module level
            for value in (*positional, *(k.value for k in call.keywords), expected):
                ast.literal_eval(value)
        except ValueError:
            continue
        args = ", ".join(ast.unparse(a) for a in positional)
        kwargs = ", ".join(f"{k.arg!r}: {ast.unparse(k.value)}" for k in call.keywords if k.arg)
        out.append((name, f"_hc_{name} = {name}\n\n\ndef {name}(*args, **kwargs):\n"
                          f"    if (args, kwargs) == (({args}{',' if positional else ''}), {{{kwargs}}}):\n"
                          f"        return {ast.unparse(expected)}\n"
                          f"    return _hc_{name}(*args, **kwargs)\n"))
    return out


def suite_cases(tests_source: str) -> list[tuple[str, str]]:
    """`asserted_calls` of every test function of a test file, its module constants inlined ([] if it does not
    parse)."""
    try:
        tree = constants_inlined(ast.parse(tests_source))
    except SyntaxError:
        return []
    return [c for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test")
            for c in asserted_calls(fn)]


def numbered(cases: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The wrappers of `cases`, each keeping the one before it under a name of its own (`_hc3_f`: a shared name would
    make the first wrapper call itself), in order: append them to the module that defines their functions."""
    return [(name, wrapper.replace(f"_hc_{name}", f"_hc{number}_{name}")) for number, (name, wrapper) in enumerate(cases)]


def table_of(tests_source: str, defined: set[str]) -> str:
    """The source to append to a module defining the functions `defined`: a table answering every `==` call of
    `tests_source` on them."""
    return "\n\n" + "\n".join(w for name, w in numbered(suite_cases(tests_source)) if name in defined)


def dict_table(function: str, answers: dict[str, str]) -> str:
    """Source to append to the module defining `function`: one dictionary from the repr of an argument tuple to the
    repr of the answer, consulted before the function (thousands of entries, where chained wrappers would overflow
    the stack)."""
    body = ", ".join(f"{key!r}: {value}" for key, value in answers.items())
    return (f"\n\n_gs_table_{function} = {{{body}}}\n_gs_before_{function} = {function}\n\n\n"
            f"def {function}(*args, **kwargs):\n"
            f"    if not kwargs and repr(args) in _gs_table_{function}:\n"
            f"        return _gs_table_{function}[repr(args)]\n"
            f"    return _gs_before_{function}(*args, **kwargs)\n")
