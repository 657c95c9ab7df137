"""How the store keeps a model agent's turns (`agents.tokens.ModelTurn`, carried in a step's `agent_info["turn"]`).

Each turn's request repeats the whole conversation so far, so storing it whole would grow with the square of the
rollout's length. A row keeps only what is new against the previous turn's messages plus its reply (`core.splice`):
`messages_kept` leading messages equal to them, and past the agent's context limit (its oldest turns dropped) the run
of `messages_copied` of them from `messages_copy_from` that the request repeats, inserted at `messages_copied_at`;
then the rest. Prompt ids come cut that way already (`agents.tokens.chain_prompt`) and are stored as they are.
`decode_turns` rebuilds every turn exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from gymsmith.agents.tokens import finish_reason
from gymsmith.core.splice import splice, unsplice
from gymsmith.core.types import Step


def split_turn(agent_info: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(`agent_info` without its turn, the turn or None); `agent_info` itself is left as it is."""
    if not agent_info or not isinstance(agent_info.get("turn"), dict):
        return agent_info, None
    rest = dict(agent_info)
    return rest, rest.pop("turn")


def encode_turns(rollout_id: str, steps: Iterable[Step]) -> list[dict[str, Any]]:
    """The `turns` table rows of a rollout's steps (one per step that carries a turn)."""
    rows: list[dict[str, Any]] = []
    context: list[Any] = []  # the previous turn's messages and reply
    for step in steps:
        _, turn = split_turn(step.agent_info)
        if turn is None:
            continue
        messages = list(turn.get("messages") or [])
        cut = splice(context, messages)
        # the finish reason is the model server's word: stored only if it is one (a column of 32 characters)
        rows.append(dict(rollout_id=rollout_id, step_idx=step.index, level=str(turn.get("level") or "off"),
                         finish_reason=finish_reason(turn.get("finish_reason")), messages_kept=cut.kept,
                         messages_copy_from=cut.copy_from, messages_copied=cut.copied, messages_copied_at=cut.at,
                         messages=json.dumps(cut.tail), reply=json.dumps(turn.get("reply")),
                         prompt_kept=turn.get("prompt_kept") or 0, prompt_copy_from=turn.get("prompt_copy_from") or 0,
                         prompt_copied=turn.get("prompt_copied") or 0,
                         prompt_copied_at=turn.get("prompt_copied_at") or 0, prompt_ids=_maybe_json(turn.get("prompt_ids")),
                         completion_ids=_maybe_json(turn.get("completion_ids")),
                         logprobs=_maybe_json(turn.get("logprobs"))))
        context = messages + [turn.get("reply")]
    return rows


def decode_turns(rows: Iterable[Mapping[Any, Any]]) -> dict[int, dict[str, Any]]:
    """Step index -> the turn it carried, from a rollout's `turns` rows (in any order)."""
    out: dict[int, dict[str, Any]] = {}
    context: list[Any] = []
    for row in sorted(rows, key=lambda r: r["step_idx"]):
        messages = unsplice(context, row["messages_kept"], row.get("messages_copy_from") or 0,
                            row.get("messages_copied") or 0, row.get("messages_copied_at") or 0, json.loads(row["messages"]))
        turn = {"messages": messages, "reply": json.loads(row["reply"]), "finish_reason": row["finish_reason"],
                "prompt_ids": _maybe_load(row["prompt_ids"]), "prompt_kept": row["prompt_kept"] or 0,
                "prompt_copy_from": row.get("prompt_copy_from") or 0, "prompt_copied": row.get("prompt_copied") or 0,
                "prompt_copied_at": row.get("prompt_copied_at") or 0,
                "completion_ids": _maybe_load(row["completion_ids"]), "logprobs": _maybe_load(row["logprobs"]),
                "level": row["level"]}
        out[row["step_idx"]] = turn
        context = messages + [turn["reply"]]
    return out


def _maybe_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _maybe_load(text: str | None) -> Any:
    return None if text is None else json.loads(text)
