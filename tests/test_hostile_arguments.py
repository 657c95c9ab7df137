"""Issue 15, properties 9 and 10: an agent cannot crash its way out of a score.

Generated hostile calls go to every tool of every family through the real environments (SQLite for ops,
bubblewrap for code, Chromium for web): integers of any size, floats and NaN where integers are expected,
nesting 1000 deep, strings of 1 MB, NUL bytes, lone surrogates, path traversal, /proc, other schemes and hosts,
unknown fields, wrong types, tool names that do not exist and raw text that is not JSON. Hypothesis draws them,
derandomized (the same calls every run). Asserted for every call: nothing is raised out of `step`,
`state_hash` or `final_state`; a call that breaks the tool's declared schema or the shared caps gets an error
observation (and a call the shared validation refuses does break them); observations stay within the caps and
can be stored. A stored rollout of the worst calls stays within the documented bound.

Calls per run (printed by each test): ops about 3000, code about 1500 (state-poisoning commands included:
FIFOs, sockets, symlinks out, trees 1500 deep, names that are not UTF-8, 16 MB files), web about 250: each web
call drives the real browser (50-500 ms), so that test makes fewer.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymsmith.core import NO_TOOL_CALL, Action, ActionErrorKind, Observation
from gymsmith.families.ops.generator import generate_world
from gymsmith.envs.base import (
    MAX_ARGUMENT_DEPTH,
    MAX_ARGUMENTS_CHARS,
    MAX_ERROR_CHARS,
    MAX_OBSERVATION_CHARS,
    MAX_OBSERVATION_DATA_CHARS,
    unbounded_fields,
)
from gymsmith.registry import get_family

MB = 1 << 20


def _deep_list(n: int) -> list:
    v: list = []
    for _ in range(n):
        v = [v]
    return v


def _deep_dict(n: int) -> dict:
    v: dict = {}
    for _ in range(n):
        v = {"a": v}
    return v


class Big:
    """A large or deep value, drawn by name: hypothesis prints `<name>` instead of the value (whose repr would be
    megabytes long, or recurse 1000 levels); `expand` puts the value in before the call."""

    def __init__(self, name: str, value: Any):
        self.name, self.value = name, value

    def __repr__(self) -> str:
        return f"<{self.name}>"


def expand(value: Any) -> Any:
    if isinstance(value, Big):
        return value.value
    if isinstance(value, dict):
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    if isinstance(value, tuple):
        return tuple(expand(v) for v in value)
    return value


STRINGS = ["", " ", Big("1 MB of x", "x" * MB), "\x00", "a\x00b", "\ud800", "\udcff", "ok\udfff.py", "../../etc/passwd",
           "../" * 50 + "etc/shadow", "/etc/passwd", "/proc/self/environ", "/proc/self/mem", "/dev/zero",
           "/workspace/../etc", "file:///etc/passwd", "http://169.254.169.254/latest/meta-data/",
           "javascript:alert(document.cookie)", "data:text/html,<script>1</script>", "//evil.example/x",
           "/\\evil.example", "\\\\evil.example\\x", "/\t/evil.example", "/%0a/evil", "%00", "%2e%2e/%2e%2e/etc/passwd",
           "\u202egnp.exe", Big("1000 emoji", "\U0001F600" * 1000), "'; DROP TABLE orders; --", "{{7*7}}", "$(id)", "`id`", "\r\n\r\n",
           "a" * 5000, "-rf", "--help", "-p no:cacheprovider", ".", "..", "/", ".git/config", "fifo.py", "link.py",
           "deep", "s.sock", "big.py"]
NUMBERS = [0, -1, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**70, -(2**70), 10**400, 1.0, 1.5,
           -0.0, math.nan, math.inf, -math.inf, 1e308, 5e-324, True, False]
OTHERS = [None, [], {}, [1, 2], {"a": 1}, Big("a list 1000 deep", _deep_list(1000)),
          Big("an object 1000 deep", _deep_dict(1000)), Big("10000 items", ["x"] * 10_000),
          Big("5000 fields", {f"k{i}": i for i in range(5000)})]
RAW = ["", "   ", "{", "}", "[", "null", "true", "1", "1e999", "-1e999", "NaN", "Infinity", '{"a": NaN}', "9" * 5000,
       Big("[ x 100000", "[" * 100_000), Big('{"a": x 50000', '{"a":' * 50_000), Big("{ and 1 MB", "{" + "x" * MB),
       Big("a 1 MB path", '{"path": "' + "x" * MB + '"}'), "\x00", "\ud800",
       '{"\\ud800": 1}', "not json at all", "{'single': 'quotes'}", '{"a": 1}{"b": 2}', "\ufeff{}", "[1, 2, 3]",
       '{"id": 1' + "0" * 30 + "}", '{"x": ' + "[" * 9 + "]" * 9 + "}"]
BAD_TOOLS = ["", Big("a 1 MB name", "x" * MB), "submit\x00", "../submit", "get status", "\ud800", "SUBMIT", "teleport", NO_TOOL_CALL]

leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=40))
any_json = st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                        max_leaves=10)
hostile = st.one_of(st.sampled_from(STRINGS), st.sampled_from(NUMBERS), st.sampled_from(OTHERS), any_json)


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, drawn with the given weights (shrinking towards the first)."""
    return st.sampled_from([s for w, s in choices for _ in range(w)]).flatmap(lambda s: s)


