"""Per-method options (ray.method: num_returns, max_task_retries), num_returns of tasks,
ray.util.ActorPool and ray.util.queue, on a real local cluster."""

import asyncio
import os
import pickle
import threading
import time

import pytest

import skyrl_runtime as ray
from skyrl_runtime import exceptions
from skyrl_runtime.util import ActorPool
from skyrl_runtime.util.queue import Empty, Full, Queue


@ray.remote(num_cpus=0.5)
class Splitter:
    @ray.method(num_returns=2)
    def pair(self, x):
        return x, x * 10

    @ray.method(num_returns=0)
    def fire(self):
        return "dropped"

    @ray.method(num_returns=2)
    def wrong(self):
        return 1, 2, 3

    @ray.method(num_returns=2)
    def fails(self):
        raise KeyError("no pair")

    def triple(self):
        return "a", "b", "c"

    @ray.method(max_task_retries=1)
    def die_once(self, marker):
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return "survived"

    def die_once_plain(self, marker):
        return self.die_once(marker)

    @ray.method(num_returns=2)
    def slow_pair(self, x):
        time.sleep(0.3)
        return x, -x

    def pair_through(self, other, x):
        a, b = other.pair.remote(x)
        return ray.get([a, b])


def test_num_returns_splits_one_call_into_refs(cluster):
    s = Splitter.remote()
    a, b = s.pair.remote(4)
    assert ray.get(b) == 40 and ray.get(a) == 4, "each ref its own value, read in any order"
    assert ray.get([a, b]) == [4, 40]
    ready, _ = ray.wait([a, b], num_returns=2, timeout=10)
    assert len(ready) == 2
    assert s.fire.remote() is None, "num_returns=0: nothing to get"
    assert ray.get(s.triple.remote()) == ("a", "b", "c"), "undecorated: one ref"
    x, y, z = s.triple.options(num_returns=3).remote()
    assert ray.get([z, x]) == ["c", "a"]
    one = s.pair.options(num_returns=1).remote(2)
    assert ray.get(one) == (2, 20), "options() overrides the decorator"

    for ref in s.wrong.remote():
        with pytest.raises(ValueError, match=r"returned 3 values, but num_returns=2"):
            ray.get(ref)
    for ref in s.fails.remote():
        with pytest.raises(KeyError, match="no pair"):
            ray.get(ref)
    assert ray.get(s.pair.remote(1)[1]) == 10, "the actor serves on after a method's error"

    # The refs of one call read at once from two threads: one waits on the call, both get theirs.
    for _ in range(3):
        refs = s.slow_pair.remote(7)
        got, errors = {}, []

        def read(i):
            try:
                got[i] = ray.get(refs[i], timeout=30)
            except BaseException as e:  # noqa: BLE001 - asserted below
                errors.append(e)

        readers = [threading.Thread(target=read, args=(i,)) for i in (0, 1)]
        for t in readers:
            t.start()
        for t in readers:
            t.join(60)
        assert not errors and got == {0: 7, 1: -7}, (errors, got)


def test_method_options_travel_with_handles_and_to_get_actor(cluster):
    s = Splitter.options(name="splitter").remote()
    t = Splitter.remote()
    assert ray.get(t.pair_through.remote(s, 3)) == [3, 30], "a handle passed to an actor keeps num_returns"
    found = ray.get_actor("splitter")
    a, b = found.pair.remote(5)
    assert ray.get([a, b]) == [5, 50], "get_actor reads the named actor's method options from the head"
    # An actor of a class without options: get_actor finds none on the head, one ref a call.
    Doubler.options(name="doubler").remote()
    assert ray.get(ray.get_actor("doubler").double.remote(3)) == 6
    ray.kill(s)


def test_per_method_max_task_retries_carries_its_call_across_a_restart(cluster, tmp_path):
    s = Splitter.options(max_restarts=2).remote()
    assert ray.get(s.die_once.remote(str(tmp_path / "a")), timeout=60) == "survived"
    with pytest.raises(exceptions.RayActorError):
        ray.get(s.die_once_plain.remote(str(tmp_path / "b")), timeout=60)


