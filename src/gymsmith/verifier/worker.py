"""The verifier process: reads VerifyRequest lines on stdin, writes VerifyResponse lines on stdout.

Run as ``python -m gymsmith.verifier.worker``. It is the only process that imports hidden checks.
Its stdout carries the protocol only; anything a check prints goes to stderr.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path

from gymsmith.core.errors import UngradableState
from gymsmith.registry import get_family
from gymsmith.verifier.policies import apply_policy
from gymsmith.verifier.protocol import CheckResult, VerifyRequest, VerifyResponse


def handle(request: VerifyRequest) -> VerifyResponse:
    family = get_family(request.task.family)
    if family.version != request.task.family_version:
        return VerifyResponse(request_id=request.request_id,
                              error=f"task made by {request.task.family} v{request.task.family_version}, "
                                    f"verifier has v{family.version}")
    checks = importlib.import_module(family.checks_module)
    if request.prepare:  # caches only: what a later verification computes is the same with or without it
        prepare = getattr(checks, "prepare", None)
        if prepare is not None:
            prepare(request.task)
        return VerifyResponse(request_id=request.request_id)
    ungradable = None
    try:
        result = checks.verify(request.task, Path(request.final_state_path))
    except UngradableState as exc:  # the agent left something the checks refuse to grade: its failure, reward 0
        result = CheckResult(components={}, gate_failures=[f"ungradable final state: {exc.reason}"])
        ungradable = exc.reason
    if not isinstance(result, CheckResult):
        raise TypeError(f"{family.checks_module}.verify returned {type(result).__name__}, expected CheckResult")
    reward = apply_policy(result, request.policy)
    reward.ungradable = ungradable  # typed, so the runner can end the rollout as UNGRADABLE_STATE
    state_digest = getattr(checks, "state_digest", None) if request.digest and ungradable is None else None
    digest = state_digest(Path(request.final_state_path)) if state_digest is not None else None
    return VerifyResponse(request_id=request.request_id, reward=reward, digest=digest)


def main() -> None:
    protocol_out = sys.stdout
    sys.stdout = sys.stderr  # a stray print in a check must not corrupt the protocol stream
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = VerifyRequest.model_validate_json(line)
        except Exception as exc:
            protocol_out.write(VerifyResponse(request_id=-1, error=f"unreadable request: {exc}").model_dump_json() + "\n")
            protocol_out.flush()
            continue
        try:
            response = handle(request)
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            response = VerifyResponse(request_id=request.request_id, error=f"checks raised: {detail}")
        protocol_out.write(response.model_dump_json() + "\n")
        protocol_out.flush()


if __name__ == "__main__":
    main()
