"""The process of one Python actor, run by skyrl-worker as `skyrl-actor-host-python --class
python ...` (which calls entry()). The C++ actor host serves it (token, ordering,
deadlines, exit reports); this module only makes the object and calls its methods.

Wire (the driver's side is _python_actors.py): init args are cloudpickle((cls, args, kwargs))
(runtime_env env_vars are in the process's environment from its start: the worker sets them); a call's args are the _wire payload of (args, kwargs); its result is the _wire payload
of the value, or an ERROR payload of (pickled exception or None, type name, message,
"raised in <where>" and the traceback)."""

import asyncio
import inspect
import itertools
import os
import pickle
import sys
import threading
import traceback
from typing import NoReturn

import cloudpickle

from . import _api, _methods, _native, _wire
from .exceptions import ActorDiedError, AsyncioActorExit


_loops: dict = {}  # concurrency group (None: the default one) -> its event loop
_loop_lock = threading.Lock()


def _event_loop(group=None):
    """The event loop of a concurrency group (None: the default group, and every call of an
    actor without groups) for `async def` methods, on a thread of its own (started on the
    group's first coroutine). The host's threads wait here for their calls while the loop runs
    the coroutines together."""
    with _loop_lock:
        loop = _loops.get(group)
        if loop is None:
            loop = _loops[group] = asyncio.new_event_loop()
            name = "skyrl-actor-loop" + (f"-{group}" if group else "")
            threading.Thread(target=loop.run_forever, name=name, daemon=True).start()
        return loop


class _Gate:
    """Lets at most `limit` calls of one concurrency group run at once, admitted in the order
    they arrive (a threaded actor's group)."""

    def __init__(self, limit):
        self._limit = limit
        self._cond = threading.Condition()
        self._tickets = itertools.count()
        self._serving = 0  # the next ticket to admit
        self._running = 0

    def __enter__(self):
        with self._cond:
            ticket = next(self._tickets)
            self._cond.wait_for(lambda: ticket == self._serving and self._running < self._limit)
            self._serving += 1
            self._running += 1
            self._cond.notify_all()

    def __exit__(self, *exc):
        with self._cond:
            self._running -= 1
            self._cond.notify_all()


class _Group:
    """One of an actor's concurrency groups: its limit, and what holds calls to it (a gate on
    threads, or a semaphore on the group's own event loop)."""

    def __init__(self, limit):
        self.limit = limit
        self.gate = _Gate(limit)
        self._semaphore = None  # made on the group's loop, which it belongs to

    async def run(self, fn, args, kwargs):
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.limit)
        async with self._semaphore:
            result = fn(*args, **kwargs)
            if inspect.iscoroutine(result):
                result = await result
            return result


# What runs here, for get_runtime_context(): the actor's class and resources, and per host
# thread the call it runs now.
actor_class = None
actor_is_async = False  # a method is `async def`: every method runs on the event loop (as Ray)
actor_resources = {}
actor_placement_group = ""  # the group's id, when placed in one
# Ray's concurrency groups, when the actor has any: name (None: the default group) -> _Group.
# Without them the C++ host alone holds calls to max_concurrency, in order.
actor_groups = {}
current = threading.local()
_calls = itertools.count(1)  # each call's number in this process (get_task_id)


def is_task_executor():
    """Whether this process runs tasks (a pooled executor of _tasks.py) rather than an actor."""
    return bool(getattr(actor_class, "_skyrl_task_executor", False))


class ActorExit(BaseException):
    """Raised by exit_actor() (and __ray_terminate__) to end the call that asked to exit."""


def _create(init_args):
    global actor_class, actor_resources, actor_placement_group
    try:
        unpickled = pickle.loads(init_args)
        cls, args, kwargs = unpickled[:3]
        actor_class = cls
        global actor_is_async
        actor_is_async = _methods.is_async_class(cls)
        if len(unpickled) > 3:  # (cls, args, kwargs, {"resources": ...}) from _python_actors
            facts = unpickled[3]
            actor_resources = dict(facts.get("resources") or {})
            actor_placement_group = facts.get("placement_group_id") or ""
            groups = facts.get("concurrency_groups") or {}
            if groups:
                actor_groups[None] = _Group(int(facts.get("max_concurrency") or 1))
                for name, limit in groups.items():
                    actor_groups[name] = _Group(limit)
        return cls(*args, **kwargs)
    except BaseException:
        # The constructor's error, with its traceback, is the actor's death reason.
        raise RuntimeError(traceback.format_exc()) from None


async def _on_loop(fn, args, kwargs):
    return fn(*args, **kwargs)


def _special(obj, method, args, kwargs):
    """Ray's methods every actor has: __ray_ready__, __ray_call__(fn, ...), __ray_terminate__."""
    if method == "__ray_ready__":
        return True
    if method == "__ray_call__":
        fn, *rest = args
        return fn(obj, *rest, **kwargs)
    exit_actor()


_SPECIAL = frozenset({"__ray_ready__", "__ray_call__", "__ray_terminate__"})


def _where():
    """Where this process runs, for remote tracebacks: the actor, its node and address."""
    return (f"actor {os.environ.get('SKYRL_ACTOR_ID', '?')} on node {os.environ.get('SKYRL_NODE_ID', '?')} "
            f"({os.environ.get('SKYRL_NODE_HOST', '?')}, pid {os.getpid()})")


