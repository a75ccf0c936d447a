#!/usr/bin/env python3
"""Workload overhead of rfbpf's modes against untraced runs and
torch.profiler, measured side by side in one run.

The workloads time their own phase (bench/timed_workload.py: the ops only,
no start-up, import or attach). Variants run interleaved (A B C ... A B C
...) and each median is compared with the untraced median of the same
run: this VM is noisy, so only figures measured together mean anything.

Suites:
  tiny     the tiny-op workload (tests/workloads/tiny_ops.py): every mode,
           torch.profiler end to end, and the cost breakdown of the full
           trace on callback probes (bench/callback_only)
  mlp      the MLP training step (tests/workloads/mlp_threads.py)
  threads  the tiny-op workload on 1, 2 and 4 threads
  long     --sample 0.01 over long phases (its cost is below the noise of
           short ones)
  python-tiny, python-mlp
           --python-stacks and --shapes: the cost per recorded op of each
           (full trace with and without), the slowdown with --sample 0.01
           and both, and torch.profiler with with_stack=True and
           record_shapes=True
  python-long
           --sample 0.01 with and without both, over long phases

  sudo bench/overhead.py --suite tiny [--steps N] [--reps R]
                         [--markdown FILE]
"""
import argparse
import statistics
import sys

from variant_runner import ops_per_step, run_variant

FULL_E = ("rfbpf", ["--probes", "entry"])
FULL_C = ("rfbpf", ["--probes", "callback"])
SAMPLE_E = ("rfbpf", ["--probes", "entry", "--sample", "0.01"])
SAMPLE_C = ("rfbpf", ["--probes", "callback", "--sample", "0.01"])
TREE_C = ("rfbpf", ["--probes", "callback", "--tree-sample", "0.01"])
MODES = [
    ("untraced", ("untraced", [])),
    ("torch.profiler", ("torch", [])),
    ("rfbpf full, callback probes", FULL_C),
    ("rfbpf full, entry probes", FULL_E),
    ("rfbpf --sample 0.01, callback probes", SAMPLE_C),
    ("rfbpf --sample 0.01, entry probes", SAMPLE_E),
    ("rfbpf --tree-sample 0.01, callback probes", TREE_C),
]
PY_FULL = ("rfbpf", ["--probes", "callback", "--python-stacks"])
PY_SAMPLE = ("rfbpf", ["--probes", "callback", "--sample", "0.01",
                       "--python-stacks"])
SH_FULL = ("rfbpf", ["--probes", "callback", "--shapes"])
BOTH_SAMPLE = ("rfbpf", ["--probes", "callback", "--sample", "0.01",
                         "--python-stacks", "--shapes"])
PY_FULL_NAME = "rfbpf full, callback probes, --python-stacks"
PY_SAMPLE_NAME = "rfbpf --sample 0.01, callback probes, --python-stacks"
SH_FULL_NAME = "rfbpf full, callback probes, --shapes"
BOTH_SAMPLE_NAME = ("rfbpf --sample 0.01, callback probes, --python-stacks "
                    "--shapes")
PYTHON_MODES = [
    MODES[0],
    ("torch.profiler with_stack, record_shapes", ("torch_stack", [])),
    MODES[2],
    (PY_FULL_NAME, PY_FULL),
    (SH_FULL_NAME, SH_FULL),
    MODES[4],
    (PY_SAMPLE_NAME, PY_SAMPLE),
    (BOTH_SAMPLE_NAME, BOTH_SAMPLE),
]
BREAKDOWN = [
    ("callback registered, no uprobes", ("callback_only", [])),
    ("callback + uprobes running an empty program",
     ("callback_only", ["--empty-probes"])),
]
SUITES = {  # name: (workload, default steps, default reps, threads, modes)
    "tiny": ("tiny", 20000, 5, [1], MODES + BREAKDOWN),
    "mlp": ("mlp", 400, 5, [1], MODES),
    "threads": ("tiny", 5000, 5, [1, 2, 4],
                [MODES[0], MODES[2], MODES[4]]),
    "long": ("tiny", 100000, 5, [1], [MODES[0], MODES[4], MODES[5]]),
    "python-tiny": ("tiny", 50000, 3, [1], PYTHON_MODES),
    "python-mlp": ("mlp", 400, 3, [1], PYTHON_MODES),
    "python-long": ("tiny", 100000, 5, [1],
                    [MODES[0], MODES[4], (PY_SAMPLE_NAME, PY_SAMPLE),
                     (BOTH_SAMPLE_NAME, BOTH_SAMPLE)]),
}
TORCH_E2E = {"phase_seconds": "torch.profiler, profiled region only",
             "e2e_table_seconds": "torch.profiler end to end + "
             "key_averages() table",
             "e2e_trace_seconds": "torch.profiler end to end + "
             "export_chrome_trace()"}


