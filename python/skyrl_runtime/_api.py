"""The driver-side state (one connection per process) and Ray's top-level functions over it."""

import atexit
import json
import math
import os
import threading
import warnings
from typing import Any, Optional

from . import _edge, _native
from ._options import check_runtime_env
from ._cluster import LocalCluster, check_system_config
from .exceptions import RayError

_lock = threading.Lock()
_state = None  # _State while initialized


class _State:
    def __init__(self, address: str, token: str, namespace: str, cluster: Any,
                 runtime_env: Optional[dict[str, Any]] = None, max_call_bytes: Optional[int] = None) -> None:
        self.runtime_env = runtime_env  # the default of every actor and task this driver starts
        self.address = address
        self.token = token
        self.namespace = namespace
        self.cluster = cluster  # the LocalCluster init() started, or None
        self.client = _edge.Client(address, token, max_call_bytes)
        # What this driver made that dies with it, as Ray's owned actors and groups do: its
        # non-detached actors and placement groups, killed and removed by shutdown() (and so
        # at exit). Only for a plain driver on a cluster it did not start: a job's head does
        # this for the job (and so for its actors' own), and a local cluster stops whole.
        self.owned: Optional[dict[str, set[str]]] = None
        # Folders uploaded as working dirs ({absolute path: digest}), and the task pools
        # ({resource shape: _tasks._Pool}), made once per connection.
        self.working_dirs: dict[str, str] = {}
        self.task_pools: dict[str, Any] = {}
        if cluster is None and not os.environ.get("SKYRL_JOB_ID") and not os.environ.get("SKYRL_ACTOR_ID"):
            self.owned = {"actors": set(), "groups": set()}

    def __getitem__(self, key):
        """Ray's init() returns its context, read as a dict: address, gcs_address, node_id and
        node_ip_address; KeyError for anything else."""
        if key in ("address", "gcs_address", "redis_address"):
            return self.address
        if key == "node_ip_address":
            return self.address.rsplit(":", 1)[0]
        if key == "node_id":
            return os.environ.get("SKYRL_NODE_ID") or None
        raise KeyError(key)

    def own(self, kind, ident):
        if self.owned is not None and ident:
            self.owned[kind].add(ident)

    def disown(self, kind, ident):
        if self.owned is not None:
            self.owned[kind].discard(ident)

    def release_owned(self):
        """Kills this driver's non-detached actors and removes its groups (Ray's fate sharing)."""
        if self.owned is None:
            return
        work = [(self.client.kill, a) for a in sorted(self.owned["actors"])]
        work += [(self.client.remove_placement_group, g) for g in sorted(self.owned["groups"])]
        self.owned = {"actors": set(), "groups": set()}
        for release, ident in work:
            try:
                release(ident)
            except RayError as e:
                if e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                    return  # the head is gone: nothing more to do from here, and no waiting
                # dead or removed already


def _reachable(address, token):
    try:
        _edge.list_nodes(address, token, 2.0)
        return True
    except RayError as e:
        if e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            return False
        raise


