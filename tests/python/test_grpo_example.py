"""examples/python/grpo: the GRPO example written in Python reaches the target reward as a job
on a cluster and as a plain script with no cluster (ctest case python_grpo_example_test; the
SDK's own case leaves this file out). Each run trains from the random policy to mean reward 0.9
and leaves a progress line per step, metrics.jsonl and reward.svg."""

import json
import os
import subprocess

import skyrl_runtime
from skyrl_runtime import _cluster

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "grpo")


def check_outputs(log, out_dir):
    progress = [line for line in log.splitlines() if line.startswith("step ")]
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        metrics = [json.loads(line) for line in f]
    assert metrics and len(progress) == len(metrics), log
    assert [m["step"] for m in metrics] == list(range(1, len(metrics) + 1))
    assert metrics[-1]["mean_reward"] >= 0.9 and metrics[0]["mean_reward"] < 0.5, metrics
    assert all(m["sync_bytes"] > 0 and m["weight_version"] == m["step"] for m in metrics)
    with open(os.path.join(out_dir, "reward.svg")) as f:
        svg = f.read()
    assert svg.startswith("<svg") and svg.count("<polyline") == 2
    assert "reached mean reward 0.9" in log, log


def test_as_a_job_on_a_cluster_with_two_trainer_ranks(cluster, tmp_path):
    local = cluster.cluster
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "SKYRL_ADDRESS": local.address,
           "SKYRL_TOKEN": local.token}
    out_dir = tmp_path / "out"
    run = subprocess.run(
        [os.path.join(_cluster.bin_dir(), "skyrl"), "job", "submit", "--submission-id", "py-grpo-steps",
         "--working-dir", EXAMPLE, "--",
         "/usr/bin/python3", "main.py", "--trainers", "2", "--no-colocate", "--output-dir", str(out_dir)],
        env=env, capture_output=True, text=True, timeout=600)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log
    assert "2 trainer rank(s), 1 engine(s), apart" in log
    check_outputs(log, out_dir)
    # Its steps reached the head (report_step): the timeline has each one with its phases in order.
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        steps = len(f.readlines())
    trace_path = tmp_path / "trace.json"
    run = subprocess.run([os.path.join(_cluster.bin_dir(), "skyrl"), "timeline", "--job", "py-grpo-steps",
                          "-o", str(trace_path)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f": {steps} steps," in run.stdout, run.stdout
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert sorted(e["args"]["step"] for e in slices if e["cat"] == "step") == list(range(1, steps + 1))
    for step in range(1, steps + 1):
        phases = sorted((e["ts"], e["name"]) for e in slices if e["cat"] == "phase" and e["args"]["step"] == step)
        assert [name for _, name in phases] == ["generate", "reward", "reference", "train", "sync"], phases


def test_as_a_script_with_no_cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SKYRL_ADDRESS", "SKYRL_TOKEN")}
    env["HOME"] = str(tmp_path)  # no head or token of this machine is found
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(skyrl_runtime.__file__)))
    env["SKYRL_BIN_DIR"] = _cluster.bin_dir()
    out_dir = tmp_path / "out"
    run = subprocess.run(["/usr/bin/python3", "main.py", "--output-dir", str(out_dir)], cwd=EXAMPLE, env=env,
                         capture_output=True, text=True, timeout=600)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log
    assert "1 trainer rank(s), 1 engine(s), colocated" in log
    check_outputs(log, out_dir)
