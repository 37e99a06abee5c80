"""threelc.torch's errors, as Horovod's: a failed operation raises :class:`threelc.ThreelcError`
(also exported as ``HorovodInternalError``) carrying the engine's message; the engine's
submission refusals that Horovod raises as ValueError are :class:`DuplicateNameError` and
:class:`InvalidArgumentError`, ThreelcErrors too."""

from __future__ import annotations

import contextlib

from .. import engine as _engine
from ..engine import ThreelcError

HorovodInternalError = ThreelcError  # what Horovod code catches


class DuplicateNameError(ThreelcError, ValueError):
    """A submission under a name that this rank already has in flight (the engine's
    EDUPLICATE), raised at submission. A ValueError, as Horovod raises for it, and a
    ThreelcError like every other refusal of the engine."""

    __module__ = "threelc.torch"


class InvalidArgumentError(ThreelcError, ValueError):
    """Arguments the engine refuses at submission (its EINVAL: an alltoall's splits that do
    not fit the tensor, a root rank out of range, ...). A ValueError, as Horovod raises for
    them, and a ThreelcError like every other refusal of the engine."""

    __module__ = "threelc.torch"


# The engine's submission refusals that Horovod raises as ValueError.
_REFUSALS = {_engine.EDUPLICATE: DuplicateNameError, _engine.EINVAL: InvalidArgumentError}


@contextlib.contextmanager
def _refusals():
    """Around a submission to the engine: its EDUPLICATE refusal becomes DuplicateNameError,
    its EINVAL InvalidArgumentError (both ValueErrors). The internal API's ``refusals``
    (:mod:`._internal`); :mod:`.process_sets`, below that module, takes it from here."""
    try:
        yield
    except ThreelcError as error:
        kind = _REFUSALS.get(error.code)
        if kind is not None and not isinstance(error, kind):
            raise kind(str(error), error.code) from None
        raise
