"""The coding tools, as the model sees them: each description is the tool's documentation."""

from __future__ import annotations

from gymsmith.core.types import ToolSpec

PATH = {"type": "string", "description": "Path relative to the repository root, e.g. 'lru.py' or 'tests/test_lru.py'."}
MAX_COMMAND_TIMEOUT_S = 60

TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(name="list_files", description="List the files of the repository (or of one directory in it), one path per line.",
             parameters={"type": "object", "properties": {"path": {**PATH, "default": "."}}, "additionalProperties": False}),
    ToolSpec(name="read_file", description="Read a text file, with line numbers. Optionally only lines start_line..end_line (1-based, inclusive).",
             parameters={"type": "object", "properties": {"path": PATH, "start_line": {"type": "integer", "minimum": 1},
                                                          "end_line": {"type": "integer", "minimum": 1}},
                         "required": ["path"], "additionalProperties": False}),
    ToolSpec(name="write_file", description="Create or overwrite a text file with the given content.",
             parameters={"type": "object", "properties": {"path": PATH, "content": {"type": "string"}},
                         "required": ["path", "content"], "additionalProperties": False}),
    ToolSpec(name="replace_text", description="Replace an exact piece of text in a file. `old` must occur exactly once "
                                              "(include surrounding lines to make it unique).",
             parameters={"type": "object", "properties": {"path": PATH, "old": {"type": "string", "minLength": 1},
                                                          "new": {"type": "string"}},
                         "required": ["path", "old", "new"], "additionalProperties": False}),
    ToolSpec(name="apply_diff", description="Apply a unified diff (as produced by `git diff` or `diff -u`, paths a/... b/...) "
                                            "to the repository with `git apply`.",
             parameters={"type": "object", "properties": {"diff": {"type": "string", "minLength": 1}},
                         "required": ["diff"], "additionalProperties": False}),
    ToolSpec(name="run_command", description="Run a shell command in the repository, in a sandbox without network. "
                                             "Returns the exit code and output (each stream capped). /tmp is emptied after each command.",
             parameters={"type": "object", "properties": {"command": {"type": "string", "minLength": 1},
                                                          "timeout_s": {"type": "integer", "minimum": 1,
                                                                        "maximum": MAX_COMMAND_TIMEOUT_S, "default": 30}},
                         "required": ["command"], "additionalProperties": False}),
    ToolSpec(name="run_tests", description="Run the repository's visible tests with pytest (all of them, or the given "
                                           "test files / node ids) and return pytest's report.",
             parameters={"type": "object", "properties": {"tests": {"type": "array", "items": {"type": "string"}, "maxItems": 50}},
                         "additionalProperties": False}),
    ToolSpec(name="submit", description="Finish: your changes to the repository are verified by hidden tests.",
             parameters={"type": "object", "properties": {"note": {"type": "string", "description": "Optional summary of the fix."}},
                         "additionalProperties": False}),
)
