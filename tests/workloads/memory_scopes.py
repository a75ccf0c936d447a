"""Known allocations per record_function scope, for --memory's tests.

Each iteration (an `iteration` scope) runs:
  keep_4mb   makes a 4 MiB tensor and keeps it (a list that grows);
  churn      makes 1000 small tensors and frees each (self memory about
             zero, the ops below it allocate);
  handoff    makes a 64 KiB tensor that the helper thread frees later
             (a free on another thread than the allocation's);
  free_old   frees one tensor made before tracing began (--attach-wait:
             the job waits for a file first).
The leak scope leak_8mb makes 8 MiB once and keeps it, in a function of
its own so its Python line is known.

  --profile N   run N iterations under torch.profiler(profile_memory=
                True) and print its key_averages() as JSON lines:
                {"name", "calls", "self_cpu_mem", "cpu_mem"}
  --iters N     run N iterations untraced (rfbpf traces them)
  --wait-for F  before the iterations, make the old tensors and wait for
                file F (rfbpf -p attaches meanwhile); prints "ready"
  --hold        after them, print "done" and sleep until killed, so the
                kept tensors are live when tracing stops
"""
import argparse
import json
import os
import queue
import threading
import time

import torch
from torch.autograd.profiler import record_function

kept = []
old = []
to_free = queue.Queue()


def freer():
    while True:
        t = to_free.get()
        if t is None:
            return
        del t


def leak():
    with record_function("leak_8mb"):
        kept.append(torch.empty(2 * 1024 * 1024))   # 8 MiB: the leak


def iteration(i):
    with record_function("iteration"):
        with record_function("keep_4mb"):
            kept.append(torch.zeros(1024 * 1024))   # 4 MiB, kept
        with record_function("churn"):
            for _ in range(1000):
                a = torch.ones(64)
                del a
        with record_function("handoff"):
            to_free.put(torch.zeros(16 * 1024))     # 64 KiB, freed there
        with record_function("free_old"):
            if old:
                old.pop()
        if i == 0:
            leak()
    # The helper's free lands between iterations, not in a scope.
    while not to_free.empty():
        time.sleep(0.001)
    time.sleep(0.002)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--wait-for", default="")
    ap.add_argument("--hold", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    helper = threading.Thread(target=freer, name="freer", daemon=True)
    helper.start()
    n = args.profile or args.iters
    for _ in range(n):
        old.append(torch.zeros(512 * 1024))   # 2 MiB each, made first
    if args.wait_for:
        print("ready", flush=True)
        while not os.path.exists(args.wait_for):
            time.sleep(0.01)
    if args.profile:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU],
                     profile_memory=True) as prof:
            for i in range(n):
                iteration(i)
        for e in prof.key_averages():
            print(json.dumps({"name": e.key, "calls": e.count,
                              "self_cpu_mem": e.self_cpu_memory_usage,
                              "cpu_mem": e.cpu_memory_usage}))
    else:
        for i in range(n):
            iteration(i)
    to_free.put(None)
    helper.join()
    print("done", len(kept), flush=True)
    while args.hold:
        time.sleep(0.1)


if __name__ == "__main__":
    main()
