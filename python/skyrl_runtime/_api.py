"""The driver-side state (one connection per process) and Ray's top-level functions over it."""

import atexit
import os
import threading

from . import _edge
from ._cluster import LocalCluster
from .exceptions import RayError

_lock = threading.Lock()
_state = None  # _State while initialized


class _State:
    def __init__(self, address, token, namespace, cluster, runtime_env=None):
        self.runtime_env = runtime_env  # the default of every actor and task this driver starts
        self.address = address
        self.token = token
        self.namespace = namespace
        self.cluster = cluster  # the LocalCluster init() started, or None
        self.client = _edge.Client(address, token)


def _reachable(address, token):
    try:
        _edge.list_nodes(address, token, 2.0)
        return True
    except RayError as e:
        if e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            return False
        raise


def init(address=None, *, namespace=None, num_cpus=None, ignore_reinit_error=False, runtime_env=None):
    """Connects this process to a cluster, as ray.init() does.

    The address is the argument, else $SKYRL_ADDRESS, else a head on 127.0.0.1:7420 (what
    `skyrl start --head` runs) when one answers there; the token is found as the CLI finds it
    ($SKYRL_TOKEN, else ~/.skyrl/token). With no cluster anywhere (and no address given), starts
    a local head and one worker (`num_cpus` CPUs, default all) that shutdown() or the end of
    the process stops.
    """
    global _state
    from ._actors import check_runtime_env
    check_runtime_env(runtime_env, "init: runtime_env")
    with _lock:
        if _state is not None:
            if ignore_reinit_error:
                return _state
            raise RuntimeError("init: already initialized (call shutdown() first, or pass ignore_reinit_error=True)")
        explicit = address or os.environ.get("SKYRL_ADDRESS")
        if address == "local":
            explicit = None
        cluster = None
        if explicit:
            token = _edge.load_token()
            if not _reachable(explicit, token):
                raise RayError(f"init: no head answers at {explicit}", "UNAVAILABLE")
            target = explicit
        else:
            target, token = None, None
            if address != "local":
                try:
                    token = _edge.load_token()
                    if _reachable("127.0.0.1:7420", token):
                        target = "127.0.0.1:7420"
                except RayError:
                    pass
            if target is None:
                cluster = LocalCluster(num_cpus=num_cpus)
                target, token = cluster.address, cluster.token
        # A job's driver (submitted with --working-dir) and an actor started in a working_dir
        # pass that folder on to what they create, as Ray does.
        inherited = os.environ.get("SKYRL_WORKING_DIR")
        if inherited and not (runtime_env or {}).get("working_dir"):
            runtime_env = {**(runtime_env or {}), "working_dir": inherited}
        try:
            _state = _State(target, token, namespace or "default", cluster, runtime_env)
            if inherited and os.environ.get("SKYRL_WORKING_DIR_DIGEST"):
                _state.working_dirs = {os.path.abspath(inherited): os.environ["SKYRL_WORKING_DIR_DIGEST"]}
        except RayError:
            if cluster:
                cluster.stop()
            raise
        return _state


def is_initialized():
    return _state is not None


def shutdown():
    """Disconnects; stops the local cluster init() started, if any. Calls in flight fail."""
    global _state
    with _lock:
        state, _state = _state, None
    if state is None:
        return
    state.client = None  # the C++ client fails what is still in flight, then is gone
    if state.cluster:
        state.cluster.stop()


atexit.register(shutdown)


def _current():
    if _state is None:
        # In an actor's process the worker says where the cluster is: connect on first use,
        # as Ray's workers do.
        if os.environ.get("SKYRL_ACTOR_ID") and os.environ.get("SKYRL_ADDRESS"):
            init(ignore_reinit_error=True)
        else:
            raise RuntimeError("skyrl_runtime: call init() first")
    return _state


def nodes():
    """Every node the head knows, as dicts (NodeID, Alive, Resources, ... as Ray names them, and
    this runtime's own fields: gpu_ids, labels, resources_available)."""
    s = _current()
    listed = _edge.list_nodes(s.address, s.token)
    out = []
    for n in listed:
        out.append({"NodeID": n["node_id"], "Alive": n["alive"], "NodeManagerHostname": n["hostname"],
                    "NodeManagerAddress": n["address"].rsplit(":", 1)[0], "Resources": n["resources"], **n})
    return out


def _summed(field):
    total = {}
    for n in nodes():
        if n["alive"]:
            for k, v in n[field].items():
                total[k] = total.get(k, 0) + v
    return total


def cluster_resources():
    """Resources of the alive nodes, summed."""
    return _summed("resources")


def available_resources():
    """Resources not held by actors or placement groups, summed over the alive nodes."""
    return _summed("resources_available")
