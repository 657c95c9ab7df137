"""Call checks: the code under test computes values, the verifier decides. Real bubblewrap sandboxes.

Each test attacks one property of docs/verifier.md from inside the code under test (or checks the
compiler and the decoder directly): expected values never reach the sandbox, results must be plain data
of the reference's exact types, the channel cannot be forged, and a malformed channel fails the tests.
"""

from __future__ import annotations

import json

import pytest

from gymsmith.verifier.calltests import CallRunner, UnsupportedTest, compile_suite, judge_run, records_by_nodeid
from gymsmith.verifier.calltests.wire import StreamStatus, read_stream
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome

MODULE = '''
def double(x):
    return 2 * x

def pair(a, b):
    return [a, b]

def check(n):
    if n < 0:
        raise ValueError("negative")
    return n

class Box:
    def __init__(self):
        self.items = []
    def put(self, x):
        self.items.append(x)
    def __len__(self):
        return len(self.items)
'''
TESTS = '''import pytest

from mod import Box, check, double, pair

SECRET_INPUT = 20


def test_double():
    assert double(21) == 42


def test_double_of_constant():
    assert double(SECRET_INPUT) == 40 and double(0) == 0


def test_pair():
    assert pair(1, "x") == [1, "x"]


def test_float():
    assert double(1.25) == pytest.approx(2.5)


def test_raises():
    with pytest.raises(ValueError):
        check(-1)
    assert check(3) == 3


def test_box():
    b = Box()
    b.put(1)
    b.put(2)
    assert len(b) == 2


def test_not_truthy():
    assert not check(0)


def test_canary():
    assert 0
'''
SUITE = compile_suite(TESTS, "tests/test_mod.py")


@pytest.fixture(scope="module")
def runner():
    with CallRunner() as r:
        yield r


@pytest.fixture(scope="module")
def reference(runner):
    return records_by_nodeid([SUITE], runner.observe({"mod.py": MODULE}, [SUITE]))


def verdicts(runner, reference, source):
    return judge_run([SUITE], runner.observe({"mod.py": source}, [SUITE]), reference)


def passed(v):
    return sorted(n.split("::")[1] for n, o in v.run.outcomes.items() if o is TestOutcome.PASSED)


ALL_BUT_CANARY = sorted(t.name for t in SUITE.tests if t.name != "test_canary")


def test_the_driver_holds_inputs_but_no_expected_value():
    assert "42" not in SUITE.driver and "40" not in SUITE.driver and "2.5" not in SUITE.driver
    assert "double(21)" in SUITE.driver and "SECRET_INPUT = 20" in SUITE.driver  # inputs travel, as they must
    assert "==" not in SUITE.driver and "assert" not in SUITE.driver and "pytest" not in SUITE.driver


def test_the_reference_passes_everything_but_the_canary(runner, reference):
    v = verdicts(runner, reference, MODULE)
    assert v.run.status is RunStatus.COMPLETED and passed(v) == ALL_BUT_CANARY


def test_a_wrong_value_fails_only_its_tests(runner, reference):
    v = verdicts(runner, reference, MODULE.replace("return 2 * x", "return 2 * x + (x == 21)"))
    assert passed(v) == [t for t in ALL_BUT_CANARY if t != "test_double"]


def test_objects_with_forged_equality_are_not_results(runner, reference):
    forged = MODULE + '''
class Yes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

def double(x):
    return Yes(0)

def pair(a, b):
    class L(list):
        def __eq__(self, other):
            return True
    return L()
'''
    v = verdicts(runner, reference, forged)
    assert {"test_double", "test_double_of_constant", "test_pair", "test_float"}.isdisjoint(passed(v))
    assert "opaque" in v.reasons["tests/test_mod.py::test_double"]


def test_exact_types_bool_is_not_int_and_tuple_is_not_list(runner, reference):
    v = verdicts(runner, reference, MODULE.replace("return [a, b]", "return (a, b)").replace("return n\n", "return int(n)\n"))
    assert "test_pair" not in passed(v) and "test_raises" in passed(v)
    v = verdicts(runner, reference, MODULE.replace("return len(self.items)", "return len(self.items) == 2 and 2"))
    assert "test_box" in passed(v)  # len() itself returns an exact int whatever __len__ returned
    v = verdicts(runner, reference, MODULE.replace("    return n\n", "    return n if n else False\n"))
    assert "test_not_truthy" not in passed(v)  # False where the reference returns 0


def test_forging_the_channel_fails_the_group(runner, reference):
    forged = MODULE + '''
import os
for fd in range(3, 64):
    try:
        os.write(fd, b'{"test": 0}\\n{"slot": 0, "v": {"i": "42"}}\\n{"done": 0, "ok": true}\\n')
    except OSError:
        pass
'''
    v = verdicts(runner, reference, forged)
    # the result channel is the driver's, in a process the code under test never runs in: what it can write on is
    # only its own link to the driver, and a message that is not the protocol breaks the link
    assert passed(v) == [] and v.run.status is RunStatus.CRASHED
    assert v.reasons["tests/test_mod.py::test_double"] == "the code under test failed to import (LinkBroken)"


def test_exiting_early_or_hanging_fails_the_rest(runner, reference):
    v = verdicts(runner, reference, MODULE.replace("    return [a, b]", "    import os; os._exit(0)"))
    assert passed(v) == ["test_double", "test_double_of_constant"] and v.run.status is RunStatus.CRASHED
    assert "raised where the reference gives" in v.reasons["tests/test_mod.py::test_pair"]
    v = judge_run([SUITE], runner.observe({"mod.py": MODULE.replace("    return [a, b]", "    while True: pass")}, [SUITE],
                                          deadline_s=3, group_timeout_s=1), reference)
    assert passed(v) == ["test_double", "test_double_of_constant"] and v.run.status is RunStatus.TIMEOUT


def test_flooding_the_channel_is_bounded(runner, reference):
    flood = MODULE + "\nimport os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'[' * (1 << 20))\n    except OSError:\n        pass\n"
    v = verdicts(runner, reference, flood)
    assert passed(v) == []


def test_the_code_under_test_cannot_kill_the_server(runner, reference):
    v = verdicts(runner, reference, MODULE + "\nimport os\nfor pid in (1, os.getppid()):\n    try:\n        os.kill(pid, 9)\n    except OSError:\n        pass\n")
    assert passed(v) == ALL_BUT_CANARY
    assert passed(verdicts(runner, reference, MODULE)) == ALL_BUT_CANARY


def test_an_import_error_fails_every_test(runner, reference):
    v = verdicts(runner, reference, MODULE + "\nraise SystemExit(0)\n")
    assert passed(v) == [] and "failed to import" in v.reasons["tests/test_mod.py::test_double"]


def test_decisions_beside_the_code_under_test_are_refused_by_the_compiler():
    for body in ("assert all(double(n) == 2 * n for n in range(3))", "assert any([double(1) == 2])",
                 "assert isinstance(double(1), int)", "x = double(1)\n    if x == 2:\n        assert x",
                 "for n in range(3):\n        assert double(n) == 2 * n"):
        with pytest.raises(UnsupportedTest):
            compile_suite(f"from mod import double\n\ndef test_x():\n    {body}\n", "tests/test_x.py")


def test_the_decoder_rejects_anything_but_the_protocol():
    ok = b'{"test": 0}\n{"slot": 0, "v": {"l": [{"i": "1"}, "a", null]}}\n{"done": 0, "ok": true}\n'
    s = read_stream(ok, [1])
    assert s.status is StreamStatus.OK and s.tests[0].slots == [[1, "a", None]]
    for bad in (b'{"test": 0}\n{"slot": 0, "v": 1}\n', b'{"test": 0}\n{"slot": 1, "v": null}\n', b'{"test": 1}\n',
                b'{"test": 0}\n{"done": 0, "ok": true}\n', b'{"test": 0}\n{"slot": 0, "v": {"i": "' + b"9" * 5000 + b'"}}\n',
                b'[' * 100000, b'\xff\n', b'{"test": 0}\n{"slot": 0, "v": {"q": []}}\n',
                b'{"test": 0}\n{"slot": 0, "v": {"s": [{"l": []}]}}\n'):
        assert read_stream(bad, [1]).status is StreamStatus.MALFORMED, bad[:60]


LEAVE_BEHIND = MODULE + '''
import ctypes, os
for d in ("/tmp", "/workspace", "/dev", "/dev/shm"):
    try:
        open(os.path.join(d, "answers"), "w").write("42")
    except OSError:
        pass
for name in ("null", "urandom"):
    try:
        os.unlink("/dev/" + name)
    except OSError:
        pass
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmget(4242, 4096, 0o1666)  # a SysV shared memory segment, key 4242, IPC_CREAT
for name in ("zero", "full"):  # the host's device nodes: a time set on one would reach every later job
    try:
        os.utime("/dev/" + name, (424242, 424242))
    except OSError:
        pass
try:  # the server outlives the job: a setting of its process would reach every later job
    open("/proc/1/oom_score_adj", "w").write("777")
except OSError:
    pass
'''
LOOK = MODULE.replace("    return 2 * x", """    import ctypes, os
    found = [d for d in ("/tmp", "/workspace", "/dev", "/dev/shm") if os.path.exists(os.path.join(d, "answers"))]
    found += ["shm"] if ctypes.CDLL(None).shmget(4242, 0, 0) >= 0 else []
    found += [] if os.path.exists("/dev/null") else ["no /dev/null"]
    found += [n for n in ("zero", "full") if os.stat("/dev/" + n).st_mtime == 424242]
    found += ["server's process"] if os.path.exists("/proc/1") else []
    try:  # a memfd's inode number is the next of a counter for the whole host, which a job could move
        os.close(os.memfd_create("x"))
        found.append("memfd")
    except OSError:
        pass
    return 2 * x + len(found)""")


def test_nothing_one_run_leaves_reaches_the_next(runner, reference):
    """Rollouts verified one after another by the same server (e.g. a GRPO group) cannot pass each other
    answers, or sabotage each other, through files, devices (their nodes' timestamps included: they are the
    host's), shared memory, or the server's own process (its /proc settings, which a thirtieth attacker used)."""
    verdicts(runner, reference, LEAVE_BEHIND)
    v = verdicts(runner, reference, LOOK)
    assert "test_double" in passed(v), v.reasons["tests/test_mod.py::test_double"]
    assert passed(verdicts(runner, reference, MODULE)) == ALL_BUT_CANARY


INODES = """
import os
def f():
    return [os.stat(".").st_ino, os.stat(os.path.dirname(os.getcwd())).st_ino, os.stat(__file__).st_ino,
            os.path.exists("/jobs/1")]
"""


def test_a_job_sees_no_count_of_the_files_earlier_jobs_wrote(runner):
    """Inode numbers on a shared file system count every file made there before: a thirty-fourth attacker's correct
    rollout wrote as many empty modules as the index of the repair, and a later rollout that kept the bug read its
    job folder's inode number against /jobs' and applied that repair (accepted). A job's files are its own copy on
    a file system of its own (`pid1.private_world`), and /jobs is hidden."""
    suite = compile_suite("from m import f\n\ndef test_a():\n    assert f() == 0\n", "tests/test_m.py")

    def look(extra=0):
        observed = runner.observe({"m.py": INODES, **{f"zz_{i}.py": "" for i in range(extra)}}, [suite])
        return observed.groups[0].stream.tests[0].slots

    first = look()
    look(1000)
    assert look() == first and first[0][3] is False, first


NAMESPACES = """
import ctypes, os
def f():
    libc = ctypes.CDLL(None, use_errno=True)
    out = []
    for flags in (0x10000000, 0x10000000 | 0x40000000, 0x40000000):  # user; user and net; net alone
        out.append(ctypes.get_errno() if libc.unshare(flags) != 0 else 0)
    pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER | SIGCHLD)
    if pid == 0:
        os._exit(0)
    out.append(ctypes.get_errno() if pid < 0 else 0)
    child = os.fork()  # an ordinary fork still works
    if child == 0:
        os._exit(0)
    out.append(child > 0)
    return out
"""


def test_a_job_cannot_make_a_namespace_of_its_own(runner):
    """A user namespace gives its maker a network namespace with a loopback it may bring up, whose ephemeral ports
    come from a perturbation table the whole host shares: a thirty-sixth attacker wrote it from one sandbox and read
    it back from a job within its ~10 s window. After pid1 made the job's world, it can make no user namespace
    (`pid1.forbid_user_namespaces`), and without capabilities no other namespace either."""
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the clone call number in the probe is x86_64's")
    suite = compile_suite("from m import f\n\ndef test_a():\n    assert f() == 0\n", "tests/test_m.py")
    slots = runner.observe({"m.py": NAMESPACES}, [suite]).groups[0].stream.tests[0].slots
    assert slots == [[1, 1, 1, 1, True]], slots  # EPERM each time; the fork made a child


