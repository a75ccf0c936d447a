"""A thread per call, as servers that start a thread per request do: each
call's new thread runs the same 50 adds and 50 muls, alternating.

  /usr/bin/python3 thread_per_call.py --calls 3000
"""
import argparse
import threading

import torch


def work(x):
    for _ in range(50):
        torch.add(x, x)
        torch.mul(x, x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.ones(4)
    for _ in range(a.calls):
        t = threading.Thread(target=work, args=(x,))
        t.start()
        t.join()
    print("calls", a.calls, flush=True)


if __name__ == "__main__":
    main()
