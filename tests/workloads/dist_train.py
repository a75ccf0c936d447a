"""A data-parallel job on CPU: each rank trains a small seeded MLP and the
ranks average their gradients with all_reduce over gloo, the way DDP does
by hand. --ranks N starts N rank processes the way torchrun does, each
with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
TORCHELASTIC_RUN_ID in its environment (Debian's torchrun on 1.13 fails
on Python 3.12 before it starts any), and waits for them; the launcher
never imports torch:

  /usr/bin/python3 dist_train.py --ranks 3 --steps 8 --slow-rank 1 --slow-ms 50

Each rank prints its losses (the same on every run, traced or not).
--slow-rank R sleeps R for --slow-ms before its all_reduce every step, so
the others wait for it there: a straggler. --wait-file F holds every rank
before its first step until F exists (a tracer attaches meanwhile);
--profile DIR writes each rank's torch.profiler trace to DIR/rank-R.json
and its collectives with their input shapes to DIR/rank-R.comms.json, for
comparison.
"""
import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time


def die_with_parent():
    """A rank is killed with its launcher (PR_SET_PDEATHSIG), as torchrun's
    are, so a test that kills the launcher leaves no rank behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def launch(ranks):
    """torchrun's environment for each rank, then their exit statuses."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--ranks")
    del argv[i:i + 2]
    procs = []
    for r in range(ranks):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r),
                   WORLD_SIZE=str(ranks), LOCAL_WORLD_SIZE=str(ranks),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHELASTIC_RUN_ID="rfbpf-test", OMP_NUM_THREADS="1",
                   USE_LIBUV="0")    # Debian builds torch without libuv
        procs.append(subprocess.Popen([sys.executable, __file__] + argv,
                                      env=env, preexec_fn=die_with_parent))
    # SIGTERM ends the ranks too (SIGKILL does, by their death signal).
    signal.signal(signal.SIGTERM, lambda *_: [p.kill() for p in procs])
    print("ranks " + " ".join(str(p.pid) for p in procs), flush=True)
    return max(p.wait() for p in procs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=0)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0)
    ap.add_argument("--wait-file")
    ap.add_argument("--profile")
    ap.add_argument("--step-sleep-ms", type=float, default=0)
    a = ap.parse_args()
    if a.ranks:
        sys.exit(launch(a.ranks))

    import torch
    import torch.distributed as dist
    from torch.profiler import record_function
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    if a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.05)
    dist.barrier()

    prof = None
    if a.profile:
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            record_shapes=True)
        prof.__enter__()
    losses = []
    for step in range(a.steps):
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if rank == a.slow_rank:
            time.sleep(a.slow_ms / 1000)
        with record_function("grad_sync"):
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
        losses.append(round(loss.item(), 6))
        if a.step_sleep_ms:
            time.sleep(a.step_sleep_ms / 1000)
    if prof:
        prof.__exit__(None, None, None)
        os.makedirs(a.profile, exist_ok=True)
        prof.export_chrome_trace(os.path.join(a.profile, f"rank-{rank}.json"))
        # The collectives as torch.profiler recorded them, in one form on
        # every version (1.13's export writes no shapes).
        comms = [{"name": e.name, "input_shapes": e.input_shapes}
                 for e in prof.events()
                 if e.name.startswith(("gloo:", "nccl:", "record_param"))]
        with open(os.path.join(a.profile, f"rank-{rank}.comms.json"),
                  "w") as f:
            json.dump(comms, f)
    dist.barrier()
    # One write: the ranks share the launcher's output.
    os.write(1, f"rank {rank}/{world} losses {losses}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
