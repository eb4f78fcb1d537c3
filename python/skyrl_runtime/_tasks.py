"""Remote functions (tasks), run by pooled Python worker processes, not in the driver.

As Ray leases workers, a task goes to an executor actor of its resource shape (num_cpus,
num_gpus, resources, memory), created on a worker the first time the shape is needed and
kept for the next tasks: one process start per executor, not per task. A shape's pool grows
while every executor has a task in flight, up to as many as the cluster could hold at once
(at most 64); after that tasks queue on the executors in turn."""

import asyncio
import collections
import inspect
import threading
import time
from typing import Any

import cloudpickle

from . import _api, _host, _methods, _options
from ._actors import kill
from ._placement import PlacementGroupSchedulingStrategy
from ._python_actors import PyActorClass, PyActorMethod
from ._refs import lend_cpu, reclaim_cpu, refs_of, resolve_argument
from .exceptions import RayError

_MAX_POOL = 64
_NOT_SHAPE = ("max_retries", "num_returns", "retry_exceptions", "name")
_DEFAULT_RETRIES = 3  # Ray's default for tasks


_IDLE_LEND_S = 0.05  # an executor idle this long lends its CPU (a busy one never asks)


class _Executor:
    """One pooled worker process: runs the pickled function it is given. Idle for
    _IDLE_LEND_S, it lends its CPU back (as Ray's idle workers return their lease), and takes it
    back with its next task."""

    _skyrl_task_executor = True  # what runs here is tasks, not an actor's methods (_host.py)

    def __init__(self):
        self._idle = threading.Condition()
        self._running = 0
        self._idle_since = None
        threading.Thread(target=self._lend_when_idle, name="skyrl-idle-lender", daemon=True).start()

    def run(self, fn_blob, args, kwargs, meta=None):
        with self._idle:
            self._running += 1
            self._idle_since = None
        reclaim_cpu()  # lent while idle
        _host.current.task = meta or {}
        try:
            result = cloudpickle.loads(fn_blob)(*args, **kwargs)
            if inspect.iscoroutine(result):  # an `async def` task: run on this process's loop
                result = asyncio.run_coroutine_threadsafe(result, _host._event_loop()).result()
            return result
        finally:
            _host.current.task = None
            reclaim_cpu()  # lent while it waited, and not free when it was done waiting
            with self._idle:
                self._running -= 1
                if self._running == 0:
                    self._idle_since = time.monotonic()
                    self._idle.notify()

    def _lend_when_idle(self):
        while True:
            with self._idle:
                self._idle.wait_for(lambda: self._idle_since is not None)
                left = self._idle_since + _IDLE_LEND_S - time.monotonic()
                if left > 0:
                    self._idle.wait(left)
                    continue
                self._idle_since = None
            lend_cpu()


class _Pool:
    def __init__(self, shape):
        shape = dict(shape)
        # Ray's max_calls: an executor runs at most this many tasks, then exits (0: no end).
        self._max_calls = shape.pop("max_calls", 0) or 0
        self._shape = shape
        # Created waiting until ALIVE: a pool grows only while the cluster has room now.
        self._class = PyActorClass(_Executor, {**shape, "max_restarts": -1, "_wait": True})
        # A pool's first executor when there is no room now: PENDING until there is (a task
        # this process runs lends its CPU while it waits, as Ray's blocked tasks do).
        self._waiting_class = PyActorClass(_Executor, {**shape, "max_restarts": -1})
        # [handle, the refs submitted to it and maybe in flight, tasks sent]: see _idle.
        self._slots = []
        self._lock = threading.Lock()
        self._turn = 0
        self._max = None

    def _limit(self):
        # Asked once per pool (a head round trip), not once per task.
        if self._max is None:
            self._max = self._compute_limit()
        return self._max

    def _compute_limit(self):
        resources = _api.cluster_resources()
        need = {"CPU": float(self._shape.get("num_cpus", 1)), "GPU": float(self._shape.get("num_gpus", 0) or 0),
                "memory": float(self._shape.get("memory", 0) or 0),
                **{k: float(v) for k, v in (self._shape.get("resources") or {}).items()}}
        fits = [resources.get(k, 0) / v for k, v in need.items() if v > 0]
        return max(1, min(_MAX_POOL, int(min(fits)) if fits else _MAX_POOL))

    def _grow(self):
        """A new executor, or None when the cluster has no room and this pool has some. Room
        taken by idle executors of other shapes is given back first (kill), as Ray returns
        idle leased workers."""
        for attempt in (0, 1):
            try:
                slot = [self._class.remote(), collections.deque(), 0]
                self._slots.append(slot)
                return slot
            except RayError as e:
                # Its placement group not placed yet (PENDING): wait for it, as Ray queues
                # the task until the group is placed.
                group_pending = e.code == "FAILED_PRECONDITION" and self._in_group()
                if e.code != "RESOURCE_EXHAUSTED" and not group_pending:
                    raise
                if attempt == 0 and not group_pending and _release_idle(self):
                    continue
                if self._slots:
                    return None
                # None at all: one that waits for room or for its group (one that can never
                # fit still fails).
                slot = [self._waiting_class.remote(), collections.deque(), 0]
                self._slots.append(slot)
                return slot

    def _in_group(self):
        strategy = self._shape.get("scheduling_strategy")
        return isinstance(strategy, PlacementGroupSchedulingStrategy) or \
            self._shape.get("placement_group") not in (None, "default")

    def release_idle(self):
        """Kills this pool's executors with nothing in flight; returns how many. Skips a pool
        busy submitting (another thread holds its lock): two pools growing at once must not
        wait for each other."""
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            idle = [s for s in self._slots if _idle(s)]
            for s in idle:
                self._slots.remove(s)
        finally:
            self._lock.release()
        for s in idle:
            try:
                kill(s[0])
            except RayError:
                pass
        return len(idle)

    def submit(self, fn_blob, args, kwargs, meta=None, retries=0, retry_exceptions=False):
        """The task's ref. The client makes its call again (on the same executor, restarted)
        when the executor dies under it, `retries` times (-1: without end), and for the
        exceptions `retry_exceptions` names, as Ray's max_retries and retry_exceptions."""
        with self._lock:
            slot = next((s for s in self._slots if _idle(s)), None)
            if slot is None and len(self._slots) < self._limit():
                slot = self._grow()
            if slot is None:
                slot = self._slots[self._turn % len(self._slots)]
                self._turn += 1
            run = slot[0].run if retries == 0 else PyActorMethod(
                slot[0], "run", {"max_task_retries": retries, "retry_exceptions": retry_exceptions})
            ref = run.remote(fn_blob, args, kwargs, meta)
            slot[1].append(ref)
            slot[2] += 1
            if self._max_calls and slot[2] >= self._max_calls:
                self._slots.remove(slot)  # takes no more: ends once its tasks are done
                threading.Thread(target=_retire, args=(slot,), name="skyrl-executor-retire", daemon=True).start()
        return ref