def test_method_options_are_checked_by_name():
    with pytest.raises(TypeError, match="unknown option num_return"):
        ray.method(num_return=2)
    with pytest.raises(NotImplementedError, match="tensor_transport is not supported"):
        ray.method(tensor_transport="nccl")
    with pytest.raises(NotImplementedError, match="generators"):
        ray.method(num_returns="streaming")
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="num_returns must be an int >= 0"):
            ray.method(num_returns=bad)
    with pytest.raises(ValueError, match="max_task_retries must be an int >= -1"):
        ray.method(max_task_retries=-2)
    with pytest.raises(TypeError, match="with keywords"):
        ray.method(lambda self: None)
    with pytest.raises(ValueError, match="num_returns must be an int"):
        ray.remote(num_returns=-1)(lambda: None)
    # A task's name is checked with the task options; an actor takes the option too.
    with pytest.raises(TypeError, match="options: name must be a str"):
        ray.remote(name=7)(lambda: None)
    with pytest.raises(TypeError, match="unknown task option namespace"):
        ray.remote(namespace="x")(lambda: None)

    class Base:
        @ray.method(num_returns=2)
        def f(self):
            return 1, 2

        @ray.method(num_returns=3)
        def g(self):
            return 1, 2, 3

    class Sub(Base):
        def f(self):  # overridden without the decorator: one value again
            return 1

    from skyrl_runtime import _methods
    assert _methods.of_class(Base) == {"f": {"num_returns": 2}, "g": {"num_returns": 3}}
    assert _methods.of_class(Sub) == {"g": {"num_returns": 3}}


def test_tasks_take_num_returns(cluster):
    @ray.remote(num_returns=2, num_cpus=0.5)
    def halves(x):
        return x // 2, x - x // 2

    a, b = halves.remote(9)
    assert ray.get([a, b]) == [4, 5]

    @ray.remote(num_cpus=0.5)
    def three():
        return 1, 2, 3

    c, d, e = three.options(num_returns=3).remote()
    assert ray.get([e, d, c]) == [3, 2, 1]
    assert ray.get(three.remote()) == (1, 2, 3)
    with pytest.raises(ValueError, match="returned 3 values, but num_returns=2"):
        ray.get(three.options(num_returns=2).remote()[0])


@ray.remote(num_cpus=0.5)
class Doubler:
    def double(self, x):
        time.sleep(0.05 * (x % 3))  # finish out of order
        return 2 * x

    def fail_on(self, x):
        if x == 3:
            raise RuntimeError("three")
        return x


def test_actor_pool_runs_each_actor_one_at_a_time_in_order_or_as_ready(cluster):
    actors = [Doubler.remote() for _ in range(2)]
    pool = ActorPool(actors)
    assert list(pool.map(lambda a, v: a.double.remote(v), range(8))) == [2 * v for v in range(8)]
    assert sorted(pool.map_unordered(lambda a, v: a.double.remote(v), range(8))) == [2 * v for v in range(8)]

    for v in range(5):
        pool.submit(lambda a, v: a.double.remote(v), v)
    assert not pool.has_free(), "2 running, 3 queued"
    assert [pool.get_next() for _ in range(5)] == [0, 2, 4, 6, 8]
    assert not pool.has_next() and pool.has_free()
    with pytest.raises(StopIteration):
        pool.get_next()

    # A submission's exception re-raises from its get, and its actor goes back to the pool.
    for v in (1, 3, 5):
        pool.submit(lambda a, v: a.fail_on.remote(v), v)
    assert pool.get_next() == 1
    with pytest.raises(RuntimeError, match="three"):
        pool.get_next()
    assert pool.get_next() == 5

    # Timeouts: the result stays unless ignore_if_timedout drops it.
    pool.submit(lambda a, v: a.double.remote(v), 2)  # sleeps 0.1 s
    with pytest.raises(TimeoutError):
        pool.get_next(timeout=0)
    assert pool.get_next(timeout=10) == 4
    pool.submit(lambda a, v: a.double.remote(v), 2)
    with pytest.raises(TimeoutError, match="dropped"):
        pool.get_next(timeout=0, ignore_if_timedout=True)
    assert not pool.has_next()

    # Actors leave and join.
    idle = pool.pop_idle()
    assert idle is not None and pool.pop_idle() is not None and pool.pop_idle() is None
    pool.submit(lambda a, v: a.double.remote(v), 21)
    assert not pool.has_next(), "no actor: the submission waits"
    pool.push(idle)
    assert pool.get_next(timeout=10) == 42
    with pytest.raises(ValueError, match="already in this pool"):
        pool.push(idle)
    with pytest.raises(ValueError, match="already in this pool"):
        pool.push(pickle.loads(pickle.dumps(idle)))  # another handle of the same actor
    with pytest.raises(TypeError, match="must return an ObjectRef"):
        pool.submit(lambda a, v: v, 1)
    assert pool.has_free(), "a bad fn gives its actor back"

    # A queued submission whose fn fails when its turn comes: its get_next raises that, and
    # the results before and after it are all there.
    one = ActorPool([pool.pop_idle()])
    one.submit(lambda a, v: a.double.remote(v), 1)
    one.submit(lambda a, v: v, 2)  # queued; returns no ref
    one.submit(lambda a, v: a.double.remote(v), 3)
    assert one.get_next(timeout=30) == 2
    with pytest.raises(TypeError, match="must return an ObjectRef"):
        one.get_next(timeout=30)
    assert one.get_next(timeout=30) == 6
    assert not one.has_next() and one.has_free()


