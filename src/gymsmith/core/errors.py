"""Errors a user can cause. Each names the input and what was expected."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class GymsmithError(Exception):
    """Base class of every error gymsmith raises on purpose."""


class InfrastructureError(GymsmithError):
    """A part the agent does not control failed (a sandbox that cannot run, a dead browser, a verifier or model
    endpoint that is down). Raised out of an environment's `step`, it ends the rollout as an `error` (no reward);
    every other exception an agent's input may cause is turned into an error observation or a reward of 0.
    """


def is_infrastructure(exc: BaseException) -> bool:
    """Whether `exc` is an infrastructure failure (see InfrastructureError): the rule the environments and the
    runner share to tell a failure of the infrastructure (an `error` rollout) from one of the agent (reward 0)."""
    return isinstance(exc, (InfrastructureError, MemoryError))


class UnknownFamilyError(GymsmithError, KeyError):
    """No family is registered under the requested name."""

    def __init__(self, name: str, known: Iterable[str], *, broken: str | None = None):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        if broken:
            hint += f" Its plug-in entry point failed to load: {broken}"
        super().__init__(f"unknown family {name!r}; registered families: {', '.join(known) or 'none'}.{hint}")
        self.name, self.known = name, known

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


class KnobError(GymsmithError, ValueError):
    """A knob value is unknown, of the wrong type, or outside its declared range."""


class NoTaskForSeed(GymsmithError, RuntimeError):
    """This seed makes no task with these knobs (a family whose tasks must meet a condition some seeds' choices
    miss); the next seed may. Task sets skip such seeds."""


class TaskSetError(GymsmithError, ValueError):
    """A task-set definition cannot be satisfied (bad range, bad split, too few tasks)."""


class NotGeneratedError(GymsmithError, ValueError):
    """A task sent in full is not what its family generates from its seed and knobs (edited, or made by other code):
    its id, and so its split, are the sender's writing."""


class SplitPolicyError(GymsmithError, PermissionError):
    """Something that trains asked for held-out tasks."""


class StoreError(GymsmithError):
    """The trajectory store cannot be opened or does not hold what was asked for."""


class StaleTaskError(InfrastructureError):
    """A task's start state, rebuilt from its seed, is not the one the task's digest names: the family's
    generator changed without a version bump, or the task was made by another version. Not the agent's doing."""

    @classmethod
    def check(cls, task_id: str, stated: str, rebuilt: str, what: str = "start state") -> None:
        """Raise unless the `rebuilt` digest is the `stated` one; `what` names the state (a site, a repository)."""
        if rebuilt != stated:
            raise cls(f"task {task_id}: the {what} rebuilt from its seed has digest {rebuilt}, the task says {stated}; "
                      "the family's generator changed without a version bump")


class VerifierError(InfrastructureError):
    """The verifier service crashed, timed out or returned something unreadable."""


class ModelEndpointError(InfrastructureError):
    """The endpoint kept failing (HTTP errors, timeouts, dropped connections) after every retry."""


class ModelRequestRefused(GymsmithError):
    """The model endpoint could not answer a rollout's conversation after answering its earlier requests: it
    refused it (HTTP 400, 413 or 422: past the model's context, or past what the server takes in one request), or
    every attempt timed out or failed while the endpoint answered a one-token request in time (the reply took
    longer than the call's limit, or the output broke the server). The conversation is the agent's own doing, so
    this is the agent's failure (reward 0), never an infrastructure error: otherwise a policy that floods its
    context, or generates slowly to its token limit, would have its failures dropped, or retried until one succeeds."""


class UngradableState(GymsmithError):
    """The final state the agent left cannot be graded (too large, special files, unreadable data...).

    Raised by a family's hidden checks. It is the agent's failure, not the infrastructure's: the verifier
    turns it into a rejected reward of 0 with the reason as a gate failure, never into an error.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
