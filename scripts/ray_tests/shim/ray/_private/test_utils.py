"""The helpers Ray's tests import from ray._private.test_utils, written for skyrl_runtime:
wait_for_condition, SignalActor, Semaphore, run_string_as_driver, client_test_enabled."""

import asyncio
import os
import subprocess
import sys
import time

import skyrl_runtime as ray


def wait_for_condition(condition_predictor, timeout=10, retry_interval_ms=100, raise_exceptions=False, **kwargs):
    """Polls condition_predictor(**kwargs) until it is true; RuntimeError after `timeout` s."""
    start = time.monotonic()
    last = None
    while time.monotonic() - start <= timeout:
        try:
            if condition_predictor(**kwargs):
                return
        except Exception as e:  # noqa: BLE001 - retried, reported at the end
            if raise_exceptions:
                raise
            last = e
        time.sleep(retry_interval_ms / 1000.0)
    raise RuntimeError(f"the condition was not met within {timeout} s" + (f" (last error: {last!r})" if last else ""))


async def async_wait_for_condition(condition_predictor, timeout=10, retry_interval_ms=100, **kwargs):
    start = time.monotonic()
    while time.monotonic() - start <= timeout:
        if condition_predictor(**kwargs):
            return
        await asyncio.sleep(retry_interval_ms / 1000.0)
    raise RuntimeError(f"the condition was not met within {timeout} s")


@ray.remote(num_cpus=0, max_concurrency=1000)
class SignalActor:
    """An event across processes: wait() returns once send() was called."""

    def __init__(self):
        self.ready_event = asyncio.Event()
        self.num_waiters = 0

    async def send(self, clear=False):
        self.ready_event.set()
        if clear:
            self.ready_event.clear()

    async def wait(self, should_wait=True):
        if should_wait:
            self.num_waiters += 1
            await self.ready_event.wait()
            self.num_waiters -= 1

    async def cur_num_waiters(self):
        return self.num_waiters


@ray.remote(num_cpus=0, max_concurrency=1000)
class Semaphore:
    def __init__(self, value=1):
        self._sema = asyncio.Semaphore(value=value)

    async def acquire(self):
        await self._sema.acquire()

    async def release(self):
        self._sema.release()

    async def locked(self):
        return self._sema.locked()


def run_string_as_driver(driver_script, env=None, encode="utf-8"):
    """Runs `driver_script` in a new Python process (this one's interpreter and sys.path);
    its output; an error when it fails."""
    environ = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-"], input=driver_script.encode(encode), env=environ,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = proc.stdout.decode(encode)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, "driver", out)
    return out


def run_string_as_driver_nonblocking(driver_script, env=None):
    environ = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen([sys.executable, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=environ)
    proc.stdin.write(driver_script.encode())
    proc.stdin.close()
    return proc


def client_test_enabled():
    return False


def kill_actor_and_wait_for_failure(actor, timeout=10, retry_interval_ms=100):
    """Kills `actor` and waits until the head says it is dead."""
    ray.kill(actor)
    wait_for_condition(lambda: actor._describe()["state"] == "DEAD", timeout=timeout,
                       retry_interval_ms=retry_interval_ms)


def wait_for_pid_to_exit(pid, timeout=20):
    """Waits until process `pid` is gone; TimeoutError after `timeout` s."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise TimeoutError(f"process {pid} did not exit within {timeout} s")


def generate_system_config_map(**kwargs):
    """Ray's internal settings for a test's init(): none of them apply here."""
    return {}


def get_other_nodes(cluster, exclude_head=False):
    import pytest
    pytest.skip("internal: Ray's cluster_utils (get_other_nodes)")


def __getattr__(name):
    """Ray's other test helpers read its internals: using one skips the test."""
    if name.startswith("__"):
        raise AttributeError(name)
    import ray
    return ray._Internal(f"ray._private.test_utils.{name}")
