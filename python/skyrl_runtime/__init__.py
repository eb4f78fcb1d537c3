"""skyrl_runtime: SkyRL Runtime from Python, at Ray's names (`import skyrl_runtime as ray`).

Today: init() / shutdown() (joining a cluster, or starting a local one), Python actors
(@remote classes, each in its own process on a worker), tasks (@remote functions, on pooled
worker processes), actors of the C++ classes the actor hosts serve
(cross_language.cpp_actor_class), get / wait / put / kill / get_actor, get_gpu_ids,
get_runtime_context, nodes() and the cluster's resources, method (num_returns), util.ActorPool
and util.queue, and report_step (a job's
training steps, for the dashboard, timelines and metrics). Everything goes through the C++
client (skyrl_runtime._native). docs/python.md says what is and is not here.
"""

from . import actor, cross_language, exceptions, util
from ._missing import module_getattr
from ._actors import ActorHandle, kill
from ._methods import method
from ._api import available_resources, cluster_resources, init, is_initialized, nodes, report_step, shutdown
from ._python_actors import get_actor
from ._tasks import remote
from ._context import get_gpu_ids, get_runtime_context
from ._refs import ObjectRef, get, put, wait

ObjectID = ObjectRef  # Ray's older name, which Ray keeps


__all__ = ["ActorHandle", "actor", "ObjectID", "ObjectRef", "available_resources", "cluster_resources", "cross_language", "exceptions",
           "get", "get_actor", "get_gpu_ids", "get_runtime_context", "init", "is_initialized", "kill", "method", "nodes",
           "put", "remote", "report_step", "shutdown", "util", "wait"]

__getattr__ = module_getattr("")
