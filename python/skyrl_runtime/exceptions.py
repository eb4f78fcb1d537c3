"""Errors of skyrl_runtime, at Ray's names (ray.exceptions).

Each carries `code`, the runtime's canonical status name ("UNAVAILABLE", "NOT_FOUND", ...):
code decides the class, never the words of the message.
"""


class RayError(Exception):
    """Base of every error the runtime raises."""

    def __init__(self, message, code="UNKNOWN"):
        super().__init__(message)
        self.code = code


class GetTimeoutError(RayError, TimeoutError):
    """get() or wait() ran out of time; the call goes on."""


class RayActorError(RayError):
    """A call could not be served by its actor."""


class ActorDiedError(RayActorError):
    """The actor is dead for good (killed, out of restarts, or its constructor failed)."""


class ActorUnavailableError(RayActorError):
    """The actor cannot be reached now (its process died and may be restarting)."""


class WeightSyncError(RayError):
    """A weight sync (skyrl_runtime.weight_sync) failed; `code` is the transport's status code.
    On a receiver the previous version stays live, as the message says."""


_BY_CODE = {
    "DEADLINE_EXCEEDED": GetTimeoutError,
    "FAILED_PRECONDITION": ActorDiedError,
    "UNAVAILABLE": ActorUnavailableError,
}


def from_native(error):
    """The exception for a skyrl_runtime._native.Error."""
    cls = _BY_CODE.get(error.code, RayError)
    return cls(str(error), error.code)
