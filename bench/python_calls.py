#!/usr/bin/env python3
"""Python actor calls through skyrl_runtime, beside the C++ client's figures in the same run.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_calls.py [--calls 2000] [--nn 2]

Starts a local cluster (skyrl_runtime.init()), creates Python actors and measures: 1:1 sync
calls (one at a time), 1:1 async (all in flight), n:n async (n caller actors each keeping
calls in flight to n callee actors), tasks (num_cpus=0.5 on the pooled executors, all in
flight) and actor creations per second. Then runs
bench/actor_calls (the C++ client against C++ actors) in the same run, for its sync, async and
n:n figures beside Python's. Prints a table and RESULT lines.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import skyrl_runtime as ray


@ray.remote(num_cpus=0)
class Echo:
    def echo(self, x):
        return x


@ray.remote(num_cpus=0.5)
def noop(x):
    return x


@ray.remote(num_cpus=0)
class Caller:
    def run(self, targets, calls, window):
        done, refs = 0, []
        start = time.monotonic()
        i = 0
        while done < calls:
            while len(refs) < window and i < calls:
                refs.append(targets[i % len(targets)].echo.remote(i))
                i += 1
            ray.get(refs[0])
            refs.pop(0)
            done += 1
        return calls / (time.monotonic() - start)


def rate(n, fn):
    start = time.monotonic()
    fn()
    return n / (time.monotonic() - start)


def starts(n):
    """Actor creations per second (n created at once, each answering a call); the median time
    from one .remote() to its first answer, n actors one at a time on an otherwise idle node
    (a pause before each: the latency one caller sees); and the same median back to back (each
    creation while the last one's process is still settling: bounded by the CPU each costs)."""
    per_s = rate(n, lambda: ray.get([h.echo.remote(0) for h in [Echo.remote() for _ in range(n)]]))

    def first_ms(pause):
        firsts = []
        for _ in range(n):
            time.sleep(pause)
            start = time.monotonic()
            ray.get(Echo.remote().echo.remote(0))
            firsts.append((time.monotonic() - start) * 1000)
        return statistics.median(firsts)

    return per_s, first_ms(0.25), first_ms(0)


def cpp_rates(bin_dir, calls, nn):
    """bench/actor_calls's figures (the C++ client to C++ actors) by RESULT name: sync, async
    and n:n async calls per second."""
    out = subprocess.run([os.path.join(bin_dir, "actor_calls"), "--calls", str(calls), "--nn", str(nn)],
                         capture_output=True, text=True, timeout=600).stdout
    rates = {}
    for name in ("sync_calls_per_s", "async_calls_per_s", "nn_async_calls_per_s"):
        m = re.search(rf"^RESULT {name} (\d+)", out, re.M)
        rates[name] = float(m.group(1)) if m else 0.0
    return rates


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--nn", type=int, default=2)
    p.add_argument("--creates", type=int, default=20)
    a = p.parse_args()
    ray.init(address="local")
    bin_dir = os.path.abspath(os.environ.get("SKYRL_BIN_DIR") or os.path.join(os.path.dirname(ray.__file__), "..", "..", "bin"))
    e = Echo.remote()
    ray.get(e.echo.remote(0))
    sync = rate(a.calls, lambda: [ray.get(e.echo.remote(i)) for i in range(a.calls)])
    # As Ray's benchmark: windows of 1,000 calls in flight, each window collected.
    window = min(1000, a.calls)
    async_ = rate(window * max(1, a.calls * 5 // window),
                  lambda: [ray.get([e.echo.remote(i) for i in range(window)]) for _ in range(max(1, a.calls * 5 // window))])
    callees = [Echo.remote() for _ in range(a.nn)]
    callers = [Caller.remote() for _ in range(a.nn)]
    # Started and connected first (remote() returns before the processes are up).
    ray.get([c.run.remote(callees, 2 * a.nn, 2) for c in callers])
    # Five times --calls per caller, as 1:1 async: long enough that the ramp (each caller's
    # first calls while its streams open) is not most of the measurement.
    nn_calls = a.calls * 5
    start = time.monotonic()
    ray.get([c.run.remote(callees, nn_calls, 250) for c in callers])
    nn = a.nn * nn_calls / (time.monotonic() - start)
    # Created and answering: remote() itself returns before the process is up.
    creates, first_ms, packed_ms = starts(a.creates)
    ray.get([noop.remote(i) for i in range(50)])  # the task pool's processes start here
    tasks = rate(a.calls * 2, lambda: ray.get([noop.remote(i) for i in range(a.calls * 2)]))
    ray.shutdown()
    # The baseline in the same run: each Python actor a fresh interpreter (no fork server).
    ray.init(address="local", _system_config={"python_fork_server": False})
    fresh_creates, fresh_first_ms, fresh_packed_ms = starts(a.creates)
    ray.shutdown()
    cpp = cpp_rates(bin_dir, max(a.calls, 2000), a.nn)
    cpp_sync = cpp["sync_calls_per_s"]
    # (figure, Python's rate, Ray's published Python rate, our C++ client's rate in this run)
    rows = [("actor calls, 1:1 sync", sync, 2012, cpp_sync),
            ("actor calls, 1:1 async", async_, 8664, cpp["async_calls_per_s"]),
            (f"actor calls, n:n async, n={a.nn}", nn, 27376, cpp["nn_async_calls_per_s"]),
            ("tasks, async", tasks, 7931, None), ("actor creations", creates, None, None),
            ("actor creations, fresh interpreters", fresh_creates, None, None)]
    print(f"{'Python figure':32} {'per s':>10} {'vs Ray (64 cores)':>18} {'C++ per s':>10} {'Python/C++':>11}")
    for name, value, ray_rate, cpp_rate in rows:
        print(f"{name:32} {value:10.0f} {value / ray_rate if ray_rate else float('nan'):18.2f} "
              f"{cpp_rate or float('nan'):10.0f} {value / cpp_rate if cpp_rate else float('nan'):11.2f}")
    print(f"RESULT py_sync_calls_per_s {sync:.0f}")
    print(f"RESULT py_async_calls_per_s {async_:.0f}")
    print(f"RESULT py_nn_async_calls_per_s {nn:.0f}")
    print(f"RESULT py_tasks_per_s {tasks:.0f}")
    print(f"{'first call of a new actor, ms':32} p50 {first_ms:7.1f}   fresh interpreters: p50 {fresh_first_ms:7.1f}")
    print(f"{'  the same, back to back, ms':32} p50 {packed_ms:7.1f}   fresh interpreters: p50 {fresh_packed_ms:7.1f}")
    print(f"RESULT py_actor_creates_per_s {creates:.1f}")
    print(f"RESULT py_actor_first_call_ms {first_ms:.1f}")
    print(f"RESULT py_actor_creates_per_s_fresh {fresh_creates:.1f}")
    print(f"RESULT py_actor_first_call_ms_fresh {fresh_first_ms:.1f}")
    print(f"RESULT py_actor_first_call_ms_back_to_back {packed_ms:.1f}")
    print(f"RESULT py_actor_first_call_ms_back_to_back_fresh {fresh_packed_ms:.1f}")
    print(f"RESULT py_actor_creates_speedup {creates / fresh_creates if fresh_creates else 0:.2f}")
    print(f"RESULT py_sync_ratio_to_cpp {sync / cpp_sync if cpp_sync else 0:.3f}")


if __name__ == "__main__":
    sys.exit(main())