@ray.remote(num_cpus=0.5)
class Producer:
    def fill(self, q, n):
        for i in range(n):
            q.put(i)
        return n


def test_queue_is_fifo_across_processes_and_blocks_with_timeouts(cluster):
    q = Queue()
    assert q.empty() and q.qsize() == 0 and not q.full()
    producer = Producer.remote()
    done = producer.fill.remote(q, 50)
    got = [q.get(timeout=30) for _ in range(50)]
    assert got == list(range(50)), "every item once, in order, from another process"
    assert ray.get(done) == 50
    with pytest.raises(Empty):
        q.get_nowait()
    t0 = time.monotonic()
    with pytest.raises(Empty):
        q.get(timeout=0.3)
    assert time.monotonic() - t0 >= 0.3

    # A getter that waits is woken by a put from another thread, at once: not at the end of
    # its 0.5 s wait in the actor (0.35 s after the put), when it would ask again.
    out = []
    waiter = threading.Thread(target=lambda: out.append((q.get(timeout=30), time.monotonic())))
    waiter.start()
    time.sleep(0.15)
    put_at = time.monotonic()
    q.put({"rollout": [1, 2]})
    waiter.join(30)
    assert out and out[0][0] == {"rollout": [1, 2]}
    assert out[0][1] - put_at < 0.2, f"woken {out[0][1] - put_at:.3f} s after the put"

    q.put_nowait_batch([1, 2, 3])
    assert len(q) == 3 and q.get_nowait_batch(2) == [1, 2]
    with pytest.raises(Empty, match="fewer than 2"):
        q.get_nowait_batch(2)
    assert q.get_nowait() == 3
    assert asyncio.run(_async_round_trip(q)) == "async"
    with pytest.raises(ValueError, match="timeout"):
        q.get(timeout=-1)
    with pytest.raises(ValueError, match="num_items"):
        q.get_nowait_batch(-1)
    with pytest.raises(TypeError, match="num_items"):
        q.get_nowait_batch("2")
    assert asyncio.run(_many_async_getters(q, 12)) == list(range(12))
    q.shutdown()
    assert q.actor is None
    with pytest.raises(RuntimeError, match="shut down"):
        q.qsize()


async def _many_async_getters(q, n):
    """n coroutines waiting in get_async, more than the loop's executor has threads, and then
    the puts that feed them: every getter gets one item."""
    getters = [asyncio.ensure_future(q.get_async(timeout=60)) for _ in range(n)]
    await asyncio.sleep(0.3)
    for i in range(n):
        await asyncio.wait_for(q.put_async(i), 30)
    return sorted(await asyncio.wait_for(asyncio.gather(*getters), 60))


async def _async_round_trip(q):
    await q.put_async("async")
    return await q.get_async(timeout=10)


def test_a_bounded_queue_is_full_until_room_comes(cluster):
    q = Queue(maxsize=2)
    q.put("a")
    q.put("b")
    assert q.full()
    with pytest.raises(Full):
        q.put_nowait("c")
    with pytest.raises(Full):
        q.put("c", timeout=0.2)
    with pytest.raises(Full, match="cannot fit"):
        q.put_nowait_batch(["x", "y", "z"])
    threading.Timer(0.3, q.get).start()
    q.put("c", timeout=30)  # waits for the timer's get
    assert [q.get_nowait(), q.get_nowait()] == ["b", "c"]
    with pytest.raises(TypeError, match="maxsize must be an int"):
        Queue(maxsize="2")


def test_method_options_read_from_the_head_are_checked():
    from skyrl_runtime import _methods

    class Kv:
        def __init__(self, raw):
            self.raw = raw

        def kv_get(self, key):
            assert key == _methods.KV_PREFIX + "actor-1"
            if self.raw is None:
                raise exceptions.RayError("no such key", "NOT_FOUND")
            return self.raw

    assert _methods.load(Kv(None), "actor-1") == {}
    assert _methods.load(Kv(b'{"f": {"num_returns": 2}}'), "actor-1") == {"f": {"num_returns": 2}}
    for raw, error, words in ((b"not json", ValueError, "are not JSON"), (b"[1]", ValueError, "not a dict"),
                              (b'{"f": {"num_returns": -3}}', ValueError, "num_returns must be"),
                              (b'{"f": {"color": 1}}', TypeError, "unknown option color")):
        with pytest.raises(error, match=words):
            _methods.load(Kv(raw), "actor-1")
    with pytest.raises(exceptions.RayError):
        class Down:
            def kv_get(self, key):
                raise exceptions.RayError("head unreachable", "UNAVAILABLE")
        _methods.load(Down(), "actor-1")
