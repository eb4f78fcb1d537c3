"""Actor handles and actor classes: what Ray's ActorClass/ActorHandle do, for the classes the
actor hosts serve (C++ classes registered with SKYRL_REGISTER_ACTOR)."""

import os
import threading

from . import _api, _wire
from . import _methods, _options
from ._placement import PlacementGroupSchedulingStrategy, placement_of
from ._refs import refs_of
from .exceptions import PendingCallsLimitExceeded, RayError

# Methods every Python actor has, as in Ray (_host.py serves them).
_RAY_METHODS = frozenset({"__ray_ready__", "__ray_call__", "__ray_terminate__"})


def _as_bytes(value, what):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"{what}: a C++ actor takes bytes or str, got {type(value).__name__}")


class ActorMethod:
    __slots__ = ("_handle", "_name")

    def __init__(self, handle, name):
        self._handle = handle
        self._name = name

    def remote(self, args=b"", *, timeout=None):
        """Calls the method; returns an ObjectRef of the result bytes at once."""
        payload = _as_bytes(args, f"{self._name}.remote")
        return self._handle._call(self._name, payload, bytes, timeout)


class _Failed:
    """A future that holds an error from the start (calls on an actor that could not be made)."""

    def __init__(self, error):
        self._error = error

    def done(self):
        return True

    def view(self, timeout=None):
        raise self._error


class ActorHandle:
    """An actor. Methods are attributes: handle.echo.remote(b"hi"). Pickles (to its id), so
    it can be passed to other actors and tasks. This class calls C++ actors (bytes in and out);
    Python actors' handles (_python_actors.PyActorHandle) differ only in their methods.

    `retries` is max_task_retries (the client makes a call again when the actor died under it);
    `error`, set when the actor could never be made, fails every call's get() with it (Ray
    reports an infeasible actor at get, not at .remote()). Calls made while the actor starts
    wait in the client, in order, and .remote() returns at once, as in Ray.
    `max_pending_calls` (-1: no limit; the actor's, from its spec) bounds the calls of this
    handle (and of each pickled copy, on its own) whose results are not in yet: one more raises
    PendingCallsLimitExceeded at .remote(), as in Ray."""

    _method_type: type = ActorMethod  # PyActorHandle's: PyActorMethod

    def __init__(self, actor_id, class_name, retries=0, error=None, methods=None, max_pending_calls=-1):
        self._actor_id = actor_id
        self._class_name = class_name
        self._retries = retries
        self._error = error
        self._methods = methods or {}  # method name: its @method options (_methods.py)
        self._max_pending = max_pending_calls
        self._pending = []  # the futures of calls not known to be done (with a limit only)
        self._pending_lock = threading.Lock()

    def _call(self, method, payload, decode, timeout=None, retries=None, num_returns=1, retry_exceptions=False):
        """The call's refs (refs_of: one, None or a list); `retries` overrides the handle's
        max_task_retries for this call."""
        what = f"{self._class_name}.{method}"
        if self._error is not None:
            return refs_of(_Failed(self._error), decode, what, num_returns)
        if self._max_pending <= 0:
            return refs_of(self._send(method, payload, timeout, retries, retry_exceptions), decode, what, num_returns)
        with self._pending_lock:
            self._pending = [f for f in self._pending if not f.done()]
            if len(self._pending) >= self._max_pending:
                raise PendingCallsLimitExceeded(
                    f"{what}: {len(self._pending)} calls of this handle are pending (max_pending_calls="
                    f"{self._max_pending}): wait for some of their results first", "RESOURCE_EXHAUSTED")
            future = self._send(method, payload, timeout, retries, retry_exceptions)
            self._pending.append(future)
        return refs_of(future, decode, what, num_returns)

    def _send(self, method, payload, timeout, retries, retry_exceptions):
        """Sends the call (the client holds it while the actor starts); its future."""
        retries = self._retries if retries is None else retries
        return _api._current().client.call_async(self._actor_id, method, payload, timeout, retries,
                                                 _wire.retry_tags(retry_exceptions))

    def __getattr__(self, name):
        if name.startswith("_") and name not in _RAY_METHODS:
            raise AttributeError(name)
        method = self._method_type(self, name)
        self.__dict__[name] = method  # kept: the next handle.name is a plain attribute
        return method

    def __repr__(self):
        return f"Actor({self._class_name}, {self._actor_id})"

    # Handles of one actor are equal, wherever they came from (pickled, get_actor), as Ray's.
    def __eq__(self, other):
        if not isinstance(other, ActorHandle):
            return NotImplemented
        return bool(self._actor_id) and self._actor_id == other._actor_id

    def __hash__(self):
        return hash(self._actor_id) if self._actor_id else id(self)

    def __reduce__(self):
        return (type(self), (self._actor_id, self._class_name, self._retries, self._error, self._methods,
                             self._max_pending))

    def _describe(self):
        return _api._current().client.describe(self._actor_id)


class CppActorClass:
    """A C++ actor class by its registered name; .options(...).remote(init_args) creates one."""

    def __init__(self, class_name, host="", options=None):
        self._class_name = class_name
        self._host = host
        self._options = dict(options or {})

    def options(self, **options):
        _check_options(options)
        return CppActorClass(self._class_name, self._host, {**self._options, **options})

    def remote(self, init_args=b""):
        """Starts one actor; returns its handle at once (the start goes on in the background)."""
        if self._options.get("concurrency_groups"):
            raise NotImplementedError(f"{self._class_name}.remote: concurrency_groups are for Python actors; a C++ "
                                      "actor's calls share its max_concurrency threads")
        return _create(self._class_name, _as_bytes(init_args, f"{self._class_name}.remote"), self._options,
                       self._host, ActorHandle, self._class_name)