def _in_group(name, fn, args, kwargs, method):
    """Runs a call in its concurrency group (None: the default one), as Ray does: an async
    actor's on the group's own event loop, a threaded actor's on this host thread once the
    group admits it."""
    group = actor_groups.get(name)
    if group is None:
        known = ", ".join(repr(g) for g in actor_groups if g is not None) or "none"
        raise ValueError(f"{actor_class.__name__}.{method}: the actor has no concurrency group {name!r} "
                         f"(its groups: {known})")
    if actor_is_async:
        return asyncio.run_coroutine_threadsafe(group.run(fn, args, kwargs), _event_loop(name)).result()
    with group.gate:
        result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):  # a threaded actor's method that returned a coroutine
            result = asyncio.run_coroutine_threadsafe(result, _event_loop(name)).result()
        return result


def _exited_error(why):
    return _wire.encode_error((cloudpickle.dumps(ActorDiedError(f"the actor exited: {why}", "FAILED_PRECONDITION")),
                               "ActorDiedError", "exit_actor() was called", f"raised in {_where()}"))


_exited = None  # why, once a method called exit_actor(): every later call fails, as in Ray


def _dispatch(obj, method, payload):
    global _exited
    current.call = (next(_calls), method, None)
    meta = {}
    try:
        if _exited:
            return _exited_error(_exited)
        if method.startswith("_") and method not in _SPECIAL:
            raise AttributeError(f"{type(obj).__name__}.{method}: private methods cannot be called remotely")
        _, (args, kwargs, *meta) = _wire.decode(payload)
        meta = meta[0] if meta else {}
        if meta.get("name"):
            current.call = (current.call[0], method, meta["name"])
        if method in _SPECIAL:
            return _wire.encode(_special(obj, method, args, kwargs))
        fn = getattr(obj, method)
        group = meta.get("concurrency_group")
        if group or actor_groups:
            result = _in_group(group, fn, args, kwargs, method)
        elif actor_is_async and not inspect.iscoroutinefunction(fn):
            # As Ray: an async actor runs every method on its event loop's thread.
            result = asyncio.run_coroutine_threadsafe(_on_loop(fn, args, kwargs), _event_loop()).result()
        else:
            result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):
            result = asyncio.run_coroutine_threadsafe(result, _event_loop()).result()
        if _exited:  # exit_actor() was called, and what it raised was caught
            return _exited_error(_exited)
        return _wire.encode(result)
    except (ActorExit, AsyncioActorExit):
        # exit_actor(): the head has been asked to stop this actor for good; the caller learns
        # that its actor is gone, as in Ray, and so does every call after it.
        _exited = _exited or f"{type(obj).__name__}.{method} called exit_actor()"
        return _exited_error(_exited)
    except BaseException as e:  # the caller gets it, as Ray re-raises it in get()
        tb = f"raised in {_where()}\n{traceback.format_exc()}"
        try:
            blob = cloudpickle.dumps(e)
        except Exception:
            blob = None
        # The caller's retry_exceptions: True (any Exception, as Ray's), or its classes.
        retry_on = meta.get("retry_on")
        retry = isinstance(e, Exception) if retry_on is True else bool(retry_on) and isinstance(e, tuple(retry_on))
        return _wire.encode_error((blob, type(e).__name__, str(e), tb), retry=retry)
    finally:
        current.call = None


def main(exit=True):
    """Runs the actor host on sys.argv; its exit code (with exit: exits with it)."""
    # runtime_env working_dir: the worker started this process in it; its modules import first.
    working_dir = os.environ.get("SKYRL_WORKING_DIR")
    if working_dir:
        sys.path.insert(0, working_dir)
    code = _native.run_actor_host(sys.argv, _create, _dispatch)
    if exit:
        sys.exit(code)
    return code


def entry():
    """The process's start (skyrl-actor-host-python): an actor, or with `--fork-server FD` the
    worker's fork server (_forkserver.py), which forks this node's Python actors."""
    if sys.argv[1:2] == ["--fork-server"]:
        from . import _forkserver  # only in a fork server's process: it imports numpy and this module
        _forkserver.serve(int(sys.argv[2]))
    else:
        main()


def exit_actor() -> NoReturn:
    """Ends the calling actor for good, as Ray's: the head stops it without a restart (its death
    reason says it was killed by the user), the call that asked gets ActorDiedError, calls
    queued behind it fail, and the process's atexit functions run. In an async actor's coroutine
    it raises AsyncioActorExit (an Exception, as Ray's, so that the event loop goes on). TypeError
    outside an actor's method (in a driver or a task)."""
    global _exited
    actor_id = os.environ.get("SKYRL_ACTOR_ID")
    in_coroutine = _running_loop() is not None
    on_host_thread = getattr(current, "call", None) is not None
    if (not actor_id or actor_class is None or is_task_executor()
            or not (on_host_thread or in_coroutine)):
        raise TypeError("exit_actor API is called on a non-actor worker: exit_actor() ends the actor whose "
                        "method calls it")
    _api._current().client.kill(actor_id)
    # Even when the method catches what is raised here, its call and every later one fail.
    _exited = f"{actor_class.__name__}: exit_actor() was called"
    raise AsyncioActorExit("exit_actor() was called", "CANCELLED") if in_coroutine else ActorExit()


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
