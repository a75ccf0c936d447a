"""A small training job whose DataLoader forks its workers (the Linux
default), every epoch: the workers run ops (the dataset's transforms and
the default collate), the parent trains. Prints one line per epoch with
the exact loss, so a traced run can be compared with an untraced one.

  /usr/bin/python3 dataloader_train.py --epochs 3 --workers 2

--clone: each sample also runs one aten::clone in its worker, counted by
the workers in shared memory; the count is printed at the end
("clones N"), the truth for how many aten::clone the workers recorded.
"""
import argparse
import multiprocessing
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    """x -> a fixed function of x, computed with ops in the worker."""

    def __init__(self, n, clones=None):
        self.n = n
        self.clones = clones

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.full((8,), float(i % 17) / 17.0)
        y = torch.sin(x).sum().reshape(1) + torch.relu(x - 0.5).mean()
        if self.clones is not None:
            x = torch.clone(x)
            with self.clones.get_lock():
                self.clones.value += 1
        return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--wait", action="store_true",
                    help="print 'ready' and wait for a line before training")
    ap.add_argument("--persistent", action="store_true",
                    help="keep the workers from epoch to epoch")
    ap.add_argument("--pause-after", type=int, default=0,
                    help="after this many epochs print 'paused' (with the "
                    "workers' pids) and wait for a line")
    ap.add_argument("--clone", action="store_true",
                    help="one aten::clone per sample, counted (see above)")
    args = ap.parse_args()
    clones = multiprocessing.get_context("fork").Value("q", 0) \
        if args.clone else None
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Squares(args.samples, clones), batch_size=32, shuffle=False,
                        num_workers=args.workers,
                        persistent_workers=args.persistent,
                        multiprocessing_context="fork" if args.workers
                        else None)
    if args.wait:
        print("ready", flush=True)
        sys.stdin.readline()
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total!r}", flush=True)
        if args.pause_after and epoch + 1 == args.pause_after:
            pids = [w.pid for w in loader._iterator._workers]
            print("paused", *pids, flush=True)
            sys.stdin.readline()
    if clones is not None:
        print(f"clones {clones.value}", flush=True)


if __name__ == "__main__":
    main()
