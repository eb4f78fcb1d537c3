"""The process of one Python actor: `python3 -m skyrl_runtime._host --class python ...`, run by
skyrl-worker through skyrl-actor-host-python. The C++ actor host serves it (token, ordering,
deadlines, exit reports); this module only makes the object and calls its methods.

Wire (the driver's side is _python_actors.py): init args are cloudpickle((cls, args, kwargs))
(runtime_env env_vars are in the process's environment from its start: the worker sets them); a call's args are the _wire payload of (args, kwargs); its result is the _wire payload
of the value, or an ERROR payload of (pickled exception or None, type name, message,
"raised in <where>" and the traceback)."""

import asyncio
import inspect
import os
import pickle
import sys
import threading
import traceback

import cloudpickle

from . import _native, _wire


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


def _create(init_args):
    try:
        cls, args, kwargs = pickle.loads(init_args)
        return cls(*args, **kwargs)
    except BaseException:
        # The constructor's error, with its traceback, is the actor's death reason.
        raise RuntimeError(traceback.format_exc()) from None


def _where():
    """Where this process runs, for remote tracebacks: the actor, its node and address."""
    return (f"actor {os.environ.get('SKYRL_ACTOR_ID', '?')} on node {os.environ.get('SKYRL_NODE_ID', '?')} "
            f"({os.environ.get('SKYRL_NODE_HOST', '?')}, pid {os.getpid()})")


def _dispatch(obj, method, payload):
    try:
        if method.startswith("_"):
            raise AttributeError(f"{type(obj).__name__}.{method}: private methods cannot be called remotely")
        _, (args, kwargs) = _wire.decode(payload)
        result = getattr(obj, method)(*args, **kwargs)
        if inspect.iscoroutine(result):
            result = asyncio.run_coroutine_threadsafe(result, _event_loop()).result()
        return _wire.encode(result)
    except BaseException as e:  # the caller gets it, as Ray re-raises it in get()
        tb = f"raised in {_where()}\n{traceback.format_exc()}"
        try:
            blob = cloudpickle.dumps(e)
        except Exception:
            blob = None
        return _wire.encode_error((blob, type(e).__name__, str(e), tb))


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


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fork-server"]:
        # The worker's fork server (_forkserver.py): forks this node's Python actors.
        from skyrl_runtime import _forkserver
        _forkserver.serve(int(sys.argv[2]))
    else:
        main()
