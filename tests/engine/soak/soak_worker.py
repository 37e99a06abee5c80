"""One rank of the soak: ``threelcrun -np N /usr/bin/python3 soak_worker.py [CALLS]``.

Every rank draws the same sequence of operations from one seeded RNG (THREELC_SOAK_SEED), so
all ranks submit the same names in the same order: push_pull / allreduce calls, synchronous
and asynchronous (up to THREELC_SOAK_IN_FLIGHT handles outstanding, collected in a random
order), of random sizes (0 to ~300 K elements), dtypes (uint8, int8, int32, int64, float16,
bfloat16, float32, float64) and ops (Sum, Average, Max, Min). Names come from a pool
(THREELC_SOAK_POOL names, each with a fixed dtype, shape, op and compression, so the response
cache hits and, with the pool larger than THREELC_CACHE_CAPACITY, evicts) and, for about one
call in ten, are fresh unique names (uncompressed: a compressed tensor keeps its 3LC residual
under its name by design, which is measured separately at the end).

Pool names of a float dtype above THREELC_MIN_COMPRESS_BYTES are mostly 3LC-compressed.
Checks: every uncompressed result equals the exact reference (data are small integers, so
every sum is exact in every dtype); compressed results are finite and within SLACK times the
fixed-owner error-feedback bound (see compressed_tolerance); a running sha256 over every
result (with its call index, name, dtype and shape) is printed at the end for the test to
compare across ranks (bitwise identity). The hash differs from run to run: which tensors a
cycle fuses depends on timing, and with it the owner of each position of a compressed tensor
and so its 3LC rounding; within a run every rank gets the same bytes.

Resident memory (VmRSS) is read after warm-up (THREELC_SOAK_WARMUP, fraction of the calls,
default 0.1, and at least twice the pool) and at the end, both after collecting every handle,
gc.collect() and malloc_trim(0) (the untrimmed figures are printed too); growth of
THREELC_SOAK_MAX_GROWTH (default 0.05) or more fails. Then, outside the figures above, the
cost of fresh names is measured: THREELC_SOAK_FRESH more names compressed, and as many
uncompressed, of 65536 float32 each (STAT fresh_* lines; informative, never failing).

Lines the test reads (stdout, prefixed "[rank] " by threelcrun):
    PROGRESS <calls done> <seconds> rss_kb <VmRSS> untrimmed_kb <VmRSS before the trim>
                                                          every 10 %
    RSS warmup_kb <a> end_kb <b> growth_pct <g> calls <c>
    STAT <key> ...
    HASH soak <sha256 hex>
    DONE soak <seconds>s
A failure prints ``FAIL rank R call C (<name>): ...`` on stderr and exits 1.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import os
import sys
import time

import numpy as np

import threelc.numpy as hvd
from threelc import engine

RANK = int(os.environ.get("THREELC_RANK", "0"))
SIZE = int(os.environ.get("THREELC_SIZE", "1"))
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("THREELC_SOAK_CALLS",
                                                                       "2000"))
SEED = int(os.environ.get("THREELC_SOAK_SEED", "20261204"))
POOL = int(os.environ.get("THREELC_SOAK_POOL", "160"))
IN_FLIGHT = int(os.environ.get("THREELC_SOAK_IN_FLIGHT", "8"))
WARMUP = float(os.environ.get("THREELC_SOAK_WARMUP", "0.1"))
MAX_GROWTH = float(os.environ.get("THREELC_SOAK_MAX_GROWTH", "0.05"))
FRESH_RATE = float(os.environ.get("THREELC_SOAK_FRESH_RATE", "0.1"))
FRESH = int(os.environ.get("THREELC_SOAK_FRESH", "32"))
MIN_COMPRESS_BYTES = int(os.environ.get("THREELC_MIN_COMPRESS_BYTES") or 1024)
ALGORITHM = os.environ.get("THREELC_ALLREDUCE") or "push_pull"

SLACK = 4.0  # compressed results: allowed multiple of the fixed-owner bound (see below)
MAX_ELEMENTS = 300_000
ITEMSIZE = {"uint8": 1, "int8": 1, "int32": 4, "int64": 8, "float16": 2, "bfloat16": 2,
            "float32": 4, "float64": 8}
FLOATS = ("float16", "bfloat16", "float32", "float64")
DTYPES = ["float32"] * 4 + ["float16", "bfloat16", "float64", "float64", "int32", "int32",
                            "int64", "int64", "int8", "uint8"]
OPS = {"sum": hvd.Sum, "average": hvd.Average, "max": hvd.Max, "min": hvd.Min}

# base[i] = ((i * 31 + (i >> 7)) % 17) - 8: call c reads it from offset (c * 7919) % 4096.
_I = np.arange(MAX_ELEMENTS + 4096, dtype=np.int64)
BASE = (((_I * 31 + (_I >> 7)) % 17) - 8).astype(np.int64)
del _I


LIBC = ctypes.CDLL("libc.so.6")
LIBC.malloc_trim.argtypes = [ctypes.c_size_t]


class Fail(Exception):
    pass


def out(line: str) -> None:
    print(line, flush=True)


def vm_rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise Fail("no VmRSS in /proc/self/status")


class Spec:
    """What one name always is: dtype, shape, op, compression (a pool name keeps its spec)."""

    __slots__ = ("name", "dtype", "shape", "op", "compressed", "sparsity")

    def __init__(self, name, dtype, shape, op, compressed, sparsity):
        self.name, self.dtype, self.shape, self.op = name, dtype, shape, op
        self.compressed, self.sparsity = compressed, sparsity

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        what = f"3lc s={self.sparsity}" if self.compressed else "raw"
        return f"{self.name} {self.dtype}{list(self.shape)} {self.op} {what}"


def draw_spec(rng, name: str, allow_compression: bool) -> Spec:
    dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    threshold = MIN_COMPRESS_BYTES // ITEMSIZE[dtype]  # elements at which compression starts
    big = dtype in FLOATS and rng.random() < 0.45
    if big:
        count = int(rng.integers(threshold, max(threshold + 1, min(MAX_ELEMENTS, 4 * threshold))))
    else:
        # log-uniform from 0 to ~threshold elements; a few 0- and 1-element tensors
        count = int(np.exp(rng.uniform(0, np.log(threshold)))) - 1
    shape = (count,)
    if count >= 64 and rng.random() < 0.25:
        rows = int(rng.integers(2, 9))
        shape = (rows, count // rows)
    elif count == 1 and rng.random() < 0.5:
        shape = ()
    compressed = allow_compression and dtype in FLOATS and big and rng.random() < 0.85
    if compressed:
        op = "sum" if rng.random() < 0.6 else "average"
        sparsity = 1.0 if rng.random() < 0.8 else 1.5
    else:
        choices = ["sum", "sum", "sum", "max", "min"]
        if dtype not in ("int8", "uint8"):
            choices.append("average")
        op = choices[int(rng.integers(len(choices)))]
        sparsity = None
    return Spec(name, dtype, shape, op, compressed, sparsity)


def data_of(spec: Spec, call: int, rank: int):
    """(this rank's values as int64, the exact result as float64) of `spec` at `call`."""
    n = spec.count
    offset = (call * 7919) % 4096
    base = BASE[offset:offset + n]
    if spec.dtype == "uint8":
        base = base + 8  # [0, 16]
    if spec.op == "average":
        k = 1 + call % 3
        mine = base + ((SIZE - 1) * k if rank == 0 else -k)
        ref = base
    else:
        mine = base + rank
        if spec.op == "sum":
            ref = base * SIZE + SIZE * (SIZE - 1) // 2
        elif spec.op == "max":
            ref = base + (SIZE - 1)
        else:
            ref = base
    return mine.reshape(spec.shape), ref.astype(np.float64).reshape(spec.shape)


def to_engine(spec: Spec, values):
    if spec.dtype == "bfloat16":
        flat = values.astype(np.float32).reshape(-1)  # .view() refuses 0-d arrays
        return (flat.view(np.uint32) >> 16).astype(np.uint16).reshape(values.shape), "bfloat16"
    return values.astype(spec.dtype), None


def as_float(spec: Spec, result) -> np.ndarray:
    if spec.dtype == "bfloat16":
        bits = np.asarray(result, np.uint16).reshape(-1).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64).reshape(np.shape(result))
    return np.asarray(result).astype(np.float64)


