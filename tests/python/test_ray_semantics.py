"""Ray's semantics behind Ray's names, against real skyrl-head and skyrl-worker processes:
resource defaults, init() keywords, task errors as both their own class and RayTaskError,
Ray's built-in actor methods and exit_actor(), ObjectRef's futures, the runtime context,
retry_exceptions, label selectors and their fallbacks, concurrency groups and kill's
restarts."""

import asyncio
import os
import time
import warnings

import pytest

import skyrl_runtime as ray
from skyrl_runtime.exceptions import ActorDiedError, GetTimeoutError, RayTaskError


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """init(**keywords) of a private local cluster; shut down at the end."""
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.delenv("SKYRL_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    yield lambda **kw: ray.init(address="local", **kw)
    ray.shutdown()


@ray.remote
class Plain:
    def ping(self):
        return "pong"

    def context(self):
        c = ray.get_runtime_context()
        return {"task_id": c.get_task_id(), "name": c.get_task_name(), "function": c.get_task_function_name(),
                "resources": c.get_assigned_resources(), "current": c.current_actor._actor_id,
                "actor_id": c.get_actor_id(), "get": c.get()}

    def leave(self):
        ray.actor.exit_actor()


def _wait_state(handle, state, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = handle._describe()
        if info["state"] == state:
            return info
        time.sleep(0.05)
    raise AssertionError(f"{handle} is {info['state']}, not {state}")


def test_a_default_actor_is_placed_with_one_cpu_and_holds_none(fresh):
    fresh(num_cpus=1, num_gpus=1)
    helpers = [Plain.remote() for _ in range(3)]  # Ray: a 1-CPU node runs any number of these
    assert ray.get([h.ping.remote() for h in helpers], timeout=60) == ["pong"] * 3
    assert ray.available_resources()["CPU"] == 1
    gpu = Plain.options(num_gpus=1).remote()  # naming a resource: holds 1 CPU too, as in Ray
    assert ray.get(gpu.ping.remote(), timeout=60) == "pong"
    assert ray.available_resources()["CPU"] == 0
    waiting = Plain.remote()  # needs 1 CPU free to be placed: waits for room
    with pytest.raises(GetTimeoutError):
        ray.get(waiting.ping.remote(), timeout=1.5)
    ray.kill(gpu)
    assert ray.get(waiting.ping.remote(), timeout=30) == "pong"
    zero = Plain.options(num_cpus=0).remote()  # num_cpus=0 named: placed anywhere, holds none
    assert ray.get(zero.ping.remote(), timeout=30) == "pong"


def test_init_keywords_shape_the_local_node(fresh):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fresh(num_cpus=3, num_gpus=2, resources={"disk": 4}, labels={"zone": "a"}, object_store_memory=1 << 30,
              local_mode=True, include_dashboard=False, logging_level="info", log_to_driver=False)
    assert any("local_mode" in str(w.message) for w in seen)
    total = ray.cluster_resources()
    assert (total["CPU"], total["GPU"], total["disk"]) == (3, 2, 4)
    assert ray.nodes()[0]["labels"]["zone"] == "a"

    @ray.remote(num_gpus=1)
    class Gpu:
        def ids(self):
            return ray.get_gpu_ids(), os.environ["CUDA_VISIBLE_DEVICES"]

    a, b = Gpu.remote(), Gpu.remote()
    assert sorted(ray.get([a.ids.remote(), b.ids.remote()])) == [([0], "0"), ([1], "1")]
    there = Plain.options(label_selector={"zone": "a"}).remote()
    assert ray.get(there.ping.remote(), timeout=30) == "pong"
    nowhere = Plain.options(label_selector={"zone": "b"}).remote()
    with pytest.raises(ray.exceptions.RayError, match="zone"):
        ray.get(nowhere.ping.remote(), timeout=30)
    with pytest.raises(NotImplementedError, match="exact values"):
        Plain.options(label_selector={"zone": "!a"})
    # fallback_strategy: the selectors tried in order where the primary finds no node.
    fallback = [{"label_selector": {"zone": "c"}}, {"label_selector": {"zone": "a"}}]
    elsewhere = Plain.options(label_selector={"zone": "b"}, fallback_strategy=fallback).remote()
    assert ray.get(elsewhere.ping.remote(), timeout=30) == "pong"

    @ray.remote(label_selector={"zone": "b"}, fallback_strategy=fallback)
    def task():
        return "ran"

    assert ray.get(task.remote(), timeout=60) == "ran"
    for bad, error in (({"label_selector": {"zone": "a"}}, TypeError), ([{"zone": "a"}], TypeError),
                       ([{"label_selector": {"zone": "a"}, "priority": 1}], NotImplementedError),
                       ([{"label_selector": {"zone": "!a"}}], NotImplementedError)):
        with pytest.raises(error, match="fallback_strategy|exact values"):
            Plain.options(fallback_strategy=bad)


def test_rays_internal_settings_are_ignored_with_a_warning(fresh):
    with pytest.warns(UserWarning) as seen:
        fresh(num_cpus=1, _system_config={"task_retry_delay_ms": 0}, _lru_evict=True)
    said = " ".join(str(w.message) for w in seen)
    assert "task_retry_delay_ms" in said and "_lru_evict" in said
    assert ray.get(Plain.remote().ping.remote(), timeout=60) == "pong"


@pytest.mark.parametrize("keywords, error, field", [
    ({"num_cpus": -1}, ValueError, "num_cpus"), ({"num_gpus": 1.5}, ValueError, "num_gpus"),
    ({"resources": {"CPU": 2}}, ValueError, "num_cpus"), ({"resources": {"x": "many"}}, ValueError, "resources"),
    ({"labels": {"zone": 1}}, TypeError, "labels"), ({"object_store_memory": -5}, ValueError, "object_store_memory"),
    ({"no_such_keyword": 1}, TypeError, "no_such_keyword")])
def test_bad_init_keywords_are_refused_naming_them(fresh, keywords, error, field):
    with pytest.raises(error, match=field):
        fresh(**keywords)
    assert not ray.is_initialized()


def test_node_keywords_are_refused_when_joining_a_cluster(monkeypatch, tmp_path):
    from skyrl_runtime._cluster import LocalCluster
    monkeypatch.setenv("HOME", str(tmp_path))
    running = LocalCluster(num_cpus=1)
    try:
        monkeypatch.setenv("SKYRL_TOKEN", running.token)
        for keywords in ({"num_gpus": 1}, {"num_cpus": 2}, {"_system_config": {"python_fork_server": False}}):
            with pytest.raises(ValueError, match=next(iter(keywords))):
                ray.init(address=running.address, **keywords)
            assert not ray.is_initialized()
        ray.init(address=running.address)
        ray.shutdown()
    finally:
        running.stop()


def test_a_task_error_is_its_own_class_and_a_ray_task_error(cluster):
    @ray.remote
    def fails():
        raise KeyError("missing")

    with pytest.raises(KeyError) as e:
        ray.get(fails.options(max_retries=0).remote())
    assert isinstance(e.value, RayTaskError) and type(e.value).__name__ == "RayTaskError(KeyError)"
    assert "in fails" in str(e.value) and "raised in actor" in str(e.value)
    try:
        ray.get(fails.options(max_retries=0).remote())
    except RayTaskError as caught:
        assert isinstance(caught.cause, KeyError)


def test_rays_own_actor_methods_and_exit_actor(cluster):
    a = Plain.options(num_cpus=0).remote()
    assert ray.get(a.__ray_ready__.remote()) is True
    assert ray.get(a.__ray_call__.remote(lambda self, k: (self.ping(), k), 7)) == ("pong", 7)
    with pytest.raises(ActorDiedError, match="exit_actor"):
        ray.get(a.leave.remote())
    info = _wait_state(a, "DEAD")
    assert info["restarts"] == 0
    b = Plain.options(num_cpus=0, max_restarts=3).remote()
    assert ray.get(b.ping.remote()) == "pong"
    with pytest.raises(ActorDiedError):
        ray.get(b.__ray_terminate__.remote())
    assert _wait_state(b, "DEAD")["restarts"] == 0, "an exit asked for is not restarted"
    with pytest.raises(TypeError, match="actor"):
        ray.actor.exit_actor()  # in a driver


def test_object_refs_have_ids_futures_and_await(cluster):
    a = Plain.options(num_cpus=0).remote()
    ref = a.ping.remote()
    assert len(ref.hex()) == 56 and ref.hex() == ref.hex() and ref.hex() != a.ping.remote().hex()
    assert ref.future().result(timeout=30) == "pong"

    async def main():
        one = await a.ping.remote()
        two = await a.ping.remote().as_future()
        return one, two

    assert asyncio.run(main()) == ("pong", "pong")

    @ray.remote
    def fails():
        raise ValueError("no")

    with pytest.raises(ValueError):
        fails.options(max_retries=0).remote().future().result(timeout=30)


def test_the_runtime_context_says_what_runs(cluster):
    a = Plain.options(num_cpus=0.5).remote()
    first, second = ray.get([a.context.remote(), a.context.remote()])
    assert first["task_id"] and first["task_id"] != second["task_id"]
    assert first["name"] == "Plain.context"
    assert first["function"].endswith("Plain.context")
    assert first["resources"] == {"CPU": 0.5}
    assert first["current"] == first["actor_id"] == a._actor_id
    assert first["get"]["actor_id"] == a._actor_id and first["get"]["task_id"] == first["task_id"]

    @ray.remote(num_cpus=1)
    def in_task():
        c = ray.get_runtime_context()
        return c.get_task_name(), c.get_task_function_name(), c.get_assigned_resources(), c.get_task_id()

    name, function, resources, task_id = ray.get(in_task.options(name="my-task").remote())
    assert name == "my-task" and function.endswith("in_task") and resources == {"CPU": 1.0} and task_id
    assert ray.get(in_task.remote())[0] == "in_task"
    driver = ray.get_runtime_context()
    assert driver.get_task_id() is None and driver.get_assigned_resources() == {}
    with pytest.raises(RuntimeError):
        driver.current_actor


def test_retry_exceptions_runs_a_failing_task_or_method_again(cluster, tmp_path):
    counter = tmp_path / "runs"

    @ray.remote
    def flaky(path, fail_times, exc):
        n = int(open(path).read()) if os.path.exists(path) else 0
        with open(path, "w") as f:
            f.write(str(n + 1))
        if n < fail_times:
            raise exc("not yet")
        return n

    assert ray.get(flaky.options(retry_exceptions=True, max_retries=3).remote(str(counter), 2, ValueError)) == 2
    counter.unlink()
    with pytest.raises(ValueError):  # not in the list: not retried
        ray.get(flaky.options(retry_exceptions=[KeyError], max_retries=3).remote(str(counter), 2, ValueError))
    assert counter.read_text() == "1"
    counter.unlink()
    assert ray.get(flaky.options(retry_exceptions=[KeyError], max_retries=3).remote(str(counter), 1, KeyError)) == 1
    with pytest.raises(TypeError, match="retry_exceptions"):
        flaky.options(retry_exceptions="yes")

    @ray.remote(num_cpus=0)
    class Flaky:
        def __init__(self):
            self.n = 0

        @ray.method(retry_exceptions=True, max_task_retries=2)
        def step(self):
            self.n += 1
            if self.n < 3:
                raise RuntimeError("not yet")
            return self.n

        def once(self):
            self.n += 1
            raise RuntimeError("never retried")

    f = Flaky.remote()
    assert ray.get(f.step.remote()) == 3
    with pytest.raises(RuntimeError):
        ray.get(f.once.remote())
    assert ray.get(f.step.remote()) == 5, "once ran once"

    @ray.remote(num_cpus=0)
    class Quits:
        @ray.method(retry_exceptions=True, max_task_retries=-1)
        def quit(self):
            ray.actor.exit_actor()

    # The actor's end is no exception of the method's: not retried (without end, it would hang).
    with pytest.raises(ray.exceptions.ActorDiedError):
        ray.get(Quits.remote().quit.remote(), timeout=30)


def test_bad_calls_are_refused_when_made(cluster):
    @ray.remote
    def two(a, b=1):
        return a + b

    with pytest.raises(TypeError, match="two.remote"):
        two.remote()
    with pytest.raises(TypeError, match="two.remote"):
        two.remote(1, 2, 3)
    @ray.remote(num_cpus=0)
    class Takes:
        def __init__(self, a):
            self.a = a

    with pytest.raises(TypeError, match="Takes.remote"):
        Takes.remote()
    with pytest.raises(TypeError, match="Takes.remote"):
        Takes.remote(1, b=2)
    # A method's arguments too, where the actor was made (a handle passed elsewhere leaves the
    # check to the call).
    plain = Plain.options(num_cpus=0).remote()
    with pytest.raises(TypeError, match="Plain.ping.remote"):
        plain.ping.remote(1)
    with pytest.raises(TypeError, match="Plain.ping.remote"):
        plain.ping.options(name="x").remote(x=1)
    assert ray.get(plain.ping.remote()) == "pong"
    ref = two.remote(1)
    assert ray.get(ref) == 2
    for bad in (ref, 1, [1]):
        with pytest.raises(TypeError):
            ray.wait(bad)
    with pytest.raises(ValueError, match="more than once"):
        ray.wait([ref, ref])


def test_an_actor_knows_its_placement_group(cluster):
    from skyrl_runtime.util.placement_group import get_current_placement_group, placement_group
    from skyrl_runtime.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_cpus=0)
    class Where:
        def group(self):
            pg = get_current_placement_group()
            return pg.id if pg else None

    pg = placement_group([{"CPU": 1}])
    assert pg.wait(30)
    inside = Where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()
    assert ray.get(inside.group.remote()) == pg.id
    assert ray.get(Where.remote().group.remote()) is None
    older = Where.options(placement_group=pg, placement_group_bundle_index=0).remote()  # Ray's older options
    assert ray.get(older.group.remote()) == pg.id
    assert get_current_placement_group() is None  # a driver


def _pending_group(fresh):
    """A 2-CPU cluster whose CPUs an actor holds, and a 1-CPU group that fits once that actor
    is gone: (the holder, the group, PENDING)."""
    from skyrl_runtime.util.placement_group import placement_group

    fresh(num_cpus=2)
    holder = Plain.options(num_cpus=2).remote()
    assert ray.get(holder.ping.remote(), timeout=60) == "pong"
    pg = placement_group([{"CPU": 1}])
    assert not pg.wait(0.2)
    return holder, pg


def test_actors_of_a_pending_placement_group_wait_for_it(fresh):
    from skyrl_runtime.util.placement_group import get_current_placement_group, placement_group, \
        remove_placement_group
    from skyrl_runtime.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_cpus=0)
    class Where:
        def group(self):
            pg = get_current_placement_group()
            return pg.id if pg else None

    holder, pg = _pending_group(fresh)
    inside = Where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()
    ref = inside.group.remote()
    info = _wait_state(inside, "PENDING")
    assert pg.id in info["pending_reason"], info
    ready, _ = ray.wait([ref], timeout=0.3)
    assert not ready
    ray.kill(holder)  # room: the group is placed, then the actor in it
    assert ray.get(ref, timeout=60) == pg.id

    # A group removed while an actor waits for it: the actor is DEAD, saying so.
    blocker = Plain.options(num_cpus=1).remote()
    assert ray.get(blocker.ping.remote(), timeout=60) == "pong"
    late = placement_group([{"CPU": 1}])
    assert not late.wait(0.2)
    orphan = Where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(late)).remote()
    _wait_state(orphan, "PENDING")
    remove_placement_group(late)
    info = _wait_state(orphan, "DEAD")
    assert late.id in info["death_reason"], info
    with pytest.raises(ActorDiedError):
        ray.get(orphan.group.remote(), timeout=60)


