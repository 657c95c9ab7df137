"""Seeded randomness for a sandbox's Python processes: mounted as `sitecustomize.py` by a seeded BwrapSandbox.

With SANDBOX_SEED set, `os.urandom` (and so `uuid.uuid4`, `secrets`, `random.SystemRandom`) and the `random`
module's generator draw from a stream fixed by the seed and the process id. A seeded sandbox starts fresh pid
namespaces per rollout, so the same commands get the same pids and a seeded rollout sees the same values when it is
repeated (the determinism check). It is a convenience for reproducible observations, not a boundary: a command may
undo it, and it changes nothing the verifier decides. Runs inside the sandbox: standard library only.
"""

import os


def _seed_randomness() -> None:
    seed = os.environ.get("SANDBOX_SEED")
    if not seed:
        return
    import hashlib

    drawn = {"pid": 0, "n": 0}

    def urandom(size: int) -> bytes:
        if size < 0:
            raise ValueError("negative argument not allowed")
        pid = os.getpid()
        if drawn["pid"] != pid:  # a new process (a fork): a stream of its own
            drawn["pid"], drawn["n"] = pid, 0
        out = bytearray()
        while len(out) < size:
            drawn["n"] += 1
            out += hashlib.sha256(f"{seed}:{pid}:{drawn['n']}".encode()).digest()
        return bytes(out[:size])

    os.urandom = urandom  # before `random` is imported: it binds os.urandom at import
    import random

    random.seed(f"{seed}:{os.getpid()}")
    # random reseeds a forked child from the kernel; this runs after it and seeds it again
    os.register_at_fork(after_in_child=lambda: random.seed(f"{seed}:{os.getpid()}"))


_seed_randomness()
