"""Where the calling code runs: get_gpu_ids() and get_runtime_context(), as in Ray."""

import os

from . import _api, _host, _methods
from ._python_actors import PyActorHandle


def get_gpu_ids() -> list[int]:
    """The GPU ids this actor or task was given ($SKYRL_GPU_IDS, set by the worker; also what it
    sets CUDA_VISIBLE_DEVICES to, unless RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES leaves that
    to the actor); [] in a driver or without GPUs."""
    if not os.environ.get("SKYRL_ACTOR_ID"):
        return []
    assigned = os.environ.get("SKYRL_GPU_IDS")
    if assigned is None:  # a worker from before SKYRL_GPU_IDS
        assigned = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [int(g) for g in assigned.split(",") if g.strip().isdigit()]


class RuntimeContext:
    """Ray's runtime context: what runs here (driver, actor or task), where, for which job."""

    def get_actor_id(self):
        """This actor's id; None in a driver."""
        return os.environ.get("SKYRL_ACTOR_ID") or None

    def get_job_id(self):
        """The job this code runs for ($SKYRL_JOB_ID: set for a job's driver, and by the worker
        for the job's non-detached actors and tasks); None outside a job."""
        return os.environ.get("SKYRL_JOB_ID") or None

    def get_node_id(self):
        """The node this actor runs on ($SKYRL_NODE_ID, set by the worker); None in a driver."""
        if self.get_actor_id() is None:
            return None
        return os.environ.get("SKYRL_NODE_ID") or _api._current().client.describe(self.get_actor_id())["node_id"]

    def get_namespace(self):
        return _api._current().namespace

    def _call(self):
        return getattr(_host.current, "call", None), getattr(_host.current, "task", None)

    def get_task_id(self):
        """The running call's id (hex) in an actor's method or a task; None in a driver (Ray
        answers the same there)."""
        call, _ = self._call()
        if not call:
            return None
        # The actor's id digits, this process's id and the call's number: unique in the cluster.
        return f"{self.get_actor_id().removeprefix('actor-')}{os.getpid():08x}{call[0]:016x}"

    def get_task_name(self):
        """A task's name (its `name` option, else the function's name), or for an actor's method
        the call's `name` option, else "Class.method"; None in a driver."""
        call, task = self._call()
        if task:
            return task.get("name")
        if call:
            if len(call) > 2 and call[2]:  # the call's own name: handle.method.options(name=...)
                return call[2]
            return f"{_host.actor_class.__name__}.{call[1]}" if _host.actor_class else call[1]
        return None

    def get_task_function_name(self):
        """The running function's full name ("module.function", or "module.Class.method")."""
        call, task = self._call()
        if task:
            return task.get("function")
        if call:
            cls = _host.actor_class
            return f"{cls.__module__}.{cls.__qualname__}.{call[1]}" if cls else call[1]
        return None

    def get_assigned_resources(self):
        """The resources this actor holds (or the running task was given), {} in a driver; GPU
        ids are get_gpu_ids()."""
        call, task = self._call()
        if task:
            return dict(task.get("resources") or {})
        if self.get_actor_id() is None:
            return {}
        return {k: v for k, v in _host.actor_resources.items() if v > 0}

    @property
    def current_actor(self):
        """A handle of the actor this code runs in (RuntimeError elsewhere), as Ray's."""
        actor_id = self.get_actor_id()
        if actor_id is None or self._call()[1]:
            raise RuntimeError("current_actor: this code does not run in an actor")
        cls = _host.actor_class
        return PyActorHandle(actor_id, cls.__name__ if cls else "python",
                             methods=_methods.of_class(cls) if cls else None)

    def get(self):
        """A dict of this context, as Ray's get(): job_id, node_id, namespace, and actor_id /
        task_id where they apply."""
        out = {"job_id": self.get_job_id(), "node_id": self.get_node_id(), "namespace": self.get_namespace()}
        if self.get_actor_id() is not None and not self._call()[1]:
            out["actor_id"] = self.get_actor_id()
        if self.get_task_id() is not None:
            out["task_id"] = self.get_task_id()
        return out


def get_runtime_context() -> "RuntimeContext":
    return RuntimeContext()
