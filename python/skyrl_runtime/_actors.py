"""Actor handles and actor classes: what Ray's ActorClass/ActorHandle do, for the classes the
actor hosts serve (C++ classes registered with SKYRL_REGISTER_ACTOR)."""

import os

from . import _api
from ._refs import ObjectRef
from .exceptions import RayError

_OPTIONS = {"num_cpus", "num_gpus", "resources", "memory", "name", "namespace", "max_restarts", "runtime_env", "scheduling_strategy",
            "max_concurrency", "lifetime", "get_if_exists"}


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
        future = _api._current().client.call_async(self._handle._actor_id, self._name, payload, timeout)
        return ObjectRef(future, bytes, f"{self._handle._class_name}.{self._name}")


class ActorHandle:
    """A live actor. Methods are attributes: handle.echo.remote(b"hi"). Pickles (to its id), so
    it can be passed to other actors and tasks. This class calls C++ actors (bytes in and out);
    Python actors' handles (_python_actors.PyActorHandle) differ only in their methods."""

    _method_type = ActorMethod

    def __init__(self, actor_id, class_name):
        self._actor_id = actor_id
        self._class_name = class_name

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._method_type(self, name)

    def __repr__(self):
        return f"Actor({self._class_name}, {self._actor_id})"

    def __reduce__(self):
        return (type(self), (self._actor_id, self._class_name))

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
        actor_id = _create(self._class_name, _as_bytes(init_args, f"{self._class_name}.remote"), self._options,
                           self._host)
        return actor_id if isinstance(actor_id, ActorHandle) else ActorHandle(actor_id, self._class_name)


def _check_options(options):
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise TypeError(f"options: unknown option {unknown[0]} (known: {', '.join(sorted(_OPTIONS))})")
    if "runtime_env" in options:
        check_runtime_env(options["runtime_env"], "options: runtime_env")


_RUNTIME_ENV_KEYS = ("env_vars", "working_dir")


def check_runtime_env(env, what):
    """Validates a runtime_env: env_vars (str to str) and working_dir (a local folder)."""
    if env is None:
        return
    if not isinstance(env, dict):
        raise TypeError(f"{what}: a dict, got {type(env).__name__}")
    unknown = sorted(set(env) - set(_RUNTIME_ENV_KEYS))
    if unknown:
        raise NotImplementedError(f"{what}: {unknown[0]} is not supported ({' and '.join(_RUNTIME_ENV_KEYS)} are; "
                                  "install packages into the worker's interpreter, skyrl-worker --python)")
    env_vars = env.get("env_vars") or {}
    if not isinstance(env_vars, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        raise TypeError(f"{what}: env_vars must map str to str")
    working_dir = env.get("working_dir")
    if working_dir is not None:
        if not isinstance(working_dir, (str, os.PathLike)):
            raise TypeError(f"{what}: working_dir must be a path, got {type(working_dir).__name__}")
        if not os.path.isdir(working_dir):
            raise ValueError(f"{what}: working_dir {os.fspath(working_dir)!r} is not a folder")


def merged_runtime_env(*envs):
    """Runtime envs merged as Ray does: env_vars key by key, a later working_dir replacing."""
    out = {"env_vars": {}}
    for env in envs:
        if env:
            out["env_vars"].update(env.get("env_vars") or {})
            if env.get("working_dir") is not None:
                out["working_dir"] = os.path.abspath(os.fspath(env["working_dir"]))
    return out


def working_dir_digest(state, path):
    """The digest of folder `path` on the head, uploaded the first time this driver uses it
    (packed by the C++ client; the head keeps one copy per content)."""
    cache = state.__dict__.setdefault("working_dirs", {})
    digest = cache.get(path)
    if digest is None:
        digest = cache[path] = state.client.upload_working_dir(path)
    return digest


def _create(class_name, init_args, o, host, handle_type=None):
    """Creates an actor of `class_name` on `host` with Ray-style options `o`; returns its id (or,
    for get_if_exists, the live one's handle when `handle_type` makes one)."""
    resources = dict(o.get("resources") or {})
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        if o.get(key) is not None:
            resources[name] = float(o[key])
    resources.setdefault("CPU", 1.0)
    if o.get("lifetime") not in (None, "detached", "non_detached"):
        raise ValueError(f"options: lifetime must be 'detached' or 'non_detached', got {o['lifetime']!r}")
    state = _api._current()
    namespace = o.get("namespace") or state.namespace
    group_id, bundle = "", -1
    strategy = o.get("scheduling_strategy")
    if strategy is not None:
        from ._placement import PlacementGroupSchedulingStrategy
        if not isinstance(strategy, PlacementGroupSchedulingStrategy):
            raise NotImplementedError(f"options: scheduling_strategy {type(strategy).__name__} is not supported yet "
                                      "(PlacementGroupSchedulingStrategy is)")
        group_id, bundle = strategy.placement_group.id, int(strategy.placement_group_bundle_index)
    env = merged_runtime_env(state.runtime_env, o.get("runtime_env"))
    working_dir = working_dir_digest(state, env["working_dir"]) if env.get("working_dir") else ""
    if o.get("get_if_exists") and o.get("name"):
        try:
            return state.client.get_actor(o["name"], namespace)
        except RayError as e:
            if e.code != "NOT_FOUND":
                raise
    return state.client.create_actor(
        class_name, init_args, resources, name=o.get("name") or "", namespace=namespace,
        max_restarts=int(o.get("max_restarts", 0)), max_concurrency=int(o.get("max_concurrency", 1)),
        placement_group_id=group_id, bundle_index=bundle, detached=o.get("lifetime") == "detached", host=host,
        working_dir=working_dir)


def get_actor(name, namespace=None):
    """The live actor named `name` in `namespace` (default: the one init() set); ValueError when
    there is none, as in Ray."""
    state = _api._current()
    try:
        actor_id = state.client.get_actor(name, namespace or state.namespace)
    except RayError as e:
        if e.code == "NOT_FOUND":
            raise ValueError(f"get_actor: no actor named {name!r} in namespace {namespace or state.namespace!r}") from None
        raise
    info = state.client.describe(actor_id)
    if info["class_name"] == "python":
        from ._python_actors import PyActorHandle
        return PyActorHandle(actor_id, "python")
    return ActorHandle(actor_id, info["class_name"])


def kill(actor, *, no_restart=True):
    """Kills the actor's process; with no_restart (the default, and the only choice today) it
    stays dead."""
    if not no_restart:
        raise NotImplementedError("kill(no_restart=False): restarting a killed actor is not supported")
    _api._current().client.kill(actor._actor_id)
