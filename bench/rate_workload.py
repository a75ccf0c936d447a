#!/usr/bin/env python3
"""A bundled workload run for ever, printing how many steps it did in each
second ("<monotonic time> <steps>"), so a tracer can be switched on and off
while it runs and its cost read off the same process's rate.

--counter FILE: the steps done so far, as a native u64 at the start of FILE
(written after each chunk), for a reader that wants exact counts between
two moments of its own.

SIGUSR1 registers PyTorch's own empty observer (a global RecordFunction
callback with no body) at --observer-p, SIGUSR2 clears the callbacks: the
reference a tracer's cost is set beside.

  /usr/bin/python3 bench/rate_workload.py --workload tiny [--counter FILE]
"""
import argparse
import mmap
import os
import signal
import struct
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "workloads"))

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["tiny", "mlp"], default="tiny")
    ap.add_argument("--counter")
    ap.add_argument("--observer-p", type=float, default=1e-6)
    a = ap.parse_args()
    torch.set_num_threads(1)
    # Python runs these between bytecodes of the main thread.
    signal.signal(signal.SIGUSR1, lambda *_: torch.autograd.
                  _set_empty_test_observer(True, a.observer_p))
    signal.signal(signal.SIGUSR2,
                  lambda *_: torch._C._autograd._clear_callbacks())
    counter = None
    if a.counter:
        with open(a.counter, "r+b") as f:
            f.truncate(8)
            counter = mmap.mmap(f.fileno(), 8)
    if a.workload == "tiny":
        import tiny_ops
        chunk, run = 200, lambda: tiny_ops.phase(200, 1)
    else:
        import mlp_threads
        chunk, run = 2, lambda: mlp_threads.run(2)
    print("ready", flush=True)
    start, steps, total = time.monotonic(), 0, 0
    while True:
        run()
        steps += chunk
        total += chunk
        if counter:
            counter[:8] = struct.pack("=Q", total)
        now = time.monotonic()
        if now - start >= 1:
            print(f"{now:.3f} {steps / (now - start):.1f}", flush=True)
            start, steps = now, 0


if __name__ == "__main__":
    main()
