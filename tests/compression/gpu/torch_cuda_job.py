#!/usr/bin/env python3
"""One rank of the GPU engine check (tools/gpu_check.sh): CUDA tensors through threelc.torch.

    THREELC_FUSION_THRESHOLD=0 threelcrun -np 2 python3 tests/compression/gpu/torch_cuda_job.py

Every rank allreduces the same random tensors twice: as CUDA tensors (the engine's device
path: the CUDA codec, residuals on the GPU, only blocks over PCIe; or NCCL / host staging when
uncompressed) and as CPU copies (the host path). With fusion off both paths cut the same
blocks, and the CUDA codec writes the CPU's bytes, so the results must be bitwise identical,
for three steps in a row (the residuals carried on the device as on the host), for fp32, fp16
and bf16, 3LC and uncompressed, sum and average with pre/postscale. Also checks a
non-contiguous tensor and the DDP-style in-place part of a flat buffer, and checkpoints: the
device's residuals saved (threelc_feedback_save) are the host's bytes for bytes, and loading
them back makes the next step repeat exactly. Prints one JSON line per
rank and exits 0 only if every check passed; skips (exit 77) where CUDA tensors cannot be used.
"""

import json
import sys

import torch

import threelc.torch as hvd
from threelc import engine


def main() -> int:
    if not torch.cuda.is_available():
        print("torch_cuda_job: no CUDA device for torch", file=sys.stderr)
        return 77
    why = engine.cuda_unavailable_reason()
    if why:
        print(f"torch_cuda_job: libthreelc cannot take CUDA tensors: {why}", file=sys.stderr)
        return 77
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)
    failures = []
    checks = 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for count in (1000, 300_000, 1_000_003):
            for compression in (hvd.Compression.threelc, hvd.Compression.none):
                for op, pre, post in ((hvd.Sum, 1.0, 1.0), (hvd.Average, 0.5, 3.0)):
                    name = f"{dtype}.{count}.{compression}.{op}".replace(" ", "")
                    for step in range(3):
                        gen = torch.Generator().manual_seed(1000 * step + rank)
                        host = torch.randn(count, generator=gen).to(dtype)
                        cuda = host.to(device)
                        on_gpu = hvd.allreduce(cuda, name="gpu." + name, op=op,
                                               prescale_factor=pre, postscale_factor=post,
                                               compression=compression)
                        on_cpu = hvd.allreduce(host, name="cpu." + name, op=op,
                                               prescale_factor=pre, postscale_factor=post,
                                               compression=compression)
                        checks += 1
                        a = on_gpu.cpu().view(torch.int16 if dtype != torch.float32
                                              else torch.int32)
                        b = on_cpu.view(torch.int16 if dtype != torch.float32 else torch.int32)
                        if not torch.equal(a, b):
                            diff = (a != b).nonzero()
                            failures.append(f"{name} step {step}: {diff.numel()} elements "
                                            f"differ, first at {diff[0].item()}")
    # In place, on a non-contiguous tensor, and on parts of one flat buffer (the DDP hook's way).
    base = torch.randn(64, 2048, generator=torch.Generator().manual_seed(rank))
    for what, make in (("transposed", lambda t: t.t()), ("slice", lambda t: t.view(-1)[100:50_100])):
        cuda = make(base.to(device).clone())
        host = make(base.clone())
        hvd.allreduce_(cuda, name="gpu.inplace." + what, compression=hvd.Compression.threelc)
        hvd.allreduce_(host, name="cpu.inplace." + what, compression=hvd.Compression.threelc)
        checks += 1
        if not torch.equal(cuda.cpu().view(torch.int32), host.view(torch.int32)):
            failures.append(f"in-place {what}: results differ")
    checks += check_checkpoints(device, failures)
    print(json.dumps({"rank": rank, "size": size, "device": str(device), "checks": checks,
                      "failures": failures[:10]}), flush=True)
    hvd.shutdown()
    return 1 if failures else 0


def check_checkpoints(device, failures) -> int:
    """The residuals of the CUDA tensors above are in a checkpoint as the CPU copies' are, and
    a load puts them back on the device."""
    on_gpu, on_cpu = engine.feedback_save("gpu."), engine.feedback_save("cpu.")
    # Same names after the 4-byte prefix, so the same order: the blobs differ only there.
    if on_gpu.replace(b"gpu.", b"cpu.") != on_cpu or len(on_gpu) <= 24:
        failures.append(f"checkpoint: the device's residuals ({len(on_gpu)} bytes) are not "
                        f"the host's ({len(on_cpu)} bytes)")
    x = torch.randn(300_000, generator=torch.Generator().manual_seed(7)).to(device)
    hvd.allreduce(x, name="gpu.checkpoint", compression=hvd.Compression.threelc)
    saved = engine.feedback_save("gpu.checkpoint")
    first = hvd.allreduce(x, name="gpu.checkpoint", compression=hvd.Compression.threelc)
    engine.feedback_load(saved, "gpu.checkpoint")
    again = hvd.allreduce(x, name="gpu.checkpoint", compression=hvd.Compression.threelc)
    if not torch.equal(first.cpu().view(torch.int32), again.cpu().view(torch.int32)):
        failures.append("checkpoint: the step after loading the device's residuals differs")
    return 2


if __name__ == "__main__":
    sys.exit(main())
