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


def profiled_ops(prof):
    """(op, its Python frames innermost first, its input shapes) per op
    event. torch 2.x keeps the frames only in its trace (FunctionEvent.
    stack is empty): there they are the python_function slices around
    the op."""
    import json
    import tempfile
    if any(e.stack for e in prof.events()):
        return [(e.name, e.stack, e.input_shapes) for e in prof.events()]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as fh:
            events = json.load(fh)["traceEvents"]
    x = [e for e in events if e.get("ph") == "X"]
    py = [e for e in x if e.get("cat") == "python_function"]
    out = []
    for op in x:
        if op.get("cat") != "cpu_op":
            continue
        around = [p for p in py if p["tid"] == op["tid"] and
                  p["ts"] <= op["ts"] and
                  p["ts"] + p["dur"] >= op["ts"] + op["dur"]]
        around.sort(key=lambda p: (p["ts"], -p["dur"]), reverse=True)
        out.append((op["name"], [p["name"] for p in around],
                    op["args"].get("Input Dims")))
    return out


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
        for name, stack, shapes in profiled_ops(prof):
            if name.startswith("aten::") and stack:
                frames = [s for s in stack if not s.startswith("<")]
                print(f"{name}\t{';'.join(frames[:2])}"
                      f"\t{len(frames)}\t{shapes}")
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
