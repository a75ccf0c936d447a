#!/usr/bin/env python3
"""One timed phase of a bundled workload, as bench/overhead.py runs it.

Imports tests/workloads/tiny_ops.py or mlp_threads.py and times their own
phase functions (ops only: no start-up or import), printing
phase_seconds=... on stderr. With --torch-profiler the phase runs inside
torch.profiler.profile() and the end-to-end cost a user pays is printed
too: entering and leaving the profiler plus, separately, building the
key_averages() table or writing the Chrome trace. --with-stack adds
with_stack=True and record_shapes=True.

--profile-memory adds profile_memory=True. --workload alloc makes and
drops one small tensor per step (bench/memory_cost.py).

  /usr/bin/python3 bench/timed_workload.py --workload tiny --steps 20000
"""
import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "workloads"))

import torch  # noqa: E402


def alloc_phase(steps):
    """One allocation and its free per step (aten::empty of 64 floats,
    dropped at once): what --memory and profile_memory pay per block."""
    empty = torch.empty
    for _ in range(steps):
        empty(64)


def run_phase(workload, steps, threads):
    if workload == "alloc":
        return lambda: alloc_phase(steps)
    if workload == "tiny":
        import tiny_ops
        return lambda: tiny_ops.phase(steps, threads)
    import mlp_threads
    return lambda: mlp_threads.run(steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["tiny", "mlp", "alloc"],
                    default="tiny")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--torch-profiler", action="store_true")
    ap.add_argument("--with-stack", action="store_true",
                    help="torch.profiler with with_stack=True and "
                    "record_shapes=True")
    ap.add_argument("--profile-memory", action="store_true",
                    help="torch.profiler with profile_memory=True")
    ap.add_argument("--wait", action="store_true",
                    help="print 'ready' and wait for a line on stdin")
    args = ap.parse_args()
    torch.set_num_threads(1)
    phase = run_phase(args.workload, args.steps, args.threads)
    if args.wait:
        print("ready", flush=True)
        sys.stdin.readline()
    if not args.torch_profiler:
        t0, c0 = time.perf_counter(), time.process_time()
        phase()
        # CPU time too: a phase descheduled by other load on this VM
        # shows in its wall time, not in its CPU time.
        print(f"phase_seconds={time.perf_counter() - t0:.6f}\n"
              f"phase_cpu_seconds={time.process_time() - c0:.6f}",
              file=sys.stderr, flush=True)
        return
    t_enter = time.perf_counter()
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        with_stack=args.with_stack, record_shapes=args.with_stack,
        profile_memory=args.profile_memory)
    prof.__enter__()
    t0 = time.perf_counter()
    phase()
    t1 = time.perf_counter()
    prof.__exit__(None, None, None)
    t_exit = time.perf_counter()
    prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
    t_table = time.perf_counter()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
    t_trace = time.perf_counter()
    profiled = t_exit - t_enter
    print(f"phase_seconds={t1 - t0:.6f}\n"
          f"e2e_table_seconds={profiled + t_table - t_exit:.6f}\n"
          f"e2e_trace_seconds={profiled + t_trace - t_table:.6f}",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
    # torch 1.13 aborts at interpreter shutdown once the jit.fork inter-op
    # pool has run: leave without running C++ static destructors.
    sys.stdout.flush()
    os._exit(0)
