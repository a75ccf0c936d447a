"""Two Python threads, named req-0 and req-1, each calling torch ops from
known places, for the --python-stacks tests:

- site_a and site_b both call torch.mm, site_b three times as often;
- a generator, a coroutine, a lambda and a method each call torch.add
  (the lambda torch.sub);
- deep() recurses past 64 frames before it calls torch.relu.

With --expect it first prints, from the interpreter itself, where each
call site is as "SITE<TAB>FUNCTION<TAB>FILE<TAB>LINE", then "ready" once
both threads run. --profile instead runs the same loop once under
torch.profiler(with_stack=True, record_shapes=True) and prints, per op
event, its name, its two innermost Python frames as torch.profiler saw
them (C functions left out), its Python depth and its input shapes.

  /usr/bin/python3 py_callsites.py --seconds 5 --expect
"""
import argparse
import inspect
import sys
import threading
import time

import torch

A = torch.randn(48, 48)
B = torch.randn(48, 48)
SITES = {}


def here(site):
    """Notes where the line after the call is (the op's call site)."""
    f = sys._getframe(1)
    SITES[site] = (f.f_code.co_qualname, f.f_code.co_filename,
                   f.f_lineno + 1)


def site_a():
    here("mm_a")
    return torch.mm(A, B)


def site_b():
    here("mm_b")
    return torch.mm(B, A)


def gen_adds(n):
    for _ in range(n):
        here("add_gen")
        yield torch.add(A, 1.0)


async def coro_add():
    here("add_coro")
    return torch.add(B, 3.0)


def run_coro():
    """Drives the coroutine to its end without an event loop."""
    c = coro_add()
    try:
        c.send(None)
    except StopIteration:
        pass


class Layer:
    def forward(self, x):
        here("add_method")
        return torch.add(x, 2.0)


def deep(n):
    if n:
        return deep(n - 1)
    here("relu_deep")
    return torch.relu(A)


def step(layer):
    site_a()
    for _ in range(3):
        site_b()
    for _ in gen_adds(2):
        pass
    layer.forward(A)
    run_coro()
    (lambda: torch.sub(A, B))()
    deep(80)


def work(stop):
    layer = Layer()
    while not stop.is_set():
        step(layer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--expect", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    sys.setrecursionlimit(1000)
    step(Layer())           # fills SITES
    SITES["sub_lambda"] = ("step.<locals>.<lambda>",
                           inspect.getsourcefile(step),
                           inspect.getsourcelines(step)[1] + 8)
    if args.profile:
        from torch.profiler import profile
        with profile(with_stack=True, record_shapes=True) as prof:
            step(Layer())
        for e in prof.events():
            if e.name.startswith("aten::") and e.stack:
                frames = [s for s in e.stack if not s.startswith("<")]
                print(f"{e.name}\t{';'.join(frames[:2])}"
                      f"\t{len(frames)}\t{e.input_shapes}")
        return
    if args.expect:
        for site, (fn, file, line) in sorted(SITES.items()):
            print(f"{site}\t{fn}\t{file}\t{line}")
    stop = threading.Event()
    threads = [threading.Thread(target=work, args=(stop,), name=f"req-{i}")
               for i in range(2)]
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