def test_tasks_of_a_pending_placement_group_wait_for_it(fresh):
    from skyrl_runtime.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_cpus=1)
    def inside():
        return "ran"

    holder, pg = _pending_group(fresh)
    ref = inside.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()
    ready, _ = ray.wait([ref], timeout=0.5)
    assert not ready, "the task ran before its group was placed"
    ray.kill(holder)  # room: the group is placed, then the task runs in it
    assert ray.get(ref, timeout=60) == "ran"


def test_init_returns_a_context_read_as_rays(cluster):
    assert cluster["address"] == cluster["gcs_address"] == cluster.address
    assert cluster["node_ip_address"] == cluster.address.rsplit(":", 1)[0]
    with pytest.raises(KeyError):
        cluster["no_such_key"]
    assert ray.util.placement_group is ray.util.placement_group.__globals__["placement_group"], "a function, as Ray's"


@ray.remote(num_cpus=0, concurrency_groups={"io": 2, "compute": 1})
class Grouped:
    """Counts the calls of each group that run at once; `hold` blocks a call until `release`."""

    def __init__(self):
        import collections
        import threading
        self.lock = threading.Lock()
        self.running = collections.Counter()
        self.peak = collections.Counter()
        self.released = threading.Event()

    def _track(self, group, seconds):
        with self.lock:
            self.running[group] += 1
            self.peak[group] = max(self.peak[group], self.running[group])
        time.sleep(seconds)
        with self.lock:
            self.running[group] -= 1

    @ray.method(concurrency_group="io")
    def io(self, seconds):
        self._track("io", seconds)

    @ray.method(concurrency_group="compute")
    def compute(self, seconds):
        self._track("compute", seconds)

    def plain(self, seconds):
        self._track("default", seconds)

    def hold(self):
        return self.released.wait(60)

    def release(self):
        self.released.set()

    @ray.method(concurrency_group="io")
    def peaks(self):
        return dict(self.peak)


