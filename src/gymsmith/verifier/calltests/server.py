"""The call-check server. Runs INSIDE a verifier sandbox as its pid 1, with the standard library and pytest only.

It reads jobs as JSON lines on stdin:
    {"id": 1, "dir": "/jobs/1", "groups": [{"path": "tests/test_lru.py", "driver": "<source>", "tests": ["test_a", ...]}],
     "group_timeout": 2.0, "deadline": 5.0, "max_bytes": 4194304, "remote": ["lru"], "hash_seed": 0}
(a group may also give "depth_shift": {"import": n, "call": m, "ops": {op: k}}, the package process's recursion limit
moved by them while it imports or serves the test's requests, less each request's depth in its test; see
group_depth_shift and rpc.PackagePolicy; and a job "hook_modules": [module, ...], the only modules whose classes may
have look-up hooks: job_hook_modules; a graded group also gives "assertions": per test, the slots at which its
assertions end, and "joined": those that continue an `assert a and b`, so that its driver runs pytest's own rewritten
assertions (`driver_code`), and "verdicts": true when the host judges each assertion as it arrives: then, during the
group, the host writes lines {"verdict": <job id>, "group": i, "test": t, "slot": k, "go": bool} (or "end": true)
that the server passes to the driver, which waits for each: `child`)
For each group (a test file) it forks a *driver* process that runs the driver's statements and never imports the
code under test: an import of a "remote" module is a proxy to the job's *package* process, which imports the code
under test from the job directory and answers the driver's requests (`rpc.py`). One package process serves every
group of a job in turn, as pytest runs every test file in one process, and the first group's driver imports and
collects every group's test module (with pytest's own collection, configured once here) before its tests run, as a
pytest run does. Package processes are forked by the
*zygote*, a fresh interpreter started once per `hash_seed` (the PYTHONHASHSEED the code under test runs with; it
never holds a job's tests), each in its own user, mount, IPC, network and pid namespaces. The driver writes observations on a private pipe (the format is in `wire.py`). The
server itself never imports or calls the code under test, and never reads what the driver wrote: it splices the
bytes, in the kernel, to its stdout as frames (a header line {"frame": <group>, "n": <bytes>} and the raw bytes),
so no result ever lies in the memory later children are forked from. Then, how each driver ended:
    {"id": 1, "groups": [{"status": "exited"|"timeout"|"overflow"|"skipped", "exit": <code or -signal>}], "cpu": <its own CPU s>}
("skipped": not run, since an earlier group's driver ended pytest's session: ENDED_EXIT)
After each group the driver's processes are killed; after a group that hung, flooded or crashed, and after the
job, every process in the sandbox but the zygote is (the next group or job gets a fresh package process), so
nothing a job started can write into the next one. The server and the zygote are non-dumpable (no ptrace, no /proc/<pid>/mem for the package
processes) and, as pid 1 of the namespace, the server cannot be killed by them.
"""

import builtins
import gc
import json
import os
import pathlib
import resource
import select
import signal
import socket
import struct
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpc  # noqa: E402 - mounted next to this file
from pid1 import kill_others, set_dumpable, world_works  # noqa: E402 - mounted next to this file

sys.path.pop(0)




# -- a group: the driver's process and the package's ---------------------------------------------------
ZYGOTE = {"pid": None, "socket": None, "hash_seed": None}  # the process package processes are forked from


def job_hash_seed(job):
    """The job's PYTHONHASHSEED for the code under test (0 unless the host gave one in 0..2**32-1)."""
    seed = job.get("hash_seed", 0)
    return seed if type(seed) is int and 0 <= seed <= 4294967295 else 0


def group_depth_shift(group):
    """The recursion-limit shifts the group's package process serves graded code under, as JSON text: {"import":
    int, "call": int, "ops": {name: int}}, each in -500..500 (empty: the package process serves at its own depth,
    unless the host gave them; see `rpc.PackagePolicy`)."""
    shift = group.get("depth_shift")
    if type(shift) is not dict or set(shift) - {"ops"} != {"import", "call"}:
        return ""
    ops = shift.get("ops", {})
    if type(ops) is not dict or len(ops) > 100 or not all(type(k) is str and len(k) <= 16 for k in ops):
        return ""
    if not all(type(v) is int and -500 <= v <= 500 for v in (shift["import"], shift["call"], *ops.values())):
        return ""
    return json.dumps({"import": shift["import"], "call": shift["call"], "ops": ops}, separators=(",", ":"))


def job_hook_modules(job):
    """The modules whose classes may have look-up hooks in a graded job, and the code under test's top-level modules,
    as JSON text ({"allowed": [...], "own": [...]}: `rpc.PackagePolicy`); empty: any class may (the host gave no
    list)."""
    names, own = job.get("hook_modules"), job.get("remote", [])
    if not all(type(x) is list and len(x) <= 1000 and all(type(n) is str and len(n) <= 200 for n in x)
               for x in (names, own)):
        return ""
    return json.dumps({"allowed": names, "own": own})


