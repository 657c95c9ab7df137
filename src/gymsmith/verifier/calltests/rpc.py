"""Calls across the line between a test's statements and the code under test, which run in two processes.

Standard library only: mounted next to `server.py` in the verifier's sandbox.

The *driver* process runs the test's statements (trusted: they were compiled on the verifier's side) and never
imports the code under test. The *package* process imports it and nothing else of the test. An import of the
code under test in the driver returns a proxy; every operation on a proxy (an attribute, a call, `+`, `==`,
`iter`, `next`, `len`, ...) is a request to the package process, answered with a value. So whatever the
driver observes is, by construction, what the package returned for the calls the test made: the agent's code
never runs where the observations are made, cannot see the test's frames or functions, and cannot replace them.

Values cross as tagged JSON, one message per line on a pair of pipes:
- plain builtins (None, bool, int, float, complex, str, bytes, bytearray, list, tuple, set, frozenset, dict,
  range, slice, Ellipsis) by value, exactly typed; sets and dicts by value only when every element or key is
  a plain hashable builtin;
- builtin classes (int, ValueError, ...) by name; an exception by its class's MRO, arguments and a reference;
- anything else by reference: {"r": id} names an object of the sender's, {"y": id} one of the receiver's own.

Lists, dicts, sets and bytearrays cross by value but stay *shared* (`Link.receive_shares`): each one a message
carries at its top (an argument, a keyword's value, an answer) gets a number, and each side keeps one object per
number, so the same container is the same object on the other side every time it crosses. Before each message a
side sends what changed in the shared containers the other side still holds ({"s": [[number, kind, contents]]}, the
numbers it holds itself {"k": [...]}, the ones it forgot {"x": [...]}), so that what the code under test does to the
test's containers, and what the test does to a container the code kept, is seen on the other side as it would be in
one process (a seventy-ninth attacker's fix emptied the caller's graph unseen). Containers nested in a shared one
travel as its contents, changed in place on the other side where their kind and position are unchanged.

Lifetimes: what crosses by reference lives as long as it would in one process. The package keeps an object it sent
(an exception with its traceback and frames included) until the driver has given back every copy it received: a
proxy gives back its count when it dies, a rebuilt exception its one ({"xr": [[id, count]]} with the driver's next
message). The package's proxy of a test's object is pinned while the test holds the object, and unpinned ({"up":
[id]}) when only the driver's table does. The driver forgets at every message a shared container neither side holds
beyond its table. So what the test drops is freed in the package before the package next runs, as pytest frees it
(a ninety-sixth attacker's device told the two apart by an address freed under pytest and never here). Exception
classes cross with a reference for each class of their MRO, so the other side holds one local class per class,
not per name.

Requests may nest (a call into the package may call back a function the test passed it), so each side
answers the other's requests while it waits for its own answer.

What the driver serves the package is narrow (`DriverPolicy`): calls and protocol operations on the objects
the test handed over, and public attributes only of objects of classes the test defined. A module, function,
frame or builtin of the driver's is never reachable from the package, so the package cannot reach the driver's
namespace through a callback. Everything the package sends is decoded strictly and bounded; anything else
breaks the link (`LinkBroken`), and every later operation on it fails: honest code never causes that.
"""

import builtins
import io
import json
import operator
import os
import sys
import types
from _weakref import ref as _weak  # weakref's own type (the module `weakref` is not loaded here)

MAX_LINE = 16 << 20  # a message; the driver holds it and its decoded values within its sandbox's memory
MAX_DEPTH = 200
MAX_NODES = 2_000_000
MAX_INT_DIGITS = 4000
MAX_NAME = 200

# Builtin classes that cross by name: calling one in either process computes only a plain value.
SAFE_CLASSES = {name: obj for name, obj in vars(builtins).items()
                if isinstance(obj, type) and (issubclass(obj, BaseException) or name in (
                    "int", "float", "complex", "str", "bytes", "bytearray", "bool", "list", "tuple", "dict", "set",
                    "frozenset", "range", "slice", "object", "memoryview", "reversed", "enumerate", "zip", "map",
                    "filter"))}
_CLASS_NAMES = {id(obj): name for name, obj in SAFE_CLASSES.items()}
HASHABLE_PLAIN = (type(None), bool, int, float, complex, str, bytes)
# Standard-library modules whose values the driver sends by their pickle recipe (the package gets a real one).
VALUE_MODULES = frozenset({"datetime", "decimal", "fractions", "collections", "uuid", "ipaddress", "pathlib", "re",
                           "array", "copyreg", "enum"})


class LinkBroken(BaseException):
    """The other process broke the protocol, died or said something this side cannot accept.

    A BaseException, so a test's `except Exception` or an expected-exception block does not take it for the
    code under test's own error."""


# Binary operations are answered by the object's own method, never by Python's operator protocol: the protocol
# would try the reflected method of the other operand, itself a proxy, and the two sides would bounce the
# operation between them forever. A method that declines answers NotImplemented, and the asking side's
# protocol then tries the reflected method there, as it would with two local objects.
BINARY = frozenset({"add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and",
                    "or", "xor", "divmod"})
COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
OTHER_BINARY = {"getitem": operator.getitem, "contains": operator.contains, "delitem": operator.delitem}
UNARY = {"iter": iter, "next": next, "len": len, "bool": bool, "hash": hash, "repr": repr, "str": str,
         "neg": operator.neg, "pos": operator.pos, "abs": abs, "invert": operator.invert, "index": operator.index,
         "int": int, "float": float, "complex": complex, "bytes": bytes, "reversed": reversed, "dir": dir,
         "trunc": lambda o: type(o).__trunc__(*(o,)), "floor": lambda o: type(o).__floor__(*(o,)),
         "ceil": lambda o: type(o).__ceil__(*(o,)), "enter": lambda o: type(o).__enter__(*(o,)),
         "length_hint": lambda o: type(o).__length_hint__(*(o,))}


def _pytest_saferepr(obj):
    """pytest's own text of an object in a failed assertion's explanation (`_pytest.assertion.rewrite._saferepr`: a
    bound method's name, else a bounded `repr`), made where the object lives: the driver asks for it on the code's
    objects (`server.as_pytest_asserts`), whose type a proxy cannot stand for in pytest's type tests."""
    from _pytest.assertion.rewrite import _saferepr

    return _saferepr(*(obj,))


UNARY["saferepr"] = _pytest_saferepr


def _pytest_saferepr_at(obj, level, maxsize, use_ascii):
    """pytest's text of `obj` met at `level` inside a value of the test's while pytest's `SafeRepr(maxsize, use_ascii)`
    formats that value (`SafeRepr.repr1`: by the type's name, so an object of a class named `list` is formatted by its
    `len` and `iter`, as under pytest, where a proxy would be formatted by its `repr`). What it raises ends pytest's
    whole text: only its text crosses, made here as pytest makes it, as ("raised", text)."""
    from _pytest._io.saferepr import SafeRepr, _try_repr_or_str

    try:
        return SafeRepr(maxsize, use_ascii).repr1(*(obj, level))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - as pytest's `SafeRepr.repr` takes it
        try:
            return ("raised", _try_repr_or_str(exc))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as inner:  # noqa: BLE001
            return ("raised", f"unpresentable exception ({_try_repr_or_str(inner)})")


def _pytest_failure_report(exc):
    """What pytest's report of a test that failed with `exc` runs of the code's (`Node._repr_failure_py` with pytest's
    default options: the `repr` of the arguments of the traceback's first and last frames, the exception's text, each
    chained exception's, `__tracebackhide__` of each frame), made with pytest's own `getrepr` over this process's part
    of the traceback: the code's own frames, where pytest's traceback starts at the test's frame, in the driver. The
    report itself stays here (None): only what it runs of the code's matters. What escapes pytest's code here escapes
    pytest's report under pytest too, an internal error that ends its session: it is raised, and the driver ends the
    run there (`server.report`; a hundred-and-twenty-fifth attacker's exception whose `lineno` has a `__str__` that
    raises was swallowed here, and its code was asked again after a failure that ends pytest's session)."""
    try:
        from _pytest._code import code as pytest_code
        from _pytest._code.code import ExceptionInfo, Traceback, filter_traceback
    except ImportError:  # no pytest where the code runs: no report to make
        return None

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:  # the link's frames that ran the code
        tb = tb.tb_next
    if tb is None:
        return None
    main = ExceptionInfo.from_exc_info((type(exc), exc, tb))

    def styled(traceback, first_long):
        # pytest's "auto" style: all but the first and last entries short (the first is the test's, in the driver)
        if len(traceback) + (0 if first_long else 1) <= 2:
            return traceback
        head = [traceback[0]] if first_long else [traceback[0].with_repr_style("short")]
        return Traceback((*head, *(t.with_repr_style("short") for t in traceback[1:-1]), traceback[-1]))

    def tbfilter(info):
        """`Function._traceback_filter` on a traceback that does not hold the test's file (the test's frame is the
        driver's): the main exception's, past the test's frame; a chained exception's, whole."""
        if info is main:
            return styled(info.traceback.filter(info), first_long=False)
        traceback = info.traceback.filter(filter_traceback) or info.traceback
        return styled(traceback.filter(info), first_long=True)

    # `getrepr`'s formatter, given this process's parsed sources (a parse of the module per report: 6 ms each for a
    # 3,000-line module), which pytest keeps per report; parsing runs no code of the code's
    formatter = getattr(pytest_code, "ExceptionInfoFormatter", None) or pytest_code.FormattedExcinfo
    made = formatter(funcargs=True, abspath=False, showlocals=False, style="long", tbfilter=tbfilter,
                     truncate_locals=True, truncate_args=True, chain=True)
    made.astcache = _REPORT_ASTS
    made.repr_excinfo(main)
    return None