def test_concurrency_groups_hold_each_group_to_its_own_limit(cluster):
    a = Grouped.remote()
    # The default group (max_concurrency 1) is busy holding; a call in another group runs
    # beside it and releases it: with one queue for all, this would wait forever.
    held = a.hold.remote()
    ray.get(a.release.options(concurrency_group="io").remote(), timeout=30)
    assert ray.get(held, timeout=30) is True
    ray.get([a.io.remote(0.3) for _ in range(5)] + [a.compute.remote(0.2) for _ in range(3)]
            + [a.plain.remote(0.1) for _ in range(3)], timeout=60)
    peaks = ray.get(a.peaks.remote())
    assert 1 <= peaks["io"] <= 2 and peaks["compute"] == 1 and peaks["default"] == 1, peaks
    with pytest.raises(ValueError, match="no concurrency group 'gpu'"):
        ray.get(a.plain.options(concurrency_group="gpu").remote(0))


def test_an_async_actors_groups_run_on_loops_of_their_own(cluster):
    @ray.remote(num_cpus=0, concurrency_groups={"io": 1})
    class AsyncGrouped:
        def __init__(self):
            self.running, self.peak = {}, {}

        async def _track(self, group):
            import threading
            self.running[group] = self.running.get(group, 0) + 1
            self.peak[group] = max(self.peak.get(group, 0), self.running[group])
            await asyncio.sleep(0.2)
            self.running[group] -= 1
            return threading.current_thread().name

        @ray.method(concurrency_group="io")
        async def io(self):
            return await self._track("io")

        async def plain(self):
            return await self._track("default")

        def peaks(self):
            return self.peak

    a = AsyncGrouped.remote()
    names = ray.get([a.io.remote() for _ in range(3)] + [a.plain.remote() for _ in range(3)], timeout=60)
    assert set(names[:3]) == {"skyrl-actor-loop-io"} and set(names[3:]) == {"skyrl-actor-loop"}
    assert ray.get(a.peaks.remote()) == {"io": 1, "default": 3}


