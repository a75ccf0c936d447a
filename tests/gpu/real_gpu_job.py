"""The job tests/gpu/real_gpu_check.py traces on a machine with a GPU: one
record_function scope per case, run when the checker says go (a line on
stdin), so the checker can find each case's GPU work in rfbpf's trace.

--profiler-first: run a short torch.profiler session before "ready", so
Kineto holds CUPTI when rfbpf comes (it keeps its subscription).
--profiler-during DIR: run a torch.profiler session during the traced
cases and export its trace to DIR/kineto.json.
--busy: a second thread runs small CPU ops until the end, so that a
tracer attaching without the agent catches a thread at an op (where
`rfbpf -p` loads the agent) rather than only threads waiting on stdin.
"""
import argparse
import ctypes
import sys
import threading

import torch
from torch.autograd.profiler import record_function

ap = argparse.ArgumentParser()
ap.add_argument("--profiler-first", action="store_true")
ap.add_argument("--profiler-during", metavar="DIR")
ap.add_argument("--busy", action="store_true")
args = ap.parse_args()

dev = torch.device("cuda:0")
ndev = torch.cuda.device_count()


def profile(path=None):
    acts = [torch.profiler.ProfilerActivity.CPU,
            torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as p:
        a = torch.randn(512, 512, device=dev)
        (a @ a).sum().item()
    if path:
        p.export_chrome_trace(path)


def cudart():
    """The process's own CUDA runtime (a pip torch bundles it)."""
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    return None


def case_kernels():
    a = torch.randn(1024, 1024, device=dev)
    torch.cuda.nvtx.range_push("nvtx_range")
    (a @ a).sum().item()
    torch.cuda.nvtx.range_pop()


def case_copy_pageable():
    torch.randn(1 << 20).to(dev)
    torch.cuda.synchronize()


def case_copy_pinned():
    torch.randn(1 << 20).pin_memory().to(dev, non_blocking=True)
    torch.cuda.synchronize()


def case_memset():
    x = torch.empty(1 << 20, device=dev)
    rt = cudart()
    if rt is None:
        raise RuntimeError("no libcudart to call cudaMemset through")
    rc = rt.cudaMemset(ctypes.c_void_p(x.data_ptr()), 0,
                       ctypes.c_size_t(x.numel() * 4))
    torch.cuda.synchronize()
    if rc:
        raise RuntimeError(f"cudaMemset returned {rc}")


def case_peer_copy():
    torch.randn(1 << 20, device=dev).to("cuda:1")
    torch.cuda.synchronize()


def case_graph():
    static = torch.randn(256, device=dev)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        static * 2                      # warm-up on a side stream
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        out = static * 2 + 1
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    del out


def case_two_streams():
    a = torch.randn(512, 512, device=dev)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(s1):
        a @ a
    with torch.cuda.stream(s2):
        a @ a
    torch.cuda.synchronize()


def case_two_devices():
    for d in range(2):
        a = torch.randn(512, 512, device=f"cuda:{d}")
        (a @ a).sum().item()


kept = []


def case_cuda_memory():
    """--memory's CUDA path: the caching allocator's reports. 64 MiB kept,
    100 small blocks made and freed: the case's CUDA Mem is 64 MiB."""
    kept.append(torch.empty(16 * 1024 * 1024, device="cuda"))
    for _ in range(100):
        x = torch.ones(256, device="cuda")
        del x
    torch.cuda.synchronize()


CASES = [case_kernels, case_copy_pageable, case_copy_pinned, case_memset,
         case_graph, case_two_streams, case_cuda_memory]
if ndev >= 2:
    CASES += [case_peer_copy, case_two_devices]

def keep_busy(stop):
    t = torch.ones(16)
    while not stop.is_set():
        torch.relu(torch.add(t, 1.0))


case_kernels()                          # CUDA up, kernels loaded
if args.profiler_first:
    profile()
stop = threading.Event()
if args.busy:
    threading.Thread(target=keep_busy, args=(stop,), daemon=True).start()
print("ready", ndev, flush=True)
sys.stdin.readline()
for case in CASES:
    name = case.__name__[len("case_"):]
    try:
        with record_function(f"case::{name}"):
            case()
        print("ran", name, flush=True)
    except Exception as e:              # reported, the others still run
        print("error", name, repr(e), flush=True)
if args.profiler_during:
    with record_function("case::profiler_during"):
        profile(f"{args.profiler_during}/kineto.json")
    print("ran profiler_during", flush=True)
print("done", flush=True)
sys.stdin.readline()
stop.set()