def test_values_built_to_collide_in_hash_tables_are_refused_in_linear_time():
    """Ints that all hash alike (multiples of 2**61 - 1) would make building the set quadratic on the trusted side:
    with 40,000 of them, about half a minute; with 125,000, minutes — a verifier timeout, i.e. an escape to an
    infrastructure error. Streams are also capped at 50,000 values."""
    import time as clock

    m = (1 << 61) - 1
    for tag, body in (("s", [{"i": str(m * k)} for k in range(1, 40_000)]),
                      ("d", [[{"i": str(m * k)}, None] for k in range(1, 20_000)]),
                      ("s", [{"t": [{"i": str(m * k)}]} for k in range(1, 20_000)])):
        data = ('{"test": 0}\n' + json.dumps({"slot": 0, "v": {tag: body}}) + '\n{"done": 0, "ok": true}\n').encode()
        started = clock.perf_counter()
        stream = read_stream(data, [1])
        assert stream.status is StreamStatus.MALFORMED and "hash" in stream.reason
        assert clock.perf_counter() - started < 5  # the first took ~25 s before
    many = ('{"test": 0}\n' + json.dumps({"slot": 0, "v": {"l": [{"i": "1"}] * 60_000}}) + '\n{"done": 0, "ok": true}\n')
    assert read_stream(many.encode(), [1]).reason == "too many values"
    ok = ('{"test": 0}\n' + json.dumps({"slot": 0, "v": {"s": [{"i": str(k)} for k in range(40_000)]}}) + '\n{"done": 0, "ok": true}\n')
    assert read_stream(ok.encode(), [1]).status is StreamStatus.OK


# Reading one's own memory in a job, which has no /proc (no maps, no mem): the mapped pages are found by asking
# madvise about pages next to the address of every object, function and stack frame the code can name.
MEMORY = '''
def _memory_chunks():
    import ctypes, gc, os
    if os.path.exists("/proc/self/maps"):
        raise AssertionError("the job can read its maps: not the world these tests are about")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    page = os.sysconf("SC_PAGE_SIZE")
    mapped = lambda a: a > 0 and libc.madvise(a, page, 0) == 0  # MADV_NORMAL: ENOMEM where nothing is mapped
    seeds = {id(o) & ~(page - 1) for o in gc.get_objects()}
    seeds |= {ctypes.cast(libc.madvise, ctypes.c_void_p).value & ~(page - 1),
              ctypes.addressof(ctypes.c_int()) & ~(page - 1)}
    seen = set()
    for start in sorted(seeds):
        if start in seen or not mapped(start):
            continue
        lo = hi = start
        while mapped(lo - page) and lo - page not in seen and start - lo < (64 << 20):
            lo -= page
        while mapped(hi) and hi not in seen and hi - start < (64 << 20):
            hi += page
        seen.update(range(lo, hi, page))
        yield ctypes.string_at(lo, hi - lo)
'''
SCAN = MEMORY + '''
def double(x):
    import base64
    wanted = [MARK.encode(), base64.b64encode(('{"slot":0,"v":"' + MARK).encode())[:40]]
    return 2 * x + sum(chunk.count(w) for chunk in _memory_chunks() for w in wanted)
'''


def test_no_result_of_an_earlier_job_is_in_the_memory_a_driver_starts_with(runner, reference):
    """Driver processes are forked from the server: if results passed through its memory, a later rollout's code
    could read the previous job's stream (the reference's, or a correct sample's) and replay it (a red-team
    agent did, accepted at 0.90). The server splices results in the kernel, so they never do. The scanner
    counts the marker in its own memory (no /proc there: it finds its mappings around every address it can name);
    the count must not grow when the job before it emitted the marker, and the scanner must see the marker it
    holds itself (the scan reads memory)."""
    import secrets

    mark = "R" + secrets.token_hex(16)
    scanner = MODULE + f"\nMARK = '{mark[:10]}' + '{mark[10:]}'\n" + SCAN
    leaker = MODULE.replace("    return [a, b]", f"    return [a, b] if a != 1 else ['{mark[:10]}' + '{mark[10:]}', b]")

    def count() -> int:
        record = runner.observe({"mod.py": scanner}, [SUITE]).groups[0].stream.tests[0]
        return record.slots[0] - 42

    runner.observe({"mod.py": MODULE}, [SUITE])
    before = count()
    assert before >= 1  # its own MARK (both halves joined at import) is in memory: the scan reads what it finds
    runner.observe({"mod.py": leaker}, [SUITE])  # its stream carries the marker
    assert count() == before


def test_a_comparison_with_no_value_the_verifier_holds_is_refused():
    """`actual == expected` with `expected` computed by the test: both sides would be observed beside the agent's
    code, which can report one side's value for the other (a red-team agent did, on real packages' suites)."""
    for body in ("expected = [double(1)]\n    expected = [2]\n    assert pair(1, 1)[:1] == expected",
                 "assert double(3) == double(1) + double(2)", "assert sorted([double(2)]) == [double(2)]",
                 "assert len(pair(1, 2)) == len([double(0), 1])", "assert double(1) in pair(2, 3) and double(0) == 0"):
        with pytest.raises(UnsupportedTest, match="no expected value the verifier holds"):
            compile_suite(f"from mod import double, pair\n\ndef test_x():\n    {body}\n", "tests/test_x.py")
    kept = compile_suite("from mod import double\n\nN = 3\n\ndef test_x():\n    assert double(N) == 6\n    assert double(1)\n",
                         "tests/test_x.py")
    assert [t.name for t in kept.tests] == ["test_x"]


def test_a_forged_exception_must_have_the_references_builtin_classes(runner, reference):
    """The code under test chooses what it raises: an exception class deriving from ValueError, KeyError and
    TypeError at once does not pass a `raises(ValueError)` test, because the reference raised a ValueError and
    nothing else builtin."""
    forged = "class Forged(ValueError, KeyError, TypeError):\n    pass\n"
    broken = forged + MODULE.replace('raise ValueError("negative")', 'raise Forged("n")')
    v = verdicts(runner, reference, broken)
    assert "test_raises" not in passed(v)
    assert "builtin classes" in v.reasons["tests/test_mod.py::test_raises"], v.reasons["tests/test_mod.py::test_raises"]
    honest = MODULE.replace('raise ValueError("negative")', "raise type('Negative', (ValueError,), {})('n')")
    assert "test_raises" in passed(verdicts(runner, reference, honest))  # a subclass of the same builtin still passes


def test_the_code_under_test_cannot_reach_the_tests_statements(runner, reference):
    """The driver-swap forge (docs/verifier.md, property 4): a payload that looks for the driver — in its callers'
    frames when the test calls it, in every object of its process, in the modules it can import — and replaces the
    test function with one that reports the expected value, with `double` left broken. The test's statements run in
    another process, so there is nothing to find and the broken value is what the test observes."""
    payload = MODULE.replace("    return 2 * x", "    _swap()\n    return 2 * x + 1") + '''
def _swap():
    import gc, sys
    def forged():
        namespace["_gymsmith_observe"](0, lambda: 42)
    found = []
    frame = sys._getframe()
    while frame is not None:
        found.append(frame.f_globals)
        frame = frame.f_back
    found += [o for o in gc.get_objects() if type(o) is dict]
    found += [vars(m) for m in list(sys.modules.values()) if m is not None]
    for namespace in found:
        if "_gymsmith_observe" in namespace or "test_double" in namespace:
            namespace["test_double"] = forged
            open("/tmp/found", "w").write("yes")
'''
    v = verdicts(runner, reference, payload)
    assert "test_double" not in passed(v)
    assert v.reasons["tests/test_mod.py::test_double"] == "a check failed"
    assert "test_pair" in passed(v)  # the package's process runs on: only the broken function fails


def test_the_package_process_memory_holds_no_test(runner, reference):
    """The package's process starts as a fresh interpreter: nothing of the driver (its statements, its module
    constants' names, the observer) is anywhere in its memory. `double` scans the memory of its own process (found
    around every address it can name: a job has no /proc) and, if it finds a trace of the driver, answers wrongly;
    the test passing says it found none."""
    scan = MODULE.replace("    return 2 * x", "    return 2 * x + _seen()") + MEMORY + '''
def _seen():
    found = 0
    for chunk in _memory_chunks():
        # the markers are never built whole here (that would put them in this memory): a head, then its tail
        for head, tail in ((b"SECRET_", b"INP"), (b"_gymsmith_", b"obs")):
            at = chunk.find(head)
            while at >= 0:
                found += chunk[at + len(head):at + len(head) + 3] + b"!" == tail + b"!"
                at = chunk.find(head, at + 1)
    return found
'''
    v = verdicts(runner, reference, scan)
    assert "test_double" in passed(v) and "test_double_of_constant" in passed(v), v.reasons


def test_a_test_that_expects_its_own_input_back_proves_no_progress():
    """A red-team agent had a broken `to_roman` remember what it returned and `from_roman` hand back the number it
    came from: round trips, invariants and defaults expect back an input the observed call receives, so the code
    can pass them without computing anything (template tasks count them as no progress)."""
    from gymsmith.verifier.calltests.guessing import echoes_an_input

    def test(body, header=""):
        source = f"from m import f, g\n{header}\n\ndef test_x():\n    {body}\n"
        return compile_suite(source, "tests/test_x.py").tests[0]

    for body in ("assert f(g('abc')) == 'abc'", "assert sum(f(1001, 7)) == 1001", "assert f('x', 7) == 7",
                 "assert [f(g(n)) for n in range(1, 40)] == list(range(1, 40))", "assert f(b'ab') == 'ab'",
                 "text = 'aaab'\n    assert f(g(text)) == 'aaab'", "assert [f(w) for w in WORDS] == WORDS"):
        assert echoes_an_input(test(body, "WORDS = ['a', 'b']")), body
    for body in ("assert f([5, 1, 3]) == 3", "assert f(g('abc')) == 'cba'", "assert f(21) == 42",
                 "c = g(2)\n    c.put('a', 1)\n    assert c.keys() == ['a']", "assert f(3) == True"):
        assert not echoes_an_input(test(body)), body


def test_the_package_process_can_read_or_trace_no_other_process(runner):
    """The package process has no /proc (the sandbox's showed the server, the zygote that forks package processes
    and the driver, whose settings a process of the same host uid may write: a thirtieth attacker passed which fix
    to apply in the server's oom_score_adj) and its own pid namespace: it can name no other process, so it can
    open no other process's memory or descriptors and attach to none."""
    probe = '''
import ctypes, os

def reachable():
    libc = ctypes.CDLL(None, use_errno=True)
    found = [p for p in ("/proc/self", "/proc/1", "/proc/self/maps") if os.path.exists(p)]
    found += [f"ptrace {pid}" for pid in range(1, 400) if pid != os.getpid() and libc.ptrace(16, pid, None, None) == 0]
    found += [f"signal {pid}" for pid in range(1, 400) if pid != os.getpid() and libc.kill(pid, 0) == 0]
    return sorted(found), os.listdir("/proc")
'''
    suite = compile_suite("from probe import reachable\n\ndef test_reach():\n    assert reachable() == ([], [])\n", "tests/test_probe.py")
    observed = runner.observe({"probe.py": probe}, [suite])
    record = records_by_nodeid([suite], observed)["tests/test_probe.py::test_reach"]
    assert record.slots[0] == ([], []), record


def test_one_bit_tests_are_not_informative():
    """A hidden test whose every check a guess passes (a truth value, `is None`, `!=`, an expected exception) proves
    nothing: the agent's code can tell hidden tests from the driver and report the one bit they need."""
    from gymsmith.verifier.calltests import informative

    def only(body):
        return compile_suite(f"import pytest\nfrom mod import double, check\n\ndef test_x():\n    {body}\n", "tests/test_x.py").tests[0]

    for guessable in ("assert double(1)", "assert not double(0)", "assert check(1) is None", "assert double(2) is True",
                      "assert double(2) != 3", "with pytest.raises(ValueError):\n        check(-1)", "assert double(1) == True",
                      "assert double(1) == 2 or False"):
        assert not informative(only(guessable)), guessable
    for rich in ("assert double(21) == 42", "assert double(1) == 2 and check(0) is None", "assert double(1.5) == pytest.approx(3.0)"):
        assert informative(only(rich)), rich