def _check_options(options):
    _options.check(options, "actor")


def merged_runtime_env(*envs):
    """Runtime envs merged as Ray does: env_vars key by key, a later working_dir replacing."""
    out = {"env_vars": {}}
    for env in envs:
        if env:
            out["env_vars"].update(env.get("env_vars") or {})
            if env.get("working_dir") is not None:
                out["working_dir"] = os.path.abspath(os.fspath(env["working_dir"]))
    return out


def actor_resources(o):
    """(held, placement) resources of an actor with options `o`, by Ray's rule: an actor that
    names no resource but memory holds no CPU and is placed where 1 CPU is free (so a 1-CPU
    node runs any number of them); one that names any (num_cpus, num_gpus, resources) holds
    what it names, with 1 CPU unless num_cpus says otherwise, and is placed by that."""
    resources = dict(o.get("resources") or {})
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        if o.get(key) is not None:
            resources[name] = float(o[key])
    if set(resources) <= {"memory"}:
        resources["CPU"] = 0.0
        return resources, {**resources, "CPU": 1.0}
    resources.setdefault("CPU", 1.0)
    return resources, {}


def working_dir_digest(state, path):
    """The digest of folder `path` on the head, uploaded the first time this driver uses it
    (packed by the C++ client; the head keeps one copy per content)."""
    cache = state.working_dirs
    digest = cache.get(path)
    if digest is None:
        digest = cache[path] = state.client.upload_working_dir(path)
    return digest


def _create(class_name, init_args, o, host, handle_type, handle_name, wait=False, methods=None):
    """Creates an actor of `class_name` on `host` with Ray-style options `o` and returns a
    `handle_type` for it named `handle_name` (for get_if_exists, the live one's). Returns once
    the head has recorded it, its start going on in the background (as Ray does), unless
    `wait`: then once it is ALIVE, and RESOURCE_EXHAUSTED at once when there is no room now.
    An actor the cluster can never hold makes a handle whose calls fail with the scheduler's
    explanation. `methods` ({name: @method options}) go with the handle, and onto the head for
    a named actor (get_actor reads them)."""
    resources, placement = actor_resources(o)
    if o.get("lifetime") not in (None, "detached", "non_detached"):
        raise ValueError(f"options: lifetime must be 'detached' or 'non_detached', got {o['lifetime']!r}")
    state = _api._current()
    namespace = o.get("namespace") or state.namespace
    strategy = o.get("scheduling_strategy")
    if o.get("placement_group") not in (None, "default"):
        # Ray's older options, still accepted by Ray: the same as the strategy they name.
        strategy = PlacementGroupSchedulingStrategy(o["placement_group"], o.get("placement_group_bundle_index", -1))
    group_id, bundle, selector = placement_of(strategy, placement or resources)
    selector = {**(o.get("label_selector") or {}), **selector}
    pending = o.get("max_pending_calls", -1)
    retries = int(o.get("max_task_retries", 0))
    if retries < -1:
        raise ValueError(f"options: max_task_retries must be -1 (without end) or more, got {retries}")
    env = merged_runtime_env(state.runtime_env, o.get("runtime_env"))
    working_dir = working_dir_digest(state, env["working_dir"]) if env.get("working_dir") else ""
    if o.get("get_if_exists") and o.get("name"):
        try:
            return handle_type(state.client.get_actor(o["name"], namespace), handle_name, retries, methods=methods,
                               max_pending_calls=pending)
        except RayError as e:
            if e.code != "NOT_FOUND":
                raise
    detached = o.get("lifetime") == "detached"
    try:
        # v1::ActorSpec's fields by name (protos/skyrl/actor_spec.proto), bound once.
        actor_id = state.client.create_actor({
            "class_name": class_name, "init_args": init_args, "resources": resources,
            "name": o.get("name") or "", "namespace": namespace, "max_restarts": int(o.get("max_restarts", 0)),
            "max_concurrency": int(o.get("max_concurrency", 1)), "placement_group_id": group_id,
            "bundle_index": bundle if bundle >= 0 else None, "detached": detached, "host": host,
            "working_dir": working_dir, "label_selector": selector, "env": env["env_vars"],
            "placement_resources": placement,
            "fallback_label_selectors": [{"labels": f["label_selector"]} for f in o.get("fallback_strategy") or []],
            "max_pending_calls": max(0, pending),
        }, return_pending=not wait)
    except RayError as e:
        if o.get("get_if_exists") and o.get("name") and e.code == "ALREADY_EXISTS":
            # Another driver made it between the look-up and the create: that one is ours too.
            return handle_type(state.client.get_actor(o["name"], namespace), handle_name, retries, methods=methods,
                               max_pending_calls=pending)
        if wait or e.code != "RESOURCE_EXHAUSTED":
            raise
        if o.get("get_if_exists") and o.get("name"):
            raise
        return handle_type("", handle_name, retries, error=e, methods=methods, max_pending_calls=pending)
    if not detached:
        state.own("actors", actor_id)
    if methods and o.get("name"):
        _methods.store(state.client, actor_id, methods)
    return handle_type(actor_id, handle_name, retries, methods=methods, max_pending_calls=pending)


def kill(actor: ActorHandle, *, no_restart: bool = True) -> None:
    """Kills the actor's process. With no_restart (the default) it stays dead; with
    no_restart=False it restarts as after a crash, if its max_restarts allow, as in Ray."""
    if type(no_restart) is not bool:
        raise TypeError(f"kill: no_restart must be a bool, got {no_restart!r}")
    state = _api._current()
    state.client.kill(actor._actor_id, restart=not no_restart)
    if no_restart:
        state.disown("actors", actor._actor_id)
