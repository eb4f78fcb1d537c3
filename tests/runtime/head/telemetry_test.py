"""The cluster's telemetry end to end (ctest telemetry_test): a real skyrl-head and two
skyrl-workers, each serving /metrics.

- Every target is listed, by `skyrl metrics targets` and by the head's /metrics/targets
  (Prometheus HTTP service discovery); each one scrapes, and its exposition parses.
- Counters move with actions: calls to a Python actor show in its worker's
  skyrl_actor_calls_total and latency histogram, exactly as many as were made; the head's and
  the workers' RPCs, the head's store operations, and a killed actor in the deaths by cause.
- A short GRPO job's figures in the head's metrics, and its timeline (`skyrl timeline`), fetched after the job ended and its actors
  were stopped: a track per actor, and in every step every actor's calls lie in the driver's
  phase of the same name, in phase order.
"""

import json
import os
import re
import shutil
import tempfile
import urllib.request

import pytest

from cluster_fixture import BIN, ROOT, Cluster, wait_for

STEPS = 3
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(address):
    """[(name, {label: value}, value)] of one /metrics, every sample line parsed."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"not an exposition line: {line!r}"
        samples.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return samples


def value(samples, name, **labels):
    """The sum over samples of `name` whose labels include `labels` (0 when none)."""
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == x for k, x in labels.items()))


@pytest.fixture
def cluster():
    if not os.access(os.path.join(BIN, "skyrl-head"), os.X_OK):
        pytest.fail(f"no skyrl-head in SKYRL_BIN_DIR={BIN!r}")
    base = tempfile.mkdtemp(prefix="skyrl-telemetry-")
    c = Cluster(base, metrics=True)
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(base, ignore_errors=True)


def targets(cluster):
    out = cluster.cli("metrics", "targets", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_every_daemon_is_a_target_and_counters_move_with_calls(cluster, monkeypatch):
    listed = wait_for("three targets", lambda: len(targets(cluster)) == 3 and targets(cluster))
    roles = sorted(t["labels"]["skyrl_role"] for t in listed)
    assert roles == ["head", "worker", "worker"]
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics/targets", timeout=10) as r:
        served = json.loads(r.read())
    assert sorted(t["targets"][0] for t in served) == sorted(t["targets"][0] for t in listed)
    table = cluster.cli("metrics", "targets")
    assert table.returncode == 0 and f"http://127.0.0.1:{cluster.metrics_port}/metrics" in table.stdout
    worker_of = {t["labels"]["skyrl_node_id"]: t["targets"][0] for t in listed if t["labels"]["skyrl_role"] == "worker"}
    head = scrape(f"127.0.0.1:{cluster.metrics_port}")
    assert value(head, "skyrl_nodes", state="alive") == 2
    for address in worker_of.values():
        assert value(scrape(address), "skyrl_worker_actor_processes") == 0

    monkeypatch.setenv("SKYRL_TOKEN", cluster.token)
    import skyrl_runtime as ray
    ray.init(address=cluster.address)
    try:
        @ray.remote
        class Pinger:
            def ping(self, i):
                return i

            def node(self):
                return ray.get_runtime_context().get_node_id()

        p = Pinger.remote()
        node = ray.get(p.node.remote(), timeout=60)
        assert node in worker_of, (node, worker_of)
        assert ray.get([p.ping.remote(i) for i in range(25)], timeout=60) == list(range(25))
        before = scrape(worker_of[node])
        assert value(before, "skyrl_worker_actor_processes") == 1
        assert value(before, "skyrl_worker_actor_start_seconds_count") >= 1
        assert value(before, "skyrl_actor_calls_total", method="ping", code="OK") == 25
        assert value(before, "skyrl_actor_call_seconds_count", method="ping") == 25
        assert value(before, "skyrl_actor_call_seconds_bucket", method="ping", le="+Inf") == 25
        assert value(before, "skyrl_actor_queued_calls") == 0
        assert ray.get([p.ping.remote(i) for i in range(10)], timeout=60) == list(range(10))
        after = scrape(worker_of[node])
        assert value(after, "skyrl_actor_calls_total", method="ping", code="OK") == 35
        assert value(after, "skyrl_actor_call_seconds_sum", method="ping") >= \
            value(before, "skyrl_actor_call_seconds_sum", method="ping")
        head = scrape(f"127.0.0.1:{cluster.metrics_port}")
        assert value(head, "skyrl_actors", state="alive") >= 1
        # The head's and the workers' gRPC servers count what they answered.
        assert value(head, "skyrl_rpc_server_handled_total", method="/skyrl.v1.NodeService/RegisterNode",
                     code="OK") == 2
        wait_for("a heartbeat counted", lambda: value(scrape(f"127.0.0.1:{cluster.metrics_port}"),
                                                      "skyrl_rpc_server_handled_total",
                                                      method="/skyrl.v1.NodeService/Heartbeat", code="OK") >= 1)
        assert value(head, "skyrl_rpc_server_handling_seconds_count",
                     method="/skyrl.v1.NodeService/RegisterNode") == 2
        assert value(after, "skyrl_rpc_server_handled_total", method="/skyrl.v1.WorkerService/StartActor",
                     code="OK") == 1
        # Every actor recorded went through the store; nothing refused it; no Redis, no queue.
        assert value(head, "skyrl_store_operations_total", op="put", code="OK") >= 1
        assert value(head, "skyrl_store_operations_total", code="UNAVAILABLE") == 0
        assert value(head, "skyrl_store_write_behind_pending") == 0
        killed = value(head, "skyrl_actor_deaths_total", cause="killed")
        ray.kill(p)
        wait_for("the kill counted", lambda: value(scrape(f"127.0.0.1:{cluster.metrics_port}"),
                                                   "skyrl_actor_deaths_total", cause="killed") == killed + 1)
        assert value(scrape(f"127.0.0.1:{cluster.metrics_port}"), "skyrl_actor_restarts_total") == 0
    finally:
        ray.shutdown()


# The driver's phase each method of the GRPO roles runs in (role_protocol.h).
PHASE_OF = {"generate": "generate", "score": "reward", "logprobs": "reward", "train": "train",
            "ws_send": "sync", "ws_receive": "sync", "sync_weights": "sync"}
ORDER = ["generate", "reward", "train", "sync"]
SLACK_US = 2000  # the driver's laps and the hosts' timestamps come from different clock reads


def test_a_jobs_timeline_has_every_step_in_phase_order_on_every_actor(cluster, tmp_path):
    job = cluster.cli("job", "submit", "--submission-id", "timeline-grpo", "--", os.path.join(BIN, "skyrl-grpo"),
                      "--config", os.path.join(ROOT, "examples", "grpo_copy_distributed.yaml"), "--steps", str(STEPS),
                      "--output-dir", str(tmp_path / "grpo-out"))
    assert job.returncode == 0, job.stdout + job.stderr
    assert cluster.api("/api/jobs/timeline-grpo")["state"] == "SUCCEEDED"
    trace_path = tmp_path / "trace.json"
    out = cluster.cli("timeline", "--job", "timeline-grpo", "-o", str(trace_path))
    assert out.returncode == 0, out.stderr
    assert f"{STEPS} steps" in out.stdout, out.stdout
    trace = json.loads(trace_path.read_text())
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    steps = sorted((e for e in slices if e["cat"] == "step"), key=lambda e: e["ts"])
    assert [e["name"] for e in steps] == [f"step {i}" for i in range(1, STEPS + 1)]
    phases = [e for e in slices if e["cat"] == "phase"]
    calls = {}
    for e in slices:
        if e["cat"] == "call":
            calls.setdefault((e["pid"], e["tid"]), []).append(e)
    actor_tracks = [k for k, name in threads.items() if name != "steps"]
    names = " | ".join(threads[k] for k in actor_tracks)
    for role in ("grpo_trainer", "grpo_generator", "grpo_reward", "grpo_reference"):
        assert role in names, f"no {role} track among: {names}"
    assert all(k in calls for k in actor_tracks), f"a job actor without calls: {names}"
    # The job ended, so these came from the records each host left as it was stopped.
    assert all("no calls" not in threads[k] for k in actor_tracks), names

    for step in steps:
        start, end = step["ts"], step["ts"] + step["dur"]
        spans = {p["name"]: p for p in phases if p["args"]["step"] == step["args"]["step"]}
        ran = [p for p in ORDER if p in spans]
        assert ran == sorted(ran, key=lambda p: spans[p]["ts"]), f"{step['name']}: phases out of order: {spans}"
        for track in actor_tracks:
            mine = sorted((c for c in calls[track] if start <= c["ts"] < end and c["name"] in PHASE_OF),
                          key=lambda c: c["ts"])
            assert mine, f"{step['name']}: no calls on {threads[track]}"
            order = [ORDER.index(PHASE_OF[c["name"]]) for c in mine]
            assert order == sorted(order), f"{step['name']} on {threads[track]}: {[c['name'] for c in mine]}"
            for c in mine:
                span = spans[PHASE_OF[c["name"]]]
                assert span["ts"] - SLACK_US <= c["ts"] and c["ts"] + c["dur"] <= span["ts"] + span["dur"] + SLACK_US, \
                    f"{step['name']}: {c['name']} on {threads[track]} at {c['ts']}+{c['dur']} outside {span}"

    # The head exports the job's last step, and the samples it dropped (none: not async).
    head = scrape(f"127.0.0.1:{cluster.metrics_port}")
    job = {"job_id": "timeline-grpo"}
    assert value(head, "skyrl_job_step", **job) == STEPS
    assert 0 <= value(head, "skyrl_job_mean_reward", **job) <= 1
    assert value(head, "skyrl_job_phase_seconds", phase="train", **job) > 0
    assert 0 < value(head, "skyrl_job_phase_seconds", phase="reference", **job) <= \
        value(head, "skyrl_job_phase_seconds", phase="reward", **job)
    assert value(head, "skyrl_job_step_seconds", **job) >= value(head, "skyrl_job_phase_seconds", phase="train", **job)
    assert value(head, "skyrl_job_weight_sync_bytes", **job) > 0
    assert value(head, "skyrl_job_weight_sync_gigabytes_per_second", **job) > 0
    assert [n for n, ls, _ in head if n == "skyrl_job_dropped_samples_total" and ls == job] and \
        value(head, "skyrl_job_dropped_samples_total", **job) == 0

    # The dashboard serves the same trace, as a download.
    req = urllib.request.Request(f"{cluster.url}/api/jobs/timeline-grpo/timeline",
                                 headers={"Authorization": f"Bearer {cluster.token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert "attachment" in r.headers["Content-Disposition"]
        served = json.loads(r.read())
    assert len([e for e in served["traceEvents"] if e["ph"] == "X"]) == len(slices)
