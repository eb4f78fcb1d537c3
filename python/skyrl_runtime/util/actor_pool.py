"""ActorPool, as ray.util.ActorPool: work spread over a fixed set of actors, each running one
submission at a time, with the results read back in submission order or as they come."""

import collections
import time

from .._actors import _Failed
from .._refs import ObjectRef, get


class ActorPool:
    """ActorPool(actors): `submit(fn, value)` runs fn(actor, value) on an idle actor, or queues
    it until one is idle; fn returns the call's ref (or a list of refs). `get_next()` returns
    the results in submission order, `get_next_unordered()` whichever is ready first; `map`
    and `map_unordered` do both over many values."""

    def __init__(self, actors):
        self._idle = list(actors)
        self._queued = collections.deque()  # (fn, value) waiting for an idle actor
        self._running = {}  # submission number -> (refs, actor), numbered in submission order
        self._count = 0

    def map(self, fn, values):
        """A generator of fn(actor, value)'s results for each value, in their order. Results
        of earlier submissions not yet read are dropped first."""
        self._drop_unread()
        for v in values:
            self.submit(fn, v)
        return self._results(self.get_next)

    def map_unordered(self, fn, values):
        """As map, the results in the order they are ready."""
        self._drop_unread()
        for v in values:
            self.submit(fn, v)
        return self._results(self.get_next_unordered)

    def _results(self, next_result):
        while self.has_next():
            yield next_result()

    def _drop_unread(self):
        while self.has_next():
            try:
                self.get_next(timeout=0, ignore_if_timedout=True)
            except TimeoutError:
                pass

    def submit(self, fn, value):
        """Runs fn(actor, value) on an idle actor now, or once one is idle. An error of fn
        itself (or a result that is no ref) raises here, the actor staying in the pool; for a
        queued submission, from its get_next."""
        if not self._idle:
            self._queued.append((fn, value))
            return
        self._start(fn, value)

    def _start(self, fn, value):
        actor = self._idle.pop()
        try:
            refs = fn(actor, value)
            if not isinstance(refs, ObjectRef) and not (
                    isinstance(refs, list) and refs and all(isinstance(r, ObjectRef) for r in refs)):
                raise TypeError(f"ActorPool.submit: fn must return an ObjectRef (actor.method.remote(...)) or a "
                                f"list of them, got {type(refs).__name__}")
        except BaseException:
            self._idle.append(actor)
            raise
        self._running[self._count] = (refs, actor)
        self._count += 1

    def _start_queued(self):
        """Starts queued submissions while actors are idle; one whose fn fails takes its turn
        as that error (get_next raises it), so no result is lost and none waits for ever."""
        while self._queued and self._idle:
            fn, value = self._queued.popleft()
            try:
                self._start(fn, value)
            except Exception as e:  # noqa: BLE001 - raised by this submission's get_next
                self._running[self._count] = (ObjectRef(_Failed(e), None, "ActorPool.submit"), None)
                self._count += 1

    def has_next(self):
        """Whether a submission's result is still to be read (queued ones run as actors come
        free, so there is one running whenever one is queued, but in a pool of no actors)."""
        return bool(self._running)

    def get_next(self, timeout=None, ignore_if_timedout=False):
        """The result of the oldest submission not yet read (its exception re-raises here).
        TimeoutError after `timeout` seconds; with ignore_if_timedout, that submission's result
        is dropped too (it is not returned later). StopIteration when nothing is left."""
        if not self.has_next():
            raise StopIteration("ActorPool.get_next: no more results to get")
        number = min(self._running)
        return self._take(number, self._wait([number], timeout), ignore_if_timedout)

    def get_next_unordered(self, timeout=None, ignore_if_timedout=False):
        """The result of whichever running submission finishes first; otherwise as get_next
        (ignore_if_timedout drops the oldest)."""
        if not self.has_next():
            raise StopIteration("ActorPool.get_next_unordered: no more results to get")
        numbers = sorted(self._running)
        ready = self._wait(numbers, timeout)
        return self._take(ready if ready is not None else numbers[0], ready, ignore_if_timedout)

    def _wait(self, numbers, timeout):
        """The first of `numbers` whose refs are all ready, waiting at most `timeout` (None: the
        wait ran out)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for n in numbers:
                refs = self._running[n][0]
                if all(r._future.done() for r in (refs if isinstance(refs, list) else [refs])):
                    return n
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.001)

    def _take(self, number, ready, ignore_if_timedout):
        if ready is None and not ignore_if_timedout:
            raise TimeoutError(f"ActorPool: no result within the timeout (submission {number} still runs)")
        refs, actor = self._running.pop(number)
        if actor is not None:
            self._idle.append(actor)
        self._start_queued()
        if ready is None:
            raise TimeoutError(f"ActorPool: no result within the timeout; submission {number}'s is dropped")
        return get(refs)

    def has_free(self):
        """Whether an actor is idle (and no submission waits for one)."""
        return bool(self._idle) and not self._queued

    def pop_idle(self):
        """Removes an idle actor from the pool and returns it; None when none is free."""
        return self._idle.pop() if self.has_free() else None

    def push(self, actor):
        """Adds an actor to the pool (it takes a queued submission at once if one waits)."""
        members = self._idle + [a for _, a in self._running.values() if a is not None]
        if any(_same_actor(actor, a) for a in members):
            raise ValueError("ActorPool.push: the actor is already in this pool")
        self._idle.append(actor)
        self._start_queued()


def _same_actor(a, b):
    """Handles of one actor (by its id: a handle from get_actor or unpickled is another object)."""
    return a is b or (getattr(a, "_actor_id", None) is not None and getattr(a, "_actor_id", None) == getattr(b, "_actor_id", None))
