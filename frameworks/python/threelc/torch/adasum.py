"""``hvd.Adasum``: Horovod's Adasum reduction, which threelc does not have. It exists so that
Horovod code runs up to its use, which every collective and DistributedOptimizer refuse
(NotImplementedError, naming it)."""

from __future__ import annotations


class _AdasumOp:
    def __repr__(self) -> str:
        return "Adasum"


Adasum = _AdasumOp()
