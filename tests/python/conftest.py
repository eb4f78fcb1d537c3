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