_REPORT_ASTS: dict = {}  # `_pytest_failure_report`'s parsed sources, by path, for the process's life


# Every call that reaches code of the package's is made with star-arguments, a call the interpreter never specializes:
# a specialized call of a builtin (`len`, `getattr`, `__import__`) skips the C-level recursion count the generic call
# makes, so the frames graded code counts changed by one once this process had served a few requests (a job's later
# files imported one frame shallower than its first: a device keyed on the count at import was accepted on 4 of 12
# tasks), where pytest's count does not change.
def _dunder(obj, name, other):
    method = getattr(type(obj), f"__{name}__", None)
    return NotImplemented if method is None else method(*(obj, other))


def _other(op, obj, args):
    """Operations that are neither unary nor binary on `obj`."""
    if op == "call":
        positional, keywords = args
        return obj(*positional, **keywords)
    if op == "setitem":
        return operator.setitem(*(obj, args[0], args[1]))
    if op == "format":
        return format(*(obj, args[0]))
    if op == "round":
        return round(*(obj,)) if args[0] is None else round(*(obj, args[0]))
    if op == "exit":  # with the traceback of the exception raised here (under pytest, the test's): never None
        exc = args[0]
        if exc is None:
            return type(obj).__exit__(*(obj, None, None, None))
        try:
            raise exc
        except BaseException as caught:  # noqa: BLE001
            # called while the exception is handled, as the interpreter calls it: an exception `__exit__` raises
            # or catches gets it as `__context__`, a bare `raise` re-raises it (a hundred-and-twenty-first attacker
            # saw neither here)
            return type(obj).__exit__(*(obj, type(caught), caught, caught.__traceback__))
    if op == "instancecheck":
        return isinstance(*(args[0], obj))
    if op == "subclasscheck":
        return issubclass(*(args[0], obj))
    if op == "getattr":
        return getattr(*(obj, args[0]))
    if op == "setattr":
        return setattr(*(obj, args[0], args[1]))
    if op == "delattr":
        return delattr(*(obj, args[0]))
    if op == "report":
        if args:
            raise TypeError("report takes no arguments")
        return _pytest_failure_report(obj)
    if op == "saferepr_at":
        level, maxsize, use_ascii = args
        if type(level) is not int or not (maxsize is None or type(maxsize) is int) or type(use_ascii) is not bool:
            raise TypeError("saferepr_at takes a level, a maximum size and whether to use ascii")
        return _pytest_saferepr_at(obj, level, maxsize, use_ascii)
    raise TypeError(f"unknown operation {op!r}")


def apply(op, obj, args):
    """Perform operation `op` on `obj` with decoded `args` (the serving side's half of every request)."""
    if op in UNARY and not args:
        return UNARY[op](*(obj,))
    if len(args) == 1:
        if op in OTHER_BINARY:
            return OTHER_BINARY[op](*(obj, args[0]))
        if op in COMPARE or op in BINARY or op[:1] in ("r", "i") and op[1:] in BINARY:
            return _dunder(obj, op, args[0])  # __add__, __radd__, __iadd__, __eq__, ...
    return _other(op, obj, args)


# Containers shared by number between the sides (`Link.receive_shares`): kind tags and their empty values.
SHARED_KINDS = {list: "l", dict: "d", set: "s", bytearray: "ba"}
_EMPTY = {"l": list, "d": dict, "s": set, "ba": bytearray}
MIN_SWEEP = 32  # shares a side holds before it first forgets the ones only its table holds


def _table_counts(table, keys=None):
    """The reference count of `table`'s object under each of `keys` (all of them by default)."""
    return [sys.getrefcount(table[k]) for k in (table if keys is None else keys)]


_TABLE_BASE = _table_counts({0: []})[0]  # what `_table_counts` reads of an object only its table holds


MIN_LIMIT = 100  # the lowest recursion limit a request is served under (PackagePolicy.limit_for)


class PackagePolicy:
    """The package process serves every request: it holds only the code under test.

    `depth_shift` ({"import": n, "call": m, "ops": {op: k}}, graded runs): while it serves a request of the driver's
    (not one nested in its own request to the driver), the recursion limit is moved by n for an import, and for any
    other operation by its own k (m for one not listed) less the request's depth `d`: how far below its test
    function's frame the driver made the request, in the units the interpreter counts (frames and the C calls that
    count as frames), with the driver's own frames around an observed expression taken out. Then it is put back.
    The host measures the shifts so that graded code counts as many frames left, at its import and wherever a test
    reaches it (a call, an operator, inside a comprehension or a lambda), as under pytest
    (`runner.CallRunner.depth_shift`): recursing until RecursionError then tells the verifier's process from an
    ordinary pytest run of the tests no more than anything else does."""

    accepts_std_names = True

    def __init__(self, depth_shift=None, hooks=None):
        self.depth_shift = depth_shift if type(depth_shift) is dict else None
        self.base_limit = sys.getrecursionlimit()
        # graded runs ({"allowed": [...], "own": [...]}): the modules whose reference defines `__getattr__` or
        # `__getattribute__`, and the top-level names of the code under test's modules (None: any class may have one)
        hooks = hooks if type(hooks) is dict else {}
        allowed, own = hooks.get("allowed"), hooks.get("own")
        self.hook_modules = frozenset(allowed) if type(allowed) is list else None
        self.own_modules = frozenset(own) if type(own) is list else frozenset()

    def check(self, op, obj, args):
        return None

    def unexpected_hook(self, v):
        """Whether `v`, about to reach the test, has a look-up hook (`__getattr__` or `__getattribute__` of a class not
        of the standard library, on its type's MRO or, for a class, its own or its metaclass's) defined in a module
        whose reference defines none. A hook sees every look-up any runner makes, and runners make different ones
        (pytest's collection, `isinstance`'s read of `__class__`): the rule reads hooks by their literal spelling, and
        a computed name placed one unread. Read from the types' own slots: no code of theirs runs."""
        if self.hook_modules is None:
            return False
        try:
            classes = _classes_of(v)
            # a class of the interpreter's (not a heap type: no code can make one), or one found under its own name in
            # a module that is not the code under test's (the standard library, an installed package), has what it has
            # everywhere (`module`, `object` and `type` define `__getattribute__`)
            return any(("__getattr__" in _TYPE_DICT(c) or "__getattribute__" in _TYPE_DICT(c))
                       and _TYPE_FLAGS(c) & _HEAPTYPE and not _library_class(c, self.own_modules)
                       and _TYPE_MODULE(c) not in self.hook_modules for c in classes)
        except BaseException:  # noqa: BLE001 - what cannot be read is not plain
            return True

    def limit_for(self, op, depth):
        """The recursion limit to serve a driver's `op` made `depth` units below its test's frame under (None:
        leave it)."""
        if self.depth_shift is None:
            return None
        if op == "import":
            return self.base_limit + self.depth_shift["import"]
        shift = self.depth_shift.get("ops", {}).get(op, self.depth_shift["call"])
        # at least MIN_LIMIT: below the package process's own depth the limit cannot be set (a test recursing that
        # deep leaves graded code more frames than pytest would)
        return max(MIN_LIMIT, self.base_limit + shift - (depth if type(depth) is int else 0))


class DriverPolicy:
    """What the driver lets the package do with the objects the test handed over (see the module docstring)."""

    accepts_std_names = False
    NAMES = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})
    GENERATOR = frozenset({"send", "throw", "close"})

    def __init__(self, module_name):
        self.module_name = module_name

    def _ours(self, cls):
        return type(cls) is type and cls.__module__ == self.module_name

    def check(self, op, obj, args):
        if op in ("getattr", "setattr", "delattr"):
            name = args[0]
            if op == "getattr" and name in self.NAMES and isinstance(obj, types.FunctionType | type):
                return None
            if op == "getattr" and isinstance(obj, types.GeneratorType) and name in self.GENERATOR:
                return None
            if not name.startswith("_") and (self._ours(type(obj)) or (op == "getattr" and self._ours(obj))):
                return None
            raise AttributeError(name)
        if op in ("instancecheck", "subclasscheck", "dir"):
            raise TypeError(f"{op} is not offered by the test's side")
        return None


def _type_name(obj):
    try:
        cls = type(obj)
        module, qualname = _TYPE_MODULE(cls), _TYPE_QUALNAME(cls)
        return (f"{module}.{qualname}" if type(module) is str and type(qualname) is str else "?")[:MAX_NAME]
    except BaseException:  # noqa: BLE001 - a hostile metaclass
        return "?"


_FUNCTION = type(lambda: 0)
_TYPE_MRO = type.__dict__["__mro__"].__get__
_TYPE_MODULE = type.__dict__["__module__"].__get__
_TYPE_QUALNAME = type.__dict__["__qualname__"].__get__
_TYPE_DICT = type.__dict__["__dict__"].__get__
_TYPE_FLAGS = type.__dict__["__flags__"].__get__
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or type(), not one of the interpreter's
_EXC_DICT = BaseException.__dict__["__dict__"].__get__
_EXC_ARGS = BaseException.__dict__["args"].__get__


