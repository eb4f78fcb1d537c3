"""Queue, as ray.util.queue: a FIFO queue held by an actor, shared by every process that has
it (it pickles to its actor's handle), e.g. rollouts from generator actors to a trainer.

Blocking puts and gets wait inside the actor at most _SLICE_S per call and the caller asks
again until its timeout, so waiting callers never hold all of the actor's threads for long:
a put reaches the actor within _SLICE_S however many getters wait."""

import asyncio
import collections
import functools
import queue as _stdlib_queue
import threading
import time

from .._actors import kill
from .._python_actors import PyActorClass
from .._refs import get, put as _put

_SLICE_S = 0.5


class Empty(_stdlib_queue.Empty):
    """get without blocking, or after its timeout, found the queue empty."""


class Full(_stdlib_queue.Full):
    """put without blocking, or after its timeout, found the queue full."""


class _QueueActor:
    """The queue itself, in one actor process; its methods wait at most `wait_s`."""

    def __init__(self, maxsize):
        self._items = collections.deque()
        self._maxsize = maxsize
        self._changed = threading.Condition()

    def qsize(self):
        return len(self._items)

    def _room(self, n):
        return self._maxsize <= 0 or len(self._items) + n <= self._maxsize

    def put(self, items, wait_s):
        """Appends every item of `items`, all or none, once there is room for all (waiting at
        most wait_s); whether they went in."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._room(len(items)), timeout=wait_s):
                return False
            self._items.extend(items)
            self._changed.notify_all()
            return True

    def get(self, n, wait_s):
        """The first `n` items, once there are n (waiting at most wait_s); None when there
        were too few."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._items) >= n, timeout=wait_s):
                return None
            out = [self._items.popleft() for _ in range(n)]
            self._changed.notify_all()
            return out


def _check_timeout(block, timeout):
    if not block:
        return 0.0
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ValueError(f"timeout must be None or a number >= 0, got {timeout!r}")
    return float(timeout)


class Queue:
    """Queue(maxsize=0, actor_options=None): maxsize <= 0 is unbounded. actor_options are the
    queue actor's .options() (default num_cpus=0, max_concurrency=32: callers waiting at once
    before others queue behind them for up to _SLICE_S)."""

    def __init__(self, maxsize=0, actor_options=None):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int):
            raise TypeError(f"Queue: maxsize must be an int, got {type(maxsize).__name__}")
        self.maxsize = maxsize
        options = {"num_cpus": 0, "max_concurrency": 32, **(actor_options or {})}
        self.actor = PyActorClass(_QueueActor, {}).options(**options).remote(maxsize)

    def __len__(self):
        return self.size()

    def size(self):
        return get(self._handle().qsize.remote())

    qsize = size

    def empty(self):
        return self.size() == 0

    def full(self):
        return self.maxsize > 0 and self.size() >= self.maxsize

    def _handle(self):
        if self.actor is None:
            raise RuntimeError("Queue: it was shut down (shutdown() killed its actor)")
        return self.actor

    def _asks(self, timeout):
        """The wait of each ask in turn (at most _SLICE_S), until `timeout` runs out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            yield _SLICE_S if deadline is None else max(0.0, min(_SLICE_S, deadline - time.monotonic()))
            if deadline is not None and time.monotonic() >= deadline:
                return

    def _until(self, timeout, ask):
        """ask(wait_s) again until it answers (not None/False) or `timeout` runs out (None)."""
        for wait_s in self._asks(timeout):
            answer = ask(wait_s)
            if answer not in (None, False):
                return answer
        return None

    async def _until_async(self, timeout, ask):
        """As _until, each ask on an executor thread: a thread is held at most _SLICE_S at a
        time, so many waiting coroutines do not take every thread of the loop's executor."""
        loop = asyncio.get_running_loop()
        for wait_s in self._asks(timeout):
            answer = await loop.run_in_executor(None, ask, wait_s)
            if answer not in (None, False):
                return answer
        return None

    def _offer(self, items, wait_s):
        """Whether the actor took every item of `items` (a list, or a put ref of one) within wait_s."""
        return get(self._handle().put.remote(items, wait_s))

    def _take(self, n, wait_s):
        """The first n items from the actor within wait_s, or None."""
        return get(self._handle().get.remote(n, wait_s))

    def put(self, item, block=True, timeout=None):
        """Adds `item`; Full when there is no room (block=False) or none came within timeout."""
        wait = _check_timeout(block, timeout)
        items = _put([item])  # serialized once, however often it is offered
        if self._until(wait, functools.partial(self._offer, items)) is None:
            raise Full(f"Queue.put: the queue is full (maxsize {self.maxsize})")

    def get(self, block=True, timeout=None):
        """The oldest item; Empty when there is none (block=False) or none came within timeout."""
        wait = _check_timeout(block, timeout)
        got = self._until(wait, functools.partial(self._take, 1))
        if got is None:
            raise Empty("Queue.get: the queue is empty")
        return got[0]

    def put_nowait(self, item):
        return self.put(item, block=False)

    def get_nowait(self):
        return self.get(block=False)

    def put_nowait_batch(self, items):
        """Adds every item of `items` at once, or none (Full) when they do not all fit."""
        if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise TypeError(f"Queue.put_nowait_batch: items must be an iterable, got {type(items).__name__}")
        items = list(items)
        if self.maxsize > 0 and len(items) > self.maxsize:
            raise Full(f"Queue.put_nowait_batch: {len(items)} items cannot fit in a queue of maxsize {self.maxsize}")
        if not self._offer(items, 0.0):
            raise Full(f"Queue.put_nowait_batch: no room for {len(items)} items (maxsize {self.maxsize})")

    def get_nowait_batch(self, num_items):
        """The oldest `num_items` items at once, or Empty when there are fewer."""
        if isinstance(num_items, bool) or not isinstance(num_items, int):
            raise TypeError(f"Queue.get_nowait_batch: num_items must be an int, got {type(num_items).__name__}")
        if num_items < 0:
            raise ValueError(f"Queue.get_nowait_batch: num_items must be >= 0, got {num_items}")
        got = self._take(num_items, 0.0)
        if got is None:
            raise Empty(f"Queue.get_nowait_batch: fewer than {num_items} items in the queue")
        return got

    async def put_async(self, item, block=True, timeout=None):
        """put, awaitable: each ask of the actor runs on an executor thread, not on the loop."""
        wait = _check_timeout(block, timeout)
        items = _put([item])
        if await self._until_async(wait, functools.partial(self._offer, items)) is None:
            raise Full(f"Queue.put_async: the queue is full (maxsize {self.maxsize})")

    async def get_async(self, block=True, timeout=None):
        """get, awaitable: each ask of the actor runs on an executor thread, not on the loop."""
        wait = _check_timeout(block, timeout)
        got = await self._until_async(wait, functools.partial(self._take, 1))
        if got is None:
            raise Empty("Queue.get_async: the queue is empty")
        return got[0]

    def shutdown(self, force=False, grace_period_s=5):
        """Kills the queue's actor (its items are gone); the queue cannot be used after."""
        if self.actor is not None:
            kill(self.actor)
            self.actor = None
