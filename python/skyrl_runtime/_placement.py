"""Placement groups from Python, at Ray's names (ray.util.placement_group and
ray.util.scheduling_strategies). Bundles keep their order, and the table says each bundle's
node and GPU ids, so nobody needs probe actors to learn where a bundle landed."""

import threading
from typing import Any, Optional

from . import _api, _edge, _host, _native
from ._refs import ObjectRef
from .exceptions import RayError


class _Waiting:
    """A future of a placement group's readiness, for ready(): resolved once the group is
    placed (however long that takes, as in Ray), or with the error that ends the wait (the
    group removed, say). Waits on a daemon thread, so a pending ready() never holds up exit."""

    def __init__(self, pg):
        self._done = threading.Event()
        self._error = None
        threading.Thread(target=self._wait, args=(pg,), daemon=True, name=f"skyrl-pg-ready-{pg.id}").start()

    def _wait(self, pg):
        try:
            while not pg.wait(60):
                pass
        except BaseException as e:  # noqa: BLE001 - the caller's get() raises it
            self._error = e
        finally:
            self._done.set()

    def done(self):
        return self._done.is_set()

    def result(self, timeout=None):
        if not self._done.wait(timeout):
            raise _native.Error("DEADLINE_EXCEEDED", "placement group not ready yet")
        if self._error is not None:
            raise self._error
        return True

    view = result


class PlacementGroup:
    def __init__(self, info):
        self.id = info["placement_group_id"]
        self.bundle_specs = [dict(b["resources"]) for b in info["bundles"]]
        self._strategy = info["strategy"]

    @property
    def bundle_count(self):
        return len(self.bundle_specs)

    def wait(self, timeout_seconds=30):
        """True once every bundle is placed; False when `timeout_seconds` pass first."""
        try:
            _api._current().client.wait_placement_group(self.id, float(timeout_seconds))
            return True
        except RayError as e:
            if e.code == "DEADLINE_EXCEEDED":
                return False
            raise

    def ready(self):
        """An ObjectRef that resolves (to this group) once it is placed."""
        return ObjectRef(_Waiting(self), lambda ok: self, f"placement_group({self.id}).ready()")

    def __reduce__(self):
        return (_rebuild, (self.id, self.bundle_specs, self._strategy))

    def __repr__(self):
        return f"PlacementGroup({self.id})"

    def __eq__(self, other):  # one group, however its handle came (pickled, placement_group_table)
        return isinstance(other, PlacementGroup) and self.id == other.id

    def __hash__(self):
        return hash(self.id)


def _rebuild(pg_id, specs, strategy):
    return PlacementGroup({"placement_group_id": pg_id, "strategy": strategy,
                           "bundles": [{"resources": r} for r in specs]})


VALID_PLACEMENT_GROUP_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
RESERVED_RESOURCE = "bundle"  # Ray's name for what a bundle reserves: no one asks for it by name


def validate_placement_group(bundles, strategy="PACK", name="", lifetime=None, **_ray_internal):
    """Ray's checks of placement_group()'s arguments: ValueError (TypeError for a wrong type)
    naming what is wrong; nothing is asked of the cluster."""
    if not isinstance(bundles, (list, tuple)) or not bundles:
        raise ValueError(f"placement_group: bundles must be a non-empty list of dicts, got {bundles!r}")
    for i, b in enumerate(bundles):
        if not isinstance(b, dict) or not b:
            raise ValueError(f"placement_group: bundles[{i}] must be a non-empty dict of resources, got {b!r}")
        for k, v in b.items():
            if k == RESERVED_RESOURCE:
                raise ValueError(f"placement_group: bundles[{i}]: {k!r} is a name Ray reserves for bundles")
            if not isinstance(k, str) or type(v) is bool or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"placement_group: bundles[{i}][{k!r}] must be a number >= 0, got {v!r}")
        if all(v == 0 for v in b.values()):
            raise ValueError(f"placement_group: bundles[{i}] asks for nothing (every value is 0)")
    if strategy not in VALID_PLACEMENT_GROUP_STRATEGIES:
        raise ValueError(f"placement_group: invalid strategy {strategy!r} (one of "
                         f"{', '.join(VALID_PLACEMENT_GROUP_STRATEGIES)})")
    if not isinstance(name, str):
        raise TypeError(f"placement_group: name must be a str, got {name!r}")
    if lifetime not in (None, "detached"):
        raise ValueError(f"placement_group: lifetime must be None or 'detached', got {lifetime!r}")


