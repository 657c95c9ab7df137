"""The `local` backend: NO ISOLATION. Commands run as the calling user, directly in the workspace directory.

For platforms without bubblewrap and for debugging only. It keeps the interface and the rlimits (CPU,
file size, address space) and kills the command's process group at the deadline, but a command can read
and write anything the user can, reach the network, and leave processes that escape its group. Every
ExecResult it returns has `unsafe=True`, and `enforced()` says so.
"""

from __future__ import annotations

import os
import resource
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from gymsmith.sandbox.base import ExecResult, KillReason, Limits, Sandbox, decode_output, sandbox_backend
from gymsmith.sandbox.proc import not_started, run_capped

UNSAFE_LABEL = "UNSAFE: local sandbox backend, no isolation"


@sandbox_backend("local")
class LocalSandbox(Sandbox):
    unsafe = True

    def __init__(self, workspace: Path, limits: Limits | None = None, **_ignored):
        super().__init__(workspace, limits)
        warnings.warn(f"{UNSAFE_LABEL} (workspace {workspace})", stacklevel=2)

    def exec(self, cmd: Sequence[str] | str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
             input: bytes | None = None, cwd: str | None = None) -> ExecResult:
        argv, timeout = self._check_command(cmd, timeout)
        where = str(self.resolve(cwd)) if cwd not in (None, "", ".") else str(self.workspace)
        environment = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.workspace),
                       "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", **(env or {})}
        lim = self.limits

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 1))
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size_mb << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb << 20,) * 2)

        try:
            done = run_capped(argv, env=environment, cwd=where, input=input, timeout=timeout, cap=lim.output_bytes,
                              preexec_fn=limits)
        except OSError as exc:
            done = not_started(argv[0], exc)
        killed = KillReason.TIMEOUT if done.timed_out else KillReason.CPU if done.returncode == 128 + 24 else None
        return ExecResult(exit_code=done.returncode, stdout=decode_output(done.stdout), stderr=decode_output(done.stderr),
                          stdout_truncated=done.stdout_dropped, stderr_truncated=done.stderr_dropped, duration_s=round(done.duration_s, 6),
                          killed=killed, backend=self.backend, unsafe=True)

    def enforced(self) -> dict[str, str]:
        return {"isolation": UNSAFE_LABEL, "network": "host network (NOT isolated)",
                "filesystem": "everything the user can reach (NOT isolated)",
                "memory": f"rlimit AS {self.limits.memory_mb} MiB per process", "pids": "NOT ENFORCED",
                "cpu": f"rlimit {self.limits.cpu_s} s per process", "file_size": f"rlimit {self.limits.file_size_mb} MiB",
                "wall_clock": f"{self.limits.timeout_s:g} s default; kills the process group only"}
