"""Graded code may not look at the process it runs in: a static rule on the modules the agent changed.

The hidden tests judge what the code returns for their calls, in a process the verifier starts. Code that can tell
that process from any other (its `sys.argv`, its pid, a missing `/proc`, its frames, the modules around it) can be
the reference there and the bug everywhere else: a fifty-second independent attacker's *defeat device* was accepted
on every template task and every registered-package task it tried, while an ordinary import kept the bug on every
input. No test can tell such code from a fix, since every test runs in the verifier. So the changed modules may use
nothing that observes the process, its environment or the interpreter's own machinery beyond what the module they
repair (the reference) already uses: an honest fix of a function's logic needs none of it, and the task's goal
says so. What is checked, on the source alone (the verifier's side; nothing of the agent's runs here):

- imports: only modules the reference imports, the task's own modules, and PURE_MODULES (computation only);
- names and attributes in PROCESS_NAMES (`.sys`, `.argv`, `.getpid`, `.environ`, a frame's `.f_back`, the clock's
  `.now`, `__globals__`, ...);
- calls that resolve names at run time or read files (`eval`, `exec`, `compile`, `__import__`, `globals`, `vars`,
  `open`, ...), and `getattr`/`setattr`/`hasattr`/`delattr` with a name that is not a plain literal.

Property: a graded module that passes uses no import, name or attribute that reads the process, and resolves no
name at run time, beyond its reference's. The one tell in pure code, the hash seed (`hash()`, a set's order), is
taken away elsewhere: graded code runs under a seed drawn from the verifier's key (`drawkey.keyed_hash`). Not
covered: tells that need none of these (a resource limit probed by allocating memory until it fails), and a
reference that itself imports `sys` or `os` (a registered package's module may: the rule then allows what it uses).
docs/verifier.md, property 13.
"""

from __future__ import annotations

import ast
import re

# computation only: nothing here reads the process, the file system or the interpreter's state
PURE_MODULES = frozenset({
    "__future__", "abc", "array", "bisect", "calendar", "cmath", "collections", "colorsys", "copy", "dataclasses",
    "datetime", "decimal", "difflib", "enum", "fractions", "functools", "graphlib", "hashlib", "heapq", "itertools",
    "json", "math", "numbers", "operator", "random", "re", "statistics", "string", "struct", "textwrap", "typing",
    "unicodedata", "zlib"})
# attributes that reach the process, its environment, clock, frames or import machinery (through an allowed module:
# `statistics.sys.argv`), and dunder names that reach the interpreter's objects; any of them, as a name or an
# attribute, the reference does not use is a read. Plain module names need no entry: importing one is the import rule
PROCESS_NAMES = frozenset({
    "sys", "os", "posix", "inspect", "importlib", "builtins", "gc", "ctypes", "platform", "resource", "subprocess",
    "argv", "orig_argv", "getpid", "getppid", "getpgid", "getsid", "getuid", "geteuid", "getgid", "environ", "getenv",
    "_getframe", "_current_frames", "settrace", "gettrace", "setprofile", "getprofile", "executable", "uname",
    "gethostname", "getcwd", "cpu_count", "getrlimit", "getrusage", "listdir", "scandir", "currentframe",
    "getframeinfo", "f_back", "f_globals", "f_locals", "f_code", "f_builtins", "tb_frame", "tb_next", "gi_frame",
    "cr_frame", "ag_frame", "addaudithook", "now", "utcnow", "today", "monotonic", "perf_counter", "process_time",
    "time_ns", "thread_time",
    "__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "__bases__", "__base__", "__mro__",
    "__dict__", "__loader__", "__spec__", "__file__", "__main__", "__traceback__", "__import__", "__reduce__",
    "__reduce_ex__", "__getattribute__", "__self__", "__func__", "__defaults__", "__kwdefaults__", "__path__",
    "__cached__", "__package__"})
# calls that resolve names at run time, run code from text, or read what the process can reach
DYNAMIC_CALLS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                           "open", "input", "help", "memoryview", "exit", "quit"})
ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _uses(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """(top-level modules imported, names and attributes used, names called) in `tree`."""
    imports, names, called = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imports.add("." if node.level else (node.module or "").split(".")[0])
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
    return imports, names, called


def process_reads(source: str, reference: str, own_modules: frozenset[str] = frozenset()) -> list[str]:
    """What `source` (a graded module as the agent left it) uses to observe the process it runs in that `reference`
    (the same module's reference) does not, as short phrases ("imports sys", "uses argv", "calls eval",
    "getattr with a computed name"); [] when nothing. `own_modules`: the top-level names of the task's own modules
    (imports of them are the package's, not the process's). A source that does not parse reads nothing here (the
    tests fail it)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    try:
        allowed_imports, allowed_names, allowed_calls = _uses(ast.parse(reference))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        allowed_imports, allowed_names, allowed_calls = set(), set(), set()
    imports, names, called = _uses(tree)
    found = [f"imports {m}" for m in sorted(imports - allowed_imports - PURE_MODULES - own_modules - {"."})]
    found += [f"uses {n}" for n in sorted((names & PROCESS_NAMES) - allowed_names)]
    found += [f"calls {n}" for n in sorted((called & DYNAMIC_CALLS) - allowed_calls)]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_CALLS
                and node.func.id not in allowed_calls):
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and _PLAIN_NAME.fullmatch(name.value)
                    and (name.value not in PROCESS_NAMES or name.value in allowed_names)):
                found.append(f"{node.func.id} with a computed or process name")
    return sorted(set(found))
