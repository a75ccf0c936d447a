"""The bundled workload: a small MLP trained by two Python threads at once.

Each thread owns a seeded model and data, so its printed losses are the
same on every run, traced or not. User scopes mark each phase with
torch.profiler.record_function, the way training code is annotated.

RecordFunction must be switched on for rfbpf to see ops (until rfbpf
activates it itself): --observer registers PyTorch's empty global
observer (every thread), --profile runs the main thread's share under
torch.profiler.profile() and saves its event list for comparison.

  /usr/bin/python3 mlp_threads.py --observer --steps 20
  /usr/bin/python3 mlp_threads.py --profile --events-out ev.json --wait
  /usr/bin/python3 mlp_threads.py --wait --rounds-until-line --steps 20
"""
import argparse
import ctypes
import json
import sys
import threading

import torch
from torch.profiler import record_function

WINDOW = "main_thread"


def setup(seed):
    """Model and data, built before the threads start: parameter init
    draws from the global generator, which two threads would race on."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    return model, x, y


def train(name, model, x, y, steps, out):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        with record_function("train_step"):
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with record_function("backward"):
                opt.zero_grad()
                loss.backward()
            with record_function("optimizer_step"):
                opt.step()
        losses.append(loss.item())
    out[name] = losses


def name_os_thread(name):
    """Give the OS thread a name (PR_SET_NAME) so tracers can tell it."""
    ctypes.CDLL(None, use_errno=True).prctl(15, ctypes.c_char_p(name), 0, 0, 0)


def run(steps):
    """The main thread and a worker thread train at the same time."""
    out = {}
    start = threading.Barrier(2)
    mine, theirs = setup(1), setup(2)

    def worker():
        name_os_thread(b"mlp-worker")
        start.wait()
        train("worker", *theirs, steps, out)

    t = threading.Thread(target=worker, name="worker")
    t.start()
    start.wait()
    with record_function(WINDOW):
        train("main", *mine, steps, out)
    t.join()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--observer", action="store_true",
                    help="switch RecordFunction on globally (empty observer)")
    ap.add_argument("--profile", action="store_true",
                    help="run under torch.profiler.profile()")
    ap.add_argument("--events-out", help="write torch.profiler's events here")
    ap.add_argument("--wait", action="store_true",
                    help="print 'ready' and wait for a line on stdin")
    ap.add_argument("--rounds-until-line", action="store_true",
                    help="train --steps steps again and again, each round "
                    "from the same seeds (so printing the same losses), "
                    "until a line comes on stdin")
    args = ap.parse_args()
    torch.set_num_threads(1)

    if args.wait:
        print("ready", flush=True)
        sys.stdin.readline()
    if args.observer:
        torch.autograd._set_empty_test_observer(True, 1.0)
    if args.profile:
        with torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = run(args.steps)
        if args.events_out:
            events = [{"name": e.name, "thread": e.thread,
                       "start_us": e.time_range.start,
                       "end_us": e.time_range.end}
                      for e in prof.events()]
            with open(args.events_out, "w") as f:
                json.dump(events, f)
    elif args.rounds_until_line:
        rounds_until_line(args.steps)
        return
    else:
        out = run(args.steps)
    print_losses(out)


def print_losses(out):
    for name in sorted(out):
        print(name, " ".join(repr(v) for v in out[name]), flush=True)


def rounds_until_line(steps):
    """Rounds of run(steps) until a line arrives: a job that lives as long
    as a test needs it to, whose output is still known in advance (every
    round's is that of an untraced run of --steps)."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()),
                     daemon=True).start()
    # One round at least: "go" and the stop line may come in one read.
    while True:
        print_losses(run(steps))
        if stop.is_set():
            break


if __name__ == "__main__":
    main()
