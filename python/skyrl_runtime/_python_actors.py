"""@remote classes: Python actors, each in its own process (skyrl-actor-host-python on a worker,
served by the C++ actor host; _host.py is that side). Arguments, results and the class itself
travel as cloudpickle (_wire.py: arrays and tensors out of band), so classes defined in the
driver's __main__ work, as in Ray."""

import functools
from typing import Optional

import cloudpickle

from . import _api, _methods, _wire
from ._actors import ActorHandle, _check_options, _create, actor_resources
from .actor import ActorClassInheritanceException
from ._refs import ObjectRef, resolve_argument
from .exceptions import RayError, UnserializableException, as_task_error

# The name this package had for it first.
RemoteError = UnserializableException


def _decode(payload):
    tag, value = _wire.decode(payload)
    if tag != _wire.ERROR:
        return value
    blob, type_name, message, remote_tb = value
    exc = None
    if blob is not None:
        try:
            exc = cloudpickle.loads(blob)
        except Exception:
            exc = None
    # remote_tb begins "raised in actor <id> on node <id> (<address>, pid <pid>)".
    if isinstance(exc, RayError):  # the runtime's own (an actor that exited, say): as itself
        exc.add_note(remote_tb)
        raise exc
    if isinstance(exc, Exception):
        raise as_task_error(exc, remote_tb)
    if isinstance(exc, BaseException):  # KeyboardInterrupt, SystemExit: as themselves
        exc.add_note(remote_tb)
        raise exc
    raise UnserializableException(f"{type_name}: {message}\n{remote_tb}", "INTERNAL", traceback_str=remote_tb)


class PyActorMethod:
    __slots__ = ("_handle", "_name", "_options")

    def __init__(self, handle, name, options=None):
        self._handle = handle
        self._name = name
        self._options = options  # None: the class's @method options

    def options(self, **options):
        """This method with options of one call (num_returns, max_task_retries) over the ones
        @method gave it, as Ray's handle.method.options(...).remote()."""
        base = self._handle._methods.get(self._name, {}) if self._options is None else self._options
        what = f"{self._handle._class_name}.{self._name}.options"
        return PyActorMethod(self._handle, self._name, {**base, **_methods.check(options, what)})

    def remote(self, *args, **kwargs):
        """Calls the method with these arguments; an ObjectRef of its return value, at once
        (num_returns=N: a list of N refs, one per value of the tuple it returns; 0: None).
        ObjectRefs among the top-level arguments are resolved first, as in Ray."""
        signatures = self._handle.__dict__.get("_signatures")
        if signatures:  # known where the actor was created (not pickled with the handle)
            _methods.check_method_arguments(signatures, self._name, args, kwargs,
                                            f"{self._handle._class_name}.{self._name}.remote")
        # The common case, no refs among the arguments, costs one scan.
        if any(type(a) is ObjectRef for a in args):
            args = tuple(resolve_argument(a) for a in args)
        if kwargs and any(type(v) is ObjectRef for v in kwargs.values()):
            kwargs = {k: resolve_argument(v) for k, v in kwargs.items()}
        options = self._handle._methods.get(self._name, {}) if self._options is None else self._options
        # A call in a concurrency group, or with a name of its own, says so (_host.py reads it).
        meta = {k: options[k] for k in ("concurrency_group", "name") if options.get(k) is not None}
        retry_exceptions = options.get("retry_exceptions", False)
        retries = options.get("max_task_retries")
        if retry_exceptions and (self._handle._retries if retries is None else retries) != 0:
            # The host tags what to retry for RETRY (_wire.py).
            meta["retry_on"] = True if retry_exceptions is True else tuple(retry_exceptions)
        try:
            payload = _wire.encode((args, kwargs, meta) if meta else (args, kwargs))
        except Exception as e:
            raise TypeError(f"{self._handle._class_name}.{self._name}.remote: an argument does not pickle: {e}") from None
        return self._handle._call(self._name, payload, _decode, retries=retries,
                                  num_returns=options.get("num_returns", 1),
                                  retry_exceptions=retry_exceptions)


