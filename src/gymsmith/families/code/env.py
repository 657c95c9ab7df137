"""The coding environment: a git repository with a bug, in a sandbox, reset from its pristine copy per rollout."""

from __future__ import annotations

import json
import os
import re
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

from gymsmith.core.types import ActionErrorKind, Observation, TaskSpec
from gymsmith.envs.base import FinalState, ToolEnvironment, ToolRefusal
from gymsmith.families.code.generator import CodeTask, generate_code_task
from gymsmith.families.code.repo import pristine_repo, read_tree, state_digest, unified_diff
from gymsmith.sandbox import CowWorkspace, ExecResult, Limits, Sandbox, open_sandbox
from gymsmith.sandbox.local import UNSAFE_LABEL

AGENT_LIMITS = Limits(memory_mb=1024, pids=128, cpu_s=60, file_size_mb=16, disk_mb=128, tmp_mb=64, timeout_s=30,
                      output_bytes=16384)
MAX_READ_BYTES = 200_000
_TIMING = re.compile(r" in \d+(\.\d+)?s( \(\d+:\d\d:\d\d\))?")  # pytest's run time: not part of what happened
_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,16}\b")  # object addresses in reprs differ from run to run


def sandbox_backend() -> str:
    """The agent sandbox's backend: $GYMSMITH_SANDBOX, else bwrap (there is no silent fall-back to 'local')."""
    return os.environ.get("GYMSMITH_SANDBOX", "bwrap")


@lru_cache(maxsize=512)
def _generated(seed: int, knobs_json: str) -> CodeTask:
    return generate_code_task(seed, json.loads(knobs_json))


def code_task(task: TaskSpec) -> CodeTask:
    """The private task behind a generated TaskSpec (rebuilt from the seed; cached per process)."""
    return _generated(task.seed, json.dumps(task.knobs, sort_keys=True))


def start_files(task: TaskSpec) -> dict[str, str]:
    """The files of the task's start state: generated, or read from a task file's repository."""
    if task.metadata.get("source") == "repository":
        from gymsmith.families.code.byo import repository_files
        return repository_files(task)
    return code_task(task).files


