#!/usr/bin/env python3
"""A bundled workload run for ever, printing how many steps it did in each
second ("<monotonic time> <steps>"), so a tracer can be switched on and off
while it runs and its cost read off the same process's rate.

  /usr/bin/python3 bench/rate_workload.py --workload tiny
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "workloads"))

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["tiny", "mlp"], default="tiny")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.workload == "tiny":
        import tiny_ops
        chunk, run = 200, lambda: tiny_ops.phase(200, 1)
    else:
        import mlp_threads
        chunk, run = 2, lambda: mlp_threads.run(2)
    print("ready", flush=True)
    start, steps = time.monotonic(), 0
    while True:
        run()
        steps += chunk
        now = time.monotonic()
        if now - start >= 1:
            print(f"{now:.3f} {steps / (now - start):.1f}", flush=True)
            start, steps = now, 0


if __name__ == "__main__":
    main()