def compressed_tolerance(spec: Spec) -> float:
    """|result - exact| bound of one step with error feedback when every position keeps its
    owner (see tests/engine/jobs/worker_data.py drift_bound_sum): the outputs' running sum trails
    the exact one by the sum of the current residuals, at most D, so one step is within 2 D.

    Here positions change owners: the owner of a position depends on where the tensor lands in
    the fused buffer, and a rank's residual buffer holds push residuals where it does not own a
    position and pull residuals where it does (engine/src/error_feedback.h), so a pull residual
    (up to ~n x) may be pushed later and the fixed-owner bound does not hold (errors 1 % above
    it were seen). The soak allows SLACK times this bound and reports the worst ratio."""
    x = 8 + 3 * (SIZE - 1) if spec.op == "average" else 8 + SIZE - 1  # largest |input|
    if SIZE == 1:
        return 0.0
    # A residual is at most s / 2 of its block's scale, the largest |input + residual|, so
    # E <= f I with f = s / (2 - s) for inputs |I| (f = 1 at s = 1), and a decoded value is
    # at most (1 + f) I.
    s = spec.sparsity or 1.0
    f = s / (2 - s)
    if ALGORITHM == "ring":
        if s != 1.0:
            return float("inf")  # not derived for the ring at s != 1
        d = float((2 ** (SIZE + 1) - SIZE - 2) * x)
    else:
        # n - 1 push residuals <= f x; the owner's sum Y <= x + (1 + f) x (n - 1), its pull
        # residual <= f Y.
        d = f * x * (SIZE - 1) + f * (x + (1 + f) * x * (SIZE - 1))
    return 2 * d / (SIZE if spec.op == "average" else 1)


