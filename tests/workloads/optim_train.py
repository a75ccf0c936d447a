"""A small training loop with an Adam optimizer, for the --python-stacks
nesting tests: Adam opens its own record_function scopes
(Optimizer.step#Adam.step, Optimizer.zero_grad#Adam.zero_grad) inside
record_function.__enter__, which returns long before the scope ends, and
the loop opens a user scope (my_scope) with a `with` and another
(decorated_step) around a decorated function. Two threads train at once:
the main thread and worker.

It prints "ready" once both threads have trained a step and go on,
then runs until killed, for --seconds, or for --steps steps a thread.

  /usr/bin/python3 optim_train.py --seconds 10
  /usr/bin/python3 optim_train.py --steps 5
"""
import argparse
import threading
import time

import torch
from torch.autograd.profiler import record_function


def setup(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    x = torch.randn(16, 32)
    y = torch.randint(0, 4, (16,))
    return model, x, y


def decorated_optimizer_step():
    """A thread's own decorated function. record_function used as a
    decorator is one object keeping one handle: two threads calling one
    decorated function overwrite each other's handle and end each other's
    scopes (a scope then ends on the other thread, later, after its own
    frames returned: an async end in the trace, rightly). That is torch's
    behaviour, not what these tests are about."""
    @record_function("decorated_step")
    def optimizer_step(opt):
        opt.step()
    return optimizer_step


def step(model, x, y, opt, optimizer_step):
    opt.zero_grad()
    with record_function("my_scope"):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer_step(opt)


def train(model, x, y, until, steps, started, ready=None):
    """A first step (torch's lazy set-up) on each thread, then both
    train at once."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    optimizer_step = decorated_optimizer_step()
    step(model, x, y, opt, optimizer_step)
    started.wait()
    if ready:
        ready()
    for _ in range(steps - 1):
        if time.monotonic() >= until:
            break
        step(model, x, y, opt, optimizer_step)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--steps", type=int, default=1 << 62)
    args = ap.parse_args()
    torch.set_num_threads(1)
    until = time.monotonic() + args.seconds
    started = threading.Barrier(2)
    mine, theirs = setup(1), setup(2)
    t = threading.Thread(target=train, args=(*theirs, until, args.steps, started),
                         name="worker", daemon=True)
    t.start()
    train(*mine, until, args.steps, started,
          lambda: print("ready", flush=True))
    t.join()


if __name__ == "__main__":
    main()