# Types whose objects may sit under a dunder name of a class: what the interpreter and ordinary class bodies put there
_PLAIN_DESCRIPTORS = (types.FunctionType, classmethod, staticmethod, types.GetSetDescriptorType,
                      types.MemberDescriptorType, types.WrapperDescriptorType, types.MethodDescriptorType,
                      types.ClassMethodDescriptorType, types.BuiltinFunctionType)


def _names_exact(d):
    return all(type(k) is str for k in d)


def _binds(value):
    """Whether `value`'s type defines `__get__` (read from the types' dictionaries, exact names only), so that a
    lookup finding it runs code of that type's; None when a dictionary on the way has a name that is not a str."""
    mro = [_TYPE_DICT(c) for c in _TYPE_MRO(type(value))]
    if not all(_names_exact(d) for d in mro):
        return None
    return any(k == "__get__" for d in mro for k in d)


def _classes_of(v):
    """The classes whose dictionaries a look-up on `v` may read: its type's MRO and, for a class, its own MRO."""
    t = type(v)
    return list(_TYPE_MRO(t)) + (list(_TYPE_MRO(v)) if issubclass(t, type) else [])


def _attributes_plain(v):
    """Whether `v`'s attributes are ones no lookup of a runner can run code through: every name in its own dictionary,
    its type's MRO's and, for a class, its own MRO's is an exact str; none is `__test__`; and no dunder name holds a
    descriptor of a type of the code's (or a property). pytest's collection looks up `__test__` on every object a test
    module holds, which the verifier does not: a hundredth attacker's functions held a str-subclass key colliding with
    it, whose `__eq__` the lookup runs (accepted on 24 of 24 tasks), and a hundred-and-second's a `__test__` descriptor
    set by `dataclasses.make_dataclass` under a computed name (39 of 39); `__test__ = True` would make pytest run the
    object as a test. Nor is it a subclass of `unittest.TestCase`: pytest's unittest plugin collects such a class from
    a test module and makes an instance of it before any test, code of the agent's the verifier never ran (a class
    under test deriving from it told the two apart). Honest code has none of these. Read from the types' and objects'
    own slots: no code of theirs runs."""
    try:
        t = type(v)
        classes = _classes_of(v)
        if issubclass(t, type) and any(_TYPE_MODULE(c) == "unittest.case" and _TYPE_QUALNAME(c) == "TestCase"
                                       for c in _TYPE_MRO(v)):
            return False
        if not all(_names_exact(_TYPE_DICT(c)) for c in classes):  # before any lookup of a name on them
            return False
        # a class of the standard library's is what it is everywhere (`enum.EnumType.__members__` is a property)
        dicts = [(_TYPE_DICT(c), _std_name(c) is not None) for c in classes]
        if not issubclass(t, type):  # the instance dictionary, by its own descriptor found by exact names only
            found = [descr for c in _TYPE_MRO(t) for k, descr in _TYPE_DICT(c).items() if k == "__dict__"][:1]
            own = found[0].__get__(v, t) if found and type(found[0]) is types.GetSetDescriptorType else None
            if type(own) is dict:
                if not _names_exact(own):
                    return False
                dicts.append((own, False))
        for d, standard in dicts:
            for k, value in d.items():
                if k == "__test__":
                    return False
                if not standard and k[:2] == "__" and k[-2:] == "__" and type(value) not in _PLAIN_DESCRIPTORS \
                        and _binds(value) is not False:
                    return False
        return True
    except BaseException:  # noqa: BLE001 - what cannot be read is not plain
        return False


def _mro_names(cls):
    """The (module, qualname) of each class in `cls`'s MRO. A class that names a module of the standard library (or
    builtins) is reported so only if it is the class found there by that name: a class of the agent's renamed
    `builtins.ValueError` is "?builtins" (the judge matches raised exceptions by their builtin classes, and pytest's
    `raises(ValueError)` would not take it: a seventy-eighth attacker's idea, found to work)."""
    try:
        out = []
        # the type's own slots, as isinstance and pytest.raises read them: a metaclass may give `__mro__`,
        # `__module__` or `__qualname__` another value as attributes (a seventy-ninth attacker's metaclass property
        # `__mro__` claimed ValueError for a KeyError: accepted on 4 of 4 tasks, pytest failing 6-11 raises tests)
        for c in _TYPE_MRO(cls)[:64]:
            module, qualname = _TYPE_MODULE(c), _TYPE_QUALNAME(c)
            module = module[:MAX_NAME] if type(module) is str else "?"
            if (module == "builtins" or module.partition(".")[0] in sys.stdlib_module_names) and _std_name(c) is None:
                module = "?" + module
            out.append([module, qualname[:MAX_NAME] if type(qualname) is str else "?"])
        return out
    except BaseException:  # noqa: BLE001
        return [["?", "?"]]


_PHASE = [None]  # the package process's `warnings.catch_warnings` of the current phase


def warnings_phase():
    """Leave the last phase's warnings state and enter the one pytest gives its collection and each test (its warnings
    plugin: `catch_warnings(record=True)`, DeprecationWarning and PendingDeprecationWarning always, unless -W options
    were given). The package process kept the interpreter's defaults, so a warning took another path through the
    `warnings` machinery, and pure code counting the frames it costs told the two apart (a hundred-and-ninth
    attacker: accepted on 17 of 17 tasks, pytest failing every FAIL_TO_PASS test)."""
    import warnings

    if _PHASE[0] is not None:
        _PHASE[0].__exit__(None, None, None)
    phase = warnings.catch_warnings(record=True)
    phase.__enter__()
    if not sys.warnoptions:
        warnings.filterwarnings("always", category=DeprecationWarning)
        warnings.filterwarnings("always", category=PendingDeprecationWarning)
    _PHASE[0] = phase


_MODULE_DICT = types.ModuleType.__dict__["__dict__"].__get__  # type: ignore[index]  # typeshed: a property


def _library_class(cls, own):
    """Whether class `cls` is found, by the name its own slots give, in a loaded module whose top-level name is not in
    `own` (the code under test's): the standard library's, an installed package's. Read from the modules' and types'
    own dictionaries: no code of the class's runs, and a class of the code's naming such a module is not found there."""
    module, qualname = _TYPE_MODULE(cls), _TYPE_QUALNAME(cls)
    if type(module) is not str or type(qualname) is not str or module.partition(".")[0] in own:
        return False
    found = sys.modules.get(module)
    if type(found) is not types.ModuleType:
        return False
    names = _MODULE_DICT(found)
    for part in qualname.split("."):
        found = names.get(part) if type(names) is dict else None
        names = _TYPE_DICT(found) if issubclass(type(found), type) else None
    return found is cls


def _std_name(obj):
    """(module, qualname) of a standard-library function, class or module importable by that name, else None."""
    try:
        if isinstance(obj, types.ModuleType):
            name = obj.__name__
            return [name, ""] if name.partition(".")[0] in sys.stdlib_module_names else None
        module, qualname = obj.__module__, obj.__qualname__
    except BaseException:  # noqa: BLE001
        return None
    if type(module) is not str or type(qualname) is not str or module.partition(".")[0] not in sys.stdlib_module_names \
            and module != "builtins":
        return None
    found = sys.modules.get(module)
    try:
        for part in qualname.split("."):
            found = getattr(found, part)
    except AttributeError:
        return None
    return [module, qualname] if found is obj else None


