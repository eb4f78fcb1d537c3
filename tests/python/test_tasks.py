"""@remote functions: tasks on pooled worker processes; put, get_gpu_ids, runtime context."""

import os

import pytest

import skyrl_runtime as ray


@ray.remote
def square(x):
    return x * x


@ray.remote(num_cpus=0.5)
def where():
    ctx = ray.get_runtime_context()
    return os.getpid(), ctx.get_actor_id(), ctx.get_node_id(), ray.get_gpu_ids()


@ray.remote
def fail(msg):
    raise ValueError(msg)


@ray.remote(num_cpus=0.25)
def spawn_and_call():
    """A task that creates an actor and calls it, as SkyRL's entrypoint task does."""

    @ray.remote(num_cpus=0)
    class Adder:
        def add(self, a, b):
            return a + b

    a = Adder.remote()
    return ray.get(a.add.remote(2, 3))


def test_tasks_run_on_pooled_processes_not_in_the_driver(cluster):
    assert ray.get([square.remote(i) for i in range(200)]) == [i * i for i in range(200)]
    pids = {p for p, _, _, _ in ray.get([where.remote() for _ in range(50)])}
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= 8, "a pool of processes, not one per task (4 CPUs / 0.5 each)"
    _, actor_id, node_id, gpus = ray.get(where.remote())
    assert actor_id and node_id == ray.nodes()[0]["NodeID"] and gpus == []


def test_task_errors_and_refs_as_arguments(cluster):
    with pytest.raises(ValueError, match="from the task"):
        ray.get(fail.remote("from the task"))
    ref = ray.put(7)
    assert ray.get(ref) == 7
    assert ray.get(square.remote(ref)) == 49
    assert ray.get(square.remote(square.remote(3))) == 81, "a ref from another task is resolved first"
    with pytest.raises(TypeError, match="remote function"):
        square(3)
    with pytest.raises(TypeError, match="unknown task option"):
        square.options(max_restarts=1)


def test_a_task_creates_actors_and_calls_them(cluster):
    assert ray.get(spawn_and_call.remote(), timeout=60) == 5
    assert ray.get_runtime_context().get_actor_id() is None
    assert ray.get_gpu_ids() == []


def test_a_task_whose_process_dies_is_retried(cluster, tmp_path):
    marker = str(tmp_path / "died-once")

    @ray.remote(num_cpus=0.5)
    def dies_once(path):
        if not os.path.exists(path):
            open(path, "w").close()
            os._exit(1)
        return "second try"

    assert ray.get(dies_once.remote(marker), timeout=60) == "second try"
    os.unlink(marker)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(dies_once.options(max_retries=0).remote(marker), timeout=60)


def test_refs_inside_arguments_travel_resolved(cluster):
    @ray.remote
    def add_all(refs):
        return sum(ray.get(refs))

    @ray.remote
    def seven():
        return 7

    refs = [seven.remote(), ray.put(5), seven.remote()]
    assert ray.get(add_all.remote(refs)) == 19, "refs nested in a list: get() works in the task"
