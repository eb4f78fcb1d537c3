"""ObjectRef, get and wait: results of calls in flight."""

import asyncio
import concurrent.futures
import contextlib
import os
import pickle
import threading
import time
from typing import Any, Callable, Optional, Sequence, Union

from . import _api, _host, _native, _wire
from ._futures import Future
from ._methods import Split
from .exceptions import GetTimeoutError, RayError, from_native


class ObjectRef:
    """The result of one call, on its way. Resolved by get(), by `await ref` in async code, or
    through future() / as_future(), as Ray's."""

    __slots__ = ("_future", "_decode", "_what", "_hex")
    _hex: Optional[str]

    def __init__(self, future: Future, decode: Callable[[Any], Any], what: str) -> None:
        self._future = future
        self._decode = decode
        self._what = what
        self._hex = None

    def hex(self):
        """This ref's id: 56 hex digits (28 bytes, as Ray's), random, fixed for the ref."""
        if self._hex is None:
            self._hex = os.urandom(28).hex()
        return self._hex

    def future(self):
        """A concurrent.futures.Future of the value (or the exception get() would raise); a
        thread waits for it."""
        out = concurrent.futures.Future()

        def wait():
            try:
                out.set_result(self._result(None))
            except BaseException as e:  # noqa: BLE001 - the future carries it
                out.set_exception(e)

        threading.Thread(target=wait, daemon=True, name="skyrl-ref-future").start()
        return out

    def as_future(self):
        """An asyncio future of the value, on the running event loop."""
        return asyncio.wrap_future(self.future())

    def __await__(self):
        return self.as_future().__await__()

    def __repr__(self):
        return f"ObjectRef({self._what})"

    def __reduce__(self):
        # A ref inside another call's arguments (in a list, say) travels by value: resolved
        # here, it arrives as a ref already resolved, so get() works on the other side.
        if isinstance(self._future, _Put):
            return _resolved, (self._future.as_argument(), self._what)
        return _resolved, (self._result(None), self._what)

    def _result(self, timeout):
        try:
            # view(): the native future's result without a copy; other futures alias result.
            return self._decode(self._future.view(timeout))
        except _native.Error as e:
            if e.code == "DEADLINE_EXCEEDED" and timeout is not None:
                raise GetTimeoutError(f"get({self._what}): no result within {timeout} s", e.code) from None
            raise from_native(e) from None


class _Ready:
    """A future already resolved (put)."""

    def __init__(self, value):
        self._value = value

    def done(self):
        return True

    def result(self, timeout=None):
        return self._value

    view = result


class _Put(_Ready):
    """A put value: kept here for get(), and serialized once, the first time a call takes
    it; every call after that sends the same bytes (out of band: copied into the call in C++)."""

    def __init__(self, value):
        super().__init__(value)
        self._payload = None
        self._lock = threading.Lock()

    def as_argument(self):
        with self._lock:
            if self._payload is None:
                parts = _wire.encode(self._value)
                self._payload = parts if isinstance(parts, bytes) else b"".join(parts)
        return _PutArgument(self._payload)


class _PutArgument:
    """Stands for a put value in a call's arguments: unpickles to the value on the other side."""

    __slots__ = ("payload",)

    def __init__(self, payload):
        self.payload = payload

    def __reduce_ex__(self, protocol):
        return _wire.decode_value, (pickle.PickleBuffer(self.payload),)


def _same(value):
    return value


def _resolved(value, what):
    return ObjectRef(_Ready(value), _same, what)


def refs_of(future: Future, decode: Callable[[Any], Any], what: str,
            num_returns: int) -> Union["ObjectRef", None, list["ObjectRef"]]:
    """The refs of one call's result as num_returns asks: one ref (1), None (0: the result is
    not kept), or a list of `num_returns` refs, one per value of the tuple the call returns."""
    if num_returns == 1:
        return ObjectRef(future, decode, what)
    if num_returns == 0:
        return None
    split = Split(future, decode, num_returns, what)
    return [ObjectRef(split, _Item(i), f"{what}[{i}]")
            for i in range(num_returns)]


class _Item:
    """Takes value i of a split result."""

    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __call__(self, values):
        return values[self.i]


def put(value: Any) -> "ObjectRef":
    """A ref to `value`, for passing to calls and get(). It stays in this process: a call
    that takes it as an argument receives the value, serialized once however many calls
    take it."""
    return ObjectRef(_Put(value), _same, "put")


