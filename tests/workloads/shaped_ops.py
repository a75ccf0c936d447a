"""Two Python threads, req-0 and req-1, calling torch ops on inputs of
known shapes and dtypes, for the --shapes tests:

- req-0: torch.mm of [32, 64] x [64, 16] floats, addmm with scalars,
  cat of a tensor list, a 7-dim sum (sizes kept out of line);
- req-1: torch.mm of [8, 8] x [8, 8] doubles, an int64 add, a half
  multiply, a view with a size list, conv2d with stride and padding
  lists.

Without options it runs both threads (prints "ready", then "done").
--profile instead runs each thread's step once, on this thread, under
torch.profiler(record_shapes=True) and prints per op event a JSON line
{"name", "thread", "dims"} (input_shapes, as torch.profiler has them);
with --trace FILE it also writes that profile's Chrome trace (Kineto's
Input Dims / Input type / Concrete Inputs args, where torch has Kineto).

  /usr/bin/python3 shaped_ops.py --seconds 5
"""
import argparse
import json
import threading
import time

import torch

MM_A = (torch.randn(32, 64), torch.randn(64, 16))
MM_B = (torch.randn(8, 8, dtype=torch.float64),
        torch.randn(8, 8, dtype=torch.float64))
BIAS = torch.zeros(32, 16)
SEVEN = torch.ones(1, 2, 1, 3, 1, 2, 1)
LONGS = torch.arange(5)
HALVES = torch.ones(2, 2, dtype=torch.float16)
IMAGE = torch.randn(1, 3, 16, 16)
KERNEL = torch.randn(4, 3, 3, 3)


def step_req0():
    torch.mm(*MM_A)
    torch.addmm(BIAS, *MM_A, beta=0.5, alpha=2)
    torch.cat([MM_A[0], MM_A[0]], 1)
    SEVEN.sum()


def step_req1():
    torch.mm(*MM_B)
    LONGS + 3
    HALVES * 2.5
    IMAGE.view(3, 256)
    torch.nn.functional.conv2d(IMAGE, KERNEL, stride=[2, 2], padding=[1, 1])


STEPS = {"req-0": step_req0, "req-1": step_req1}


def work(step, stop):
    while not stop.is_set():
        step()
        time.sleep(0.0005)


def profile(trace):
    from torch.profiler import profile as torch_profile
    for name, step in STEPS.items():
        with torch_profile(record_shapes=True) as prof:
            step()
        for e in prof.events():
            if e.name.startswith("aten::"):
                print(json.dumps({"name": e.name, "thread": name,
                                  "dims": e.input_shapes}))
        if trace:
            prof.export_chrome_trace(f"{trace}.{name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--trace")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.profile:
        profile(args.trace)
        return
    stop = threading.Event()
    threads = [threading.Thread(target=work, args=(step, stop), name=name)
               for name, step in STEPS.items()]
    for t in threads:
        t.start()
    print("ready", flush=True)
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join()
    print("done", flush=True)


if __name__ == "__main__":
    main()
