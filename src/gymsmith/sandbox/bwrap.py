"""The bubblewrap backend: commands run in user, pid, mount, ipc and uts namespaces, in an empty network namespace.

What a command sees: the programs of /usr and the libraries they load, and the Python installation, read-only
(its site-packages replaced by `runtime.python_runtime()`), a private /dev, no /proc (but in a warm server's), a size-capped tmpfs /tmp, and the workspace at
/workspace, the only writable place. It runs as uid 1000 with no capabilities. The network is an empty
namespace (loopback only), or, with an allowlist, loopback plus a forwarder to the host's filtering
proxy through a unix socket.

The namespaces are made once per sandbox, with a small command server (`proc.py`) as their pid 1;
each `exec` is a spawn inside them (~1 ms instead of bubblewrap's ~5). After every command the server
kills every other process in the namespace, so nothing a command started outlives it. `/tmp` lives as
long as the server: `reset()` ends it, and the next command starts a fresh one.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import platform
import resource
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, cast

from gymsmith.sandbox import devices, netns, residency, seccomp, sharedfs
from gymsmith.sandbox.base import (VERIFIER_CPU_WEIGHT, WORKSPACE, ExecResult, KillReason, Limits, Sandbox, SandboxError,
                                   decode_output, sandbox_backend)
from gymsmith.sandbox.cgroups import Cgroup
from gymsmith.sandbox.egress import EgressProxy
from gymsmith.sandbox.runtime import PythonRuntime, python_runtime

FORWARDER = Path(__file__).with_name("forward.py")
COMMAND_SERVER = Path(__file__).with_name("proc.py")
SEEDED_SITE = Path(__file__).with_name("seeded_site.py")  # a seeded sandbox's sitecustomize
ADDR_NO_RANDOMIZE = 0x0040000  # personality(2): a seeded sandbox's processes get the same addresses every run
_libc = ctypes.CDLL(None, use_errno=True)
_libc.personality.argtypes, _libc.personality.restype = (ctypes.c_ulong,), ctypes.c_int
RUN_DIR = "/run/sandbox"  # no "gymsmith" in any path a command can see
PROXY_PORT = 3128  # the forwarder's port on the sandbox's own loopback
SANDBOX_UID = 1000
BASE_ENV = {"HOME": "/tmp", "USER": "sandbox", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0", "GIT_AUTHOR_NAME": "agent", "GIT_AUTHOR_EMAIL": "agent@sandbox",
            "GIT_COMMITTER_NAME": "agent", "GIT_COMMITTER_EMAIL": "agent@sandbox", "GIT_CONFIG_NOSYSTEM": "1"}
ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache")  # only what tools need: the rest of /etc stays hidden
# The parts of /usr a command sees: programs, the libraries they load, git's helpers, locales, time zones,
# certificates. Not the rest: a host's /usr holds other copies of Python packages (Debian's dist-packages, pip's
# and setuptools' vendored libraries, wheels, SDKs with their own Python), among them the very packages a task is
# made from: a red-team agent copied six, more-itertools and inflection from them and was accepted. The only Python
# source a sandbox holds is the interpreter's standard library and the runtime's packages (`python_sources`).
USR_DIRS = ("/usr/bin", "/usr/sbin", "/usr/libexec", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64", "/usr/lib/git-core", "/usr/lib/locale", "/usr/lib/ssl", "/usr/share/git-core",
            "/usr/share/zoneinfo", "/usr/share/ca-certificates", "/usr/share/misc", "/usr/share/terminfo")
# parts of the interpreter's installation that are not its standard library: bundled wheels (pip's and
# setuptools', which vendor third-party packages) and the interpreter's own test suite
PREFIX_HIDDEN = ("ensurepip/_bundled", "test")
EGRESS_ETC_FILES = ("/etc/ssl/certs",)  # certificates, for HTTPS through the egress proxy


def python_mounts(rt) -> list[str]:
    """bwrap arguments that give a sandbox the interpreter and its standard library, and nothing else of its
    installation: not its scripts (a pyenv's bin/ holds every tool installed into it), not its site-packages (the
    runtime's packages are mounted there), not its bundled wheels or test suite (`PREFIX_HIDDEN`)."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,  # the base interpreter's, not a venv's
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars=base)
    stdlib = sorted({os.path.realpath(paths["stdlib"]), os.path.realpath(paths["platstdlib"])})
    here = os.path.dirname(rt.interpreter)
    under_usr = any(here == d or here.startswith(d + "/") for d in USR_DIRS)
    args = [x for d in stdlib for x in ("--ro-bind", d, d)]
    if not under_usr:  # a pyenv, a venv-style install: the interpreter, its shared library, python3/python names
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        shared = [os.path.join(libdir, f) for f in os.listdir(libdir) if f.startswith("libpython")] if os.path.isdir(libdir) else []
        args += [x for f in [rt.interpreter, *shared] if os.path.isfile(f) for x in ("--ro-bind", f, f)]
        name = os.path.basename(rt.interpreter)
        args += [x for alias in ("python3", "python") if alias != name
                 for x in ("--symlink", name, os.path.join(here, alias))]
    hidden = [d for d in (os.path.join(root, rel) for root in stdlib for rel in PREFIX_HIDDEN) if os.path.isdir(d)]
    for d in [*rt.site_dirs[1:], *hidden]:
        args += ["--tmpfs", d, "--remount-ro", d]
    if rt.site_dirs:  # hide the host's packages; only ours are importable
        args += ["--ro-bind", rt.packages_dir, rt.site_dirs[0]]
    return args