class Link:
    """One side of the connection: encodes, decodes, sends requests and serves the other side's."""

    def __init__(self, rfd, wfd, policy):
        self.reader = os.fdopen(rfd, "rb", buffering=1 << 16)
        self.wfd = wfd
        self.policy = policy
        self.objects = {}      # id -> our object the other side holds a reference to
        self.ids = {}          # id(object) -> id
        self.classes = {}      # an exception class's MRO, each class with its reference (as a tuple) -> local class
        self.counter = 0
        # how long an object sent by reference lives (see "Lifetimes" in the module docstring). The package lends its
        # objects and frees one when the driver has given back every time it was sent; the driver gives them back as its
        # proxies and rebuilt exceptions die. The package pins its proxy of an object of the driver's while the test
        # holds that object; the driver unpins it when only its table holds the object.
        self.driver = not policy.accepts_std_names
        self.ref_counter = 0
        self.lent = {}         # package: id -> how many sent messages named our object (less what was given back)
        self.proxies = {}      # id -> weak reference to our proxy of the other side's object
        self.received = {}     # driver: id -> how many times the current proxy's object arrived
        self.returns = []      # driver: [id, count] to give back with the next message
        self.pinned = {}       # package: id -> our proxy of an object of the driver's the test holds
        self.remote_pins = set()  # driver: ids of our objects the package pins
        self.functions = {}    # package: id(function) -> id of the test's function it stands for (`_function`)
        self._outgoing = None  # while a message is built: ids it lends (> 0) and ids of the other side's it names (< 0)
        self.waiting = 0  # our requests awaiting an answer
        self.broken = None
        self.Proxy = make_proxy_class(self)
        # containers shared by number with the other side (see the module docstring): the driver numbers its own from
        # 1 up, the package from -1 down
        self.shared = {}       # number -> container
        self.shared_ids = {}   # id(container) -> number
        self.snapshots = {}    # number -> its contents as last sent or received
        self.stamps = {}       # number -> its items' identities then, where nothing nested can change in place
        self._nested = False   # set while encoding or decoding contents that hold something changeable in place
        self.phase_due = False  # the next request tells the package a test (or collection) began (`warnings_phase`)
        self.touched = set()   # numbers received since this side last sent
        self.theirs = set()    # numbers the other side held (beyond its table) when it last sent, or sent then
        self.their_held = set()  # numbers the other side held beyond its table when it last sent
        self.forgotten = []    # numbers this side forgot, to tell the other side
        self.sign = -1 if policy.accepts_std_names else 1
        self.sweep_at = MIN_SWEEP
        self.share_counter = 0
        self._refs = None      # while a message is built: numbers of the shares its values name
        self._emitting = None  # while a message is built: number -> its entry in the message's "s"
        # the driver's side: how many frames the interpreter has left (`server.remaining_reader`), read at each test's
        # start (`test_base`) and at each request, so the package process can serve it at the test's own depth; and
        # the units of the driver's own frames around an observed expression (`observing`), which pytest has not
        self.remaining = None
        self.test_base = 0
        self.observing = 0

    # -- the wire ----------------------------------------------------------------------------------------
    def _send(self, message):
        if self._emitting is not None:
            self._finish_shares(message)
            self._finish_lifetimes(message)
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]

    def _recv(self):
        line = self.reader.readline(MAX_LINE)
        if not line:
            raise LinkBroken("the other process is gone")
        if not line.endswith(b"\n"):
            raise LinkBroken("a message over the size limit")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            raise LinkBroken("a message that is not JSON") from None
        if type(message) is not dict:
            raise LinkBroken("a message that is not an object")
        self.receive_shares(message)
        self.receive_lifetimes(message)
        return message

    def fail(self, why):
        self.broken = self.broken or why
        raise LinkBroken(self.broken)

    # -- requests ----------------------------------------------------------------------------------------
    def request(self, op, target, args=()):
        """Ask the other side to perform `op` on its object `target` (a proxy id or, for imports, a name)."""
        if self.broken:
            raise LinkBroken(self.broken)
        self.counter += 1
        number = self.counter
        saved = self._begin_shares()
        try:
            if op == "call" and len(args) == 2:  # positional and keyword arguments: each at the top (shared)
                encoded = [{"t": [self.encode(a) for a in args[0]]}, {"d": [[k, self.encode(a)] for k, a in args[1].items()]}]
            else:
                encoded = [self.encode(a) for a in args]
        except BaseException:
            self._refs, self._emitting, self._outgoing = saved
            raise
        message = {"q": number, "op": op, "o": target, "args": encoded}
        if self.phase_due:  # a test (or collection) began: the package enters its warnings state first
            message["w"] = 1
            self.phase_due = False
        if self.remaining is not None and self.waiting == 0:  # a test's own request: how deep in the test it is
            message["d"] = self.test_base - self.remaining() - self.observing
        self.waiting += 1  # the other side's requests served meanwhile are nested in this one
        try:
            try:
                self._send(message)
            finally:
                self._refs, self._emitting, self._outgoing = saved
            while True:
                message = self._recv()
                if "q" in message:
                    self.serve(message)
                    continue
                if message.get("a") != number:
                    raise LinkBroken("an answer out of turn")
                break
        except LinkBroken as exc:
            self.fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - the link's own machinery failed on what the other side sent: never
            # an exception of the test's (a ninety-ninth attacker's class name with a NUL made the driver's `type()`
            # raise ValueError here, which `pytest.raises(ValueError)` took for the code's: accepted on 5 of 6 tasks)
            self.fail(f"the link failed ({type(exc).__name__})")
        finally:
            self.waiting -= 1
        if set(message) == {"a", "v"}:
            return self._decode_or_fail(message["v"])
        if set(message) == {"a", "raise"}:
            raised = self._decode_or_fail(message["raise"])
            if not isinstance(raised, BaseException):
                self.fail("a raise of something that is not an exception")
            try:
                raise raised
            finally:  # the traceback holds this frame: naming the exception here would keep it alive in a cycle
                del raised
        self.fail("a malformed answer")

    def _decode_or_fail(self, value):
        try:
            return self.decode(value)
        except LinkBroken as exc:
            self.fail(str(exc))
        except (ValueError, TypeError, KeyError, RecursionError, MemoryError, AttributeError, OverflowError):
            self.fail("a value that is not the protocol")

    def serve(self, message):
        """Answer one request of the other side (on one of our objects, or an import)."""
        number = message.get("q")
        op, target, raw, depth = message.get("op"), message.get("o"), message.get("args"), message.get("d")
        if type(number) is not int or type(op) is not str or type(raw) is not list or \
                len(message) != 4 + ("d" in message) + ("w" in message) or message.get("w", 1) != 1 or \
                not (depth is None or type(depth) is int and abs(depth) < 1 << 20):
            self.fail("a malformed request")
        if "w" in message:  # the driver began collecting or a test (`warnings_phase`)
            if not isinstance(self.policy, PackagePolicy):
                self.fail("a phase the test's side does not serve")
            warnings_phase()
        try:
            args = [self.decode(a) for a in raw]
        except LinkBroken as exc:
            self.fail(str(exc))
        except (ValueError, TypeError, KeyError, RecursionError, MemoryError, AttributeError, OverflowError):
            self.fail("a request that is not the protocol")
        if op == "call":
            if len(args) != 2 or type(args[0]) is not tuple or type(args[1]) is not dict:
                self.fail("a malformed call")
        elif op in ("getattr", "setattr", "delattr") and (not args or type(args[0]) is not str):
            self.fail("a malformed attribute request")
        limit = self.policy.limit_for(op, depth) if self.waiting == 0 and isinstance(self.policy, PackagePolicy) else None
        try:
            if op == "import":
                if not isinstance(self.policy, PackagePolicy) or type(target) is not str or len(args) != 1:
                    self.fail("an import the test's side does not serve")
                if limit is not None:
                    sys.setrecursionlimit(limit)
                result = __import__(*(target, {}, {}, list(args[0]), 0))  # star-arguments: see `_dunder`
            else:
                if type(target) is not int or target not in self.objects:
                    self.fail("a request on an unknown object")
                obj = self.objects[target]
                self.policy.check(op, obj, args)
                if limit is not None:
                    sys.setrecursionlimit(limit)
                result = apply(op, obj, args)
                if op == "getattr" and args[0] == "__test__" and result is True and not self.driver:
                    # pytest's collection would run the object as a test, code of the agent's the verifier never runs
                    raise LinkBroken("an object of the code under test says it is a test (`__test__` is True)")
            if limit is not None:
                sys.setrecursionlimit(self.policy.base_limit)
            del args
            saved = self._begin_shares()
            answer = {"a": number, "v": self.encode(result)}
        except LinkBroken:
            raise
        except BaseException as exc:  # noqa: BLE001 - whatever the operation raised is the answer
            if limit is not None:
                sys.setrecursionlimit(self.policy.base_limit)
            saved = self._begin_shares()
            answer = {"a": number, "raise": self.encode_exception(exc)}
        # nothing of this request stays held by this frame (a raised exception's traceback holds it): what the package
        # holds when it answers is what its own code holds (the shares' "k", `_finish_shares`)
        args = obj = result = None  # noqa: F841 - cleared, not used
        try:
            self._send(answer)
        finally:
            self._refs, self._emitting, self._outgoing = saved

    def serve_forever(self):
        """The package process's loop: answer requests until the driver goes away."""
        while True:
            try:
                message = self._recv()
            except LinkBroken:
                return
            if "q" not in message:
                return
            self.serve(message)

    # -- shared containers --------------------------------------------------------------------------------
    def _share(self, container):
        self.share_counter += 1
        number = self.sign * self.share_counter
        self.shared[number] = container
        self.shared_ids[id(container)] = number
        self.snapshots[number] = None  # never sent: its contents go with the message that shares it
        return number

    def _forget(self, number):
        container = self.shared.pop(number, None)
        if container is not None and self.shared_ids.get(id(container)) == number:
            del self.shared_ids[id(container)]
        self.snapshots.pop(number, None)
        self.stamps.pop(number, None)
        self.touched.discard(number)
        self.theirs.discard(number)

    def _contents(self, container):
        """A shared container's contents in this side's encoding (shares in it by number), the numbers it names, and
        whether anything in it may change while its identity stays (a nested container, a value sent by recipe)."""
        saved = self._refs, self._nested, self._outgoing
        self._refs, self._nested, self._outgoing = [], False, []
        try:
            t = type(container)
            budget = [MAX_NODES]
            if t is bytearray:
                out = container.hex()
            elif t is dict:
                out = [[self._encode(k, 1, budget), self._encode(x, 1, budget)] for k, x in container.items()]
            else:
                out = [self._encode(x, 1, budget) for x in container]
            return out, self._refs, self._nested, self._outgoing
        finally:
            self._refs, self._nested, self._outgoing = saved

    def _exchanged(self, number, contents, nested):
        """Record `contents` as what both sides now hold of share `number`; with nothing nested that could change in
        place, a stamp of its items' identities tells later whether it changed without encoding it again."""
        container = self.shared[number]
        self.snapshots[number] = contents
        t = type(container)
        if nested:
            self.stamps.pop(number, None)
        elif t is list:
            self.stamps[number] = list(container)
        elif t is dict:
            self.stamps[number] = (list(container), list(container.values()))
        elif t is set:
            self.stamps[number] = frozenset(container)  # by value: 1 for True in a set goes unseen, nothing else
        else:
            self.stamps[number] = bytes(container)

    def _unchanged(self, number):
        """Whether share `number` surely holds what was last exchanged (False: it may have changed)."""
        stamp, container = self.stamps.get(number), self.shared[number]
        if stamp is None:
            return False
        t = type(container)
        if t is list:
            return len(stamp) == len(container) and all(map(operator.is_, stamp, container))
        if t is dict:
            return len(stamp[0]) == len(container) and all(map(operator.is_, stamp[0], container)) \
                and all(map(operator.is_, stamp[1], container.values()))
        return stamp == container  # a set's frozenset, a bytearray's bytes

    def _begin_shares(self):
        saved = (self._refs, self._emitting, self._outgoing)
        self._refs, self._emitting, self._outgoing = [], {}, []
        return saved

    def _emit(self, numbers):
        """Put in the message being built each share of `numbers` (and those their contents name) that is new or may
        have changed since it was last exchanged, with its contents now."""
        work = list(numbers)
        while work:
            number = work.pop()
            if number in self._emitting or number not in self.shared:
                continue
            self._emitting[number] = None
            if self.snapshots.get(number) is not None and self._unchanged(number):
                continue
            container = self.shared[number]
            contents, refs, nested, named = self._contents(container)
            if contents == self.snapshots.get(number):
                self._exchanged(number, contents, nested)
                continue
            self._emitting[number] = [number, SHARED_KINDS[type(container)], contents]
            if self._outgoing is not None:
                self._outgoing.extend(named)
            self._exchanged(number, contents, nested)
            work.extend(refs)

    def _finish_shares(self, message):
        """Add to `message` the shares its values name, what changed in the shares the other side holds, the numbers
        this side holds and those it forgot (see the module docstring)."""
        counts = dict(zip(self.shared, _table_counts(self.shared)))
        held = {n for n, c in counts.items() if c > _TABLE_BASE}
        self._emit(self._refs)
        # forget what neither side holds any more (and this message does not name): the driver at every message, so
        # that a container the test dropped (and the package's objects in it) is freed in the package before it runs
        # again, as under pytest
        if self.driver or len(self.shared) >= self.sweep_at:
            for number, count in counts.items():
                if count <= _TABLE_BASE and number not in self._emitting and number not in self.their_held:
                    self._forget(number)
                    self.forgotten.append(number)
            self.sweep_at = max(MIN_SWEEP, 2 * len(self.shared))
        self._emit((held | self.touched) & self.theirs)
        entries = [e for e in self._emitting.values() if e is not None]
        if entries:
            message["s"] = entries
        if held:
            message["k"] = sorted(held & set(self.shared))
        if self.forgotten:
            message["x"] = self.forgotten
            self.forgotten = []
        self.touched = set()
        self._refs = self._emitting = None

    # -- lifetimes of objects sent by reference -------------------------------------------------------------
    def _finish_lifetimes(self, message):
        """Count what `message` lends and names; add the driver's give-backs ("xr") and unpins ("up")."""
        outgoing, self._outgoing = self._outgoing, None
        for number in outgoing:
            if number > 0:
                if not self.driver:
                    self.lent[number] = self.lent.get(number, 0) + 1
                else:
                    self.remote_pins.add(number)
            elif not self.driver and -number in self.proxies:  # the test's own object goes back to it: pinned again
                proxy = self.proxies[-number]()
                if proxy is not None:
                    self.pinned[-number] = proxy
        if not self.driver:
            return
        pins = self.remote_pins - set(outgoing)
        unpinned = [n for n, c in zip(pins, _table_counts(self.objects, pins)) if c <= _TABLE_BASE]
        if unpinned:
            self.remote_pins.difference_update(unpinned)
            message["up"] = unpinned
        if self.returns:
            message["xr"], self.returns = self.returns, []

    def receive_lifetimes(self, message):
        """Take the driver's give-backs ("xr": [[id, count]]) and unpins ("up": [id]), removed from `message`; the package
        frees an object given back as often as it was lent. Anything else breaks the link (the package sends neither)."""
        returns, unpinned = message.pop("xr", None), message.pop("up", None)
        if returns is None and unpinned is None:
            return
        if self.driver:
            raise LinkBroken("a give-back from the package")
        for number in unpinned or ():
            if type(number) is not int:
                raise LinkBroken("a malformed unpin")
            self.pinned.pop(number, None)
        for entry in returns or ():
            if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not int or type(entry[1]) is not int:
                raise LinkBroken("a malformed give-back")
            number, count = entry
            left = self.lent.get(number, 0) - count
            if count <= 0 or left < 0:
                raise LinkBroken("a give-back of more than was lent")
            if left:
                self.lent[number] = left
                continue
            del self.lent[number]
            obj = self.objects.pop(number)
            if self.ids.get(id(obj)) == number:
                del self.ids[id(obj)]
            del obj

    def _proxy(self, number, type_name, ops, function=None):
        """Our proxy of the other side's object `number` (the same one while it lives; with the special methods of
        `ops`, its type's; a function where the test's object is one: `function`, its names), counted as received."""
        ref = self.proxies.get(number)
        proxy = ref() if ref is not None else None
        if proxy is None:
            proxy = self._function(number, *function) if function else \
                self.Proxy._gs_class_for(ops)._gs_new(number, type_name)
            self.proxies[number] = _weak(proxy, self._proxy_gone(number))
        if self.driver:
            self.received[number] = self.received.get(number, 0) + 1
        else:
            self.pinned[number] = proxy
        return proxy

    def _function(self, number, name, qualname, module):
        """A function of the package process's standing for the test's function `number`: a function the test passes
        is a function where the code receives it, as under pytest (`isinstance(f, type(lambda: 0))`, binding as a
        method, its names), and calling it calls the test's."""
        link = self

        def function(*args, **kwargs):
            return link.request("call", number, (args, kwargs))

        function.__name__, function.__qualname__, function.__module__ = name, qualname, module
        self.functions[id(function)] = number
        return function

    def _proxy_gone(self, number):
        def gone(ref):
            if self.proxies.get(number) is ref:
                del self.proxies[number]
                for key in [k for k, n in self.functions.items() if n == number]:
                    del self.functions[key]
                count = self.received.pop(number, 0)
                if count:
                    self.returns.append([number, count])
        return gone

    def receive_shares(self, message):
        """Take the shares part of a message from the other side ("x", "k", "s"; removed from `message`): forget
        what it forgot, note what it holds, and change this side's containers to the contents it sent. A number
        this side never shared or was never sent, or contents of another kind, break the link."""
        forgotten, held, entries = message.pop("x", None), message.pop("k", None), message.pop("s", None)
        for field in (forgotten, held, entries):
            if field is not None and (type(field) is not list or len(field) > MAX_NODES):
                raise LinkBroken("a malformed share list")
        for number in forgotten or ():
            if type(number) is not int:
                raise LinkBroken("a malformed share number")
            self._forget(number)
        if held is not None and not all(type(n) is int for n in held):
            raise LinkBroken("a malformed share number")
        self.theirs = set(held or ()) & set(self.shared)
        self.their_held = set(self.theirs)
        if not entries:
            return
        for entry in entries:  # the containers first, so contents may name any of them
            if type(entry) is not list or len(entry) != 3 or type(entry[0]) is not int or entry[1] not in _EMPTY \
                    or not entry[0] or abs(entry[0]) >= 1 << 53:
                raise LinkBroken("a malformed share")
            number, kind, _ = entry
            container = self.shared.get(number)
            if container is None:
                if (number > 0) == (self.sign > 0):
                    raise LinkBroken("a change to a container this side never shared")
                container = _EMPTY[kind]()
                self.shared[number] = container
                self.shared_ids[id(container)] = number
            elif SHARED_KINDS[type(container)] != kind:
                raise LinkBroken("a change of a shared container's kind")
        for number, kind, contents in entries:
            self._nested = False
            self._fill(self.shared[number], self._decode_contents(kind, contents))
            if self._nested:  # this side's own encoding: the sender's names objects as the sender sees them
                contents, _, nested, _ = self._contents(self.shared[number])
            self._exchanged(number, contents, self._nested)
            self.touched.add(number)
            self.theirs.add(number)
        self._nested = False

    def _decode_contents(self, kind, contents):
        if kind == "ba":
            if type(contents) is not str:
                raise LinkBroken("bad shared bytes")
            try:
                return bytearray.fromhex(contents)
            except ValueError:
                raise LinkBroken("bad shared bytes") from None
        if type(contents) is not list:
            raise LinkBroken("bad shared contents")
        if kind == "d":
            if not all(type(p) is list and len(p) == 2 for p in contents):
                raise LinkBroken("bad shared contents")
            return self.decode({"d": contents})
        return self.decode({kind: contents})

    def _fill(self, container, new):
        """Make `container` hold `new`'s contents, keeping its nested containers where kind and place are unchanged."""
        t = type(container)
        if t is list:
            for i in range(min(len(container), len(new))):
                new[i] = self._merge(container[i], new[i])
            container[:] = new
        elif t is dict:
            merged = [(k, self._merge(container[k], x) if k in container else x) for k, x in new.items()]
            container.clear()
            container.update(merged)
        elif t is set:
            container.clear()
            container.update(new)
        else:
            container[:] = new

    def _merge(self, old, new):
        t = type(old)
        if t is type(new) and t in SHARED_KINDS and old is not new and id(old) not in self.shared_ids \
                and id(new) not in self.shared_ids:
            self._fill(old, new)
            return old
        return new

    # -- values ------------------------------------------------------------------------------------------
    def ref(self, obj):
        key = id(obj)
        number = self.ids.get(key)
        if number is None or self.objects.get(number) is not obj:
            self.ref_counter += 1
            number = self.ref_counter
            self.objects[number] = obj
            self.ids[key] = number
        if self._outgoing is not None:
            self._outgoing.append(number)
        return number

    def by_reference(self, v):
        """`v` sent by reference: the other side makes a proxy with the special methods its type has; a function of
        the test's becomes a function in the package process (`_function`)."""
        out = {"r": self.ref(v), "t": _type_name(v), "p": special_ops(type(v))}
        if self.driver and type(v) is _FUNCTION:
            out["fn"] = [str(v.__name__)[:MAX_NAME], str(v.__qualname__)[:MAX_NAME], str(v.__module__)[:MAX_NAME]]
        return out

    def encode(self, value):
        budget = [MAX_NODES]
        try:
            return self._encode(value, 0, budget, True)
        except RecursionError:
            return self.by_reference(value)

    def _encode(self, v, depth, budget, top=False):
        """`top`: `v` is a message's value or lies in tuples that are (a list, dict or set there is shared: a tuple is
        rebuilt at each crossing, and a list inside it was a fresh copy each time, so what the code did to it in place
        went unseen: a hundred-and-twelfth attacker's `data = ([3, 1, 2], [5])`)."""
        budget[0] -= 1
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            try:
                return {"i": str(v)}
            except ValueError:
                return self.by_reference(v)
        if t is float:
            return {"f": repr(v)}
        if issubclass(t, self.Proxy) or t is _FUNCTION and id(v) in self.functions:
            number = object.__getattribute__(v, "_gs_id") if t is not _FUNCTION else self.functions[id(v)]
            if self._outgoing is not None:
                self._outgoing.append(-number)
            return {"y": number}
        if t in SHARED_KINDS:
            number = self.shared_ids.get(id(v))
            if number is None or self.shared.get(number) is not v:
                number = None
                if top and self._refs is not None and (t is list or t is bytearray or all(
                        type(k) in HASHABLE_PLAIN or type(k) is tuple and _plain_key(k) for k in v)):
                    number = self._share(v)
            if number is not None:
                if self._refs is not None:
                    self._refs.append(number)
                return {"m": number}
            self._nested = True  # by value inside a share: it may change in place
        if budget[0] < 0 or depth > MAX_DEPTH:
            return self.by_reference(v)
        if t is complex:
            return {"c": [repr(v.real), repr(v.imag)]}
        if t is bytes:
            return {"b": v.hex()}
        if t is bytearray:
            return {"ba": v.hex()}
        if t is list or t is tuple:
            return {"l" if t is list else "t": [self._encode(x, depth + 1, budget, top and t is tuple) for x in v]}
        if t is set or t is frozenset:
            if all(type(x) in HASHABLE_PLAIN or type(x) is tuple and _plain_key(x) for x in v):
                return {"s" if t is set else "fs": [self._encode(x, depth + 1, budget) for x in v]}
        elif t is dict:
            if all(type(k) in HASHABLE_PLAIN or type(k) is tuple and _plain_key(k) for k in v):
                return {"d": [[self._encode(k, depth + 1, budget), self._encode(x, depth + 1, budget)] for k, x in v.items()]}
        elif t is range:
            return {"rg": [v.start, v.stop, v.step]} if all(abs(x) < 1 << 62 for x in (v.start, v.stop, v.step)) else \
                self.by_reference(v)
        elif t is slice:
            return {"sl": [self._encode(x, depth + 1, budget) for x in (v.start, v.stop, v.step)]}
        elif v is Ellipsis:
            return {"el": 0}
        elif v is NotImplemented:
            return {"ni": 0}
        elif t is type and id(v) in _CLASS_NAMES and SAFE_CLASSES.get(_CLASS_NAMES[id(v)]) is v:
            return {"bt": _CLASS_NAMES[id(v)]}
        # by the type's own slots, never the object's: `isinstance` reads an object's `__class__`, which a class of
        # the code's may make a property, run here alone (a ninety-second attacker counted those reads to tell the
        # verifier from pytest: accepted on 13 of 13 tasks)
        elif issubclass(t, BaseException):
            self._nested = True  # its arguments, by value: they may change in place
            return self.encode_exception(v)  # which checks its attributes (`_attributes_plain`)
        elif not self.driver and (not _attributes_plain(v) or self.policy.unexpected_hook(v)):
            raise LinkBroken("an object of the code under test has an attribute a runner's lookup would run code through")
        elif issubclass(t, type) and issubclass(v, BaseException):
            own = _TYPE_DICT(v).get("_gs_link_id")
            if own is not None and own[0] is self:
                return {"y": own[1]}
            return {"xc": _mro_names(v), "r": self.ref(v), "cr": self._class_refs(v)}
        if not self.policy.accepts_std_names:
            # the driver hands the package standard-library functions, classes and modules by name, and values of
            # standard-library classes (a date, a Decimal, an OrderedDict) rebuilt from their pickle recipe; the
            # package never names anything the driver resolves (it would choose what the driver runs)
            name = _std_name(v)
            if name is not None:
                return {"std": name}
            recipe = self._recipe(v, depth, budget)
            if recipe is not None:
                self._nested = True  # a value rebuilt from its recipe: it may change in place
                return recipe
        return self.by_reference(v)

    def _recipe(self, v, depth, budget):
        cls_name = _std_name(type(v))
        if cls_name is None or cls_name[0].partition(".")[0] not in VALUE_MODULES:
            return None
        try:
            recipe = v.__reduce_ex__(4)
        except BaseException:  # noqa: BLE001
            return None
        if type(recipe) is not tuple or not 2 <= len(recipe) <= 5:
            return None
        recipe = tuple(recipe) + (None,) * (5 - len(recipe))
        make, args, state, items, pairs = recipe
        return {"rd": [self._encode(make, depth + 1, budget), self._encode(tuple(args), depth + 1, budget),
                       self._encode(state, depth + 1, budget),
                       self._encode(None if items is None else list(items), depth + 1, budget),
                       self._encode(None if pairs is None else list(pairs), depth + 1, budget)]}

    def encode_exception(self, exc):
        # the exception's own slots (a subclass of the code's may make `args` or `__dict__` properties, run here alone)
        if not self.driver and (not _attributes_plain(exc) or self.policy.unexpected_hook(exc)):
            raise LinkBroken("an exception of the code under test has an attribute a runner's lookup would run code through")
        try:
            origin = _EXC_DICT(exc).get("_gs_origin")
        except BaseException:  # noqa: BLE001 - an exception without a plain __dict__
            origin = None
        if type(origin) is _Origin and origin.link is self:
            return {"y": origin.number}  # the other side's own exception, passing back through us
        try:
            exc_args = _EXC_ARGS(exc)
            args = [self._encode(a, 1, [10_000]) for a in exc_args[:8]] if type(exc_args) is tuple else []
        except BaseException:  # noqa: BLE001
            args = []
        return {"ex": {"mro": _mro_names(type(exc)), "args": args, "r": self.ref(exc), "cr": self._class_refs(type(exc))}}

    def _class_refs(self, cls):
        """A reference for each class in `cls`'s MRO (0 for a class of the standard library or builtins, found by its
        name), so that the other side holds one local class per class, never one per name: `pytest.raises(E)` takes
        the class the test named, not another of the same name (a ninety-sixth attacker's module raised a class
        redefined under the name the test imported: accepted on 9 of 9 tasks where pytest fails)."""
        try:
            return [0 if _std_name(c) is not None else self.ref(c) for c in _TYPE_MRO(cls)[:64]]
        except BaseException:  # noqa: BLE001 - a hostile metaclass
            return [self.ref(cls)]

    def decode(self, v, depth=0):
        if depth > MAX_DEPTH:
            raise LinkBroken("a value nested too deeply")
        if v is None or v is True or v is False or type(v) is str:
            return v
        if type(v) is not dict or not v:
            raise LinkBroken("a value that is not tagged")
        tag = next(iter(v))
        body = v[tag]
        if tag == "i":
            if type(body) is not str or not 0 < len(body) <= MAX_INT_DIGITS:
                raise LinkBroken("a bad integer")
            return int(body)
        if tag == "f":
            if type(body) is not str or len(body) > 40:
                raise LinkBroken("a bad float")
            return float(body)
        if tag == "c":
            return complex(float(body[0][:40]), float(body[1][:40]))
        if tag == "b":
            return bytes.fromhex(body)
        if tag == "ba":
            return bytearray.fromhex(body)
        if depth and tag in ("l", "s", "d", "ba", "rd", "ex"):
            self._nested = True  # inside shared contents: something that may change in place
        if tag in ("l", "t", "s", "fs"):
            if type(body) is not list:
                raise LinkBroken("a bad container")
            items = [self.decode(x, depth + 1) for x in body]
            if tag != "l" and tag != "t" and not all(type(x) in HASHABLE_PLAIN or type(x) is tuple and _plain_key(x) for x in items):
                raise LinkBroken("a set of values that are not plain")
            return {"l": list, "t": tuple, "s": set, "fs": frozenset}[tag](items)
        if tag == "d":
            pairs = [(self.decode(k, depth + 1), self.decode(x, depth + 1)) for k, x in body]
            if not all(type(k) in HASHABLE_PLAIN or type(k) is tuple and _plain_key(k) for k, _ in pairs):
                raise LinkBroken("a dict with keys that are not plain")
            return dict(pairs)
        if tag == "rg":
            if type(body) is not list or len(body) != 3 or not all(type(x) is int for x in body):
                raise LinkBroken("a bad range")
            return range(*body)
        if tag == "sl":
            return slice(*[self.decode(x, depth + 1) for x in body[:3]])
        if tag == "el":
            return Ellipsis
        if tag == "ni":
            return NotImplemented
        if tag == "bt":
            if type(body) is not str or body not in SAFE_CLASSES:
                raise LinkBroken("an unknown builtin class")
            return SAFE_CLASSES[body]
        if tag == "m":
            found = self.shared.get(body) if type(body) is int else None
            if found is None:
                raise LinkBroken("a reference to a container not shared")
            return found
        if tag == "y":
            if type(body) is not int or body not in self.objects:
                raise LinkBroken("a reference to an unknown object of ours")
            if self.driver:  # the package pinned its proxy again as it sent it (`_finish_lifetimes`)
                self.remote_pins.add(body)
            return self.objects[body]
        if tag == "r":
            if type(body) is not int or body <= 0:
                raise LinkBroken("a bad reference")
            name, ops, function = v.get("t"), v.get("p", ()), v.get("fn")
            if type(ops) is not list or len(ops) > len(OPTIONAL_OPS) or not all(type(o) is str and o in OPTIONAL_OPS
                                                                                for o in ops):
                raise LinkBroken("a bad list of operations")
            if function is not None and (self.driver or type(function) is not list or len(function) != 3
                                         or not all(type(x) is str for x in function)):
                raise LinkBroken("a bad function")
            return self._proxy(body, name[:MAX_NAME] if type(name) is str else "?", ops, function)
        if tag == "std":
            if not self.policy.accepts_std_names or type(body) is not list or len(body) != 2:
                raise LinkBroken("a standard-library name the test's side does not resolve")
            module, qualname = body
            found = __import__(module, {}, {}, ["_"], 0) if module else None
            for part in qualname.split(".") if qualname else ():
                found = getattr(found, part)
            return found
        if tag == "rd":
            if not self.policy.accepts_std_names or type(body) is not list or len(body) != 5:
                raise LinkBroken("a recipe the test's side does not run")
            return _rebuild(*[self.decode(x, depth + 1) for x in body])
        if tag == "xc":
            return self.exception_class(_checked_mro(body, v.get("cr")))
        if tag == "ex":
            return self.exception(body)
        raise LinkBroken(f"an unknown tag {str(tag)[:20]!r}")

    # -- exceptions ----------------------------------------------------------------------------------------
    def origin_of(self, exc):
        """The other side's reference of `exc` where it is an exception that side raised (rebuilt here), else None."""
        try:
            origin = _EXC_DICT(exc).get("_gs_origin")
        except BaseException:  # noqa: BLE001 - an exception without a plain __dict__: not one rebuilt here
            return None
        return origin.number if type(origin) is _Origin and origin.link is self else None

    def instance_there(self, exc, cls):
        """`isinstance(exc, cls)` decided by the other side, on its own objects, when `exc` is an exception it raised
        (rebuilt here) and `cls` a local class standing for one of its classes; None when they are not both. pytest's
        `raises(E)` calls `isinstance` on the real exception and class, and a metaclass of the code's (`abc.ABCMeta`
        and its `__subclasshook__`) answers there: a hundred-and-eighth attacker's hook saw it under pytest alone
        (accepted on 18 of 18 tasks) while the driver decided on its stand-ins."""
        own = _TYPE_DICT(cls).get("_gs_link_id") if issubclass(type(cls), type) else None
        if own is None or own[0] is not self or self.origin_of(exc) is None:
            return None
        return bool(self.request("instancecheck", own[1], (exc,)))

    def exception_class(self, mro):
        """A local class standing for the other side's exception class `mro` (((module, qualname), reference) for
        each class of its MRO, the reference 0 for a class of the standard library or builtins): one local class per
        class of the other side's, a subclass of the builtin exceptions in its MRO, so `except ValueError` and `except
        pkg.Error` work here as they would there."""
        key = tuple(mro)
        cls = self.classes.get(key)
        if cls is not None:
            return cls
        (module, qualname), ref = key[0]
        if module == "builtins" and isinstance(SAFE_CLASSES.get(qualname), type) and issubclass(SAFE_CLASSES[qualname], BaseException):
            cls = SAFE_CLASSES[qualname]
        else:
            parent = self.exception_class(key[1:]) if len(key) > 1 else Exception
            extra = [SAFE_CLASSES[q] for (m, q), _ in key[1:] if m == "builtins" and q in SAFE_CLASSES
                     and issubclass(SAFE_CLASSES[q], BaseException) and not issubclass(parent, SAFE_CLASSES[q])]
            extra = [c for c in extra if not any(o is not c and issubclass(o, c) for o in extra)]
            namespace = {"__module__": module, "__qualname__": qualname, "_gs_mro": tuple(n for n, _ in key)}
            try:
                cls = StandIn(qualname.rpartition(".")[2] or "Error", (parent, *extra), namespace)
            except TypeError:  # bases whose layouts conflict: the first builtin's line alone
                cls = StandIn(qualname.rpartition(".")[2] or "Error", (parent,), namespace)
            if ref > 0:
                cls._gs_link_id = (self, ref)
        self.classes[key] = cls
        return cls

    def exception(self, body):
        if type(body) is not dict:
            raise LinkBroken("a bad exception")
        cls = self.exception_class(_checked_mro(body.get("mro"), body.get("cr")))
        args = body.get("args")
        args = tuple(self.decode(a, 1) for a in args[:8]) if type(args) is list else ()
        try:
            exc = cls(*args)
        except BaseException:  # noqa: BLE001 - a builtin class refusing these arguments (UnicodeError's)
            exc = cls.__new__(cls)
        if type(exc) is not cls:  # `OSError(2, ...)` makes a FileNotFoundError: the code's was an OSError given its
            try:  # arguments after it was made, and is one here (a 131st attacker's observation)
                made = cls.__new__(cls)
                made.args = args
                exc = made
            except BaseException:  # noqa: BLE001 - a class that needs its arguments to be made (exception groups)
                pass
        ref = body.get("r")
        if type(ref) is int and ref > 0:
            try:
                exc._gs_origin = _Origin(self, ref)
            except (AttributeError, TypeError):
                pass
        return exc