def remaining_reader():
    """A function giving how many frames this thread has left before RecursionError (CPython 3.11's thread state
    `recursion_remaining`: frames and the C calls that count as frames), or None where it cannot be read as that
    (checked here: one frame deeper is one fewer, a limit moved by k moves it by k). The driver reads it so that
    the package process can serve each request at the depth the test made it (`rpc.PackagePolicy`)."""
    if sys.version_info[:2] != (3, 11) or sys.implementation.name != "cpython":
        return None
    try:
        import ctypes

        state = ctypes.pythonapi.PyThreadState_Get
        state.restype = ctypes.c_void_p
        # PyThreadState (3.11): prev, next, interp, int _initialized, int _static, int recursion_remaining
        field = ctypes.c_int

        def remaining():
            return field.from_address(state() + 32).value

        def deeper():
            return remaining()

        here, below = remaining(), deeper()
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + 100)
        try:
            moved = remaining()
        finally:
            sys.setrecursionlimit(limit)
        if here - below != 1 or moved - here != 100 or not 0 < here <= limit:
            return None
        return remaining
    except (ImportError, AttributeError, OSError, ValueError):
        return None


def start_zygote(hash_seed):
    """Start the zygote: a fresh interpreter (exec'd, so its memory holds nothing of this server's, no job ever)
    that forks a package process for each job on request (`rpc.zygote_main`). Forking it costs a few
    milliseconds where starting an interpreter per file cost ~35. It is spared by `kill_others` and restarted if it
    is ever gone."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    script = os.path.join(os.path.dirname(os.path.abspath(rpc.__file__)), "rpc.py")
    paths = json.dumps([p for p in sys.path if p and not p.startswith("/run/")])
    pid = os.fork()
    if pid == 0:
        try:
            fd = theirs.fileno()
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):  # never this server's stdout: the host reads results there
                os.dup2(null, target)
            os.closerange(3, fd)
            os.closerange(fd + 1, 1 << 16)
            os.set_inheritable(fd, True)
            # the seed is fixed when the interpreter starts: every package process forked from it hashes alike
            os.execve(sys.executable, [sys.executable, "-S", "-P", "-s", script, "--zygote", str(fd), paths],
                      dict(os.environ, PYTHONHASHSEED=str(hash_seed)))
        finally:
            os._exit(70)
    theirs.close()
    ZYGOTE.update(pid=pid, socket=ours, hash_seed=hash_seed)


def ensure_zygote(hash_seed):
    """A live zygote whose package processes run under `hash_seed` (one with another seed is replaced)."""
    pid = ZYGOTE["pid"]
    if pid is not None:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if not done and ZYGOTE["hash_seed"] == hash_seed:
            return
        if not done:
            os.kill(pid, signal.SIGKILL)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        ZYGOTE["socket"].close()
    start_zygote(hash_seed)


PACKAGE = {"socket": None}  # the control socket of the job's package process (None: none running)


def ensure_package(job):
    """The job's package process: one for all its groups, as pytest runs every test file in one process (a repair
    right only for its first calls in a process told one process per file from pytest: an eighty-seventh attacker).
    The zygote forks it once, with the job's files; each group's driver then hands it the ends of its link over
    the control socket (`rpc.serve_links`). It lives until the job ends or a group ends abnormally."""
    if PACKAGE["socket"] is not None:
        return
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # one way only: the package process cannot write into it (a flood would fill a buffer nobody reads, and hang
    # it), nor can its end be made writable again
    theirs.shutdown(socket.SHUT_WR)
    ours.shutdown(socket.SHUT_RD)
    socket.send_fds(ZYGOTE["socket"], [job["dir"].encode()], [theirs.fileno()])
    theirs.close()
    PACKAGE["socket"] = ours


def end_package():
    """Close the job's package process's control socket (it exits; `kill_others` makes sure)."""
    if PACKAGE["socket"] is not None:
        PACKAGE["socket"].close()
        PACKAGE["socket"] = None


CURRENT = [0]  # the driver's test being run (index into its group's tests)
VERDICT = struct.Struct("<II?H")  # a verdict in the driver's pipe: test, slot, go on, pair (`group_compares`)


def group_assertion_ends(group):
    """Per test of the group, the set of slots at which an assertion's observations end (a graded job's: `child`);
    None where the host gave none (an ungraded job) or gave them malformed."""
    ends = group.get("assertions")
    if type(ends) is not list or len(ends) != len(group["tests"]):
        return None
    if not all(type(p) is list and len(p) <= 10_000 and all(type(k) is int for k in p) for p in ends):
        return None
    return [set(p) for p in ends]


def group_compares(group):
    """Per test of the group, {end slot: [(op, left slot, right slot), ...]} for each assertion that is one comparison
    (the host's `compares_by_end`); empty where the host gave none or gave them malformed."""
    given = group.get("compares")
    out = [{} for _ in group["tests"]]
    if type(given) is not list or len(given) != len(out):
        return out
    for by_end, entries in zip(out, given):
        for entry in entries if type(entries) is list else ():
            if type(entry) is list and len(entry) == 2 and type(entry[0]) is int and type(entry[1]) is list and all(
                    type(p) is list and len(p) == 3 and type(p[0]) is str and all(x is None or type(x) is int for x in p[1:])
                    for p in entry[1]) and entry[1]:
                by_end[entry[0]] = [tuple(p) for p in entry[1]]
    return out


def group_verdicts(group):
    """Whether the host judges each of the group's assertions as it arrives (the driver waits for its verdict)."""
    return group.get("verdicts") is True and group_assertion_ends(group) is not None


def as_pytest_asserts(source, filename, ends_by_test):
    """The driver module `source` compiled as pytest compiles a test module, its assertions rewritten by pytest's own
    rewriter: each assertion's observations (`_gymsmith_observe(k, lambda: E)`, consecutive statements up to the slot
    where the assertion ends, `ends_by_test`) become one `assert _gymsmith_check((k, ...), E, ...)`, so the operands
    are evaluated in the test's frame as pytest evaluates them, and a failing one is explained as pytest explains it
    (its `repr` of the objects the assertion names: `c` and `c.get` in `assert c.get(1) == 2`), the verdict standing
    for the comparison the verifier keeps. None where pytest's rewriter is not here (the plain driver runs)."""
    try:
        import ast

        from _pytest.assertion.rewrite import rewrite_asserts
    except ImportError:
        return None
    tree = ast.parse(source, filename)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ends_by_test:
            node.body = grouped_assertions(ast, node.body, *ends_by_test[node.name])
    rewrite_asserts(tree, source.encode(), pathlib.Path(filename), None)
    for node in ast.walk(tree):  # its text of an object: asked of the object's own process (`_gymsmith_saferepr`)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_saferepr" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "@pytest_ar":
            node.func = ast.copy_location(ast.Name("_gymsmith_saferepr", ast.Load()), node.func)
    return compile(tree, filename, "exec")


DRIVER_CODE: dict = {}  # a graded group's driver, rewritten (`driver_code`), by its source and assertions


def driver_code(group):
    """The group's driver compiled as pytest compiles a test module (`as_pytest_asserts`), or None for an ungraded
    group. Made once per driver in this server, before the group's process is forked (rewriting costs 20-70 ms a
    file, and the first group's driver collects every later file too): a driver holds no expected value and no
    result, only the test's statements."""
    ends = group_assertion_ends(group)
    if ends is None:
        return None
    joined = group.get("joined")
    joined = [set(j) if type(j) is list and all(type(k) is int for k in j) else set() for j in joined] \
        if type(joined) is list and len(joined) == len(ends) else [set() for _ in ends]
    key = (group["driver"], group["path"], json.dumps(group["assertions"]), json.dumps(group.get("joined")))
    if key not in DRIVER_CODE:
        if len(DRIVER_CODE) >= 64:
            DRIVER_CODE.clear()
        try:
            DRIVER_CODE[key] = as_pytest_asserts(group["driver"], group["path"],
                                                 {name: (e, j) for name, e, j in zip(group["tests"], ends, joined)})
        except Exception:  # noqa: BLE001 - a driver that does not compile fails in its own process, never this one
            DRIVER_CODE[key] = None
    return DRIVER_CODE[key]


def grouped_assertions(ast, body, ends, joined):
    """`body` with each run of observations that ends an assertion made one `assert _gymsmith_check(...)`, and the
    parts of one `assert a and b` (`joined`: the ends of its later parts) one `assert _gymsmith_check(...) and ...`."""
    out, run, ours = [], [], None
    for statement in body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        observed = (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_gymsmith_observe"
                    and len(call.args) == 2 and not call.keywords and isinstance(call.args[0], ast.Constant)
                    and type(call.args[0].value) is int and isinstance(call.args[1], ast.Lambda))
        if not observed:
            out += run + [statement]
            run, ours = [], None
            continue
        run.append(statement)
        end = call.args[0].value
        if end in ends:
            slots = ast.Tuple([ast.Constant(s.value.args[0].value) for s in run], ast.Load())
            check = ast.Call(ast.Name("_gymsmith_check", ast.Load()), [slots, *(s.value.args[1].body for s in run)], [])
            if end in joined and ours is not None and out and out[-1] is ours:
                ours.test = ast.BoolOp(ast.And(), [*(ours.test.values if isinstance(ours.test, ast.BoolOp) else [ours.test]),
                                                   check])
            else:
                ours = ast.copy_location(ast.Assert(check, None), run[0])
                out.append(ours)
            run = []
    out += run
    for node in out:
        ast.fix_missing_locations(node)
    return out


def module_name(group):
    """The dotted name of a group's test module (`tests/test_x.py`: `tests.test_x`)."""
    return group["path"][:-3].replace("/", ".")


def child(index, group, job, w, verdicts=None):
    """The driver's process: runs the test's statements and never imports the code under test, which lives in a
    process of its own (the job's package process, `ensure_package`); an import of it here is a proxy (`rpc.py`).
    What it observes is therefore what the package returned for the test's calls, and the agent's code cannot reach
    this process. The first group's driver first imports and collects (`collect`) its own and every later group's
    module, in order, as a pytest run does before any test runs. With `verdicts` (the read end of a pipe the server
    writes the host's verdicts into; `group_verdicts`), each test stops where pytest's would: at an observed
    expression that raised, and at an assertion the host finds failing (the driver waits for its verdict after the
    assertion's last observation)."""
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = sorted({w, PACKAGE["socket"].fileno(), *([verdicts] if verdicts is not None else [])})
    for low, high in zip([2, *keep], [*keep, 1 << 16]):
        os.closerange(low + 1, high)
    ends = group_assertion_ends(group)  # a graded job's: its tests run as pytest runs them (assertions, raises)
    compares = group_compares(group)
    requests_r, requests_w = os.pipe()
    answers_r, answers_w = os.pipe()
    # the ends of this group's link, with the shift of the package process's recursion limit (`group_depth_shift`);
    # if the package process is gone, the first request finds the link broken
    try:
        socket.send_fds(PACKAGE["socket"], [f"link\n{group_depth_shift(group)}\n{job_hook_modules(job)}".encode()],
                        [requests_r, answers_w])
    except OSError:
        pass
    PACKAGE["socket"].close()
    os.close(requests_r)
    os.close(answers_w)
    os.chdir("/")
    sys.path[:] = [p for p in sys.path if not p.startswith("/run/")]
    sys.stdout = sys.stderr = open(os.devnull, "w")
    link = rpc.Link(answers_r, requests_w, rpc.DriverPolicy(module_name(group)))
    link.remaining = REMAINING
    remote = set(job.get("remote", ()))
    real_import = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.partition(".")[0] in remote:
            return link.request("import", name, (tuple(fromlist or ()),))
        return real_import(name, globals, locals, fromlist, level)

    def send(message):
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(w, data):]

    def name_of(cls):
        try:
            module, qualname = cls.__module__, cls.__qualname__
            return [module if type(module) is str else "?", qualname if type(qualname) is str else "?"]
        except BaseException:  # noqa: BLE001
            return ["?", "?"]

    def encode(v, depth=0):
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            try:
                return {"i": str(v)}
            except ValueError:  # more digits than int->str allows
                return {"x": "int"}
        if t is float:
            return {"f": repr(v)}
        if t is bytes:
            return {"b": v.hex()}
        if depth > 60:
            return {"x": "deep"}
        if t is list:
            return {"l": [encode(x, depth + 1) for x in v]}
        if t is tuple:
            return {"t": [encode(x, depth + 1) for x in v]}
        if t is set:
            return {"s": [encode(x, depth + 1) for x in v]}
        if t is frozenset:
            return {"fs": [encode(x, depth + 1) for x in v]}
        if t is dict:
            return {"d": [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in v.items()]}
        if issubclass(t, link.Proxy):  # an object of the package's: never equal to anything (as any other type)
            return {"x": object.__getattribute__(v, "_gs_type")}
        return {"x": ".".join(name_of(t))}

    def mro(exc):
        return rpc.exception_mro(exc)[:64]

    def interrupts(exc):
        """Whether pytest's runner would re-raise `exc` out of the test (`CallInfo.from_call(reraise=(Exit,
        KeyboardInterrupt))`), which ends its session: no later test runs. An exception the package raised is its
        own, by the MRO it reports (a stand-in class may have dropped a base whose layout conflicted); a class of the
        code claiming the name only ends this run early, which costs the code alone."""
        return isinstance(exc, KeyboardInterrupt) or ["builtins", "KeyboardInterrupt"] in mro(exc)

    def verdict(slot):
        """After an assertion's last observation, the host's verdict ((True, None) where there is none to wait for):
        whether its test goes on, as pytest's would, and the pair of operands pytest's comparison hook would be asked
        about (a verdict for another slot is stale and skipped; the end of the pipe stops the test)."""
        if verdicts is None or ends is None or slot not in ends[CURRENT[0]]:
            return True, None
        while True:
            data = b""
            while len(data) < VERDICT.size and (more := os.read(verdicts, VERDICT.size - len(data))):
                data += more
            if len(data) < VERDICT.size:
                return False, None  # no verdict will come: the test stops
            test, at, go, pair = VERDICT.unpack(data)
            if (test, at) == (CURRENT[0], slot):
                return go, pair

    def judged(slot):
        if not verdict(slot)[0]:
            raise AssertionError  # as pytest's assertion: the test stops

    class Outcome:
        """What an assertion's `check` gives pytest's rewritten assertion: true where its test goes on. Explaining a
        failed assertion, pytest's code asks for its text (`saferepr`), which first asks pytest's comparison hook
        about the pair of operands a real pytest run's comparison would show it (`compare`)."""

        __slots__ = ("go", "test", "slots", "values", "pair")

        def __init__(self, go, test, slots, values, pair):
            self.go, self.test, self.slots, self.values, self.pair = go, test, slots, values, pair

        def __bool__(self):
            return self.go

    def check(slots, *values):
        """An assertion rewritten by pytest's rewriter (`as_pytest_asserts`): its observed operands, evaluated in the
        test's frame, sent; the verdict is its outcome (a failing one is explained by pytest's rewritten code)."""
        for slot, value in zip(slots, values):
            observed(slot, value)
        go, pair = verdict(slots[-1])
        return Outcome(go, CURRENT[0], slots, values, pair)

    def compare(outcome):
        """pytest's comparison hook, asked as pytest's explanation of `a op b` asks it (`_call_reprcompare`): about
        the first pair of operands that does not hold, else the last, with the operands themselves. Under pytest it
        makes the text of each (a second `repr` of an object of the code in a failed `assert x is None`: a
        hundred-and-eighteenth attacker's tell). A literal operand, which the driver does not hold, is None here:
        plain either way, no code of the package's runs for it. Asked only where an operand holds an object of the
        code (for plain values the hook runs no code)."""
        pairs = compares[outcome.test].get(outcome.slots[-1]) if outcome.test < len(compares) else None
        session = COLLECTION.get("session")
        if not pairs or session is None:
            return
        op, left, right = pairs[outcome.pair if outcome.pair is not None and outcome.pair < len(pairs) else -1]
        held = dict(zip(outcome.slots, outcome.values))
        left, right = held.get(left), held.get(right)
        if holds_proxy(left) or holds_proxy(right):
            session.config.hook.pytest_assertrepr_compare(config=session.config, op=op, left=left, right=right)

    def holds_proxy(value, budget=None):
        budget = budget if budget is not None else [10_000]
        budget[0] -= 1
        if budget[0] < 0 or issubclass(type(value), link.Proxy):
            return True
        if type(value) in (list, tuple, set, frozenset):
            return any(holds_proxy(x, budget) for x in value)
        if type(value) is dict:
            return any(holds_proxy(k, budget) or holds_proxy(x, budget) for k, x in value.items())
        return False

    def saferepr(obj):
        """pytest's text of `obj` in a failed assertion's explanation: the package makes it of its own objects."""
        if type(obj) is Outcome:
            compare(obj)
            return repr(obj.go)
        if issubclass(type(obj), link.Proxy):
            return text_of(link.request("saferepr", object.__getattribute__(obj, "_gs_id")))
        from _pytest.assertion.rewrite import _saferepr

        return _saferepr(obj)

    def text_of(value):
        if type(value) is not str:
            link.fail("a text that is not a string")
        return value

    class ReprRaised(Exception):
        """What an object of the code raised while the package made pytest's text of it (`saferepr_at`): pytest's
        `SafeRepr.repr` names it by this text."""

        def __repr__(self):
            return self.args[0]

    try:
        from _pytest._io.saferepr import SafeRepr
    except ImportError:  # a plain driver (no pytest here): no explanations
        pass
    else:
        base_repr1 = SafeRepr.repr1

        def repr1(self, x, level):
            """pytest's text of a value of the test's is made here, but an object of the code met inside it is
            formatted by the package, at the level pytest's walk reaches it (`rpc._pytest_saferepr_at`): pytest
            formats it by its type's name (a class named `list`: its `len` and `iter`), a proxy only by `repr` (a
            hundred-and-eighteenth attacker planted such a class in the test's list: 0.41 on 7 of 8 tasks)."""
            if not issubclass(type(x), link.Proxy):
                return base_repr1(self, x, level)
            text = link.request("saferepr_at", object.__getattribute__(x, "_gs_id"),
                                (level, self.maxsize, self.use_ascii))
            if type(text) is tuple and len(text) == 2 and text[0] == "raised":
                raise ReprRaised(text_of(text[1]))
            return text_of(text)

        SafeRepr.repr1 = repr1

    def observed(slot, value):
        try:
            send({"slot": slot, "v": encode(value)})
        except RecursionError:
            send({"slot": slot, "v": {"x": "deep"}})

    def observe(slot, fn):
        link.observing = OBSERVE_UNITS  # this frame and the lambda's: pytest evaluates the expression in the test's
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 - whatever the code under test raised is the observation
            send({"slot": slot, "raised": mro(exc)})
            if ends is not None or interrupts(exc):
                raise  # under pytest it ends the test (an interrupt, the session): the code is asked nothing more
            return
        finally:
            link.observing = 0
        observed(slot, value)
        judged(slot)

    class Raises:
        """`with pytest.raises(named):` — records what the block raised and whether it is an instance of a class the
        test named (the classes themselves: local classes stand one for each class of the package's, `rpc`)."""

        def __init__(self, slot, named=()):
            self.slot, self.named = slot, named if type(named) is tuple else (named,)

        def __enter__(self):
            return self

        def __exit__(self, kind, exc, tb):
            if kind is None:
                send({"slot": self.slot, "v": None})
                judged(self.slot)  # pytest's "DID NOT RAISE"
                return False
            # as pytest's `isinstance(exc, named)`, one class at a time in order: the package decides on its own
            # objects when both are its (`rpc.Link.instance_there`); else only classes of this process (a proxy's
            # `__subclasscheck__` would ask the package; a stand-in's is type's)
            taken = False
            for c in self.named:
                if type(c) in (type, rpc.StandIn) and issubclass(c, BaseException):
                    there = link.instance_there(exc, c)
                    taken = issubclass(kind, c) if there is None else there
                    if taken:
                        break
            send({"slot": self.slot, "raised": mro(exc), "is": taken})
            if not taken and interrupts(exc):
                return False  # it goes on, and ends the session (the test loop)
            judged(self.slot)  # not taken: under pytest the exception goes on and ends the test
            return True

    def report(exc):
        """pytest's report of a test that failed with `exc` (a graded run's), as far as it reaches the code: for each
        exception of the chain pytest's report walks (`__cause__`, else `__context__` unless suppressed) that the
        package raised, the package makes pytest's report over its own frames (`rpc._pytest_failure_report`), which
        runs the code's `__repr__` of the arguments of the frame that raised and its exception's `__str__` as a real
        pytest run's report does."""
        seen = set()
        while exc is not None and id(exc) not in seen and not link.broken:
            seen.add(id(exc))
            origin = link.origin_of(exc)
            if origin is not None:  # what it raises escaped pytest's report: the caller ends the run
                link.request("report", origin, ())
            exc = exc.__cause__ if exc.__cause__ is not None else None if exc.__suppress_context__ else exc.__context__

    def module(of):
        """A module object for a driver to run in (pytest's collection is given the module itself, `collect`)."""
        held = types.ModuleType(module_name(of))
        vars(held).update({"_gymsmith_observe": observe, "_gymsmith_raises": Raises, "_gymsmith_check": check,
                           "_gymsmith_saferepr": saferepr,
                           "__builtins__": {**vars(builtins), "__import__": import_}})
        return held

    own = module(group)
    namespace = vars(own)
    later = job["groups"][index + 1:] if index == 0 else []
    collecting = None
    try:
        # the package process takes the warnings state pytest collects in (`rpc.warnings_phase`), told with the
        # first request (no round trip of its own)
        link.phase_due = index == 0
        # its own file, then (the first group) the later ones: collection, where a file that fails to import stops
        # the session (`judge_run(one_session)`)
        for other in (group, *later):
            held = own if other is group else module(other)
            collecting = None if other is group else other["path"]
            filename = os.path.join(job["dir"], other["path"])
            exec(driver_code(other) or compile(other["driver"], filename, "exec"), vars(held))
            if index == 0:  # its look-ups are served at their depth below this frame, as a test's requests are
                link.test_base = REMAINING() if REMAINING is not None else 0
                collect(held, os.path.join(job["dir"], other["path"]), link.Proxy)
    except BaseException as exc:  # noqa: BLE001 - the code under test does not import: no test runs
        send({"import_error": mro(exc)[0][1] + (f" (collecting {collecting})" if collecting else "")})
        os._exit(3 if link.broken else 0)
    for i, name in enumerate(group["tests"]):
        CURRENT[0] = i
        send({"test": i})
        try:
            link.phase_due = True  # and the one pytest runs each test in
            link.test_base = REMAINING() if REMAINING is not None else 0
            namespace[name]()
            send({"done": i, "ok": True})
        except BaseException as exc:  # noqa: BLE001 - a statement of the test raised: the test failed
            ended = interrupts(exc)  # pytest's runner re-raises it: the session ends, with no report of the test
            if ends is not None and not ended:
                try:
                    report(exc)
                except BaseException:  # noqa: BLE001 - escaped pytest's report (an interrupt or SystemExit pytest's
                    ended = True  # saferepr re-raises, any exception out of its formatter): an internal error, its end
            send({"done": i, "ok": False, "error": mro(exc)[0][1], **({"ended": True} if ended else {})})
            if ended:  # a hundred-and-twenty-second attacker's code was asked again after its KeyboardInterrupt
                os._exit(ENDED_EXIT)
    os._exit(3 if link.broken else 0)  # the package's process died or broke the protocol: the run crashed


