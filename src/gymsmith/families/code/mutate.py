"""Seeded bug injection: every candidate AST mutation of a module, applied as a source-segment edit.

A mutation replaces the source text of one node (or inserts/removes whole lines), so the buggy file keeps
its formatting and comments and the fix is a small diff. Operators:

| operator            | what it does                                                  |
|---------------------|---------------------------------------------------------------|
| off_by_one          | an integer literal n becomes n+1 or n-1                       |
| flipped_comparison  | < <=, > >=, == !=, in / not in, is / is not swapped           |
| wrong_operator      | + -, * //, / //, % //, and / or swapped                       |
| wrong_default       | a parameter's default literal changed                          |
| swapped_arguments   | the first two positional arguments of a call swapped          |
| dropped_edge_case   | an `if` whose body returns, raises, breaks or continues, removed |
| early_return        | a loop's following `return` copied into the end of its body   |
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import cast

OPERATORS = ("off_by_one", "flipped_comparison", "wrong_operator", "wrong_default", "swapped_arguments",
             "dropped_edge_case", "early_return")

_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
             ast.Div: ast.FloorDiv, ast.Mod: ast.FloorDiv}


@dataclass(frozen=True)
class Mutation:
    """One candidate edit of a module's source (positions are 1-based lines, 0-based columns, as in `ast`)."""

    operator: str
    function: str      # the function (or Class.method) it sits in
    line: int
    description: str
    start: tuple[int, int]
    end: tuple[int, int]
    replacement: str   # text replacing [start, end); for line edits, whole lines

    @property
    def key(self) -> str:
        return f"{self.operator}@{self.start[0]}:{self.start[1]}-{self.end[0]}:{self.end[1]}={self.replacement!r}"


def _offset(lines: list[str], pos: tuple[int, int]) -> int:
    line, col = pos
    if line > len(lines):  # the start of the line after the last: the end of the text
        return sum(len(x) for x in lines)
    return sum(len(x) for x in lines[: line - 1]) + len(lines[line - 1].encode()[:col].decode())


def apply(source: str, mutations: list[Mutation]) -> str:
    """Apply non-overlapping mutations, bottom-up so earlier positions stay valid."""
    lines = source.splitlines(keepends=True)
    text = source
    for m in sorted(mutations, key=lambda m: m.start, reverse=True):
        a, b = _offset(lines, m.start), _offset(lines, m.end)
        text = text[:a] + m.replacement + text[b:]
    return text


def _segment(node: ast.expr, replacement: ast.AST | str, operator: str, function: str, description: str) -> Mutation:
    text = replacement if isinstance(replacement, str) else ast.unparse(replacement)
    return Mutation(operator=operator, function=function, line=node.lineno, description=description,
                    start=(node.lineno, node.col_offset), end=(cast(int, node.end_lineno), cast(int, node.end_col_offset)), replacement=text)


def _functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


def _docstring(fn: ast.FunctionDef) -> ast.AST | None:
    first = fn.body[0] if fn.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.value
    return None


def _in_fstring(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.JoinedStr):
            return True
    return False


