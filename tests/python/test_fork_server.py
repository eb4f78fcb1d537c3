"""Python actors forked by the worker's fork server (runtime/worker/fork_server.h,
skyrl_runtime/_forkserver.py), against real skyrl-head and skyrl-worker processes: each actor a
child of its worker in a group of its own, with its own log, environment, working directory,
sys.path and random state; fresh interpreters where the fork cannot honour a setting; the
server replaced when it dies; its actors gone with their worker."""

import os
import signal
import sys
import time

import pytest

import skyrl_runtime as ray
from skyrl_runtime.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=0)
class Probe:
    def __init__(self, marker=""):
        print(f"constructed {marker}", flush=True)

    def facts(self):
        import numpy

        from skyrl_runtime import _host
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read().split(b"\0")
        return {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "cwd": os.getcwd(),
                "cmdline": [w.decode() for w in cmdline if w], "env": dict(os.environ), "path": list(sys.path),
                "stdin": os.readlink("/proc/self/fd/0"), "draws": numpy.random.randint(0, 2**31, 4).tolist(),
                "class": _host.actor_class.__name__, "call": _host.current.call[0]}

    def exit(self, code):
        os._exit(code)


def _worker_pid(cluster):
    return cluster.cluster._procs[1].pid  # head first, then the worker (_cluster.py)


def _forked(facts):
    return "--fork-server" in facts["cmdline"]


def _server_pids(log_dir):
    """The fork servers' pids, oldest first, from the log they start with."""
    path = os.path.join(log_dir, "fork-server.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(line.split()[4].rstrip(",")) for line in f if line.startswith("skyrl fork server: pid")]


def _wait_gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True  # a zombie: ended, not yet reaped
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_actors_are_forked_children_of_the_worker_each_its_own(cluster):
    a, b = Probe.remote("one"), Probe.remote("two")
    fa, fb = ray.get([a.facts.remote(), b.facts.remote()])
    worker = _worker_pid(cluster)
    for f in (fa, fb):
        assert _forked(f), f["cmdline"]
        assert f["ppid"] == worker  # re-parented to the worker, which waits for it
        assert f["pgid"] == f["pid"]  # a group of its own: a kill reaches its children
        assert f["stdin"] == "/dev/null"
        assert f["env"]["SKYRL_ACTOR_ID"] == f["env"]["SKYRL_ACTOR_ID"].strip() != ""
        assert f["env"]["CUDA_VISIBLE_DEVICES"] == ""
        assert f["env"]["PYTHONPATH"].split(os.pathsep)[0].endswith("python")  # the package first
    assert fa["pid"] != fb["pid"]
    assert fa["env"]["SKYRL_ACTOR_ID"] != fb["env"]["SKYRL_ACTOR_ID"]
    assert fa["draws"] != fb["draws"]  # numpy's random state is not the server's, shared
    # The spare's rehearsal (a class of the server's, made and called) left nothing behind.
    assert fa["class"] == fb["class"] == "Probe"
    assert fa["call"] == fb["call"] == 1  # each actor's first call
    log_dir = os.path.join(cluster.cluster.dir, "actors")
    with open(os.path.join(log_dir, fa["env"]["SKYRL_ACTOR_ID"] + ".log")) as f:
        assert "constructed one" in f.read()
    with open(os.path.join(log_dir, fb["env"]["SKYRL_ACTOR_ID"] + ".log")) as f:
        assert "constructed one" not in f.read()
    with open(os.path.join(log_dir, "fork-server.log")) as f:
        assert "Warning" not in f.read()  # run as the package's module, not through runpy


def test_env_vars_working_dir_and_pythonpath_reach_a_forked_actor(cluster, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "fork_helper.py").write_text("VALUE = 41\n")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "fork_extra.py").write_text("VALUE = 1\n")

    @ray.remote(num_cpus=0)
    class Uses:
        def value(self):
            import fork_extra
            import fork_helper
            return fork_helper.VALUE + fork_extra.VALUE, os.getcwd(), sys.path, dict(os.environ)

    env = {"working_dir": str(work), "env_vars": {"FORK_TEST": "yes", "PYTHONPATH": str(extra)}}
    value, cwd, path, environ = ray.get(Uses.options(runtime_env=env).remote().value.remote())
    assert value == 42
    assert path[0] == cwd  # as `python3 -m` started in the folder
    assert str(extra) in path
    assert environ["FORK_TEST"] == "yes"
    assert environ["PYTHONPATH"].split(os.pathsep)[1] == str(extra)
    assert environ["SKYRL_WORKING_DIR"] == cwd
    facts = ray.get(Probe.options(runtime_env=env).remote().facts.remote())
    assert _forked(facts)


def test_settings_read_at_interpreter_start_get_a_fresh_interpreter(cluster):
    facts = ray.get(Probe.options(runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}}).remote().facts.remote())
    assert not _forked(facts), facts["cmdline"]
    assert "--class" in facts["cmdline"]
    assert facts["env"]["OMP_NUM_THREADS"] == "1"
    assert facts["ppid"] == _worker_pid(cluster)


def test_a_forked_actors_exit_code_is_its_death_reason(cluster):
    p = Probe.remote()
    assert _forked(ray.get(p.facts.remote()))
    p.exit.remote(7)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = p._describe()
        if info["state"] == "DEAD":
            break
        time.sleep(0.05)
    assert "exit code 7" in info["death_reason"], info


def test_a_killed_fork_server_is_replaced(cluster):
    log_dir = os.path.join(cluster.cluster.dir, "actors")
    assert _forked(ray.get(Probe.remote().facts.remote()))
    first = _server_pids(log_dir)
    assert len(first) == 1
    os.kill(first[0], signal.SIGKILL)
    assert _wait_gone(first[0])
    # The next start finds the server gone and spawns a fresh interpreter; the one after is
    # forked by a new server.
    after = ray.get(Probe.remote().facts.remote())
    assert after["ppid"] == _worker_pid(cluster)
    again = ray.get(Probe.remote().facts.remote())
    assert _forked(again), again["cmdline"]
    pids = _server_pids(log_dir)
    assert len(pids) == 2 and pids[1] != first[0]


def test_off_by_flag_and_gone_with_a_killed_worker(cluster, add_worker):
    fresh = add_worker("--python-fork-server=false", "--resources", "CPU=2")
    on_fresh = ray.get(Probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(fresh, soft=False))
                       .remote().facts.remote())
    assert not _forked(on_fresh)
    forking = add_worker("--resources", "CPU=2")
    facts = ray.get(Probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(forking, soft=False))
                    .remote().facts.remote())
    assert _forked(facts)
    worker = facts["ppid"]
    os.kill(worker, signal.SIGKILL)
    # Forked actors watch for their worker like spawned ones (re-parenting): none outlives it.
    assert _wait_gone(facts["pid"]), "a forked actor outlived its SIGKILLed worker"


@pytest.mark.parametrize("config, error", [({"python_fork_server": "no"}, TypeError),
                                           ("python_fork_server", TypeError)])
def test_bad_system_config_is_refused_naming_it(monkeypatch, tmp_path, config, error):
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(error, match="_system_config"):
        ray.init(address="local", _system_config=config)
    assert not ray.is_initialized()


def test_system_config_turns_the_fork_server_off(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    ray.init(address="local", num_cpus=2, _system_config={"python_fork_server": False})
    try:
        assert not _forked(ray.get(Probe.remote().facts.remote()))
    finally:
        ray.shutdown()