def measure(suite, steps, reps):
    """{(threads, name, figure): [seconds]}, {(threads, name): [acct]}."""
    workload, _, _, thread_counts, modes = SUITES[suite]
    times, accts = {}, {}
    for rep in range(reps):
        for t in thread_counts:
            for name, (kind, args) in modes:
                figs, acct = run_variant(kind, args, workload, steps, t)
                for fig, v in figs.items():
                    if v is not None:
                        times.setdefault((t, name, fig), []).append(v)
                if acct:
                    accts.setdefault((t, name), []).append(acct)
        print(f"{suite}: rep {rep + 1}/{reps} done", file=sys.stderr)
    return times, accts


def rows_of(times, t, figure="phase_seconds"):
    """(label, samples) per table row, torch.profiler split in three."""
    for (tt, name, fig), v in times.items():
        if tt != t or fig == "phase_cpu_seconds":
            continue
        if name == "torch.profiler":
            yield TORCH_E2E[fig], v
        elif name.startswith("torch.profiler"):
            yield TORCH_E2E[fig] + ", with_stack and record_shapes", v
        elif fig == "phase_seconds":
            yield name, times.get((t, name, figure), v)


def acct_cells(accts):
    """rfbpf's own CPU (whole run, including its start-up and the ~3 s of
    following the command to torch's import) and peak RSS, medians."""
    if not accts:
        return "", "", ""
    cpu = statistics.median(a["cpu_s"] for a in accts)
    per_m = statistics.median(a["cpu_s"] / max(a["events"], 1) * 1e6
                              for a in accts)
    rss = statistics.median(a["rss_mib"] for a in accts)
    return f"{cpu:.2f}", f"{per_m:.1f}", f"{rss:.0f}"


def marginal_cpu(accts, t):
    """rfbpf's CPU per million events without its start-up: the CPU and
    event differences between the full trace and --sample 0.01 (callback
    probes), which pay the same start-up, medians over repetitions."""
    full = accts.get((t, MODES[2][0]))
    sampled = accts.get((t, MODES[4][0]))
    if not full or not sampled:
        return ""
    per_m = statistics.median(
        (f["cpu_s"] - s["cpu_s"]) / max(f["events"] - s["events"], 1) * 1e6
        for f, s in zip(full, sampled))
    events = statistics.median(f["events"] for f in full)
    return (f"\nrfbpf's own CPU per million events, start-up excluded (full "
            f"trace minus --sample 0.01, callback probes, {events:.0f} "
            f"events in the full trace): {per_m:.2f} s, i.e. "
            f"{per_m:.2f} us per event on the loader's CPU.\n")


def table(times, accts, t, ops, figure="phase_seconds"):
    base = statistics.median(times[(t, "untraced", figure)])
    e2e = times.get((t, "torch.profiler", "e2e_table_seconds")) or \
        times.get((t, PYTHON_MODES[1][0], "e2e_table_seconds"))
    e2e_added = statistics.median(e2e) - base if e2e else None
    out = ["| variant | median (s) | spread (min-max) | ratio to untraced "
           "| added per op (us) | added / torch.profiler e2e added | "
           "rfbpf CPU (s) | rfbpf CPU s per M events | rfbpf peak RSS "
           "(MiB) |", "|---|---|---|---|---|---|---|---|---|"]
    added = {}
    for label, v in rows_of(times, t, figure):
        med = statistics.median(v)
        added[label] = (med - base) / ops * 1e6
        share = (f"{(med - base) / e2e_added:.3f}" if e2e_added and
                 label.startswith("rfbpf") else "")
        cpu, per_m, rss = acct_cells(accts.get((t, label)))
        out.append(f"| {label} | {med:.3f} | {min(v):.3f}-{max(v):.3f} | "
                   f"{med / base:.3f} | {added[label]:.3f} | {share} | "
                   f"{cpu} | {per_m} | {rss} |")
    return "\n".join(out), added


def breakdown(added):
    full = added["rfbpf full, callback probes"]
    machinery = added[BREAKDOWN[0][0]]
    probes = added[BREAKDOWN[1][0]]
    parts = [("PyTorch's callback machinery (RecordFunction built, start/"
              "end stubs called)", machinery),
             ("two optimized uprobes (nop5 trampoline, empty program)",
              probes - machinery),
             ("rfbpf's BPF programs, ring buffer, loader", full - probes)]
    out = ["| layer | added per op (us) | share of the full trace |",
           "|---|---|---|"]
    for label, v in parts:
        out.append(f"| {label} | {v:.3f} | {v / full:.0%} |")
    out.append(f"| full trace, callback probes | {full:.3f} | 100% |")
    return "\n".join(out)


