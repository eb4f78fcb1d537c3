"""Who owns what, and for how long: a job's actors (and the actors they make) run for the job
and end with it; a plain driver's actors and placement groups end with the driver, as in Ray;
calls have no deadline of their own; named get_if_exists under a race; pg.ready()."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import skyrl_runtime as ray
from skyrl_runtime import _cluster, _native, exceptions
from skyrl_runtime.util.placement_group import placement_group


def _state(name):
    """The named actor's state, or None when no actor has the name."""
    try:
        return ray.get_actor(name)._describe()["state"]
    except ValueError:
        return None


def _eventually(check, seconds=20):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{check.__doc__ or check} did not hold within {seconds} s"
        time.sleep(0.05)


def test_a_job_s_actors_and_the_actors_they_make_run_for_the_job_and_end_with_it(cluster, tmp_path):
    project = tmp_path / "job"
    project.mkdir()
    (project / "main.py").write_text(textwrap.dedent("""
        import os
        import skyrl_runtime as ray
        ray.init()
        ctx = ray.get_runtime_context

        @ray.remote(num_cpus=0.25)
        class Child:
            def where(self):
                return ctx().get_job_id(), ctx().get_node_id()

        @ray.remote(num_cpus=0.25)
        class Parent:
            def spawn(self):
                self.child = Child.options(name="grandchild").remote()
                return ray.get(self.child.where.remote())

            def job(self):
                return ctx().get_job_id()

        parent = Parent.options(name="child").remote()
        kept = Parent.options(name="kept", lifetime="detached").remote()
        print("DRIVER", os.environ["SKYRL_JOB_ID"])
        print("PARENT", ray.get(parent.job.remote()))
        print("GRANDCHILD", *ray.get(parent.spawn.remote()))
        print("DETACHED", ray.get(kept.job.remote()))
    """))
    local = cluster.cluster
    env = {**os.environ, "SKYRL_ADDRESS": local.address, "SKYRL_TOKEN": local.token}
    out = subprocess.run([os.path.join(_cluster.bin_dir(), "skyrl"), "job", "submit", "--working-dir", str(project),
                          "--", "/usr/bin/python3", "main.py"], env=env, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    said = dict(line.split(" ", 1) for line in text.splitlines() if line.split(" ", 1)[0] in
                ("DRIVER", "PARENT", "GRANDCHILD", "DETACHED"))
    job = said["DRIVER"]
    assert job.startswith("job-")
    assert said["PARENT"] == job, "an actor the driver made runs for the job"
    grandchild_job, grandchild_node = said["GRANDCHILD"].split(" ")
    assert grandchild_job == job, "and so does the actor that actor made"
    assert grandchild_node in {n["NodeID"] for n in ray.nodes()}, "get_node_id() names a node of the cluster"
    assert said["DETACHED"] == "None", "a detached actor outlives the job, so it runs for none"
    # The job is over: its actors and theirs are killed; the detached one stays.
    _eventually(lambda: _state("child") in (None, "DEAD") and _state("grandchild") in (None, "DEAD"))
    assert _state("kept") == "ALIVE"
    ray.kill(ray.get_actor("kept"))
    _eventually(lambda: ray.available_resources()["CPU"] == 4)


def test_a_plain_driver_s_actors_and_groups_end_with_it(cluster):
    """A driver that joins a running cluster (not a job) and exits without shutdown(): what it
    made dies with it, unless detached."""
    script = textwrap.dedent("""
        import skyrl_runtime as ray
        from skyrl_runtime.util.placement_group import placement_group
        ray.init()

        @ray.remote(num_cpus=0.5)
        class A:
            def ping(self):
                return 1

        owned, kept = A.options(name="owned").remote(), A.options(name="kept", lifetime="detached").remote()
        pg = placement_group([{"CPU": 1}], name="owned-group")
        ray.get(pg.ready(), timeout=30)
        gone = A.options(name="killed-early").remote()
        ray.kill(gone)
        print("PINGS", ray.get([owned.ping.remote(), kept.ping.remote()]))
        print("FREE", ray.available_resources()["CPU"])
    """)
    local = cluster.cluster
    env = {**os.environ, "SKYRL_ADDRESS": local.address, "SKYRL_TOKEN": local.token}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PINGS [1, 1]" in out.stdout
    assert "FREE 2.0" in out.stdout, "while it ran: two actors of 0.5 and a group of 1"
    _eventually(lambda: _state("owned") in (None, "DEAD"))
    assert _state("kept") == "ALIVE", "a detached actor outlives its driver"
    _eventually(lambda: ray.available_resources()["CPU"] == 3.5)  # the group is gone too
    ray.kill(ray.get_actor("kept"))


def test_a_call_has_no_deadline_unless_one_is_asked_for(cluster):
    sleeper = ray.cross_language.cpp_actor_class("sleep").remote()
    ref = sleeper.sleep.remote(b"700")  # milliseconds
    with pytest.raises(exceptions.GetTimeoutError):
        ray.get(ref, timeout=0.1)  # bounds the wait, not the call
    assert ray.get(ref) is not None
    # The client's call_timeout bounds requests to the head, not actor calls: a call that
    # names no timeout outlives it, and one that names a timeout gets that.
    native = _native.Client.connect(cluster.address, cluster.token, call_timeout=0.2)
    assert native.call_async(sleeper._actor_id, "sleep", b"700").result() is not None
    with pytest.raises(_native.Error) as e:
        native.call_async(sleeper._actor_id, "sleep", b"700", timeout=0.2).result()
    assert e.value.code == "DEADLINE_EXCEEDED"
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="call_timeout"):
            _native.Client.connect(cluster.address, cluster.token, call_timeout=bad)


