"""The process of one Python actor: `python3 -m skyrl_runtime._host --class python ...`, run by
skyrl-worker through skyrl-actor-host-python. The C++ actor host serves it (token, ordering,
deadlines, exit reports); this module only makes the object and calls its methods.

Wire (the driver's side is _python_actors.py): init args are base64 of cloudpickle((cls, args,
kwargs, env_vars)); a call's args are cloudpickle((args, kwargs)); its result is b"\\x00" + the pickled
value, or b"\\x01" + the pickled (exception or None, type name, message, traceback)."""

import base64
import os
import sys
import traceback

import cloudpickle

from . import _native


def _create(init_args):
    try:
        cls, args, kwargs, env_vars = cloudpickle.loads(base64.b64decode(init_args))
        # runtime_env env_vars: set before the class is unpickled, so module-level code sees them.
        os.environ.update(env_vars)
        return cls(*args, **kwargs)
    except BaseException:
        # The constructor's error, with its traceback, is the actor's death reason.
        raise RuntimeError(traceback.format_exc()) from None


def _dispatch(obj, method, payload):
    try:
        if method.startswith("_"):
            raise AttributeError(f"{type(obj).__name__}.{method}: private methods cannot be called remotely")
        args, kwargs = cloudpickle.loads(payload)
        return b"\x00" + cloudpickle.dumps(getattr(obj, method)(*args, **kwargs))
    except BaseException as e:  # the caller gets it, as Ray re-raises it in get()
        tb = traceback.format_exc()
        try:
            blob = cloudpickle.dumps(e)
        except Exception:
            blob = None
        return b"\x01" + cloudpickle.dumps((blob, type(e).__name__, str(e), tb))


def main():
    sys.exit(_native.run_actor_host(sys.argv, _create, _dispatch))


if __name__ == "__main__":
    main()
