#!/usr/bin/env python3
"""Issue 26's scale bar, the daemon's side: one `rfbpf --continuous --all
--off-cpu` daemon over JOBS PyTorch jobs for MINUTES, one job replaced by
a new one (killed, another started) every REPLACE seconds, so the daemon
keeps starting and letting go of jobs. Every 10 s it samples the daemon's
RSS and open descriptors and how many jobs it traces; at the end it
prints the first and last minutes' medians side by side, and how many
jobs were traced and let go (each traced job must be let go once).

Jobs hold a descriptor set each, so descriptors are compared at equal
job counts: per job traced, first minute against last.

  sudo bench/fleet_churn.py [--jobs 32] [--minutes 10] [--replace 5]
                            [--markdown FILE]
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RFBPF = os.environ.get("RFBPF", os.path.join(ROOT, "rfbpf"))
PYTHON = "/usr/bin/python3"
# Ops and sleeps: switches for --off-cpu, little CPU (32 on two CPUs).
JOB = ("import time, torch\na = torch.ones(4)\n"
       "while True:\n    a.add(1)\n    time.sleep(0.02)\n")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--replace", type=float, default=5,
                    help="seconds between two replacements")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    prom = os.path.join(tempfile.mkdtemp(), "rfbpf.prom")
    log = []
    d = subprocess.Popen([RFBPF, "--continuous", "--all", "--off-cpu",
                          "--interval", "10", "--prom-file", prom],
                         stderr=subprocess.PIPE, text=True)
    threading.Thread(target=lambda: log.extend(d.stderr), daemon=True
                     ).start()
    start = lambda: subprocess.Popen([PYTHON, "-c", JOB])  # noqa: E731
    jobs = [start() for _ in range(a.jobs)]
    samples, t0 = [], time.monotonic()
    next_sample = next_replace = t0
    try:
        while time.monotonic() - t0 < a.minutes * 60:
            now = time.monotonic()
            if now >= next_replace:
                victim = jobs.pop(random.randrange(len(jobs)))
                victim.kill()
                victim.wait()
                jobs.append(start())
                next_replace += a.replace
            if now >= next_sample:
                text = "".join(log)
                live = (len(re.findall(r"\): traced", text)) -
                        len(re.findall(r"\): (exited|switched off)", text)))
                samples.append((now - t0, rss_kb(d.pid),
                                len(os.listdir(f"/proc/{d.pid}/fd")), live))
                print(f"fleet churn: {samples[-1]}", file=sys.stderr)
                next_sample += 10
            if d.poll() is not None:
                raise RuntimeError("the daemon exited:\n" + "".join(log))
            time.sleep(0.2)
    finally:
        for j in jobs:
            j.kill()
            j.wait()
        time.sleep(5)
        d.send_signal(2)
        rc = d.wait(timeout=120)
    text = "".join(log)
    traced = re.findall(r"pid (\d+) \([^)]*\): traced", text)
    let_go = re.findall(r"pid (\d+) \([^)]*\): (?:exited|switched off)",
                        text)
    med = statistics.median
    first = [s for s in samples if 60 <= s[0] < 120]
    last = samples[-6:]

    def row(name, part):
        rss = med(s[1] for s in part)
        fds = med(s[2] for s in part)
        live = med(s[3] for s in part)
        per = fds / live if live else float("nan")
        return (f"| {name} | {rss / 1024:.1f} | {fds:.0f} | {live:.0f} | "
                f"{per:.1f} |")
    text = "\n".join([
        f"{a.jobs} jobs, one replaced every {a.replace:g} s, for "
        f"{a.minutes:g} min; daemon exit status {rc}", "",
        "| minute | daemon RSS (MiB, median) | open descriptors (median) "
        "| jobs traced (median) | descriptors per traced job |",
        "|---|---|---|---|---|",
        row("second (after start-up)", first), row("last", last), "",
        f"jobs traced {len(traced)}, let go {len(let_go)}, traced and "
        f"never let go {len(set(traced) - set(let_go))}"])
    print(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