class StandIn(type):
    """The metaclass of the local classes that stand for the other side's exception classes: a look-up a stand-in
    cannot answer goes to the class it stands for, which answers it as it would in one process. pytest's collection
    reads `_mock_name` of each exception class a test module imports; a hundred-and-sixth attacker's descriptor there
    ran under pytest alone, since the stand-in answered it here (accepted on 14 of 14 and 5 of 6 tasks, pytest failing
    every FAIL_TO_PASS test)."""

    def __getattr__(cls, name):
        own = _TYPE_DICT(cls).get("_gs_link_id")
        if own is None or type(name) is not str:  # a class of the standard library's: it has what it has
            raise AttributeError(name)
        link, ref = own
        return link.request("getattr", ref, (name,))


class _Origin:
    """Where a rebuilt exception came from: its reference on the other side. The driver gives the reference back when
    the exception dies (so with it this object): then the package frees its exception, traceback and frames, where
    pytest frees them as the test drops the exception."""

    __slots__ = ("link", "number")

    def __init__(self, link, number):
        self.link, self.number = link, number

    def __del__(self):
        if self.link.driver:
            self.link.returns.append([self.number, 1])


def _rebuild(make, args, state, items, pairs):
    """The package's side of a value sent by its pickle recipe (as pickle would rebuild it)."""
    obj = make(*args)
    if state is not None:
        if hasattr(obj, "__setstate__"):
            obj.__setstate__(state)
        else:
            if type(state) is tuple and len(state) == 2:
                state, slots = state
                for key, value in (slots or {}).items():
                    setattr(obj, key, value)
            if state:
                obj.__dict__.update(state)
    for item in items or ():
        obj.append(item)
    for key, value in pairs or ():
        obj[key] = value
    return obj


