"""What a pytest run of the workspace imports, and the rules that keep it what the verifier grades: the suffixes the
interpreter imports, the library's top-level names a root module must not take (what is installed here, and what a
cold pytest run asks for), how the interpreter reads a file's bytes, and the process-read rule over changed modules.
Shared by generated tasks (`checks`) and repository tasks (`byo`)."""

from __future__ import annotations

import ast
import codecs
import hashlib
import importlib.machinery
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from gymsmith.core.errors import UngradableState
from gymsmith.families.code.introspection import process_reads
from gymsmith.families.code.repo import Tree
from gymsmith.sandbox.runtime import cache_root

READ_BUDGET_S = 10.0  # the static read of the changed modules (introspection), well inside the service's 60 s


# the files pytest reads its configuration from (rootdir and inifile, `pythonpath`, `addopts`, `--import-mode`)
IMPORTABLE = (".py", ".pyc", ".pyw", *importlib.machinery.EXTENSION_SUFFIXES)
# what a pytest run imports from the library, wherever its path has the workspace's root first: the standard library
# (pytest itself imports `pdb` and `readline` once the task's `pythonpath = .` holds) and pytest's own packages. Not
# `test`, the standard library's own test suite, which nothing imports and agents name scratch files after.
# what a pytest run may import from the library under a top-level name: the standard library's, pytest's, and every
# distribution installed where the verifier runs (a superset of the sandbox runtime's): with plugins autoloaded, as a
# user runs pytest, a plugin's modules (`pytest_timeout`, `_hypothesis_pytestplugin`, `anyio`, ...) are imported with
# the workspace's root first on the path (a hundred-and-thirty-ninth attacker's root `pytest_timeout/` put the bug
# back: accepted on 3 of 3 tasks). A user's own environment may hold other plugins: docs/verifier.md, not covered.
LIBRARY_NAMES = (frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "iniconfig", "packaging",
                                                        "pygments", "py"}
                 | frozenset(importlib.metadata.packages_distributions())) - {"test"}

# what a cold pytest run asks the import system for, found or not, by top-level name: the standard library's and the
# plugins' optional imports look for names no distribution installs (`copy` asks for `org.python.core`, Jython's; the
# anyio plugin for `sniffio`, `trio`), and a root module of such a name is imported by the workspace's run while the
# verifier's runner asked before the job and settled it (a hundred-and-fifty-first attacker's root
# `org/python/core.py` put the bug back: accepted 0.959 on 4 of 4 repositories; `sniffio.py`, `trio.py` with plugins
# autoloaded)
_PROBE = """
import importlib.abc, json, os, sys
asked = set()
class Log(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        asked.add(name.partition(".")[0])
sys.meta_path.insert(0, Log())
import pytest
os.chdir(sys.argv[1])
pytest.main(["-q", "-p", "no:cacheprovider", "test_gs_probe.py"])
print("\\n" + json.dumps(sorted(asked)))
"""


@lru_cache(maxsize=1)
def requested_names() -> frozenset[str]:
    """The top-level names a cold `python -m pytest` run of one test asks for here, plugins autoloaded (`_PROBE`, about
    a second in a subprocess), kept per interpreter and set of installed distributions in the cache directory, so each
    verifier process does not pay it again; empty if the probe cannot run."""
    installed = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                       if d.metadata["Name"])
    key = hashlib.sha256("\n".join([sys.executable, sys.version, *installed]).encode()).hexdigest()[:16]
    kept = cache_root() / f"pytest-requested-names-{key}.json"
    try:
        return frozenset(json.loads(kept.read_text()))
    except (OSError, ValueError):
        pass
    names = _probe()
    if names:
        partial = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(sorted(names)))
        os.replace(partial, kept)  # whole or not at all, whichever process writes last
    return names


