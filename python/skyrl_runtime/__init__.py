"""skyrl_runtime: SkyRL Runtime from Python, at Ray's names (`import skyrl_runtime as ray`).

Today: init() / shutdown() (joining a cluster, or starting a local one), Python actors
(@remote classes, each in its own process on a worker), actors of the C++ classes the actor
hosts serve (cross_language.cpp_actor_class), get / wait / kill / get_actor, nodes() and the
cluster's resources. Everything goes through the C++ client (skyrl_runtime._native). Tasks,
put and runtime environments are not here yet: docs/python.md says what is and is not.
"""

from . import cross_language, exceptions
from ._actors import ActorHandle, get_actor, kill
from ._api import available_resources, cluster_resources, init, is_initialized, nodes, shutdown
from ._python_actors import remote
from ._refs import ObjectRef, get, wait


def put(value):
    """Not supported yet: pass values as call arguments."""
    raise NotImplementedError("put: not supported yet; pass values as call arguments")


__all__ = ["ActorHandle", "ObjectRef", "available_resources", "cluster_resources", "cross_language", "exceptions",
           "get", "get_actor", "init", "is_initialized", "kill", "nodes", "put", "remote", "shutdown", "wait"]
