"""Known allocations per record_function scope, for --memory's tests.

Each iteration (an `iteration` scope) runs:
  keep_4mb   makes a 4 MiB tensor and keeps it, freeing the one the last
             iteration kept;
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
  --wait       before the iterations, make the old tensors, print "ready"
                and wait for a line on stdin (rfbpf -p attaches meanwhile)
  --device     also report blocks of a CUDA device (cuda_alloc scope):
                the CUDA caching allocator's call of c10's real
                reportMemoryUsageToProfiler, made here through ctypes
                (no GPU: the addresses are made up, nothing is touched)
  --hold        after them, print "done" and sleep until killed, so the
                kept tensors are live when tracing stops
  --forever     iterate until killed (after "ready"), 20 ms apart
  --grow        with --forever: each iteration also keeps 64 KiB more
                (a grow scope), and prints "grown N" (blocks kept)
"""
import argparse
import json
import os
import queue
import sys
import threading
import time

import torch
from torch.autograd.profiler import record_function

kept = []
latest = [None]
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
            latest[0] = torch.zeros(1024 * 1024)    # 4 MiB, kept
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


def device_reporter():
    """c10::reportMemoryUsageToProfiler(ptr, bytes, total_allocated,
    total_reserved, Device) as the CUDA caching allocator calls it on each
    malloc and free; Device is {DeviceType type; DeviceIndex index}, two
    bytes passed in a register."""
    import ctypes
    lib = ctypes.CDLL(find_c10())
    for name in ("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE",
                 "_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE"):
        try:
            f = getattr(lib, name)
        except AttributeError:
            continue
        f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64,
                      ctypes.c_uint64, ctypes.c_uint16]
        f.restype = None
        return f
    raise SystemExit("no c10::reportMemoryUsageToProfiler")


def find_c10():
    with open("/proc/self/maps") as m:
        for line in m:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libc10.so"):
                return path
    raise SystemExit("libc10 is not mapped")


CUDA = 1


def device_blocks(report):
    """Two 1 MiB blocks of cuda:0, one freed: +1 MiB live, in a segment
    of 20 MiB the allocator reserved."""
    with record_function("cuda_alloc"):
        a, b, mib = 0x7f0000000000, 0x7f0000100000, 1 << 20
        report(a, mib, mib, 20 * mib, CUDA)
        report(b, mib, 2 * mib, 20 * mib, CUDA)
        report(a, -mib, mib, 20 * mib, CUDA)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--device", action="store_true")
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--forever", action="store_true")
    ap.add_argument("--grow", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    helper = threading.Thread(target=freer, name="freer", daemon=True)
    helper.start()
    n = args.profile or args.iters
    for _ in range(n):
        old.append(torch.zeros(512 * 1024))   # 2 MiB each, made first
    report = device_reporter() if args.device else None
    if args.forever:
        print("ready", flush=True)
        i = 0
        while True:
            iteration(i)
            if args.grow:
                with record_function("grow"):
                    kept.append(torch.zeros(16 * 1024))
                print("grown", i + 1, flush=True)
            i += 1
            time.sleep(0.02)
    if args.wait:
        print("ready", flush=True)
        sys.stdin.readline()
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
    if report:
        device_blocks(report)
    to_free.put(None)
    helper.join()
    print("done", len(kept), flush=True)
    while args.hold:
        time.sleep(0.1)


if __name__ == "__main__":
    main()
