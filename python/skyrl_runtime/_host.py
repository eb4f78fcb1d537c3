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

import cloudpickle

from . import _methods, _native, _wire


_loop = None
_loop_lock = threading.Lock()


def _event_loop():
    """The process's event loop for `async def` methods, on a thread of its own (started on the
    first coroutine). With max_concurrency > 1 the host's threads wait here for their calls
    while the loop runs the coroutines together."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="skyrl-actor-loop", daemon=True).start()
        return _loop


# What runs here, for get_runtime_context(): the actor's class and resources, and per host
# thread the call it runs now.
actor_class = None
actor_is_async = False  # a method is `async def`: every method runs on the event loop (as Ray)
actor_resources = {}
actor_placement_group = ""  # the group's id, when placed in one
current = threading.local()
_calls = itertools.count(1)  # each call's number in this process (get_task_id)


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
            actor_resources = dict(unpickled[3].get("resources") or {})
            actor_placement_group = unpickled[3].get("placement_group_id") or ""
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
    from .actor import exit_actor
    exit_actor()


_SPECIAL = frozenset({"__ray_ready__", "__ray_call__", "__ray_terminate__"})


def _where():
    """Where this process runs, for remote tracebacks: the actor, its node and address."""
    return (f"actor {os.environ.get('SKYRL_ACTOR_ID', '?')} on node {os.environ.get('SKYRL_NODE_ID', '?')} "
            f"({os.environ.get('SKYRL_NODE_HOST', '?')}, pid {os.getpid()})")


def _dispatch(obj, method, payload):
    current.call = (next(_calls), method)
    try:
        if method.startswith("_") and method not in _SPECIAL:
            raise AttributeError(f"{type(obj).__name__}.{method}: private methods cannot be called remotely")
        _, (args, kwargs) = _wire.decode(payload)
        if method in _SPECIAL:
            return _wire.encode(_special(obj, method, args, kwargs))
        fn = getattr(obj, method)
        if actor_is_async and not inspect.iscoroutinefunction(fn):
            # As Ray: an async actor runs every method on its event loop's thread.
            result = asyncio.run_coroutine_threadsafe(_on_loop(fn, args, kwargs), _event_loop()).result()
        else:
            result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):
            result = asyncio.run_coroutine_threadsafe(result, _event_loop()).result()
        return _wire.encode(result)
    except ActorExit:
        # exit_actor(): the head has been asked to stop this actor for good; the caller learns
        # that its actor is gone, as in Ray.
        from .exceptions import ActorDiedError
        return _wire.encode_error((cloudpickle.dumps(ActorDiedError(
            f"the actor exited: {type(obj).__name__}.{method} called exit_actor()", "FAILED_PRECONDITION")),
            "ActorDiedError", "exit_actor() was called", f"raised in {_where()}"))
    except BaseException as e:  # the caller gets it, as Ray re-raises it in get()
        tb = f"raised in {_where()}\n{traceback.format_exc()}"
        try:
            blob = cloudpickle.dumps(e)
        except Exception:
            blob = None
        return _wire.encode_error((blob, type(e).__name__, str(e), tb))
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
        from . import _forkserver
        _forkserver.serve(int(sys.argv[2]))
    else:
        main()
