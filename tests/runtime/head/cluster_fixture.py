"""A real local cluster for the head's Python tests: skyrl-head (with its dashboard, and
optionally every daemon's /metrics) and two skyrl-workers, in a private folder, each process
in its own session so that stop() reaches what it started."""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

from skyrl_runtime._cluster import free_port, stop_processes

BIN = os.environ.get("SKYRL_BIN_DIR", "")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def wait_for(what, check, timeout=60.0, period=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - retried until the deadline, then reported
            last = e
        time.sleep(period)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Cluster:
    """skyrl-head with its dashboard and two skyrl-workers. With `metrics`, the head serves
    /metrics on `metrics_port` and each worker on a port it picks (--metrics-port 0)."""

    def __init__(self, base, metrics=False):
        self.dir = base
        self.token = "cluster-fixture-" + os.urandom(12).hex()
        self.token_file = os.path.join(base, "token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        os.chmod(self.token_file, 0o600)
        self.port, self.dashboard_port = free_port(), free_port()
        self.metrics_port = free_port() if metrics else None
        self.address = f"127.0.0.1:{self.port}"
        self.url = f"http://127.0.0.1:{self.dashboard_port}"
        self.env = {**os.environ, "SKYRL_ADDRESS": self.address, "SKYRL_TOKEN": self.token, "HOME": base}
        self.procs = []
        head_metrics = ["--metrics-port", str(self.metrics_port)] if metrics else []
        self.start("head", "skyrl-head", "--port", str(self.port), "--dashboard-port", str(self.dashboard_port),
                   "--token-file", self.token_file, "--jobs-dir", os.path.join(base, "jobs"), *head_metrics)
        wait_for("the dashboard", lambda: self.status("/login") == 200, timeout=30)
        for i in (1, 2):
            self.start(f"worker-{i}", "skyrl-worker", "--head", self.address, "--token-file", self.token_file,
                       "--resources", "CPU=4,memory=8Gi", "--labels", f"name=worker-{i}",
                       "--log-dir", os.path.join(base, f"actors-{i}"), *(["--metrics-port", "0"] if metrics else []))
        wait_for("two nodes", lambda: len([n for n in self.api("/api/nodes") if n["state"] == "ALIVE"]) == 2)

    def start(self, name, program, *args):
        log = open(os.path.join(self.dir, f"{name}.log"), "wb")
        self.procs.append(subprocess.Popen([os.path.join(BIN, program), *args], stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True, env=self.env))

    def status(self, path, headers=None):
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.build_opener(NoRedirect).open(req, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def api(self, path):
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def cli(self, *args, timeout=300):
        return subprocess.run([os.path.join(BIN, "skyrl"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def stop(self):
        stop_processes(self.procs, grace_s=15)
