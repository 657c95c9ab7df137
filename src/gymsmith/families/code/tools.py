"""The coding tools, as the model sees them: each docstring is the tool's documentation, each signature its schema
(`envs.toolkit`). The first parameter is the `CodeEnvironment` whose sandbox and workspace they act on (typed as
`ToolHost`, what the tools use of it); a refusal is a `ToolRefusal`, and the environment turns the file system's
errors into refusals that name the path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Protocol, cast

from gymsmith.core.types import ActionErrorKind, Observation
from gymsmith.envs.base import ToolRefusal, preview
from gymsmith.envs.toolkit import Param, Toolbox
from gymsmith.sandbox import ExecResult, Sandbox


class ToolHost(Protocol):
    """What the tools use of `env.CodeEnvironment` (a protocol, so this module does not import the environment that
    imports it)."""

    sandbox: Sandbox | None
    command_env: dict[str, str]

    def regular_file(self, path: str, *, may_be_missing: bool = False) -> Path: ...

    def listing(self, path: str) -> tuple[list[str], list[str]]: ...

    def exec_observation(self, r: ExecResult, *, normalise: bool = False) -> Observation: ...

# Every argument is bounded (docs/episodes.md); the caps are far above what a fix needs.
MAX_PATH_CHARS = 1024
MAX_FILE_CHARS = 200_000  # a file written or a diff applied in one call
MAX_EDIT_CHARS = 100_000  # each of replace_text's old and new
MAX_COMMAND_CHARS = 16_384
MAX_LINE = 10_000_000
MAX_NOTE_CHARS = 2_000
MAX_COMMAND_TIMEOUT_S = 60
MAX_READ_BYTES = 200_000  # read_file without a line range refuses a larger file
MAX_READ_CHARS = 60_000  # read_file returns at most this much text per call, and says where to read on
_PATH_HELP = "Path relative to the repository root, e.g. 'lru.py' or 'tests/test_lru.py'."
RepoPath = Annotated[str, Param(minLength=1, maxLength=MAX_PATH_CHARS, description=_PATH_HELP)]
Line = Annotated[int | None, Param(minimum=1, maximum=MAX_LINE)]
TOOLS = Toolbox()  # every tool below, in the order the model reads them


@TOOLS.tool(read_only=True)
def list_files(env: ToolHost,
               path: Annotated[str, Param(minLength=1, maxLength=MAX_PATH_CHARS, description=_PATH_HELP,
                                          default=".")] = ".") -> Observation:
    """List the files of the repository (or of one directory in it), one path per line."""
    files, problems = env.listing(path)
    text = "\n".join(files) or "(no files)"
    if problems:
        text += f"\n[listing incomplete: {'; '.join(problems[:3])}]"
    return Observation(text=text, data={"files": files})


@TOOLS.tool(read_only=True)
def read_file(env: ToolHost, path: RepoPath, start_line: Line = None, end_line: Line = None) -> Observation:
    """Read a text file, with line numbers. Optionally only lines start_line..end_line (1-based, inclusive)."""
    env.regular_file(path)
    data = cast(Sandbox, env.sandbox).read_file(path)
    if len(data) > MAX_READ_BYTES and start_line is None:
        raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{preview(path)} has {len(data)} bytes; read it in parts "
                                                             "with start_line/end_line")
    lines = data.decode().splitlines()
    lo = (start_line or 1) - 1
    hi = min(end_line or len(lines), len(lines))
    if lo >= max(1, len(lines)) and lines:
        raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"start_line {start_line} is past the end of {preview(path)} "
                                                             f"({len(lines)} lines)")
    out: list[str] = []
    used, shown = 0, lo
    for i in range(lo, hi):
        row = f"{i + 1:>5}  {lines[i]}"
        if used + len(row) > MAX_READ_CHARS and out:
            break
        out.append(row[:MAX_READ_CHARS])
        used += len(row) + 1
        shown = i + 1
    text = "\n".join(out)
    if shown < hi:
        text += f"\n[... {hi - shown} more lines: read on with start_line={shown + 1}]"
    return Observation(text=text or "(empty file)", data={"path": path, "lines": len(lines), "shown_to": shown})


@TOOLS.tool
def write_file(env: ToolHost, path: RepoPath, content: Annotated[str, Param(maxLength=MAX_FILE_CHARS)]) -> Observation:
    """Create or overwrite a text file with the given content."""
    env.regular_file(path, may_be_missing=True)
    cast(Sandbox, env.sandbox).write_file(path, content)
    return Observation(text=f"wrote {path} ({len(content.splitlines())} lines)", data={"path": path})


@TOOLS.tool
def replace_text(env: ToolHost, path: RepoPath,
                 old: Annotated[str, Param(minLength=1, maxLength=MAX_EDIT_CHARS)],
                 new: Annotated[str, Param(maxLength=MAX_EDIT_CHARS)]) -> Observation:
    """Replace an exact piece of text in a file. `old` must occur exactly once (include surrounding lines to make it
    unique)."""
    env.regular_file(path)
    sandbox = cast(Sandbox, env.sandbox)
    text = sandbox.read_file(path).decode()
    count = text.count(old)
    if count == 0:
        raise ToolRefusal(ActionErrorKind.NOT_FOUND, f"the text to replace does not occur in {preview(path)}")
    if count > 1:
        raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"the text to replace occurs {count} times in {preview(path)}; "
                                                          "include more context so it occurs once")
    sandbox.write_file(path, text.replace(old, new, 1))
    return Observation(text=f"replaced 1 occurrence in {path}", data={"path": path})


@TOOLS.tool
def apply_diff(env: ToolHost, diff: Annotated[str, Param(minLength=1, maxLength=MAX_FILE_CHARS)]) -> Observation:
    """Apply a unified diff (as produced by `git diff` or `diff -u`, paths a/... b/...) to the repository with
    `git apply`."""
    result = cast(Sandbox, env.sandbox).exec(["git", "apply", "--whitespace=nowarn", "-"], input=diff.encode(),
                                             timeout=30, env=env.command_env)
    if not result.ok:
        raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"git apply failed: {result.stderr.strip() or result.stdout.strip()}")
    return Observation(text="diff applied", data={"applied": True})


@TOOLS.tool
def run_command(env: ToolHost, command: Annotated[str, Param(minLength=1, maxLength=MAX_COMMAND_CHARS)],
                timeout_s: Annotated[int, Param(minimum=1, maximum=MAX_COMMAND_TIMEOUT_S, default=30)] = 30) -> Observation:
    """Run a shell command in the repository, in a sandbox without network. Returns the exit code and output (each
    stream capped). /tmp is emptied after each command."""
    if "\x00" in command:
        raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, "a command cannot contain a NUL byte")
    if not command.strip():
        raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, "the command is empty")
    return env.exec_observation(cast(Sandbox, env.sandbox).exec(command, timeout=timeout_s, env=env.command_env))


@TOOLS.tool
def run_tests(env: ToolHost,
              tests: Annotated[list[Annotated[str, Param(minLength=1, maxLength=MAX_PATH_CHARS)]] | None,
                               Param(maxItems=50)] = None) -> Observation:
    """Run the repository's visible tests with pytest (all of them, or the given test files / node ids) and return
    pytest's report."""
    for t in tests or []:
        if t.startswith("-"):
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{preview(t)}: give test files or node ids, not options")
        if "\x00" in t:
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{preview(t)}: a test id cannot contain a NUL byte")
    interpreter = getattr(env.sandbox, "runtime", None)
    python = interpreter.interpreter if interpreter else "python3"
    result = cast(Sandbox, env.sandbox).exec([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(tests or [])],
                                             timeout=60, env=env.command_env)
    return env.exec_observation(result, normalise=True)


@TOOLS.tool
def submit(env: ToolHost, note: Annotated[str, Param(maxLength=MAX_NOTE_CHARS,
                                                           description="Optional summary of the fix.")] = "") -> Observation:
    """Finish: your changes to the repository are verified by hidden tests."""
    return Observation(text="submitted; your changes will be verified", data={"submitted": True})


TOOL_SPECS = TOOLS.tool_specs()

