"""The edge of the native library: its calls, with skyrl_runtime._native.Error raised as this
package's exception for its status code (exceptions.from_native). The rest of the package
calls these and catches RayError (deciding on .code) only where a code is expected. Futures
of calls in flight are converted where they are read (_refs.ObjectRef)."""

import functools

from . import _native
from .exceptions import from_native


def checked(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _native.Error as e:
            raise from_native(e) from None

    return call


class Client:
    """A native client whose methods raise this package's exceptions (each wrapped once)."""

    _METHODS = ("create_actor", "get_actor", "describe", "kill", "create_placement_group",
                "wait_placement_group", "remove_placement_group", "upload_working_dir", "kv_put", "kv_get",
                "set_blocked")

    def __init__(self, address, token, max_call_bytes=None):
        native = checked(_native.Client.connect)(address, token, max_call_bytes=max_call_bytes)
        for name in self._METHODS:
            setattr(self, name, checked(getattr(native, name)))
        # Unwrapped, on the hot path: it never raises the runtime's errors (a call's outcome,
        # error or not, is in its future, converted where it is read).
        self.call_async = native.call_async


list_nodes = checked(_native.list_nodes)
load_token = checked(_native.load_token)
get_placement_group = checked(_native.get_placement_group)
