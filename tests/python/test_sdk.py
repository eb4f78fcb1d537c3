"""skyrl_runtime over the C++ client: a local cluster from init(), C++ actors, get / wait,
errors by code, and nothing left running after shutdown()."""

import importlib
import os
import pickle
import signal
import time

import pytest

import skyrl_runtime as ray
from skyrl_runtime import exceptions


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_init_starts_a_local_cluster_and_shutdown_stops_it(cluster):
    assert ray.is_initialized()
    nodes = ray.nodes()
    assert len(nodes) == 1 and nodes[0]["Alive"]
    assert ray.cluster_resources()["CPU"] == 4
    assert ray.available_resources()["CPU"] == 4
    pids = cluster.cluster.pids()
    assert all(alive(p) for p in pids)
    ray.shutdown()
    assert not ray.is_initialized()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids), "the head and the worker are gone"
    ray.shutdown()  # twice is fine


def test_cpp_actor_calls_sync_and_in_flight(cluster):
    echo = ray.cross_language.cpp_actor_class("echo").options(num_cpus=0.5, name="e1")
    h = echo.remote()
    assert ray.get(h.echo.remote(b"hello")) == b"hello"
    assert ray.get(h.echo.remote("text")) == b"text"
    refs = [h.echo.remote(str(i)) for i in range(1000)]
    assert ray.get(refs) == [str(i).encode() for i in range(1000)]
    ready, rest = ray.wait(refs, num_returns=10, timeout=10)
    assert len(ready) == 10 and len(rest) == 990
    assert ray.available_resources()["CPU"] == 3.5, "the actor holds what it asked for"
    # A handle pickles to the same actor; get_actor finds it by name.
    again = pickle.loads(pickle.dumps(h))
    assert ray.get(again.echo.remote(b"x")) == b"x"
    assert ray.get(ray.get_actor("e1").echo.remote(b"y")) == b"y"
    with pytest.raises(ValueError, match="no actor named 'nobody'"):
        ray.get_actor("nobody")


def test_get_timeout_leaves_the_call_going(cluster):
    sleeper = ray.cross_language.cpp_actor_class("sleep").remote()
    ref = sleeper.sleep.remote(b"300")  # milliseconds
    with pytest.raises(exceptions.GetTimeoutError):
        ray.get(ref, timeout=0.01)
    assert ray.get(ref, timeout=10) is not None


def test_errors_are_classed_by_code(cluster):
    missing = ray.cross_language.cpp_actor_class("no_such_class").remote()  # returns at once, as in Ray
    with pytest.raises(exceptions.ActorDiedError) as bad_class:
        ray.get(missing.echo.remote(b""))
    assert "no_such_class" in str(bad_class.value)
    with pytest.raises(exceptions.RayError) as bad_resource:
        ray.cross_language.cpp_actor_class("echo").options(resources={"bad name!": 1}).remote()
    assert bad_resource.value.code == "INVALID_ARGUMENT"
    with pytest.raises(TypeError, match="unknown option num_gpu"):
        ray.cross_language.cpp_actor_class("echo").options(num_gpu=1)
    h = ray.cross_language.cpp_actor_class("echo").remote()
    with pytest.raises(exceptions.RayError) as unknown:
        ray.get(h.no_such_method.remote(b""))
    assert "no_such_method" in str(unknown.value)
    ray.kill(h)
    with pytest.raises(exceptions.RayActorError):
        ray.get(h.echo.remote(b"after"), timeout=30)
    # Nothing of the failed creations stays on the cluster: only the killed actor held CPU.
    assert ray.available_resources()["CPU"] == 4


def test_a_restarted_actor_answers_again(cluster):
    crash = ray.cross_language.cpp_actor_class("echo").options(max_restarts=1).remote()
    pid = int(ray.get(crash.pid.remote()))
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:
        try:
            assert int(ray.get(crash.pid.remote(), timeout=30)) != pid
            break
        except exceptions.ActorUnavailableError:
            assert time.monotonic() < deadline
    assert crash._describe()["restarts"] == 1


def test_init_twice_and_remote_say_what_to_do(cluster):
    with pytest.raises(RuntimeError, match="already initialized"):
        ray.init()
    assert ray.init(ignore_reinit_error=True) is cluster
    with pytest.raises(TypeError, match="use @remote"):
        ray.remote(3)


def test_init_finds_the_head_skyrl_start_runs_here_on_any_port(monkeypatch, tmp_path):
    import subprocess

    from skyrl_runtime import _cluster

    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.delenv("SKYRL_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    skyrl = os.path.join(_cluster.bin_dir(), "skyrl")
    port = _cluster.free_port()
    out = subprocess.run([skyrl, "start", "--head", "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    try:
        state = ray.init()
        assert state.address == f"127.0.0.1:{port}", "the started head, not 7420 nor a private cluster"
        assert state.cluster is None
        ray.shutdown()
    finally:
        subprocess.run([skyrl, "stop", "--grace", "5"], capture_output=True, timeout=60)
    assert not (tmp_path / ".skyrl" / "run" / "head.address").exists()


def test_what_ray_has_and_this_does_not_says_what_to_use_instead():
    with pytest.raises(NotImplementedError, match="torch.distributed"):
        importlib.import_module("skyrl_runtime.util.collective")
    with pytest.raises(NotImplementedError, match="ray.data is not supported"):
        ray.data
    with pytest.raises(NotImplementedError, match="ray.util.state is not supported"):
        ray.util.state
    with pytest.raises(AttributeError):
        ray.no_such_name


def test_report_step_checks_its_input_and_stores_nothing_outside_a_job(monkeypatch):
    monkeypatch.delenv("SKYRL_JOB_ID", raising=False)
    assert ray.report_step(1, {"mean_reward": 0.5, "step": 1}, start=time.time(),
                           phases={"train": (1.0, 2.0)}) is False, "not a job's driver: nothing stored"
    bad = [((-1, {}), {}, "step must be an int"), ((True, {}), {}, "step must be an int"),
           ((1, {"kl": float("nan")}), {}, r"metrics\['kl'\] must be a finite number"),
           ((1, {"kl": "high"}), {}, r"metrics\['kl'\] must be a finite number"),
           ((1, {"": 1}), {}, "a metric's name must be a str"),
           ((1, {"step": 2}), {}, "step is set by report_step itself"),
           ((1, {"phases": 2}), {}, "phases is set by report_step itself"),
           ((1, [1]), {}, "metrics must be a dict"),
           ((1, {}), {"start": float("inf")}, "start must be a finite number"),
           ((1, {}), {"phases": {"train": (2.0, 1.0)}}, r"phases\['train'\] ends before it starts"),
           ((1, {}), {"phases": {"train": 3}}, r"phases\['train'\] must be a \(start, end\) pair")]
    for args, kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            ray.report_step(*args, **kwargs)
