"""worker.py's case of error-feedback checkpoints (threelc_feedback_save / _load)."""

from __future__ import annotations

import struct
import threading

import numpy as np

import threelc.numpy as hvd
from threelc import engine
from worker_checks import RANK, SIZE, Fail, check, emit, expect_error, out


# Error-feedback checkpoints: tensors of at least THREELC_MIN_COMPRESS_BYTES (so compressed),
# two under the prefix "ck/" and one outside it.
CHECKPOINT_TENSORS = (("ck/a", 20_000), ("ck/b", 16_384), ("other/c", 33_333))


def parse_feedback_blob(blob):
    """(rank, size, {name: float32 array}) of a threelc_feedback_save blob, read by the layout
    docs/WIRE_FORMAT.md gives, independently of the engine's parser."""
    check(len(blob) >= 24, lambda: f"feedback blob of {len(blob)} bytes")
    magic, version, rank, size, count = struct.unpack_from("<4sIIIQ", blob, 0)
    check(magic == b"3LCF" and version == 1, lambda: f"feedback blob header {magic!r} {version}")
    at = 24
    entries = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<I", blob, at)
        name = blob[at + 4:at + 4 + length].decode("utf-8")
        (n,) = struct.unpack_from("<Q", blob, at + 4 + length)
        at += 4 + length + 8
        entries[name] = np.frombuffer(blob, dtype="<f4", count=n, offset=at)
        at += 4 * n
    check(at == len(blob), lambda: f"feedback blob: {len(blob) - at} bytes after the entries")
    check(list(entries) == sorted(entries, key=lambda k: k.encode()),
          lambda: f"feedback blob entries not sorted: {list(entries)}")
    return rank, size, entries


def checkpoint_gradients(steps):
    """Per step, this rank's random gradient of every checkpoint tensor (seeded by rank)."""
    rng = np.random.default_rng(4242 + RANK)
    return [{name: rng.standard_normal(n).astype(np.float32) for name, n in CHECKPOINT_TENSORS}
            for _ in range(steps)]


def checkpoint_steps(grads):
    """Runs the steps one compressed Sum at a time (never fused: a fusion's segment cuts would
    depend on timing) and returns every result."""
    results = []
    for step in grads:
        results.append({name: hvd.allreduce(g, name=name, op=hvd.Sum,
                                            compression=hvd.Compression.threelc)
                        for name, g in step.items()})
    return results


def same_results(a, b):
    return all(np.array_equal(x[k].view(np.uint32), y[k].view(np.uint32))
               for x, y in zip(a, b) for k in x)


