"""What the test ranks run: dump the environment (after an allreduce through the engine in
"allreduce" mode), print lines, wait for a go file."""

import json
import os
import sys
import time

KEYS = ["THREELC_RANK", "THREELC_SIZE", "THREELC_LOCAL_RANK", "THREELC_LOCAL_SIZE",
        "THREELC_CROSS_RANK", "THREELC_CROSS_SIZE", "THREELC_COORDINATOR", "THREELC_SECRET",
        "THREELC_TRANSPORT", "THREELC_COMPRESSION", "THREELC_SPARSITY", "THREELC_TIMELINE",
        "THREELC_START_TIMEOUT", "PYTHONPATH", "FOO", "FORWARDED", "THREELC_LIBRARY",
        "OMP_NUM_THREADS", "SSH_CONNECTION"]


def main():
    mode = sys.argv[1]
    rank = os.environ["THREELC_RANK"]
    if mode in ("env", "allreduce"):
        import threelc  # must work in every rank
        out = sys.argv[2]
        info = {k: os.environ.get(k) for k in KEYS}
        info["threelc_file"] = threelc.__file__
        info["cwd"] = os.getcwd()
        info["pid"] = os.getpid()
        if mode == "allreduce":  # the job's ranks meet at THREELC_COORDINATOR
            import threelc.numpy as hvd
            hvd.init()
            total = hvd.allreduce([float(rank) + 1.0], op=hvd.Sum,
                                  compression=hvd.Compression.none)
            info["sum"] = float(total[0])
            hvd.shutdown()
        tmp = os.path.join(out, f"env.{rank}.tmp")
        with open(tmp, "w") as f:
            json.dump(info, f)
        os.rename(tmp, os.path.join(out, f"env.{rank}.json"))
        print(f"{mode} written by rank {rank}")
        print(f"stderr of rank {rank}", file=sys.stderr)
        if len(sys.argv) > 3:  # wait for the go file
            deadline = time.monotonic() + 30
            while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
                time.sleep(0.05)
    elif mode == "lines":
        n = int(sys.argv[2])
        for i in range(n):
            print(f"out {rank} {i} " + "x" * (i * 37 % 3000), flush=(i % 7 == 0))
            print(f"err {rank} {i}", file=sys.stderr, flush=(i % 5 == 0))
        sys.stdout.write(f"tail {rank} without newline")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