def python_summary(added, noise):
    """What --python-stacks and --shapes add per recorded op, and the bar:
    with --sample 0.01 both together add at most as much again as
    --sample 0.01 alone. noise: the untraced runs' spread, per op."""
    full = added.get(MODES[2][0])
    smp, smp_py = added[MODES[4][0]], added[PY_SAMPLE_NAME]
    smp_both = added[BOTH_SAMPLE_NAME]
    per_op = ""
    if full is not None:
        per_op = (f"| --python-stacks, per recorded op (full trace with it "
                  f"less without) | {added[PY_FULL_NAME] - full:.3f} |\n"
                  f"| --shapes, per recorded op (full trace with it less "
                  f"without) | {added[SH_FULL_NAME] - full:.3f} |\n")

    def verdict(v):
        if smp > noise:
            return f"{v / smp:.2f}x (the goal: at most 2x)"
        return (f"{v - smp:+.3f} us per op over it; not a ratio, as "
                f"--sample 0.01 alone added less than this run's noise "
                f"(untraced runs spread {noise:.3f} us per op)")
    return ("\n\n| what | added per op (us) |\n|---|---|\n" + per_op +
            f"| --sample 0.01 | {smp:.3f} |\n"
            f"| --sample 0.01 --python-stacks | {smp_py:.3f} |\n"
            f"| --sample 0.01 --python-stacks --shapes | {smp_both:.3f} |\n"
            f"\nAdded time over --sample 0.01 alone: with --python-stacks "
            f"{verdict(smp_py)}; with --python-stacks --shapes "
            f"{verdict(smp_both)}." + derived(added, smp))


def derived(added, smp):
    """The bar's ratio from what can be measured apart from the noise:
    each option's cost per recorded op (full traces), of which --sample
    0.01 pays for one op in a hundred."""
    if MODES[2][0] not in added or smp <= 0:
        return ""
    full = added[MODES[2][0]]
    per_op = (added[PY_FULL_NAME] - full) + (added[SH_FULL_NAME] - full)
    return (f"\n\nFrom the full traces instead: both options cost "
            f"{per_op:.3f} us per recorded op, so at --sample 0.01 "
            f"{per_op / 100:.4f} us per op on top of --sample 0.01's "
            f"{smp:.3f}: {(smp + per_op / 100) / smp:.2f}x (the goal: at "
            f"most 2x).")


def scaling(times, thread_counts, ops_by_t):
    out = ["| threads | ops per phase | untraced (s) | full trace: added "
           "per op (us) | full: ratio | --sample 0.01: added per op (us) "
           "| sample: ratio |", "|---|---|---|---|---|---|---|"]
    for t in thread_counts:
        base = statistics.median(times[(t, "untraced", "phase_seconds")])
        cells = []
        for name in (MODES[2][0], MODES[4][0]):
            med = statistics.median(times[(t, name, "phase_seconds")])
            cells += [f"{(med - base) / ops_by_t[t] * 1e6:.3f}",
                      f"{med / base:.3f}"]
        out.append(f"| {t} | {ops_by_t[t]:.0f} | {base:.3f} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", choices=SUITES, default="tiny")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--reps", type=int)
    ap.add_argument("--markdown", help="append the tables to this file")
    args = ap.parse_args()
    workload, steps, reps, thread_counts, _ = SUITES[args.suite]
    steps, reps = args.steps or steps, args.reps or reps
    ops_by_t = {t: ops_per_step(workload, t) * steps for t in thread_counts}
    times, accts = measure(args.suite, steps, reps)
    head = (f"{workload} workload, {steps} steps, {reps} interleaved "
            f"repetitions; ops per phase: "
            + ", ".join(f"{ops_by_t[t]:.0f}" + (f" ({t} threads)" if
                        len(thread_counts) > 1 else "")
                        for t in thread_counts))
    if args.suite == "threads":
        text = scaling(times, thread_counts, ops_by_t)
    else:
        text, added = table(times, accts, 1, ops_by_t[1])
        text += marginal_cpu(accts, 1)
        if args.suite == "tiny":
            text += ("\n\nWhere the full trace's time goes (differences "
                     "of the medians above):\n\n" + breakdown(added))
        if args.suite == "python-long":
            # Long sampled phases: CPU time, less disturbed than wall
            # time by whatever else this VM runs.
            cpu, added = table(times, accts, 1, ops_by_t[1],
                               "phase_cpu_seconds")
            text += ("\n\nThe same phases' CPU time (the workload's user "
                     "and system time):\n\n" + cpu)
            fig = "phase_cpu_seconds"
        else:
            fig = "phase_seconds"
        if args.suite.startswith("python"):
            untraced = times[(1, "untraced", fig)]
            noise = (max(untraced) - min(untraced)) / ops_by_t[1] * 1e6
            text += python_summary(added, noise)
    print(head + "\n\n" + text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"\n{head}\n\n{text}\n")


if __name__ == "__main__":
    main()