def init(address: Optional[str] = None, *, namespace: Optional[str] = None, num_cpus: Optional[float] = None,
         num_gpus: Optional[float] = None, resources: Optional[dict[str, float]] = None,
         labels: Optional[dict[str, str]] = None, object_store_memory: Optional[int] = None, local_mode: bool = False,
         ignore_reinit_error: bool = False, include_dashboard: Optional[bool] = None, logging_level: Any = None,
         log_to_driver: bool = True, configure_logging: bool = True, runtime_env: Optional[dict[str, Any]] = None,
         max_call_bytes: Optional[int] = None, _system_config: Optional[dict[str, Any]] = None,
         **unknown: Any) -> "_State":
    """Connects this process to a cluster, as ray.init() does.

    The address is the argument, else $SKYRL_ADDRESS, else the head `skyrl start --head` runs
    on this machine (on any port), else a head on 127.0.0.1:7420 when one answers there; the
    token is found as the CLI finds it ($SKYRL_TOKEN, else ~/.skyrl/token). With no cluster
    anywhere (and no address given), starts a local head and one worker (`num_cpus` CPUs,
    default all) that shutdown() or the end of the process stops.

    A call has no deadline of its own (get(timeout=) bounds the wait, not the call).
    `max_call_bytes` bounds a call's arguments and result (default 4 GiB, the actor hosts'
    limit). `_system_config` (as Ray's, for a cluster init() starts; ValueError when joining
    one) sets the local worker's internals: {"python_fork_server": False} starts each Python
    actor in a fresh interpreter. Outside a job, this driver's non-detached actors and placement groups die with it:
    shutdown(), or the end of the process, kills and removes them, as in Ray. (A driver killed
    by a signal leaves them: submit it as a job, `skyrl job submit`, for that too.)
    """
    global _state
    for name in sorted(unknown):
        if not name.startswith("_"):
            raise TypeError(f"init: unknown keyword {name!r}")
        # Ray's internal keywords (_lru_evict, _temp_dir, ...): no counterpart here.
        warnings.warn(f"init: {name} is one of Ray's internal settings; ignored", stacklevel=2)
    check_runtime_env(runtime_env, "init: runtime_env")
    node = _check_node_keywords(num_cpus, num_gpus, resources, labels, object_store_memory)
    if local_mode:
        warnings.warn("init(local_mode=True): Ray has removed local mode; skyrl_runtime runs actors and tasks in "
                      "their own processes as always", stacklevel=2)
    if _system_config is not None:
        check_system_config(_system_config)
    with _lock:
        if _state is not None:
            if ignore_reinit_error:
                return _state
            raise RuntimeError("init: already initialized (call shutdown() first, or pass ignore_reinit_error=True)")
        if address == "auto":  # Ray's: a running cluster (found as without an address), else an error
            address = os.environ.get("SKYRL_ADDRESS") or _running_head()
            if not address:
                raise RayError("init(address='auto'): no running cluster found ($SKYRL_ADDRESS, `skyrl start "
                               "--head` on this machine, 127.0.0.1:7420)", "UNAVAILABLE")
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
                target = _running_head()
                token = _edge.load_token() if target else None
            if target is None:
                cluster = LocalCluster(num_cpus=num_cpus, system_config=_system_config, num_gpus=num_gpus,
                                       resources=resources, labels=labels)
                target, token = cluster.address, cluster.token
        if node and cluster is None:
            raise ValueError(f"init: {', '.join(node)} set up a cluster init() starts; this process joins the one at "
                             f"{target} (as Ray, which refuses them when connecting to an existing cluster)")
        if _system_config and cluster is None:
            raise ValueError(f"init: _system_config sets up a cluster init() starts; this process joins the one at "
                             f"{target} (as Ray, which refuses it when connecting to an existing cluster)")
        # A job's driver (submitted with --working-dir) and an actor started in a working_dir
        # pass that folder on to what they create, as Ray does.
        inherited = os.environ.get("SKYRL_WORKING_DIR")
        if inherited and not (runtime_env or {}).get("working_dir"):
            runtime_env = {**(runtime_env or {}), "working_dir": inherited}
        try:
            assert target is not None and token is not None  # found, or the local cluster's
            _state = _State(target, token, namespace or "default", cluster, runtime_env, max_call_bytes)
            if inherited and os.environ.get("SKYRL_WORKING_DIR_DIGEST"):
                _state.working_dirs = {os.path.abspath(inherited): os.environ["SKYRL_WORKING_DIR_DIGEST"]}
        except BaseException:  # a bad argument too: the cluster just started must not outlive it
            if cluster:
                cluster.stop()
            raise
        return _state


def _running_head():
    """The address of a head that answers on this machine (`skyrl start --head`'s, else the
    default port), or None."""
    try:
        token = _edge.load_token()
        started = _native.started_head_address()
        for candidate in dict.fromkeys(a for a in (started, "127.0.0.1:7420") if a):
            if _reachable(candidate, token):
                return candidate
    except RayError:
        pass
    return None


def _check_node_keywords(num_cpus, num_gpus, resources, labels, object_store_memory):
    """The names of the node keywords given (each validated: a ValueError or TypeError naming
    it)."""
    given = []
    for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
        if value is None:
            continue
        if type(value) is bool or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"init: {name} must be a number >= 0, got {value!r}")
        if name == "num_gpus" and value != int(value):
            raise ValueError(f"init: num_gpus must be a whole number, got {value!r}")
        given.append(name)
    if resources is not None:
        if not isinstance(resources, dict) or not all(isinstance(k, str) for k in resources):
            raise TypeError(f"init: resources must be a dict of names to amounts, got {resources!r}")
        for k, v in resources.items():
            if k in ("CPU", "GPU"):
                raise ValueError(f"init: resources[{k!r}]: use num_cpus / num_gpus for {k}")
            if type(v) is bool or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"init: resources[{k!r}] must be a number >= 0, got {v!r}")
        given.append("resources")
    if labels is not None:
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise TypeError(f"init: labels must map str to str, got {labels!r}")
        given.append("labels")
    if object_store_memory is not None:
        if type(object_store_memory) is not int or object_store_memory < 0:
            raise ValueError(f"init: object_store_memory must be an int >= 0 (bytes), got {object_store_memory!r}")
        given.append("object_store_memory")
    return given


def is_initialized() -> bool:
    return _state is not None


def shutdown() -> None:
    """Disconnects; stops the local cluster init() started, if any. Calls in flight fail."""
    global _state
    with _lock:
        state, _state = _state, None
    if state is None:
        return
    state.release_owned()
    del state.client  # the C++ client fails what is still in flight, then is gone
    if state.cluster:
        state.cluster.stop()


