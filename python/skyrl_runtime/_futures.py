"""What every future-like object of this package is: a call in flight (_native.CallFuture), a
value already here (_refs._Ready, _refs._Put), an error from the start (_actors._Failed), one
result split among several refs (_methods.Split), a placement group becoming ready
(_placement._Ready). ObjectRef reads any of them the same way."""

from typing import Any, Optional, Protocol


class Future(Protocol):
    def done(self) -> bool:
        """Whether the outcome is here, without waiting."""
        ...

    def view(self, timeout: Optional[float] = None) -> Any:
        """The outcome (bytes-like for a call, the value itself otherwise), waiting at most
        `timeout` seconds (None: without end); raises the call's error, or _native.Error
        "DEADLINE_EXCEEDED" when the wait runs out (the future lives on)."""
        ...
