"""What each rank of the installed package's job runs (as `python -c`, so that nothing of this
checkout is on its sys.path): Horovod's torch API from the installed threelc, an exact and a
3LC-compressed allreduce whose references every rank computes from every rank's seeded input,
and where everything it used came from. Its last line is one JSON object."""

import hashlib
import json
import os
import sys

import torch

import threelc
import threelc._library
import threelc.torch as hvd

N = 65536  # 256 KiB of fp32: compressed at the defaults (THREELC_MIN_COMPRESS_BYTES)


def rank_input(r: int) -> torch.Tensor:
    """Integers in [-8, 8]: every float sum is exact, so the uncompressed result must be."""
    return torch.randint(-8, 9, (N,), generator=torch.Generator().manual_seed(1000 + r)).float()


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()


hvd.init()
rank, size = hvd.rank(), hvd.size()
expected = sum(rank_input(r) for r in range(size))

before = threelc.statistics().wire_bytes_sent
exact = hvd.allreduce(rank_input(rank), op=hvd.Sum, name="exact")  # Compression.none
raw_bytes = threelc.statistics().wire_bytes_sent - before

before = threelc.statistics().wire_bytes_sent
packed = hvd.allreduce(rank_input(rank), op=hvd.Sum, name="packed",
                       compression=hvd.Compression.threelc)
packed_bytes = threelc.statistics().wire_bytes_sent - before
hvd.shutdown()

print(json.dumps({
    "rank": rank, "size": size,
    "python": sys.executable, "prefix": sys.prefix,
    "torch": torch.__version__, "threelc": threelc.__version__,
    "package_file": threelc.__file__, "library": str(threelc._library.path),
    "PYTHONPATH": os.environ.get("PYTHONPATH"),
    "THREELC_LIBRARY": os.environ.get("THREELC_LIBRARY"),
    "exact_equal": bool(torch.equal(exact, expected)),
    "packed_max_error": float((packed - expected).abs().max()),
    "exact_digest": digest(exact), "packed_digest": digest(packed),
    "raw_bytes_sent": raw_bytes, "packed_bytes_sent": packed_bytes,
}))
