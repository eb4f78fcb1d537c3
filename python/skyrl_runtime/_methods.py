"""Per-method options, as ray.method: `num_returns` (one call's result as several refs),
`max_task_retries` (a method's own retry count), `retry_exceptions` and `concurrency_group`
(which of the actor's concurrency groups runs it). A class's options travel with its handles
(pickled with them); a named actor's are also kept on the head, for get_actor."""

import inspect
import json
import threading
import time
import weakref
from typing import Any, Callable

from . import _native
from ._futures import Future
from .exceptions import RayError

_OPTIONS = ("num_returns", "max_task_retries", "retry_exceptions", "concurrency_group", "name")
_NOT_SUPPORTED = {
    "enable_task_events": "every call is recorded by its actor host (skyrl timeline)",
    "tensor_transport": "tensors travel out of band with the call; skyrl_runtime.weight_sync moves weights",
}
_ATTRIBUTE = "__skyrl_method_options__"
# A named actor's method options, on the head: get_actor reads them.
KV_PREFIX = "skyrl/py_methods/"


def check(options, what):
    """`options` validated: a dict of the known options (TypeError naming an unknown one,
    NotImplementedError for one Ray has and this runtime does not, ValueError for a bad value)."""
    out = {}
    for key, value in options.items():
        if key in _NOT_SUPPORTED:
            raise NotImplementedError(f"{what}: {key} is not supported: {_NOT_SUPPORTED[key]}")
        if key not in _OPTIONS:
            raise TypeError(f"{what}: unknown option {key} (known: {', '.join(_OPTIONS)})")
        if key == "num_returns":
            if value in ("streaming", "dynamic"):
                raise NotImplementedError(f"{what}: num_returns={value!r} (generators) is not supported: return a "
                                          "tuple, or call again for each item")
            if type(value) is not int or value < 0:
                raise ValueError(f"{what}: num_returns must be an int >= 0, got {value!r}")
        if key == "max_task_retries" and (type(value) is not int or value < -1):
            raise ValueError(f"{what}: max_task_retries must be an int >= -1 (-1: without end), got {value!r}")
        if key == "retry_exceptions":
            check_retry_exceptions(value, what)
        if key == "name" and type(value) is not str:
            raise TypeError(f"{what}: name must be a str, got {value!r}")
        if key == "concurrency_group" and (type(value) is not str or not value):
            raise TypeError(f"{what}: concurrency_group must be a group's name (a non-empty str), got {value!r}")
        out[key] = value
    return out


def check_retry_exceptions(value, what):
    """Ray's retry_exceptions: a bool, or a list of exception classes to retry for."""
    if type(value) is bool:
        return
    if (isinstance(value, (list, tuple)) and value
            and all(isinstance(c, type) and issubclass(c, BaseException) for c in value)):
        return
    raise TypeError(f"{what}: retry_exceptions must be a bool or a list of exception classes, got {value!r}")


def is_async_class(cls):
    """Whether a class has an `async def` method (Ray's async actor)."""
    return any(inspect.iscoroutinefunction(v) or inspect.isasyncgenfunction(v)
               for klass in cls.__mro__ for v in vars(klass).values())


_SIGNATURES: weakref.WeakKeyDictionary[type, dict] = weakref.WeakKeyDictionary()  # class -> signatures_of(class), made once


def signatures_of(cls):
    """{method name: (its signature, whether it takes the instance first, the argument counts a
    plain positional call may have)} of a class's public methods, for checking a call's
    arguments at .remote() (methods without a signature left out: checked when they run).
    Made once per class."""
    found = _SIGNATURES.get(cls)
    if found is None:
        found = _SIGNATURES[cls] = _signatures(cls)
    return found


def _signatures(cls):
    out = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name, None)
        fn = getattr(cls, name, None)
        if not callable(fn) or isinstance(raw, type):
            continue
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        takes_self = not isinstance(raw, (staticmethod, classmethod))
        params = list(signature.parameters.values())[1 if takes_self else 0:]
        # The hot path, positional arguments only to plain parameters: a count to check.
        plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        counts = (sum(p.default is p.empty for p in params), len(params)) if plain else None
        out[name] = (signature, takes_self, counts)
    return out


def check_method_arguments(signatures, name, args, kwargs, what):
    """A TypeError at .remote(), as Ray raises, when method `name` cannot take these arguments."""
    found = signatures.get(name)
    if found is None:
        return
    signature, takes_self, counts = found
    if counts is not None and not kwargs and counts[0] <= len(args) <= counts[1]:
        return
    try:
        signature.bind(None, *args, **kwargs) if takes_self else signature.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{what}: {e}") from None