def resolve_argument(a):
    """A top-level call argument as sent: a put ref stands for its serialized value, another
    ref is resolved first (as in Ray), anything else is itself."""
    if not isinstance(a, ObjectRef):
        return a
    if isinstance(a._future, _Put):
        return a._future.as_argument()
    return get(a)


# Ray's blocked and idle workers give their CPU back: a task executor lends its CPU (the head
# gives it to others) while its task waits on results not here yet, and while it sits idle
# (_tasks.py); it takes it back when it has work again and the CPU is free (until then the
# node runs one task more than its CPUs, as Ray's does). One executor runs one task at a time.
_cpu_lock = threading.Lock()
_cpu_lent = False


def lend_cpu():
    """Lends this executor's CPU, once; best effort (a head that cannot be asked: nothing)."""
    global _cpu_lent
    with _cpu_lock:
        if _cpu_lent:
            return
        try:
            _api._current().client.set_blocked(os.environ.get("SKYRL_ACTOR_ID", ""), True)
            _cpu_lent = True
        except RayError:
            pass


def reclaim_cpu():
    """Takes back what lend_cpu lent, if it is free now (else it stays lent: asked again next time)."""
    global _cpu_lent
    with _cpu_lock:
        if not _cpu_lent:
            return
        try:
            _cpu_lent = not _api._current().client.set_blocked(os.environ.get("SKYRL_ACTOR_ID", ""), False)
        except RayError:
            pass


@contextlib.contextmanager
def _lending_cpu(refs, timeout):
    """Around a task's wait for results not here yet: its CPU lent meanwhile."""
    if (timeout == 0 or getattr(_host.current, "task", None) is None
            or all(getattr(r._future, "done", lambda: True)() for r in refs)):
        yield
        return
    lend_cpu()
    try:
        yield
    finally:
        reclaim_cpu()


def get(refs: Union["ObjectRef", Sequence["ObjectRef"]], *, timeout: Optional[float] = None) -> Any:
    """The value of one ref, or a list of values for a list of refs, as ray.get(): waits at most
    `timeout` seconds over all (GetTimeoutError), raises the first call's error."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if isinstance(refs, ObjectRef):
        with _lending_cpu([refs], timeout):
            return refs._result(timeout)
    if not isinstance(refs, (list, tuple)):
        raise TypeError(f"get: wants an ObjectRef or a list of them, got {type(refs).__name__}")
    for r in refs:
        if not isinstance(r, ObjectRef):
            raise TypeError(f"get: wants ObjectRefs, got {type(r).__name__} in the list")
    out = []
    with _lending_cpu(refs, timeout):
        for r in refs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            out.append(r._result(left))
    return out


def wait(refs: Sequence["ObjectRef"], *, num_returns: int = 1, timeout: Optional[float] = None,
         fetch_local: bool = True) -> tuple[list["ObjectRef"], list["ObjectRef"]]:
    """(ready, not_ready) as ray.wait(): the first `num_returns` refs whose results are here, in
    the order given, waiting at most `timeout` seconds for them. As Ray: TypeError unless
    `refs` is a list of ObjectRefs, ValueError when one is there twice. `fetch_local` is Ray's
    (a result is here once it is done: there is no object store to fetch from yet)."""
    if isinstance(refs, ObjectRef) or not isinstance(refs, (list, tuple)):
        raise TypeError(f"wait: wants a list of ObjectRefs, got {type(refs).__name__}")
    for r in refs:
        if not isinstance(r, ObjectRef):
            raise TypeError(f"wait: wants ObjectRefs, got {type(r).__name__} in the list")
    if len({id(r) for r in refs}) != len(refs):
        raise ValueError("wait: the list holds the same ObjectRef more than once")
    if not refs:
        return [], []  # as Ray
    if num_returns < 1 or num_returns > len(refs):
        raise ValueError(f"wait: num_returns must be in 1-{len(refs)}, got {num_returns}")
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lending_cpu([] if sum(r._future.done() for r in refs) >= num_returns else refs, timeout):
        while True:
            ready = [r for r in refs if r._future.done()]
            if len(ready) >= num_returns or (deadline is not None and time.monotonic() >= deadline):
                ready = ready[:num_returns]
                return ready, [r for r in refs if r not in ready]
            time.sleep(0.001)
