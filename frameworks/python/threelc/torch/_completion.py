"""Completes torch futures when engine operations finish: one daemon thread per process.

The DDP communication hook must return a ``torch.futures.Future`` at once and complete it when
the bucket's allreduces are done. Rather than park a thread per bucket, every pending bucket
goes into one queue, and a single thread waits on the engine handles in submission order (the
order the engine runs them in, so little waiting is wasted) and completes each future. The
engine call that waits (``threelc_wait``) releases the GIL, so training threads run meanwhile.

Nothing waits for ever: each wait is bounded by the item's deadline (None: the engine's own
timeouts, THREELC_TIMEOUT and THREELC_STALL_TIMEOUT, still end it), and an operation that fails
or times out completes its future with the error.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import torch

from .. import engine as _engine


class _Pending(NamedTuple):
    handles: Sequence["_engine.Handle"]
    finish: Callable[[], Any]  # the future's value, once every handle has finished
    future: torch.futures.Future
    deadline: Optional[float]  # time.monotonic() limit, or None
    what: str                  # names the work if completing its future fails


_queue: "queue.SimpleQueue[_Pending]" = queue.SimpleQueue()
_thread: Optional[threading.Thread] = None
_thread_lock = threading.Lock()


def when_done(handles: Sequence["_engine.Handle"], finish: Callable[[], Any],
              timeout: Optional[float], what: str) -> torch.futures.Future:
    """A future completed with ``finish()`` once every handle has finished, or failed with
    the first failure (a :class:`threelc.ThreelcError`; ETIMEOUT, naming the operation, after
    `timeout` seconds from now).

    The failure is raised inside a ``then`` callback, so that it is a C++-level error of the
    returned future: DDP reads a hook's future from C++ (``value()``), which would not see an
    exception set with ``Future.set_exception`` (torch keeps that one for Python callers)."""
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    raw = torch.futures.Future()
    _start_thread()
    _queue.put(_Pending(tuple(handles), finish, raw, deadline, what))
    return raw.then(_value_or_raise)


class _Failure(NamedTuple):
    error: BaseException


def _value_or_raise(raw: torch.futures.Future) -> Any:
    value = raw.value()
    if isinstance(value, _Failure):
        raise value.error
    return value


def _start_thread() -> None:
    global _thread
    if _thread is not None and _thread.is_alive():
        return
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="threelc-completion", daemon=True)
            _thread.start()


def _run() -> None:
    while True:
        item = _queue.get()
        try:
            for handle in item.handles:
                # Past the deadline wait(0) still collects a finished handle, else raises
                # ETIMEOUT naming the operation.
                handle.wait(None if item.deadline is None
                            else max(0.0, item.deadline - time.monotonic()))
            value = item.finish()
        except BaseException as error:  # noqa: BLE001 (handed to whoever waits on the future)
            _settle(item, _Failure(error))
        else:
            _settle(item, value)


def _settle(item: _Pending, outcome: Any) -> None:
    """Completes the future; its callbacks run here, and one that raises must not stop the
    thread every other pending future depends on."""
    try:
        item.future.set_result(outcome)
    except BaseException as error:  # noqa: BLE001
        print(f"threelc: completing the future of {item.what} failed: {error}",
              file=sys.stderr, flush=True)
