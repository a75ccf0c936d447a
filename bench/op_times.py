#!/usr/bin/env python3
"""Per-op times: rfbpf with its probe cost taken out (the default), with
--raw-times, and torch.profiler's, on a workload of mid-sized ops
(bench/op_times_workload.py), side by side in one run.

torch.profiler's times hold its own overhead too; it is measured here as
its step time less the untraced step time, per op. The claim checked:
rfbpf's compensated average per op is within that overhead of
torch.profiler's (|rfbpf - torch.profiler| <= torch.profiler's overhead
per op), while --raw-times is further off. Variants are interleaved
(untraced, torch.profiler, rfbpf, rfbpf --raw-times, ...) and medians are
reported.

  sudo bench/op_times.py [--steps N] [--reps R] [--markdown FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RFBPF = os.path.join(ROOT, "rfbpf")
WORKLOAD = os.path.join(HERE, "op_times_workload.py")
PYTHON = "/usr/bin/python3"
OPS = ["step", "aten::mm", "aten::relu", "aten::clamp_min", "aten::add",
       "aten::sum"]
OPS_PER_STEP = len(OPS)


def untraced(steps):
    r = subprocess.run([PYTHON, WORKLOAD, "--steps", str(steps)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.splitlines()[-1])


def profiler(steps):
    r = subprocess.run([PYTHON, WORKLOAD, "--steps", str(steps),
                        "--profile"], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout.splitlines()[-1])


def rfbpf(steps, *opts):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        r = subprocess.run([RFBPF, "-q", "--no-table", "-o", out, *opts,
                            "--", PYTHON, WORKLOAD, "--steps", str(steps)],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"rfbpf failed: {r.stderr.strip()}")
        with open(out) as f:
            trace = json.load(f)
    res = json.loads(r.stdout.splitlines()[-1])
    res["ops"] = {s["name"]: {"calls": s["calls"],
                              "avg_us": s["total_ns"] / s["calls"] / 1e3,
                              "self_avg_us": s["self_ns"] / s["calls"] / 1e3}
                  for s in trace["otherData"]["op_stats"]}
    res["cost"] = (trace["otherData"].get("probe_cost_inside_op_ns", 0),
                   trace["otherData"].get("probe_cost_outside_op_ns", 0))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    runs = {"untraced": [], "torch.profiler": [], "rfbpf": [],
            "rfbpf --raw-times": []}
    for _ in range(args.reps):
        runs["untraced"].append(untraced(args.steps))
        runs["torch.profiler"].append(profiler(args.steps))
        runs["rfbpf"].append(rfbpf(args.steps))
        runs["rfbpf --raw-times"].append(rfbpf(args.steps, "--raw-times"))
    med = statistics.median
    base = med(r["wall_s"] for r in runs["untraced"])
    prof_overhead_us = (med(r["wall_s"] for r in runs["torch.profiler"]) -
                        base) / (args.steps * OPS_PER_STEP) * 1e6
    cost = runs["rfbpf"][0]["cost"]
    lines = [
        "",
        f"{args.steps} steps x {OPS_PER_STEP} ops, {args.reps} interleaved "
        "repetitions, medians. torch.profiler's own overhead: "
        f"{prof_overhead_us:.2f} us per op (its step time less the "
        "untraced one). rfbpf's calibrated probe cost in this run: "
        f"{cost[0] / 1e3:.2f} us inside an op, "
        f"{(cost[0] + cost[1]) / 1e3:.2f} us per op nested in it.",
        "",
        "| op | torch.profiler avg | rfbpf avg | rfbpf - profiler | "
        "within profiler's overhead | rfbpf --raw-times avg | raw - "
        "profiler |",
        "|---|---|---|---|---|---|---|",
    ]
    within = 0
    for op in OPS:
        p = med(r["ops"][op]["avg_us"] for r in runs["torch.profiler"])
        c = med(r["ops"][op]["avg_us"] for r in runs["rfbpf"])
        raw = med(r["ops"][op]["avg_us"] for r in runs["rfbpf --raw-times"])
        ok = abs(c - p) <= prof_overhead_us
        within += ok
        lines.append(f"| {op} | {p:.2f} us | {c:.2f} us | {c - p:+.2f} us "
                     f"| {'yes' if ok else 'no'} | {raw:.2f} us | "
                     f"{raw - p:+.2f} us |")
    lines.append("")
    lines.append(f"{within} of {len(OPS)} ops within torch.profiler's own "
                 "overhead per op.")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
