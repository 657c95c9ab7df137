"""The sandbox interface: run commands and move files in an isolated workspace.

Every backend subclasses `Sandbox` and registers itself with `@sandbox_backend(name)`. The contract
(which `tests/test_sandbox_conformance.py` checks for every backend, through this API only):

- `exec` never raises for what the command does: a non-zero exit, a timeout or a limit hit is an
  `ExecResult` (`killed` says which limit ended it). It raises `SandboxError` only when the sandbox
  itself cannot run, and `ValueError` for an empty command or a bad timeout.
- Output is capped at `Limits.output_bytes` per stream (the rest is dropped, `*_truncated` set).
- File paths are relative to the workspace. `read_file` raises `FileNotFoundError`, `IsADirectoryError`,
  or `PermissionError` for a path that leaves the workspace (``..``, an absolute path, or a symlink
  planted by the command that points outside). `write_file` raises `PermissionError` the same way.
- After `exec` returns, no process it started is alive.
"""

from __future__ import annotations

import enum
import os
import stat
from typing import Self
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from gymsmith.core.errors import InfrastructureError

WORKSPACE = "/workspace"  # where the workspace appears inside an isolating sandbox
CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache"})  # caches tools write on their own: not state, not listed


class SandboxError(InfrastructureError):
    """The sandbox itself failed (could not start, lost its workspace); not something the command did."""


class KillReason(str, enum.Enum):
    """Which limit ended a command."""

    TIMEOUT = "timeout"  # wall clock: the whole process tree was killed
    MEMORY = "memory"    # the memory limit (cgroup OOM kill)
    CPU = "cpu"          # CPU seconds (RLIMIT_CPU)


AGENT_CPU_WEIGHT = 10      # a sandbox running an agent's commands (cgroups.py): a tenth of a verifier's share
VERIFIER_CPU_WEIGHT = 100  # a sandbox of the verifier's (the kernel's default weight)


class Limits(BaseModel):
    """Resource limits of one sandbox. Each applies to every command run in it."""

    memory_mb: int = Field(default=1024, ge=16, description="Memory of the whole process tree (cgroup) or per process (RLIMIT_AS).")
    pids: int = Field(default=256, ge=4, description="Processes and threads at once (cgroup pids controller).")
    cpu_s: int = Field(default=120, ge=1, description="CPU seconds per process (RLIMIT_CPU).")
    file_size_mb: int = Field(default=64, ge=1, description="Largest file a command may write (RLIMIT_FSIZE).")
    disk_mb: int = Field(default=256, ge=1, description="Space for the workspace's changes (size of its tmpfs upper layer).")
    tmp_mb: int = Field(default=64, ge=1, description="Size of the command's private /tmp (tmpfs).")
    timeout_s: float = Field(default=60.0, gt=0, description="Default wall-clock limit of one command.")
    output_bytes: int = Field(default=65536, ge=256, description="Cap on each of stdout and stderr kept in an ExecResult.")
    cpu_weight: int = Field(default=AGENT_CPU_WEIGHT, ge=1, le=10000, description=(
        "The sandbox's share of the CPU under contention, against other sandboxes (cgroup cpu.weight, 100 the "
        "kernel's default; v1 cpu.shares x10.24). Low by default: a sandbox runs hostile code; the verifier's run "
        "at VERIFIER_CPU_WEIGHT, so no rollout's processes can starve a verification."))


class ExecResult(BaseModel):
    """What a command did. `killed` is None when it ended by itself."""

    exit_code: int = Field(description="The command's exit status; 128+N when killed by signal N.")
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = Field(description="Wall time from start to the last process of the tree ending.")
    killed: KillReason | None = Field(default=None, description="The limit that ended the command, if any.")
    backend: str
    unsafe: bool = Field(default=False, description="True when the backend does not isolate (the 'local' backend).")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed is None


def decode_output(data: bytes) -> str:
    """Captured output as text (invalid UTF-8 replaced); capping happened while it was read (`proc.run_capped`)."""
    return data.decode("utf-8", "replace")