class CodeEnvironment(ToolEnvironment):
    """Tools act on a copy-on-write view of the task's pristine repository; commands run in the sandbox."""

    def __init__(self, *, backend: str | None = None, limits: Limits = AGENT_LIMITS):
        super().__init__()
        self.backend, self.limits = backend or sandbox_backend(), limits
        self.workspace: CowWorkspace | None = None
        self.sandbox: Sandbox | None = None
        self.task: TaskSpec | None = None
        self.start_tree: dict[str, str | None] = {}

    def _reset(self, task: TaskSpec, seed: int) -> Observation:
        pristine, digest = pristine_repo(start_files(task))
        if digest != task.start_state.digest:
            raise RuntimeError(f"task {task.id}: rebuilt repository has digest {digest}, the task says "
                               f"{task.start_state.digest}; the generator changed without a version bump")
        if self.workspace is None:
            self.workspace = CowWorkspace(disk_mb=self.limits.disk_mb)
        self.workspace.restore(pristine)
        if self.sandbox is None:
            self.sandbox = open_sandbox(self.workspace.path, backend=self.backend, limits=self.limits)
        else:
            self.sandbox.reset()  # no process or /tmp file of the last rollout, and the new overlay seen
        self.task, self.start_tree = task, read_tree(pristine)
        listing = "\n".join(self.sandbox.list_files())
        return Observation(text=f"{task.goal}\n\nRepository files:\n{listing}",
                           data={"goal": task.goal, "files": listing.splitlines()})

    # -- tools ------------------------------------------------------------------------------------
    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:
        assert self.sandbox is not None, "reset() must be called before step()"
        try:
            return getattr(self, f"_tool_{name}")(**arguments)
        except FileNotFoundError as exc:
            raise ToolRefusal(ActionErrorKind.NOT_FOUND, f"no such file: {arguments.get('path', exc)}") from None
        except (IsADirectoryError, NotADirectoryError) as exc:
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, str(exc)) from None
        except PermissionError as exc:
            raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"{exc}; only files inside the repository can be used") from None
        except UnicodeDecodeError:
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{arguments.get('path')} is not a UTF-8 text file") from None

    def _tool_list_files(self, path: str = ".") -> Observation:
        files = self.sandbox.list_files(path)
        return Observation(text="\n".join(files) or "(no files)", data={"files": files})

    def _tool_read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> Observation:
        data = self.sandbox.read_file(path)
        if len(data) > MAX_READ_BYTES and start_line is None:
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{path} has {len(data)} bytes; read it in parts with start_line/end_line")
        lines = data.decode().splitlines()
        lo = (start_line or 1) - 1
        hi = end_line or len(lines)
        if lo >= max(1, len(lines)) and lines:
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"start_line {start_line} is past the end of {path} ({len(lines)} lines)")
        numbered = "\n".join(f"{i + 1:>5}  {line}" for i, line in enumerate(lines[lo:hi], start=lo))
        return Observation(text=numbered or "(empty file)", data={"path": path, "lines": len(lines)})

    def _tool_write_file(self, path: str, content: str) -> Observation:
        self.sandbox.write_file(path, content)
        return Observation(text=f"wrote {path} ({len(content.splitlines())} lines)", data={"path": path})

    def _tool_replace_text(self, path: str, old: str, new: str) -> Observation:
        text = self.sandbox.read_file(path).decode()
        count = text.count(old)
        if count == 0:
            raise ToolRefusal(ActionErrorKind.NOT_FOUND, f"the text to replace does not occur in {path}")
        if count > 1:
            raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"the text to replace occurs {count} times in {path}; "
                                                              "include more context so it occurs once")
        self.sandbox.write_file(path, text.replace(old, new, 1))
        return Observation(text=f"replaced 1 occurrence in {path}", data={"path": path})

    def _tool_apply_diff(self, diff: str) -> Observation:
        result = self.sandbox.exec(["git", "apply", "--whitespace=nowarn", "-"], input=diff.encode(), timeout=30)
        if not result.ok:
            raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"git apply failed: {result.stderr.strip() or result.stdout.strip()}")
        return Observation(text="diff applied", data={"applied": True})

    def _tool_run_command(self, command: str, timeout_s: int = 30) -> Observation:
        return self._exec_observation(self.sandbox.exec(command, timeout=timeout_s))

    def _tool_run_tests(self, tests: list[str] | None = None) -> Observation:
        for t in tests or []:
            if t.startswith("-"):
                raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{t!r}: give test files or node ids, not options")
        interpreter = getattr(self.sandbox, "runtime", None)
        python = interpreter.interpreter if interpreter else "python3"
        result = self.sandbox.exec([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(tests or [])], timeout=60)
        return self._exec_observation(result, normalise=True)

    def _tool_submit(self, note: str = "") -> Observation:
        return Observation(text="submitted; your changes will be verified", data={"submitted": True})

    def _exec_observation(self, r: ExecResult, *, normalise: bool = False) -> Observation:
        out, err = r.stdout, r.stderr
        if normalise:  # pytest's report: keep what the tests did, drop run time and memory addresses
            out, err = (_ADDRESS.sub("0x…", _TIMING.sub("", text)) for text in (out, err))
        parts = [f"[{UNSAFE_LABEL}]"] if r.unsafe else []
        parts.append(f"exit code: {r.exit_code}" + (f" (killed: {r.killed.value} limit)" if r.killed else ""))
        if out:
            parts.append(out + ("\n[stdout truncated]" if r.stdout_truncated else ""))
        if err:
            parts.append("stderr:\n" + err + ("\n[stderr truncated]" if r.stderr_truncated else ""))
        return Observation(text="\n".join(parts), data={"exit_code": r.exit_code, "killed": r.killed.value if r.killed else None,
                                                        "unsafe": r.unsafe})

    # -- state ------------------------------------------------------------------------------------
    def state_hash(self) -> str:
        assert self.workspace is not None, "reset() must be called first"
        return state_digest(self.workspace.path)

    def final_state(self, directory: Path) -> FinalState:
        assert self.workspace is not None, "reset() must be called first"
        target = Path(directory) / "repo"
        shutil.copytree(self.workspace.path, target, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        for dirpath, _, filenames in os.walk(target):
            for name in filenames:
                full = os.path.join(dirpath, name)
                if not os.path.islink(full):
                    os.chmod(full, 0o444)
        diff = unified_diff(self.start_tree, read_tree(self.workspace.path))
        return FinalState(kind="repo", path=str(target), digest=self.state_hash(), diff=diff)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        if self.workspace is not None:
            self.workspace.close()
            self.workspace = None