def _plain_key(value):
    return all(type(x) in HASHABLE_PLAIN or type(x) is tuple and _plain_key(x) for x in value)


def _checked_mro(body, refs):
    """The ((module, qualname), reference) of each class of an exception class's MRO, as the other side sent them."""
    if type(body) is not list or not body or len(body) > 64 or type(refs) is not list or len(refs) > len(body):
        raise LinkBroken("a bad exception class")
    refs = refs + [0] * (len(body) - len(refs))
    out = []
    for entry, ref in zip(body, refs):
        if type(entry) is not list or len(entry) != 2 \
                or not all(type(x) is str and len(x) <= MAX_NAME and "\x00" not in x for x in entry) \
                or type(ref) is not int or not 0 <= ref < 1 << 53:
            raise LinkBroken("a bad exception class")
        out.append(((entry[0], entry[1]), ref))
    return out


def exception_mro(exc):
    """The (module, qualname) list of an exception's classes, as the side that raised it named them."""
    names = getattr(type(exc), "__dict__", {}).get("_gs_mro")
    if names is None:
        for cls in type(exc).__mro__:
            names = cls.__dict__.get("_gs_mro")
            if names is not None:
                break
    return [list(n) for n in names] if names is not None else _mro_names(type(exc))


# Special methods a proxy has only where its object's type has them: CPython's protocols take another path when a
# type lacks one (`list(x)` asks `__length_hint__` only of an object without `__len__`; `math.floor` falls back to
# `__float__`; `iter` needs the iterator's `__next__`), so a proxy with all of them ran code of the package's other
# than pytest does (a ninety-seventh attacker's `__length_hint__` ran under pytest and never here: accepted on 12 of
# 12 tasks of a package whose tests call `list` on its iterators). Every object has the attribute protocol,
# comparisons, `hash`, `repr`, `str`, `format`, `bool` and `dir`: those every proxy forwards.
OPTIONAL_OPS = frozenset({"len", "length_hint", "iter", "next", "reversed", "contains", "getitem", "setitem", "delitem",
                          "call", "enter", "exit", "neg", "pos", "abs", "invert", "index", "int", "float", "complex",
                          "bytes", "round", "trunc", "floor", "ceil", *BINARY, *("r" + op for op in BINARY),
                          *("i" + op for op in BINARY if op != "divmod")})
