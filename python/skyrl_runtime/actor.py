"""ray.actor's names: exit_actor(), ActorClassInheritanceException."""

import asyncio
import os

from . import _api, _host
from .exceptions import AsyncioActorExit


class ActorClassInheritanceException(TypeError):
    """A class that derives from a @remote class, which Ray does not support either: derive
    from the plain class and decorate the result."""


def exit_actor():
    """Ends the calling actor for good, as Ray's: the head stops it without a restart (its death
    reason says it was killed by the user), the call that asked gets ActorDiedError, calls
    queued behind it fail, and the process's atexit functions run. In an async actor's coroutine
    it raises AsyncioActorExit (an Exception, as Ray's, so that the event loop goes on). TypeError
    outside an actor's method (in a driver or a task)."""
    actor_id = os.environ.get("SKYRL_ACTOR_ID")
    in_coroutine = _running_loop() is not None
    on_host_thread = getattr(_host.current, "call", None) is not None
    if (not actor_id or _host.actor_class is None or _host.is_task_executor()
            or not (on_host_thread or in_coroutine)):
        raise TypeError("exit_actor API is called on a non-actor worker: exit_actor() ends the actor whose "
                        "method calls it")
    _api._current().client.kill(actor_id)
    # Even when the method catches what is raised here, its call and every later one fail.
    _host._exited = f"{_host.actor_class.__name__}: exit_actor() was called"
    raise AsyncioActorExit("exit_actor() was called", "CANCELLED") if in_coroutine else _host.ActorExit()


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
