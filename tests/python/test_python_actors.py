"""@remote classes: Python actors in their own processes on a worker, served by the C++ actor
host (skyrl-actor-host-python), with Ray's semantics for arguments, results and exceptions."""

import os
import threading

import numpy as np
import pytest

import skyrl_runtime as ray
from skyrl_runtime import exceptions


@ray.remote
class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k=1):
        self.n += k
        return self.n

    def fail(self):
        raise ValueError("bad value 7")

    def pid(self):
        return os.getpid()

    def env(self, name):
        return os.environ.get(name)

    def double(self, array):
        return array * 2


@ray.remote(num_cpus=0.5)
class Relay:
    """Calls another actor from inside an actor: handles pickle, and the actor's process joins
    the cluster on its own."""

    def add_via(self, counter, k):
        return ray.get(counter.add.remote(k))


@ray.remote(num_cpus=0)
class ThreadLocal:
    """State in threading.local: it lives in the Python thread state of the host's thread."""

    def __init__(self):
        self.local = threading.local()

    def set(self, value):
        self.local.value = value
        return threading.get_ident()

    def get(self):
        return getattr(self.local, "value", None), threading.get_ident()


def test_thread_local_state_lasts_from_one_call_to_the_next(cluster):
    # The host's thread keeps its Python thread state between calls (made once, not once per
    # call), so what a method leaves in threading.local is there for the next call.
    a = ThreadLocal.remote()
    ident = ray.get(a.set.remote("kept"))
    assert ray.get([a.get.remote() for _ in range(20)]) == [("kept", ident)] * 20


def test_a_python_actor_runs_in_its_own_process_and_keeps_state(cluster):
    c = Counter.options(num_cpus=0.5, name="counter").remote(10)
    assert ray.get(c.add.remote()) == 11
    assert ray.get([c.add.remote(k=2) for _ in range(100)])[-1] == 211, "calls of one caller run in order"
    assert ray.get(c.pid.remote()) != os.getpid()
    assert ray.get(c.env.remote("SKYRL_ACTOR_ID")) == c._actor_id
    assert np.array_equal(ray.get(c.double.remote(np.arange(1000))), np.arange(1000) * 2)
    assert ray.get(ray.get_actor("counter").add.remote(0)) == 211
    assert ray.available_resources()["CPU"] == 3.5


def test_remote_exceptions_come_back_as_themselves(cluster):
    c = Counter.remote(0)
    with pytest.raises(ValueError, match="bad value 7") as e:
        ray.get(c.fail.remote())
    assert isinstance(e.value, ray.exceptions.RayTaskError), "both its own class and Ray's"
    assert type(e.value).__name__ == "RayTaskError(ValueError)"
    assert isinstance(e.value.cause, ValueError) and e.value.args == ("bad value 7",)
    info = c._describe()
    where = f"raised in actor {c._actor_id} on node {info['node_id']}"
    assert where in str(e.value), "which actor, on which node"
    assert 'in fail\n    raise ValueError("bad value 7")' in str(e.value), "the remote traceback"
    with pytest.raises(AttributeError, match="no_such"):
        ray.get(c.no_such.remote())
    assert ray.get(c.add.remote()) == 1, "the actor goes on after an exception"


def test_a_constructor_error_is_the_creation_error_with_its_traceback(cluster):
    @ray.remote
    class Broken:
        def __init__(self):
            raise KeyError("no config given")

        def ping(self):
            return 1

    b = Broken.remote()  # returns at once, as in Ray; the error comes with the first get
    with pytest.raises(exceptions.ActorDiedError) as e:
        ray.get(b.ping.remote())
    assert "no config given" in str(e.value)
    assert "KeyError" in str(e.value)
    assert 'raise KeyError("no config given")' in str(e.value), "with its traceback"
    assert "no config given" in b._describe()["death_reason"], "and it is the actor's death reason"
    assert ray.available_resources()["CPU"] == 4, "nothing left behind"


def test_handles_travel_to_other_actors(cluster):
    c = Counter.remote(100)
    r = Relay.remote()
    assert ray.get(r.add_via.remote(c, 5)) == 105
    assert ray.get(c.add.remote(0)) == 105