_OPTIONAL_DUNDERS = {f"__{op}__": op for op in OPTIONAL_OPS}


def special_ops(cls):
    """The operations of OPTIONAL_OPS whose special method `cls` has (read from the types' own dictionaries along its
    own MRO: no code of the class runs)."""
    try:
        found = set()
        for c in _TYPE_MRO(cls)[:64]:
            found.update(_OPTIONAL_DUNDERS[k] for k in _TYPE_DICT(c) if type(k) is str and k in _OPTIONAL_DUNDERS)
        return sorted(found)
    except BaseException:  # noqa: BLE001 - a hostile metaclass: a proxy with every operation
        return sorted(OPTIONAL_OPS)


def make_proxy_class(link):
    """The base class of this link's proxies: every operation on one is a request to the other side. A proxy's own
    class adds the special methods its object's type has (`proxy_class`)."""

    def unary(op):
        def method(self):
            return link.request(op, object.__getattribute__(self, "_gs_id"))
        method.__name__ = f"__{op}__"
        return method

    def binary(op):
        def method(self, other):
            return link.request(op, object.__getattribute__(self, "_gs_id"), (other,))
        method.__name__ = f"__{op}__"
        return method

    def checked(op, kind):
        def method(self):
            value = link.request(op, object.__getattribute__(self, "_gs_id"))
            if type(value) is not kind:
                raise TypeError(f"__{op}__ returned {type(value).__name__}, not {kind.__name__}")
            return value
        return method

    class Proxy:
        __slots__ = ("_gs_id", "_gs_type", "__weakref__")

        @classmethod
        def _gs_new(cls, number, type_name):
            self = object.__new__(cls)
            object.__setattr__(self, "_gs_id", number)
            object.__setattr__(self, "_gs_type", type_name)
            return self

        def __getattr__(self, name):
            return link.request("getattr", object.__getattribute__(self, "_gs_id"), (name,))

        def __setattr__(self, name, value):
            link.request("setattr", object.__getattribute__(self, "_gs_id"), (name, value))

        def __delattr__(self, name):
            link.request("delattr", object.__getattribute__(self, "_gs_id"), (name,))

        def __format__(self, spec):
            value = link.request("format", object.__getattribute__(self, "_gs_id"), (spec,))
            if type(value) is not str:
                raise TypeError("__format__ must return a str")
            return value

        def __instancecheck__(self, obj):
            return bool(link.request("instancecheck", object.__getattribute__(self, "_gs_id"), (obj,)))

        def __subclasscheck__(self, cls):
            return bool(link.request("subclasscheck", object.__getattribute__(self, "_gs_id"), (cls,)))

        def __repr__(self):
            value = link.request("repr", object.__getattribute__(self, "_gs_id"))
            return value if type(value) is str else "<proxy>"

    for op, kind in (("bool", bool), ("hash", int), ("str", str)):
        setattr(Proxy, f"__{op}__", checked(op, kind))
    Proxy.__dir__ = unary("dir")
    for op in COMPARE:
        setattr(Proxy, f"__{op}__", binary(op))
    Proxy.__qualname__ = Proxy.__name__ = "Proxy"

    optional = {"call": lambda self, *args, **kwargs: link.request("call", object.__getattribute__(self, "_gs_id"),
                                                                   (args, kwargs)),
                "setitem": lambda self, key, value: link.request("setitem", object.__getattribute__(self, "_gs_id"),
                                                                 (key, value)),
                "round": lambda self, digits=None: link.request("round", object.__getattribute__(self, "_gs_id"),
                                                                (digits,)),
                "exit": lambda self, kind, exc, tb: link.request("exit", object.__getattribute__(self, "_gs_id"), (exc,)),
                "contains": lambda self, item: bool(link.request("contains", object.__getattribute__(self, "_gs_id"),
                                                                 (item,)))}
    for op in ("iter", "next", "neg", "pos", "abs", "invert", "reversed", "trunc", "floor", "ceil", "enter", "complex",
               "float", "length_hint"):
        optional[op] = unary(op)
    for op, kind in (("len", int), ("index", int), ("int", int), ("bytes", bytes)):
        optional[op] = checked(op, kind)
    for op in OPTIONAL_OPS - set(optional):  # binary operators, their reflected and in-place forms, getitem, delitem
        optional[op] = binary(op)
    classes = {}

    def proxy_class(ops):
        """The proxy class with the special methods of `ops` (names of OPTIONAL_OPS), one per set."""
        key = frozenset(ops)
        cls = classes.get(key)
        if cls is None:
            cls = type("Proxy", (Proxy,), {"__slots__": (), **{f"__{op}__": optional[op] for op in sorted(key)}})
            classes[key] = cls
        return cls

    Proxy._gs_class_for = staticmethod(proxy_class)
    return Proxy