def candidates(source: str) -> list[Mutation]:
    """Every mutation of `source`'s functions, in a stable order (by position, then operator)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out: list[Mutation] = []
    for name, fn in _functions(tree):
        parents = {child: parent for parent in ast.walk(fn) for child in ast.iter_child_nodes(parent)}
        skip = _docstring(fn)
        defaults = {id(d) for d in fn.args.defaults + [d for d in fn.args.kw_defaults if d is not None]}
        for node in ast.walk(fn):
            if node is skip or _in_fstring(node, parents):
                continue
            if isinstance(node, ast.Constant) and id(node) in defaults:
                v = node.value
                new_default = (not v if isinstance(v, bool) else v + 1 if isinstance(v, int) else
                               ("" if v else " ") if isinstance(v, str) else None)
                if new_default is not None:
                    out.append(_segment(node, ast.Constant(new_default), "wrong_default", name,
                                        f"default {v!r} -> {new_default!r}"))
            elif isinstance(node, ast.Constant) and type(node.value) is int:
                for delta in (1, -1):
                    new_value = node.value + delta
                    if new_value < 0 and node.value >= 0:
                        continue
                    out.append(_segment(node, ast.Constant(new_value), "off_by_one", name,
                                        f"{node.value} -> {new_value}"))
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP_SWAP:
                new_cmp = copy.deepcopy(node)
                new_cmp.ops = [_CMP_SWAP[type(node.ops[0])]()]
                out.append(_segment(node, new_cmp, "flipped_comparison", name,
                                    f"{ast.unparse(node)} -> {ast.unparse(new_cmp)}"))
            elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP and not isinstance(node.left, ast.Constant | ast.JoinedStr):
                new_bin = copy.deepcopy(node)
                new_bin.op = _BIN_SWAP[type(node.op)]()
                out.append(_segment(node, new_bin, "wrong_operator", name, f"{ast.unparse(node)} -> {ast.unparse(new_bin)}"))
            elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
                new_bool = copy.deepcopy(node)
                new_bool.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
                out.append(_segment(node, new_bool, "wrong_operator", name,
                                    f"{ast.unparse(node)} -> {ast.unparse(new_bool)}"))
            elif isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
                if ast.unparse(node.args[0]) != ast.unparse(node.args[1]):
                    new_call = copy.deepcopy(node)
                    new_call.args[0], new_call.args[1] = new_call.args[1], new_call.args[0]
                    out.append(_segment(node, new_call, "swapped_arguments", name,
                                        f"{ast.unparse(node)} -> {ast.unparse(new_call)}"))
        for body in _bodies(fn):
            for i, stmt in enumerate(body):
                if (isinstance(stmt, ast.If) and not stmt.orelse and len(body) > 1
                        and isinstance(stmt.body[-1], ast.Return | ast.Raise | ast.Continue | ast.Break)):
                    out.append(Mutation(operator="dropped_edge_case", function=name, line=stmt.lineno,
                                        description=f"removed `if {ast.unparse(stmt.test)}:` branch",
                                        start=(stmt.lineno, 0), end=(cast(int, stmt.end_lineno) + 1, 0), replacement=""))
                if (isinstance(stmt, ast.For | ast.While) and i + 1 < len(body) and isinstance(body[i + 1], ast.Return)
                        and body[i + 1].value is not None):
                    indent = lines[stmt.body[-1].lineno - 1][: stmt.body[-1].col_offset]
                    ret = ast.get_source_segment(source, body[i + 1])
                    out.append(Mutation(operator="early_return", function=name, line=stmt.lineno,
                                        description=f"`{ret}` moved into the loop",
                                        start=(cast(int, stmt.end_lineno) + 1, 0), end=(cast(int, stmt.end_lineno) + 1, 0),
                                        replacement=f"{indent}{ret}\n"))
    unique = {m.key: m for m in out}
    return sorted(unique.values(), key=lambda m: (m.start, m.end, m.operator, m.replacement))


def _bodies(fn: ast.FunctionDef):
    """Every statement list inside a function (its body, loop and branch bodies)."""
    for node in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def standins(source: str, function: str) -> list[Mutation]:
    """Degenerate repairs of `function` (a name as `Mutation.function` gives it) in `source`: its body (after its
    docstring) replaced by `return <its first parameter>` (self and cls left out), and by `return None`. A hidden test
    that proves a fix must fail under each (`repovariants._one`, `generator.task_variants`): one that passes a function handing its input back
    leaves a bug whose tests never exercise what the function does (attacker 40)."""
    for name, fn in _functions(ast.parse(source)):
        if name != function:
            continue
        body = fn.body[1:] if _docstring(fn) is not None else fn.body
        if not body:
            return []
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if "." in name and params and params[0] in ("self", "cls"):
            params = params[1:]
        indent = " " * body[0].col_offset
        returns = ([params[0]] if params else []) + ["None"]
        return [Mutation(operator="standin", function=name, line=body[0].lineno,
                                description=f"{name} returns {value}", start=(body[0].lineno, 0),
                                end=(body[-1].end_lineno + 1, 0), replacement=f"{indent}return {value}\n")
                for value in returns]
    return []