def plausible(schema: dict[str, Any], values: dict[str, list[Any]], name: str) -> st.SearchStrategy:
    """Values the schema accepts (mostly), so that calls get past validation into the tools."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 2**31 - 1)
        known = [v for v in values.get(name, []) if isinstance(v, int)]
        return st.one_of(st.integers(lo, min(hi, lo + 60)), st.sampled_from([lo, hi] + known), st.sampled_from(known or [lo]))
    if kind == "string":
        return st.one_of(st.sampled_from(values.get(name) or ["x"]), st.text(max_size=30))
    if kind == "array":
        return st.lists(plausible(schema.get("items", {}), values, name), max_size=3)
    if kind == "object":
        return st.dictionaries(st.sampled_from(values.get(name) or ["k"]),
                               st.one_of(st.integers(-5, 100), st.text(max_size=10)), max_size=3)
    return hostile


def arguments_for(spec, values: dict[str, list[Any]]) -> st.SearchStrategy:
    props = spec.parameters.get("properties", {})
    value = {k: weighted((4, plausible(s, values, k)), (1, hostile)) for k, s in props.items()}
    required = set(spec.parameters.get("required", []))
    complete = st.fixed_dictionaries({k: v for k, v in value.items() if k in required},
                                     optional={k: v for k, v in value.items() if k not in required})
    objects = weighted((6, complete), (1, st.fixed_dictionaries({}, optional=value)))
    with_unknown = st.tuples(objects, st.text(min_size=1, max_size=20), hostile).map(lambda t: {**t[0], t[1]: t[2]})
    as_text = objects.map(lambda o: json.dumps(o) if _plain_json(o) and _depth(o) <= 3 else o)  # a model's raw JSON
    return weighted((10, objects), (2, as_text), (2, with_unknown), (2, st.sampled_from(RAW)), (1, st.text(max_size=60)),
                    (1, hostile))


def calls_for(tools, values: dict[str, list[Any]], weights: dict[str, int] | None = None,
              special: dict[str, st.SearchStrategy] | None = None) -> st.SearchStrategy:
    """Calls of every tool (`weights` per tool, default 2; `special`: a tool's own argument strategy)."""
    special = special or {}
    by_tool = [((weights or {}).get(t.name, 2),
                st.tuples(st.just(t.name), special[t.name] if t.name in special else arguments_for(t, values))) for t in tools]
    bad = st.tuples(st.sampled_from(BAD_TOOLS), st.one_of(st.sampled_from(RAW), hostile))
    return weighted(*by_tool, (1, bad))


def action(tool: str, arguments: Any) -> Action:
    """The call as an agent would make it: a validated Action, or (what a buggy agent may hand over) an unvalidated one."""
    try:
        return Action(tool=tool, arguments=arguments)
    except Exception:  # noqa: BLE001 - not a dict or text: bypass validation, as a buggy Python agent could
        return Action.model_construct(tool=tool, arguments=arguments, call_id=None)


# -- what must be refused: an oracle written apart from envs.base -----------------------------------
def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            deepest = max(deepest, d)
            if d > MAX_ARGUMENT_DEPTH:
                return d
            stack += [(x, d + 1) for x in (v.values() if isinstance(v, dict) else v)]
    return deepest


def _plain_json(value: Any) -> bool:
    """JSON the caps allow: finite numbers, integers within +-2**63, valid Unicode, string keys."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int):
            if abs(v) >= 2**63:
                return False
        elif isinstance(v, float):
            if not math.isfinite(v):
                return False
        elif isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                return False
            stack += list(v.keys()) + list(v.values())
        elif isinstance(v, (list, tuple)):
            stack += list(v)
        else:
            return False
    return True


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def must_refuse(specs: dict[str, Any], tool: str, arguments: Any) -> bool | None:
    """True when the call breaks the declared schema or the caps (it must get an error observation), False when
    it does not, None when it is too large to call either way (the size estimate may go either side)."""
    if tool not in specs:
        return True
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            return True
        try:
            arguments = json.loads(arguments, parse_constant=_no_constant) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return True
    if not isinstance(arguments, dict) or _depth(arguments) > MAX_ARGUMENT_DEPTH or not _plain_json(arguments):
        return True
    if jsonschema.Draft202012Validator(specs[tool].parameters).is_valid(arguments) is False:
        return True
    if len(json.dumps(arguments)) > MAX_ARGUMENTS_CHARS // 2:
        return None
    return False


# -- the harness: one environment, many calls ----------------------------------------------------------
class Harness:
    """Runs calls on one environment of a family, resetting when an episode ends, checking every result."""

    def __init__(self, family: str, task, *, after_reset=None, semantic=None):
        self.family, self.task = family, task
        self.env = get_family(family).make_env()
        self.specs = {t.name: t for t in task.tools}
        self.after_reset, self.semantic = after_reset, semantic
        self.calls = self.refused = self.tool_errors = 0
        self.kinds: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.ran: dict[str, int] = {}  # calls that got past every check and did something, by tool
        self.reset()

    def reset(self) -> None:
        check_observation(self.env.reset(self.task, seed=0))
        if self.after_reset:
            self.after_reset(self.env)

    def call(self, tool: str, arguments: Any) -> None:
        tool, arguments = expand(tool), expand(arguments)
        if self.env.done:
            self.reset()
        expected = must_refuse(self.specs, tool, arguments)
        t0 = time.perf_counter()
        result = self.env.step(action(tool, arguments))  # must not raise
        self.seconds[tool] = self.seconds.get(tool, 0.0) + time.perf_counter() - t0
        self.calls += 1
        obs = result.observation
        check_observation(obs)
        kind = obs.error.kind.value if obs.error else "ok"
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if obs.error is None:
            self.ran[tool] = self.ran.get(tool, 0) + 1
        if obs.error is not None:
            self.refused += 1
            self.tool_errors += obs.error.kind is ActionErrorKind.TOOL_ERROR
        if expected:
            assert obs.error is not None, f"{tool} {str(arguments)[:200]!r} was not refused: {obs.text[:300]}"
        if result.info.get("invalid_action"):
            assert expected is not False, f"{tool} {str(arguments)[:200]!r} was refused though valid: {obs.text[:300]}"
        if self.semantic and expected is False:  # a valid call: the family's own rules about what it may do
            parsed = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else arguments
            self.semantic(self.env, tool, parsed or {}, obs)

    def check_state(self) -> None:
        t0 = time.perf_counter()
        self._check_state()
        self.seconds["(final state)"] = self.seconds.get("(final state)", 0.0) + time.perf_counter() - t0

    def _check_state(self) -> None:
        digest = self.env.state_hash()
        with tempfile.TemporaryDirectory() as tmp:
            final = self.env.final_state(Path(tmp))
            assert Path(final.path).exists() and final.digest == digest
            assert final.diff is None or len(final.diff) < 250_000

    def close(self) -> None:
        self.env.close()


def check_observation(obs: Observation) -> None:
    assert len(obs.text) <= MAX_OBSERVATION_CHARS + 100
    if obs.error is not None:
        assert len(obs.error.message) <= MAX_ERROR_CHARS + 100
    if obs.data is not None:
        assert len(json.dumps(obs.data, ensure_ascii=False, default=str)) <= MAX_OBSERVATION_DATA_CHARS
    obs.model_dump_json().encode("utf-8")  # storable: valid Unicode, JSON


def fuzz(harness: Harness, strategy, *, examples: int, per_example: int, state_every: int = 1) -> None:
    """`examples` lists of up to `per_example` calls; the state is hashed and snapshot after every
    `state_every`-th list (and after the last)."""
    lists = iter(range(1 << 30))

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(strategy, min_size=1, max_size=per_example))
    def run(calls):
        for tool, arguments in calls:
            harness.call(tool, arguments)
        if next(lists) % state_every == 0:
            harness.check_state()

    run()
    harness.check_state()
    print(f"{harness.family}: {harness.calls} hostile calls, {harness.refused} error observations "
          f"({harness.tool_errors} tool_error), 0 exceptions; by outcome {dict(sorted(harness.kinds.items()))}; "
          f"effective calls by tool {dict(sorted(harness.ran.items()))}; "
          f"seconds by tool {({k: round(v, 1) for k, v in sorted(harness.seconds.items(), key=lambda kv: -kv[1])[:6]})}")


# -- every tool schema declares its bounds -------------------------------------------------------------
@pytest.mark.parametrize("family", ["ops", "code", "web"])
def test_every_tool_schema_declares_its_bounds(family):
    task = get_family(family).generate(1, difficulty=0.3)
    assert {t.name: unbounded_fields(t.parameters) for t in task.tools} == {t.name: [] for t in task.tools}


# -- ops -----------------------------------------------------------------------------------------------
def test_ops_tools_survive_hostile_arguments(ops):
    values = {"reason": ["duplicate charge", "x" * 200, "abc"], "note": ["done"],
              "filters": ["id", "status", "status__contains", "due_day__lte", "total_cents__gte", "name", "x__y", "id__nope"]}
    for kind in ("fulfil", "billing", "staff", "resource"):  # the ids the tasks' own solutions use
        for step in generate_world(3, ops.generate(3, kind=kind, difficulty=0.6).knobs).witness:
            for name, v in step["arguments"].items():
                values.setdefault(name, []).append(v)
    task = ops.generate(3, kind="fulfil", difficulty=0.6, fidelity=0.0)
    harness = Harness("ops", task)
    try:
        fuzz(harness, calls_for(task.tools, values), examples=600, per_example=12)
        assert harness.calls >= 2000
    finally:
        harness.close()


# -- code ----------------------------------------------------------------------------------------------
POISON = [  # commands that leave a state the other tools and the final state must survive
    "mkfifo fifo.py", "ln -sf /etc/passwd link.py", "ln -sfn / rootlink",
    "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('s.sock')\"",
    "python3 -c \"import os\nfor i in range(1500): os.mkdir('d'); os.chdir('d')\"",
    "mv d deep 2>/dev/null; true", "touch \"$(printf 'bad\\377name.py')\"",
    "head -c 3000000 /dev/zero | tr '\\0' 'a' > big.py", "printf 'x\\0y' > nul.py", "chmod 000 tests; true",
    "yes | head -c 5000000", "for i in $(seq 300); do touch f$i; done", "sleep 0.2 &", "kill -9 -1",
    "ln -s loop loop", "mkdir -p a/b && ln -s ../.. a/b/up", "echo \"$(printf 'A%.0s' $(seq 70000))\"",
]
DIFFS = ["--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n", "diff --git a/../../etc/passwd b/../../etc/passwd\n--- a/../../etc/passwd\n"
         "+++ b/../../etc/passwd\n@@ -1 +1 @@\n-root\n+owned\n", "GIT binary patch\nliteral 0\nHcmV?d00001\n",
         Big("a 150k line", "--- /dev/null\n+++ b/evil.py\n@@ -0,0 +1 @@\n+" + "x" * 150_000 + "\n"),
         "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"]


def _code_semantic(env, tool, arguments, obs) -> None:
    if tool in ("read_file", "write_file", "replace_text", "list_files") and isinstance(arguments, dict):
        path = arguments.get("path", ".")
        if isinstance(path, str) and (path.startswith("/") and not path.startswith("/workspace") or "\x00" in path
                                      or Path(path).parts[:1] == ("..",)):
            assert obs.error is not None, f"{tool} on {path[:80]!r} was not refused"


def test_code_tools_survive_hostile_arguments():
    family = get_family("code")
    task = family.generate(5, difficulty=0.3)
    modules = task.metadata["modules"]
    paths = [*modules, "tests/test_x.py", "new.py", "fifo.py", "link.py", "rootlink/etc/passwd", "s.sock", "deep",
             "big.py", "nul.py", "tests", "a/b/up/etc/passwd", "loop", ".git/HEAD", "/workspace/" + modules[0]]
    values = {"path": paths, "command": POISON + ["ls -la", "cat link.py", "git status"], "timeout_s": [1, 2, 5],
              "diff": DIFFS, "content": ["x = 1\n", "\x00" * 10, Big("150k of y", "y" * 150_000)], "old": ["def ", "x"], "new": ["", "z"],
              "note": ["done"]}
    canary = Path(tempfile.gettempdir()) / "gymsmith-hostile-canary.txt"
    canary.unlink(missing_ok=True)
    values["path"].append(f"../../../../../../..{canary}")
    harness = Harness("code", task, semantic=_code_semantic)
    try:
        # run_tests runs pytest (a second a call, more on a busy machine): drawn rarely, and mostly with an option
        # that is refused; run_command, which poisons the state, often
        weights = {"run_tests": 1, "run_command": 6, "write_file": 3, "read_file": 3}
        ids = st.sampled_from(["../../etc/passwd", "tests/none.py::t[", "x" * 1024, "tests", "\u202e.py", "a b"])
        refused = st.lists(weighted((3, st.sampled_from(["-x", "--co", "-p no:x"])), (1, st.just("a\x00b")), (2, ids)),
                           min_size=1, max_size=3).map(lambda t: t if any(x.startswith("-") or "\x00" in x for x in t) else ["-x", *t])
        run_tests = weighted((9, st.fixed_dictionaries({"tests": refused})),
                             (1, st.fixed_dictionaries({}, optional={"tests": st.lists(ids, max_size=2)})),
                             (2, st.one_of(st.sampled_from(RAW), hostile)))
        fuzz(harness, calls_for(task.tools, values, weights, {"run_tests": run_tests}), examples=260, per_example=10,
             state_every=3)
        assert harness.calls >= 1000
        assert not canary.exists()  # nothing was written outside the repository
    finally:
        harness.close()


# -- web -----------------------------------------------------------------------------------------------
def _log_in(env) -> None:
    by_label = {e["label"]: e["id"] for e in env.elements.values()}
    shown = env.server.site.skin.shown  # the words of this task's site (web/skin.py)
    env.step(Action(tool="type", arguments={"element": by_label[shown("Username")], "text": "support"}))
    env.step(Action(tool="type", arguments={"element": by_label[shown("Password")], "text": "desk-2291"}))
    env.step(Action(tool="click", arguments={"element": by_label[shown("Log in")]}))


def _web_semantic(env, tool, arguments, obs) -> None:
    if tool == "goto":
        path = arguments["path"]
        parts = urlsplit(path.replace("\\", "/"))
        if parts.scheme or parts.netloc or not path.startswith("/") or path.startswith("//") or "\\" in path:
            assert obs.error is not None, f"goto {path[:80]!r} was not refused"
    assert urlsplit(env.page.url).netloc in (urlsplit(env.server.origin).netloc, "chromewebdata"), env.page.url


def test_web_tools_survive_hostile_arguments():
    family = get_family("web")
    task = family.generate(2, difficulty=0.5)
    values = {"path": ["/orders", "/orders?page=2", "/tickets", "/customers", "/orders/1", "/logout", "/",
                       "/orders?page=99999999999999999999", "/orders?page=-1", "/login?next=//evil.example",
                       "/orders/1/address?line1=a b"],
              "text": ["hello", "x" * 4000, "\x00", "<script>alert(1)</script>", "'; --"],
              "option": ["United Kingdom", "x" * 500], "note": ["done"]}
    harness = Harness("web", task, after_reset=_log_in, semantic=_web_semantic)
    try:
        fuzz(harness, calls_for(task.tools, values, {"submit": 1}), examples=80, per_example=8)
        assert harness.calls >= 200
    finally:
        harness.close()