def shared_files(args: Sequence[str], live: Collection[str] = ()) -> tuple[list[str], set[str]]:
    """(host paths, host paths under them to skip) of what bwrap `args` show a sandbox read-only from the host:
    the sources of its read-only binds but those in `live`, less what a later mount covers (a tmpfs over the
    standard library's test suite, the runtime's packages bound over its site-packages)."""
    mounts = sharedfs.bind_mounts(args)
    roots, skip = [], set()
    for k, (_, option, source, _) in enumerate(mounts):
        if option in sharedfs.READ_ONLY_BINDS and source is not None and source not in live:
            roots.append(source)
            skip |= sharedfs.covered(mounts, k)
    return roots, skip


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@sandbox_backend("bwrap")
class BwrapSandbox(Sandbox):
    """Isolated commands over a host workspace directory. See the module docstring for what is inside.

    Options: `allow` - `host:port` entries reachable through the egress proxy (none by default);
    `extra_ro` - {host path: sandbox path} read-only mounts (e.g. the verifier's job directory);
    `runtime` - the packages commands may import (`runtime.python_runtime()`, pytest, by default; a registered
    repository's read-only layer with its test dependencies, `runtime.layer_runtime`);
    `seeded` - reproducible commands: no address-space randomisation, and Python's randomness drawn from
    `SANDBOX_SEED` when a command's environment sets it (`seeded_site.py`).
    """

    unsafe = False

    def __init__(self, workspace: Path, limits: Limits | None = None, *, allow: Sequence[str] = (),
                 extra_ro: Mapping[str, str] | None = None, extra_rw: Mapping[str, str] | None = None,
                 runtime: PythonRuntime | None = None, seeded: bool = False, user_namespaces: bool = False,
                 proc: bool = False):
        super().__init__(workspace, limits)
        self.seeded = seeded
        self.user_namespaces = user_namespaces  # may its processes make user namespaces (seccomp.py)? a warm server's
        # a /proc? Only a warm server's pid1 needs one (it finds every process to kill after a job, and hides /proc
        # from the job). Elsewhere /proc/self/maps shows the inode numbers of shared mappings, which come from a
        # counter the whole host shares: a thirty-second attacker's later rollout read a correct one's repair there
        self.proc = proc
        exe = bwrap_path()
        if exe is None:
            raise SandboxError("bubblewrap (bwrap) is not installed: run `make setup`, or `apt-get install bubblewrap`")
        if not seccomp.supported():  # fail closed: without the filter, sandboxes would share the kernel's keys
            raise SandboxError(f"the bwrap backend has no seccomp filter for this machine ({platform.machine()})")
        self.exe = exe
        self.runtime = runtime or python_runtime()
        self._netns_fd = netns.create_empty_netns()
        self.cgroup = Cgroup.create(memory_bytes=self.limits.memory_mb << 20, pids=self.limits.pids,
                                     cpu_weight=self.limits.cpu_weight)
        self.proxy = EgressProxy(allow) if allow else None
        # directories the caller mounts (job files, written and removed per job) are its own `sharedfs.scratch`
        live = {src for src in (extra_ro or {}) if os.path.isdir(src)}
        # every other read-only bind comes from a copy on tmpfs, where a lookup leaves nothing (sharedfs.py) ...
        self._args = sharedfs.stage_binds(self._mount_args(extra_ro or {}, extra_rw or {}), live)
        # ... and every host file a command can map is held in memory, so that its page cache carries nothing
        # between sandboxes (residency.py)
        roots, skip = shared_files(self._args, live)
        residency.hold(roots, skip)
        self.path_env = f"{os.path.dirname(self.runtime.interpreter)}:/usr/local/bin:/usr/bin:/bin"
        self._closed = False
        self._server: subprocess.Popen | None = None
        self._pending = b""  # bytes read from the server past the last full line
        self._oom_seen = self.cgroup.oom_kills() if self.cgroup is not None else 0
        self._lock = threading.Lock()

    # -- mounts -----------------------------------------------------------------------------------
    def _mount_args(self, extra_ro: Mapping[str, str], extra_rw: Mapping[str, str]) -> list[str]:
        # The namespaces are made once per sandbox start, so their set-up cost is paid once per rollout.
        a = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
             "--hostname", "sandbox"]
        for d in USR_DIRS:
            if os.path.isdir(d) and not os.path.islink(d):
                a += ["--ro-bind", d, d]
        if self._netns_fd is None:
            a.append("--unshare-net")  # no pre-made namespace (not root): bwrap makes one
        for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(d):
                a += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                a += ["--ro-bind", d, d]
        for f in ETC_FILES + (EGRESS_ETC_FILES if self.proxy is not None else ()):
            a += ["--ro-bind-try", f, f]
        a += ["--proc", "/proc"] if self.proc else ["--dir", "/proc"]  # an empty, read-only directory otherwise
        a += ["--dev", "/dev", "--size", str(self.limits.tmp_mb << 20), "--tmpfs", "/tmp"]
        a += python_mounts(self.runtime)
        a += ["--dir", RUN_DIR, "--ro-bind", str(COMMAND_SERVER), f"{RUN_DIR}/proc.py", "--bind", str(self.workspace), WORKSPACE]
        if self.seeded:
            a += ["--dir", f"{RUN_DIR}/site", "--ro-bind", str(SEEDED_SITE), f"{RUN_DIR}/site/sitecustomize.py"]
        for src, dest in extra_rw.items():
            a += ["--bind", src, dest]
        for src, dest in extra_ro.items():
            a += ["--ro-bind", src, dest]
        if self.proxy is not None:
            a += ["--ro-bind", str(FORWARDER), f"{RUN_DIR}/forward.py",
                  "--bind", self.proxy.socket_path, f"{RUN_DIR}/egress.sock"]
        return a + ["--remount-ro", "/"]  # the root itself (bwrap's tmpfs) is read-only too

    # -- running ----------------------------------------------------------------------------------
    def _command(self, argv: list[str], env: Mapping[str, str] | None) -> tuple[list[str], dict[str, str]]:
        """(the command's argv, its environment) inside the sandbox."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        environment = {**BASE_ENV, "PATH": self.path_env, **({"PYTHONPATH": f"{RUN_DIR}/site"} if self.seeded else {}),
                       **(env or {})}
        if self.proxy is not None:
            proxy = f"http://127.0.0.1:{PROXY_PORT}"
            environment.update(http_proxy=proxy, https_proxy=proxy, HTTP_PROXY=proxy, HTTPS_PROXY=proxy)
            argv = [self.runtime.interpreter, "-S", f"{RUN_DIR}/forward.py", str(PROXY_PORT), f"{RUN_DIR}/egress.sock", "--", *argv]
        return argv, environment

    def _inner_cwd(self, cwd: str | None) -> str:
        if cwd in (None, "", "."):
            return WORKSPACE
        rel = os.path.relpath(self.resolve(cwd), os.path.realpath(self.workspace))
        return WORKSPACE if rel == "." else f"{WORKSPACE}/{rel}"

    def exec(self, cmd: Sequence[str] | str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
             input: bytes | None = None, cwd: str | None = None) -> ExecResult:
        argv, timeout = self._check_command(cmd, timeout)
        argv, environment = self._command(argv, env)
        request = {"argv": argv, "env": environment, "cwd": self._inner_cwd(cwd), "timeout": timeout,
                   "cap": self.limits.output_bytes, "input": base64.b64encode(input).decode() if input is not None else None,
                   "cpu_s": self.limits.cpu_s}
        reply = self._request(request, timeout)
        oom = self.cgroup is not None and self._oom_kills_changed()  # read every time, so the count stays current
        if reply is None:  # the server died mid-command (the OOM killer may choose it) or stopped answering
            if oom:
                return ExecResult(exit_code=128 + signal.SIGKILL, stdout="", stderr="", duration_s=0.0,
                                  killed=KillReason.MEMORY, backend=self.backend)
            raise SandboxError("the sandbox's command server died during the command; the next command starts a new one")
        exit_code, killed = reply["returncode"], None
        if reply["timed_out"]:
            killed, exit_code = KillReason.TIMEOUT, 128 + signal.SIGKILL
        elif oom:
            killed = KillReason.MEMORY
        elif exit_code == 128 + signal.SIGXCPU or (exit_code == 128 + signal.SIGKILL and self._cpu_exhausted(reply["duration_s"])):
            killed = KillReason.CPU
        return ExecResult(exit_code=exit_code, stdout=decode_output(base64.b64decode(reply["stdout"])),
                          stderr=decode_output(base64.b64decode(reply["stderr"])), stdout_truncated=reply["stdout_dropped"],
                          stderr_truncated=reply["stderr_dropped"], duration_s=round(reply["duration_s"], 6),
                          killed=killed, backend=self.backend)

    def _request(self, request: dict, timeout: float) -> dict | None:
        """Send one command to the server (started if none runs) and wait for its reply; None if it died."""
        with self._lock:
            if self._server is None or self._server.poll() is not None:
                self._start_server()
            try:
                # the server was just started if none ran; its stdin and stdout are pipes (_popen)
                server = cast(subprocess.Popen, self._server)
                cast(IO[bytes], server.stdin).write((json.dumps(request) + "\n").encode())
                cast(IO[bytes], server.stdin).flush()
            except OSError:
                self._stop_server()
                return None
            # the server enforces the deadline itself; past it plus a grace, it is stuck: end the namespace
            line = self._read_line(time.monotonic() + timeout + 15)
            if line is None:
                self._stop_server()
                return None
            return json.loads(line)

    def _read_line(self, deadline: float) -> bytes | None:
        fd = cast(IO[bytes], cast(subprocess.Popen, self._server).stdout).fileno()  # a pipe of the running server
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _start_server(self) -> None:
        self._stop_server()
        argv, environment = [self.runtime.interpreter, "-S", f"{RUN_DIR}/proc.py"], {**BASE_ENV, "PATH": self.path_env}
        # no CPU limit of its own: it puts each command under `cpu_s`, and its own CPU is bounded by the commands'
        # wall-clock deadlines (a command that made it burn CPU used to get it killed: a "broken sandbox")
        self._server = self._popen(argv, environment, stderr=subprocess.PIPE, cpu_limit=False)
        started = self._read_line(time.monotonic() + 30)
        if started != b'{"ready": true}':
            try:
                self._server.wait(timeout=2)
                err = cast(IO[bytes], self._server.stderr).read()  # stderr=PIPE above
            except subprocess.TimeoutExpired:  # alive but silent: no message to show
                err = b"the command server did not start within 30 s"
            self._stop_server()
            raise SandboxError(f"bubblewrap could not set up the sandbox: {err.decode(errors='replace').strip()[:500]}")
        cast(IO[bytes], self._server.stderr).close()

    def _stop_server(self) -> None:
        if self._server is not None:
            try:
                os.killpg(self._server.pid, signal.SIGKILL)  # bwrap and, with it, the whole namespace
            except ProcessLookupError:
                pass
            self._server.wait()
            for stream in (self._server.stdin, self._server.stdout, self._server.stderr):
                if not cast(IO[bytes], stream).closed:  # all three are pipes (_start_server)
                    cast(IO[bytes], stream).close()
            self._server, self._pending = None, b""

    def reset(self) -> None:
        """End every process and the sandbox's /tmp; the next command starts in fresh namespaces, its network
        namespace included (a kept one would carry its loopback's packet counters, which a command can set and
        the next rollout read, from one rollout to the next).

        Call it after the workspace was restored (an overlay remounted at the same path is only seen by
        namespaces made after it).
        """
        with self._lock:
            self._stop_server()
            if self._netns_fd is not None:
                fresh = netns.create_empty_netns()
                if fresh is None:  # could make one before; the old one stays, and the caller learns of it
                    raise SandboxError("could not make a fresh network namespace for the sandbox")
                os.close(self._netns_fd)
                self._netns_fd = fresh

    def _popen(self, argv: list[str], environment: dict[str, str], *, stderr, cpu_limit: bool = True) -> subprocess.Popen:
        """Start bubblewrap with `argv` as pid 1 of the sandbox, inside the cgroup, network namespace and rlimits.

        bwrap's options go through a pipe (--args), not argv: /proc/1/cmdline would otherwise show the
        host path of every mount. As the namespace's init, processes inside cannot kill it, and when it
        exits every one of them dies.
        """
        filter_r, filter_w = os.pipe()  # the seccomp program (seccomp.py): no kernel state shared between sandboxes
        with os.fdopen(filter_w, "wb") as w:
            w.write(seccomp.filter_program(user_namespaces=self.user_namespaces))
        options = b"\0".join(a.encode() for a in [*self._args, "--seccomp", str(filter_r), "--chdir", WORKSPACE,
                                                   "--as-pid-1"]) + b"\0"
        args_r, args_w = os.pipe()
        with os.fdopen(args_w, "wb") as w:
            w.write(options)
        try:
            return subprocess.Popen([self.exe, "--args", str(args_r), "--", *argv], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=stderr, env=environment, start_new_session=True,
                                    preexec_fn=lambda: self._enter_limits(cpu_limit), pass_fds=(args_r, filter_r))
        except OSError as exc:
            raise SandboxError(f"could not start bubblewrap: {exc}") from None
        finally:
            os.close(args_r)
            os.close(filter_r)

    def spawn(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None) -> subprocess.Popen:
        """Start a long-lived process as pid 1 of its own sandbox, with pipes on stdin and stdout (stderr discarded).

        For services such as the verifier's warm test runner; the caller owns the process and must end it.
        The sandbox's limits apply to it and to everything it starts.
        """
        argv, environment = self._command(self._check_command(cmd, None)[0], env)
        return self._popen(argv, environment, stderr=subprocess.DEVNULL)

    def _oom_kills_changed(self) -> bool:
        """Did the kernel kill something for memory since the last look? (One read of the cgroup per command.)"""
        now = cast(Cgroup, self.cgroup).oom_kills()  # called only when the sandbox has a cgroup
        changed, self._oom_seen = now > self._oom_seen, now
        return changed

    def _cpu_exhausted(self, duration_s: float) -> bool:
        return duration_s >= self.limits.cpu_s

    def _enter_limits(self, cpu_limit: bool = True) -> None:
        """Between fork and exec of bwrap: limits, cgroup and network namespace (inherited by the command); the
        CPU limit unless `cpu_limit` is False (the command server, which applies it to each command)."""
        lim = self.limits
        if cpu_limit:
            resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if self.cgroup is not None:
            self.cgroup.attach(os.getpid())
        else:
            resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb << 20,) * 2)
        if self.seeded:  # inherited through bwrap's exec by every process of the sandbox
            _libc.personality(_libc.personality(0xFFFFFFFF) | ADDR_NO_RANDOMIZE)
        if self._netns_fd is not None:
            netns.join_netns(self._netns_fd)
            devices.read_only_nodes()  # root, as pre-made namespaces need: the host's /dev nodes, read-only

    # -- reporting and lifetime -------------------------------------------------------------------
    def enforced(self) -> dict[str, str]:
        cg = f"cgroup {self.cgroup.version}" if self.cgroup else None
        return {
            "isolation": "bubblewrap: user, pid, mount, ipc, uts, net namespaces; uid 1000, no capabilities",
            "network": ("empty namespace (loopback only)" if not self.proxy else
                        f"loopback + egress proxy allowing {', '.join(self.proxy.allow)}"),
            "filesystem": "read-only programs, libraries and the Python standard library (no other Python source); "
                          "writable /workspace only; /tmp tmpfs "
                          f"{self.limits.tmp_mb} MiB",
            "memory": f"{cg} {self.limits.memory_mb} MiB (whole tree)" if cg else f"rlimit AS {self.limits.memory_mb} MiB per process",
            "pids": f"{cg} {self.limits.pids}" if cg else "NOT ENFORCED (no writable cgroup)",
            "cpu": f"rlimit {self.limits.cpu_s} s per process; " + (
                f"{cg} weight {weight} under contention (the verifier's: {VERIFIER_CPU_WEIGHT})"
                if self.cgroup is not None and (weight := self.cgroup.cpu_weight()) is not None
                else "no CPU share (no CPU controller we may use)"),
            "file_size": f"rlimit {self.limits.file_size_mb} MiB",
            "wall_clock": f"{self.limits.timeout_s:g} s default; kills the whole tree",
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._stop_server()
        if self.cgroup is not None:
            self.cgroup.close()
        if self.proxy is not None:
            self.proxy.close()
        if self._netns_fd is not None:
            os.close(self._netns_fd)
            self._netns_fd = None
