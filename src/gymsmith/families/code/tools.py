"""The coding tools, as the model sees them: each description is the tool's documentation."""

from __future__ import annotations

from gymsmith.core.types import ToolSpec

# Every argument is bounded (docs/episodes.md); the caps are far above what a fix needs.
MAX_PATH_CHARS = 1024
MAX_FILE_CHARS = 200_000  # a file written or a diff applied in one call
MAX_EDIT_CHARS = 100_000  # each of replace_text's old and new
MAX_COMMAND_CHARS = 16_384
MAX_LINE = 10_000_000
MAX_NOTE_CHARS = 2_000
PATH = {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS,
        "description": "Path relative to the repository root, e.g. 'lru.py' or 'tests/test_lru.py'."}
LINE = {"type": "integer", "minimum": 1, "maximum": MAX_LINE}
MAX_COMMAND_TIMEOUT_S = 60

TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(name="list_files", description="List the files of the repository (or of one directory in it), one path per line.",
             parameters={"type": "object", "properties": {"path": {**PATH, "default": "."}}, "additionalProperties": False}),
    ToolSpec(name="read_file", description="Read a text file, with line numbers. Optionally only lines start_line..end_line (1-based, inclusive).",
             parameters={"type": "object", "properties": {"path": PATH, "start_line": LINE, "end_line": LINE},
                         "required": ["path"], "additionalProperties": False}),
    ToolSpec(name="write_file", description="Create or overwrite a text file with the given content.",
             parameters={"type": "object", "properties": {"path": PATH, "content": {"type": "string", "maxLength": MAX_FILE_CHARS}},
                         "required": ["path", "content"], "additionalProperties": False}),
    ToolSpec(name="replace_text", description="Replace an exact piece of text in a file. `old` must occur exactly once "
                                              "(include surrounding lines to make it unique).",
             parameters={"type": "object", "properties": {"path": PATH,
                                                          "old": {"type": "string", "minLength": 1, "maxLength": MAX_EDIT_CHARS},
                                                          "new": {"type": "string", "maxLength": MAX_EDIT_CHARS}},
                         "required": ["path", "old", "new"], "additionalProperties": False}),
    ToolSpec(name="apply_diff", description="Apply a unified diff (as produced by `git diff` or `diff -u`, paths a/... b/...) "
                                            "to the repository with `git apply`.",
             parameters={"type": "object", "properties": {"diff": {"type": "string", "minLength": 1, "maxLength": MAX_FILE_CHARS}},
                         "required": ["diff"], "additionalProperties": False}),
    ToolSpec(name="run_command", description="Run a shell command in the repository, in a sandbox without network. "
                                             "Returns the exit code and output (each stream capped). /tmp is emptied after each command.",
             parameters={"type": "object", "properties": {"command": {"type": "string", "minLength": 1, "maxLength": MAX_COMMAND_CHARS},
                                                          "timeout_s": {"type": "integer", "minimum": 1,
                                                                        "maximum": MAX_COMMAND_TIMEOUT_S, "default": 30}},
                         "required": ["command"], "additionalProperties": False}),
    ToolSpec(name="run_tests", description="Run the repository's visible tests with pytest (all of them, or the given "
                                           "test files / node ids) and return pytest's report.",
             parameters={"type": "object", "properties": {"tests": {"type": "array", "maxItems": 50,
                                                                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS}}},
                         "additionalProperties": False}),
    ToolSpec(name="submit", description="Finish: your changes to the repository are verified by hidden tests.",
             parameters={"type": "object", "properties": {"note": {"type": "string", "maxLength": MAX_NOTE_CHARS,
                                                                   "description": "Optional summary of the fix."}},
                         "additionalProperties": False}),
)
