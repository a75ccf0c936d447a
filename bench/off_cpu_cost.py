#!/usr/bin/env python3
"""What --off-cpu costs the rest of the machine: the scheduler programs
run at every context switch of every process, and for an untraced one
they only test a bit for its tgid. bench/switch_pingpong (two threads
pinned to one CPU handing a byte back and forth through pipes) is timed
with no rfbpf, with rfbpf tracing PyTorch jobs without --off-cpu, and
with --off-cpu, interleaved; the differences of the medians are the cost
per switch of an untraced process. The kernel's BPF statistics give the
programs' own run time per switch as well (summed over every copy of
them, should there be more than one).

--jobs N traces N jobs with one fleet daemon (rfbpf --continuous -p ...)
instead of one job with rfbpf -p: issue 26's scale bar is 32 jobs and
under 100 ns per untraced switch.

  sudo bench/off_cpu_cost.py [--reps R] [--switches N] [--jobs N]
                             [--markdown FILE]
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RFBPF = os.path.join(ROOT, "rfbpf")
PINGPONG = os.path.join(ROOT, "build", "bench", "switch_pingpong")
PYTHON = "/usr/bin/python3"
# A job to trace: small ops and sleeps, so that it switches too.
JOB = ("import time, torch\na = torch.ones(4)\nprint('ready', flush=True)\n"
       "while True:\n    a.add(1)\n    time.sleep(0.001)\n")
# With many jobs, fewer wakeups each: 32 of them stay off the CPU the
# ping-pong runs on most of the time.
MANY_JOBS = JOB.replace("0.001", "0.02")


def variants(jobs):
    what = "a job" if jobs == 1 else f"{jobs} jobs (one daemon)"
    return [("no rfbpf", None), (f"rfbpf tracing {what}", []),
            (f"rfbpf --off-cpu tracing {what}", ["--off-cpu"])]


def bpf_stats():
    """{program name: (run_time_ns, run_cnt, copies)} of the off-CPU
    programs."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"],
                         capture_output=True, text=True, check=True).stdout
    got = {}
    for p in json.loads(out):
        if p.get("name") in ("off_cpu_switch", "off_cpu_waking"):
            t, n, c = got.get(p["name"], (0, 0, 0))
            got[p["name"]] = (t + p.get("run_time_ns", 0),
                              n + p.get("run_cnt", 0), c + 1)
    return got


def start_rfbpf(args, jobs):
    """rfbpf with ARGS on jobs, once it traces them all."""
    if len(jobs) == 1:
        cmd = [RFBPF, "-q", "--no-table", "-p", str(jobs[0].pid), *args]
    else:
        cmd = [RFBPF, "--continuous", "--interval", "10", "--prom-file",
               os.path.join(tempfile.mkdtemp(), "rfbpf.prom"), *args]
        for j in jobs:
            cmd += ["-p", str(j.pid)]
    rf = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if len(jobs) == 1:
        time.sleep(4)           # attached and activated
    else:
        traced = 0
        while traced < len(jobs):
            line = rf.stderr.readline()
            if not line:
                break
            traced += "): traced" in line
        threading.Thread(target=rf.stderr.read, daemon=True).start()
        time.sleep(2)
    if rf.poll() is not None:
        raise RuntimeError("rfbpf failed: " + rf.stderr.read())
    return rf


def measure(args, jobs, switches, stats):
    """ns per switch of the ping-pong, with rfbpf ARGS on jobs (or not);
    the off-CPU programs' run time while it ran, into stats."""
    rf = start_rfbpf(args, jobs) if args is not None else None
    try:
        before = bpf_stats()
        out = subprocess.run([PINGPONG, str(switches // 2), "5", "0"],
                             capture_output=True, text=True, check=True)
        for name, (t, n, c) in bpf_stats().items():
            t0, n0, _ = before.get(name, (0, 0, 0))
            stats.setdefault(name, []).append((t - t0, n - n0, c))
        return float(out.stdout)
    finally:
        if rf:
            rf.send_signal(2)
            rf.wait(timeout=120)


@contextlib.contextmanager
def traced_jobs_and_bpf_stats(n, source):
    """n PyTorch jobs running source (each past its ready line), with the
    kernel's BPF statistics on; the jobs killed and the statistics set
    back as they were on the way out."""
    jobs = [subprocess.Popen([PYTHON, "-c", source], stdout=subprocess.PIPE,
                             text=True) for _ in range(n)]
    for j in jobs:
        j.stdout.readline()
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        yield jobs
    finally:
        for j in jobs:
            j.kill()
            j.wait()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--switches", type=int, default=400000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--markdown")
    a = ap.parse_args()
    vs = variants(a.jobs)
    times = {name: [] for name, _ in vs}
    stats = {}
    with traced_jobs_and_bpf_stats(
            a.jobs, JOB if a.jobs == 1 else MANY_JOBS) as jobs:
        for rep in range(a.reps):
            for name, args in vs:
                times[name].append(measure(args, jobs, a.switches, stats))
            print(f"off-cpu cost: rep {rep + 1}/{a.reps} done",
                  file=sys.stderr)
    base = statistics.median(times["no rfbpf"])
    lines = [f"{a.switches} switches per run (median of 5 runs of the "
             f"ping-pong), {a.reps} interleaved repetitions", "",
             "| variant | ns per switch, median | spread (min-max) | added "
             "per switch (ns) |", "|---|---|---|---|"]
    for name, _ in vs:
        v = times[name]
        med = statistics.median(v)
        lines.append(f"| {name} | {med:.1f} | {min(v):.1f}-{max(v):.1f} | "
                     f"{med - base:+.1f} |")
    off = statistics.median(times[vs[2][0]])
    on = statistics.median(times[vs[1][0]])
    lines += ["", f"--off-cpu's scheduler programs add {off - on:+.1f} ns "
              f"to each context switch of an untraced process (the goal: "
              f"under 100 ns); the untraced runs spread "
              f"{max(times['no rfbpf']) - min(times['no rfbpf']):.1f} ns."]
    events = {}
    for name, runs in sorted(stats.items()):
        t = sum(r[0] for r in runs)
        n = sum(r[1] for r in runs)
        copies = max(r[2] for r in runs)
        if n:
            # Each copy runs once per event: events are the runs of one.
            events[name] = (t, n / copies)
            lines.append(f"- `{name}`: {copies} loaded, {t / n:.1f} ns per "
                         f"run, {t / (n / copies):.1f} ns per event (kernel "
                         f"BPF statistics, during the --off-cpu "
                         f"ping-pongs).")
    if "off_cpu_switch" in events:
        switches = events["off_cpu_switch"][1]
        total = sum(t for t, _ in events.values())
        lines.append(f"- BPF run time per context switch, the wakeups' "
                     f"included: {total / switches:.1f} ns.")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
