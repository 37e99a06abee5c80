"""worker.py's cases of the engine's life and the binding: shutdown with pending operations,
malformed settings, the binding's API, a dead peer."""

from __future__ import annotations

import gc
import os
import re
import sys
import tempfile
import threading
import time

import numpy as np

import threelc
import threelc.numpy as hvd
from threelc import engine
from threelc.engine import ThreelcError
from worker_checks import RANK, SIZE, Fail, check, emit, expect_equal, expect_error, names_rank, out
from worker_data import first_bound_sum, ints


def capture_fds(fn):
    """Runs fn() with file descriptors 1 and 2 redirected to a file; returns the text."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            fn()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        f.seek(0)
        return f.read().decode("utf-8", "replace")


def case_shutdown():
    """One rank submits an allreduce nobody else submits and shuts down: the handle fails
    with ESHUTDOWN and nothing hangs; init works again afterwards."""
    orphan_rank = int(sys.argv[2]) % SIZE if len(sys.argv) > 2 else SIZE - 1
    check(not hvd.is_initialized() and hvd.rank() == -1 and hvd.size() == -1,
          "before init: is_initialized/rank/size must say not initialized")
    expect_error(lambda: hvd.allreduce(np.ones(3, np.float32), name="early"), engine.ENOTINIT,
                 "allreduce before init")
    hvd.init()
    vals = [ints(r, (200,), -9, 9) for r in range(SIZE)]  # under THREELC_MIN_COMPRESS_BYTES
    got = hvd.allreduce(vals[RANK].astype(np.float32), name="sd/first", op=hvd.Sum)
    expect_equal(got, np.sum(vals, axis=0).astype(np.float32), "allreduce before shutdown")
    orphan = None
    if RANK == orphan_rank and SIZE > 1:  # with one rank nothing can stay pending
        keep = np.ones(1000, np.float32)
        orphan = hvd.allreduce_async(keep, name="sd/orphan", op=hvd.Sum)
    # every rank is still running here, and the orphan is in flight on its rank
    hvd.barrier()
    if orphan is not None:
        check(not orphan.poll(), "an allreduce only one rank submitted has finished")
    else:
        # the orphan's rank shuts down first (a shutdown elsewhere stops every rank too)
        time.sleep(0.5)
    t0 = time.monotonic()
    hvd.shutdown()
    took = time.monotonic() - t0
    check(took < 10, lambda: f"shutdown took {took:.1f} s")
    if orphan is not None:
        t0 = time.monotonic()
        expect_error(lambda: orphan.wait(timeout=10), engine.ESHUTDOWN,
                     "pending allreduce at shutdown")
        check(time.monotonic() - t0 < 5, "the pending handle did not complete at shutdown")
    check(not hvd.is_initialized() and hvd.rank() == -1,
          "after shutdown: is_initialized/rank must say not initialized")
    expect_error(lambda: hvd.allreduce(np.ones(3, np.float32), name="late"), engine.ENOTINIT,
                 "allreduce after shutdown")
    hvd.shutdown()  # a no-op when not initialized
    out(f"STAT shutdown took {took:.3f}s")
    # init again: a new job on the same coordinator address
    hvd.init()
    check(hvd.rank() == RANK and hvd.size() == SIZE,
          lambda: f"after re-init rank/size are {hvd.rank()}/{hvd.size()}")
    vals = [ints(r, (50000,), -8, 8, salt=1).astype(np.float32) for r in range(SIZE)]
    exact = np.sum(vals, axis=0)
    got = hvd.allreduce(vals[RANK], name="sd/again", op=hvd.Sum, compression=hvd.Compression.none)
    expect_equal(got, exact, "allreduce after re-init")
    got = hvd.allreduce(vals[RANK], name="sd/orphan", op=hvd.Sum)  # the orphan's name is free
    emit("sd/again/3lc", got)
    err = float(np.max(np.abs(got - exact)))
    check(err <= first_bound_sum(SIZE), lambda: f"compressed allreduce after re-init: error "
                                                f"{err} (residuals must start afresh)")
    hvd.shutdown()


def case_bad_env():
    """Each VAR=value argument, set alone, makes init fail with a message naming VAR; then
    init with the job's own environment back (its THREELC_TRANSPORT included) works."""
    pairs = [a.split("=", 1) for a in sys.argv[2:]]
    for var, value in pairs:
        before = os.environ.get(var)  # e.g. THREELC_TRANSPORT=ucx of the job's transport
        os.environ[var] = value
        try:
            hvd.init()
        except ThreelcError as e:
            message, code = str(e), e.code
        else:
            raise Fail(f"init accepted {var}={value!r}")
        check(var in message, lambda: f"init with {var}={value!r} failed, but the message "
                                      f"does not name {var}: {message}")
        check(code == engine.EINVAL,
              lambda: f"init with {var}={value!r} failed with {engine.error_name(code)}, "
                      f"expected THREELC_EINVAL for a malformed value: {message}")
        out(f"STAT bad_env {var}={value!r}: code {code}: {message}")
        check(not hvd.is_initialized(), f"is_initialized() after a failed init ({var})")
        if before is None:
            del os.environ[var]
        else:
            os.environ[var] = before
    hvd.init()
    vals = [ints(r, (10,), -9, 9) for r in range(SIZE)]
    got = hvd.allreduce(vals[RANK].astype(np.int32), name="env/ok", op=hvd.Sum)
    expect_equal(got, np.sum(vals, axis=0).astype(np.int32), "allreduce after the failed inits")
    hvd.shutdown()



