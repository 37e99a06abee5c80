"""Handles of submitted operations: :class:`Handle` (poll, wait, the result or the error)
and the parking of handles dropped while their operation is pending.

A Handle keeps the buffers an operation reads and writes (and the name, shape and splits
the C structs point to) alive until the operation has finished; ``wait()`` returns the
result, or raises :class:`ThreelcError` with the operation's message and code, then releases
the C handle. A Handle dropped while pending parks its buffers until the engine is done with
them; :func:`_reap_orphans` releases them at a later submission or at shutdown.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from .abi import _fn, _text, last_error
from .errors import ETIMEOUT, OK, ThreelcError, error_name

__all__ = ["Handle", "poll", "wait", "synchronize"]

_WAIT_SLICE_MS = 200  # wait in slices so that Ctrl-C reaches Python while waiting

_orphans: list = []  # (handle id, kept objects) of Handles dropped while pending
_orphans_lock = threading.Lock()


def _reap_orphans() -> None:
    """Releases dropped handles whose operations have finished (their buffers go with them)."""
    with _orphans_lock:
        if not _orphans:
            return
        keep = []
        for hid, objects in _orphans:
            rc = _fn("threelc_poll")(hid)
            if rc == 0:
                keep.append((hid, objects))
            elif rc == 1:
                _fn("threelc_release")(hid)
            # rc < 0: the engine no longer knows the handle; nothing can touch the buffers
        _orphans[:] = keep


class Handle:
    """A submitted operation.

    ``poll()`` says whether it has finished; ``wait(timeout=None)`` blocks until it has and
    returns its result (allreduce, broadcast: the output array; allgather, reducescatter: a
    new array; alltoall: ``(array, received_splits)``; join: the last rank to join; barrier:
    None) or raises :class:`ThreelcError` with the operation's message and code. The C
    handle is released once the outcome has been collected; later ``wait()`` calls return
    (or raise) the same outcome. The buffers the operation reads and writes are referenced
    by the Handle until then.
    """

    __slots__ = ("_id", "_kind", "_name", "_keep", "_finish", "_lock", "_done", "_value",
                 "_error", "__weakref__")

    def __init__(self, hid: int, kind: str, name: Optional[str], keep: tuple,
                 finish: Callable[[int], Any]):
        self._id = int(hid)
        self._kind = kind
        self._name = name
        self._keep = keep
        self._finish = finish
        self._lock = threading.Lock()
        self._done = False
        self._value = None
        self._error: Optional[tuple] = None  # (message, code)

    @property
    def id(self) -> int:
        """The C handle (threelc_handle)."""
        return self._id

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def name(self) -> Optional[str]:
        return self._name

    def __repr__(self) -> str:
        state = "done" if self._done else "pending"
        return f"<threelc.Handle {self._id} {self._kind} {self._name!r} {state}>"

    def poll(self) -> bool:
        """True when the operation has finished (successfully or not)."""
        if self._done:
            return True
        rc = _fn("threelc_poll")(self._id)
        if rc < 0:
            with self._lock:
                if self._done:  # another thread collected it meanwhile
                    return True
            raise ThreelcError(last_error() or f"threelc_poll({self._id}) failed with "
                               f"{error_name(rc)}", rc)
        return rc == 1

    def done(self) -> bool:
        return self.poll()

    def wait(self, timeout: Optional[float] = None):
        """Waits for the operation and returns its result.

        `timeout` in seconds (None: no limit). When it runs out the operation is still
        pending: ThreelcError with code ETIMEOUT is raised and the handle stays usable.
        A failed operation raises ThreelcError(message, code).
        """
        with self._lock:
            if not self._done:
                deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
                while True:
                    if deadline is None:
                        slice_ms = _WAIT_SLICE_MS
                    else:
                        left = deadline - time.monotonic()
                        slice_ms = max(0, min(_WAIT_SLICE_MS, int(left * 1000)))
                    rc = _fn("threelc_wait")(self._id, slice_ms)
                    if rc != ETIMEOUT:
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        what = self._kind if not self._name else f"{self._kind} {self._name!r}"
                        raise ThreelcError(f"{what} still pending after {timeout} s", ETIMEOUT)
                self._collect(rc)
        if self._error is not None:
            raise ThreelcError(*self._error)
        return self._value

    def _collect(self, rc: int) -> None:
        """Called with the lock held once threelc_wait returned something else than ETIMEOUT."""
        try:
            if rc == OK:
                try:
                    self._value = self._finish(self._id)
                except ThreelcError as e:
                    self._error = (str(e), e.code)
            else:
                message = _text(_fn("threelc_handle_error")(self._id))
                if not message:
                    message = last_error() or f"{self._kind} failed with {error_name(rc)}"
                self._error = (message, rc)
        finally:
            _fn("threelc_release")(self._id)
            self._done = True
            self._keep = ()
            self._finish = None

    def __del__(self):
        try:
            if self._done:
                return
            rc = _fn("threelc_poll")(self._id)
            if rc == 1:
                _fn("threelc_release")(self._id)
            elif rc == 0:
                # Still pending: the engine may still read or write the buffers.
                with _orphans_lock:
                    _orphans.append((self._id, self._keep))
            self._done = True
        except Exception:  # interpreter shutdown, or the library is gone
            pass


def poll(handle: Handle) -> bool:
    return handle.poll()


def wait(handle: Handle, timeout: Optional[float] = None):
    return handle.wait(timeout)


synchronize = wait
