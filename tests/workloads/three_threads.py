"""Three Python threads train their own small model at once, every op of
a step inside record_function("step"): the top-level trees are the steps.

  /usr/bin/python3 three_threads.py --steps 50
"""
import argparse
import threading

import torch
from torch.profiler import record_function


def train(seed, steps):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    for _ in range(steps):
        with record_function("step"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    threads = [threading.Thread(target=train, args=(s, args.steps))
               for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done")


if __name__ == "__main__":
    main()
