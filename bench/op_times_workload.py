"""Mid-sized ops (a 64x64 matmul, a relu that calls clamp_min, an add,
a sum), one thread, inside record_function("step"). Prints one JSON line:
the steps' wall time and, with --profile, torch.profiler's per-op
averages (total and self, µs) as key_averages() gives them."""
import argparse
import json
import time

import torch
from torch.profiler import record_function


def steps(n, a, b):
    for _ in range(n):
        with record_function("step"):
            c = torch.mm(a, b)
            c = torch.relu(c)
            c = torch.add(c, a)
            c.sum()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    steps(50, a, b)                     # warm-up
    out = {}
    if args.profile:
        with torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            steps(args.steps, a, b)
            out["wall_s"] = time.perf_counter() - t0
        out["ops"] = {e.key: {"calls": e.count,
                              "avg_us": e.cpu_time_total / e.count,
                              "self_avg_us": e.self_cpu_time_total / e.count}
                      for e in prof.key_averages()}
    else:
        t0 = time.perf_counter()
        steps(args.steps, a, b)
        out["wall_s"] = time.perf_counter() - t0
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
