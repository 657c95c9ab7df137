"""Sandbox runtime: isolated command execution over a workspace, and copy-on-write workspace snapshots.

    from gymsmith.sandbox import open_sandbox, Limits
    with open_sandbox(path, limits=Limits(memory_mb=512)) as sb:
        result = sb.exec(["python3", "-m", "pytest", "-q"], timeout=30)

Backends: `bwrap` (bubblewrap; the default) and `local` (no isolation, opt-in, labelled unsafe).
"""

from gymsmith.sandbox.base import (
    WORKSPACE,
    ExecResult,
    KillReason,
    Limits,
    Sandbox,
    SandboxError,
    backend_names,
    open_sandbox,
    sandbox_backend,
)
from gymsmith.sandbox import bwrap as _bwrap, local as _local  # noqa: F401  (register the built-in backends)
from gymsmith.sandbox.egress import EgressEvent, EgressProxy
from gymsmith.sandbox.workspace import CowWorkspace, tree_hash

__all__ = ["WORKSPACE", "CowWorkspace", "EgressEvent", "EgressProxy", "ExecResult", "KillReason", "Limits", "Sandbox",
           "SandboxError", "backend_names", "open_sandbox", "sandbox_backend", "tree_hash"]