class Sandbox(ABC):
    """A workspace directory plus a way to run commands against it. Use as a context manager."""

    backend: str = "abstract"
    unsafe: bool = False

    def __init__(self, workspace: Path, limits: Limits | None = None):
        self.workspace = Path(workspace)
        if not self.workspace.is_dir():
            raise SandboxError(f"workspace {self.workspace} is not a directory")
        self.limits = limits or Limits()

    def _check_command(self, cmd: Sequence[str] | str, timeout: float | None) -> tuple[list[str], float]:
        """(argv, timeout in seconds) for `exec`. Raises ValueError for an empty command or a timeout <= 0."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else [str(c) for c in cmd]
        if (isinstance(cmd, str) and not cmd.strip()) or not argv or not argv[0]:
            raise ValueError(f"cmd must be a non-empty argv list or shell string, got {cmd!r}")
        timeout = self.limits.timeout_s if timeout is None else float(timeout)
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        return argv, timeout

    @abstractmethod
    def exec(self, cmd: Sequence[str] | str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
             input: bytes | None = None, cwd: str | None = None) -> ExecResult:
        """Run `cmd` (an argv list, or a string for /bin/sh -c) in the workspace and wait for its whole tree.

        `timeout` defaults to `Limits.timeout_s`; `env` adds variables to a minimal environment; `cwd` is
        relative to the workspace. Returns an ExecResult; raises SandboxError if the sandbox cannot run.
        """

    @abstractmethod
    def enforced(self) -> dict[str, str]:
        """How each limit and isolation property is enforced here, e.g. {'memory': 'cgroup v1', 'network': 'none'}."""

    def reset(self) -> None:
        """End every process the sandbox runs and empty its /tmp; the next `exec` starts afresh.

        Call it when the workspace was restored for a new rollout, so nothing of the last one remains.
        Raises nothing; the default (a backend that keeps no state between commands) does nothing.
        """

    def close(self) -> None:
        """Release what the sandbox holds (namespaces, cgroups). The workspace directory is left as it is."""

    # -- files: the same for every backend, through the host's view of the workspace ---------------
    def resolve(self, path: str) -> Path:
        """The host path of workspace-relative `path`. Raises PermissionError if it leaves the workspace."""
        if not isinstance(path, str) or not path or "\x00" in path:
            raise ValueError(f"path must be a non-empty string, got {path!r}")
        rel = path.removeprefix(WORKSPACE).lstrip("/") if path.startswith(WORKSPACE) else path
        if os.path.isabs(rel):
            raise PermissionError(f"{path!r} is outside the workspace (use a path relative to {WORKSPACE})")
        root = os.path.realpath(self.workspace)
        target = os.path.realpath(os.path.join(root, rel))  # follows symlinks: a planted link to /etc is caught here
        if target != root and not target.startswith(root + os.sep):
            raise PermissionError(f"{path!r} resolves outside the workspace")
        return Path(target)

    def read_file(self, path: str) -> bytes:
        """The bytes of a workspace file. Raises FileNotFoundError, IsADirectoryError, PermissionError."""
        target = self.resolve(path)
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)  # the link could be swapped after resolve()
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISDIR(os.fstat(f.fileno()).st_mode):
                raise IsADirectoryError(f"{path!r} is a directory")
            return f.read()

    def write_file(self, path: str, data: bytes | str) -> None:
        """Create or replace a workspace file (parents created). Raises PermissionError, IsADirectoryError."""
        target = self.resolve(path)
        if target.is_dir():
            raise IsADirectoryError(f"{path!r} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)  # resolve() already refused parents that link outside
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)

    def list_files(self, path: str = ".") -> list[str]:
        """Workspace-relative paths of the files under `path`, sorted; directories and `.git` internals omitted."""
        base = self.resolve(path)
        if not base.is_dir():
            raise NotADirectoryError(f"{path!r} is not a directory")
        root = Path(os.path.realpath(self.workspace))
        out = []
        for dirpath, dirnames, filenames in os.walk(base):  # os.walk does not follow directory symlinks
            dirnames[:] = sorted(d for d in dirnames if d != ".git" and d not in CACHE_DIRS)
            out += [str((Path(dirpath) / f).relative_to(root)) for f in filenames]
        return sorted(out)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_BACKENDS: dict[str, Callable[..., Sandbox]] = {}


def sandbox_backend(name: str) -> Callable[[type[Sandbox]], type[Sandbox]]:
    """Class decorator: register a Sandbox subclass under `name`."""
    def register(cls: type[Sandbox]) -> type[Sandbox]:
        cls.backend = name
        _BACKENDS[name] = cls
        return cls
    return register


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def open_sandbox(workspace: Path, *, backend: str = "bwrap", limits: Limits | None = None, **options) -> Sandbox:
    """A sandbox of `backend` over `workspace`. Raises ValueError for an unknown backend, SandboxError if it cannot run here.

    The default is `bwrap`: there is no silent fall-back to the unsafe `local` backend; ask for it by name.
    """
    try:
        cls = _BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown sandbox backend {backend!r}; expected one of {backend_names()}") from None
    return cls(workspace, limits=limits, **options)
