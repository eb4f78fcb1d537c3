"""Programs in the style of SkyRL's worker groups: actors of one group find each other
through rank 0's address and run torch.distributed collectives (gloo here; NCCL on GPUs)
across their processes; named actors shared between drivers; GPUs shared by fraction."""

import os
import subprocess
import sys
import textwrap

import torch

import skyrl_runtime as ray
from skyrl_runtime.util.placement_group import placement_group
from skyrl_runtime.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank, world):
        self.rank, self.world = rank, world

    def master_address(self):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return ray.util.get_node_ip_address(), s.getsockname()[1]

    def init_group(self, addr, port):
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=self.rank, world_size=self.world)
        return dist.get_rank()

    def all_reduce(self, n):
        import torch.distributed as dist
        t = torch.full((n,), float(self.rank + 1))
        dist.all_reduce(t)
        return t

    def pid(self):
        return os.getpid()


def test_a_worker_group_all_reduces_with_torch_distributed_gloo(cluster):
    world = 3
    pg = placement_group([{"CPU": 0.5}] * world, strategy="PACK")
    ray.get(pg.ready(), timeout=30)
    ranks = [Rank.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i)).remote(i, world)
             for i in range(world)]
    addr, port = ray.get(ranks[0].master_address.remote())  # rank 0 first, its address to the others
    assert ray.get([r.init_group.remote(addr, port) for r in ranks], timeout=60) == [0, 1, 2]
    sums = ray.get([r.all_reduce.remote(1 << 16) for r in ranks], timeout=60)
    for s in sums:
        assert torch.equal(s, torch.full((1 << 16,), 6.0)), "1 + 2 + 3 on every rank"
    assert len(set(ray.get([r.pid.remote() for r in ranks]))) == world, "one process per rank"


def test_get_if_exists_from_two_drivers_gives_one_actor(cluster, tmp_path):
    first = Rank.options(name="shared", get_if_exists=True).remote(0, 1)
    pid = ray.get(first.pid.remote())
    local = cluster.cluster
    script = textwrap.dedent("""
        import skyrl_runtime as ray
        ray.init()
        @ray.remote(num_cpus=0.5)
        class Rank:
            def pid(self):
                import os
                return os.getpid()
        print("PID", ray.get(Rank.options(name="shared", get_if_exists=True).remote().pid.remote()))
    """)
    env = {**os.environ, "SKYRL_ADDRESS": local.address, "SKYRL_TOKEN": local.token}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"PID {pid}" in out.stdout, "the second driver got the first one's actor"


def test_fractional_gpus_share_a_device(cluster, add_worker):
    add_worker("--resources", "CPU=2,GPU=1", "--gpu-ids", "5")

    @ray.remote(num_gpus=0.5, num_cpus=0.25)
    class Half:
        def ids(self):
            return ray.get_gpu_ids(), os.environ["CUDA_VISIBLE_DEVICES"]

    a, b = Half.remote(), Half.remote()
    assert ray.get([a.ids.remote(), b.ids.remote()]) == [([5], "5"), ([5], "5")]
    assert ray.available_resources()["GPU"] == 0
