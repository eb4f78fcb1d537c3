"""The SDK's tests run against real skyrl-head and skyrl-worker processes: the local cluster
init() starts (from $SKYRL_BIN_DIR, which ctest sets to the build's bin/)."""

import os

import pytest

import skyrl_runtime as ray


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    """A private local cluster: no $SKYRL_ADDRESS, a HOME of its own (so no other head or token
    of this machine is found), stopped at the end."""
    monkeypatch.delenv("SKYRL_ADDRESS", raising=False)
    monkeypatch.delenv("SKYRL_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    state = ray.init(num_cpus=4)
    yield state
    ray.shutdown()


@pytest.fixture
def add_worker(cluster):
    """Starts one more real skyrl-worker on the local cluster with extra flags; returns its
    node id once the head lists it. Stopped at the end."""
    import subprocess
    import time

    from skyrl_runtime import _cluster

    started = []

    def add(*flags):
        local = cluster.cluster
        before = {n["NodeID"] for n in ray.nodes()}
        log = open(os.path.join(local.dir, f"worker-{len(started) + 2}.log"), "wb")
        proc = subprocess.Popen([os.path.join(_cluster.bin_dir(), "skyrl-worker"), "--head", local.address,
                                 "--token-file", local.token_file, "--log-level", "warn", *flags],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"skyrl-worker {flags} exited with {proc.returncode}"
            fresh = [n for n in ray.nodes() if n["Alive"] and n["NodeID"] not in before]
            if fresh:
                return fresh[0]["NodeID"]
            time.sleep(0.05)
        raise AssertionError(f"skyrl-worker {flags} did not join in 30 s")

    yield add
    for proc in started:
        proc.terminate()
        proc.wait(10)
