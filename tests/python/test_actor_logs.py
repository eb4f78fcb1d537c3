"""`skyrl logs`: an actor's log from its worker, through the head, by id or by name; --tail,
--follow until the actor ends, a dead actor's log, and the errors that name what is wrong."""

import os
import signal
import subprocess

import skyrl_runtime as ray
from skyrl_runtime import _cluster


@ray.remote
class Talker:
    def __init__(self):
        print("talker started", flush=True)

    def say(self, n, prefix="line"):
        for i in range(n):
            print(f"{prefix} {i}", flush=True)
        return n

    def pid(self):
        return os.getpid()


def skyrl(cluster, *args, timeout=60):
    local = cluster.cluster
    env = {**os.environ, "SKYRL_ADDRESS": local.address, "SKYRL_TOKEN": local.token}
    return subprocess.run([os.path.join(_cluster.bin_dir(), "skyrl"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_logs_by_id_and_by_name_with_a_tail(cluster):
    t = Talker.options(name="talker", namespace="logs").remote()
    assert ray.get(t.say.remote(5)) == 5
    whole = skyrl(cluster, "logs", t._actor_id)
    assert whole.returncode == 0, whole.stderr
    lines = [line for line in whole.stdout.splitlines() if line.startswith(("talker", "line"))]
    assert lines == ["talker started"] + [f"line {i}" for i in range(5)]
    tail = skyrl(cluster, "logs", "talker", "--namespace", "logs", "--tail", "2")
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout.splitlines() == ["line 3", "line 4"]


def test_follow_prints_new_lines_and_ends_with_the_actor(cluster):
    t = Talker.remote()
    ray.get(t.say.remote(1, "before"))
    local = cluster.cluster
    env = {**os.environ, "SKYRL_ADDRESS": local.address, "SKYRL_TOKEN": local.token}
    follow = subprocess.Popen([os.path.join(_cluster.bin_dir(), "skyrl"), "logs", t._actor_id, "--follow",
                               "--tail", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follow.stdout.readline() == "before 0\n"
        ray.get(t.say.remote(3, "after"))
        assert [follow.stdout.readline() for _ in range(3)] == [f"after {i}\n" for i in range(3)]
        os.kill(ray.get(t.pid.remote()), signal.SIGKILL)
        assert follow.wait(30) == 0, follow.stderr.read()
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    # Dead, its log stays readable while its worker keeps it.
    after = skyrl(cluster, "logs", t._actor_id, "--tail", "3")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == [f"after {i}" for i in range(3)]


def test_errors_name_what_is_wrong(cluster):
    missing = skyrl(cluster, "logs", "no-such-actor")
    assert missing.returncode == 1
    assert "no-such-actor" in missing.stderr, missing.stderr
    bad_tail = skyrl(cluster, "logs", "x", "--tail", "-3")
    assert bad_tail.returncode == 2 and "--tail" in bad_tail.stderr
    local = cluster.cluster
    env = {**os.environ, "SKYRL_ADDRESS": local.address, "SKYRL_TOKEN": "wrong-token-wrong-token-wrong"}
    t = Talker.remote()
    ray.get(t.say.remote(1))
    denied = subprocess.run([os.path.join(_cluster.bin_dir(), "skyrl"), "logs", t._actor_id], env=env,
                            capture_output=True, text=True, timeout=60)
    assert denied.returncode == 1 and "token" in denied.stderr.lower() and "line 0" not in denied.stdout