def test_bad_concurrency_groups_are_refused_naming_them(cluster):
    from skyrl_runtime import cross_language

    class Cls:
        pass

    with pytest.raises(ValueError, match=r"concurrency_groups\['io'\]"):
        ray.remote(concurrency_groups={"io": 0})(Cls)
    with pytest.raises(ValueError, match="reserved"):
        ray.remote(concurrency_groups={"_ray_system": 1})(Cls)
    with pytest.raises(TypeError, match="concurrency_group"):
        ray.method(concurrency_group=3)
    with pytest.raises(NotImplementedError, match="concurrency_groups are for Python actors"):
        cross_language.cpp_actor_class("echo").options(concurrency_groups={"io": 1}).remote()


def test_kill_with_no_restart_false_restarts_the_actor(cluster):
    @ray.remote(num_cpus=0, max_restarts=1)
    class Lives:
        def pid(self):
            return os.getpid()

    a = Lives.remote()
    first = ray.get(a.pid.remote(), timeout=60)
    ray.kill(a, no_restart=False)
    second = ray.get(a.pid.remote(), timeout=60)  # waits out the restart
    assert second != first
    ray.kill(a, no_restart=False)  # its one restart is used: now it stays dead
    with pytest.raises(ActorDiedError, match="no_restart=False"):
        ray.get(a.pid.remote(), timeout=60)
    with pytest.raises(TypeError, match="no_restart must be a bool"):
        ray.kill(a, no_restart="no")