def case_feedback_checkpoint():
    """threelc_feedback_save / _load: K compressed steps, save, M steps recorded; a fresh
    engine starts with no residuals, refuses another rank's blob (EINVAL) and a damaged one
    (EMALFORMED, changing nothing), loads its own and replays the M steps bit for bit; without
    the load they differ; loading by prefix ("ck/", "other/") does as well as all at once."""
    k_steps, m_steps = 3, 4
    grads = checkpoint_gradients(k_steps + m_steps)
    for what, call in (("save", lambda: engine.feedback_save()),
                       ("load", lambda: engine.feedback_load(b"3LCF"))):
        expect_error(call, engine.ENOTINIT, f"feedback_{what} before init", "threelc_init")
    for bad, exc in ((lambda: engine.feedback_load("3LCF"), TypeError),
                     (lambda: engine.feedback_load(b"", prefix=b"ck/"), TypeError),
                     (lambda: engine.feedback_save("ck/\0"), ValueError)):
        try:
            bad()
        except exc:
            pass
        else:
            raise Fail(f"no {exc.__name__} from a bad feedback_save/_load argument")

    hvd.init()
    rank, size, entries = parse_feedback_blob(engine.feedback_save())
    check((rank, size, entries) == (RANK, SIZE, {}),
          lambda: f"a fresh engine saved rank {rank}, size {size}, entries {list(entries)}")
    checkpoint_steps(grads[:k_steps])
    blob = engine.feedback_save()
    by_prefix = {p: engine.feedback_save(p) for p in ("ck/", "other/")}
    rank, size, entries = parse_feedback_blob(blob)
    check((rank, size) == (RANK, SIZE), lambda: f"blob of rank {rank} of {size}")
    check({k: v.size for k, v in entries.items()} == dict(CHECKPOINT_TENSORS),
          lambda: f"blob holds {({k: v.size for k, v in entries.items()})}")
    for name, values in entries.items():
        check(np.all(np.isfinite(values)) and np.any(values != 0),
              lambda: f"residual of {name} is zero or not finite after {k_steps} steps")
    check(list(parse_feedback_blob(by_prefix["ck/"])[2]) == ["ck/a", "ck/b"],
          "feedback_save('ck/') holds other names")
    # Saves from another thread while the recorded steps run: they wait for the collective in
    # progress, every one is a whole blob, and the results are the same as without them.
    saves = []
    stop = threading.Event()

    def saver():
        while not stop.is_set():
            saves.append(parse_feedback_blob(engine.feedback_save())[2].keys())

    thread = threading.Thread(target=saver)
    thread.start()
    try:
        recorded = checkpoint_steps(grads[k_steps:])
    finally:
        stop.set()
        thread.join()
    check(saves and all(list(k) == [n for n, _ in CHECKPOINT_TENSORS] for k in saves),
          lambda: f"{len(saves)} concurrent saves, names {[list(k) for k in saves[:3]]}")
    for step, result in enumerate(recorded):
        for name, got in result.items():
            emit(f"ck/{step}/{name}", got)
    # Every rank's blob, to try another rank's.
    lengths = hvd.allgather(np.array([len(blob)], np.int64), name="ck/lengths")
    everyone = hvd.allgather(np.frombuffer(blob, np.uint8), name="ck/blobs").tobytes()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    blobs = [everyone[starts[r]:starts[r + 1]] for r in range(SIZE)]
    check(blobs[RANK] == blob, "allgather returned another blob for this rank")
    hvd.shutdown()
    expect_error(lambda: engine.feedback_save(), engine.ENOTINIT, "feedback_save after shutdown")

    # A fresh engine: no residuals; refuses another rank's blob and a damaged one.
    hvd.init()
    empty = engine.feedback_save()
    check(parse_feedback_blob(empty)[2] == {}, "a re-initialized engine kept residuals")
    other = (RANK + 1) % SIZE
    expect_error(lambda: engine.feedback_load(blobs[other]), engine.EINVAL,
                 "feedback_load of another rank's blob", f"rank {other} of a job of {SIZE}",
                 f"this is rank {RANK} of {SIZE}")
    engine.feedback_load(blob)
    check(engine.feedback_save() == blob, "save after load differs from the blob loaded")
    damaged = bytearray(blob)
    struct.pack_into("<Q", damaged, 24 + 4 + len("ck/a"), 1 << 40)  # ck/a's element count
    expect_error(lambda: engine.feedback_load(bytes(damaged)), engine.EMALFORMED,
                 "feedback_load of a damaged blob", "element count", "offset 32")
    expect_error(lambda: engine.feedback_load(blob[:-1]), engine.EMALFORMED,
                 "feedback_load of a truncated blob", "offset")
    expect_error(lambda: engine.feedback_load(blob, "ck/"), engine.EINVAL,
                 "feedback_load of names outside the prefix", "'other/c'", "prefix 'ck/'")
    check(engine.feedback_save() == blob, "a refused load changed the residuals")
    replayed = checkpoint_steps(grads[k_steps:])
    check(same_results(replayed, recorded), "the steps after loading the checkpoint differ from "
                                            "the uninterrupted run")
    hvd.shutdown()

    # Negative control: the same steps without the checkpoint give other results.
    hvd.init()
    fresh = checkpoint_steps(grads[k_steps:])
    check(not same_results(fresh, recorded), "the steps without the checkpoint were identical: "
                                             "the test cannot tell a load from none")
    hvd.shutdown()

    # By prefix: each part into its own prefix; the residuals of the run without the checkpoint
    # are replaced (under "ck/" and "other/") and the replay is bitwise again.
    hvd.init()
    checkpoint_steps(grads[:1])
    for prefix, part in by_prefix.items():
        engine.feedback_load(part, prefix)
    check(engine.feedback_save() == blob, "loading by prefix did not restore the whole blob")
    check(same_results(checkpoint_steps(grads[k_steps:]), recorded),
          "the steps after loading by prefix differ from the uninterrupted run")
    hvd.shutdown()
    out(f"STAT feedback_checkpoint rank {RANK}: blob {len(blob)} bytes, {len(saves)} "
        f"concurrent saves")
