"""Threads that exit with an op still open: each names itself (comm
"rf-exiter"), opens a user scope with RecordFunction's own enter and never
exits it, runs one op inside, and returns. The main thread waits for each,
so its thread id is gone by the time the next starts. The handles are
kept to the end, and the process leaves with os._exit: a RecordFunction
freed ends then, on whatever thread frees it.

--threads N: that many, then prints "done N" and exits; --forever goes
on until killed, one every 2 ms. --fork: a child does it, and the parent
prints "child STATUS" once it has exited."""
import argparse
import ctypes
import os
import threading
import time

import torch

PR_SET_NAME = 15
libc = ctypes.CDLL(None, use_errno=True)
# 1.13 has both; later builds keep the _new one that record_function uses.
enter = getattr(torch.ops.profiler, "_record_function_enter_new", None) or \
    torch.ops.profiler._record_function_enter
held = []   # the handles: their RecordFunctions live on, never ended


def worker():
    libc.prctl(PR_SET_NAME, b"rf-exiter", 0, 0, 0)
    held.append(enter("exiting_scope", None))
    torch.ones(3).add(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--forever", action="store_true")
    ap.add_argument("--wait", action="store_true",
                    help="print ready and wait for a line on stdin")
    ap.add_argument("--fork", action="store_true",
                    help="the threads are started by a forked child")
    a = ap.parse_args()
    torch.ones(2).add(1)
    print("ready", flush=True)
    if a.wait:
        input()
    if a.fork:
        pid = os.fork()
        if pid:
            status = os.waitpid(pid, 0)[1]
            print("child", status, flush=True)
            os._exit(0)
    n = 0
    while a.forever or n < a.threads:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        n += 1
        if a.forever:
            time.sleep(0.002)
    torch.ones(2).add(1)
    print("done", n, flush=True)
    # Not through the interpreter's exit: that would free the handles,
    # whose RecordFunctions would end then, on this thread.
    os._exit(0)


if __name__ == "__main__":
    main()