def check_arguments(fn, args, kwargs, what):
    """A TypeError at .remote(), as Ray raises, when `fn` cannot take these arguments."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or callable without one: checked when it runs
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{what}: {e}") from None


def method(*args: Any, **options: Any) -> Any:
    """@method(num_returns=N, max_task_retries=K, retry_exceptions=..., concurrency_group=G) on
    a method of a @remote class, as ray.method: with num_returns=N its calls return N refs (the
    method returns N values), 0 returns None; its calls run in the actor's group G."""
    if args:
        raise TypeError("method: use @method(num_returns=..., concurrency_group=..., ...) with keywords")
    checked = check(options, "method")

    def decorate(fn):
        if not callable(fn):
            raise TypeError(f"method: decorates a method, got {type(fn).__name__}")
        setattr(fn, _ATTRIBUTE, checked)
        return fn

    return decorate


def of_class(cls):
    """{method name: options} of the methods of `cls` that @method decorated; a subclass's
    undecorated override drops its base's options."""
    found = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            options = getattr(fn, _ATTRIBUTE, None)
            if isinstance(options, dict):
                found[name] = dict(options)
            else:
                found.pop(name, None)
    return found


def store(client, actor_id, methods):
    # A list of exception classes does not go to the head (JSON): get_actor's handles retry for
    # none of them; True and False do.
    plain = {name: {k: v for k, v in o.items() if k != "retry_exceptions" or type(v) is bool}
             for name, o in methods.items()}
    client.kv_put(KV_PREFIX + actor_id, json.dumps(plain, sort_keys=True))


def load(client, actor_id):
    """A named actor's method options from the head ({} for an actor that has none)."""
    try:
        raw = client.kv_get(KV_PREFIX + actor_id)
    except RayError as e:
        if e.code == "NOT_FOUND":
            return {}
        raise
    what = f"get_actor: the method options stored under {KV_PREFIX + actor_id}"
    try:
        methods = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{what} are not JSON: {e}") from None
    if not isinstance(methods, dict) or not all(isinstance(o, dict) for o in methods.values()):
        raise ValueError(f"{what} are not a dict of dicts")
    return {str(name): check(options, f"{what}: {name}") for name, options in methods.items()}


class exclusive:
    """`with exclusive(lock, timeout) as left:` holds `lock`, taken within `timeout` seconds
    (None: however long), `left` being what remains of it; DEADLINE_EXCEEDED when it could
    not be taken in time."""

    def __init__(self, lock, timeout):
        self._lock = lock
        self._timeout = timeout

    def __enter__(self):
        start = time.monotonic()
        if not self._lock.acquire(timeout=-1 if self._timeout is None else self._timeout):
            raise _native.Error("DEADLINE_EXCEEDED", f"no result within {self._timeout} s")
        return None if self._timeout is None else max(0.0, self._timeout - (time.monotonic() - start))

    def __exit__(self, *exc):
        self._lock.release()


class Split:
    """One call's result shared by the refs of its `n` values (num_returns=n): awaited and
    decoded once; each ref takes its value (decode=lambda values: values[i])."""

    def __init__(self, future: Future, decode: Callable[[Any], Any], n: int, what: str) -> None:
        self._future = future
        self._decode = decode
        self._n = n
        self._what = what
        self._lock = threading.Lock()
        self._outcome = None  # (True, values) or (False, exception), once decoded

    def done(self):
        return self._future.done()

    def view(self, timeout=None):
        if self._outcome is None:
            # One reader at a time waits on the call (its refs may be read from several threads),
            # within the caller's timeout.
            with exclusive(self._lock, timeout) as left:
                if self._outcome is None:
                    payload = self._future.view(left)  # a timeout or a failed call raises here, undecided
                    self._outcome = self._unpack(payload)
        ok, value = self._outcome
        if not ok:
            raise value
        return value

    def _unpack(self, payload):
        try:
            values = self._decode(payload)
        except BaseException as e:  # noqa: BLE001 - the method's exception, for every ref's get
            return False, e
        if not isinstance(values, (tuple, list)) or len(values) != self._n:
            shape = f"{len(values)} values" if isinstance(values, (tuple, list)) else f"a {type(values).__name__}"
            return False, ValueError(f"{self._what} returned {shape}, but num_returns={self._n}: return a tuple "
                                     f"of {self._n}")
        return True, tuple(values)


def check_concurrency_groups(groups, what):
    """Ray's concurrency_groups: {name: the most calls of that group at once (an int >= 1)}."""
    if groups is None:
        return
    if not isinstance(groups, dict):
        raise TypeError(f"{what}: concurrency_groups must be a dict of name to max concurrency, got {groups!r}")
    for name, limit in groups.items():
        if type(name) is not str or not name:
            raise TypeError(f"{what}: concurrency_groups: a group's name must be a non-empty str, got {name!r}")
        if name.startswith("_ray"):
            raise ValueError(f"{what}: concurrency_groups: {name!r}: names starting with _ray are reserved")
        if type(limit) is not int or limit < 1:
            raise ValueError(f"{what}: concurrency_groups[{name!r}] must be an int >= 1, got {limit!r}")
