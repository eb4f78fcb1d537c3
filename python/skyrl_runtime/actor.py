"""ray.actor's names: exit_actor()."""

import os

from . import _api, _host


def exit_actor():
    """Ends the calling actor for good, as Ray's: the head stops it without a restart (its death
    reason says it was killed by the user), the call that asked gets ActorDiedError, calls
    queued behind it fail, and the process's atexit functions run. TypeError outside an actor's
    method (in a driver or a task)."""
    actor_id = os.environ.get("SKYRL_ACTOR_ID")
    if not actor_id or getattr(_host.current, "call", None) is None or getattr(_host.current, "task", None):
        raise TypeError("exit_actor() is called from a method of an actor only")
    _api._current().client.kill(actor_id)
    raise _host.ActorExit()
