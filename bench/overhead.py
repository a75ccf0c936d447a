#!/usr/bin/env python3
"""Workload overhead of rfbpf's modes, measured side by side in one run.

The dispatch-bound tiny-op workload (tests/workloads/tiny_ops.py) times its
own phase (the ops only: no start-up, import or attach), so each variant's
figure is the time the same ops took while being observed. Variants run
interleaved (A B C ... A B C ...) and the median of the repetitions is
compared with the untraced median from the same run: this VM is noisy, so
only ratios measured together mean anything.

  sudo bench/overhead.py [--steps N] [--reps R] [--markdown FILE]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RFBPF = os.path.join(ROOT, "rfbpf")
PYTHON = "/usr/bin/python3"
TINY = os.path.join(ROOT, "tests", "workloads", "tiny_ops.py")

VARIANTS = [
    ("untraced", []),
    ("torch.profiler (in-process)", None),
    ("rfbpf full, entry probes", ["--probes", "entry", "--"]),
    ("rfbpf full, callback probes", ["--probes", "callback", "--"]),
    ("rfbpf --sample 0.01, entry probes",
     ["--probes", "entry", "--sample", "0.01", "--"]),
    ("rfbpf --sample 0.01, callback probes",
     ["--probes", "callback", "--sample", "0.01", "--"]),
    ("rfbpf --tree-sample 0.01, callback probes",
     ["--probes", "callback", "--tree-sample", "0.01", "--"]),
]


def phase_seconds(variant_args, steps):
    work = [PYTHON, TINY, "--steps", str(steps), "--time"]
    if variant_args is None:
        cmd = work + ["--profile", "torch"]
    elif variant_args:
        cmd = [RFBPF, "-q", "--no-table", *variant_args] + work
    else:
        cmd = work
    r = subprocess.run(cmd, input="go\n", capture_output=True, text=True,
                       timeout=600)
    m = re.search(r"phase_seconds=([0-9.]+)", r.stderr)
    if r.returncode or not m:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return float(m.group(1))


def ops_per_step():
    """From two full captures: the ops one step of the workload runs."""
    counts = []
    for steps in (200, 400):
        r = subprocess.run([RFBPF, "-q", "--top", "0", "--", PYTHON, TINY,
                            "--steps", str(steps)], input="go\n",
                           capture_output=True, text=True, timeout=600)
        m = re.search(r"; (\d+) ops;", r.stdout)
        if not m:
            sys.exit("bench: cannot count ops:\n" + r.stdout[-2000:])
        counts.append(int(m.group(1)))
    return (counts[1] - counts[0]) / 200


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--markdown", help="append the table to this file")
    ap.add_argument("--only", action="append", default=[],
                    help="run only variants whose name contains this "
                    "(repeatable; untraced always runs)")
    args = ap.parse_args()
    variants = [(n, v) for n, v in VARIANTS if n == "untraced" or
                not args.only or any(o in n for o in args.only)]
    per_step = ops_per_step()
    times = {name: [] for name, _ in variants}
    for rep in range(args.reps):
        for name, v in variants:
            times[name].append(phase_seconds(v, args.steps))
        print(f"rep {rep + 1}/{args.reps} done", file=sys.stderr)
    base = statistics.median(times["untraced"])
    ops = per_step * args.steps
    rows = ["| variant | median phase (s) | spread (min-max) | ratio to "
            "untraced | added per op (us) |", "|---|---|---|---|---|"]
    for name, _ in variants:
        med = statistics.median(times[name])
        rows.append(f"| {name} | {med:.3f} | {min(times[name]):.3f}-"
                    f"{max(times[name]):.3f} | {med / base:.3f} | "
                    f"{(med - base) / ops * 1e6:.3f} |")
    table = "\n".join(rows)
    head = (f"tiny-op workload: {args.steps} steps x {per_step:.0f} ops = "
            f"{ops:.0f} ops per phase, {args.reps} interleaved repetitions")
    print(head)
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"\n{head}\n\n{table}\n")


if __name__ == "__main__":
    main()