def test_get_if_exists_from_racing_callers_gives_one_actor(cluster):
    @ray.remote(num_cpus=0)
    class Named:
        def pid(self):
            return os.getpid()

    for round_ in range(4):
        name = f"raced-{round_}"
        start = threading.Barrier(6)
        handles, errors = [], []

        def make():
            start.wait()
            try:
                handles.append(Named.options(name=name, get_if_exists=True).remote())
            except BaseException as e:  # noqa: BLE001 - asserted below
                errors.append(e)

        threads = [threading.Thread(target=make) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert len({h._actor_id for h in handles}) == 1, "every caller got the one actor"
        assert len(set(ray.get([h.pid.remote() for h in handles], timeout=60))) == 1


def test_ready_resolves_once_the_group_is_placed(cluster):
    hog = ray.cross_language.cpp_actor_class("echo").options(num_cpus=3).remote()
    assert ray.get(hog.echo.remote(b"x"), timeout=30) == b"x"
    pg = placement_group([{"CPU": 2}], strategy="PACK")  # fits the cluster, not what is free now
    assert pg.bundle_specs == [{"CPU": 2.0}]
    ref = pg.ready()
    with pytest.raises(exceptions.GetTimeoutError):
        ray.get(ref, timeout=0.5)
    assert pg.wait(timeout_seconds=0.2) is False
    ray.kill(hog)
    assert ray.get(ref, timeout=30) is pg
    assert pg.wait(timeout_seconds=1) is True


def test_a_dead_actor_s_error_says_why(cluster):
    @ray.remote(num_cpus=0)
    class Leaves:
        def leave(self):
            print("leaving with code 3 on purpose", flush=True)
            os._exit(3)

        def ping(self):
            return 1

    a = Leaves.remote()
    assert ray.get(a.ping.remote(), timeout=30) == 1
    with pytest.raises(exceptions.RayActorError):
        ray.get(a.leave.remote(), timeout=30)
    with pytest.raises(exceptions.RayActorError) as e:
        ray.get(a.ping.remote(), timeout=30)
    assert "exit code 3" in str(e.value), str(e.value)
    assert "leaving with code 3 on purpose" in str(e.value), "with the last lines of its log"


def test_get_actor_looks_in_the_namespace_asked_for(cluster):
    a = ray.cross_language.cpp_actor_class("echo").options(name="twin", namespace="ns1", num_cpus=0).remote()
    b = ray.cross_language.cpp_actor_class("echo").options(name="twin", num_cpus=0).remote()
    assert ray.get(a.echo.remote(b"a"), timeout=30) == b"a" and ray.get(b.echo.remote(b"b"), timeout=30) == b"b"
    assert ray.get_actor("twin", namespace="ns1")._actor_id == a._actor_id
    assert ray.get_actor("twin")._actor_id == b._actor_id, "init()'s namespace by default"
    with pytest.raises(ValueError, match="no actor named 'twin' in namespace 'ns2'"):
        ray.get_actor("twin", namespace="ns2")


def test_a_local_cluster_ends_with_the_process_that_started_it(tmp_path):
    """init() with no cluster anywhere, and the process exits without shutdown()."""
    script = "import skyrl_runtime as ray\nray.init(address='local')\nprint('PIDS', *ray._api._state.cluster.pids())\n"
    env = {k: v for k, v in os.environ.items() if k not in ("SKYRL_ADDRESS", "SKYRL_TOKEN")}
    out = subprocess.run([sys.executable, "-c", script], env={**env, "HOME": str(tmp_path)}, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    pids = [int(p) for line in out.stdout.splitlines() if line.startswith("PIDS ") for p in line.split()[1:]]
    assert len(pids) == 2, out.stdout

    def running(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def gone():
        """the head and the worker are gone"""
        return not any(running(p) for p in pids)
    _eventually(gone, 15)
