"""The handle of a submitted operation (:class:`Handle`) and Horovod's ``poll`` and
``synchronize`` on it. A grouped operation's handle waits for every tensor's engine handle."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence

from .. import engine as _engine


class Handle:
    """A submitted operation: ``poll()``, ``wait(timeout=None)`` (= ``synchronize``)."""

    __slots__ = ("_parts", "_finish", "_done", "_value", "__weakref__")

    def __init__(self, parts: Sequence["_engine.Handle"], finish: Callable[[list], Any]):
        self._parts = list(parts)
        self._finish = finish
        self._done = False
        self._value = None

    def poll(self) -> bool:
        return self._done or all(p.poll() for p in self._parts)

    def wait(self, timeout: Optional[float] = None):
        if not self._done:
            deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
            values = [p.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
                      for p in self._parts]  # raises ThreelcError
            self._value = self._finish(values)
            self._done = True
            self._finish = None
        return self._value

    def __repr__(self) -> str:
        inner = ", ".join(repr(p) for p in self._parts)
        return f"<threelc.torch.Handle [{inner}]>"


def poll(handle: Handle) -> bool:
    """True once the operation of `handle` has finished (synchronize then does not block)."""
    return handle.poll()


def synchronize(handle: Handle, timeout: Optional[float] = None):
    """Waits for `handle` and returns the operation's output; raises ThreelcError when it
    failed. `timeout` (seconds; None waits for ever) raises ThreelcError ETIMEOUT."""
    if not isinstance(handle, Handle):
        raise TypeError(f"synchronize() takes a threelc.torch handle, got {handle!r}")
    return handle.wait(timeout)
