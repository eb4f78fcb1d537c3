#!/usr/bin/env bash
# metrics_overhead_step: what telemetry costs a GRPO step. Runs the distributed GRPO example
# (examples/grpo_copy_distributed.yaml) as a job on a fresh local cluster (skyrl-head and two
# skyrl-workers) twice per round: once as shipped with every daemon's /metrics on and scraped
# each second (actor hosts recording every call), once with SKYRL_CALL_TELEMETRY=0 and no
# metrics ports; the order alternates by round. A run's figure is the mean step time over its
# steps after the first (warm-up); the result is the median of the rounds' on/off ratios.
#
#   bench/metrics_overhead_step.sh [--rounds 3] [--steps 20]
#
# Ends with RESULT metrics_overhead_step (percent of step time added; the target is at most 3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="${SKYRL_BUILD_DIR:-$root/build}/bin"
rounds=3
steps=20
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "metrics_overhead_step: unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/skyrl-overhead-step-XXXXXX)
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
stop_cluster() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap 'stop_cluster; rm -rf "$work"' EXIT

# run_once on|off RUN_DIR: prints the mean step seconds after the first step.
run_once() {
  local mode=$1 dir=$2 port metrics=() wmetrics=() scraper=""
  mkdir -p "$dir/home"
  port=$(free_port)
  local -x HOME="$dir/home" SKYRL_TOKEN=""
  if [[ $mode == on ]]; then
    local mport; mport=$(free_port)
    metrics=(--metrics-port "$mport"); wmetrics=(--metrics-port 0)
  fi
  (
    [[ $mode == off ]] && export SKYRL_CALL_TELEMETRY=0
    exec "$bin/skyrl-head" --port "$port" --jobs-dir "$dir/jobs" --log-level warn "${metrics[@]}" >"$dir/head.log" 2>&1
  ) & pids+=($!)
  for _ in $(seq 1 100); do [[ -s "$HOME/.skyrl/token" ]] && break; sleep 0.05; done
  for i in 1 2; do
    (
      [[ $mode == off ]] && export SKYRL_CALL_TELEMETRY=0
      exec "$bin/skyrl-worker" --head "127.0.0.1:$port" --resources CPU=4,memory=8Gi --log-level warn \
        --log-dir "$dir/actors-$i" "${wmetrics[@]}" >"$dir/worker-$i.log" 2>&1
    ) & pids+=($!)
  done
  for _ in $(seq 1 100); do
    "$bin/skyrl" --address "127.0.0.1:$port" status 2>/dev/null | grep -q "Nodes: 2 alive" && break
    sleep 0.1
  done
  if [[ $mode == on ]]; then
    # As a Prometheus with a 1 s interval would: every target the head lists, each second.
    /usr/bin/python3 - "${metrics[1]}" <<'PY' & scraper=$!
import json, sys, time, urllib.request
head = f"http://127.0.0.1:{sys.argv[1]}"
while True:
    try:
        with urllib.request.urlopen(f"{head}/metrics/targets", timeout=5) as r:
            targets = [t["targets"][0] for t in json.load(r)]
        for t in targets:
            with urllib.request.urlopen(f"http://{t}/metrics", timeout=5) as r:
                r.read()
    except OSError:
        pass
    time.sleep(1)
PY
  fi
  "$bin/skyrl" --address "127.0.0.1:$port" job submit --submission-id "overhead-$mode" -- \
    "$bin/skyrl-grpo" --config "$root/examples/grpo_copy_distributed.yaml" --steps "$steps" \
    --output-dir "$dir/out" >"$dir/job.out" 2>&1 || { echo "metrics_overhead_step: the $mode job failed: $dir/job.out" >&2; tail -20 "$dir/job.out" >&2; return 1; }
  [[ -n $scraper ]] && { kill "$scraper" 2>/dev/null; wait "$scraper" 2>/dev/null || true; }
  stop_cluster
  /usr/bin/python3 - "$dir/out/metrics.jsonl" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
later = [s["step_s"] for s in steps[1:]] or [s["step_s"] for s in steps]
print(f"{sum(later) / len(later):.4f}")
PY
}

echo "metrics_overhead_step: $rounds rounds, $steps GRPO steps per run (logs in $work)" >&2
printf "%-8s %14s %14s %10s\n" round "on step_s" "off step_s" "on/off"
ratios=()
for r in $(seq 1 "$rounds"); do
  if (( r % 2 == 1 )); then
    on=$(run_once on "$work/r$r-on"); off=$(run_once off "$work/r$r-off")
  else
    off=$(run_once off "$work/r$r-off"); on=$(run_once on "$work/r$r-on")
  fi
  ratio=$(/usr/bin/python3 -c "print(f'{$on / $off:.4f}')")
  ratios+=("$ratio")
  printf "%-8s %14s %14s %10s\n" "$r" "$on" "$off" "$ratio"
done
/usr/bin/python3 - "${ratios[@]}" <<'PY'
import statistics, sys
r = sorted(float(x) for x in sys.argv[1:])
print(f"median on/off {statistics.median(r):.4f}")
print(f"RESULT metrics_overhead_step {100 * (statistics.median(r) - 1):.1f}")
PY