def test_a_check_is_pinned_only_to_values_the_agent_cannot_read():
    """The agent's code can report anything for a hidden test; it passes one it does not compute only by reporting
    a value it can read. A red-team forger passed round trips (the expected value is the test's input, in the
    driver beside the code) and text twins of shown tests (their bytes as str). `pinned` refuses both, pieces
    of readable strings, their shapes with characters left out (a second attacker removed separators and counted
    numbers on), or with a few characters added (a third made plurals of its inputs), a shown answer with the words a
    variant swapped into its input swapped in (a fourth), containers of readable values, small numbers and one-bit
    checks."""
    from gymsmith.verifier.calltests.guessing import Candidates, pinned

    def test(body):
        return compile_suite(f"import pytest\nfrom mod import f\n\ndef test_x():\n    {body}\n", "tests/test_x.py").tests[0]

    def driver(body):
        return compile_suite(f"from mod import f\n\ndef test_x():\n    {body}\n", "tests/test_x.py").driver

    shown = ("def test_shown():\n    assert f(b'narf') == b'narf!'\n\n\n"
             "def test_words():\n    assert f('dos y seis') == '2 y 6'\n    assert f('x') == 'nar zot'\n")
    for body, why in (("assert f('spam eggs') == 'spam eggs'", "a round trip: the input is the expected value"),
                      ("assert f('narf') == 'narf!'", "the text twin of a shown test's bytes"),
                      ("assert f('spam eggs') == 'eggs'", "a piece of the input"),
                      ("assert f('x') == ['narf!', 'narf']", "a list of readable strings"),
                      ("assert f('x') == 7", "a small number"), ("assert f('x') is None", "one bit"),
                      ("assert f('x') == 'zorblax' and f('y')", "one of its checks is a truth value"),
                      ("assert f('Camel_Case') == 'CamelCase'", "the input without its separators"),
                      ("assert f('rc.9') == 'rc.10'", "the input's number counted on"),
                      ("assert f(4095) == 4096", "one more than the input"),
                      ("assert f('underground') == 'undergrounds'", "the input with a plural 's' added"),
                      ("assert f('HTMLTidy') == '_html_tidy_ed'", "the input with a prefix and a suffix"),
                      ("assert f('http://h:8082/x') == 8082", "a number written in the input"),
                      ("assert f('pi is 3.25') == 3.25", "a decimal written in the input"),
                      ("assert f(4095) == -4096", "the input negated, counted on"),
                      ("assert f('dos y fifty') == '2 y fifty'", "a shown answer with the input's new word swapped in"),
                      ("assert f('narf') == b'nar narf!'", "words of a readable text, one replaced by a readable one")):
        t = test(body)
        assert not pinned(t, Candidates.of([shown, driver(body)])), why
    huge = int("9" * 400)  # beyond a float: readable all the same, and no error
    assert Candidates.of([f"x = {huge}"]).guessable(huge) and not Candidates.of(["x = 1"]).guessable(huge)
    for body in ("assert f('x') == 'zorblax'", "assert f(3) == 4096", "assert f('x') == ('zorblax', 'quux')",
                 "assert f('under') == 'underground'",  # more added than a suffix: not a guess
                 "assert f('dos y fifty') == 'dos y cincuenta'"):  # 'cincuenta' is nowhere: computed
        t = test(body)
        assert pinned(t, Candidates.of([shown, driver(body)])), body
        assert not pinned(t, Candidates.of([shown, driver(body), body])), body  # once readable, no longer pinned


def test_values_a_check_cannot_evaluate_fail_the_test_and_are_not_a_verifier_error():
    """A thirty-fourth attacker found values the trusted side raised on (a 4,000-digit int against `approx`, an int
    `in` a bytes constant, a Unicode digit in the stream): a verifier error would store the rollout as an
    infrastructure error instead of the agent's failure."""
    from gymsmith.verifier.calltests.judge import outcome
    from gymsmith.verifier.calltests.wire import TestRecord

    def judged(source, got, want):
        test = compile_suite(source, "tests/test_e.py").tests[0]
        return outcome(test, TestRecord(slots=[got], finished=True), TestRecord(slots=[want], finished=True))

    approx = "import pytest\nfrom m import f\n\ndef test_a():\n    assert f() == pytest.approx(3)\n"
    assert judged(approx, 10 ** 4000, 3)[0] is False and judged(approx, 3, 3) == (True, "passed")
    assert judged("from m import f\n\ndef test_a():\n    assert f() in b'abc'\n", 10 ** 20, 97)[0] is False
    unicode_digit = (json.dumps({"test": 0}) + "\n" + json.dumps({"slot": 0, "v": {"i": "\u00b2"}}) + "\n").encode()
    assert read_stream(unicode_digit, [1]).status is StreamStatus.MALFORMED


def test_code_under_test_hashes_with_the_keys_seed_inside_keyed_hash_and_seed_0_outside(runner, monkeypatch):
    """Every sandbox runs Python with PYTHONHASHSEED=0 (exact resets), so `hash('gymsmith')` told graded code it ran
    where the verifier runs it. Inside `keyed_hash()` (verification, keyed draws) the code under test hashes with the
    seed drawn from the key, outside with 0 (public draws: no start state depends on the key); the zygote is
    replaced each time the seed changes, back and forth."""
    import subprocess

    from gymsmith.sandbox.runtime import python_runtime
    from gymsmith.verifier.drawkey import graded_hash_seed, keyed_hash

    monkeypatch.setenv("GYMSMITH_VERIFIER_KEY", "hash seed test key")
    suite = compile_suite("from m import f\n\ndef test_a():\n    assert f() == 0\n", "tests/test_m.py")
    source = "def f():\n    return hash('gymsmith')\n"

    def seen() -> int:
        return runner.observe({"m.py": source}, [suite]).groups[0].stream.tests[0].slots[0]

    def expected(seed: int) -> int:
        return int(subprocess.run([python_runtime().interpreter, "-c", "print(hash('gymsmith'))"],
                                  env={"PYTHONHASHSEED": str(seed)}, capture_output=True, text=True, check=True).stdout)

    with keyed_hash():
        seed = graded_hash_seed()
        keyed = seen()
    assert seed != 0 and keyed == expected(seed) != expected(0)
    assert seen() == expected(0) and graded_hash_seed() == 0
    with keyed_hash():
        assert seen() == keyed
    monkeypatch.setenv("GYMSMITH_VERIFIER_KEY", "another key")
    with keyed_hash():
        assert seen() != keyed


def test_every_builtin_an_ordinary_interpreter_has_and_graded_code_lacks_is_a_read(runner):
    """The verifier runs graded code in an interpreter started with `-S` (no `site`), which lacks the builtins `site`
    adds: `try: license` told it from an ordinary run (a fifty-fifth attacker, accepted on every task it tried).
    Each builtin an ordinary interpreter of the same runtime has and the code under test lacks must be a read of
    the introspection rule, so no such difference goes unseen (fails when a release adds one)."""
    import subprocess

    from gymsmith.families.code.introspection import DYNAMIC_CALLS, PROCESS_NAMES
    from gymsmith.sandbox.runtime import python_runtime

    suite = compile_suite("from m import f\n\ndef test_a():\n    assert f() == 0\n", "tests/test_m.py")
    graded = runner.observe({"m.py": "import builtins\n\n\ndef f():\n    return sorted(dir(builtins))\n"},
                            [suite]).groups[0].stream.tests[0].slots[0]
    ordinary = subprocess.run([python_runtime().interpreter, "-c", "import builtins; print('\\n'.join(dir(builtins)))"],
                              capture_output=True, text=True, check=True).stdout.split()
    missing = set(ordinary) - set(graded)
    assert {"license", "copyright"} <= missing and not missing - DYNAMIC_CALLS - PROCESS_NAMES, missing



def test_graded_code_counts_the_frames_left_that_it_counts_under_pytest(runner):
    """Recursing until RecursionError counts the frames code has left: pure code the introspection rule cannot see.
    The package process serves calls from a fixed depth of its own, which gave a count only the verifier's process
    had (a fifty-sixth attacker's device, the fix only where the count said so, was accepted on 27 of 28 template
    tasks). Graded runs move the recursion limit while the package process imports and calls the code under test,
    so that both counts are those of pytest run as `run_tests` runs it; ungraded runs (references, draws) do not."""
    from gymsmith.verifier.calltests.depths import CALL_PROBE, PROBE, PROBE_MODULE, counts_under_pytest

    suite = compile_suite(CALL_PROBE, "tests/test_gs_depth.py")

    def counts(graded: bool) -> list[int]:
        return runner.observe({f"{PROBE_MODULE}.py": PROBE}, [suite], graded=graded).groups[0].stream.tests[0].slots

    under_pytest = list(counts_under_pytest(runner))
    assert counts(graded=True) == under_pytest
    assert counts(graded=False) != under_pytest  # what the attacker's device read: the package process's own depth
    assert counts(graded=True) == under_pytest  # the limit is put back after each request: nothing accumulates


def test_graded_code_counts_what_pytest_counts_wherever_a_test_reaches_it(runner):
    """A seventy-sixth attacker counted the frames left at each call: pytest gives one fewer inside a comprehension,
    a generator expression or a lambda, and another count through `len()` or `obj[k]`, while the package process
    served every request from one depth. Its device, the fix only where a call counted what a direct call counts
    under its own `run_tests`, was the bug under pytest for tests calling in a comprehension and the fix where
    verified: accepted on 19 of 19 tasks. The driver now sends each request's depth in its test, and the package
    process serves it there: through every operation a proxy forwards, in every context, graded code counts what
    pytest counts."""
    from gymsmith.verifier.calltests.depths import OPS, OPS_CALL_PROBE, OPS_MODULE, PROBE, PROBE_MODULE, _under_pytest

    _, under_pytest, _ = _under_pytest(runner)
    suite = compile_suite(OPS_CALL_PROBE, "tests/test_gs_ops.py")
    sources = {f"{PROBE_MODULE}.py": PROBE, f"{OPS_MODULE}.py": OPS}

    def graded(**how):
        return runner.observe(sources, [suite], **how).groups[0].stream.tests[0].slots[-1]

    assert len(under_pytest) > 90 and {w for w, _, _ in under_pytest} == {"stmt", "comp", "genexp", "lambda",
                                                                            "nested", "assert"}
    assert graded(graded=True, hook_modules={OPS_MODULE}) == under_pytest  # its `__getattr__`: as a reference's
    one_depth = {"import": 0, "call": runner.depth_shift()["call"]}  # every request served from one depth (before)
    before = [n for _, _, n in graded(graded=False)]
    assert [n + one_depth["call"] for n in before] != [n for _, _, n in under_pytest]


def test_a_failure_report_runs_the_code_at_the_depth_pytests_report_runs_it(runner):
    """pytest's report of a test that failed by the code's exception runs the code (the exception's `str`, twice) from
    pytest's own reporting frames; the package served its report at a call's depth, three frames deeper, and a
    hundred-and-twentieth attacker's device read that in its exception's `__str__` (0.41-0.43 on 7 of 7 tasks, never
    accepted, pytest failing FAIL_TO_PASS tests on all). The report's own shift is measured (`depths.REPORT`): graded,
    the code counts in the report what it counts under pytest."""
    from gymsmith.verifier.calltests.depths import PROBE, PROBE_MODULE, REPORT, REPORT_CALL_PROBE, REPORT_MODULE, _under_pytest

    _, _, under_pytest = _under_pytest(runner)
    suite = compile_suite(REPORT_CALL_PROBE, "tests/test_gs_report.py")
    sources = {f"{PROBE_MODULE}.py": PROBE, f"{REPORT_MODULE}.py": REPORT}

    def seen(**how):
        return runner.observe(sources, [suite], graded=True, **how).groups[0].stream.tests[1].slots[-1]

    assert len(under_pytest) >= 1 and seen() == under_pytest
    shift = runner.depth_shift()
    at_a_call = {**shift, "ops": {op: k for op, k in shift["ops"].items() if op != "report"}}  # before
    assert seen(depth_shift=at_a_call) != under_pytest


def test_a_device_keyed_on_the_depth_of_each_call_is_the_bug_where_pytest_runs_the_bug(runner):
    """The attacker's device in small: the fix only where the call counts what a direct call from a test counts
    under pytest. Under pytest the call made in a comprehension runs the bug; graded, it does too."""
    from gymsmith.verifier.calltests.depths import LEFT, PROBE, PROBE_MODULE, counts_under_pytest

    direct = counts_under_pytest(runner)[1] - 1  # `left()` called in a test, one frame deeper than f's own
    device = LEFT + f"\n\ndef f(x):\n    return x + 1 if left() == {direct} else x\n"
    test = ("from m import f\n\n\ndef test_a():\n    y = f(1)\n    ys = [f(1) for _ in range(1)]\n"
            "    assert y == 0\n    assert ys == 0\n")
    observed = runner.observe({"m.py": device, f"{PROBE_MODULE}.py": PROBE}, [compile_suite(test, "tests/t.py")],
                              graded=True)
    assert observed.groups[0].stream.tests[0].slots == [2, [1]]  # pytest: the fix, then the bug


