"""The bubblewrap backend: every command runs in fresh user, pid, mount, ipc and uts namespaces, in an empty network namespace.

What a command sees: /usr and the Python installation read-only (its site-packages replaced by
`runtime.python_runtime()`), a private /proc and /dev, a size-capped tmpfs /tmp, and the workspace at
/workspace, the only writable place. It runs as uid 1000 with no capabilities. The network is an empty
namespace (loopback only), or, with an allowlist, loopback plus a forwarder to the host's filtering
proxy through a unix socket. The command is pid 1's only child: when it exits, or the deadline kills
it, the kernel ends every process it left behind.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from gymsmith.sandbox import netns
from gymsmith.sandbox.base import WORKSPACE, ExecResult, KillReason, Limits, Sandbox, SandboxError, decode_output, sandbox_backend
from gymsmith.sandbox.cgroups import Cgroup
from gymsmith.sandbox.egress import EgressProxy
from gymsmith.sandbox.runtime import python_runtime

FORWARDER = Path(__file__).with_name("forward.py")
LAUNCHER = Path(__file__).with_name("proc.py")
RUN_DIR = "/run/gymsmith"
PROXY_PORT = 3128  # the forwarder's port on the sandbox's own loopback
SANDBOX_UID = 1000
BASE_ENV = {"HOME": "/tmp", "USER": "sandbox", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0", "GIT_AUTHOR_NAME": "agent", "GIT_AUTHOR_EMAIL": "agent@sandbox",
            "GIT_COMMITTER_NAME": "agent", "GIT_COMMITTER_EMAIL": "agent@sandbox", "GIT_CONFIG_NOSYSTEM": "1"}
ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache")  # each bind costs ~0.3 ms per command: only what tools need
EGRESS_ETC_FILES = ("/etc/ssl/certs",)  # certificates, for HTTPS through the egress proxy


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@sandbox_backend("bwrap")
class BwrapSandbox(Sandbox):
    """Isolated commands over a host workspace directory. See the module docstring for what is inside.

    Options: `allow` - `host:port` entries reachable through the egress proxy (none by default);
    `extra_ro` - {host path: sandbox path} read-only mounts (e.g. the verifier's job directory).
    """

    unsafe = False

    def __init__(self, workspace: Path, limits: Limits | None = None, *, allow: Sequence[str] = (),
                 extra_ro: Mapping[str, str] | None = None, extra_rw: Mapping[str, str] | None = None):
        super().__init__(workspace, limits)
        exe = bwrap_path()
        if exe is None:
            raise SandboxError("bubblewrap (bwrap) is not installed: run `make setup`, or `apt-get install bubblewrap`")
        self.exe = exe
        self.runtime = python_runtime()
        self._netns_fd = netns.create_empty_netns()
        self.cgroup = Cgroup.create(memory_bytes=self.limits.memory_mb << 20, pids=self.limits.pids)
        self.proxy = EgressProxy(allow) if allow else None
        self._args = self._mount_args(extra_ro or {}, extra_rw or {})
        self.path_env = f"{os.path.dirname(self.runtime.interpreter)}:/usr/local/bin:/usr/bin:/bin"
        self._closed = False
        self._launcher: subprocess.Popen | None = None
        self._oom_seen = self.cgroup.oom_kills() if self.cgroup is not None else 0
        self._lock = threading.Lock()

    # -- mounts -----------------------------------------------------------------------------------
    def _mount_args(self, extra_ro: Mapping[str, str], extra_rw: Mapping[str, str]) -> list[str]:
        # No cgroup namespace: it costs ~1.5 ms per command and hides only the name of the sandbox's cgroup.
        a = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
             "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
        if self._netns_fd is None:
            a.append("--unshare-net")  # no pre-made namespace (not root): bwrap makes one per command
        for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(d):
                a += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                a += ["--ro-bind", d, d]
        for f in ETC_FILES + (EGRESS_ETC_FILES if self.proxy is not None else ()):
            a += ["--ro-bind-try", f, f]
        a += ["--proc", "/proc", "--dev", "/dev", "--size", str(self.limits.tmp_mb << 20), "--tmpfs", "/tmp"]
        rt = self.runtime
        if not rt.prefix.startswith("/usr/"):
            a += ["--ro-bind", rt.prefix, rt.prefix]
        for i, d in enumerate(rt.site_dirs):  # hide the host's packages; only ours are importable
            a += ["--ro-bind", rt.packages_dir, d] if i == 0 else ["--tmpfs", d, "--remount-ro", d]
        a += ["--bind", str(self.workspace), WORKSPACE]
        for src, dest in extra_rw.items():
            a += ["--bind", src, dest]
        for src, dest in extra_ro.items():
            a += ["--ro-bind", src, dest]
        if self.proxy is not None:
            a += ["--dir", RUN_DIR, "--ro-bind", str(FORWARDER), f"{RUN_DIR}/forward.py",
                  "--bind", self.proxy.socket_path, f"{RUN_DIR}/egress.sock"]
        return a + ["--remount-ro", "/"]  # the root itself (bwrap's tmpfs) is read-only too

    # -- running ----------------------------------------------------------------------------------
    def _command(self, argv: list[str], cwd: str | None,
                 env: Mapping[str, str] | None) -> tuple[list[str], dict[str, str], bytes]:
        """(the command's argv, its environment, bwrap's options NUL-separated).

        The options go to bwrap through a pipe (--args), not argv: the sandbox's pid 1 is a fork of bwrap,
        and its /proc/1/cmdline would otherwise show the host paths of every mount.
        """
        if self._closed:
            raise SandboxError("the sandbox is closed")
        inner_cwd = WORKSPACE
        if cwd not in (None, "", "."):
            rel = os.path.relpath(self.resolve(cwd), os.path.realpath(self.workspace))
            inner_cwd = f"{WORKSPACE}/{rel}"
        environment = {**BASE_ENV, "PATH": self.path_env, **(env or {})}
        if self.proxy is not None:
            proxy = f"http://127.0.0.1:{PROXY_PORT}"
            environment.update(http_proxy=proxy, https_proxy=proxy, HTTP_PROXY=proxy, HTTPS_PROXY=proxy)
            argv = [self.runtime.interpreter, "-S", f"{RUN_DIR}/forward.py", str(PROXY_PORT), f"{RUN_DIR}/egress.sock", "--", *argv]
        options = b"\0".join(a.encode() for a in [*self._args, "--chdir", inner_cwd]) + b"\0"
        return argv, environment, options

    def exec(self, cmd: Sequence[str] | str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
             input: bytes | None = None, cwd: str | None = None) -> ExecResult:
        argv, timeout = self._check_command(cmd, timeout)
        argv, environment, bwrap_args = self._command(argv, cwd, env)
        reply = self._launch({"exe": self.exe, "args": base64.b64encode(bwrap_args).decode(), "argv": argv,
                              "env": environment, "timeout": timeout, "cap": self.limits.output_bytes,
                              "input": base64.b64encode(input).decode() if input is not None else None})
        if reply["timed_out"] and self.cgroup is not None:
            # the pid namespace died with bwrap, taking every process with it; this only makes sure
            self.cgroup.kill_all(keep=frozenset({self._launcher.pid}) if self._launcher is not None else frozenset())
        status = [json.loads(line) for line in reply["status"].splitlines() if line.strip()]
        stdout, stderr = base64.b64decode(reply["stdout"]), base64.b64decode(reply["stderr"])
        if not any("child-pid" in s for s in status):
            if reply["timed_out"]:
                raise SandboxError(f"bubblewrap did not start within {timeout:g} s")
            raise SandboxError(f"bubblewrap could not set up the sandbox: {stderr.decode(errors='replace').strip()[:500]}")
        exit_code = next((s["exit-code"] for s in status if "exit-code" in s), reply["returncode"])
        killed = None
        oom = self.cgroup is not None and self._oom_kills_changed()  # read every time, so the count stays current
        if reply["timed_out"]:
            killed, exit_code = KillReason.TIMEOUT, 128 + signal.SIGKILL
        elif oom:
            killed = KillReason.MEMORY
        elif exit_code == 128 + signal.SIGXCPU or (exit_code == 128 + signal.SIGKILL and self._cpu_exhausted(reply["duration_s"])):
            killed = KillReason.CPU
        return ExecResult(exit_code=exit_code, stdout=decode_output(stdout), stderr=decode_output(stderr),
                          stdout_truncated=reply["stdout_dropped"], stderr_truncated=reply["stderr_dropped"], duration_s=round(reply["duration_s"], 6),
                          killed=killed, backend=self.backend)

    def _launch(self, request: dict) -> dict:
        """Send one command to the launcher (started on first use, restarted if it died or aged)."""
        with self._lock:
            for attempt in (1, 2):
                if self._launcher is None or self._launcher.poll() is not None:
                    self._start_launcher()
                try:
                    self._launcher.stdin.write((json.dumps(request) + "\n").encode())
                    self._launcher.stdin.flush()
                    line = self._launcher.stdout.readline()
                except OSError:
                    line = b""
                if line:
                    reply = json.loads(line)
                    if "spawn_error" in reply:
                        raise SandboxError(f"could not start bubblewrap: {reply['spawn_error']}")
                    if reply["cpu_self_s"] > self.limits.cpu_s / 2:  # its own RLIMIT_CPU would end it: replace it
                        self._stop_launcher()
                    return reply
                self._stop_launcher()  # died mid-command (e.g. the OOM killer chose it): start afresh, once
            raise SandboxError("the sandbox launcher died twice in a row")

    def _start_launcher(self) -> None:
        self._launcher = subprocess.Popen([self.runtime.interpreter, "-S", str(LAUNCHER)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"},
                                          preexec_fn=self._enter_limits, start_new_session=True)

    def _stop_launcher(self) -> None:
        if self._launcher is not None:
            self._launcher.kill()
            self._launcher.wait()
            for stream in (self._launcher.stdin, self._launcher.stdout):
                stream.close()
            self._launcher = None

    def spawn(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None) -> subprocess.Popen:
        """Start a long-lived process in the sandbox with pipes on stdin and stdout (stderr discarded).

        For services such as the verifier's warm test runner; the caller owns the process and must end it.
        The sandbox's limits apply to it and to everything it starts.
        """
        argv, environment, options = self._command(self._check_command(cmd, None)[0], None, env)
        args_r, args_w = os.pipe()
        with os.fdopen(args_w, "wb") as w:
            w.write(options)
        args = [self.exe, "--args", str(args_r), "--", *argv]
        # The service is pid 1 of its namespace: processes it starts cannot kill it (the kernel ignores
        # signals from inside a pid namespace to its init), and when it exits every one of them dies.
        args.insert(args.index("--"), "--as-pid-1")
        try:
            return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env=environment, start_new_session=True, preexec_fn=self._enter_limits, pass_fds=(args_r,))
        finally:
            os.close(args_r)

    def _oom_kills_changed(self) -> bool:
        """Did the kernel kill something for memory since the last look? (One read of the cgroup per command.)"""
        now = self.cgroup.oom_kills()
        changed, self._oom_seen = now > self._oom_seen, now
        return changed

    def _cpu_exhausted(self, duration_s: float) -> bool:
        return duration_s >= self.limits.cpu_s

    def _enter_limits(self) -> None:
        """Between fork and exec of bwrap: limits, cgroup and network namespace (inherited by the command)."""
        lim = self.limits
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if self.cgroup is not None:
            self.cgroup.attach(os.getpid())
        else:
            resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb << 20,) * 2)
        if self._netns_fd is not None:
            netns.join_netns(self._netns_fd)

    # -- reporting and lifetime -------------------------------------------------------------------
    def enforced(self) -> dict[str, str]:
        cg = f"cgroup {self.cgroup.version}" if self.cgroup else None
        return {
            "isolation": "bubblewrap: user, pid, mount, ipc, uts, net namespaces; uid 1000, no capabilities",
            "network": ("empty namespace (loopback only)" if not self.proxy else
                        f"loopback + egress proxy allowing {', '.join(self.proxy.allow)}"),
            "filesystem": "read-only /usr and Python; writable /workspace only; /tmp tmpfs "
                          f"{self.limits.tmp_mb} MiB",
            "memory": f"{cg} {self.limits.memory_mb} MiB (whole tree)" if cg else f"rlimit AS {self.limits.memory_mb} MiB per process",
            "pids": f"{cg} {self.limits.pids}" if cg else "NOT ENFORCED (no writable cgroup)",
            "cpu": f"rlimit {self.limits.cpu_s} s per process",
            "file_size": f"rlimit {self.limits.file_size_mb} MiB",
            "wall_clock": f"{self.limits.timeout_s:g} s default; kills the whole tree",
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._stop_launcher()
        if self.cgroup is not None:
            self.cgroup.close()
        if self.proxy is not None:
            self.proxy.close()
        if self._netns_fd is not None:
            os.close(self._netns_fd)
            self._netns_fd = None
