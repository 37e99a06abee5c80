"""The reductions of allreduce and reducescatter (``threelc_reduce_op`` in threelc/threelc.h,
mirrored here; tests/frameworks/python/test_abi_constants.py checks the values)."""

from __future__ import annotations

__all__ = ["ReduceOp", "Sum", "Average", "Min", "Max", "Product"]


class ReduceOp(int):
    """A reduction (threelc_reduce_op); an int, so it goes straight into the C struct."""

    _NAMES = {0: "Sum", 1: "Average", 2: "Min", 3: "Max", 4: "Product"}

    def __repr__(self) -> str:
        return f"threelc.{self._NAMES.get(int(self), int(self))}"


Sum = ReduceOp(0)
Average = ReduceOp(1)  # the sum divided by the number of ranks, after decoding
Min = ReduceOp(2)
Max = ReduceOp(3)
Product = ReduceOp(4)
_OPS = (Sum, Average, Min, Max, Product)
