#!/usr/bin/env python3
"""What --off-cpu costs the rest of the machine: the scheduler programs
run at every context switch of every process, and for an untraced one
they only compare its tgid with the target's. bench/switch_pingpong (two
threads pinned to one CPU handing a byte back and forth through pipes)
is timed with no rfbpf, with rfbpf tracing a PyTorch job without
--off-cpu, and with --off-cpu, interleaved; the differences of the
medians are the cost per switch of an untraced process.

  sudo bench/off_cpu_cost.py [--reps R] [--switches N] [--markdown FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RFBPF = os.path.join(ROOT, "rfbpf")
PINGPONG = os.path.join(ROOT, "build", "bench", "switch_pingpong")
PYTHON = "/usr/bin/python3"
# A job to trace: small ops and sleeps, so that it switches too.
JOB = ("import time, torch\na = torch.ones(4)\nprint('ready', flush=True)\n"
       "while True:\n    a.add(1)\n    time.sleep(0.001)\n")
VARIANTS = [("no rfbpf", None), ("rfbpf tracing a job", []),
            ("rfbpf --off-cpu tracing a job", ["--off-cpu"])]


def bpf_stats():
    """{program name: (run_time_ns, run_cnt)} of the off-CPU programs."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"],
                         capture_output=True, text=True, check=True).stdout
    got = {}
    for p in json.loads(out):
        if p.get("name") in ("off_cpu_switch", "off_cpu_waking"):
            t, n = got.get(p["name"], (0, 0))
            got[p["name"]] = (t + p.get("run_time_ns", 0),
                              n + p.get("run_cnt", 0))
    return got


def measure(args, job, switches, stats):
    """ns per switch of the ping-pong, with rfbpf ARGS on job (or not);
    the off-CPU programs' run time while it ran, into stats."""
    rf = None
    if args is not None:
        rf = subprocess.Popen([RFBPF, "-q", "--no-table", "-p", str(job.pid),
                               *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        time.sleep(4)           # attached and activated
        if rf.poll() is not None:
            raise RuntimeError("rfbpf failed: " + rf.stderr.read())
    try:
        before = bpf_stats()
        out = subprocess.run([PINGPONG, str(switches // 2), "5", "0"],
                             capture_output=True, text=True, check=True)
        for name, (t, n) in bpf_stats().items():
            t0, n0 = before.get(name, (0, 0))
            stats.setdefault(name, []).append((t - t0, n - n0))
        return float(out.stdout)
    finally:
        if rf:
            rf.send_signal(2)
            rf.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--switches", type=int, default=400000)
    ap.add_argument("--markdown")
    a = ap.parse_args()
    job = subprocess.Popen([PYTHON, "-c", JOB], stdout=subprocess.PIPE,
                           text=True)
    job.stdout.readline()
    times = {name: [] for name, _ in VARIANTS}
    stats = {}
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        for rep in range(a.reps):
            for name, args in VARIANTS:
                times[name].append(measure(args, job, a.switches, stats))
            print(f"off-cpu cost: rep {rep + 1}/{a.reps} done",
                  file=sys.stderr)
    finally:
        job.kill()
        job.wait()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)
    base = statistics.median(times["no rfbpf"])
    lines = [f"{a.switches} switches per run (median of 5 runs of the "
             f"ping-pong), {a.reps} interleaved repetitions", "",
             "| variant | ns per switch, median | spread (min-max) | added "
             "per switch (ns) |", "|---|---|---|---|"]
    for name, _ in VARIANTS:
        v = times[name]
        med = statistics.median(v)
        lines.append(f"| {name} | {med:.1f} | {min(v):.1f}-{max(v):.1f} | "
                     f"{med - base:+.1f} |")
    off = statistics.median(times[VARIANTS[2][0]])
    on = statistics.median(times[VARIANTS[1][0]])
    lines += ["", f"--off-cpu's scheduler programs add {off - on:+.1f} ns "
              f"to each context switch of an untraced process (the goal: "
              f"under 100 ns); the untraced runs spread "
              f"{max(times['no rfbpf']) - min(times['no rfbpf']):.1f} ns."]
    for name, runs in sorted(stats.items()):
        t = sum(r[0] for r in runs)
        n = sum(r[1] for r in runs)
        if n:
            lines.append(f"- `{name}`: {t / n:.1f} ns per run over {n} "
                         f"runs (kernel BPF statistics, during the "
                         f"--off-cpu ping-pongs).")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