def case_api():
    """The binding itself: identity, argument checks, timeouts, dropped handles, in-place,
    unnamed operations, push_pull."""
    check(not hvd.is_initialized(), "initialized before init()")
    hvd.init()
    hvd.init()  # no-op
    check(hvd.is_initialized(), "not initialized after init()")
    for fn, var in ((hvd.rank, "THREELC_RANK"), (hvd.size, "THREELC_SIZE"),
                    (hvd.local_rank, "THREELC_LOCAL_RANK"), (hvd.local_size, "THREELC_LOCAL_SIZE"),
                    (hvd.cross_rank, "THREELC_CROSS_RANK"), (hvd.cross_size, "THREELC_CROSS_SIZE")):
        want = int(os.environ.get(var, "0" if "RANK" in var else "1"))
        check(fn() == want, lambda: f"{fn.__name__}() is {fn()}, {var} says {want}")
    check(threelc.rank() == RANK and threelc.engine.size() == SIZE, "package-level identity")
    check(re.fullmatch(r"\d+\.\d+\.\d+", engine.version()) is not None, "version()")
    # Python-side argument checks
    for bad, exc in ((lambda: engine.allreduce(np.zeros(4, np.uint16)), TypeError),
                     (lambda: engine.allreduce(np.zeros(4, np.complex64)), TypeError),
                     (lambda: engine.allreduce(np.zeros((4, 4), np.float32)[:, 1]), ValueError),
                     (lambda: engine.allreduce(np.zeros(4, ">f4")), TypeError),
                     (lambda: engine.allreduce(np.zeros(4, np.float32), dtype="int32"), TypeError),
                     (lambda: engine.allreduce([1.0, 2.0]), TypeError),
                     (lambda: engine.allreduce(np.zeros(4, np.float32), op=7), ValueError)):
        try:
            bad()
        except exc:
            pass
        else:
            raise Fail(f"no {exc.__name__} from a bad argument")
    # the engine's own argument checks: refused at submission (or failing the handle)
    # a CUDA tensor where none can be used (no CUDA in the build, or no device): refused with
    # the reason; a CUDA tensor in another collective: refused naming allreduce
    why = engine.cuda_unavailable_reason()
    if why:
        expect_error(lambda: engine.allreduce_device(4096, 4096, (4,), "float32", 0,
                                                     name="api/cuda"),
                     engine.EINVAL, "a CUDA tensor without a usable device", "device 0",
                     why.split(":")[0])
    t = engine._initialized_struct(engine._Tensor, "threelc_tensor_init")
    t.dtype, t.ndim, t.device = engine.DTYPES["float32"], 0, 0
    t.data = t.output = 4096
    expect_error(lambda: engine._submit("threelc_broadcast", "broadcast", None, t,
                                        engine._options(), (), lambda hid: None),
                 engine.EINVAL, "a CUDA tensor in a broadcast", "only allreduce takes CUDA tensors")
    for what, submit, code in (
            ("sparsity 3", lambda: hvd.allreduce(np.ones(20000, np.float32), name="api/s3",
                                                 compression=hvd.Compression.threelc(3.0)),
             engine.EINVAL),
            ("root_rank out of range", lambda: hvd.broadcast(np.ones(3, np.float32), SIZE + 1,
                                                              name="api/root"), engine.EINVAL),
            ("alltoall splits not summing to dim0",
             lambda: hvd.alltoall(np.ones((4, 2), np.float32), splits=[5] * SIZE,
                                  name="api/splits"), engine.EINVAL)):
        expect_error(submit, code, what)
    # bool (THREELC_BOOL) is moved, never reduced
    for what, submit in (("a bool allreduce", lambda: hvd.allreduce(np.ones(3, bool),
                                                                    name="api/bool")),
                         ("a bool reducescatter",
                          lambda: hvd.reducescatter(np.ones(SIZE, bool), name="api/bool_rs"))):
        expect_error(submit, engine.EINVAL, what, "bool tensors are not reduced")
    flags = (np.arange(2 * SIZE) % (RANK + 2) == 0).reshape(SIZE, 2)
    gathered = hvd.allgather(flags, name="api/bool_gather")
    check(gathered.dtype == np.bool_, lambda: f"bool allgather gave dtype {gathered.dtype}")
    expect_equal(gathered, np.concatenate([(np.arange(2 * SIZE) % (r + 2) == 0).reshape(SIZE, 2)
                                           for r in range(SIZE)]), "bool allgather")
    # numpy-level conveniences: non-contiguous input, 0-d scalars, lists, no input change
    base = ints(RANK, (6, 4), -5, 5).astype(np.float32)
    view = base[:, 1]
    ref = np.sum([ints(r, (6, 4), -5, 5) for r in range(SIZE)], axis=0)[:, 1].astype(np.float32)
    expect_equal(hvd.allreduce(view, name="api/strided", op=hvd.Sum), ref, "strided input")
    expect_equal(base, ints(RANK, (6, 4), -5, 5).astype(np.float32), "input modified")
    got = hvd.allreduce(np.float64(RANK + 1), name="api/scalar", op=hvd.Sum)
    check(np.shape(got) == () and float(got) == SIZE * (SIZE + 1) / 2,
          lambda: f"0-d allreduce gave {got!r}")
    # in place through the engine binding
    x = ints(RANK, (33,), -5, 5).astype(np.int64)
    h = engine.allreduce(x, x, name="api/inplace", op=hvd.Sum)
    result = h.wait()
    check(result is x, "in-place allreduce must return its output array")
    expect_equal(x, np.sum([ints(r, (33,), -5, 5) for r in range(SIZE)], axis=0), "in place")
    check(h.wait() is x, "a second wait() must return the same result")
    # unnamed operations, numbered alike on every rank
    for t in range(3):
        got = hvd.allreduce(np.full(5, RANK + t, np.int32), op=hvd.Sum)
        expect_equal(got, np.full(5, sum(r + t for r in range(SIZE)), np.int32), f"unnamed {t}")
    got = hvd.push_pull(np.full(7, 2.0, np.float32), name="api/pp")
    expect_equal(got, np.full(7, 2.0, np.float32), "push_pull (Average)")
    if SIZE > 1:
        # wait with a timeout: rank 1 submits 2 s late
        if RANK == 1:
            time.sleep(2.0)
            got = hvd.allreduce(np.ones(3, np.float32), name="api/late", op=hvd.Sum)
        else:
            h = hvd.allreduce_async(np.ones(3, np.float32), name="api/late", op=hvd.Sum)
            t0 = time.monotonic()
            expect_error(lambda: h.wait(timeout=0.2), engine.ETIMEOUT, "wait(timeout=0.2)")
            waited = time.monotonic() - t0
            check(0.15 <= waited < 1.5, lambda: f"wait(timeout=0.2) took {waited:.3f} s")
            check(not h.poll(), "poll() after the timeout")
            got = hvd.synchronize(h)
        expect_equal(got, np.full(3, SIZE, np.float32), "allreduce waited after a timeout")
        # a handle dropped while pending: its buffers stay alive until the engine is done
        if RANK == 0:
            h = hvd.allreduce_async(np.arange(4096, dtype=np.float32), name="api/dropped",
                                    op=hvd.Sum, compression=hvd.Compression.none)
            del h
            gc.collect()
            junk = [np.full(4096, -1.0, np.float32) for _ in range(64)]  # reuse freed memory
            check(len(junk) == 64, "allocations")
        else:
            time.sleep(0.3)
            got = hvd.allreduce(np.arange(4096, dtype=np.float32), name="api/dropped",
                                op=hvd.Sum, compression=hvd.Compression.none)
            expect_equal(got, SIZE * np.arange(4096, dtype=np.float32), "dropped handle's peer")
        hvd.barrier()
    # the same Handle from several threads
    h = hvd.allreduce_async(np.full(9, 3, np.int8), name="api/threads", op=hvd.Sum)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(h.wait(timeout=30)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(len(seen) == 4 and all(s is seen[0] for s in seen), "Handle.wait from 4 threads")
    expect_equal(seen[0], np.full(9, 3 * SIZE, np.int8), "threads' result")
    hvd.shutdown()
    check(not hvd.is_initialized() and hvd.rank() == -1, "after shutdown")



def case_dead_peer():
    """The last rank dies (os._exit, no shutdown) while the others wait in an allreduce: they
    get THREELC_EPEER naming it well before THREELC_TIMEOUT, and later submissions are refused
    with the same cause."""
    threelc.init()
    hvd.allreduce(np.ones(4, np.float32), name="warmup", op=engine.Sum)
    if RANK == SIZE - 1:
        time.sleep(0.5)
        os._exit(0)
    started = time.monotonic()
    expect_error(lambda: hvd.allreduce(np.ones(4, np.float32), name="x", op=engine.Sum),
                 engine.EPEER, "allreduce with a dead peer", names_rank(SIZE - 1))
    seconds = time.monotonic() - started
    check(seconds < 20, f"the error took {seconds:.1f} s")
    expect_error(lambda: hvd.allreduce(np.ones(4, np.float32), name="y", op=engine.Sum),
                 engine.EPEER, "submission after the engine stopped", names_rank(SIZE - 1))
    threelc.shutdown()