def test_first_use_without_init_calls_init(monkeypatch, tmp_path):
    import subprocess
    import sys
    script = ("import skyrl_runtime as ray\n"
              "@ray.remote\n"
              "def f():\n"
              "    return 41\n"
              "print(ray.get(f.remote()) + 1, ray.is_initialized())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SKYRL_ADDRESS", "SKYRL_TOKEN")}
    env["HOME"] = str(tmp_path)  # no head of this machine's is found: a local cluster
    ran = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert ran.stdout.split() == ["42", "True"], ran.stderr
    ran = subprocess.run([sys.executable, "-c", script], env={**env, "SKYRL_AUTO_INIT": "0"}, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode != 0 and "call init() first" in ran.stderr


def test_exit_actor_in_an_async_actor_ends_it(cluster):
    from skyrl_runtime.exceptions import AsyncioActorExit

    @ray.remote(num_cpus=0, concurrency_groups={"io": 1})
    class Leaves:
        async def ping(self):
            return "pong"

        async def leave(self):
            ray.actor.exit_actor()

        @ray.method(concurrency_group="io")
        async def leave_in_group(self):
            try:
                ray.actor.exit_actor()
            except AsyncioActorExit:
                raise  # what Ray raises there: an Exception, so the loop goes on

    for method in ("leave", "leave_in_group"):
        a = Leaves.remote()
        assert ray.get(a.ping.remote(), timeout=30) == "pong"
        with pytest.raises(ActorDiedError):
            ray.get(getattr(a, method).remote(), timeout=30)
        with pytest.raises(ActorDiedError):  # at once: no call runs after an exit
            ray.get(a.ping.remote(), timeout=30)
        assert _wait_state(a, "DEAD")["restarts"] == 0


def test_node_id_label_key_pins_an_actor_to_its_node(cluster):
    from skyrl_runtime.util.placement_group import NODE_ID_LABEL_KEY

    node = ray.nodes()[0]["NodeID"]
    assert ray.nodes()[0]["labels"][NODE_ID_LABEL_KEY] == node
    pinned = Plain.options(label_selector={NODE_ID_LABEL_KEY: node}).remote()
    assert ray.get(pinned.context.remote(), timeout=30)["get"]["node_id"] == node


def test_a_task_waiting_on_its_own_tasks_lends_its_cpu(fresh):
    fresh(num_cpus=1)  # one CPU: a parent holding it would starve its children without lending

    @ray.remote
    def child(x):
        return x + 1

    @ray.remote
    def parent(n):
        return sum(ray.get([child.remote(i) for i in range(n)]))

    @ray.remote
    def factorial(n):
        return 1 if n <= 1 else n * ray.get(factorial.remote(n - 1))

    assert ray.get(parent.remote(3), timeout=120) == 6
    assert ray.get(factorial.remote(3), timeout=120) == 6
    # A task that waits on nothing lends nothing, and one that can never fit still fails.
    @ray.remote(num_cpus=8)
    def huge():
        return 0

    @ray.remote
    def asks_too_much():
        return ray.get(huge.remote(), timeout=60)

    with pytest.raises(ray.exceptions.RayError, match="CPU"):
        ray.get(asks_too_much.remote(), timeout=120)


def test_rays_smaller_names(cluster):
    from skyrl_runtime.actor import ActorClassInheritanceException
    from skyrl_runtime.util.placement_group import VALID_PLACEMENT_GROUP_STRATEGIES, validate_placement_group

    with pytest.raises(ActorClassInheritanceException, match="Inheriting from actor classes"):
        class Derived(Plain):
            pass
    assert ray.ObjectID is ray.ObjectRef
    assert ray.wait([]) == ([], [])
    ref = Plain.remote().ping.remote()
    assert ray.wait([ref], fetch_local=True, timeout=30)[0] == [ref]
    assert set(VALID_PLACEMENT_GROUP_STRATEGIES) == {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}
    validate_placement_group([{"CPU": 1}], "SPREAD")
    for bundles, strategy in (([], "PACK"), ([{"CPU": 1}], "CLOSE"), ([{"CPU": -1}], "PACK"), ([{"CPU": 0}], "PACK")):
        with pytest.raises(ValueError, match="placement_group"):
            validate_placement_group(bundles, strategy)
    with pytest.raises(ValueError, match="strategy"):
        ray.util.placement_group([{"CPU": 1}], strategy="CLOSE")
    with pytest.raises(ValueError, match="reserves"):
        validate_placement_group([{"bundle": 1}])
    with pytest.raises(ValueError, match="reserves"):
        Plain.options(resources={"bundle": 1}).remote()
    import pickle
    pg = ray.util.placement_group([{"CPU": 1}])
    assert pickle.loads(pickle.dumps(pg)) == pg and len({pg, pickle.loads(pickle.dumps(pg))}) == 1
    # A named actor that died is not found by name, as in Ray (the head still lists it).
    named = Plain.options(name="gone", num_cpus=0).remote()
    assert ray.get_actor("gone") == named
    ray.kill(named)
    with pytest.raises(ValueError, match="dead"):
        ray.get_actor("gone")


def test_address_auto_joins_the_running_cluster(monkeypatch, tmp_path):
    from skyrl_runtime._cluster import LocalCluster
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.delenv("SKYRL_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no head of this machine's is found
    with pytest.raises(ray.exceptions.RayError, match="no running cluster"):
        ray.init(address="auto")
    local = LocalCluster(num_cpus=1)
    try:
        monkeypatch.setenv("SKYRL_ADDRESS", local.address)
        monkeypatch.setenv("SKYRL_TOKEN", local.token)
        assert ray.init(address="auto").address == local.address
        assert ray.get(Plain.remote().ping.remote(), timeout=60) == "pong"
    finally:
        ray.shutdown()
        local.stop()


def test_idle_task_executors_make_room_for_a_waiting_actor(fresh):
    fresh(num_cpus=1)

    @ray.remote
    def one():
        return 1

    assert ray.get(one.remote(), timeout=60) == 1  # its executor holds the one CPU, then idles
    # Placed where 1 CPU is free, as Ray's default actor: the idle executor lends it.
    assert ray.get(Plain.remote().ping.remote(), timeout=60) == "pong"
    assert ray.get(one.remote(), timeout=60) == 1  # and the executor takes it back for its next task


def test_handles_class_attributes_and_call_names(cluster):
    import pickle

    @ray.remote(num_cpus=0)
    class Named:
        LIMIT = 3

        @staticmethod
        def double(x):
            return 2 * x

        def name(self):
            return ray.get_runtime_context().get_task_name()

    a = Named.remote()
    same = pickle.loads(pickle.dumps(a))
    assert same == a and hash(same) == hash(a) and len({a, same}) == 1
    assert a != Named.remote()
    assert Named.LIMIT == 3 and Named.double(2) == 4  # the class's own attributes
    with pytest.raises(TypeError, match="cannot be instantiated directly"):
        Named()
    with pytest.raises(TypeError, match="at least one option"):
        ray.remote()(Named)
    assert ray.get(a.name.remote()) == "Named.name"
    assert ray.get(a.name.options(name="step-7").remote()) == "step-7"


def test_max_calls_ends_an_executor_after_that_many_tasks(fresh):
    fresh(num_cpus=2, num_gpus=1)

    @ray.remote(max_calls=2)
    def pid():
        return os.getpid(), ray.get_runtime_context().get_assigned_resources()

    pids = [ray.get(pid.remote(), timeout=60)[0] for _ in range(4)]
    assert pids[0] == pids[1] and pids[2] == pids[3] and pids[0] != pids[2]
    # Ray's default: a GPU task's process ends with it (its GPU memory with it); CPU ones stay.
    gpu = pid.options(num_gpus=1, max_calls=None)
    first, second = (ray.get(gpu.remote(), timeout=60)[0] for _ in range(2))
    assert first != second
    _, assigned = ray.get(pid.options(memory=100, max_calls=0).remote(), timeout=60)
    assert assigned == {"CPU": 1.0, "memory": 100.0}
    with pytest.raises(ValueError, match="max_calls"):
        pid.options(max_calls=-1)


@ray.remote(num_cpus=0, max_concurrency=4)
class Gate:
    def wait(self, path):
        deadline = time.monotonic() + 30
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        return "through"


def test_max_pending_calls_bounds_a_handles_calls_in_flight(cluster, tmp_path):
    # As Ray's: the limit counts this handle's calls whose results are not in yet; one more
    # is refused at .remote(), and room comes back as results do.
    gate = Gate.options(max_pending_calls=2).remote()
    opened = str(tmp_path / "open")
    first, second = gate.wait.remote(opened), gate.wait.remote(opened)
    with pytest.raises(ray.exceptions.PendingCallsLimitExceeded, match="max_pending_calls=2"):
        gate.wait.remote(opened)
    open(opened, "w").close()
    assert ray.get([first, second]) == ["through", "through"]
    assert ray.get([gate.wait.remote(opened), gate.wait.remote(opened)]) == ["through", "through"]
    # A handle from get_actor has the actor's limit too (it is in the actor's spec).
    named = Gate.options(max_pending_calls=1, name="gate-limited").remote()
    other = ray.get_actor("gate-limited")
    shut = str(tmp_path / "shut")
    held = other.wait.remote(shut)
    with pytest.raises(ray.exceptions.PendingCallsLimitExceeded, match="max_pending_calls=1"):
        other.wait.remote(shut)
    open(shut, "w").close()
    assert ray.get(held) == "through"
    ray.kill(named)
    # Without the option, no limit; a bad limit is refused naming it.
    free = Gate.remote()
    assert ray.get([free.wait.remote(opened) for _ in range(8)]) == ["through"] * 8
    for bad in (0, -2, 1.5, "2"):
        with pytest.raises(ValueError, match="max_pending_calls"):
            Gate.options(max_pending_calls=bad)
    # Tasks do not take it.
    @ray.remote
    def task():
        return 1

    with pytest.raises(TypeError, match="unknown task option max_pending_calls"):
        task.options(max_pending_calls=1)


def test_the_binding_takes_the_actor_spec_by_its_field_names(cluster):
    # The native binding fills v1::ActorSpec from a dict by the proto's field names: a new
    # option needs no binding code, and a wrong key or kind is refused naming it.
    from skyrl_runtime import _api
    from skyrl_runtime._actors import ActorHandle
    from skyrl_runtime.exceptions import RayError

    client = _api._current().client
    for spec, field in (({"class_name": "echo", "bogus": 1}, "spec.bogus"),
                        ({"class_name": "echo", "max_restarts": "2"}, "spec.max_restarts"),
                        ({"class_name": "echo", "resources": {"CPU": "1"}}, "spec.resources[CPU]"),
                        ({"class_name": "echo", "fallback_label_selectors": [{"label": {}}]},
                         "spec.fallback_label_selectors[0].label")):
        with pytest.raises(RayError, match=field.replace("[", r"\[").replace("]", r"\]")) as e:
            client.create_actor(spec)
        assert e.value.code == "INVALID_ARGUMENT"
    actor_id = client.create_actor({"class_name": "echo", "resources": {"CPU": 0}, "max_restarts": 1,
                                    "label_selector": {}, "bundle_index": None})
    info = client.describe(actor_id)
    assert info["class_name"] == "echo" and info["state"] in ("PENDING", "ALIVE"), info
    ray.kill(ActorHandle(actor_id, "echo"))