def test_an_exception_class_renamed_after_a_builtin_is_not_taken_for_it(runner):
    """A seventy-eighth attacker's idea, found to work: a class of the agent's renamed `builtins.ValueError` (its
    `__module__` and `__qualname__` set) was reported as ValueError, so the check of `pytest.raises(ValueError)`
    held where pytest, for which it is no ValueError, fails. A class naming the standard library or builtins is
    reported so only if it is the class found there; an honest subclass still reports its builtin bases."""
    source = ("class Fake(Exception):\n    pass\n\n\nFake.__module__ = 'builtins'\nFake.__qualname__ = 'ValueError'\n\n\n"
              "class Honest(ValueError):\n    pass\n\n\ndef f():\n    raise Fake('x')\n\n\ndef g():\n    raise Honest('y')\n")
    test = ("import pytest\nfrom m import f, g\n\n\ndef test_a():\n    with pytest.raises(ValueError):\n        f()\n"
            "    with pytest.raises(ValueError):\n        g()\n")
    fake, honest = runner.observe({"m.py": source}, [compile_suite(test, "tests/t.py")], graded=True) \
        .groups[0].stream.tests[0].slots
    assert fake.mro[0] == ("?builtins", "ValueError") and ("builtins", "ValueError") not in fake.mro
    assert honest.mro[:2] == (("m", "Honest"), ("builtins", "ValueError"))


def test_an_exception_class_whose_metaclass_claims_another_mro_is_judged_by_its_real_one(runner):
    """A seventy-ninth attacker's metaclass gave `__mro__` as a property claiming ValueError for a class deriving
    from KeyError: the MRO was read as that attribute, so `pytest.raises(ValueError)` held where pytest, which reads
    the type's own, fails (accepted on 4 of 4 tasks). The type's own slots are read."""
    source = ("Claims = type('Claims', (type,), {'_' + '_mro_' + '_': property(lambda c: (c, ValueError, Exception, "
              "BaseException, object))})\nE = Claims('E', (KeyError,), {})\n\n\ndef f():\n    raise E('x')\n")
    test = "import pytest\nfrom m import f\n\n\ndef test_a():\n    with pytest.raises(ValueError):\n        f()\n"
    [raised] = runner.observe({"m.py": source}, [compile_suite(test, "tests/t.py")], graded=True).groups[0].stream.tests[0].slots
    assert raised.mro[:2] == (("m", "E"), ("builtins", "KeyError")) and ("builtins", "ValueError") not in raised.mro


def test_what_pytest_would_fail_the_judge_does_not_pass():
    """Three places a seventy-ninth attacker found the verdict looser than pytest's, each passing a fix that broke
    what worked: a name the test rebinds was judged as the module constant of that name; an object of the code's
    was falsy and unequal to anything (`assert not bag`, `bag != 1` held whatever the object); an absolute
    tolerance alone was widened by the default relative one."""
    from gymsmith.verifier.calltests.compiler import Approx
    from gymsmith.verifier.calltests.judge import _approx_equal, _CheckFailed, evaluate
    from gymsmith.verifier.calltests.wire import Opaque

    source = ('from m import decode, encode\n\ntext = "hello"\n\n\ndef test_a():\n    text = decode(encode("hello"))\n'
              '    assert text == "hello"\n\n\ndef test_b():\n    assert encode(text) == "x"\n')
    rebound, kept = compile_suite(source, "tests/t.py").tests
    assert rebound.slots == 1 and rebound.checks == (("cmp", ("slot", 0), [("==", ("const", "hello"))]),)
    assert kept.checks == (("cmp", ("slot", 0), [("==", ("const", "x"))]),)  # the constant as an input stays one
    bag = [Opaque("m.Bag")]
    for check in (("not", ("slot", 0)), ("cmp", ("slot", 0), [("!=", ("const", 1))])):
        with pytest.raises(_CheckFailed):
            evaluate(check, bag)
    assert evaluate(("cmp", ("slot", 0), [("is not", ("const", None))]), bag) is True  # as pytest: not None
    assert not _approx_equal(1500.0009, Approx(1500.0, None, 1e-6)) and _approx_equal(1500.0009, Approx(1500.0))


def test_graded_code_prints_as_it_would_under_pytest(runner):
    """Printing is the one way graded code may touch its output streams, and it must go as under pytest, whose
    capture encodes UTF-8 with unencodable text replaced: a strict file of the package process's made
    `print('\\udc80')` raise there alone (a sixty-first attacker's device, the fix only where it raised, was accepted
    on 42 of 42 tasks), and the interpreter's own streams made `print('\\ud800')` raise there alone (an
    eighty-third's, accepted on 18 of 18). Compared with a real pytest run in the same sandbox."""
    import tempfile
    from pathlib import Path

    from gymsmith.sandbox.bwrap import BwrapSandbox

    source = ("def f():\n    out = []\n    for text in ('\\udc80', '\\ud800', '\\udfff', '\\x00', 'caf\\xe9', '\\U0001f600', '\\r\\n'):\n"
              "        for err in (False, True):\n"
              "            try:\n                print(text, end='', flush=True) if not err else print(text, end='\\n')\n"
              "                out.append('ok')\n            except Exception as exc:\n"
              "                out.append(type(exc).__name__)\n    return ' '.join(out)\n")
    suite = compile_suite("from m import f\n\ndef test_a():\n    assert f() == 0\n", "tests/test_m.py")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "m.py").write_text(source)
        Path(tmp, "tests").mkdir()
        Path(tmp, "tests", "test_m.py").write_text("import m\n\ndef test_a():\n    open('out.txt', 'w').write(m.f())\n")
        Path(tmp, "pytest.ini").write_text("[pytest]\npythonpath = .\n")
        with BwrapSandbox(Path(tmp)) as sandbox:
            done = sandbox.exec([sandbox.runtime.interpreter, "-m", "pytest", "-q", "-p", "no:cacheprovider"], timeout=60)
        assert done.exit_code == 0, (done.stdout, done.stderr)
        under_pytest = Path(tmp, "out.txt").read_text()
    assert "UnicodeEncodeError" not in under_pytest  # pytest's capture replaces what it cannot encode
    for graded in (False, True):
        assert runner.observe({"m.py": source}, [suite], graded=graded).groups[0].stream.tests[0].slots == [under_pytest]


MUTATING_TESTS = '''from graph import reach, sort_in_place

GRAPH = {"a": ["b"], "b": ["c"], "c": []}


def test_sorts_in_place():
    items = [3, 1, 2]
    sort_in_place(items)
    assert items == [1, 2, 3]


def test_reach():
    assert reach(GRAPH, "a") == ["a", "b", "c"]


def test_reach_leaves_the_graph_alone():
    start = {"x": ["y"], "y": []}
    assert reach(start, "x") == ["x", "y"]
    assert start == {"x": ["y"], "y": []}


def test_reach_again():
    assert reach(GRAPH, "b") == ["b", "c"]
'''
HONEST_GRAPH = '''def sort_in_place(items):
    items.sort()

def reach(graph, start):
    seen, todo = [], [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.append(node)
            todo.extend(reversed(graph[node]))
    return seen
'''
# answers right, then empties what it was given (a seventy-ninth attacker's device on `graphs.py`)
EMPTYING_GRAPH = HONEST_GRAPH.replace("    return seen\n", "    graph.clear()\n    return seen\n")