def test_arguments_that_do_not_pickle_are_named(cluster):
    c = Counter.remote(0)
    import threading
    with pytest.raises(TypeError, match="does not pickle"):
        c.add.remote(threading.Lock())
    with pytest.raises(TypeError, match="cannot be instantiated directly"):
        Counter(1)


def test_runtime_env_vars_reach_actors_and_tasks(cluster):
    c = Counter.options(runtime_env={"env_vars": {"TEST_FLAVOUR": "mint"}}).remote(0)
    assert ray.get(c.env.remote("TEST_FLAVOUR")) == "mint"
    assert ray.get(Counter.remote(0).env.remote("TEST_FLAVOUR")) is None, "only where asked"

    @ray.remote(runtime_env={"env_vars": {"TEST_FLAVOUR": "lime"}})
    def flavour():
        return os.environ.get("TEST_FLAVOUR")

    assert ray.get(flavour.remote()) == "lime"
    echo = ray.cross_language.cpp_actor_class("echo").options(runtime_env={"env_vars": {"TEST_FLAVOUR": "pear"}})
    assert ray.get(echo.remote().getenv.remote(b"TEST_FLAVOUR")) == b"pear", "C++ actors too"
    with pytest.raises(exceptions.RayError, match="spec.env: SKYRL_TOKEN is set by the worker") as e:
        Counter.options(runtime_env={"env_vars": {"SKYRL_TOKEN": "x"}}).remote(0)
    assert e.value.code == "INVALID_ARGUMENT"
    # A framework's own SKYRL_* settings pass through; only what the worker sets is refused.
    framework = Counter.options(num_cpus=0, runtime_env={"env_vars": {"SKYRL_WORKER_NCCL_TIMEOUT_IN_S": "600"}}).remote(0)
    assert ray.get(framework.env.remote("SKYRL_WORKER_NCCL_TIMEOUT_IN_S")) == "600"
    for reserved in ("SKYRL_ACTOR_ID", "SKYRL_GPU_IDS", "SKYRL_NODE_ID"):
        with pytest.raises(exceptions.RayError, match=f"{reserved} is set by the worker"):
            Counter.options(runtime_env={"env_vars": {reserved: "x"}}).remote(0)
    with pytest.raises(NotImplementedError, match="conda is not supported"):
        Counter.options(runtime_env={"conda": "env"})
    with pytest.raises(TypeError, match="env_vars must map str to str"):
        Counter.options(runtime_env={"env_vars": {"N": 1}})


def test_the_switch_in_the_drivers_runtime_env_reaches_every_actor(monkeypatch, tmp_path):
    """Ray's RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES at job level: init's runtime_env merges
    into each actor's, so an actor's own CUDA_VISIBLE_DEVICES stands."""
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    ray.init(num_cpus=2, runtime_env={"env_vars": {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}})
    try:
        @ray.remote(num_cpus=0)
        class Helper:
            def devices(self):
                return ray.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES")

        helper = Helper.options(runtime_env={"env_vars": {"CUDA_VISIBLE_DEVICES": "3"}}).remote()
        assert ray.get(helper.devices.remote()) == ([], "3")
    finally:
        ray.shutdown()


