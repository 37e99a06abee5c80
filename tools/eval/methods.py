"""The training methods tools/eval/evaluate compares, and how each one's job is started.

Every method trains the same model on the same data, shards, seeds and schedule: the Horovod
API methods run examples/train_fashion_mnist.py (the Fashion-MNIST models) or
examples/train_transformer.py (the GPT-2 language models) under threelcrun (the engine), the
DDP ones examples/train_fashion_mnist_ddp.py or examples/train_transformer_ddp.py with torch's
DistributedDataParallel over gloo and one communication hook. "DDP" (no hook) is the baseline
every ratio is taken against.
"""

import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
# The language models evaluate can train (its model name -> examples/text_lm.py's size); every
# other model is one of examples/fashion_mnist.py's.
LANGUAGE_MODELS = {"gpt2-small": "small", "gpt2-large": "large"}
BASELINE = "DDP"


@dataclass(frozen=True)
class Method:
    label: str
    api: str                      # "horovod" (threelc.torch) or "ddp" (DistributedDataParallel)
    arguments: tuple              # the example's arguments that select the method
    needs_torch2: bool = False    # not offered by torch 1.13 over gloo
    lr: dict = field(default_factory=dict)  # model -> learning rate, where not the model's best
    peer: bool = False            # what a user would pick without threelc's 3LC
    language_only: bool = False   # an option of examples/train_transformer*.py only


# One bucket for PowerSGD: torch 1.13's PowerSGD over gloo fails with several
# ("op.preamble.length <= op.nbytes"), see examples/train_fashion_mnist_ddp.py.
_POWERSGD = ("--hook", "powersgd", "--bucket-cap-mb", "1000", "--powersgd-rank")

METHODS = (
    Method("threelc 3LC", "horovod", ("--compression", "threelc")),
    Method("threelc 3LC hook", "ddp", ("--hook", "threelc")),
    Method("threelc 3LC LVA", "horovod",  # 3LC with threelc.torch's LocalVarianceAdamW
           ("--compression", "threelc", "--optimizer", "local-variance-adamw"),
           language_only=True),
    Method("threelc fp16", "horovod", ("--compression", "fp16"), peer=True),  # Horovod's fp16
    Method("threelc none", "horovod", ("--compression", "none")),
    Method(BASELINE, "ddp", ("--hook", "none"), peer=True),
    Method("DDP fp16", "ddp", ("--hook", "fp16"), peer=True),
    Method("DDP bf16", "ddp", ("--hook", "bf16"), needs_torch2=True, peer=True),
    Method("DDP PowerSGD r1", "ddp", (*_POWERSGD, "1"), peer=True),
    Method("DDP PowerSGD r2", "ddp", (*_POWERSGD, "2"), peer=True),
    Method("DDP PowerSGD r4", "ddp", (*_POWERSGD, "4"), peer=True),
    Method("DDP PowerSGD r8", "ddp", (*_POWERSGD, "8"), peer=True),
)
LABELS = tuple(m.label for m in METHODS)
PEERS = tuple(m.label for m in METHODS if m.peer)
# The methods the targets are about.
THREELC_3LC = ("threelc 3LC", "threelc 3LC hook", "threelc 3LC LVA")
UNCOMPRESSED_THREELC = "threelc none"


def by_label(labels):
    """The methods named in `labels` (comma-separated, or "all"), in METHODS' order."""
    if labels == "all":
        return METHODS
    wanted = [w.strip() for w in labels.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in LABELS]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(map(repr, unknown))}: "
                         f"known are {', '.join(LABELS)}")
    return tuple(m for m in METHODS if m.label in wanted)


def is_language_model(model):
    """Whether `model` is one of LANGUAGE_MODELS (its quality a validation loss, lower is
    better) rather than a Fashion-MNIST classifier (a test accuracy)."""
    return model in LANGUAGE_MODELS


def example(method, model):
    """The example script that trains `model` through `method`'s API."""
    workload = "transformer" if is_language_model(model) else "fashion_mnist"
    return EXAMPLES / f"train_{workload}{'_ddp' if method.api == 'ddp' else ''}.py"


def command(method, python, model, common):
    """The emulated cluster's job for `method`: argv run on every host by threelcrun."""
    lr = method.lr.get(model)
    arguments = [*method.arguments, "--model", LANGUAGE_MODELS.get(model, model), *common,
                 *(["--lr", str(lr)] if lr is not None else [])]
    if method.api == "horovod":
        return [python, str(example(method, model)), *arguments]
    # DDP takes torch's rendezvous variables from the ones threelcrun sets; the coordinator's
    # port + 1 is free (the engine, started by the threelc hook only, listens on the port).
    ddp = ("RANK=$THREELC_RANK WORLD_SIZE=$THREELC_SIZE LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "
           "MASTER_ADDR=${THREELC_COORDINATOR%:*} "
           "MASTER_PORT=$((${THREELC_COORDINATOR##*:} + 1)) "
           f"exec {shlex.quote(python)} {shlex.quote(str(example(method, model)))} "
           + " ".join(shlex.quote(a) for a in arguments))
    return ["sh", "-c", ddp]


def bytes_per_step(summary):
    """Bytes one rank sent per training step, from the example's JSON summary."""
    steps = summary.get("steps") or 0
    if "bytes_sent_per_rank" in summary:  # the Horovod example (the engine's count)
        sent = summary["bytes_sent_per_rank"]
    else:  # the DDP example (every TCP socket's count), MB
        sent = (summary.get("mb_sent_per_rank") or 0) * 1e6
    return sent / steps if steps and sent else None
