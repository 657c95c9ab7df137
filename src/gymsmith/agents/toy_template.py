"""A byte-level tokenizer and a ChatML-style chat template, for a scripted server that answers like vLLM.

No model or tokenizer can run here, so the scripted server (`scripted_server.ScriptedChatServer(vllm=True)`)
renders conversations with this template and returns real token ids for them: bytes are ids 0-255,
`<|im_start|>` is 256 and `<|im_end|>` 257. A message renders as `<|im_start|>ROLE\\nBODY<|im_end|>\\n`; an assistant
body is its content followed by one `<tool_call>{"name": ..., "arguments": ...}</tool_call>` per call. A reply's
completion is its body and `<|im_end|>`, so, as with a real model whose template renders replies as it generated
them, each prompt continues the previous prompt and completion: the loss mask can be checked token by token.
"""

from __future__ import annotations

import json
from typing import Any

IM_START, IM_END = 256, 257
_SPECIAL = {IM_START: "<|im_start|>", IM_END: "<|im_end|>"}


def body(message: dict[str, Any]) -> str:
    """The text a message renders between its role line and `<|im_end|>`."""
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        text += "<tool_call>" + json.dumps({"name": function.get("name"), "arguments": function.get("arguments")}) + "</tool_call>"
    return text


def _text(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def prompt_ids(messages: list[dict[str, Any]]) -> list[int]:
    """The token ids of `messages` rendered, followed by the generation prompt `<|im_start|>assistant\\n`."""
    ids: list[int] = []
    for m in messages:
        ids += [IM_START, *_text(f"{m.get('role')}\n{body(m)}"), IM_END, *_text("\n")]
    return ids + [IM_START, *_text("assistant\n")]


def completion_ids(reply: dict[str, Any]) -> list[int]:
    """The token ids a model generates for the assistant message `reply`: its body, then `<|im_end|>`."""
    return [*_text(body(reply)), IM_END]


def decode(ids: list[int]) -> str:
    """Text of `ids` (special tokens by name); ids of a multi-byte character decode together."""
    out, pending = [], bytearray()
    for i in ids:
        if i in _SPECIAL:
            out.append(pending.decode("utf-8", "replace") + _SPECIAL[i])
            pending = bytearray()
        else:
            pending.append(i)
    return "".join(out) + pending.decode("utf-8", "replace")


def logprob(token_id: int, position: int) -> float:
    """A made-up logprob for the token at `position` of a completion: fixed, negative, exact in JSON."""
    return -((token_id * 31 + position * 7) % 997 + 1) / 1000