def test_placement_group_bundles_in_order_with_gpu_ids(monkeypatch, tmp_path):
    """A worker declaring GPUs (--gpu-ids): bundles keep their order and the table says each
    bundle's node and device, which CUDA_VISIBLE_DEVICES and get_gpu_ids() show in the actor."""
    from skyrl_runtime.util.placement_group import placement_group, placement_group_table, remove_placement_group
    from skyrl_runtime.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    import subprocess
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    ray.init(num_cpus=4)
    try:
        state = ray._api._current()
        cluster = state.cluster
        worker = subprocess.Popen([os.path.join(os.environ["SKYRL_BIN_DIR"], "skyrl-worker"), "--head", cluster.address,
                                   "--token-file", cluster.token_file, "--resources", "CPU=4,GPU=4",
                                   "--gpu-ids", "0,1,2,3", "--log-dir", str(tmp_path / "gpu-actors")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            for _ in range(200):
                if ray.cluster_resources().get("GPU", 0) == 4:
                    break
                import time
                time.sleep(0.05)
            pg = placement_group([{"CPU": 0.5, "GPU": 1}, {"CPU": 0.5, "GPU": 1}], strategy="PACK")
            assert ray.get(pg.ready(), timeout=30) is pg
            table = placement_group_table(pg)
            assert table["state"] == "CREATED"
            assert [b["gpu_ids"] for b in table["bundles"]] == [[0], [1]]
            assert len(set(table["bundles_to_node_id"].values())) == 1

            @ray.remote
            class Gpu:
                def ids(self):
                    return ray.get_gpu_ids(), os.environ["CUDA_VISIBLE_DEVICES"]

            second = Gpu.options(num_cpus=0.5, num_gpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=1)).remote()
            assert ray.get(second.ids.remote()) == ([1], "1")
            # Colocation as RL frameworks do it: a helper with no GPU of its own shares its
            # rank's, named in its env_vars behind Ray's switch; without the switch the worker's
            # value stands (its GPUs: none), at actor and at driver (runtime_env) level.
            noset = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"}
            helper = Gpu.options(num_cpus=0.5, num_gpus=0, runtime_env={"env_vars": noset}).remote()
            assert ray.get(helper.ids.remote()) == ([], "1")
            plain = Gpu.options(num_cpus=0.5, num_gpus=0,
                                runtime_env={"env_vars": {"CUDA_VISIBLE_DEVICES": "1"}}).remote()
            assert ray.get(plain.ids.remote()) == ([], "")
            owner = Gpu.options(num_cpus=0.5, num_gpus=1, runtime_env={"env_vars": {
                "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}}).remote()
            ids, visible = ray.get(owner.ids.remote())
            assert visible == "0,1,2,3" and len(ids) == 1, "get_gpu_ids() still reports the assignment"
            with pytest.raises(exceptions.RayError) as never:
                placement_group([{"GPU": 8}], strategy="STRICT_PACK")
            assert never.value.code == "RESOURCE_EXHAUSTED" and "GPU" in str(never.value)
            remove_placement_group(pg)
            assert placement_group_table(pg)["state"] == "REMOVED"
        finally:
            worker.terminate()
            worker.wait(10)
    finally:
        ray.shutdown()


def test_a_python_actor_that_exits_is_restarted_with_max_restarts(cluster):
    @ray.remote(max_restarts=1, num_cpus=0)
    class Fragile:
        def __init__(self):
            self.calls = 0

        def call(self):
            self.calls += 1
            return os.getpid(), self.calls

        def die(self):
            os._exit(7)

    f = Fragile.remote()
    pid, calls = ray.get(f.call.remote())
    assert calls == 1
    with pytest.raises(exceptions.RayActorError):
        ray.get(f.die.remote(), timeout=30)
    import time
    deadline = time.monotonic() + 30
    while True:
        try:
            new_pid, calls = ray.get(f.call.remote(), timeout=30)
            break
        except exceptions.ActorUnavailableError:
            assert time.monotonic() < deadline
    assert new_pid != pid and calls == 1, "a fresh process and a fresh object"
    assert f._describe()["restarts"] == 1
    f.die.remote()
    deadline = time.monotonic() + 30
    while f._describe()["state"] != "DEAD":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "exit code 7" in f._describe()["death_reason"]


def test_async_methods_overlap_with_max_concurrency(cluster):
    """Four coroutines wait for each other: they finish only if they run at once."""

    @ray.remote(max_concurrency=4, num_cpus=0)
    class Gather:
        def __init__(self):
            self.arrived = 0
            self.all_here = None

        async def meet(self, n):
            import asyncio
            if self.all_here is None:
                self.all_here = asyncio.Event()
            self.arrived += 1
            if self.arrived == n:
                self.all_here.set()
            await asyncio.wait_for(self.all_here.wait(), timeout=20)
            return self.arrived

    g = Gather.remote()
    assert ray.get([g.meet.remote(4) for _ in range(4)], timeout=60) == [4, 4, 4, 4]
