"""The smallest threelc job: every rank averages a vector (3LC push_pull), sums integers
exactly, and gathers rows. Start it with any launcher (README.md, "Starting jobs")."""
import numpy as np

import threelc
import threelc.numpy as tn

threelc.init()
grad = np.random.default_rng(threelc.rank()).standard_normal(1 << 20).astype(np.float32)
avg = tn.allreduce(grad, name="grad")  # average, 3LC push_pull
ints = tn.allreduce(np.arange(4) * threelc.rank(), name="i", op=threelc.Sum)  # exact
rows = tn.allgather(np.full((threelc.rank() + 1, 2), threelc.rank()))
print(f"{threelc.rank()} {threelc.size()} {avg.std():.4f} {ints.tolist()} {rows.shape}", flush=True)
threelc.shutdown()
