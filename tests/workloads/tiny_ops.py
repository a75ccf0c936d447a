"""A deterministic dispatch-bound workload that never calls the profiler:
each step runs the same tiny CPU ops, so the op count per step is known.

Phases are released by lines on stdin (so a tracer can attach, detach and
re-attach in between); each prints its result. --profile-out runs the
phases under torch.profiler.profile() and writes its event names, the
reference a full rfbpf capture must equal.

  /usr/bin/python3 tiny_ops.py --steps 1000 --phases 2
"""
import argparse
import collections
import json
import os
import sys
import threading
import time

import torch


def step(x, w):
    y = torch.add(x, 1.0)
    y = torch.mul(y, w)
    y = torch.relu(y)
    return torch.sum(y)


@torch.jit.script
def forked_steps(x, w, steps: int):
    acc = torch.zeros(())
    for _ in range(steps):
        acc = acc + torch.sum(torch.relu(torch.mul(torch.add(x, 1.0), w)))
    return acc


@torch.jit.script
def fork_and_wait(x, w, steps: int):
    fut = torch.jit.fork(forked_steps, x, w, steps)
    return torch.jit.wait(fut)


def phase(steps, threads):
    """Runs steps on each of `threads` Python threads at once, and when
    threads > 1 also in a torch.jit.fork task (TorchScript's inter-op
    pool); returns a checksum."""
    x = torch.arange(16, dtype=torch.float32)
    w = torch.full((16,), 0.5)
    out = [0.0] * (threads + 1)

    def work(i):
        acc = torch.zeros(())
        for _ in range(steps):
            acc = acc + step(x, w)
        out[i] = float(acc)

    def fork():
        out[threads] = float(fork_and_wait(x, w, steps))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(1, threads)]
    if threads > 1:
        ts.append(threading.Thread(target=fork))
    for t in ts:
        t.start()
    work(0)
    for t in ts:
        t.join()
    return sum(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--phases", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile-out")
    ap.add_argument("--profile", choices=["torch", "observer"],
                    help="run under torch.profiler, or with the empty "
                    "global observer on")
    ap.add_argument("--time", action="store_true",
                    help="print each phase's wall time to stderr")
    args = ap.parse_args()
    torch.set_num_threads(1)
    prof = None
    if args.profile == "observer":
        torch.autograd._set_empty_test_observer(True, 1.0)
    if args.profile_out or args.profile == "torch":
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    print("ready", flush=True)
    for i in range(args.phases):
        sys.stdin.readline()
        t0 = time.perf_counter()
        result = phase(args.steps, args.threads)
        if args.time:
            print(f"phase_seconds={time.perf_counter() - t0:.6f}",
                  file=sys.stderr, flush=True)
        print(f"phase {i}: {result!r}", flush=True)
    if prof:
        prof.__exit__(None, None, None)
        if args.profile_out:
            names = collections.Counter(e.name for e in prof.events())
            with open(args.profile_out, "w") as f:
                json.dump(names, f)


if __name__ == "__main__":
    main()
    # torch 1.13 aborts at interpreter shutdown once the jit.fork inter-op
    # pool has run ("terminate called without an active exception"): leave
    # without running C++ static destructors.
    sys.stdout.flush()
    os._exit(0)