# -- pytest's collection --------------------------------------------------------------------------------
COLLECTION = {"session": None, "module": None, "version": None}  # pytest's, configured once (`prepare_collection`)


def prepare_collection():
    """Configure the runtime's pytest once, as a pytest run of the hidden tests is configured (its plugins, no
    conftest, no ini file, no capture), so that each driver can collect its test modules with pytest's own collection
    (`collect`). Leaves COLLECTION empty where pytest cannot be imported or configured here. Nothing of pytest's may
    write to this process's stdout, the host's channel: `-s` (no file-descriptor capture) and a null sys.stdout for
    the terminal reporter."""
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = open(os.devnull, "w")
    try:
        import _pytest.config
        import _pytest.main
        import _pytest.python

        args = ["-q", "-s", "-p", "no:cacheprovider", "-p", "no:faulthandler", "--noconftest", "-c", os.devnull,
                "--rootdir", "/"]
        config = _pytest.config.get_config(args)
        config = config.pluginmanager.hook.pytest_cmdline_parse(pluginmanager=config.pluginmanager, args=args)
        config._do_configure()
        session = _pytest.main.Session.from_config(config)
        config.hook.pytest_sessionstart(session=session)
        COLLECTION.update(session=session, module=_pytest.python.Module, version=_pytest.__version__)
    except Exception:  # noqa: BLE001 - no pytest here: drivers collect nothing (the ready line says so)
        pass
    finally:
        sys.stdout, sys.stderr = saved


