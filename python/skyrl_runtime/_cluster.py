"""A local cluster for init() when there is none: one skyrl-head (in-memory store) and one
skyrl-worker, in a private folder (token, logs, job files), stopped at shutdown() or exit."""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings

from . import _native
from .exceptions import RayError


def bin_dir():
    """Where skyrl-head and skyrl-worker are: $SKYRL_BIN_DIR, else the build tree's bin/ beside
    build/python (this package's parent's parent)."""
    env = os.environ.get("SKYRL_BIN_DIR")
    if env:
        return os.path.abspath(env)
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "bin"))


def free_port():
    """A loopback port free at the moment of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_processes(procs, grace_s=10.0):
    """Stops `procs` last first: SIGTERM, then SIGKILL for any still running after `grace_s`."""
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(grace_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# init(_system_config=...) keys a local cluster understands: name -> (type, the worker flag).
SYSTEM_CONFIG = {
    "python_fork_server": (bool, "--python-fork-server"),
}


def check_system_config(config):
    """`config` validated: the keys of SYSTEM_CONFIG with values of their types. Another key
    (one of Ray's internal settings, which have no counterpart here) is ignored with a warning."""
    if not isinstance(config, dict):
        raise TypeError(f"init: _system_config must be a dict, got {type(config).__name__}")
    for key, value in config.items():
        if key not in SYSTEM_CONFIG:
            warnings.warn(f"init: _system_config: {key!r} is ignored (this runtime's keys: "
                          f"{', '.join(sorted(SYSTEM_CONFIG))})", stacklevel=3)
            continue
        kind = SYSTEM_CONFIG[key][0]
        if type(value) is not kind:
            raise TypeError(f"init: _system_config[{key!r}] must be a {kind.__name__}, got {value!r}")
    return config


class LocalCluster:
    def __init__(self, num_cpus=None, timeout=30.0, system_config=None, num_gpus=None, resources=None, labels=None):
        binaries = bin_dir()
        for name in ("skyrl-head", "skyrl-worker"):
            if not os.access(os.path.join(binaries, name), os.X_OK):
                raise RayError(f"init: no cluster to join and no {name} in {binaries} to start one "
                               "(set SKYRL_BIN_DIR or pass an address)", "FAILED_PRECONDITION")
        self.dir = tempfile.mkdtemp(prefix="skyrl-local-")
        self.token_file = os.path.join(self.dir, "token")
        # The cluster's own token, readable by this user only.
        self.token = secrets.token_hex(32)
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.token + "\n")
        self.address = f"127.0.0.1:{free_port()}"
        self._procs = []
        try:
            self._start(binaries, os.path.join(binaries, "skyrl-head"),
                        ["--port", self.address.rsplit(":", 1)[1], "--token-file", self.token_file,
                         "--jobs-dir", os.path.join(self.dir, "jobs"), "--log-level", "warn"], "head.log")
            deadline = time.monotonic() + timeout
            self._wait(deadline, lambda: _native.list_nodes(self.address, self.token, 1.0))
            cpus = num_cpus if num_cpus is not None else max(os.cpu_count() or 1, 1)
            offer = {"CPU": cpus, **(resources or {})}
            node_flags = []
            if num_gpus:  # declared devices 0..n-1, as Ray's num_gpus on a machine without them
                node_flags += ["--gpu-ids", ",".join(str(i) for i in range(int(num_gpus)))]
            elif num_gpus == 0:
                offer["GPU"] = 0
            if labels:
                node_flags += ["--labels", ",".join(f"{k}={v}" for k, v in labels.items())]
            self._start(binaries, os.path.join(binaries, "skyrl-worker"),
                        ["--head", self.address, "--token-file", self.token_file,
                         "--resources", ",".join(f"{k}={v:g}" for k, v in offer.items()), *node_flags,
                         "--log-dir", os.path.join(self.dir, "actors"), "--log-level", "warn",
                         *(f"{SYSTEM_CONFIG[k][1]}={str(v).lower()}" for k, v in (system_config or {}).items()
                           if k in SYSTEM_CONFIG)],
                        "worker.log")

            def alive():
                if not any(n["alive"] for n in _native.list_nodes(self.address, self.token, 1.0)):
                    raise RayError("no node alive yet", "UNAVAILABLE")
            self._wait(deadline, alive)
        except BaseException:
            self.stop()
            raise

    def _start(self, binaries, program, args, log):
        with open(os.path.join(self.dir, log), "wb") as out:
            # Its own session: a Ctrl-C in the driver's terminal does not reach the daemons
            # before shutdown() stops them in order.
            self._procs.append(subprocess.Popen([program, *args], stdout=out, stderr=subprocess.STDOUT,
                                                start_new_session=True, cwd=self.dir))

    def _wait(self, deadline, attempt):
        last = None
        while time.monotonic() < deadline:
            for p in self._procs:
                if p.poll() is not None:
                    raise RayError(f"init: {os.path.basename(p.args[0])} exited with {p.returncode} while "
                                   f"starting: {self._log_tail(p)}", "UNAVAILABLE")
            try:
                return attempt()
            except (_native.Error, RayError) as e:
                last = e
                time.sleep(0.05)
        raise RayError(f"init: the local cluster did not start in time ({last})", "DEADLINE_EXCEEDED")

    def _log_tail(self, proc, lines=5):
        """The last lines of a daemon's log (the folder is removed when init() fails)."""
        name = "head.log" if proc is self._procs[0] else "worker.log"
        try:
            with open(os.path.join(self.dir, name), errors="replace") as f:
                return " | ".join(line.strip() for line in f.readlines()[-lines:]) or "(empty log)"
        except OSError:
            return "(no log)"

    def stop(self):
        """Stops the worker, then the head (SIGTERM, SIGKILL after 10 s); removes the folder."""
        stop_processes(self._procs, grace_s=10)
        self._procs = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def pids(self):
        return [p.pid for p in self._procs]
