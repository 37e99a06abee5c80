#!/usr/bin/python3
"""The CPU an idle engine takes: every rank starts the engine, submits nothing for --seconds,
and prints the process's CPU time over that wall time (the background thread's cycles are
all there is to count).

    tools/threelcrun -np 4 /usr/bin/python3 tools/bench/engine_idle_cpu.py [--seconds 5]

One JSON line per rank: {"rank": r, "cpu_percent_of_a_core": p, "seconds": s}.
"""

import argparse
import json
import time

import threelc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    threelc.init()
    cpu0, wall0 = time.process_time(), time.monotonic()
    time.sleep(args.seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    print(json.dumps({"rank": threelc.rank(), "cpu_percent_of_a_core": round(100 * cpu / wall, 2),
                      "seconds": round(wall, 2)}), flush=True)
    threelc.shutdown()


if __name__ == "__main__":
    main()