class Pending:
    __slots__ = ("call", "spec", "handle", "ref")

    def __init__(self, call, spec, handle, ref):
        self.call, self.spec, self.handle, self.ref = call, spec, handle, ref


class Soak:
    def __init__(self):
        self.rng = np.random.default_rng(SEED)  # the same on every rank: the same sequence
        self.pool = [draw_spec(self.rng, f"pool/{k}", True) for k in range(POOL)]
        self.pending: list = []
        self.busy: set = set()  # names with a handle outstanding
        self.hash = hashlib.sha256()
        self.fresh = 0
        self.counts = {"compressed": 0, "raw": 0, "fresh": 0, "sync": 0, "async": 0,
                       "compressed_bytes": 0, "raw_bytes": 0}
        self.current = (-1, "-")  # (call, name) for the failure message
        self.worst = (0.0, 0.0, -1, "-")  # compressed: (error / fixed-owner bound, error, ...)

    # -------------------------------------------------------------- one call
    def submit(self, call: int, spec: Spec, sync: bool):
        self.current = (call, spec.name)
        mine, ref = data_of(spec, call, RANK)
        array, dtype = to_engine(spec, mine)
        compression = (hvd.Compression.threelc(sparsity=spec.sparsity) if spec.compressed
                       else hvd.Compression.none)
        fn = hvd.push_pull_async if self.rng.random() < 0.6 else hvd.allreduce_async
        handle = fn(array, name=spec.name, op=OPS[spec.op], compression=compression,
                    dtype=dtype)
        item = Pending(call, spec, handle, ref)
        self.counts["sync" if sync else "async"] += 1
        kind = "compressed" if spec.compressed else "raw"
        self.counts[kind] += 1
        self.counts[kind + "_bytes"] += array.nbytes
        if sync:
            self.finish(item)
        else:
            self.pending.append(item)
            self.busy.add(spec.name)

    def finish(self, item: Pending):
        spec = item.spec
        self.current = (item.call, spec.name)
        got = item.handle.wait(timeout=120)
        self.busy.discard(spec.name)
        want_dtype = np.uint16 if spec.dtype == "bfloat16" else np.dtype(spec.dtype)
        if got.shape != tuple(spec.shape) or got.dtype != want_dtype:
            raise Fail(f"{spec}: result shape {got.shape} dtype {got.dtype}")
        values = as_float(spec, got)
        if spec.compressed and SIZE > 1:
            if not np.all(np.isfinite(values)):
                raise Fail(f"{spec}: non-finite values in a compressed result")
            if values.size:
                err = float(np.max(np.abs(values - item.ref)))
                bound = compressed_tolerance(spec)
                # fp16 / bf16 round the output: add an ulp-ish of the magnitudes involved
                bound += 2.0 ** -7 * (float(np.max(np.abs(item.ref))) + bound)
                ratio = err / bound
                if ratio > self.worst[0]:
                    self.worst = (ratio, err, item.call, repr(spec))
                if ratio > SLACK:
                    raise Fail(f"{spec}: max error {err} above {SLACK} times the fixed-owner "
                               f"error-feedback bound {bound}")
        else:
            bad = np.nonzero(values.reshape(-1) != item.ref.reshape(-1))[0]
            if bad.size:
                i = int(bad[0])
                raise Fail(f"{spec}: {bad.size} of {values.size} elements differ from the exact "
                           f"result; first at flat index {i}: got {values.reshape(-1)[i]!r}, "
                           f"expected {item.ref.reshape(-1)[i]!r}")
        h = self.hash
        h.update(f"{item.call} {spec.name} {got.dtype.str} {got.shape}\n".encode())
        h.update(memoryview(np.ascontiguousarray(got)).cast("B") if got.size else b"")

    def drain(self):
        order = self.rng.permutation(len(self.pending))
        pending, self.pending = self.pending, []
        for k in order:
            self.finish(pending[int(k)])

    # -------------------------------------------------------------- the loop
    def pick(self, call: int) -> Spec:
        if call < len(self.pool):
            return self.pool[call]  # the first calls touch every pool name once, in order
        if self.rng.random() < FRESH_RATE:
            self.fresh += 1
            self.counts["fresh"] += 1
            return draw_spec(self.rng, f"fresh/{self.fresh}", False)
        while True:
            spec = self.pool[int(self.rng.integers(len(self.pool)))]
            if spec.name not in self.busy:
                return spec

    def run(self, calls: int):
        # warm-up: every pool name has run once (its residual, if compressed, is allocated)
        warm_at = min(calls, max(1, int(calls * WARMUP), 2 * len(self.pool)))
        report_every = max(1, calls // 10)
        started = time.monotonic()
        rss_warm = None
        call = 0
        while call < calls:
            r = self.rng.random()
            if r < 0.35:
                self.submit(call, self.pick(call), sync=True)
            elif r < 0.98:
                self.submit(call, self.pick(call), sync=False)
                limit = 1 + int(self.rng.integers(IN_FLIGHT))
                while len(self.pending) >= limit:
                    k = int(self.rng.integers(len(self.pending)))
                    self.finish(self.pending.pop(k))
            else:
                self.drain()
                continue
            call += 1
            if call == warm_at or call % report_every == 0 or call == calls:
                raw, rss = self.measure()
                out(f"PROGRESS {call} {time.monotonic() - started:.1f}s rss_kb {rss} "
                    f"untrimmed_kb {raw}")
                if call == warm_at:
                    rss_warm, raw_warm = rss, raw
                    out(f"STAT warmup calls {call} rss_kb {rss} untrimmed_kb {raw} seconds "
                        f"{time.monotonic() - started:.1f}")
        rss_end, raw_end = rss, raw
        growth = 100.0 * (rss_end - rss_warm) / rss_warm
        seconds = time.monotonic() - started
        c = self.counts
        out(f"STAT counts calls {calls} sync {c['sync']} async {c['async']} compressed "
            f"{c['compressed']} raw {c['raw']} fresh_names {c['fresh']} compressed_mb "
            f"{c['compressed_bytes'] / 2**20:.1f} raw_mb {c['raw_bytes'] / 2**20:.1f} "
            f"seconds {seconds:.1f}")
        ratio, err, at, what = self.worst
        out(f"STAT compressed_error worst_ratio_to_fixed_owner_bound {ratio:.3f} error {err} "
            f"call {at} ({what})")
        out(f"STAT untrimmed_rss warmup_kb {raw_warm} end_kb {raw_end} growth_pct "
            f"{100.0 * (raw_end - raw_warm) / raw_warm:.2f}")
        out(f"RSS warmup_kb {rss_warm} end_kb {rss_end} growth_pct {growth:.2f} calls {calls}")
        out(f"HASH soak {self.hash.hexdigest()}")
        self.current = (calls, "-")
        if growth >= 100.0 * MAX_GROWTH:
            raise Fail(f"resident memory grew {growth:.2f} % between call {warm_at} "
                       f"({rss_warm} kB) and call {calls} ({rss_end} kB): limit "
                       f"{100.0 * MAX_GROWTH:.1f} %")

    def measure(self):
        """(VmRSS, VmRSS after malloc_trim) in kB once every handle is collected: trimming
        returns the free pages glibc keeps in its heaps, whose amount depends on the sizes of
        the last calls' buffers (+-2.5 % here), so what remains is what is allocated."""
        self.drain()
        gc.collect()
        raw = vm_rss_kb()
        LIBC.malloc_trim(0)
        return raw, vm_rss_kb()

    def fresh_cost(self, count: int):
        """RSS per fresh name, compressed (a residual kept per name by design) and raw."""
        n = 65536
        for compressed in (False, True):
            before = self.measure()[1]
            for k in range(count):
                spec = Spec(f"cost/{'3lc' if compressed else 'raw'}/{k}", "float32", (n,), "sum",
                            compressed, 1.0 if compressed else None)
                self.submit(10**9 + k, spec, sync=True)
            after = self.measure()[1]
            kind = "compressed" if compressed else "raw"
            out(f"STAT fresh_{kind} names {count} bytes_each {4 * n} rss_kb {before} -> {after} "
                f"per_name_kb {(after - before) / max(1, count):.1f}")


def main() -> int:
    started = time.monotonic()
    soak = None
    try:
        hvd.init()
        soak = Soak()
        soak.run(CALLS)
        if FRESH > 0:
            soak.fresh_cost(FRESH)
        hvd.shutdown()
    except Exception as e:  # noqa: BLE001 - any failure is reported with where it happened
        call, name = soak.current if soak else (-1, "-")
        kind = (f"ThreelcError ({engine.error_name(e.code)})"
                if isinstance(e, engine.ThreelcError) else type(e).__name__)
        print(f"FAIL rank {RANK} call {call} ({name}): {kind}: {e}", file=sys.stderr, flush=True)
        return 1
    out(f"DONE soak {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