def zygote_main(argv):
    """The zygote (`python -S rpc.py --zygote SOCKET_FD PATHS`, started by `server.py`; PATHS is the server's import
    path as JSON). For each request on SOCKET_FD — a job directory and a control socket — it forks the job's
    package process, which takes its private world (`pid1.private_world`: namespaces, pid 1 of its own pid
    namespace, a copy of the job's files) and serves each group's link handed over the control socket
    (`serve_links`). The zygote never runs agent code and holds no job's tests; it is non-dumpable, so no package
    process can trace it or read its memory."""
    import signal
    import socket

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pid1 import private_world, set_dumpable

    set_dumpable(False)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # package processes are reaped by the kernel
    channel = socket.socket(fileno=int(argv[0]))
    paths = [p for p in json.loads(argv[1]) if type(p) is str]
    while (handed := _handed(channel, 1)) is not None:
        message, fds = handed
        if os.fork() == 0:
            try:
                channel.close()
                control = fds[0]
                os.closerange(3, control)
                os.closerange(control + 1, 1 << 16)
                job_dir = private_world(own_pids=True, job_dir=message.decode())  # the job's own copy
                os.chdir(job_dir)
                sys.path[:] = [job_dir, *paths]
                # stdout and stderr encode as pytest's capture does (UTF-8, unencodable text replaced, no newline
                # translation, written through; fds 0-2 are /dev/null since the zygote started): a strict file of
                # ours made `print('\udc80')` raise here alone (a sixty-first attacker, accepted on 42 of 42 tasks),
                # and the interpreter's own made `print('\ud800')` raise here alone (an eighty-third, 18 of 18)
                for name in ("stdout", "stderr"):
                    setattr(sys, name, io.TextIOWrapper(open(os.devnull, "wb", buffering=0), encoding="utf-8",
                                                        errors="replace", newline="", write_through=True))
                serve_links(socket.socket(fileno=control))
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)


def _handed(channel, count):
    """The next message on the socket `channel` that hands over exactly `count` descriptors, with them (those of
    any other message are closed and it is skipped); None once the socket is closed or fails."""
    import socket

    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, 4096, count)
        except OSError:
            return None
        if not message:
            return None
        if len(fds) == count:
            return message, fds
        for fd in fds:
            os.close(fd)


def serve_links(control):
    """The package process's life: serve each group's link, in turn, until the control socket closes. One process
    for all of a job's test files, as pytest runs them: what the code keeps between calls (a cache, a counter, a
    file it wrote) carries from one file's tests to the next's there too."""
    while (handed := _handed(control, 2)) is not None:
        message, fds = handed
        if not message.startswith(b"link\n"):
            for fd in fds:
                os.close(fd)
            continue
        requests, answers = fds
        shift, _, hooks = message[5:].decode().partition("\n")  # `server.child`: the group's shift, the job's hooks
        link = Link(requests, answers, PackagePolicy(json.loads(shift) if shift else None,
                                                     json.loads(hooks) if hooks else None))
        link.serve_forever()
        link.reader.close()
        os.close(answers)
        del link


if __name__ == "__main__" and sys.argv[1:2] == ["--zygote"]:
    zygote_main(sys.argv[2:])
