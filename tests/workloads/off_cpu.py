"""Threads that are off CPU in known ways, each inside a record_function
scope, for the --off-cpu tests; each measures its scope itself (wall time
and its thread's CPU time) and prints the sums at the end as JSON:

- sleeper: "sleep_scope" sleeps 5 ms (off CPU, woken by a timer);
- spinner: "spin_scope" spins 5 ms in torch ops (on CPU, while it can be);
- holder/waiter: "hold_lock" holds a lock for 3 ms (sleeping), and
  "wait_lock" waits for it (woken by the holder's thread, in hold_lock);
- reader (--read FILE): "read_file" reads 64 KB of FILE with O_DIRECT
  (block I/O);
- pinned (--pin CPU): "pinned_spin" spins 5 ms on that CPU, which a hog
  process the test pins there shares (preempted).

With --windows FILE it also writes every call's clock window (scope,
native tid, CLOCK_MONOTONIC start and end ns) to FILE as JSON.

  /usr/bin/python3 off_cpu.py --seconds 3 [--read FILE] [--pin 0]
                              [--windows FILE]
"""
import argparse
import json
import mmap
import os
import threading
import time

import torch
from torch.profiler import record_function

# Big enough that a spin is mostly inside torch ops, which let go of the
# GIL: the threads here contend for their CPUs, not for the GIL.
A = torch.randn(192, 192)
TOTALS = {}
TOTALS_LOCK = threading.Lock()
# (scope, native tid, clock start, clock end) of every call, CLOCK_MONOTONIC
# ns: the test counts rfbpf's off-CPU time inside these windows only.
WINDOWS = []


def scope(name, body):
    """Runs body inside record_function(name), adding its wall and CPU
    time (read inside the scope) to TOTALS."""
    with record_function(name):
        w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        body()
        w, c = time.perf_counter_ns() - w0, time.thread_time_ns() - c0
    with TOTALS_LOCK:
        t = TOTALS.setdefault(name, {"calls": 0, "wall_ns": 0, "cpu_ns": 0})
        t["calls"] += 1
        t["wall_ns"] += w
        t["cpu_ns"] += c
        WINDOWS.append((name, threading.get_native_id(), w0, w0 + w))


def spin(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        torch.mm(A, A)


def sleeper(stop):
    while not stop.is_set():
        scope("sleep_scope", lambda: time.sleep(0.005))


def spinner(stop):
    while not stop.is_set():
        scope("spin_scope", lambda: spin(5))
        time.sleep(0.001)


LOCK = threading.Lock()


def holder(stop):
    def hold():
        with LOCK:
            time.sleep(0.003)
    while not stop.is_set():
        scope("hold_lock", hold)
        time.sleep(0.0005)


def waiter(stop):
    def wait():
        with LOCK:
            pass
    while not stop.is_set():
        scope("wait_lock", wait)


def reader(path, stop):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 65536)      # page-aligned, as O_DIRECT wants
    size = os.fstat(fd).st_size
    off = 0
    try:
        while not stop.is_set():
            scope("read_file", lambda: os.preadv(fd, [buf], off))
            off = (off + 65536) % max(size - 65536, 65536)
            time.sleep(0.001)
    finally:
        os.close(fd)


def pinned(cpu, stop):
    os.sched_setaffinity(0, {cpu})      # this thread only
    while not stop.is_set():
        scope("pinned_spin", lambda: spin(5))
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--read")
    ap.add_argument("--pin", type=int)
    ap.add_argument("--windows", help="write each call's clock window here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    stop = threading.Event()
    workers = [sleeper, spinner, holder, waiter]
    threads = [threading.Thread(target=f, args=(stop,), name=f.__name__)
               for f in workers]
    if args.read:
        threads.append(threading.Thread(target=reader, name="reader",
                                        args=(args.read, stop)))
    if args.pin is not None:
        threads.append(threading.Thread(target=pinned, name="pinned",
                                        args=(args.pin, stop)))
    for t in threads:
        t.start()
    print("ready", flush=True)
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join()
    if args.windows:
        with open(args.windows, "w") as f:
            json.dump(WINDOWS, f)
    print(json.dumps(TOTALS), flush=True)


if __name__ == "__main__":
    main()
