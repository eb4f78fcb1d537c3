#!/usr/bin/env python3
"""skyrl_runtime.weight_sync against the C++ transport and torch.distributed's gloo, one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_weight_sync.py [--sizes-mib 256,1024]
        [--iters 3] [--rounds 2]

One sender and 3 receivers, each its own process on this machine, moving one bf16 weight of
SIZE bytes (each receiver a full replica, so the plan is a broadcast): the same layout and sizes
as bench/weight_sync's transport rows. Python rows: a trainer rank's WeightSender on a torch
parameter (packed once, then sent in place) to engine ranks' WeightReceivers, each with its own
engine tensor, re-pointed at each new version (bind=True, no copy) or, the default, copied into
(copy); both verified on the last version, and timed until the last engine has the version live. The C++ row is bench/weight_sync's default path run
by this script (build/bin/weight_sync --receivers 3 --no-copy), and gloo's is that run's
bench/weight_sync_gloo.py broadcast. Each row keeps its best time; rounds alternate the Python
modes. Bandwidth: delivered bytes (all receivers together) per second, GB/s (1e9 bytes).

Ends with RESULT lines py_ws_gbps_3rx (bind, the largest size), py_ws_copy_gbps_3rx,
cpp_ws_gbps_3rx, gloo_ws_gbps_3rx, py_ws_ratio_to_cpp, py_ws_ratio_vs_gloo_3rx, and the same
suffixed _256mib for 256 MiB.
"""

import argparse
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import torch

from skyrl_runtime import _cluster
from skyrl_runtime import weight_sync as ws

RECEIVERS = 3


def plan_for(nbytes):
    rows = nbytes // 2 // 4096
    spec = ws.ModelSpec.from_named_parameters([("w", torch.empty(rows, 4096, dtype=torch.bfloat16, device="meta"))])
    return ws.SyncPlan(spec, trainer=ws.ModelParallel(), engines=[ws.ModelParallel()] * RECEIVERS)


def fill(version):
    # A value per version whose bf16 bytes differ between versions.
    return float(version % 100 + 1)


def receiver(rank, nbytes, versions, mode, where, out, done):
    torch.set_num_threads(1)
    plan = plan_for(nbytes)
    engine = {"w": torch.zeros(plan.receiver_params(rank)[0].shape, dtype=torch.bfloat16)}
    rx = ws.WeightReceiver(plan, rank, engine, bind=mode == "bind", rendezvous=where, group=mode, io_timeout=60)
    rx.init()
    for v in range(1, versions + 1):
        rx.update(v)
        done.put(time.perf_counter())  # CLOCK_MONOTONIC: comparable across processes
    ok = bool(torch.all(engine["w"] == fill(versions)))
    out.put((rank, ok))


def python_sync(nbytes, iters, mode):
    """Best seconds over `iters` versions after one warm-up, or None when a receiver's bytes
    were wrong."""
    where = tempfile.mkdtemp(prefix="py_weight_sync_")
    versions = iters + 1
    ctx = mp.get_context("spawn")
    out, done = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=receiver, args=(r, nbytes, versions, mode, where, out, done))
             for r in range(RECEIVERS)]
    for p in procs:
        p.start()
    try:
        plan = plan_for(nbytes)
        param = torch.nn.Parameter(torch.zeros(plan.sender_params(0)[0].shape, dtype=torch.bfloat16),
                                   requires_grad=False)
        sender = ws.WeightSender(plan, 0, {"w": param}, rendezvous=where, group=mode, io_timeout=60)
        best = float("inf")
        for v in range(1, versions + 1):
            param.data.fill_(fill(v))  # in place, as an optimizer step writes
            t0 = time.perf_counter()
            sender.send(v)
            # Until every engine has the version live (copied into its tensors, or re-pointed).
            finished = max(done.get(timeout=300) for _ in procs)
            if v > 1:
                best = min(best, max(finished, time.perf_counter()) - t0)
        checks = [out.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(60)
        shutil.rmtree(where, ignore_errors=True)
    return best if all(ok for _, ok in checks) else None


def cpp_and_gloo(sizes_mib, iters, rounds, gloo):
    """GB/s of bench/weight_sync's default path and of gloo with 3 receivers, by MiB."""
    cmd = [os.path.join(_cluster.bin_dir(), "weight_sync"), "--receivers", str(RECEIVERS), "--no-copy",
           "--sizes-mib", ",".join(str(s) for s in sizes_mib), "--iters", str(iters), "--rounds", str(rounds)]
    if not gloo:
        cmd.append("--no-gloo")
    text = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800).stdout
    results = dict(re.findall(r"^RESULT (\S+) ([0-9.]+)$", text, re.M))
    cpp, glo = {}, {}
    for mib in sizes_mib:
        suffix = "" if mib == sizes_mib[-1] else f"_{mib}mib"
        cpp[mib] = float(results.get(f"tcp_gbps_3rx{suffix}", 0))
        glo[mib] = float(results.get(f"gloo_gbps_3rx{suffix}", 0))
    return cpp, glo


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--sizes-mib", default="256,1024")
    a.add_argument("--iters", type=int, default=3)
    a.add_argument("--rounds", type=int, default=2)
    a.add_argument("--no-gloo", action="store_true")
    args = a.parse_args()
    sizes = [int(s) for s in args.sizes_mib.split(",")]
    torch.set_num_threads(1)

    py = {mode: {} for mode in ("bind", "copy")}
    for mib in sizes:
        for r in range(args.rounds):
            for mode in py:
                sec = python_sync(mib << 20, args.iters, mode)
                if sec is None:
                    sys.exit(f"python_weight_sync: {mode} at {mib} MiB delivered wrong bytes")
                gbps = RECEIVERS * (mib << 20) / sec / 1e9
                py[mode][mib] = max(py[mode].get(mib, 0), gbps)
                print(f"  {mib} MiB round {r + 1} python {mode}: {gbps:.2f} GB/s", flush=True)
    print("  C++ transport and gloo (bench/weight_sync) ...", flush=True)
    cpp, glo = cpp_and_gloo(sizes, args.iters, args.rounds, not args.no_gloo)

    print(f"\n1 sender -> {RECEIVERS} receivers, each its own process; delivered GB/s (best of each)")
    print(f"{'size':>9} {'python bind':>12} {'python copy':>12} {'C++ tcp':>9} {'gloo':>7} {'py/C++':>7} {'py/gloo':>8}")
    for mib in sizes:
        b, c, g = py["bind"][mib], cpp[mib], glo[mib]
        print(f"{mib:>5} MiB {b:>12.2f} {py['copy'][mib]:>12.2f} {c:>9.2f} {g:>7.2f} "
              f"{(b / c if c else 0):>7.2f} {(b / g if g else 0):>8.2f}")
    print()
    for mib in sizes:
        s = "" if mib == sizes[-1] else f"_{mib}mib"
        b, c, g = py["bind"][mib], cpp[mib], glo[mib]
        print(f"RESULT py_ws_gbps_3rx{s} {b:.2f}")
        print(f"RESULT py_ws_copy_gbps_3rx{s} {py['copy'][mib]:.2f}")
        print(f"RESULT cpp_ws_gbps_3rx{s} {c:.2f}")
        if c:
            print(f"RESULT py_ws_ratio_to_cpp{s} {b / c:.2f}")
        if g:
            print(f"RESULT gloo_ws_gbps_3rx{s} {g:.2f}")
            print(f"RESULT py_ws_ratio_vs_gloo_3rx{s} {b / g:.2f}")


if __name__ == "__main__":
    main()