def collect(held, path, proxy):
    """Collect the driver module `held` (the test file at `path`) with pytest's own collection, as a pytest run
    collects each file before any test: every look-up it and its plugins make on the objects a test module holds
    (its fixtures' check of `_mock_name` and `__wrapped__`, `__test__` for each name, the unittest
    plugin's `__bases__`, ...) reaches the package's objects in pytest's order. Four attackers (100, 102-104) each
    found one such look-up the driver did not make and took the bug under pytest alone (accepted on 24 to 81 tasks);
    a hand copy of the look-ups is one version and one plugin set behind. Raises what the collection raises (a
    collection error under pytest: no test runs), and LinkBroken where pytest would collect an object of the code
    (a `proxy`) as a test."""
    if COLLECTION["session"] is None:
        return
    node = COLLECTION["module"].from_parent(COLLECTION["session"], path=pathlib.Path(path))
    node._obj = held
    # a name of the test module that pytest's rules for test names match, bound to an object of the code: pytest
    # would collect that object as a test and run it, which the verifier cannot (its proxy is no function or class
    # here); the package refuses the other routes (`__test__`, `unittest.TestCase`: `rpc._attributes_plain`)
    for name, value in vars(held).items():
        if isinstance(value, proxy) and (node.funcnamefilter(name) or node.classnamefilter(name)):
            raise rpc.LinkBroken(f"pytest would collect {name!r}, an object of the code under test, as a test")
    list(node.collect())