def _probe() -> frozenset[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_gs_probe.py").write_text("def test_probe():\n    assert 1 + 1 == 2\n")
        try:
            done = subprocess.run([sys.executable, "-c", _PROBE, tmp], capture_output=True, text=True, timeout=120,
                                  env=env, cwd=tmp)
            return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return frozenset()


def library_names() -> frozenset[str]:
    """LIBRARY_NAMES and what a cold pytest run asks for (`requested_names`), but the probe's own and `test`."""
    return LIBRARY_NAMES | (requested_names() - {"test_gs_probe", "conftest", "__main__", "test"})


def module_name(entry: str) -> str:
    """The module a directory entry is imported as: its name without an importable suffix (a directory's as it is)."""
    return next((entry[:-len(suffix)] for suffix in IMPORTABLE if entry.endswith(suffix)), entry)


def library_shadow(final: Tree, path: str, at_root: frozenset[str]) -> None:
    """Raise UngradableState when `path` (an entry the start state lacks, or changed) is, or is inside, a root module
    or package named like one of `at_root`: a pytest run puts the root first on `sys.path`, so the workspace would
    import it where the verifier, whose runner imported the library before the job, runs the library's."""
    top = path.split("/", 1)[0]
    stem = module_name(top)
    if stem in at_root and (stem != top or "/" in path or final.kind(path) == "symlink"):
        raise UngradableState(f"{top} would be imported as {stem!r} by a pytest run of the tests, in place of "
                              "the library module the verifier runs")


# where the interpreter's tokenizer ends a line (a hundred-and-thirty-ninth attacker put `coding: utf-7` on a second
# line that only "\r" began: the verifier read one line, the interpreter two; accepted on 8 of 8 tasks)
_LINE_END = re.compile(r"\r\n|\r|\n")
# PEP 263's declaration, and a line that lets the next one hold it, as `tokenize.detect_encoding` reads them
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
_BLANK = re.compile(r"^[ \t\f]*(?:[#\r]|$)", re.ASCII)


def read_as_the_interpreter_reads(path: str, text: str) -> None:
    """Raise UngradableState unless the interpreter decodes `path`'s bytes into `text` itself: UTF-8, with no
    byte-order mark and no declared encoding but UTF-8. Everything the verifier reads of a graded file (the rule of
    `introspection`, its imports) reads `text`; a byte-order mark made the rule's parse fail (so it read nothing)
    where the interpreter drops the mark, and an ASCII file declaring `coding: utf-7` ran a device the interpreter
    decoded from one comment (a ninety-eighth attacker: accepted on 22 of 23 tasks). An honest fix needs neither."""
    if text.startswith("\ufeff"):
        raise UngradableState(f"{path} starts with a byte-order mark; graded code is UTF-8 without one")
    for line in _LINE_END.split(text, 2)[:2]:  # lines as the interpreter ends them: a lone "\r" ends one too
        found = _CODING.match(line)
        if found:
            try:
                name = codecs.lookup(found.group(1)).name
            except LookupError:
                name = found.group(1)
            if name != "utf-8":
                raise UngradableState(f"{path} declares the source encoding {found.group(1)[:40]!r}; graded code is "
                                      "read as UTF-8, as the verifier reads it")
            break
        if not _BLANK.match(line):
            break
    # and whatever else the interpreter's own reading of the bytes does: its parse of them is the parse of the text
    if _parsed(text.encode("utf-8", "surrogatepass")) != _parsed(text):
        raise UngradableState(f"{path}: the interpreter reads its bytes otherwise than as the UTF-8 text the verifier "
                              "reads")


def _parsed(source: str | bytes) -> str | None:
    """The syntax tree of `source` (bytes: decoded as the interpreter decodes a file), dumped; None if it does not
    parse."""
    try:
        return ast.dump(ast.parse(source))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def changed_modules_process_reads(sources: dict[str, str], start: dict[str, str | None], reference: dict[str, str],
                   own: frozenset[str]) -> list[str]:
    """`introspection.process_reads` of every changed or new module ("path phrase"). Raises UngradableState when
    reading them takes more than READ_BUDGET_S: the time is the agent's text's (bounded by check_code_budget, so
    only a machine far too slow gets here), and must not become the service's timeout, an infrastructure error."""
    began, out = time.monotonic(), []
    for path in sorted(sources):
        if sources[path] != start.get(path):
            out += [f"{path} {read}" for read in process_reads(sources[path], reference.get(path, ""), own, path=path,
                                                               sources=sources, references=reference)]
            if time.monotonic() - began > READ_BUDGET_S:
                raise UngradableState(f"the code to grade took more than {READ_BUDGET_S:g} s to read (at {path})")
    return out