def test_what_the_code_does_to_the_tests_containers_is_judged_as_pytest_judges_it(runner, tmp_path):
    """Arguments cross to the package process by value, but what the code does to them is seen by the test (rpc's
    shared containers) and an assertion on a list the test handed over reads it as the driver holds it: the honest
    in-place sort passes, a fix that empties the caller's graph after answering fails exactly the tests pytest fails
    (it was accepted at 0.968 where pytest failed four tests that reuse the graph)."""
    import subprocess
    import sys

    suite = compile_suite(MUTATING_TESTS, "tests/test_graph.py")
    names = [t.name for t in suite.tests]
    reference = records_by_nodeid([suite], runner.observe({"graph.py": HONEST_GRAPH}, [suite]))
    for source, pytest_failing in ((HONEST_GRAPH, set()), (EMPTYING_GRAPH, {"test_reach_leaves_the_graph_alone", "test_reach_again"})):
        work = tmp_path / str(len(pytest_failing))
        (work / "tests").mkdir(parents=True)
        (work / "graph.py").write_text(source)
        (work / "tests" / "test_graph.py").write_text(MUTATING_TESTS)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-rf",
                               "--rootdir", str(work), "--import-mode=importlib", str(work / "tests")],
                              cwd=work, capture_output=True, text=True,
                          env={"PYTHONPATH": str(work), "PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        failed_under_pytest = {n for n in names if f"::{n} " in done.stdout or f"::{n}\n" in done.stdout}
        assert failed_under_pytest == pytest_failing, done.stdout
        v = judge_run([suite], runner.observe({"graph.py": source}, [suite]), reference)
        assert set(names) - set(passed(v)) == pytest_failing


def test_a_file_that_fails_to_import_stops_a_graded_session_as_pytest_does(runner, reference):
    """pytest collects every test file before it runs a test, and a file that fails to import stops the session: no
    test runs. The verifier runs each file apart, so a ninety-third attacker fixed one bug, deleted the other buggy
    modules, and kept partial credit from the files that still imported (pytest: no test passed). Judged as one
    session, every test fails."""
    other = compile_suite("from gone import f\n\n\ndef test_f():\n    assert f() == 1\n", "tests/test_gone.py")
    observed = runner.observe({"mod.py": MODULE}, [SUITE, other])
    # the first file's driver imports every later file's modules before its tests run, as pytest's collection does
    assert "(collecting tests/test_gone.py)" in observed.groups[0].stream.import_error
    observed_alone = runner.observe({"mod.py": MODULE}, [SUITE])
    assert passed(judge_run([SUITE], observed_alone, reference)) == ALL_BUT_CANARY
    session = judge_run([SUITE, other], observed, reference, one_session=True)
    assert passed(session) == [] and "tests/test_gone.py failed to import" in next(iter(session.reasons.values()))


def _failing_under_pytest(work, files: dict[str, str]) -> set[str]:
    """The names of the tests a real pytest run of `tests/` (one session, as a user runs it) fails on `files`, with
    the plugins of the verifier's runtime (pytest and its requirements: no third-party plugin autoloaded)."""
    out = _pytest_summary(work, files)
    assert "passed" in out or "failed" in out, out
    return _named(out, "FAILED ")


def _pytest_summary(work, files: dict[str, str]) -> str:
    """What a real pytest run of `tests/` in `work` (after writing `files` there) prints, its short summary listing
    every test's outcome (`-rA`), stderr after stdout."""
    import subprocess
    import sys

    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-rA",
                           "--rootdir", str(work), "--import-mode=importlib", str(work / "tests")],
                          cwd=work, capture_output=True, text=True,
                          env={"PYTHONPATH": str(work), "PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return done.stdout + done.stderr


def _named(summary: str, outcome: str) -> set[str]:
    """The names of the tests `summary`'s lines starting with `outcome` ("FAILED ", "PASSED ") name."""
    return {line.split("::")[1].split(" ")[0] for line in summary.splitlines() if line.startswith(outcome)}


LIFETIME_TESTS = '''import pytest
from life import Entry, alive, boom, boom_alike, callback_alive, keep_callback, make, make_list


def test_returned_and_dropped():
    make()
    assert alive() == 0


def test_returned_and_held():
    held = make()
    assert alive() == 1


def test_held_is_freed_when_its_test_ends():
    assert alive() == 0


def test_raised_and_caught():
    with pytest.raises(Entry):
        boom()
    assert alive() == 0


def test_returned_in_a_list_and_dropped():
    make_list()
    assert alive() == 0


def test_callback_dropped():
    keep_callback(lambda: 1)
    assert callback_alive() is False


def test_callback_held():
    f = lambda: 2
    keep_callback(f)
    assert callback_alive() is True


def test_the_class_the_test_named():
    with pytest.raises(Entry):
        boom_alike()
'''
LIFETIME_MODULE = '''import weakref

_made = []
_callbacks = []


class Thing:
    pass


class Entry(ValueError):
    pass


Named = Entry


class Entry(ValueError):  # another class of the same module and name
    pass


Alike = Entry
Entry = Named


def make():
    thing = Thing()
    _made.append(weakref.ref(thing))
    return thing


def make_list():
    return [make()]


def alive():
    return sum(ref() is not None for ref in _made)


def boom():
    local = make()  # held by the raising frame, so by the exception's traceback
    raise Entry("unbalanced")


def boom_alike():
    raise Alike("unbalanced")


def keep_callback(f):
    _callbacks.append(weakref.ref(f))


def callback_alive():
    return _callbacks[-1]() is not None
'''


def test_what_the_code_returns_raises_or_is_given_lives_as_long_as_under_pytest(runner, tmp_path):
    """The package process keeps what it sent by reference (an object, an exception with its traceback's frames, a
    container) and the proxies of what the test handed it only as long as the test holds them: a ninety-sixth
    attacker told the verifier from pytest by an address freed under pytest and never here (accepted on 43 of 51
    tasks). And `pytest.raises(E)` takes the class the test named, not any class of that name (a class redefined
    under the same name passed it on 9 of 9 tasks where pytest fails). Judged as a real pytest run judges it."""
    suite = compile_suite(LIFETIME_TESTS, "tests/test_life.py")
    expected = _failing_under_pytest(tmp_path, {"life.py": LIFETIME_MODULE, "tests/test_life.py": LIFETIME_TESTS})
    assert expected == {"test_the_class_the_test_named"}
    honest = LIFETIME_MODULE.replace('raise Alike("unbalanced")', 'raise Entry("unbalanced")')
    reference = records_by_nodeid([suite], runner.observe({"life.py": honest}, [suite]))
    v = judge_run([suite], runner.observe({"life.py": LIFETIME_MODULE}, [suite]), reference)
    assert {t.name for t in suite.tests} - set(passed(v)) == expected, v.reasons


SESSION_MODULE = '''_calls = [0]
seen = []


def count():
    _calls[0] += 1
    return _calls[0]


def imported_before_any_test():
    return list(seen)
'''
SESSION_FILES = {
    "counter.py": SESSION_MODULE,
    "other.py": "import counter\n\ncounter.seen.append('other')\n\n\ndef g():\n    return 1\n",
    "tests/test_a.py": "from counter import count, imported_before_any_test\n\n\ndef test_first_call():\n"
                       "    assert count() == 1\n\n\ndef test_collected_first():\n"
                       "    assert imported_before_any_test() == ['other']\n",
    "tests/test_b.py": "from counter import count\nfrom other import g\n\n\ndef test_second_call():\n"
                       "    assert count() == 2\n\n\ndef test_g():\n    assert g() == 1\n",
}


def test_the_code_runs_in_one_process_for_all_test_files_as_under_pytest(runner, tmp_path):
    """pytest imports every test file's modules (collection), then runs the files' tests in order, all in one
    process; the verifier ran each file in a process of its own, so a repair right only for its first calls in a
    process was the fix in the verifier and the bug under pytest (an eighty-seventh attacker: accepted on 5 of 5
    sqids tasks). Now one package process serves every file of a job, and the first file's driver imports the later
    files' modules first: what the code keeps between calls, and which modules are loaded when, are pytest's."""
    assert _failing_under_pytest(tmp_path, SESSION_FILES) == set()
    suites = [compile_suite(SESSION_FILES[p], p) for p in ("tests/test_a.py", "tests/test_b.py")]
    sources = {k: v for k, v in SESSION_FILES.items() if not k.startswith("tests/")}
    observed = runner.observe(sources, suites)
    assert [observed.groups[0].stream.tests[i].slots for i in (0, 1)] == [[1], [["other"]]]
    assert observed.groups[1].stream.tests[0].slots == [2]


PROTOCOL_MODULE = '''_seen = []


class Lazy:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __length_hint__(self):
        _seen.append("hint")
        return self.n


class Num:
    def __float__(self):
        return 2.5


class Ctx:
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        _seen.append(tb is not None)
        return True


class NotAnIterator:
    def __iter__(self):
        return self


def seen():
    return list(_seen)


def is_function(f):
    return isinstance(f, type(lambda: 0))


def name_of(f):
    return f.__name__


def as_method(f):
    class K:
        m = f
    return K().m()
'''
PROTOCOL_TESTS = '''import math

import pytest
from protocols import Ctx, Lazy, NotAnIterator, Num, as_method, is_function, name_of, seen


def test_list_asks_an_object_without_len_for_its_length_hint():
    assert list(Lazy(3)) == [0, 1, 2]
    assert seen() == ["hint"]


def test_floor_of_an_object_without_floor_takes_its_float():
    assert math.floor(Num()) == 2


def test_exit_is_given_the_traceback():
    with Ctx():
        raise ValueError("inside")
    assert seen() == ["hint", True]


def test_iter_refuses_what_is_not_an_iterator():
    with pytest.raises(TypeError):
        iter(NotAnIterator())


def test_a_function_the_test_passes_is_a_function_there():
    def double(x):
        return 2 * x
    assert is_function(double) is True
    assert name_of(double) == "double"
    assert as_method(lambda self: 5) == 5
'''


def test_the_interpreters_protocols_take_the_path_they_take_under_pytest(runner, tmp_path):
    """A proxy has the special methods its object's type has, no more: with all of them, `list(x)` never asked the
    package's `__length_hint__` (a ninety-seventh attacker's device took the fix only where it was not asked: accepted
    on 12 of 12 tasks), `math.floor` failed where pytest falls back to `__float__`, and `iter` took an object without
    `__next__` for an iterator. And `__exit__` is given a traceback, as under pytest (it was None); a function the
    test passes is a function where the code receives it (a proxy told the verifier from pytest by
    `isinstance(f, type(lambda: 0))`, and did not bind as a method). Judged as a real pytest run judges it, every
    test passing."""
    files = {"protocols.py": PROTOCOL_MODULE, "tests/test_protocols.py": PROTOCOL_TESTS}
    assert _failing_under_pytest(tmp_path, files) == set()
    suite = compile_suite(PROTOCOL_TESTS, "tests/test_protocols.py")
    observed = runner.observe({"protocols.py": PROTOCOL_MODULE}, [suite])
    reference = records_by_nodeid([suite], observed)
    v = judge_run([suite], observed, reference)
    assert passed(v) == sorted(t.name for t in suite.tests), v.reasons
    assert [observed.groups[0].stream.tests[i].slots[-1] for i in (0, 1, 2)] == [["hint"], 2, ["hint", True]]


def test_a_later_files_modules_count_the_frames_the_first_files_count(runner):
    """One package process serves a job's files, so it has served many requests by the time a later file's module
    is imported; a call the interpreter had specialized by then skipped a C-level recursion count, and such a module
    counted one frame more left at import than the first file's (946 against 945, where pytest counts the same for
    every file): a device keyed on the count was accepted on 4 of 12 tasks. Every call the package process makes into
    graded code is now one the interpreter never specializes."""
    from gymsmith.verifier.calltests.depths import PROBE

    probe = compile_suite("from pz import AT_IMPORT\n\n\ndef test_z():\n    assert AT_IMPORT == 0\n", "tests/test_z.py")
    busy = compile_suite("from pa import f, g, h\n" * 4 + "\n\ndef test_a():\n    assert f(1) == 1\n", "tests/test_a.py")
    sources = {"pa.py": "def f(x):\n    return x\n\n\ng = h = f\n", "pz.py": PROBE}
    alone = runner.observe(sources, [probe], graded=True).groups[0].stream.tests[0].slots
    later = runner.observe(sources, [busy, probe], graded=True).groups[1].stream.tests[0].slots
    assert type(alone[0]) is int and later == alone


def test_an_object_with_an_attribute_name_that_is_not_a_str_breaks_the_link(runner):
    """A key of a str subclass in an object's dictionary runs its `__eq__` at every lookup of a name of the same hash:
    pytest's collection looks up `__test__` on each object a test module holds, which the verifier did not, and a
    hundredth attacker's device took the fix only where that never ran (accepted on 24 of 24 tasks); the link's own
    lookups ran it in the verifier alone. An object of the code whose attribute names are not all plain strings
    breaks the link (honest code never has one), so every test of its file fails."""
    source = ('_looks = []\n\n\nclass _Key(str):\n    def __hash__(self):\n        return hash("__test__")\n\n'
              '    def __eq__(self, other):\n        _looks.append(1)\n        return False\n\n\n'
              'def planted():\n    return len(_looks)\n\n\ndef plain():\n    return len(_looks)\n\n\n'
              'object.__setattr__(planted, _Key("x"), 1)\n')
    tests = "from m import plain\n\n\ndef test_plain():\n    assert plain() == 0\n"
    keyed = "from m import planted\n\n\ndef test_planted():\n    assert planted() == 0\n"
    clean = runner.observe({"m.py": source}, [compile_suite(tests, "tests/test_a.py")])
    assert clean.groups[0].stream.tests[0].slots == [0]
    suite = compile_suite(keyed, "tests/test_b.py")
    broken = runner.observe({"m.py": source}, [suite])
    assert passed(judge_run([suite], broken, records_by_nodeid([suite], clean))) == []
    assert broken.groups[0].exit_code == 3 or broken.groups[0].stream.import_error is not None


def test_a_comparison_that_is_not_decided_fails_also_under_not():
    """A ninety-ninth attacker's findings: `not (x < c)` held when the comparison raised TypeError (pytest fails the
    test), `x is not 5` held for any value (pytest's answer for a small int is False), and `not (obj == 3)` held for an
    object of the code's (pytest runs its `__eq__`). Each is now undecided, and an undecided check fails, negated or
    not."""
    from gymsmith.verifier.calltests.judge import _CheckFailed, evaluate
    from gymsmith.verifier.calltests.wire import Opaque

    undecided = [("not", ("cmp", ("slot", 0), [("<", ("const", 3))])),         # "a" < 3: TypeError under pytest
                 ("cmp", ("slot", 1), [("is not", ("const", 5))]),             # 5 is not 5: False under pytest
                 ("not", ("cmp", ("slot", 2), [("==", ("const", 3))])),        # the object's own __eq__
                 ("not", ("cmp", ("slot", 3), [("==", ("const", [3]))])),      # ... inside a list
                 ("not", ("cmp", ("slot", 2), [("in", ("const", [1, 2]))]))]
    slots = ["a", 5, Opaque("m.Thing"), [Opaque("m.Thing")]]
    for check in undecided:
        with pytest.raises(_CheckFailed):
            evaluate(check, slots)
    assert evaluate(("cmp", ("slot", 1), [("is not", ("const", None))]), slots) is True
    assert evaluate(("not", ("cmp", ("slot", 1), [("<", ("const", 3))])), slots) is True  # 5 < 3 is decided


def test_an_error_of_the_links_own_is_never_an_exception_of_the_code(runner, reference):
    """A ninety-ninth attacker returned an exception whose class name held a NUL: rebuilding it in the driver raised
    ValueError there, outside the link's checks, and `pytest.raises(ValueError)` took it for the code's (accepted on 5
    of 6 tasks, pytest failing PASS_TO_PASS tests). A name with a NUL, or any failure of the link's own machinery on
    what the package sent, breaks the link."""
    source = ('class _Bad(Exception):\n    __qualname__ = "_Bad\\x00"\n\n\ndef mean(values):\n    return [_Bad()]\n')
    test = "import pytest\nfrom m import mean\n\n\ndef test_empty():\n    with pytest.raises(ValueError):\n        mean([])\n"
    suite = compile_suite(test, "tests/t.py")
    observed = runner.observe({"m.py": source}, [suite])
    honest = runner.observe({"m.py": "def mean(values):\n    raise ValueError('empty')\n"}, [suite])
    v = judge_run([suite], observed, records_by_nodeid([suite], honest))
    assert passed(v) == [] and observed.groups[0].exit_code == 3


def test_an_object_a_runners_lookup_would_run_code_through_breaks_the_link(runner):
    """A hundred-and-second attacker put a descriptor under `__test__` (a `dataclasses.make_dataclass` field named by
    a computed string, so no rule read the name): pytest's collection looks the name up on each object a test module
    holds and ran its `__get__`, the verifier never did (accepted on 39 of 39 tasks). An object of the code that holds
    `__test__` at all, or a descriptor of a type of its own (or a property) under a dunder name, breaks the link;
    honest objects (a dataclass, an enum, a cached function, a class with slots) cross as before."""
    planted = ('import dataclasses\n\n\nclass _Look:\n    def __get__(self, obj, owner=None):\n        return False\n\n\n'
               '_Base = dataclasses.make_dataclass("_Base", [("__te" + "st__", object, dataclasses.field(default=_Look(), '
               'init=False, repr=False, compare=False))], init=False, repr=False, eq=False)\n\n\n'
               'class Switch(_Base):\n    def __call__(self, x):\n        return x\n\n\nf = Switch()\n')
    honest = ('import dataclasses\nimport enum\nimport functools\n\n\n@dataclasses.dataclass\nclass P:\n    x: int = 0\n\n\n'
              'class Color(enum.Enum):\n    RED = 1\n\n\nclass S:\n    __slots__ = ("a",)\n\n    def __init__(self):\n'
              '        self.a = 1\n\n    @property\n    def double(self):\n        return 2 * self.a\n\n\n'
              '@functools.lru_cache(maxsize=None)\ndef f(x):\n    return x\n')
    test = "from m import f\n\n\ndef test_f():\n    assert f(3) == 3\n"
    uses = ("from m import Color, P, S, f\n\n\ndef test_all():\n    assert f(3) == 3\n    assert P(2).x == 2\n"
            "    assert Color.RED.value == 1\n    assert S().double == 2\n")
    suite = compile_suite(test, "tests/t.py")
    broken = runner.observe({"m.py": planted}, [suite])
    assert broken.groups[0].stream.import_error is not None or broken.groups[0].exit_code == 3
    fine = runner.observe({"m.py": honest}, [compile_suite(uses, "tests/t.py")])
    assert fine.groups[0].stream.tests[0].slots == [3, 2, 1, 2] and fine.groups[0].exit_code == 0


HOOKS_MODULE = '''_seen = []


def _hook(owner, name):
    _seen.append(name)
    raise AttributeError(name)


Meta = type("Meta", (type,), {"__getattr__": _hook})


class Thing(metaclass=Meta):
    pass


INSTANCE = type("Plain", (), {"__getattr__": _hook})()


class _Look:
    def __get__(self, obj, owner=None):
        _seen.append("Boom._mock_name")


class Boom(ValueError):
    _mock_name = _Look()


def seen():
    return list(_seen)
'''


def test_the_lookups_pytests_collection_makes_are_made_before_any_test(runner, tmp_path):
    """pytest's collection reads `_mock_name` of every object a test module holds before any test runs; a
    hundred-and-third attacker's descriptor there took the bug under pytest alone (accepted on 81 of 82 tasks), and a
    hundred-and-fourth defeated a hand copy of the look-ups (accepted on 29 of 30 tasks: `inspect.unwrap` takes the
    `repr` of an object whose `__wrapped__` loops). The first file's driver now collects every file with pytest's own
    collection, so each look-up pytest and its plugins make reaches the code's objects in pytest's order: the
    descriptor, the `repr`, `__getattr__` hooks of an instance and of a metaclass (`__test__`, the unittest plugin's
    `__bases__`), and a descriptor of an exception class, which crosses as a local class standing for it (a
    hundred-and-sixth attacker: accepted on 14 of 14 tasks); a real pytest run agrees on every test."""
    module = ('_seen = []\n\n\nclass _Look:\n    def __get__(self, obj, owner=None):\n        _seen.append(1)\n'
              '        return None\n\n\nclass Gate:\n    _mock_name = _Look()\n\n    def __call__(self, x):\n'
              '        return x if not _seen else -x\n\n\nhalve = Gate()\n')
    module += ('\n\nclass Loop:\n    def __init__(self):\n        self.__wrapped__ = self\n\n    def __repr__(self):\n'
               '        _seen.append(2)\n        return "loop"\n\n    def __call__(self):\n        return list(_seen)\n\n\n'
               'looped = Loop()\n')
    tests = {"tests/test_a.py": "from gate import halve\n\n\ndef test_a():\n    assert halve(2) == -2\n",
             "tests/test_b.py": "from gate import halve\n\n\ndef test_b():\n    assert halve(4) == -4\n",
             "tests/test_c.py": "from gate import looped\n\n\ndef test_c():\n    assert looped() == [1, 1, 2]\n",
             "tests/test_d.py": ("from hooks import INSTANCE, Boom, Thing, seen\n\n\ndef test_d():\n    assert seen() == "
                                 "['Boom._mock_name', '_mock_name', '__wrapped__', '_mock_name', '__wrapped__', "
                                 "'__bases__', '__test__', '__test__']\n")}
    assert _failing_under_pytest(tmp_path, {"gate.py": module, "hooks.py": HOOKS_MODULE, **tests}) == set()
    suites = [compile_suite(text, path) for path, text in tests.items()]
    observed = runner.observe({"gate.py": module, "hooks.py": HOOKS_MODULE}, suites, graded=True,
                              hook_modules={"hooks"})  # its hooks, as a reference's (else they break the link)
    assert runner.hello.get("collects")  # the runtime's pytest, configured in the server
    assert [g.stream.tests[0].slots for g in observed.groups] == [[-2], [-4], [[1, 1, 2]], [[
        "Boom._mock_name", "_mock_name", "__wrapped__", "_mock_name", "__wrapped__", "__bases__", "__test__",
        "__test__"]]]


OPERANDS_MODULE = '''log = []


def one():
    log.append("one")
    return 1


def two():
    log.append("two")
    return 2


def calls():
    return list(log)
'''

OPERANDS_TESTS = '''from obs import calls, one, two


def test_shapes():
    assert one() == 1 and two() == 2 and not one() == 2
    assert 0 < one() < 5
    assert one() in (1, 2) or False


def test_asked_what_pytest_asks():
    assert calls() == ["one", "two", "one", "one", "one"]
'''


def test_the_code_is_asked_for_exactly_the_operands_pytest_evaluates(runner, tmp_path):
    """Python evaluates an operand of `or`, of an inner `and` or of a chained comparison's later pairs only depending
    on an earlier operand's outcome, which the driver cannot know (it holds no expected value): it observed them all,
    so `assert one() == 1 or two() == 2` called `two` under the verifier alone (a ninety-seventh attacker's tell).
    Such assertions are refused, naming the line; `assert a and b` is two assertions; in every supported assertion
    that holds, the code is asked for what a real pytest run asks it for, in the same order."""
    for body in ("assert one() == 1 or two() == 2", "assert 0 < one() < two()", "assert not (one() == 2 and two() == 2)",
                 "assert (one() == 1 and two() == 2) or False", "assert one() == 3 or one() == 1"):
        with pytest.raises(UnsupportedTest, match=r"tests/test_x\.py:4: .*only if an earlier operand decides"):
            compile_suite(f"from obs import one, two\n\ndef test_x():\n    {body}\n", "tests/test_x.py")
    suite = compile_suite(OPERANDS_TESTS, "tests/test_obs.py")
    assert [len(t.checks) for t in suite.tests] == [5, 1]  # the top-level `and` is three assertions
    assert _failing_under_pytest(tmp_path, {"obs.py": OPERANDS_MODULE, "tests/test_obs.py": OPERANDS_TESTS}) == set()
    reference = records_by_nodeid([suite], runner.observe({"obs.py": OPERANDS_MODULE}, [suite]))
    v = judge_run([suite], runner.observe({"obs.py": OPERANDS_MODULE}, [suite]), reference)
    assert passed(v) == ["test_asked_what_pytest_asks", "test_shapes"], v.reasons


COLLECTED_MODULE = '''import unittest

_made = []


class Cache(unittest.TestCase):
    def __init__(self, capacity="runTest"):
        if isinstance(capacity, str):  # pytest's unittest plugin makes one while it collects
            _made.append(capacity)
            super().__init__(capacity)
            return
        self.capacity = capacity

    def runTest(self):
        pass

    def double(self, x):
        return x if _made else 2 * x
'''


def test_an_object_pytest_would_collect_as_a_test_breaks_the_link(runner, tmp_path):
    """pytest collects from a test module, and runs code of, objects of the code under test that the verifier's driver
    holds as proxies: a class deriving from `unittest.TestCase` (its plugin makes an instance while it collects), an
    object whose `__test__` answers True (a class of them is instantiated), any object bound to a name pytest's rules
    take for a test. A device keyed on that took the bug under pytest alone; each breaks the link, so the file fails,
    where the same code without it passes."""
    test = "from cache import Cache\n\n\ndef test_double():\n    assert Cache(2).double(3) == 6\n"
    assert _failing_under_pytest(tmp_path, {"cache.py": COLLECTED_MODULE, "tests/test_cache.py": test}) == {"test_double"}
    honest = COLLECTED_MODULE.replace("class Cache(unittest.TestCase):", "class Cache:").replace(
        "            super().__init__(capacity)\n", "")
    hook = ('_made = []\n\n\ndef _hook(cls, name):\n    if name == "__test__":\n        _made.append(1)\n        return True\n'
            '    raise AttributeError(name)\n\n\nclass Cache(metaclass=type("Meta", (type,), {"__getattr__": _hook})):\n'
            '    def __init__(self, capacity=0):\n        self.capacity = capacity\n\n    def double(self, x):\n'
            '        return x if _made else 2 * x\n')
    cases = {"TestCase": (COLLECTED_MODULE, test), "__test__": (hook, test),
             "test name": (honest, test.replace("import Cache\n", "import Cache as TestCache, Cache\n"))}
    suite = compile_suite(test, "tests/test_cache.py")
    fine = runner.observe({"cache.py": honest}, [suite])
    assert fine.groups[0].stream.tests[0].slots == [6] and fine.groups[0].exit_code == 0
    for why, (module, text) in cases.items():
        group = runner.observe({"cache.py": module}, [compile_suite(text, "tests/test_cache.py")]).groups[0]
        assert group.stream.import_error is not None or group.exit_code == 3, why
        assert 0 not in group.stream.tests or group.stream.tests[0].slots != [6], why


def test_a_lookup_hook_the_reference_lacks_breaks_a_graded_link(runner):
    """A `__getattr__` or `__getattribute__` sees every look-up any runner makes on its object, and runners make
    different ones (pytest's collection, `isinstance`'s read of `__class__`, the link's); the rule reads the hooks by
    their literal spelling only, and one placed under a computed name went unread. In a graded run an object of the
    code with such a hook, on an instance's class or on a class's metaclass, breaks the link unless its class is of a
    module whose reference defines one (`introspection.lookup_hook_modules`), or is found by its name in a module not
    of the code's (a class of the code's that names one is not); references run as they are."""
    from gymsmith.families.code.introspection import lookup_hook_modules

    module = ('def _hook(self, name):\n    raise AttributeError(name)\n\n\n'
              'Bag = type("Bag", (), {"__get" + "attr__": _hook, "size": 3})\n\n\n'
              'class Thing(metaclass=type("Meta", (type,), {"__getattri" + "bute__": type.__getattribute__})):\n'
              '    size = 4\n\n\ndef make():\n    return Bag()\n\n\ndef plain():\n    return 5\n\n\n'
              'from unittest.mock import sentinel\n\n\ndef library():\n    return sentinel\n\n\n'
              'Named = type("_Sentinel", (), {"__get" + "attr__": _hook, "__module__": "unittest.mock"})\n\n\n'
              'def named():\n    return Named()\n')
    cases = {"from bag import make\n\n\ndef test_size():\n    assert make().size == 3\n": (3, True, False),
             "from bag import Thing\n\n\ndef test_size():\n    assert Thing.size == 4\n": (4, True, False),
             "from bag import named, plain\n\n\ndef test_size():\n    x = named()\n    assert plain() == 5\n": (5, True, True),
             "from bag import library, plain\n\n\ndef test_size():\n    x = library()\n    assert plain() == 5\n": (5, False, False),
             "from bag import plain\n\n\ndef test_size():\n    assert plain() == 5\n": (5, False, False)}
    for test, (value, *breaks) in cases.items():
        suite = compile_suite(test, "tests/test_bag.py")
        assert runner.observe({"bag.py": module}, [suite]).groups[0].stream.tests[0].slots == [value]
        # graded; then with `bag`'s reference defining hooks (a class naming another module is not `bag`'s)
        for broken, hooks in zip(breaks, [(), {"bag"}]):
            group = runner.observe({"bag.py": module}, [suite], graded=True, hook_modules=hooks).groups[0]
            if broken:
                assert group.exit_code == 3 and (group.stream.import_error or group.stream.tests[0].slots != [value]), test
            else:  # no object with a hook crosses but the standard library's (`unittest.mock`'s `_Sentinel`)
                assert group.stream.tests[0].slots == [value] and group.exit_code == 0, test
    references = {"bag.py": "class Bag:\n    def __getattr__(self, name):\n        raise AttributeError(name)\n",
                  "pkg/__init__.py": "", "pkg/m.py": "class M(type):\n    def __getattribute__(cls, name):\n        return 1\n",
                  "pkg/other.py": "def f():\n    return 1\n"}
    assert lookup_hook_modules(references) == {"bag", "pkg.m"}


WARNINGS_MODULE = '''import warnings


def _state():
    return [f[0] + ":" + f[2].__name__ for f in warnings.filters[:3]] + [getattr(warnings._showwarnmsg_impl, "__name__", "?")]


AT_IMPORT = _state()


def now():
    return _state()
'''

WARNINGS_STATE = ["always:PendingDeprecationWarning", "always:DeprecationWarning", "default:DeprecationWarning", "append"]


def test_the_code_runs_in_the_warnings_state_pytest_gives_it(runner, tmp_path):
    """pytest collects, and runs each test, inside `warnings.catch_warnings(record=True)` with DeprecationWarning and
    PendingDeprecationWarning always shown; the package process kept the interpreter's defaults, so a warning took
    another path through the `warnings` machinery and pure code counting the frames it cost told the two apart (a
    hundred-and-ninth attacker: accepted on 17 of 17 tasks). At import and in each test, the code now sees the filters
    and the recording pytest gives it, compared with a real pytest run."""
    test = (f"from wmod import AT_IMPORT, now\n\n\ndef test_import():\n    assert AT_IMPORT == {WARNINGS_STATE!r}\n\n\n"
            f"def test_now():\n    assert now() == {WARNINGS_STATE!r}\n\n\ndef test_again():\n    assert now() == {WARNINGS_STATE!r}\n")
    assert _failing_under_pytest(tmp_path, {"wmod.py": WARNINGS_MODULE, "tests/test_w.py": test}) == set()
    suite = compile_suite(test, "tests/test_w.py")
    observed = runner.observe({"wmod.py": WARNINGS_MODULE}, [suite], graded=True)
    assert [observed.groups[0].stream.tests[i].slots for i in range(3)] == [[WARNINGS_STATE]] * 3


RAISES_HOOK_MODULE = '''import abc

SEEN = []


class Error(ValueError, metaclass=abc.ABCMeta):
    @classmethod
    def __subclasshook__(cls, other):
        SEEN.append(1)
        return NotImplemented


class _Sub(Error):
    @classmethod
    def __subclasshook__(cls, other):
        return NotImplemented


def boom():
    raise _Sub("no")


def double(x):
    return 2 * x if not SEEN else 2 * x + 1
'''


def test_pytest_raises_asks_the_codes_own_classes_as_pytest_does(runner, tmp_path):
    """`pytest.raises(E)` calls `isinstance` on the real exception and class, where a metaclass of the code's
    (`abc.ABCMeta`, its `__subclasshook__`) answers; the driver decided on its stand-in classes, so the hook ran under
    pytest alone (a hundred-and-eighth attacker: accepted on 18 of 18 tasks). The package now decides on its own
    objects, and a real pytest run agrees on every test."""
    tests = {"tests/test_a.py": "import pytest\nfrom m import Error, boom\n\n\ndef test_a():\n    with pytest.raises(Error):\n"
                                "        boom()\n",
             "tests/test_b.py": "from m import double\n\n\ndef test_b():\n    assert double(21) == 43\n"}
    assert _failing_under_pytest(tmp_path, {"m.py": RAISES_HOOK_MODULE, **tests}) == set()
    suites = [compile_suite(text, path) for path, text in tests.items()]
    observed = runner.observe({"m.py": RAISES_HOOK_MODULE}, suites, graded=True)
    assert observed.groups[0].stream.tests[0].slots[0].taken is True
    assert observed.groups[1].stream.tests[0].slots == [43]


TUPLE_TESTS = '''from m import pack, total, unpack


def test_twice():
    data = ([3, 1, 2], [5])
    assert total(data) == 11
    assert total(data) == 11


def test_round_trip():
    assert unpack(pack(3)) == 3
'''

TUPLE_MODULE = '''_kept = []


def total(t):
    s = sum(sum(x) for x in t)
    for x in t:
        x.clear()
    return s


def pack(n):
    box = []
    _kept.append(box)
    return (n, box)


def unpack(p):
    p[1].append(1)
    same = len(_kept[-1]) == 1
    p[1].pop()
    return p[0] + 1 if same else p[0]
'''


def test_containers_inside_a_tuple_are_the_same_objects_as_under_pytest(runner, tmp_path):
    """A list inside a tuple crossed the link as a fresh copy each time, either way: what the code did to the test's
    list in place went unseen, and a list it handed out came back another object (a hundred-and-twelfth attacker's
    `total` emptied the test's lists, and `unpack` told the copy from the same object; the verifier passed both where
    pytest fails them). Lists, dicts and sets inside a message's tuples are shared as top-level ones are; judged as a
    real pytest run judges them."""
    expected = _failing_under_pytest(tmp_path, {"m.py": TUPLE_MODULE, "tests/test_t.py": TUPLE_TESTS})
    assert expected == {"test_twice", "test_round_trip"}
    suite = compile_suite(TUPLE_TESTS, "tests/test_t.py")
    honest = TUPLE_MODULE.replace("        x.clear()\n", "        pass\n").replace("p[0] + 1 if same else p[0]", "p[0]")
    reference = records_by_nodeid([suite], runner.observe({"m.py": honest}, [suite]))
    assert passed(judge_run([suite], runner.observe({"m.py": honest}, [suite]), reference)) == sorted(expected)
    v = judge_run([suite], runner.observe({"m.py": TUPLE_MODULE}, [suite]), reference)
    assert {t.name for t in suite.tests} - set(passed(v)) == expected, v.reasons


STOP_MODULE = '''_calls = []


def f(x):
    _calls.append(x)
    if x < 0:
        raise ValueError(x)
    return 2 * x


def g():
    return True


def calls():
    return list(_calls)
'''
# the reference passes every test: its records give each slot's exact type
STOP_REFERENCE = '''_calls = []
_ANSWERS = {1: 99, 2: 4, -1: 0, 3: 6, 5: 10, 6: 0, 7: 14, 8: 16}


def f(x):
    _calls.append(x)
    if x == 4:
        raise ValueError(x)
    return _ANSWERS[x]


def g():
    return 1


def calls():
    return [1, -1, 4, 6, 8]
'''
STOP_TESTS = '''import pytest
from stop import calls, f, g


def test_fails_first():
    assert f(1) == 99
    assert f(2) == 4


def test_raises_first():
    assert f(-1) == 0
    assert f(3) == 6


def test_did_not_raise():
    with pytest.raises(ValueError):
        f(4)
    assert f(5) == 10


def test_top_level_and():
    assert f(6) == 0 and f(7) == 14


def test_another_type_than_the_references():
    assert g() == 1
    assert f(8) == 16


def test_asked_what_pytest_asks():
    assert calls() == [1, -1, 4, 6, 8]
'''


def test_a_graded_test_stops_where_pytests_stops(runner, tmp_path):
    """pytest ends a test at its first assertion that fails, at an assertion operand that raises and at a
    `pytest.raises` that takes nothing; the driver (which holds no expected value) ran the rest of the test, so the code
    under test was asked for values after a failure under the verifier alone: a tell for a device that sacrifices one
    test. Graded, each assertion is judged on the trusted side as its last operand arrives and the driver stops the
    test there; an assertion this side does not decide as pytest does (here a bool where the reference gives an int,
    which pytest's `==` takes) lets it go on. The code is then asked what a real pytest run asks it, in every test."""
    suite = compile_suite(STOP_TESTS, "tests/test_stop.py")
    failing = _failing_under_pytest(tmp_path, {"stop.py": STOP_MODULE, "tests/test_stop.py": STOP_TESTS})
    assert failing == {"test_fails_first", "test_raises_first", "test_did_not_raise", "test_top_level_and"}
    reference = records_by_nodeid([suite], runner.observe({"stop.py": STOP_REFERENCE}, [suite]))
    assert len(reference) == len(suite.tests)
    graded = runner.observe({"stop.py": STOP_MODULE}, [suite], graded=True, stop_at_failure=reference)
    assert passed(judge_run([suite], graded, reference)) == ["test_asked_what_pytest_asks"]
    # without the verdicts, the rest of each failing test ran: the code was asked for 2, 3, 5 and 7 as well
    unstopped = runner.observe({"stop.py": STOP_MODULE}, [suite], graded=True)
    assert passed(judge_run([suite], unstopped, reference)) == []


def _graded_as_pytest(runner, work, name: str, module: str, reference: str, tests: str, failing: set[str]) -> list[str]:
    """The tests of `tests` (as tests/test_<name>.py) a graded run of module `name` = `module` passes, stopped where
    pytest stops against the reference module's observations, after checking that a real pytest run of `module` fails
    exactly `failing`."""
    path = f"tests/test_{name}.py"
    suite = compile_suite(tests, path)
    assert _failing_under_pytest(work, {f"{name}.py": module, path: tests}) == failing
    want = records_by_nodeid([suite], runner.observe({f"{name}.py": reference}, [suite]))
    assert len(want) == len(suite.tests)
    graded = runner.observe({f"{name}.py": module}, [suite], graded=True, stop_at_failure=want)
    return passed(judge_run([suite], graded, want))


REPR_MODULE = '''_reprs = []


class C:
    def get(self, x):
        return x + 1

    def __repr__(self):
        _reprs.append(1)
        return "C()"


def reprs():
    return len(_reprs)
'''
REPR_REFERENCE = REPR_MODULE.replace("return x + 1", "return {1: 3, 0: 1, 2: 4}[x]").replace("return len(_reprs)", "return 3")
REPR_TESTS = '''from rep import C, reprs


def test_fails_naming_an_object():
    c = C()
    assert c.get(1) == 3


def test_one_repr_so_far():
    assert reprs() == 1


def test_fails_in_a_second_part():
    c = C()
    assert c.get(0) == 1 and c.get(2) == 4


def test_three_reprs_so_far():
    assert reprs() == 3
'''


def test_a_failing_graded_assertion_is_explained_as_pytest_explains_it(runner, tmp_path):
    """pytest explains a failed assertion with the text of the objects it names (`c` in `assert c.get(1) == 3`, a bound
    method by its name; every part of an `assert a and b` evaluated), which runs the code's `__repr__`: code that
    answered wrong could see, by that, whether pytest ran it. Graded, the driver's assertions are pytest's own rewritten
    assertions (the verdict in place of the comparison the verifier keeps), and the text of an object of the code is
    made in its own process by pytest's function: the code's `__repr__` runs as often as under a real pytest run."""
    suite = compile_suite(REPR_TESTS, "tests/test_rep.py")
    failing = _failing_under_pytest(tmp_path, {"rep.py": REPR_MODULE, "tests/test_rep.py": REPR_TESTS})
    assert failing == {"test_fails_naming_an_object", "test_fails_in_a_second_part"}
    reference = records_by_nodeid([suite], runner.observe({"rep.py": REPR_REFERENCE}, [suite]))
    graded = runner.observe({"rep.py": REPR_MODULE}, [suite], graded=True, stop_at_failure=reference)
    assert passed(judge_run([suite], graded, reference)) == ["test_one_repr_so_far", "test_three_reprs_so_far"]
    unexplained = runner.observe({"rep.py": REPR_MODULE}, [suite])  # the plain driver explains nothing
    assert passed(judge_run([suite], unexplained, reference)) == []


PLANT_MODULE = '''_calls = []


def plant(xs):
    class list:  # named like a container: pytest's text of a value holding it formats it by its length and items
        def __len__(self):
            _calls.append("len")
            return 1

        def __iter__(self):
            _calls.append("iter")
            return iter([0])

        def __repr__(self):
            _calls.append("repr")
            return "[0]"

    xs.append(list())
    return len(xs)


def calls():
    return ",".join(_calls)
'''
PLANT_REFERENCE = PLANT_MODULE.replace("return len(xs)", "return 3").replace('return ",".join(_calls)', 'return "len,iter"')
PLANT_TESTS = '''from plant import calls, plant


def test_fails_naming_the_list():
    xs = [1]
    assert plant(xs) == 3


def test_calls_so_far():
    assert calls() == "len,iter"
'''


def test_an_object_of_the_code_inside_a_value_of_the_tests_is_explained_as_pytest_explains_it(runner, tmp_path):
    """pytest's text of a value of the test's (`xs` in `assert plant(xs) == 3`) formats what it holds by each type's
    name: an object of a class of the code named `list` by its `len` and `iter`, where the driver's proxy for it was
    formatted by its `repr`, code that answered wrong could tell the runs apart by that (a hundred-and-eighteenth
    attacker: 0.41 on 7 of 8 tasks). Such an object is formatted in the package by pytest's own function, at the level
    pytest's walk reaches it: the calls the code sees are a real pytest run's."""
    assert _graded_as_pytest(runner, tmp_path, "plant", PLANT_MODULE, PLANT_REFERENCE, PLANT_TESTS,
                             {"test_fails_naming_the_list"}) == ["test_calls_so_far"]


IDENTITY_MODULE = '''_reprs = []


class C:
    def __repr__(self):
        _reprs.append(1)
        return "C()"


def make():
    return C()


def reprs():
    return len(_reprs)
'''
IDENTITY_REFERENCE = IDENTITY_MODULE.replace("return C()", "return None").replace("return len(_reprs)", "return 2")
IDENTITY_TESTS = '''from ident import make, reprs


def test_fails_on_identity():
    assert make() is None


def test_reprs_so_far():
    assert reprs() == 2
'''


def test_a_failed_comparison_is_shown_to_pytests_comparison_hook_as_pytest_shows_it(runner, tmp_path):
    """Explaining a failed comparison, pytest asks its `pytest_assertrepr_compare` hook about the two operands, which
    makes the text of each: a failed `assert make() is None` runs the code's `__repr__` twice under pytest (the hook's
    summary, then the operand in the explanation), where the driver's rewritten `assert _gymsmith_check(...)` ran it
    once (a hundred-and-eighteenth attacker's tell). The driver asks the hook about the pair of operands pytest's
    comparison would (`judge.failing_pair`), with the operands it holds."""
    assert _graded_as_pytest(runner, tmp_path, "ident", IDENTITY_MODULE, IDENTITY_REFERENCE, IDENTITY_TESTS,
                             {"test_fails_on_identity"}) == ["test_reprs_so_far"]


RAISED_MODULE = '''_seen = []


class Arg:
    def __repr__(self):
        _seen.append("r")
        return "Arg()"


class Oops(Exception):
    def __str__(self):
        _seen.append("s")
        return "oops"


class Inner(Exception):
    def __str__(self):
        _seen.append("i")
        return "inner"


BODY


def seen():
    return "".join(_seen)
'''
RAISES = {  # how the code fails the first test: each reaches other parts of pytest's report
    "deep": "def a(arg):\n    raise Oops()\n\n\ndef b(arg):\n    a(arg)\n\n\ndef boom(arg):\n    b(arg)",
    "from": "def boom(arg):\n    try:\n        raise Inner()\n    except Inner as e:\n        raise Oops() from e",
    "context": "def helper(arg):\n    raise Inner()\n\n\ndef boom(arg):\n    try:\n        helper(arg)\n    except Inner:\n"
               "        raise Oops()",
    "builtin": "def boom(arg):\n    return {}[arg]",
}
RAISED_TESTS = '''from rep2 import Arg, boom, seen


def test_fails_by_the_codes_exception():
    boom(Arg())


def test_seen_so_far():
    assert seen() == SEEN
'''


@pytest.mark.parametrize("how", sorted(RAISES))
def test_a_test_failing_by_the_codes_exception_is_reported_as_pytest_reports_it(runner, tmp_path, how):
    """pytest reports a test that failed with an exception of the code's by its own traceback formatter, which makes
    the text of the arguments of the frame that raised (`funcargs`), the exception's text (twice) and each chained
    exception's: code that failed one test so could see, by those calls, whether pytest ran it. Graded, the package
    makes pytest's report over its own frames of the traceback (`rpc._pytest_failure_report`): the calls are those of
    a real pytest run (read from one here: `seen()` under pytest, then asserted in the verifier)."""
    module = RAISED_MODULE.replace("BODY", RAISES[how])
    probe = RAISED_TESTS.replace("SEEN", "None")
    _failing_under_pytest(tmp_path, {"rep2.py": module, "tests/test_rep2.py": probe})
    under_pytest = _pytest_says(tmp_path, "seen()")
    assert under_pytest and set(under_pytest) <= set("rsi"), under_pytest
    tests = RAISED_TESTS.replace("SEEN", repr(under_pytest))
    fixed = module.replace("def boom(arg):", "def boom(arg):\n    return arg\n\n\ndef _was(arg):").replace(
        'return "".join(_seen)', f"return {under_pytest!r}")
    assert _graded_as_pytest(runner, tmp_path, "rep2", module, fixed, tests,
                             {"test_fails_by_the_codes_exception"}) == ["test_seen_so_far"]


def _pytest_says(work, expression: str) -> str:
    """The value of `expression` at the end of a real pytest run of `tests/` in `work` (each test file's module
    `rep2`), written by a last test file."""
    import subprocess
    import sys

    (work / "tests" / "test_zz_probe.py").write_text(
        f"import pathlib\nfrom rep2 import seen\n\n\ndef test_probe():\n    pathlib.Path({str(work / 'said')!r})"
        f".write_text({expression})\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir",
                    str(work), "--import-mode=importlib", str(work / "tests")], cwd=work, capture_output=True,
                   env={"PYTHONPATH": str(work), "PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    (work / "tests" / "test_zz_probe.py").unlink()
    return (work / "said").read_text()


EXIT_MODULE = '''_seen = []


class CM:
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        try:
            raise KeyError("inside")
        except KeyError as e:
            _seen.append("C" if e.__context__ is not None else "N")
        if kind is ValueError:
            raise
        return False


def boom():
    raise ValueError("body")


def seen():
    return "".join(_seen)
'''
EXIT_REFERENCE = EXIT_MODULE.replace('    raise ValueError("body")', "    return None").replace(
    'return "".join(_seen)', 'return "C"')
EXIT_TESTS = '''from cm import CM, boom, seen


def test_fails_in_the_with_body():
    with CM():
        boom()


def test_seen_so_far():
    assert seen() == "C"
'''


def test_the_codes_exit_runs_while_the_exception_is_handled(runner, tmp_path):
    """Python calls a context manager's `__exit__` while the body's exception is being handled: an exception raised
    there gets it as `__context__`, and a bare `raise` re-raises it. The package called it after handling ended, so
    the code saw no context and its bare `raise` failed (a hundred-and-twenty-first attacker, on hand-made tests)."""
    assert _graded_as_pytest(runner, tmp_path, "cm", EXIT_MODULE, EXIT_REFERENCE, EXIT_TESTS,
                             {"test_fails_in_the_with_body"}) == ["test_seen_so_far"]


UNJUDGED_MODULE = '''_seen = []


class Counted:
    def __eq__(self, other):
        _seen.append(other)
        return False

    __hash__ = object.__hash__


def answer(x):
    return Counted() if x == 1 else None if x == 2 else 2 * x


def seen():
    return len(_seen)
'''
UNJUDGED_REFERENCE = UNJUDGED_MODULE.replace("return Counted() if x == 1 else None if x == 2 else 2 * x", "return 2 * x")
UNJUDGED_TESTS = '''from obj import answer, seen


def test_compared():
    assert answer(1) == 2


def test_none_where_an_int_is_due():
    assert answer(2) == 4 and answer(3) == 6


def test_asked_after():
    assert answer(4) == 8
'''


def test_a_graded_run_where_pytest_would_run_the_codes_methods_to_decide_is_not_judged(runner, tmp_path):
    """pytest decides `assert answer(1) == 2` by calling the `__eq__` of the object the code returned, with the
    expected value, which never leaves the verifier's side: the code sees that call under pytest and not here (a
    hundred-and-sixteenth attacker gave up one test so, and was right only where no call came: 0.41-0.43 on 27 of 27
    tasks, pytest earning 0). Such a graded run judges no test. A plain value of another type than the reference's
    (`None` where an int is due) is decided as pytest decides it, so the test stops where pytest's does."""
    suite = compile_suite(UNJUDGED_TESTS, "tests/test_obj.py")
    assert _failing_under_pytest(tmp_path, {"obj.py": UNJUDGED_MODULE, "tests/test_obj.py": UNJUDGED_TESTS}) == {
        "test_compared", "test_none_where_an_int_is_due"}
    reference = records_by_nodeid([suite], runner.observe({"obj.py": UNJUDGED_REFERENCE}, [suite]))
    graded = runner.observe({"obj.py": UNJUDGED_MODULE}, [suite], graded=True, stop_at_failure=reference)
    verdicts = judge_run([suite], graded, reference, graded=True)
    assert passed(verdicts) == [] and "the run is not judged" in verdicts.reasons["tests/test_obj.py::test_asked_after"]
    assert passed(judge_run([suite], graded, reference)) == ["test_asked_after"]  # each test on its own, as before
    assert len(graded.groups[0].stream.tests[1].slots) == 1  # `answer(3)` was not asked, as under pytest
    plain = UNJUDGED_MODULE.replace("return Counted() if x == 1", "return 3 if x == 1")
    honest = judge_run([suite], runner.observe({"obj.py": plain}, [suite], graded=True, stop_at_failure=reference),
                       reference, graded=True)
    assert passed(honest) == ["test_asked_after"]


INTERRUPT_MODULE = '''_asked = []


class Loud(ValueError):
    def __str__(self):
        raise KeyboardInterrupt


class Noisy:
    def __repr__(self):
        raise KeyboardInterrupt


def _boom(arg):
    raise ValueError("no")


class Textless:
    def __str__(self):
        raise ValueError("no text")


class Odd(SyntaxError):
    pass


def _odd():
    error = Odd("odd")
    error.lineno = Textless()  # the report's text of it raises: pytest's report fails, an internal error
    return error


class Noted(Exception):
    @property
    def __notes__(self):
        raise ValueError("no notes")


def _noted():
    try:
        raise Noted()
    except Noted as cause:
        raise ValueError("outer") from cause


def f(x):
    _asked.append(x)
    if len(_asked) == 1:
        FIRST
    return 2 * x
'''
INTERRUPTS = {  # how the code's first call ends pytest's session
    "direct": "raise KeyboardInterrupt",
    "subclass": "raise type('Stop', (KeyboardInterrupt,), {})()",
    "raises": "raise KeyboardInterrupt",  # inside `pytest.raises(ValueError)`, which does not take it
    "report": "_boom(Noisy())",  # the test fails by a ValueError; pytest's report makes the text of `arg`
    "text": "raise Loud()",  # ... and of the exception, which pytest's report survives: the session goes on
    "internal": "raise _odd()",  # an exception out of pytest's report: INTERNALERROR, the session ends
    "notes": "_noted()",  # ... read from a chained exception that never crosses to the test
}
INTERRUPT_TESTS = {"tests/test_a.py": '''import pytest
from intr import f


def test_first():
    FIRST


def test_second():
    assert f(2) == 4
''', "tests/test_b.py": '''from intr import f


def test_third():
    assert f(3) == 6
'''}


def _passing_under_pytest(work, files: dict[str, str]) -> set[str]:
    """The names of the tests a real pytest run of `tests/` passes (one session), as `_failing_under_pytest` runs it."""
    return _named(_pytest_summary(work, files), "PASSED ")


@pytest.mark.parametrize("how", sorted(INTERRUPTS))
def test_what_ends_pytests_session_in_a_test_ends_the_verifiers_run(runner, tmp_path, how):
    """pytest's runner re-raises a KeyboardInterrupt out of a test, and an exception out of its report of a failed test
    is an internal error: either ends the session, and no later test runs, in this file or the next. The verifier
    took them as the test's failure and went on, so code that raised one where its answer was wrong, then gave the
    fix, was asked again under the verifier alone (a hundred-and-twenty-second attacker: 0.41-0.43 on 15 of 15 tasks;
    a hundred-and-twenty-fifth, through the report: 17 of 17; pytest passing no FAIL_TO_PASS test). Now the driver
    ends the run there and the trusted side fails that test and every later one."""
    module = INTERRUPT_MODULE.replace("FIRST", INTERRUPTS[how])
    first = ("with pytest.raises(ValueError):\n        f(1)" if how == "raises" else "assert f(1) == 2")
    tests = {path: text.replace("FIRST", first) for path, text in INTERRUPT_TESTS.items()}
    under_pytest = _passing_under_pytest(tmp_path, {"intr.py": module, **tests})
    assert under_pytest == ({"test_second", "test_third"} if how == "text" else set())
    suites = [compile_suite(text, path) for path, text in tests.items()]
    reference = records_by_nodeid(suites, runner.observe({"intr.py": "def f(x):\n    return 2 * x\n"}, suites))
    graded = runner.observe({"intr.py": module}, suites, graded=True, stop_at_failure=reference)
    verdicts = judge_run(suites, graded, reference, one_session=True, graded=True)
    assert set(passed(verdicts)) == under_pytest, verdicts.reasons
    if how != "text":
        assert "ended pytest's session" in verdicts.reasons["tests/test_b.py::test_third"]
        # the code was asked nothing after the interrupt: the second file's driver never ran
        assert graded.groups[1].status == "skipped" and not graded.groups[1].stream.tests
    # the same code raising a ValueError instead fails the first test only, under pytest and here
    plain = INTERRUPT_MODULE.replace("FIRST", "raise ValueError(x)")
    assert _passing_under_pytest(tmp_path, {"intr.py": plain, **tests}) == (
        {"test_first", "test_second", "test_third"} if how == "raises" else {"test_second", "test_third"})
    calm = judge_run(suites, runner.observe({"intr.py": plain}, suites, graded=True, stop_at_failure=reference),
                     reference, one_session=True, graded=True)
    assert set(passed(calm)) == ({"test_first"} if how == "raises" else set()) | {"test_second", "test_third"}


OSERROR_MODULE = '''def plain(n):
    e = OSError()
    e.args = (n, "no such thing")
    raise e


def made(n):
    raise OSError(n, "no such thing", "f.txt")


def named(n):
    e = OSError(n, "no such thing")
    e.filename = "g.txt"
    raise e
'''
OSERROR_TESTS = '''import pytest
from oserr import made, named, plain


def test_plain_is_no_file_not_found():
    with pytest.raises(FileNotFoundError):
        plain(2)


def test_plain_is_an_oserror():
    with pytest.raises(OSError):
        plain(2)


def test_made_is_file_not_found():
    with pytest.raises(FileNotFoundError):
        made(2)


def test_named_is_file_not_found():
    with pytest.raises(FileNotFoundError):
        named(2)


def test_plain_is_no_permission_error():
    with pytest.raises(PermissionError):
        plain(13)
'''


def test_a_builtin_exception_is_rebuilt_with_the_codes_own_type(runner, tmp_path):
    """The driver rebuilds a builtin exception of the code's from its class and arguments; calling `OSError(2, ...)`
    makes a FileNotFoundError, so an OSError whose arguments the code set after making it was another type in the
    driver: `pytest.raises(FileNotFoundError)` passed where pytest fails it (seen by a hundred-and-thirty-first
    attacker, not built into a device). The rebuilt exception now has the code's exception's type."""
    passed_here = _graded_as_pytest(runner, tmp_path, "oserr", OSERROR_MODULE, OSERROR_MODULE, OSERROR_TESTS,
                                    {"test_plain_is_no_file_not_found", "test_plain_is_no_permission_error"})
    assert passed_here == ["test_made_is_file_not_found", "test_named_is_file_not_found", "test_plain_is_an_oserror"]
