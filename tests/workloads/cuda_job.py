"""A CUDA job to rfbpf without a GPU: it loads a libcudart (the stand-in
build/cupti/sim/libcudart.so.12 by default) and trains a small model on
the CPU, step by step, as commands on stdin say. It was not started with
rfbpf's CUPTI agent: tests/e2e/test_gpu_inject.py attaches rfbpf, which
loads the agent into it.

A second thread runs small ops all along, as a GPU job's threads do, so
that rfbpf holds a thread at an op (where it loads the agent) rather
than one waiting in a system call (maybe inside a CUDA call). It does not
touch the model: the losses are those of an untraced run.

Prints "ready" once torch and the runtime are loaded, then answers each
line on stdin:
  steps N   N training steps: "loss L" (repr of the last loss)
  fork      a child runs 2 steps on its own copy and exits 0 if its
            losses are finite: "child STATUS" (the raw wait status)
  holder    the stand-in libcupti's subscriber: "holder NAME", "holder -"
            when none, "holder no-cupti" when no libcupti is loaded
  threads   "threads NAME,NAME,..." (comm of every thread, sorted)
  agents    "agents N": how many mappings of the agent's file there are
  fill-fds  no descriptor left to open: the soft RLIMIT_NOFILE set to the
            number open now ("fds N"); unfill-fds puts it back
  profile N N training steps under torch.profiler: "profiled C", C the
            calls of aten::addmm it recorded
  sync N    N cudaStreamSynchronize calls (the stand-in waits 2 ms each)
            inside a user scope "sync_scope": "synced N"
  launch N  N cudaLaunchKernel("sim_kernel") calls inside a user scope
            "launch_scope", made through the runtime the job loaded: with
            the stand-in and a CUPTI loaded, each goes through CUPTI's
            callbacks and records (tests/gpu/sim_libcupti.c).
            "launched N"
  nvtx-load the shared NVTX library beside the runtime is loaded (as
            torch.cuda.nvtx loads its own): "nvtx loaded"
  nvtx-push NAME / nvtx-pop   one NVTX push or pop: "nvtx LEVEL"
  nvtx N    N times: push "nvtx_outer", in it a user scope
            "nvtx_inner_scope" with an op and a push/pop of "nvtx_leaf",
            then pop: "nvtx N"
  copy N    N cudaMemcpyAsync (4 KiB host to "device") then N
            cudaMemsetAsync (1 KiB) inside "copy_scope", checked to have
            copied and set the bytes: "copied N"
At the end of its input it prints "dlerror -" if the second thread's
dlerror() has nothing to say (see keep_busy), and exits.
"""
import argparse
import ctypes
import os
import resource
import sys
import threading

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DLERROR = ctypes.CDLL(None).dlerror
DLERROR.restype = ctypes.c_char_p


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 32)
    y = x.sum(1, keepdim=True)
    return model, opt, x, y


def step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def holder():
    try:
        cupti = ctypes.CDLL("libcupti.so.13",
                            mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return "no-cupti"
    fn = cupti.sim_cupti_holder
    fn.restype = ctypes.c_char_p
    name = fn()
    return "-" if name is None else (name.decode() or "(unnamed)")


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint),
                ("z", ctypes.c_uint)]


def launch(cudart, n):
    fn = cudart.cudaLaunchKernel
    fn.argtypes = [ctypes.c_char_p, Dim3, Dim3, ctypes.c_void_p,
                   ctypes.c_size_t, ctypes.c_void_p]
    with torch.autograd.profiler.record_function("launch_scope"):
        for _ in range(n):
            assert fn(b"sim_kernel", Dim3(64, 1, 1), Dim3(256, 1, 1), None,
                      0, None) == 0


def threads():
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return ",".join(sorted(names))


def agents():
    """Files (device, inode) mapped under the agent's name: two loads
    from two memfds of the same name are two."""
    with open("/proc/self/maps") as f:
        return len({tuple(l.split()[3:5]) for l in f
                    if "librfbpf_cupti" in l})


def keep_busy(stop, seen):
    """Small ops until stop; then what dlerror() says on this thread (the
    one rfbpf holds at its ops): None unless a dl call of its own failed,
    and it made none."""
    t = torch.ones(16)
    while not stop.is_set():
        torch.relu(torch.add(t, 1.0))
    seen.append(DLERROR())


