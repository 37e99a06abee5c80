"""What the DDP suites share: cross-rank comparisons over torch.distributed's own group (gloo),
independent of the threelc engine they test."""

from __future__ import annotations

from typing import List

import torch
import torch.distributed as dist

from support.mixed_precision import bits


def gather(t: torch.Tensor) -> List[torch.Tensor]:
    """(collective) Every rank's `t` (all of one shape); index r is rank r's."""
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t.contiguous())
    return out


def differing_ranks(t: torch.Tensor) -> List[int]:
    """(collective) The ranks whose `t` differs from rank 0's, bit for bit."""
    rows = gather(bits(t))
    return [r for r, row in enumerate(rows) if not torch.equal(row, rows[0])]
