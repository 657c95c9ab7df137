"""A Text space that Gymnasium's AsyncVectorEnv carries through shared memory intact.

Gymnasium 1.4's AsyncVectorEnv (``shared_memory=True``, the default) calls ``read_from_shared_memory`` once, when it is
built, and returns that object after every reset and step. For an array space that is a view which the workers'
later writes show through; for a ``Text`` space it is a tuple of strings decoded from the still empty buffer, so every
observation comes back as ``max_length`` copies of the charset's first character (100,000 tabs for GymsmithEnv).
Gymnasium's issue #1164 reports the same single read for Dict spaces.

``SharedText`` is a ``Text`` space with its own entries in Gymnasium's shared-memory dispatchers: a row per env holds
the observation's length and its code points, and the read gives ``SharedTexts``, a sequence that decodes the buffer
each time it is indexed. AsyncVectorEnv's default ``copy=True`` deep-copies it into a tuple of str, as SyncVectorEnv
returns; with ``copy=False`` the caller gets the live sequence, which shows the next reset's or step's observations
once they are written (take ``tuple(obs)`` to keep them).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory


class SharedText(spaces.Text):
    """``gymnasium.spaces.Text`` that works with AsyncVectorEnv's shared memory (module docstring)."""


class SharedTexts(Sequence):
    """The observations of `n` envs in a shared buffer, decoded when read. A deep copy is a tuple of str."""

    def __init__(self, buffer: Any, n: int, max_length: int):
        self._rows = np.frombuffer(buffer.get_obj(), dtype=np.int32).reshape(n, max_length + 1)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self))[index])
        row = self._rows[index]
        return row[1:1 + row[0]].tobytes().decode("utf-32-le")

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, SharedTexts) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_shared_memory.register(SharedText)
def _create(space: SharedText, n: int = 1, ctx: ModuleType = mp) -> Any:
    return ctx.Array("i", n * (space.max_length + 1))  # per env: the length, then up to max_length code points


@write_to_shared_memory.register(SharedText)
def _write(space: SharedText, index: int, value: str, shared_memory: Any) -> None:
    codes = np.frombuffer(value.encode("utf-32-le"), dtype=np.int32)
    if len(codes) > space.max_length:
        raise ValueError(f"observation of {len(codes)} characters; the space holds at most {space.max_length}")
    width = space.max_length + 1
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * width:(index + 1) * width]
    row[0] = len(codes)
    row[1:1 + len(codes)] = codes


@read_from_shared_memory.register(SharedText)
def _read(space: SharedText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n, space.max_length)