def copy(cudart, n):
    """n copies then n sets through the runtime, each checked."""
    src = (ctypes.c_ubyte * 4096)(*(list(range(256)) * 16))
    dst = (ctypes.c_ubyte * 4096)()
    cudart.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_int,
                                       ctypes.c_void_p]
    cudart.cudaMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                       ctypes.c_size_t, ctypes.c_void_p]
    with torch.autograd.profiler.record_function("copy_scope"):
        for i in range(n):
            assert cudart.cudaMemcpyAsync(dst, src, 4096, 1, None) == 0
            assert bytes(dst) == bytes(src)
        for i in range(n):
            assert cudart.cudaMemsetAsync(dst, i + 1, 1024, None) == 0
            assert bytes(dst[:1024]) == bytes([i + 1]) * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cudart", default=os.path.join(
        ROOT, "build", "cupti", "sim", "libcudart.so.12"))
    ap.add_argument("--no-cuda", action="store_true",
                    help="load no CUDA runtime (a CPU job)")
    ap.add_argument("--idle", action="store_true",
                    help="no second thread: between commands the job "
                    "only waits on stdin")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cudart = None if a.no_cuda else ctypes.CDLL(a.cudart)
    model, opt, x, y = build()
    nvtx = None     # the shared NVTX library, once nvtx-load loads it
    stop = threading.Event()
    seen = []
    busy = threading.Thread(target=keep_busy, args=(stop, seen),
                            name="busy")
    if not a.idle:
        busy.start()
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "steps":
            for _ in range(int(cmd[1])):
                loss = step(model, opt, x, y)
            print(f"loss {loss!r}", flush=True)
        elif cmd[0] == "fork":
            pid = os.fork()
            if pid == 0:
                losses = [step(model, opt, x, y) for _ in range(2)]
                os._exit(0 if all(v == v and abs(v) < 1e30
                                  for v in losses) else 1)
            print(f"child {os.waitpid(pid, 0)[1]}", flush=True)
        elif cmd[0] == "holder":
            print(f"holder {holder()}", flush=True)
        elif cmd[0] == "threads":
            print(f"threads {threads()}", flush=True)
        elif cmd[0] == "agents":
            print(f"agents {agents()}", flush=True)
        elif cmd[0] == "fill-fds":
            limits = resource.getrlimit(resource.RLIMIT_NOFILE)
            n = len(os.listdir("/proc/self/fd")) - 1   # less listdir's
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, limits[1]))
            print(f"fds {n}", flush=True)
        elif cmd[0] == "profile":
            with torch.profiler.profile() as prof:
                for _ in range(int(cmd[1])):
                    step(model, opt, x, y)
            calls = sum(e.count for e in prof.key_averages()
                        if e.key == "aten::addmm")
            print(f"profiled {calls}", flush=True)
        elif cmd[0] == "sync":
            with torch.autograd.profiler.record_function("sync_scope"):
                for _ in range(int(cmd[1])):
                    assert cudart.cudaStreamSynchronize(None) == 0
            print(f"synced {cmd[1]}", flush=True)
        elif cmd[0] == "nvtx-load":
            nvtx = ctypes.CDLL(os.path.join(os.path.dirname(a.cudart),
                                            "libnvToolsExt.so.1"))
            print("nvtx loaded", flush=True)
        elif cmd[0] == "nvtx-push":
            print(f"nvtx {nvtx.nvtxRangePushA(cmd[1].encode())}",
                  flush=True)
        elif cmd[0] == "nvtx-pop":
            print(f"nvtx {nvtx.nvtxRangePop()}", flush=True)
        elif cmd[0] == "nvtx":
            for _ in range(int(cmd[1])):
                nvtx.nvtxRangePushA(b"nvtx_outer")
                with torch.autograd.profiler.record_function(
                        "nvtx_inner_scope"):
                    torch.ones(4).add(1)
                    nvtx.nvtxRangePushA(b"nvtx_leaf")
                    nvtx.nvtxRangePop()
                nvtx.nvtxRangePop()
            print(f"nvtx {cmd[1]}", flush=True)
        elif cmd[0] == "copy":
            copy(cudart, int(cmd[1]))
            print(f"copied {cmd[1]}", flush=True)
        elif cmd[0] == "launch":
            launch(cudart, int(cmd[1]))
            print(f"launched {cmd[1]}", flush=True)
        elif cmd[0] == "unfill-fds":
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
            print("fds restored", flush=True)
    stop.set()
    if not a.idle:
        busy.join()
        print(f"dlerror {seen[0].decode() if seen[0] else '-'}",
              flush=True)


if __name__ == "__main__":
    main()
