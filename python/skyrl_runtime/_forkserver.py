"""The worker's fork server for Python actors: `skyrl-actor-host-python --fork-server 3`.

The worker (runtime/worker/fork_server.h, which documents the wire) starts one per node, with
its end of a socket pair as fd 3. This process imports once what every actor process imports
(the package, its native part, cloudpickle, numpy) and forks a spare ahead of each request:
an intermediate child forks the spare and exits at once, so the spare is re-parented to the
worker, which waits for it like any other. While it waits for its request, the spare does what
every actor does first: gRPC's start-up, its own random seed, and a rehearsal of making an
actor and answering its first call (on a class of ours), so that the copies of the server's
pages it writes are made ahead, not while its caller waits. Once its request comes, it takes on
its own process group, log, working directory, environment, sys.path and argv, and runs the
actor host exactly as a fresh interpreter would. The server itself never runs actor code, so
each actor starts from the same pristine state, and nothing of one reaches another.

Single-threaded on purpose (no thread may hold a lock across the fork).
"""

import atexit
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback

import cloudpickle

from . import _host, _methods, _native, _wire

try:  # what most actors import anyway: imported once here instead of in each
    import numpy
except ImportError:  # pragma: no cover - numpy is a dependency, but an interpreter may lack it
    numpy = None  # type: ignore[assignment]

_MAX_FRAME = 64 << 20


def _read_exactly(sock, n):
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def _read_frame(sock):
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (n,) = struct.unpack("<I", head)
    if n > _MAX_FRAME:
        raise ValueError(f"a request of {n} bytes")
    return _read_exactly(sock, n)


def _write_frame(sock, text):
    data = text.encode("utf-8", "replace")
    sock.sendall(struct.pack("<I", len(data)) + data)


def _parse(frame):
    """(argv, env, cwd, log) of a request."""
    argv, env, cwd, log = [], {}, "", ""
    for field in frame.split(b"\0"):
        if not field:
            raise ValueError("an empty field")
        tag, text = chr(field[0]), os.fsdecode(field[1:])
        if tag == "a":
            argv.append(text)
        elif tag == "e":
            name, eq, value = text.partition("=")
            if not eq or not name:
                raise ValueError(f"an environment entry without a name: {text[:64]!r}")
            env[name] = value
        elif tag == "c":
            cwd = text
        elif tag == "l":
            log = text
        else:
            raise ValueError(f"an unknown field tag {tag!r}")
    if not argv or not log:
        raise ValueError("a request without argv or log path")
    return argv, env, cwd, log


