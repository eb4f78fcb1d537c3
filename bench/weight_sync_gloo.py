#!/usr/bin/python3
"""torch.distributed gloo broadcast baseline for bench/weight_sync.cc.

Run with Debian's /usr/bin/python3 (python3-torch); the pyenv python3 first on PATH has no
torch. Loopback only. For each receiver count n, starts 1 + n processes (rank 0 broadcasts a
uint8 tensor of SIZE bytes), runs one warm-up and ITERS timed broadcasts, and prints
  GLOO <bytes> <receivers> <best seconds>
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, nbytes, iters, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.empty(nbytes, dtype=torch.uint8)
    if rank == 0:
        t.fill_(7)
    dist.broadcast(t, src=0)  # warm-up: connections, page faults
    best = float("inf")
    for _ in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        dist.broadcast(t, src=0)
        dist.barrier()  # every receiver has it
        best = min(best, time.perf_counter() - t0)
    if rank == 0:
        out.put(best)
    dist.destroy_process_group()


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")]
    receivers = [int(s) for s in sys.argv[2].split(",")]
    iters = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    port = 29600 + os.getpid() % 1000
    ctx = mp.get_context("spawn")
    for nbytes in sizes:
        for n in receivers:
            q = ctx.Queue()
            port += 1
            procs = [ctx.Process(target=worker, args=(r, n + 1, port, nbytes, iters, q)) for r in range(n + 1)]
            for p in procs:
                p.start()
            best = q.get(timeout=600)
            for p in procs:
                p.join()
            print(f"GLOO {nbytes} {n} {best:.6f}", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