# -- the server ----------------------------------------------------------------------------------------




ENDED_EXIT = 4  # a driver's exit code when pytest's session would end in its group: no later group runs
MIDDLE: list[int] = []  # a pipe the relay moves bytes through, made once
REMAINING = None  # remaining_reader(), made once: drivers send each request's depth in its test
OBSERVE_UNITS = 2  # an observed expression runs in a lambda called by observe: two frames pytest does not have


def emit(message):
    """One frame on stdout: a JSON header line, then `n` raw bytes when the header says so."""
    line = (json.dumps(message) + "\n").encode()
    while line:
        line = line[os.write(1, line):]


def relay(r, index, budget):
    """Move what the child wrote from its pipe to stdout, in frames, without the bytes ever entering this
    process's memory (splice moves them between pipes in the kernel): the heap every later job's process is
    forked from holds no result of an earlier job (the reference's, or another rollout's). Returns the bytes
    moved, or -1 at end of input."""
    n = os.splice(r, MIDDLE[1], min(65536, budget))
    if n == 0:
        return -1
    emit({"frame": index, "n": n})
    left = n
    while left:
        left -= os.splice(MIDDLE[0], 1, left)
    return n


def run_group(index, group, job, deadline):
    if time.monotonic() >= deadline:  # the job's time is spent: the group does not start
        return {"status": "timeout", "exit": None}
    ensure_zygote(job_hash_seed(job))
    ensure_package(job)
    r, w = os.pipe()
    judged = group_verdicts(group)
    for other in (group, *(job["groups"][index + 1:] if index == 0 else [])):
        driver_code(other)  # made here once, for this and later jobs' drivers (forked from this process)
    verdicts_r, verdicts_w = os.pipe() if judged else (None, None)
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            if judged:
                os.close(verdicts_w)
            child(index, group, job, w, verdicts_r)
        finally:
            os._exit(70)
    os.close(w)
    if judged:
        os.close(verdicts_r)
        os.set_blocking(verdicts_w, False)  # a driver that stopped reading never blocks this server
    limit = min(deadline, time.monotonic() + float(job.get("group_timeout", 2.0)))
    budget = int(job.get("max_bytes", 4 << 20))
    status, code = None, None
    while status is None:
        left = limit - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        ready, _, _ = select.select([r, 0] if judged and not STDIN.closed else [r], [], [], min(left, 0.05))
        if 0 in ready:
            if forward_verdicts(STDIN.take(), job, index, verdicts_w):
                os.close(verdicts_w)  # every later wait reads the end: each test stops at its first assertion
                judged = False
            continue
        if ready:
            if budget <= 0:
                status = "overflow"
                break
            moved = relay(r, index, budget)
            if moved < 0:  # every writer closed the pipe: the child (and anything it started) is done writing
                break
            budget -= moved
        elif code is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(raw)
                kill_group(pid)  # what the child left behind must not hold the pipe open
    os.close(r)
    if judged:
        os.close(verdicts_w)
    if code is None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        except ChildProcessError:
            code = None
    kill_group(pid)
    if status is not None or code != 0:  # the group hung, flooded or crashed: the next one gets a fresh package process
        end_package()
        kill_others(spare=ZYGOTE["pid"])
    return {"status": status or "exited", "exit": code}


