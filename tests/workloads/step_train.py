"""A training loop of numbered steps, for --steps, --from-step, --step-op
and the flight recorder. Each step: forward, backward, SGD's step() (which
opens Optimizer.step#SGD.step by itself). Optionally:

  --scope NAME        wrap each step in record_function(NAME)
  --profiler          run torch.profiler with a schedule, so each step is
                      a ProfilerStep#N scope (the profiler's own view)
  --slow-step K --slow-ms M   sleep M ms inside step K (a slow step)
  --step-sleep-ms M   sleep M ms at the end of every step
  --threads N         N-1 more threads running ops all along (not steps)

It prints "ready" after step 0, then "step N loss L" for each step, and
runs --steps steps (default: until killed).

  /usr/bin/python3 step_train.py --steps 50 --slow-step 7 --slow-ms 1000
"""
import argparse
import contextlib
import sys
import threading
import time

import torch
from torch.autograd.profiler import record_function


def background(stop):
    a = torch.randn(32, 32)
    while not stop.is_set():
        torch.mm(a, a)
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--scope")
    ap.add_argument("--profiler", action="store_true")
    ap.add_argument("--slow-step", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0)
    ap.add_argument("--step-sleep-ms", type=float, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    x = torch.randn(32, 64)
    y = torch.randint(0, 8, (32,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    stop = threading.Event()
    others = [threading.Thread(target=background, args=(stop,),
                               name=f"background{i}", daemon=True)
              for i in range(args.threads - 1)]
    for t in others:
        t.start()
    prof = contextlib.nullcontext()
    if args.profiler:
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=0, warmup=0, active=1,
                                             repeat=0),
            on_trace_ready=lambda p: None)
    n = 0
    with prof as p:
        while not args.steps or n < args.steps:
            scope = (record_function(args.scope) if args.scope
                     else contextlib.nullcontext())
            with scope:
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                if n == args.slow_step:
                    time.sleep(args.slow_ms / 1e3)
                opt.step()
            if args.profiler:
                p.step()
            if n == 0:
                print("ready", flush=True)
            print(f"step {n} loss {loss.item():.6f}", flush=True)
            n += 1
            time.sleep(args.step_sleep_ms / 1e3)
    stop.set()
    sys.exit(0)


if __name__ == "__main__":
    main()