class PyActorHandle(ActorHandle):
    """A live Python actor: handle.method.remote(...) with any arguments."""

    _method_type = PyActorMethod


class PyActorClass:
    """What @remote makes of a class: .remote(*args, **kwargs) starts one actor of it;
    .options(...) as in Ray."""

    def __init__(self, cls, options, methods=None):
        self._cls = cls
        self._options = dict(options)
        self._methods = _methods.of_class(cls) if methods is None else methods

    def options(self, **options):
        _check_options(options)
        return PyActorClass(self._cls, {**self._options, **options}, self._methods)

    def remote(self, *args, **kwargs):
        _methods.check_arguments(self._cls.__init__, (None, *args), kwargs, f"{self._cls.__name__}.remote")
        options = self._options
        if options.get("max_concurrency") is None and _methods.is_async_class(self._cls):
            # As Ray: an async actor runs up to 1,000 calls at once on its event loop by default.
            options = {**options, "max_concurrency": 1000}
        groups = dict(options.get("concurrency_groups") or {})
        default_concurrency = int(options.get("max_concurrency") or 1)
        if groups:
            # The host runs as many calls at once as all groups together; _host.py holds each
            # group (the default one too) to its own number.
            options = {**options, "max_concurrency": default_concurrency + sum(groups.values())}
        try:
            held, _ = actor_resources(options)
            strategy = options.get("scheduling_strategy")
            group = getattr(getattr(strategy, "placement_group", None), "id", "") or getattr(
                options.get("placement_group"), "id", "")
            init = cloudpickle.dumps((self._cls, args, kwargs, {
                "resources": held, "placement_group_id": group, "concurrency_groups": groups,
                "max_concurrency": default_concurrency}))
        except Exception as e:
            raise TypeError(f"{self._cls.__name__}.remote: the class or an argument does not pickle: {e}") from None
        handle = _create("python", init, options, "python", PyActorHandle, self._cls.__name__,
                         wait=options.get("_wait", False), methods=self._methods)
        handle._signatures = _methods.signatures_of(self._cls)
        return handle

    def __call__(self, *args, **kwargs):
        name = self._cls.__name__
        raise TypeError(f"Actors cannot be instantiated directly. Instead of '{name}()', use '{name}.remote()'.")

    def __getattr__(self, name):
        # The class's own attributes (constants, static and class methods), as Ray's actor
        # class derives from the class it wraps.
        cls = self.__dict__.get("_cls")
        if cls is None or name.startswith("__"):
            raise AttributeError(name)
        value = getattr(cls, name)
        if callable(value) and not isinstance(value, type):
            # A new callable, not the function: were `module.Cls.method` the function itself,
            # cloudpickle would pickle the class's methods by reference to a module the actor's
            # process may not have.
            @functools.wraps(value)
            def call(*args, **kwargs):
                return value(*args, **kwargs)
            return call
        return value

    def __mro_entries__(self, bases):
        raise ActorClassInheritanceException(
            f"Inheriting from actor classes is not currently supported: {self._cls.__name__} is a remote class; "
            "derive from the plain class and decorate the result")


def get_actor(name: str, namespace: Optional[str] = None) -> ActorHandle:
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
    if info["state"] == "DEAD":  # kept by the head for `skyrl list`, but gone: as Ray, not found
        raise ValueError(f"get_actor: the actor named {name!r} in namespace {namespace or state.namespace!r} is dead: "
                         f"{info['death_reason']}")
    if info["class_name"] == "python":
        return PyActorHandle(actor_id, "python", methods=_methods.load(state.client, actor_id),
                             max_pending_calls=info["max_pending_calls"] or -1)
    return ActorHandle(actor_id, info["class_name"], max_pending_calls=info["max_pending_calls"] or -1)