def forward_verdicts(lines, job, index, fd):
    """Write each of the host's verdicts for this job's group `index` into its driver's pipe (`child`): the test and
    slot it judges and a byte, 1 to go on, 0 to stop the test (`VERDICT`). The verdicts carry no expected value, only what pytest's control flow shows. Returns
    whether the host has ended the group's verdicts (its stream failed every test already)."""
    for line in lines:
        try:
            verdict = json.loads(line)
        except ValueError:
            continue
        if type(verdict) is dict and verdict.get("verdict") == job["id"] and verdict.get("group") == index:
            if verdict.get("end") is True:
                return True
            test, slot, pair = verdict.get("test"), verdict.get("slot"), verdict.get("pair")
            if type(test) is int and type(slot) is int and 0 <= test < 1 << 31 and 0 <= slot < 1 << 31:
                pair = pair if type(pair) is int and 0 <= pair < 1 << 16 else 0
                try:
                    os.write(fd, VERDICT.pack(test, slot, verdict.get("go") is True, pair))
                except (BlockingIOError, BrokenPipeError):
                    pass
    return False


class Lines:
    """This server's stdin as lines, read with os.read: the job loop and, within a job, the host's verdicts share it
    (a buffered reader would hold verdicts back, or read a line's end into a buffer select does not see)."""

    def __init__(self):
        self.buffer = b""
        self.closed = False

    def fill(self):
        data = os.read(0, 65536)
        self.closed = not data
        self.buffer += data

    def take(self):
        """The complete lines read so far, after one read (call when stdin is readable)."""
        self.fill()
        *lines, self.buffer = self.buffer.split(b"\n")
        return [line for line in lines if line.strip()]

    def next(self):
        """The next line, waiting for it; None at the end of input."""
        while b"\n" not in self.buffer:
            if self.closed:
                return None
            self.fill()
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


