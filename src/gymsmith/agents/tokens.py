"""What one model reply holds for a trainer: the exact messages sent, the reply, token ids, logprobs, finish reason.

OpenAI-compatible servers return per-token logprobs when asked (`logprobs: true`). vLLM also returns token ids:
with `return_tokens_as_token_ids` each logprob entry's `token` is the string "token_id:N"; with `return_token_ids`
(newer vLLM) the response has `prompt_token_ids` and each choice `token_ids`; with `prompt_logprobs: 0` the
response's `prompt_logprobs` holds, for every prompt position after the first, a one-key dict whose key is the
prompt token's id (the first position is null: vLLM computes no logprob, so no id, for it).

`TOKEN_LEVELS` are the request fields asked for at each level, richest first; `read_turn` reads whatever of it the
server returned, never raising for a field that is missing or malformed (that field is then None).

A rollout's prompts repeat each other: turn k's prompt is mostly turn k-1's prompt and completion. So that a rollout
holds each id once (a thousand rollouts in flight, each with tens of turns of thousands of tokens, would otherwise
hold gigabytes), `chain_prompt` keeps in a turn only the prompt ids it does not share with the previous turn's prompt
followed by its completion (`core.splice`): the `prompt_kept` leading ones, and once the conversation passes the
agent's context limit (its oldest turns dropped, so the prompt no longer starts with the last one), the run of
`prompt_copied` ids from `prompt_copy_from` that it repeats after the note; `full_prompts` rebuilds the whole prompts.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, Field

from gymsmith.core.splice import splice, unsplice

TOKEN_LEVELS: dict[str, dict[str, Any]] = {
    "vllm": {"logprobs": True, "top_logprobs": 0, "return_tokens_as_token_ids": True, "return_token_ids": True,
             "prompt_logprobs": 0},
    "vllm_ids": {"logprobs": True, "top_logprobs": 0, "return_tokens_as_token_ids": True, "return_token_ids": True},
    "logprobs": {"logprobs": True, "top_logprobs": 0},
    "off": {},
}
LEVEL_ORDER = tuple(TOKEN_LEVELS)  # "auto" starts at the first and steps down when a server refuses a field
_TOKEN_ID = re.compile(r"^token_id:([0-9]{1,10})$")


class ModelTurn(BaseModel):
    """One model reply of a rollout, as a trainer needs it. Stored with the first step the reply produced (the
    step's `agent_info["turn"]`; the store keeps it in its `turns` table)."""

    messages: list[dict[str, Any]] = Field(description="The request's messages exactly as sent (after truncation).")
    reply: dict[str, Any] = Field(description="The assistant message as received: content and tool_calls.")
    finish_reason: str | None = Field(default=None, description="stop, tool_calls, length, ... as the server said.")
    prompt_ids: list[int | None] | None = Field(default=None, description="The prompt's token ids (vLLM only) after "
                                                "the first `prompt_kept`; the prompt's first id is None when the server "
                                                "gave only `prompt_logprobs`.")
    prompt_kept: int = Field(default=0, description="How many leading prompt ids equal the previous turn's prompt ids "
                             "followed by its completion ids (left out of `prompt_ids`; see `full_prompts`).")
    prompt_copy_from: int = Field(default=0, description="Where in the previous turn's prompt and completion ids the "
                                  "run this prompt repeats after its prefix starts (`core.splice`).")
    prompt_copied: int = Field(default=0, description="That run's length (left out of `prompt_ids`; 0: none).")
    prompt_copied_at: int = Field(default=0, description="Where in `prompt_ids` that run goes.")
    completion_ids: list[int] | None = Field(default=None, description="The reply's token ids (vLLM only).")
    logprobs: list[float] | None = Field(default=None, description="Per completion token, its logprob under the "
                                         "sampling model (aligned with `completion_ids`).")
    level: str = Field(default="off", description="The TOKEN_LEVELS entry the request asked for.")


def read_turn(data: dict[str, Any], messages: list[dict[str, Any]], reply: dict[str, Any], *, level: str) -> ModelTurn:
    """The turn of a chat-completions response body `data` (its first choice), sent with `messages`, whose
    assistant message is `reply`. `dict(turn)` is what a step's `agent_info["turn"]` holds."""
    choice = (data.get("choices") or [{}])[0]
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    logprobs = completion_ids = None
    if isinstance(content, list) and all(isinstance(e, dict) for e in content):
        values = [e.get("logprob") for e in content]
        if all(_is_logprob(v) for v in values):
            logprobs = [float(v) for v in values]
        ids = [_TOKEN_ID.match(str(e.get("token", ""))) for e in content]
        matched = [int(m.group(1)) for m in ids if m is not None]
        if len(matched) == len(ids) and max(matched, default=0) <= MAX_TOKEN_ID:  # [] too: a reply of no tokens
            completion_ids = matched
    given = _ints(choice.get("token_ids"))
    if completion_ids is None and given is not None and (logprobs is None or len(given) == len(logprobs)):
        completion_ids = given
    # built without validation, so the messages are the caller's objects, not copies: a rollout keeps one turn per
    # reply in memory, and copying every message into each would grow with the square of its length
    return ModelTurn.model_construct(
        messages=list(messages), reply=reply, finish_reason=finish_reason(choice.get("finish_reason")),
        prompt_ids=_ints(data.get("prompt_token_ids") or None) or _prompt_ids_of_logprobs(data.get("prompt_logprobs")),
        prompt_kept=0, prompt_copy_from=0, prompt_copied=0, prompt_copied_at=0, completion_ids=completion_ids,
        logprobs=logprobs, level=level)


TokenContext = tuple[list[int | None], int]  # the last turn's prompt and completion ids, and where its prompt ends
MIN_COPIED = 16  # a shorter repeated run is kept as it is


def chain_prompt(turn: dict[str, Any], context: TokenContext) -> TokenContext:
    """Cut from `turn` (a `dict(ModelTurn)` with its whole prompt) the prompt ids it shares with `context` (the
    previous turn's, `([], 0)` for the first), setting `prompt_kept` and the copied run; return the context for the
    next turn."""
    prompt = turn.get("prompt_ids")
    turn["prompt_kept"] = turn["prompt_copy_from"] = turn["prompt_copied"] = turn["prompt_copied_at"] = 0
    if prompt is None:
        return [], 0
    ids, prompt_end = context
    cut = splice(ids, prompt, ends=(prompt_end, len(ids)), min_run=MIN_COPIED)
    turn["prompt_kept"], turn["prompt_copy_from"], turn["prompt_copied"], turn["prompt_copied_at"] = cut[:4]
    turn["prompt_ids"] = cut.tail
    return prompt + list(turn.get("completion_ids") or []), len(prompt)


def full_prompts(turns: list[dict[str, Any]]) -> list[list[int | None] | None]:
    """The whole prompt ids of each of a rollout's turns, in order (None where the server gave none)."""
    out: list[list[int | None] | None] = []
    context: list[int | None] = []
    for turn in turns:
        tail = turn.get("prompt_ids")
        prompt = None if tail is None else unsplice(
            context, turn.get("prompt_kept") or 0, turn.get("prompt_copy_from") or 0, turn.get("prompt_copied") or 0,
            turn.get("prompt_copied_at") or 0, tail)
        out.append(prompt)
        context = [] if prompt is None else prompt + list(turn.get("completion_ids") or [])
    return out


MAX_TOKEN_ID = 2**31 - 1  # a vocabulary's ids fit; a larger "id" is no token (and no trainer's int column holds it)
MIN_LOGPROB = -1e5  # below any a real server reports (vLLM floors masked tokens at -9999); a lower one is no logprob


def _is_logprob(value: Any) -> bool:
    """A token's logprob: a number (not a bool), finite, in [MIN_LOGPROB, 0]. Anything else (`true`, 50.0, -1e308:
    a hundred-and-fortieth attacker's server sent them, and the export gave a trainer PPO ratios of 1e-22 and
    infinity) is no logprob, and the turn keeps none."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and MIN_LOGPROB <= value <= 0)
MAX_FINISH_REASON = 32


def finish_reason(value: Any) -> str | None:
    """The server's finish reason if it is one (a short printable ASCII word: stop, length, tool_calls, ...), else
    None: what the model server sends reaches the store and the trainer export, so nothing else may."""
    if isinstance(value, str) and 0 < len(value) <= MAX_FINISH_REASON and value.isascii() and value.isprintable():
        return value
    return None


def _ints(value: Any) -> list[int] | None:
    """`value` if it is a list of token ids ([] included: a completion of no tokens), else None."""
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TOKEN_ID
                                       for v in value):
        return list(value)
    return None


def _prompt_ids_of_logprobs(value: Any) -> list[int | None] | None:
    """Prompt token ids from vLLM's `prompt_logprobs` (asked with 0: one key per position, the prompt token's
    id); None unless every position after the first has exactly one key that is an integer."""
    if not isinstance(value, list) or len(value) < 2 or value[0] is not None:
        return None
    ids: list[int | None] = [None]
    for position in value[1:]:
        if not isinstance(position, dict) or len(position) != 1:
            return None
        key = str(next(iter(position)))
        if not (key.isascii() and key.isdigit() and len(key) <= 10 and int(key) <= MAX_TOKEN_ID):
            return None
        ids.append(int(key))
    return ids


def refused_field(level: str, status: int, text: str) -> bool:
    """Whether an HTTP `status` reply with body `text` refuses one of the fields asked at `level` (a server that does
    not offer it: HTTP 400 or 422 naming the field), so the request may be sent again a level lower."""
    return status in (400, 422) and any(name in text for name in TOKEN_LEVELS[level])
