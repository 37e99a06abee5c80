"""worker.py's case of process sets: two disjoint sets (even and odd ranks) running every
collective at once under the same names, the queries, the refusals (a non-member, a root
outside the set, a set added twice, a removed set), a removal failing a pending operation, and
3LC error feedback kept apart per set."""

from __future__ import annotations

import re
import time

import numpy as np

from threelc import engine
from cases_feedback_checkpoint import parse_feedback_blob
from worker_checks import RANK, SIZE, check, expect_equal, expect_error, out
from worker_data import first_bound_sum, ints


def wait_all(handles):
    return {key: h.wait(timeout=60) for key, h in handles.items()}


def submit_every_collective(ps, members, salt):
    """Submits, without waiting, every collective in set `ps` (of `members`, job ranks) under
    names every set uses; returns the handles and the exact reference of each result."""
    k = len(members)
    i = members.index(RANK)
    handles, want = {}, {}
    # raw allreduce: an exact sum, and an average of multiples of k (exact in float32)
    vals = {r: ints(r, (5, 7), -1000, 1000, salt) for r in members}
    handles["sum"] = engine.allreduce(vals[RANK].astype(np.int32), name="ps/sum", op=engine.Sum,
                                      process_set=ps)
    want["sum"] = np.sum([vals[r] for r in members], axis=0).astype(np.int32)
    avg = {r: ints(r, (300,), -50, 50, salt + 1) * k for r in members}
    handles["avg"] = engine.allreduce(avg[RANK].astype(np.float32), name="ps/avg",
                                      op=engine.Average, compression=engine.Compression.none,
                                      process_set=ps)
    want["avg"] = (np.sum([avg[r] for r in members], axis=0) // k).astype(np.float32)
    # allgather: member i contributes i + 1 rows, in member order
    rows = {r: ints(r, (members.index(r) + 1, 3), -9, 9, salt + 2) for r in members}
    handles["gather"] = engine.allgather(rows[RANK].astype(np.int64), name="ps/gather",
                                         process_set=ps)
    want["gather"] = np.concatenate([rows[r] for r in members]).astype(np.int64)
    # broadcast from the set's last member, a job rank
    root = members[-1]
    handles["bcast"] = engine.broadcast(ints(RANK, (4, 4), 0, 99, salt + 3).astype(np.float64),
                                        root_rank=root, name="ps/bcast", process_set=ps)
    want["bcast"] = ints(root, (4, 4), 0, 99, salt + 3).astype(np.float64)
    # alltoall: member a sends (a + b) % 2 + 1 rows to member b; a row says (source, index)
    splits = [[(a + b) % 2 + 1 for b in range(k)] for a in range(k)]

    def rows_of(a):
        return np.array([[members[a], t] for t in range(sum(splits[a]))], np.int32).reshape(-1, 2)

    handles["a2a"] = engine.alltoall(rows_of(i), splits=splits[i], name="ps/a2a", process_set=ps)
    want["a2a"] = np.concatenate([rows_of(a)[sum(splits[a][:i]):sum(splits[a][:i + 1])]
                                  for a in range(k)])
    want["a2a_splits"] = np.array([splits[a][i] for a in range(k)], np.int64)
    # reducescatter: 2k + 1 rows; the first (2k + 1) % k members get a row more
    dim0 = 2 * k + 1
    part = [dim0 // k + (1 if m < dim0 % k else 0) for m in range(k)]
    rs = {r: ints(r, (dim0, 2), -100, 100, salt + 4) for r in members}
    handles["rs"] = engine.reducescatter(rs[RANK].astype(np.int64), name="ps/rs", op=engine.Sum,
                                         process_set=ps)
    want["rs"] = np.sum([rs[r] for r in members], axis=0)[sum(part[:i]):sum(part[:i + 1])]
    handles["barrier"] = engine.barrier(process_set=ps)
    want["barrier"] = None
    return handles, want


def check_collectives(handles, want, what):
    got = wait_all(handles)
    for key in ("sum", "avg", "gather", "bcast", "rs"):
        expect_equal(got[key], want[key], f"{what}: {key}")
    collected, received = got["a2a"]
    expect_equal(collected, want["a2a"], f"{what}: alltoall rows")
    expect_equal(received, want["a2a_splits"], f"{what}: alltoall received splits")
    check(got["barrier"] is None, f"{what}: barrier returned {got['barrier']!r}")


def feedback_steps(name, ps, grads):
    """Compressed sums of `grads` under `name` in set `ps`, one at a time (never fused)."""
    return [engine.allreduce(g, name=name, op=engine.Sum, compression=engine.Compression.threelc,
                             process_set=ps).wait(timeout=60) for g in grads]


def case_process_sets():
    for what, call in (("add", lambda: engine.add_process_set([0])),
                       ("size", lambda: engine.process_set_size(0)),
                       ("ids", engine.process_set_ids)):
        expect_error(call, engine.ENOTINIT, f"process set {what} before init", "threelc_init")
    engine.init()
    check(SIZE >= 3, "the process set case needs at least 3 ranks")
    even = [r for r in range(SIZE) if r % 2 == 0]
    odd = [r for r in range(SIZE) if r % 2 == 1]
    check(engine.process_set_ids() == [0], lambda: f"sets before any add: "
                                                     f"{engine.process_set_ids()}")
    check(engine.process_set_size(0) == SIZE and engine.process_set_rank(0) == RANK,
          "the global set's size and rank are the job's")
    even_id = engine.add_process_set(list(reversed(even)))  # any order: the engine sorts
    odd_id = engine.add_process_set(odd)
    check((even_id, odd_id) == (1, 2), lambda: f"ids {even_id}, {odd_id}; expected 1, 2")
    mine, other = (even, odd) if RANK % 2 == 0 else (odd, even)
    my_id, other_id = (even_id, odd_id) if RANK % 2 == 0 else (odd_id, even_id)
    check(engine.process_set_ids() == [0, 1, 2], lambda: f"ids {engine.process_set_ids()}")
    check(engine.process_set_ranks(my_id) == mine and engine.process_set_ranks(other_id) == other,
          "process_set_ranks")
    check(engine.process_set_size(other_id) == len(other), "size of the other set")
    check(engine.process_set_rank(my_id) == mine.index(RANK), "rank in my set")
    check(engine.process_set_included(my_id) and not engine.process_set_included(other_id),
          "included")
    expect_error(lambda: engine.process_set_rank(other_id), engine.EINVAL,
                 "rank in a set this rank is not in", f"rank {RANK} is not a member",
                 f"process set {other_id}")

    # Every collective in both sets at once, under the same names, with the global set's
    # allreduce of one of those names in flight too.
    glob = ints(RANK, (5, 7), -1000, 1000, 77).astype(np.int32)
    global_sum = engine.allreduce(glob, name="ps/sum", op=engine.Sum)
    handles, want = submit_every_collective(my_id, mine, salt=10)
    check_collectives(handles, want, f"process set {my_id} {mine}")
    expect_equal(global_sum.wait(timeout=60),
                 np.sum([ints(r, (5, 7), -1000, 1000, 77) for r in range(SIZE)],
                        axis=0).astype(np.int32), "the global set's ps/sum beside the sets'")

    # 3LC in the sets: within 3LC's first-step bound of the exact sum, bitwise the same on
    # every member (an allgather in the set compares them).
    values = {r: ints(r, (4000,), -8, 8, 21).astype(np.float32) for r in mine}
    got = engine.allreduce(values[RANK], name="ps/3lc", op=engine.Sum,
                           compression=engine.Compression.threelc,
                           process_set=my_id).wait(timeout=60)
    exact = np.sum([values[r] for r in mine], axis=0)
    err = float(np.max(np.abs(got - exact)))
    check(err <= first_bound_sum(len(mine)) + 1e-3,
          lambda: f"3LC in set {my_id}: error {err} over the bound {first_bound_sum(len(mine))}")
    check(len(mine) == 1 or err > 0, "3LC in a set of several ranks compressed nothing")
    rows = engine.allgather(got.reshape(1, -1), name="ps/3lc/check",
                            process_set=my_id).wait(timeout=60)
    check(all(np.array_equal(row.view(np.uint32), got.view(np.uint32)) for row in rows),
          "3LC results differ between the set's members")

    # Unnamed operations are numbered per set: the even set runs two barriers, the odd one one,
    # then the global barrier must still match on every rank.
    for _ in range(2 if my_id == even_id else 1):
        engine.barrier(process_set=my_id).wait(timeout=60)
    engine.barrier().wait(timeout=60)

    # Refusals at submission, on this rank: a set it is not in, a root outside its set.
    expect_error(lambda: engine.allreduce(np.ones(4, np.float32), name="ps/foreign",
                                          process_set=other_id),
                 engine.EINVAL, "allreduce in another set", f"rank {RANK} is not a member",
                 f"process set {other_id}")
    expect_error(lambda: engine.broadcast(np.ones(4, np.float32), root_rank=other[0],
                                          name="ps/root", process_set=my_id),
                 engine.EINVAL, "broadcast from a root outside the set",
                 f"root_rank {other[0]} is not a member", f"process set {my_id}")
    expect_error(lambda: engine.allreduce(np.ones(4, np.float32), process_set=9), engine.EINVAL,
                 "an unknown set", "process set 9 does not exist")
    expect_error(lambda: engine.add_process_set([0, SIZE]), engine.EINVAL,
                 "a rank outside the job", f"rank {SIZE} is outside")
    # A set added twice: refused on every rank, naming the set that has those ranks.
    expect_error(lambda: engine.add_process_set(even), engine.EINVAL, "the even set again",
                 "exists already", f"process set {even_id} has the same ranks")
    expect_error(lambda: engine.remove_process_set(0), engine.EINVAL, "removing set 0",
                 "global process set 0 cannot be removed")

    feedback_per_set(my_id, mine)

    # A removal fails the set's operations still pending: rank 0 submits one its partner never
    # does, then every rank removes the even set.
    orphan = None
    if RANK == 0:
        orphan = engine.allreduce(np.ones(8, np.float32), name="ps/orphan", process_set=even_id)
        engine.flush()
        time.sleep(0.3)  # it reaches rank 0's coordinator before the removal does
    engine.barrier().wait(timeout=60)
    engine.remove_process_set(even_id)
    if orphan is not None:
        expect_error(lambda: orphan.wait(timeout=60), engine.EINVAL, "the orphan at the removal",
                     f"process set {even_id} was removed while", "ps/orphan",
                     re.compile(r"submitted by rank 0\b"))
    check(engine.process_set_ids() == [0, odd_id], lambda: f"ids after the removal: "
                                                           f"{engine.process_set_ids()}")
    for what, call in (("size", lambda: engine.process_set_size(even_id)),
                       ("allreduce", lambda: engine.allreduce(np.ones(2, np.float32),
                                                              process_set=even_id)),
                       ("remove again", lambda: engine.remove_process_set(even_id))):
        expect_error(call, engine.EINVAL, f"{what} after the removal",
                     f"process set {even_id} was removed")
    # The odd set still works; the even ranks again make a set, under a new id.
    if RANK in odd:
        vals = {r: ints(r, (9,), -5, 5, 31) for r in odd}
        got = engine.allreduce(vals[RANK].astype(np.int64), name="ps/sum", op=engine.Sum,
                               process_set=odd_id).wait(timeout=60)
        expect_equal(got, np.sum([vals[r] for r in odd], axis=0).astype(np.int64),
                     "the odd set after the even one was removed")
    again = engine.add_process_set(even)
    check(again == 3, lambda: f"the even ranks' new set has id {again}; ids are never reused")
    engine.remove_process_set(again)
    engine.remove_process_set(odd_id)
    check(engine.process_set_ids() == [0], "sets left at the end")
    out(f"STAT process_sets N={SIZE} even {even} odd {odd}")
    engine.shutdown()


def feedback_per_set(my_id, mine):
    """3LC error feedback is kept per set: steps of 'ps/ef' in this rank's set, each followed by
    a step of 'ps/ef' (as many elements) in the global set, give bitwise the results of the same
    steps under a name nobody else uses; the checkpoint blob holds both residuals."""
    rng = np.random.default_rng(100 + RANK)
    grads = [rng.standard_normal(3000).astype(np.float32) for _ in range(4)]
    noise = [rng.standard_normal(3000).astype(np.float32) * 5 for _ in range(4)]
    shared = []
    for g, h in zip(grads, noise):
        shared += feedback_steps("ps/ef", my_id, [g])
        feedback_steps("ps/ef", 0, [h])
    alone = feedback_steps("ps/ef/alone", my_id, grads)
    for step, (a, b) in enumerate(zip(shared, alone)):
        check(np.array_equal(a.view(np.uint32), b.view(np.uint32)),
              lambda: f"step {step} of 'ps/ef' in set {my_id} differs from the same steps alone: "
                      f"the global set's 'ps/ef' changed this set's residual")
    _, _, entries = parse_feedback_blob(engine.feedback_save())
    expected = {"ps/ef", f"process_set.{my_id}/ps/ef", f"process_set.{my_id}/ps/ef/alone",
                f"process_set.{my_id}/ps/3lc"}
    check(set(entries) == expected, lambda: f"feedback blob entries {sorted(entries)}, expected "
                                            f"{sorted(expected)}")
    blob = engine.feedback_save(f"process_set.{my_id}/")
    engine.feedback_load(blob, prefix=f"process_set.{my_id}/")  # loads back under its prefix
