"""Tiny CPU ops for a given time, as fast as dispatch allows, on the main
thread and on short-lived threads started every --churn-ms (so a tracer
meets threads that come and go). Prints "ready" once torch is imported and
the number of steps at the end. For long runs: memory and fleet tests.

  /usr/bin/python3 busy_ops.py --seconds 120 --churn-ms 500
"""
import argparse
import mmap
import struct
import sys
import threading
import time

import torch


def step(x):
    y = torch.add(x, 1.0)
    y = torch.mul(y, 0.5)
    return torch.sum(torch.relu(y))


def burst(x, n):
    for _ in range(n):
        step(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--churn-ms", type=float, default=0,
                    help="start a thread running 50 steps this often")
    ap.add_argument("--wait", action="store_true",
                    help="print ready, then wait for a line on stdin")
    ap.add_argument("--steps", type=int, default=0,
                    help="stop after this many steps (not --seconds)")
    ap.add_argument("--linger", type=float, default=0,
                    help="then sleep this long before exiting")
    ap.add_argument("--size", type=int, default=8,
                    help="elements of the tensor each op works on")
    ap.add_argument("--counter",
                    help="keep the steps done so far in this file (a "
                    "native u64, written every 64 steps)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.ones(a.size)
    counter = None
    if a.counter:
        with open(a.counter, "wb") as f:
            f.write(bytes(8))
        with open(a.counter, "r+b") as f:
            counter = mmap.mmap(f.fileno(), 8)
    print("ready", flush=True)
    if a.wait:
        sys.stdin.readline()
    end = time.monotonic() + a.seconds
    next_thread = time.monotonic()
    steps = 0
    while (steps < a.steps) if a.steps else (time.monotonic() < end):
        step(x)
        steps += 1
        if counter is not None and not steps % 64:
            struct.pack_into("=Q", counter, 0, steps)
        if a.churn_ms and time.monotonic() >= next_thread:
            t = threading.Thread(target=burst, args=(x, 50))
            t.start()
            t.join()
            next_thread += a.churn_ms / 1000
    print(steps, flush=True)
    time.sleep(a.linger)


if __name__ == "__main__":
    main()
