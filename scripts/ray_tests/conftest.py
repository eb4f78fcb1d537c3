"""Ray's test fixtures over skyrl_runtime, for scripts/ray-tests (copied beside each of Ray's test
files it runs): each starts a local cluster as Ray's fixture of that name starts a local Ray.
Fixtures built on Ray's internals (cluster_utils) skip with a reason starting "internal:".
Each test ends within $RAY_TESTS_LIMIT_S seconds (default 120), and its outcome is appended to
$RAY_TESTS_REPORT as a JSON line (nodeid, outcome, seconds, why) as it ends."""

import json
import os
import signal
import time

import pytest

import ray

LIMIT_S = int(os.environ.get("RAY_TESTS_LIMIT_S", "120"))
INTERNAL = ("ray._private", "ray._raylet", "ray.cluster_utils", "ray.tests", "ray.worker", "ray.internal",
            "ray.state", "ray.ray_constants", "ray.experimental", "ray.core", "ray.runtime_context",
            "ray._common", "ray.dashboard", "ray.autoscaler", "ray.job_config", "ray.serialization")


def _start(request, **defaults):
    params = dict(getattr(request, "param", None) or {})
    params = {**defaults, **params}
    state = ray.init(address="local", **params)
    return {"address": state.address, "node_ip_address": "127.0.0.1", "gcs_address": state.address}


@pytest.fixture
def shutdown_only():
    yield None
    ray.shutdown()


def _cluster_fixture(num_cpus, scope="function"):
    """Ray's fixture of a local cluster of `num_cpus` CPUs (its params update init()'s)."""
    @pytest.fixture(scope=scope)
    def fixture(request):
        yield _start(request, num_cpus=num_cpus)
        ray.shutdown()

    return fixture


ray_start_regular = _cluster_fixture(1)
ray_start_regular_shared = _cluster_fixture(1, scope="module")
ray_start_2_cpus = _cluster_fixture(2)
ray_start_10_cpus = _cluster_fixture(10)
ray_start_no_cpu = _cluster_fixture(0)


def _test_cluster(request, head, nodes=0, connect=False):
    from ray.cluster_utils import Cluster
    params = dict(getattr(request, "param", None) or {})
    cluster = Cluster(initialize_head=head, connect=connect, head_node_args=params if head else None)
    for _ in range(nodes):
        cluster.add_node(**params)
    return cluster


@pytest.fixture
def ray_start_cluster(request):
    """Ray's: a test cluster with no node yet (the first add_node starts the head)."""
    cluster = _test_cluster(request, head=False)
    yield cluster
    cluster.shutdown()


@pytest.fixture
def ray_start_cluster_head(request):
    cluster = _test_cluster(request, head=True, connect=True)
    yield cluster
    cluster.shutdown()


@pytest.fixture
def ray_start_cluster_2_nodes(request):
    cluster = _test_cluster(request, head=True, nodes=1, connect=True)
    yield cluster
    cluster.shutdown()


@pytest.fixture
def set_enable_auto_connect(request, monkeypatch):
    """Ray's: whether the API connects (init() with its defaults) on first use without init()."""
    enabled = bool(getattr(request, "param", True))
    monkeypatch.setenv("RAY_ENABLE_AUTO_CONNECT", "1" if enabled else "0")
    yield enabled


def _internal_fixture(request):
    pytest.skip("internal: a fixture built on Ray's internals")


for _name in ("ray_start_cluster_enabled", "two_node_cluster", "ray_start_object_store_memory", "call_ray_start",
              "ray_start_cluster_init", "ray_init_with_task_retry_delay", "ray_start_chaos_cluster",
              "error_pubsub", "log_pubsub"):
    globals()[_name] = pytest.fixture(_internal_fixture, name=_name)


def _record(entry):
    path = os.environ.get("RAY_TESTS_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    def fire(signum, frame):
        raise TimeoutError(f"ray-tests: the test ran past {LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _why(report):
    if report.skipped:
        return str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message.splitlines()[0] if crash is not None and crash.message else str(report.longrepr)[-300:]


_started = {}


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = time.monotonic()


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "skipped" if report.skipped else report.outcome
        why = "" if report.passed else _why(report)
        internal = (outcome != "passed" and (any(name in why for name in INTERNAL) or "has no attribute '_" in why)
                    or "internal:" in why)
        _record({"nodeid": report.nodeid, "outcome": outcome, "internal": internal, "why": why[:300],
                 "seconds": round(time.monotonic() - _started.get(report.nodeid, time.monotonic()), 2)})


def pytest_collectreport(report):
    if report.failed:
        why = str(report.longrepr)[-300:]
        _record({"nodeid": report.nodeid, "outcome": "collect-error", "why": why,
                 "internal": any(name in why for name in INTERNAL)})