class _Server:
    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        self.worker = os.getppid()
        # What the start script put first on PYTHONPATH (the package's folder), and the rest of
        # this interpreter's path: each actor's sys.path is rebuilt from them.
        self.package_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p][:1]
        own = set(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
        self.base_path = [p for p in sys.path[1:] if p not in own]
        self.spare = None  # (pid, the write end of its request pipe): the next actor, forked ahead

    def serve(self):
        while True:
            # The spare is made once no request came for a moment: made right after an answer,
            # its preparation (tens of milliseconds of CPU) would slow the actor just started.
            ready, _, _ = select.select([self.sock], [], [], 0.5 if self.spare else 0.02)
            if os.getppid() != self.worker:
                os._exit(0)  # the worker is gone: so is this server (and the spare, on EOF)
            if not ready:
                if self.spare is None:
                    self.spare = self.make_spare()
                continue
            frame = _read_frame(self.sock)
            if frame is None:
                os._exit(0)  # the worker closed its end
            try:
                _parse(frame)  # a bad request is refused here, not in the actor
                reply = f"pid {self.assign(frame)}"
            except Exception as e:  # noqa: BLE001 - the worker spawns the actor itself then
                reply = f"error {type(e).__name__}: {e}"
            _write_frame(self.sock, reply)

    def assign(self, frame):
        """Hands the request to the spare (made now if it died); its pid."""
        for _ in range(2):
            if self.spare is None:
                self.spare = self.make_spare()
            pid, pipe = self.spare
            self.spare = None
            try:
                data = memoryview(struct.pack("<I", len(frame)) + frame)
                while data:
                    data = data[os.write(pipe, data):]
                return pid
            except OSError:
                continue  # it died waiting: another one
            finally:
                os.close(pipe)
        raise RuntimeError("two spare processes in a row died before taking a request")

    def make_spare(self):
        """Forks the next actor ahead of its request: a child of the worker (through an
        intermediate process that exits at once) that waits for its request on a pipe, and
        exits when the pipe closes unused (this server gone)."""
        requests_r, requests_w = os.pipe()
        pid_r, pid_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        child = os.fork()
        if child == 0:
            code = 1
            try:
                os.close(pid_r)
                os.close(requests_w)
                actor = os.fork()
                if actor == 0:
                    os.close(pid_w)
                    self.wait_for_request(requests_r)  # does not return
                os.write(pid_w, str(actor).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(pid_w)
        os.close(requests_r)
        with os.fdopen(pid_r, "rb") as r:
            data = r.read()
        _, status = os.waitpid(child, 0)
        if not data or os.waitstatus_to_exitcode(status) != 0:
            os.close(requests_w)
            raise RuntimeError(f"the intermediate process ended with status {status} and no pid")
        return int(data), requests_w

    def wait_for_request(self, requests):
        """In the spare: adopted by the worker, then waits for its request and becomes it."""
        code = 1
        try:
            self.sock.close()
            os.setpgid(0, 0)
            deadline = time.monotonic() + 5
            while os.getppid() != self.worker and time.monotonic() < deadline:
                time.sleep(0.0002)
            # Nothing of the server's but the request pipe stays open. Then, ahead of the
            # request, what every actor does first: gRPC's start-up (its threads, pollers), its
            # own random state (not the server's, shared by every actor it forks).
            os.closerange(3, requests)
            os.closerange(requests + 1, 1 << 20)
            _native.prepare_actor_host()
            if numpy is not None:
                numpy.random.seed()
            environ = dict(os.environ)
            _rehearse()
            with os.fdopen(requests, "rb") as r:
                head = r.read(4)
                if len(head) < 4:
                    os._exit(0)  # never used: the server is gone
                (n,) = struct.unpack("<I", head)
                frame = r.read(n)
            self.become_actor(*_parse(frame), environ)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - into the actor's log, then out
            traceback.print_exc()
        finally:
            os._exit(code)

    def become_actor(self, argv, env, cwd, log, environ):
        """In the spare, once its request came: the actor's own process, as the worker would
        have spawned it (`environ`: this process's environment now). Does not return."""
        code = 1
        try:
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(out, 1)
            os.dup2(out, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(out)
            os.close(null)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(sig, signal.SIG_DFL)
            if cwd:
                os.chdir(cwd)
            # As the start script does: the package's folder first on PYTHONPATH.
            own = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            env["PYTHONPATH"] = os.pathsep.join(self.package_path + own)
            # The request's environment is the worker's with the actor's: what this server has
            # beyond it came from its start (the script, a --python wrapper's variables) and
            # stays, as each fresh interpreter would get it. A variable both set is the actor's.
            for name, value in env.items():  # most are the server's already
                if environ.get(name) != value:
                    os.environ[name] = value
            # sys.path as a fresh interpreter in `cwd` starts with: the folder, PYTHONPATH, the rest.
            sys.path[:] = [os.getcwd()] + self.package_path + [os.path.abspath(p) for p in own] + self.base_path
            sys.argv = list(argv)
            code = _host.main(exit=False)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - into the actor's log, then out
            traceback.print_exc()
            code = 1
        finally:
            try:
                _finalize()
            finally:
                os._exit(code)


def _rehearsal_class():
    class Rehearsal:  # defined in a function: pickled by value, as a driver's class is
        def __init__(self, x):
            self.x = x

        def method(self, y):
            return self.x + y

    return Rehearsal


_REHEARSAL = cloudpickle.dumps((_rehearsal_class(), (1,), {}, {"resources": {}}))


def _rehearse():
    """In a spare, ahead of its request: what making an actor and answering its first call
    runs, on a class of our own, so that its first touch of the server's memory (a copy of each
    page written) is done before the request, not after it."""
    cls, args, kwargs, _ = pickle.loads(_REHEARSAL)
    _methods.is_async_class(cls)
    obj = cls(*args, **kwargs)
    _, (args, kwargs) = _wire.decode(_wire.encode(((2,), {})))
    _wire.encode(obj.method(*args, **kwargs))


def _finalize():
    """What an interpreter does at its end, before its process exits: waits for the threads
    that are not daemons, runs the atexit functions, flushes the standard streams."""
    try:
        threading._shutdown()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()


def serve(fd):
    server = _Server(fd)
    print(f"skyrl fork server: pid {os.getpid()}, for worker {server.worker}; forks Python actors", flush=True)
    server.serve()
