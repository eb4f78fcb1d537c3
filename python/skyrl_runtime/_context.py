"""Where the calling code runs: get_gpu_ids() and get_runtime_context(), as in Ray."""

import os

from . import _api


def get_gpu_ids():
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


def get_runtime_context():
    return RuntimeContext()
