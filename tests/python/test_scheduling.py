"""Where and when actors start: creation in the background (a request that fits once room
frees up waits for it; one that can never fit fails the first get with the scheduler's
explanation), node affinity, and calls retried across an actor's restart."""

import os
import threading
import time

import pytest

import skyrl_runtime as ray
from skyrl_runtime import exceptions
from skyrl_runtime.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote
class Box:
    def node(self):
        return ray.get_runtime_context().get_node_id()

    def pid(self):
        return os.getpid()

    def note(self, i):
        self.__dict__.setdefault("notes", []).append(i)
        return list(self.notes)

    def die_once(self, marker):
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return "survived"


def test_remote_returns_at_once_and_a_request_waits_for_room(cluster):
    hog = Box.options(num_cpus=4).remote()
    ray.get(hog.pid.remote())
    t0 = time.monotonic()
    waiting = Box.options(num_cpus=2).remote()
    assert time.monotonic() - t0 < 1.0, "remote() does not wait for room"
    threads = threading.active_count()
    ref = waiting.pid.remote()
    notes = [waiting.note.remote(i) for i in range(50)]  # wait in the client, in order
    info = waiting._describe()
    assert info["state"] == "PENDING" and "CPU" in info["pending_reason"], info
    assert threading.active_count() == threads, "calls to a pending actor wait without a thread of their own"
    ray.kill(hog)
    assert ray.get(ref, timeout=30) != os.getpid(), "it started once room came"
    assert ray.get(notes[-1], timeout=30) == list(range(50)), "the calls that waited ran in the order they were made"


def test_an_actor_the_cluster_can_never_hold_fails_its_first_get_saying_why(cluster):
    t0 = time.monotonic()
    never = Box.options(num_cpus=64).remote()
    with pytest.raises(exceptions.RayError) as e:
        ray.get(never.pid.remote())
    assert e.value.code == "RESOURCE_EXHAUSTED"
    assert "CPU" in str(e.value) and "best match" in str(e.value), str(e.value)
    assert time.monotonic() - t0 < 5, "at once, not after a timeout"
    with pytest.raises(TypeError, match="unknown option num_cpu"):
        Box.options(num_cpu=1)
    with pytest.raises(exceptions.RayError, match="resources") as e:  # bad input: at once, by name
        Box.options(resources={"CPU": -1}).remote()
    assert e.value.code == "INVALID_ARGUMENT"


def test_max_task_retries_carries_a_call_across_a_restart(cluster, tmp_path):
    retried = Box.options(max_restarts=1, max_task_retries=1).remote()
    assert ray.get(retried.die_once.remote(str(tmp_path / "a"))) == "survived"
    plain = Box.options(max_restarts=1).remote()
    with pytest.raises(exceptions.RayActorError):
        ray.get(plain.die_once.remote(str(tmp_path / "b")))
    assert ray.get(plain.die_once.remote(str(tmp_path / "b"))) == "survived", "restarted, not retried"


def test_node_affinity_pins_actors_and_tasks_to_a_node(cluster, add_worker):
    second = add_worker("--resources", "CPU=1")
    first = next(n["NodeID"] for n in ray.nodes() if n["NodeID"] != second)
    pinned = Box.options(num_cpus=0.5, scheduling_strategy=NodeAffinitySchedulingStrategy(second, soft=False)).remote()
    assert ray.get(pinned.node.remote()) == second

    @ray.remote(num_cpus=0.5)
    def where():
        return ray.get_runtime_context().get_node_id()

    strict = NodeAffinitySchedulingStrategy(first, soft=False)
    assert ray.get(where.options(scheduling_strategy=strict).remote()) == first
    # The second node has 0.5 CPU left: a strict request for 1 waits there, a soft one goes elsewhere.
    soft = Box.options(num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(second, soft=True)).remote()
    assert ray.get(soft.node.remote()) == first
    gone = Box.options(scheduling_strategy=NodeAffinitySchedulingStrategy("node-" + "0" * 24, soft=False)).remote()
    with pytest.raises(exceptions.RayError, match="labels"):
        ray.get(gone.pid.remote())
