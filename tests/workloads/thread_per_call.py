"""A thread per call, as servers that start a thread per request do: each
call's new thread runs the same adds and muls, alternating (50 of each
unless --ops says).

  /usr/bin/python3 thread_per_call.py --calls 3000 [--ops 50]
"""
import argparse
import threading

import torch


def work(x, n):
    for _ in range(n):
        torch.add(x, x)
        torch.mul(x, x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--ops", type=int, default=50,
                    help="adds (and as many muls) per thread")
    a = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.ones(4)
    for _ in range(a.calls):
        t = threading.Thread(target=work, args=(x, a.ops))
        t.start()
        t.join()
    print("calls", a.calls, flush=True)


if __name__ == "__main__":
    main()