def placement_group(bundles: list[dict[str, float]], strategy: str = "PACK", name: str = "",
                    lifetime: Optional[str] = None, _wait_for_nodes: bool = False) -> "PlacementGroup":
    """Reserves `bundles` (dicts of resources, e.g. {"CPU": 1, "GPU": 1}) with `strategy` (PACK,
    SPREAD, STRICT_PACK, STRICT_SPREAD). Returns at once; ready()/wait() say when it is placed.
    A group this cluster can never hold fails here, saying what is missing and where."""
    validate_placement_group(bundles, strategy, name, lifetime)
    # Zero amounts ask for nothing (Ray drops them).
    bundles = [{k: v for k, v in b.items() if v} for b in bundles]
    state = _api._current()
    info = state.client.create_placement_group([{k: float(v) for k, v in b.items()} for b in bundles], strategy,
                                               name, state.namespace, _wait_for_nodes, lifetime == "detached")
    if lifetime != "detached":
        state.own("groups", info["placement_group_id"])
    return PlacementGroup(info)


def get_current_placement_group() -> Optional["PlacementGroup"]:
    """The placement group the calling actor (or task) was placed in; None in a driver or
    outside a group, as Ray's."""
    if not _host.actor_placement_group:
        return None
    state = _api._current()
    return PlacementGroup(_edge.get_placement_group(state.address, state.token, _host.actor_placement_group))


def placement_group_table(pg: "PlacementGroup") -> dict[str, Any]:
    """The group as the head has it: state, strategy, bundles (resources, node and GPU ids in
    bundle order), and Ray's bundles_to_node_id."""
    state = _api._current()
    info = _edge.get_placement_group(state.address, state.token, pg.id)
    info["bundles_to_node_id"] = {i: b["node_id"] for i, b in enumerate(info["bundles"])}
    info["bundles_to_gpu_ids"] = {i: b["gpu_ids"] for i, b in enumerate(info["bundles"])}
    return info


def remove_placement_group(pg: "PlacementGroup") -> None:
    """Frees the bundles; the actors in them are killed."""
    state = _api._current()
    state.client.remove_placement_group(pg.id)
    state.disown("groups", pg.id)


class PlacementGroupSchedulingStrategy:
    """options(scheduling_strategy=...): place the actor in this group's bundle (-1: any)."""

    def __init__(self, placement_group, placement_group_bundle_index=-1,
                 placement_group_capture_child_tasks=None):
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index

    def __repr__(self):
        return f"PlacementGroupSchedulingStrategy({self.placement_group.id}, {self.placement_group_bundle_index})"


class NodeAffinitySchedulingStrategy:
    """options(scheduling_strategy=...): run on node `node_id` (an id from nodes()). With
    soft=False the actor waits for room there (and fails, saying why, when that node is gone
    or could never hold it); with soft=True it goes there when the node is alive with room
    now, else anywhere."""

    def __init__(self, node_id, soft, _spill_on_unavailable=False, _fail_on_unavailable=False):
        if not isinstance(node_id, str) or not node_id:
            raise TypeError(f"NodeAffinitySchedulingStrategy: node_id must be a node id string, got {node_id!r}")
        self.node_id = node_id
        self.soft = bool(soft)

    def __repr__(self):
        return f"NodeAffinitySchedulingStrategy({self.node_id}, soft={self.soft})"


NODE_ID_LABEL = "skyrl.node-id"  # the label the head gives every node (runtime/common/ids.h)


def placement_of(strategy, resources):
    """(placement group id, bundle index, label selector) for a scheduling_strategy option
    and the resources asked for."""
    if strategy is None or strategy == "DEFAULT":
        return "", -1, {}
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        return strategy.placement_group.id, int(strategy.placement_group_bundle_index), {}
    if isinstance(strategy, NodeAffinitySchedulingStrategy):
        if strategy.soft:
            node = next((n for n in _api.nodes() if n["NodeID"] == strategy.node_id and n["Alive"]), None)
            free = node["resources_available"] if node else {}
            if node is None or any(free.get(k, 0.0) < v for k, v in resources.items() if v > 0):
                return "", -1, {}
        return "", -1, {NODE_ID_LABEL: strategy.node_id}
    if strategy == "SPREAD":
        raise NotImplementedError("options: scheduling_strategy 'SPREAD' is not supported; spread actors with a "
                                  "placement group (strategy='SPREAD') and PlacementGroupSchedulingStrategy")
    raise TypeError(f"options: scheduling_strategy must be 'DEFAULT', a PlacementGroupSchedulingStrategy or a "
                    f"NodeAffinitySchedulingStrategy, got {strategy!r}")