def _idle(slot):
    """Whether the executor has no task in flight. Its refs finish about in order (it runs its
    calls in order), but not exactly: a task the client makes again (retries) runs after later
    ones. So every ref is kept until it is done, and those done leave from the front: amortized
    constant time, and never idle while one is in flight."""
    refs = slot[1]
    while refs and refs[0]._future.done():
        refs.popleft()
    return not refs


def _retire(slot):
    """Ends an executor that ran its max_calls tasks, once the last is done (its resources, a
    GPU's memory say, go back with its process, as Ray's max_calls intends)."""
    # Watched, not waited on: the result is its caller's to read (a second reader of one
    # future would wait out its caller's timeout).
    while not _idle(slot):
        time.sleep(0.02)
    try:
        kill(slot[0])
    except RayError:
        pass


class RemoteFunction:
    """What @remote makes of a function: f.remote(*args, **kwargs) runs it in a pooled worker
    process and returns an ObjectRef of its return value (its exception re-raises from get)."""

    def __init__(self, fn, options):
        _options.check(options, "task")
        self._fn = fn
        self._options = dict(options)
        self._blob = None

    def options(self, **options):
        return RemoteFunction(self._fn, {**self._options, **options})

    def _meta(self):
        """What get_runtime_context() says of a run of this task."""
        fn = self._fn
        return {"name": self._options.get("name") or fn.__name__,
                "function": f"{getattr(fn, '__module__', None) or '__main__'}.{getattr(fn, '__qualname__', fn.__name__)}",
                "resources": {"CPU": float(self._options.get("num_cpus", 1)),
                              **({"GPU": float(self._options["num_gpus"])} if self._options.get("num_gpus") else {}),
                              **({"memory": float(self._options["memory"])} if self._options.get("memory") else {}),
                              **{k: float(v) for k, v in (self._options.get("resources") or {}).items()}}}

    def remote(self, *args, **kwargs):
        _methods.check_arguments(self._fn, args, kwargs, f"{self._fn.__name__}.remote")
        state = _api._current()
        if self._blob is None:
            try:
                self._blob = cloudpickle.dumps(self._fn)
            except Exception as e:
                raise TypeError(f"{self._fn.__name__}.remote: the function does not pickle: {e}") from None
        args = tuple(resolve_argument(a) for a in args)
        kwargs = {k: resolve_argument(v) for k, v in kwargs.items()}
        shape = {"num_cpus": 1, **{k: v for k, v in self._options.items() if k not in _NOT_SHAPE}}
        if shape.get("max_calls") is None:  # Ray's default: GPU tasks end their process, CPU ones do not
            shape["max_calls"] = 1 if shape.get("num_gpus") else 0
        retries = int(self._options.get("max_retries", _DEFAULT_RETRIES))
        if retries < -1:
            raise ValueError(f"{self._fn.__name__}.options: max_retries must be -1 (without end) or more, got {retries}")
        pools = _pools(state)
        key = repr(sorted(shape.items()))
        with _LOCK:
            pool = pools.get(key) or pools.setdefault(key, _Pool(shape))
        meta = self._meta()
        ref = pool.submit(self._blob, args, kwargs, meta, retries, self._options.get("retry_exceptions", False))
        return refs_of(ref._future, ref._decode, f"{self._fn.__name__}()", self._options.get("num_returns", 1))

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self._fn.__name__} is a remote function: call it with {self._fn.__name__}.remote(...)")


_LOCK = threading.Lock()



def _pools(state):
    return state.task_pools


def _release_idle(asking):
    """Gives back the idle executors of every pool but `asking`; whether any went."""
    with _LOCK:
        others = [p for p in _pools(_api._current()).values() if p is not asking]
    return sum(p.release_idle() for p in others) > 0


def remote(*args: Any, **options: Any) -> Any:
    """@remote or @remote(num_cpus=..., ...) on a class (a Python actor class) or a function (a
    task, run by pooled worker processes: _tasks.py)."""
    def make(obj):
        if isinstance(obj, type):
            _options.check(options, "actor")
            return PyActorClass(obj, options)
        if callable(obj):
            return RemoteFunction(obj, options)
        raise TypeError(f"remote: wants a class or a function, got {type(obj).__name__}")
    if len(args) == 1 and not options and callable(args[0]):
        return make(args[0])
    if args or not options:  # as Ray, which refuses @remote() with nothing in the parentheses
        raise TypeError("remote: use @remote, or @remote(option=value, ...) with at least one option")
    return make
