"""Ray's test cluster (ray.cluster_utils.Cluster) over real skyrl-head and skyrl-worker
processes: the first node added starts a head with it, every other one a worker of its own,
so tests that place across nodes run as they do on Ray."""

import os
import signal
import subprocess
import time

import skyrl_runtime as ray
from skyrl_runtime import _cluster


class Node:
    def __init__(self, process, num_cpus, resources):
        self.process = process
        self.node_id = None
        self.num_cpus = num_cpus
        self.resources = resources

    @property
    def unique_id(self):
        return self.node_id


class Cluster:
    def __init__(self, initialize_head=False, connect=False, head_node_args=None, shutdown_at_exit=True):
        self._local = None
        self._workers = []
        self.head_node = None
        if initialize_head:
            self.head_node = self.add_node(**(head_node_args or {}))
            if connect:
                self.connect()

    @property
    def address(self):
        return self._local.address if self._local else None

    def connect(self, namespace=None):
        os.environ["SKYRL_TOKEN"] = self._local.token
        return ray.init(address=self.address, namespace=namespace)

    def _offer(self, num_cpus, num_gpus, resources):
        offer = {"CPU": num_cpus, **(resources or {})}
        if num_gpus is not None:
            offer["GPU"] = num_gpus
        return ",".join(f"{k}={v:g}" for k, v in offer.items())

    def add_node(self, wait=True, num_cpus=1, num_gpus=None, resources=None, labels=None, **ray_params):
        before = self._alive_ids()
        if self._local is None:
            self._local = _cluster.LocalCluster(num_cpus=num_cpus, num_gpus=num_gpus, resources=resources,
                                                labels=labels)
            process = self._local._procs[1]
            # ray.init(address=cluster.address) joins it, and so does ray.init(address="auto").
            os.environ["SKYRL_TOKEN"] = self._local.token
            os.environ["SKYRL_ADDRESS"] = self._local.address
        else:
            flags = ["--head", self._local.address, "--token-file", self._local.token_file,
                     "--resources", self._offer(num_cpus, num_gpus, resources), "--log-level", "warn"]
            if labels:
                flags += ["--labels", ",".join(f"{k}={v}" for k, v in labels.items())]
            log = open(os.path.join(self._local.dir, f"worker-{len(self._workers) + 2}.log"), "wb")
            process = subprocess.Popen([os.path.join(_cluster.bin_dir(), "skyrl-worker"), *flags], stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        node = Node(process, num_cpus, resources)
        self._workers.append(node)
        if wait:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                fresh = self._alive_ids() - before
                if fresh:
                    node.node_id = fresh.pop()
                    break
                time.sleep(0.05)
        return node

    def _alive_ids(self):
        if self._local is None:
            return set()
        return {n["node_id"] for n in ray._native.list_nodes(self._local.address, self._local.token, 5.0)
                if n["alive"]}

    def remove_node(self, node, allow_graceful=True):
        node.process.send_signal(signal.SIGTERM if allow_graceful else signal.SIGKILL)
        node.process.wait(30)
        self._workers.remove(node)

    def list_all_nodes(self):
        return list(self._workers)

    def wait_for_nodes(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self._alive_ids()) >= len(self._workers):
                return
            time.sleep(0.05)
        raise TimeoutError(f"wait_for_nodes: not every node is alive within {timeout} s")

    def shutdown(self):
        ray.shutdown()
        for node in self._workers[1:]:
            if node.process.poll() is None:
                node.process.kill()
                node.process.wait()
        if self._local:
            self._local.stop()
        self._workers = []
