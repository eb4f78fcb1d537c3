"""runtime_env working_dir: a local folder packed by the SDK, stored once on the head by its
content, fetched and unpacked by each worker that runs an actor or task with it; the process
starts in it and imports its modules first."""

import os
import sys
import time

import pytest

import skyrl_runtime as ray
from skyrl_runtime import exceptions


def _project(tmp_path, greeting):
    d = tmp_path / f"project-{greeting}"
    (d / "pkg").mkdir(parents=True)
    (d / "data.txt").write_text(greeting)
    (d / "pkg" / "__init__.py").write_text("")
    (d / "pkg" / "greeter.py").write_text(
        "import os\n\n"
        "class Greeter:\n"
        "    def greet(self):\n"
        "        with open('data.txt') as f:\n"
        "            return f.read(), os.getcwd(), os.getpid()\n\n"
        "def shout(word):\n"
        "    return word.upper()\n")
    return d


@ray.remote
class Reader:
    def read(self, name):
        from pkg.greeter import shout  # a module of the working_dir, imported by name
        with open(name) as f:
            return shout(f.read())


@ray.remote
def read_in_task(name):
    with open(name) as f:
        return f.read(), os.getcwd()


def test_working_dir_reaches_an_actor_on_a_second_worker(cluster, add_worker, tmp_path):
    project = _project(tmp_path, "hello")
    node = add_worker("--resources", "CPU=2,second=1")
    r = Reader.options(resources={"second": 1}, num_cpus=0, runtime_env={"working_dir": str(project)}).remote()
    assert ray.get(r.read.remote("data.txt")) == "HELLO"
    assert r._describe()["node_id"] == node


def test_a_class_from_a_working_dir_module_is_imported_by_name(cluster, tmp_path, monkeypatch):
    project = _project(tmp_path, "by-name")
    monkeypatch.syspath_prepend(str(project))
    from pkg import greeter
    try:
        Greeter = ray.remote(greeter.Greeter)
        g = Greeter.options(runtime_env={"working_dir": str(project)}).remote()
        text, cwd, pid = ray.get(g.greet.remote())
        assert text == "by-name" and pid != os.getpid()
        assert cwd != str(project), "the worker's own unpacked copy, not the driver's folder"
        # Without the working_dir the actor's process cannot import the module.
        with pytest.raises(exceptions.RayError, match="pkg"):
            ray.get(Greeter.remote().greet.remote())
    finally:
        for m in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
            del sys.modules[m]


def test_init_runtime_env_is_every_task_s_default(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    project = _project(tmp_path, "for-tasks")
    ray.init(num_cpus=2, runtime_env={"working_dir": str(project), "env_vars": {"A": "1"}})
    try:
        text, cwd = ray.get(read_in_task.remote("data.txt"))
        assert text == "for-tasks" and os.path.basename(cwd) != "project-for-tasks"
    finally:
        ray.shutdown()


def test_bad_working_dirs_are_refused_naming_them(cluster, tmp_path):
    with pytest.raises(ValueError, match="working_dir .*missing.* is not a folder"):
        Reader.options(runtime_env={"working_dir": str(tmp_path / "missing")})
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "noise.bin", "wb") as f:  # incompressible, over the 64 MiB limit
        for _ in range(65):
            f.write(os.urandom(1 << 20))
    before = ray.available_resources()
    t0 = time.monotonic()
    with pytest.raises(exceptions.RayError, match="working_dir: .*packs to more than") as e:
        Reader.options(runtime_env={"working_dir": str(big)}).remote()
    assert e.value.code == "FAILED_PRECONDITION"
    assert time.monotonic() - t0 < 60
    assert ray.available_resources() == before, "nothing was left on the cluster"
    with pytest.raises(NotImplementedError, match="pip is not supported"):
        Reader.options(runtime_env={"pip": ["torch"]})


def test_a_job_s_working_dir_is_its_actors_default(cluster, tmp_path):
    """`skyrl job submit --working-dir D -- python3 main.py`: the driver runs in D and imports
    skyrl_runtime with no PYTHONPATH set, and the actors it creates get D as their
    working_dir, as in Ray."""
    import subprocess

    from skyrl_runtime import _cluster

    project = _project(tmp_path, "from-the-job")
    (project / "main.py").write_text(
        "import skyrl_runtime as ray\n"
        "ray.init()\n"
        "@ray.remote\n"
        "class R:\n"
        "    def read(self):\n"
        "        from pkg.greeter import shout\n"
        "        return shout(open('data.txt').read())\n"
        "print('ACTOR SAYS', ray.get(R.remote().read.remote()))\n")
    local = cluster.cluster
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "SKYRL_ADDRESS": local.address,
           "SKYRL_TOKEN": local.token}
    out = subprocess.run(
        [os.path.join(_cluster.bin_dir(), "skyrl"), "job", "submit", "--working-dir", str(project), "--",
         "/usr/bin/python3", "main.py"],
        env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ACTOR SAYS FROM-THE-JOB" in out.stdout + out.stderr
