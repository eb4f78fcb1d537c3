"""Errors of skyrl_runtime, at Ray's names (ray.exceptions).

Each carries `code`, the runtime's canonical status name ("UNAVAILABLE", "NOT_FOUND", ...):
code decides the class, never the words of the message.
"""


class RayError(Exception):
    """Base of every error the runtime raises."""

    def __init__(self, message, code="UNKNOWN"):
        super().__init__(message)
        self.code = code


class RaySystemError(RayError):
    """The runtime itself failed (not the code it ran), as Ray's."""


class GetTimeoutError(RayError, TimeoutError):
    """get() or wait() ran out of time; the call goes on."""


class RayActorError(RayError):
    """A call could not be served by its actor."""


class ActorDiedError(RayActorError):
    """The actor is dead for good (killed, out of restarts, or its constructor failed)."""


class ActorUnavailableError(RayActorError):
    """The actor cannot be reached now (its process died and may be restarting)."""


class PendingCallsLimitExceeded(RayError):
    """A call on a handle that already has max_pending_calls calls pending (Ray's name)."""


class AsyncioActorExit(RayError):
    """Raised by exit_actor() in an async actor's coroutine: it ends the actor, as Ray's."""


class RayTaskError(RayError):
    """A task's or an actor method's own exception, raised by get(). What get() raises is of a
    class made from both this and the exception's own class (`RayTaskError(ValueError)`, say), so
    `except ValueError` and `except RayTaskError` both catch it, as in Ray; its text ends with
    where it was raised and the remote traceback. `cause` is the original exception."""

    def __init__(self, message="", code="UNKNOWN", cause=None, traceback_str=""):
        super().__init__(message, code)
        self.cause = cause
        self.traceback_str = traceback_str

    def as_instanceof_cause(self):
        """This error as an instance of both RayTaskError and its cause's class (Ray's name)."""
        return self if self.cause is None or isinstance(self, type(self.cause)) else as_task_error(
            self.cause, self.traceback_str)


class UnserializableException(RayTaskError):
    """A remote exception whose class does not unpickle in this process: its type name, message
    and the remote traceback, in its text."""


_DUAL: dict[type, type] = {}


def as_task_error(cause, traceback_str):
    """`cause` as an instance of a class deriving from both RayTaskError and its own class; the
    cause itself (with the traceback as a note) when no such class can be made (a class whose
    layout or metaclass forbids it)."""
    cls = type(cause)
    if isinstance(cause, RayTaskError):
        return cause
    dual = _DUAL.get(cls)
    if dual is None:
        try:
            dual = type(f"RayTaskError({cls.__name__})", (RayTaskError, cls), {
                "__init__": lambda self, *a, **k: None,
                "__str__": lambda self: f"{cls.__str__(self)}\n{self.traceback_str}" if self.traceback_str
                else cls.__str__(self),
                "__reduce__": lambda self: (as_task_error, (self.cause, self.traceback_str)),
                "__module__": cls.__module__,
            })
        except TypeError:
            dual = False
        _DUAL[cls] = dual
    if not dual:
        cause.add_note(traceback_str)
        return cause
    try:
        err = dual.__new__(dual, *cause.args)
    except Exception:  # noqa: BLE001 - a __new__ that wants other arguments
        cause.add_note(traceback_str)
        return cause
    err.args = cause.args
    err.__dict__.update(getattr(cause, "__dict__", {}))
    err.code = "UNKNOWN"
    err.cause = cause
    err.traceback_str = traceback_str
    return err


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
