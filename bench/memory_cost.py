#!/usr/bin/env python3
"""What --memory costs per allocation, beside torch.profiler's
profile_memory=True, measured in one run.

The alloc workload (bench/timed_workload.py --workload alloc) makes and
drops one tensor per step: one op (aten::empty), one allocation and one
free. Seven variants run interleaved (A B C ..., A B C ..., ...), each
timing its own phase:

  untraced
  torch.profiler                      the profiled region, ops only
  torch.profiler profile_memory=True  ... and memory
  rfbpf full trace (callback probes)
  rfbpf full trace --memory
  the same two with entry probes (--probes entry): the allocator probes
  are the same uprobes on either op probe path

The cost of recording memory is a variant's median less its counterpart
without memory, per allocation (each step frees what it made, so this is
the cost of an allocation and its free together). rfbpf's is that of two
uprobes (c10's ProfiledCPUMemoryReporter::New and ::Delete, int3 uprobes:
they are no NOPs) and the records they send.

  sudo bench/memory_cost.py [--steps N] [--reps R] [--markdown FILE]
"""
import argparse
import statistics
import sys

from variant_runner import run_variant

VARIANTS = [
    ("untraced", "untraced", []),
    ("torch.profiler", "torch", []),
    ("torch.profiler profile_memory=True", "torch_memory", []),
    ("rfbpf full trace", "rfbpf", ["--probes", "callback"]),
    ("rfbpf full trace --memory", "rfbpf", ["--probes", "callback",
                                            "--memory"]),
    ("rfbpf full trace, entry probes", "rfbpf", ["--probes", "entry"]),
    ("rfbpf full trace, entry probes, --memory", "rfbpf",
     ["--probes", "entry", "--memory"]),
]
PAIRS = [
    ("torch.profiler: profile_memory=True less without",
     "torch.profiler profile_memory=True", "torch.profiler"),
    ("rfbpf (callback probes): --memory less without",
     "rfbpf full trace --memory", "rfbpf full trace"),
    ("rfbpf (entry probes): --memory less without",
     "rfbpf full trace, entry probes, --memory",
     "rfbpf full trace, entry probes"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    times = {name: [] for name, _, _ in VARIANTS}
    for rep in range(args.reps):
        for name, kind, opts in VARIANTS:
            figs, _ = run_variant(kind, opts, "alloc", args.steps, 1)
            times[name].append(figs["phase_seconds"])
        print(f"memory: rep {rep + 1}/{args.reps} done", file=sys.stderr)
    med = {n: statistics.median(v) for n, v in times.items()}
    base = med["untraced"]
    lines = ["| variant | phase (median, min-max) | per step | vs untraced |",
             "|---|---|---|---|"]
    for name, _, _ in VARIANTS:
        v = times[name]
        lines.append(f"| {name} | {med[name]:.3f} s ({min(v):.3f}-"
                     f"{max(v):.3f}) | {med[name] / args.steps * 1e6:.2f} us"
                     f" | {med[name] / base:.2f}x |")
    lines += ["", "| what memory adds | per allocation and its free |",
              "|---|---|"]
    for label, a, b in PAIRS:
        lines.append(f"| {label} | {(med[a] - med[b]) / args.steps * 1e6:.2f}"
                     f" us |")
    head = (f"alloc workload: {args.steps} steps (one aten::empty, one "
            f"allocation and its free each), {args.reps} interleaved "
            f"repetitions")
    text = head + "\n\n" + "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
