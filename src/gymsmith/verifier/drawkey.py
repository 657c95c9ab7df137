"""The verifier's draw key: a secret that makes hidden test inputs unpredictable from anything public.

A task's seed is not a secret: the generators ship with gymsmith, and a start state names its seed to anyone who
runs the generator over the seeds. Hidden inputs drawn from the seed alone can therefore be computed, and their
answers tabled, by a policy that has read gymsmith. Inputs drawn from `draw_token(...)` cannot: the token is an
HMAC of the label under a key that only the trusted side holds.

The key is `$GYMSMITH_VERIFIER_KEY` if set (give every machine of a cluster the same value), else 32 random bytes
kept in `<cache root>/keys/verifier.key` (mode 0600, made once per machine). No sandbox sees the cache root's
`keys/` directory (sandboxes bind only the runtimes and task files they need). Tasks built under one key and
verified under another fail their checks-digest test with a clear error ("regenerate it"), never silently.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path

ENV = "GYMSMITH_VERIFIER_KEY"
KEY_BYTES = 32


def key_path() -> Path:
    """Where this machine's key is kept when `$GYMSMITH_VERIFIER_KEY` is not set."""
    from gymsmith.sandbox.runtime import cache_root

    return cache_root() / "keys" / "verifier.key"


@lru_cache(maxsize=4)
def _key(env_value: str | None, path: str) -> bytes:
    if env_value:
        return env_value.encode()
    file = Path(path)
    if not file.exists():
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = file.with_name(f".{file.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(KEY_BYTES))
        try:
            os.link(tmp, file)  # first writer wins: racing processes all end up with the same key
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = file.read_bytes()
    if len(key) < 16:
        raise RuntimeError(f"the verifier key {file} holds {len(key)} bytes; expected {KEY_BYTES} (delete it to make "
                           f"a new one, or set ${ENV})")
    return key


def draw_token(*parts: object) -> str:
    """A hex token for `parts` (e.g. the task's seed and a template name) under the verifier's key: the same on
    every call on a machine (and on every machine given the same `$GYMSMITH_VERIFIER_KEY`), unpredictable to
    anyone without the key. Seed a `random.Random` with it to draw hidden inputs.

    Raises RuntimeError when the key file exists but is too short to be a key."""
    label = "\x1f".join(str(p) for p in parts).encode()
    return hmac.new(_key(os.environ.get(ENV) or None, str(key_path())), label, hashlib.sha256).hexdigest()


# -- the hash seed graded code runs under -----------------------------------------------------------------------
# Every sandbox runs Python with PYTHONHASHSEED=0 (exact resets: the same set order in every episode), so `hash("a")`
# or the order of a set of texts told the verifier's process from an ordinary one (where the seed is random): code
# could be the fix only there. Where the verifier runs graded code, and where keyed draws compute the answers it is
# judged by, the seed is drawn from the key instead: fixed for the key (verification stays deterministic), as
# unpredictable as any ordinary process's without it. Public work (which bug a task gets, a package's reliable
# tests) keeps seed 0, so no start state depends on the key.
_KEYED_HASH: ContextVar[bool] = ContextVar("gymsmith_keyed_hash", default=False)
HASH_SEED_RANGE = 4_294_967_295  # PYTHONHASHSEED's largest value; 0 turns randomisation off


def graded_hash_seed() -> int:
    """The PYTHONHASHSEED that code under test runs with here: 0 outside `keyed_hash()`, inside it a value in
    1..HASH_SEED_RANGE drawn from the verifier's key. Raises RuntimeError as `draw_token` does."""
    if not _KEYED_HASH.get():
        return 0
    return int(draw_token("hash seed of graded code"), 16) % HASH_SEED_RANGE + 1


@contextmanager
def keyed_hash() -> Iterator[None]:
    """Run the call checks started in this block (in this thread or task) under the key's hash seed
    (`graded_hash_seed`): verification, and the keyed draws whose answers verification compares with."""
    token = _KEYED_HASH.set(True)
    try:
        yield
    finally:
        _KEYED_HASH.reset(token)