atexit.register(shutdown)


def _current():
    """The connection; made on first use without init(), as Ray does: in an actor's process to
    the cluster its worker names, elsewhere as init() with its defaults would (the head found,
    else a local cluster). SKYRL_AUTO_INIT=0 (Ray: RAY_ENABLE_AUTO_CONNECT=0) makes that a
    RuntimeError instead."""
    if _state is None:
        in_actor = os.environ.get("SKYRL_ACTOR_ID") and os.environ.get("SKYRL_ADDRESS")
        if not in_actor and "0" in (os.environ.get("SKYRL_AUTO_INIT"), os.environ.get("RAY_ENABLE_AUTO_CONNECT")):
            raise RuntimeError("skyrl_runtime: call init() first (SKYRL_AUTO_INIT=0 turns off connecting on first use)")
        init(ignore_reinit_error=True)
    return _state


def nodes() -> list[dict[str, Any]]:
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


def cluster_resources() -> dict[str, float]:
    """Resources of the alive nodes, summed."""
    return _summed("resources")


def available_resources() -> dict[str, float]:
    """Resources not held by actors or placement groups, summed over the alive nodes."""
    return _summed("resources_available")


# report_step's limits: a record stays a few KiB, as the head scans every step of a running job.
_STEP_MAX = 99_999_999  # the key has 8 digits (runtime/common/job_metrics_keys.h)
_MAX_METRICS = 256
_MAX_PHASES = 32
_MAX_NAME = 64
_RESERVED = frozenset({"step", "start_unix_us", "phases"})


def _number(value, what):
    if type(value) is bool or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"report_step: {what} must be a finite number, got {value!r}")
    return value


def _name(value, what):
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_NAME:
        raise ValueError(f"report_step: {what} must be a str of 1-{_MAX_NAME} characters, got {value!r}")
    return value


def report_step(step: int, metrics: dict[str, float], *, start: Optional[float] = None,
                phases: Optional[dict[str, Any]] = None) -> bool:
    """Records one training step of this job, as the C++ GRPO job does: the dashboard's plots,
    `skyrl timeline` (a steps track, each step with its phases) and the head's skyrl_job_*
    metrics read these records. `metrics` maps names to numbers; the ones the head exports
    are mean_reward, kl, step_s, tokens_per_s, staleness, sync_bytes, dropped_samples and
    <phase>_s for generate, reward, reference, train, sync and wait. `start` is the step's
    start (time.time() seconds), and `phases` maps a phase's name to its (start, end) in the
    same seconds. A step reported again replaces the earlier record.

    Returns True once stored; False, storing nothing, when this process does not run for a job
    (its driver, or an actor or task the job created: $SKYRL_JOB_ID unset), so a script runs
    the same outside a job. Bad input is a ValueError naming the field."""
    if type(step) is not int or not 0 <= step <= _STEP_MAX:
        raise ValueError(f"report_step: step must be an int in 0-{_STEP_MAX}, got {step!r}")
    if not isinstance(metrics, dict) or len(metrics) > _MAX_METRICS:
        raise ValueError(f"report_step: metrics must be a dict of at most {_MAX_METRICS} numbers")
    record: dict[str, Any] = {"step": step}
    for k, v in metrics.items():
        _name(k, "a metric's name")
        if k in _RESERVED:
            if k == "step" and v == step:
                continue  # the step itself, as the example's own records carry it
            raise ValueError(f"report_step: metrics[{k!r}]: {k} is set by report_step itself")
        record[k] = _number(v, f"metrics[{k!r}]")
    if start is not None:
        record["start_unix_us"] = int(_number(start, "start") * 1e6)
    if phases is not None:
        if not isinstance(phases, dict) or len(phases) > _MAX_PHASES:
            raise ValueError(f"report_step: phases must be a dict of at most {_MAX_PHASES} (start, end) pairs")
        spans: list[dict[str, Any]] = []
        for name, span in phases.items():
            _name(name, "a phase's name")
            if not isinstance(span, (tuple, list)) or len(span) != 2:
                raise ValueError(f"report_step: phases[{name!r}] must be a (start, end) pair")
            begin = _number(span[0], f"phases[{name!r}] start")
            end = _number(span[1], f"phases[{name!r}] end")
            if end < begin:
                raise ValueError(f"report_step: phases[{name!r}] ends before it starts")
            spans.append({"phase": name, "start_unix_us": int(begin * 1e6), "end_unix_us": int(end * 1e6)})
        record["phases"] = spans
    job_id = os.environ.get("SKYRL_JOB_ID")
    if not job_id:
        return False
    _current().client.kv_put(_native.job_metrics_key(job_id, step), json.dumps(record))
    return True
