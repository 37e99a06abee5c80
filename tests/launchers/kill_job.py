"""A job whose rank 2 dies: ``<launcher> -n 4 python kill_job.py``.

Every rank joins and runs one allreduce; then rank 2 kills itself (SIGKILL) and the others run
a second allreduce, which the engine must fail. A survivor prints ``ERROR <code> <message>``
and exits 1; one whose allreduce returns prints ``NOERROR`` and exits 2 (the death went
unnoticed). The rank comes from the engine (the launcher's variables): tests/engine/faults'
fault_worker.py reads THREELC_RANK, which only threelcrun sets.

--ignore-sigterm: the survivors ignore SIGTERM, which mpirun sends them as soon as it sees the
victim die (and SIGKILL after its odls_base_sigkill_timeout), so that they report the death as
a training script would instead of dying before they notice it.
"""

import os
import signal
import sys

import numpy as np

import threelc
import threelc.numpy as tn
from threelc.engine import ThreelcError

VICTIM = 2
if "--ignore-sigterm" in sys.argv[1:]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

threelc.init()
tn.allreduce(np.ones(16, np.float32), name="first", op=threelc.Sum)
print("FIRST DONE", flush=True)
if threelc.rank() == VICTIM:
    os.kill(os.getpid(), signal.SIGKILL)
try:
    tn.allreduce(np.ones(1 << 16, np.float32), name="second", op=threelc.Sum)
except ThreelcError as e:
    print(f"ERROR {e.code_name} {str(e)!r}", flush=True)
    sys.exit(1)
print("NOERROR", flush=True)
sys.exit(2)