STDIN = Lines()


def kill_group(pid):
    """Kill the driver's process group (it made itself its leader)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main():
    global REMAINING
    set_dumpable(False)
    REMAINING = remaining_reader()
    prepare_collection()
    gc.freeze()
    sys.dont_write_bytecode = True
    if not world_works():
        emit({"ready": False, "error": "cannot give a job its own namespaces (user, mount, ipc, net)"})
        return
    MIDDLE[:] = os.pipe()
    emit({"ready": True, "depths": REMAINING is not None, "collects": COLLECTION["version"]})
    while (line := STDIN.next()) is not None:
        if not line.strip():
            continue
        job = json.loads(line)
        if "verdict" in job:  # late, for a group already ended
            continue
        deadline = time.monotonic() + float(job.get("deadline", 5.0))
        try:
            groups = []
            for i, g in enumerate(job["groups"]):  # as one pytest session, which a group's interrupt ends
                ended = bool(groups) and (groups[-1]["status"] == "skipped" or groups[-1]["exit"] == ENDED_EXIT)
                groups.append({"status": "skipped", "exit": None} if ended else run_group(i, g, job, deadline))
        finally:
            end_package()
            kill_others(spare=ZYGOTE["pid"])
        usage = resource.getrusage(resource.RUSAGE_SELF)
        emit({"id": job["id"], "groups": groups, "cpu": usage.ru_utime + usage.ru_stime})


if __name__ == "__main__":
    main()
