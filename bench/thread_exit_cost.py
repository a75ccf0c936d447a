#!/usr/bin/env python3
"""What tracing costs a thread exit anywhere on the machine: rfbpf's
thread-exit program runs on sched_process_exit for every thread that
exits, and for an untraced process it only looks its tgid up. A loop that
starts and joins threads in an untraced process is timed with no rfbpf
and with one fleet daemon tracing N jobs (--jobs, default 32), interleaved;
the kernel's BPF statistics give the thread-exit programs' own run time
per exit, summed over every copy of them loaded (one per rfbpf process
since bpf/thread_exits.bpf.c; one per job before). --also RFBPF adds the
same daemon from another build, to compare side by side in one run.

  sudo bench/thread_exit_cost.py [--reps R] [--threads N] [--jobs N]
                                 [--also RFBPF] [--markdown FILE]
"""
import argparse
import json
import statistics
import subprocess
import sys

import off_cpu_cost

# Starts and joins N threads; prints ns per thread (start to joined).
LOOP = ("import sys, threading, time\nn = int(sys.argv[1])\n"
        "t0 = time.perf_counter_ns()\nfor _ in range(n):\n"
        "    t = threading.Thread(target=int)\n    t.start()\n    t.join()\n"
        "print((time.perf_counter_ns() - t0) / n)\n")


def exit_stats():
    """(run_time_ns, run_cnt, copies) of the thread-exit programs."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"],
                         capture_output=True, text=True, check=True).stdout
    progs = [p for p in json.loads(out) if p.get("name") == "thread_exit"]
    return (sum(p.get("run_time_ns", 0) for p in progs),
            sum(p.get("run_cnt", 0) for p in progs), len(progs))


def measure(rfbpf, jobs, threads):
    """ns per thread of the loop, with a daemon of rfbpf on jobs (or
    none); and the exit programs' (run time, runs, copies) meanwhile."""
    rf = None
    if rfbpf:
        off_cpu_cost.RFBPF = rfbpf
        rf = off_cpu_cost.start_rfbpf([], jobs)
    try:
        t0, n0, c0 = exit_stats()
        out = subprocess.run([off_cpu_cost.PYTHON, "-c", LOOP, str(threads)],
                             capture_output=True, text=True, check=True)
        t1, n1, c1 = exit_stats()
        # A daemon stopped just before may still be listed on one side
        # (the kernel frees its programs after it exits): its runs are
        # not this run's.
        if c0 != c1:
            return float(out.stdout), (0, 0, 0)
        return float(out.stdout), (t1 - t0, n1 - n0, c1)
    finally:
        if rf:
            rf.send_signal(2)
            rf.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=20000)
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--also", help="another build's rfbpf, run beside")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    vs = [("no rfbpf", None),
          (f"daemon on {a.jobs} jobs", off_cpu_cost.RFBPF)]
    if a.also:
        vs.append((f"daemon on {a.jobs} jobs, {a.also}", a.also))
    times = {name: [] for name, _ in vs}
    stats = {name: [] for name, _ in vs}
    with off_cpu_cost.traced_jobs_and_bpf_stats(
            a.jobs, off_cpu_cost.MANY_JOBS) as jobs:
        for rep in range(a.reps):
            for name, rfbpf in vs:
                t, s = measure(rfbpf, jobs, a.threads)
                times[name].append(t)
                stats[name].append(s)
                print(f"  {name}: {t:.0f} ns per thread; exit programs "
                      f"{s[2]}, {s[0]} ns in {s[1]} runs", file=sys.stderr)
            print(f"thread-exit cost: rep {rep + 1}/{a.reps} done",
                  file=sys.stderr)
    base = statistics.median(times["no rfbpf"])
    lines = [f"{a.threads} threads started and joined per run, {a.reps} "
             f"interleaved repetitions", "",
             "| variant | ns per thread, median | spread (min-max) | added "
             "(ns) | thread-exit programs loaded | their BPF time per "
             "exit (ns) |", "|---|---|---|---|---|---|"]
    for name, _ in vs:
        v = times[name]
        med = statistics.median(v)
        t = sum(s[0] for s in stats[name])
        n = sum(s[1] for s in stats[name])
        copies = max(s[2] for s in stats[name])
        per_exit = f"{t / (n / copies):.1f}" if n and copies else "-"
        lines.append(f"| {name} | {med:.0f} | {min(v):.0f}-{max(v):.0f} | "
                     f"{med - base:+.0f} | {copies} | {per_exit} |")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
