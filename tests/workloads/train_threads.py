"""Small MLPs trained on --threads threads at once for --seconds, each
thread with its own seeded model and data and every step inside
record_function("step"): a job that is inside ops nearly all the time, on
exactly that many threads (one: the main thread itself). Prints "ready"
once torch is imported, and the steps each thread made at the end.

  /usr/bin/python3 train_threads.py --threads 3 --seconds 60
"""
import argparse
import threading
import time

import torch
from torch.profiler import record_function


def train(seed, seconds, steps, i):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with record_function("step"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        steps[i] += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    torch.set_num_threads(1)
    steps = [0] * a.threads
    print("ready", flush=True)
    others = [threading.Thread(target=train, args=(s, a.seconds, steps, s))
              for s in range(1, a.threads)]
    for t in others:
        t.start()
    train(0, a.seconds, steps, 0)
    for t in others:
        t.join()
    print(" ".join(map(str, steps)), flush=True)


if __name__ == "__main__":
    main()
