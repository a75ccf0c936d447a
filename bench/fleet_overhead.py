#!/usr/bin/env python3
"""What fleet mode costs a job: the tiny-op and MLP workloads with no
daemon and under `rfbpf --continuous` at the default budget (1%), runs
interleaved (A B A B ...) in one run, medians compared within the run.

Two measures. Separate processes, one timed phase each (as bench/overhead.py
does): what a job pays, attach included, but this VM's run-to-run noise
(tens of %) hides a 1% cost. One process (bench/rate_workload.py), the
daemon switched on and off every --period seconds, the job's own steps per
second compared between on and off periods (the first 5 s of each on
period, where the daemon calibrates, attaches and runs its first interval
at p = 0.001, left out): steady-state cost with the process-to-process
noise gone. Beside the rate, the CPU seconds per step of the job and of
the daemon over the same stretches: the budget is a share of the job's
CPU, and CPU per step moves less with this VM's steal and idle time than
the wall rate does.

Each run is one timed phase of bench/timed_workload.py (the ops only),
long enough to span several of the daemon's intervals (--interval, 5 s by
default here: more re-registrations and windows per minute than the 60 s
default, so the cost measured is on the high side). The daemon is started
on the waiting job with -p and the phase begins once the job is traced.
The budget's own estimate (rfbpf_job_estimated_overhead_ratio) and the
window and sampling it chose are read from its metrics and shown beside
the measured cost.

  sudo bench/fleet_overhead.py [--seconds 30] [--reps 3] [--markdown FILE]
"""
import argparse
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RFBPF = os.path.join(ROOT, "rfbpf")
DRIVER = os.path.join(ROOT, "bench", "timed_workload.py")
PYTHON = "/usr/bin/python3"


def start_job(workload, steps):
    p = subprocess.Popen([PYTHON, DRIVER, "--workload", workload,
                          "--steps", str(steps), "--wait"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def finish_job(p):
    p.stdin.write("go\n")
    p.stdin.flush()
    _, err = p.communicate()
    m = re.search(r"phase_seconds=([0-9.]+)", err)
    if p.returncode or not m:
        raise RuntimeError(err[-2000:])
    return float(m.group(1))


def metric(text, name):
    m = re.search(r"^" + name + r"\{[^}]*\} (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def run_once(workload, steps, daemon, interval):
    job = start_job(workload, steps)
    if not daemon:
        return finish_job(job), None
    with tempfile.TemporaryDirectory() as tmp:
        prom = os.path.join(tmp, "m.prom")
        d = subprocess.Popen([RFBPF, "--continuous", "-p", str(job.pid),
                              "--interval", str(interval), "--prom-file",
                              prom], stderr=subprocess.PIPE, text=True)
        for line in d.stderr:
            if "traced, sampling" in line:
                break
        else:
            raise RuntimeError("the daemon did not trace the job")
        t = finish_job(job)
        text = open(prom).read() if os.path.exists(prom) else ""
        d.terminate()
        d.communicate(timeout=60)
    return t, {k: metric(text, "rfbpf_job_" + k) for k in
               ("estimated_overhead_ratio", "sample_probability",
                "window_seconds")}


def cpu_seconds(pid):
    """A process's user + system CPU seconds (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rate_on_off(workload, period, cycles, interval):
    """One process with the daemon off and on, cycle after cycle: the
    median steps/s of each, and the CPU seconds per step the job and the
    daemon spent in each (CPU per step moves less with this VM's steal
    and idle time than the wall rate does)."""
    job = subprocess.Popen([PYTHON, os.path.join(ROOT, "bench",
                                                 "rate_workload.py"),
                            "--workload", workload],
                           stdout=subprocess.PIPE, text=True)
    assert job.stdout.readline().strip() == "ready"
    res = {k: {"rates": [], "steps": 0.0, "job_cpu": 0.0, "own_cpu": 0.0}
           for k in ("off", "on")}

    def collect(into, seconds, skip, daemon):
        """Per-second rates after `skip` s; steps and CPU over the same
        stretch."""
        end = time.monotonic() + seconds
        prev = cpu0 = None
        while time.monotonic() < end:
            t, rate = map(float, job.stdout.readline().split())
            if t < end - seconds + skip:
                continue
            if prev is None:
                cpu0 = (cpu_seconds(job.pid),
                        cpu_seconds(daemon.pid) if daemon else 0.0)
            else:
                into["rates"].append(rate)
                into["steps"] += rate * (t - prev)
            prev = t
        if cpu0:
            into["job_cpu"] += cpu_seconds(job.pid) - cpu0[0]
            into["own_cpu"] += (cpu_seconds(daemon.pid) if daemon
                                else 0.0) - cpu0[1]
    try:
        collect({"rates": [], "steps": 0.0, "job_cpu": 0.0, "own_cpu": 0.0},
                5, 0, None)                     # warm-up
        for _ in range(cycles):
            collect(res["off"], period, 1, None)
            with tempfile.TemporaryDirectory() as tmp:
                d = subprocess.Popen([RFBPF, "--continuous", "-p",
                                      str(job.pid), "--interval",
                                      str(interval), "--prom-file",
                                      os.path.join(tmp, "m.prom")],
                                     stderr=subprocess.DEVNULL)
                collect(res["on"], period, 5, d)
                d.terminate()
                d.wait(timeout=60)
    finally:
        job.kill()
        job.wait()
    return res


class RateJob:
    """bench/rate_workload.py in the background, its per-second lines
    kept as (monotonic time, steps/s) by a reader thread."""

    def __init__(self, workload):
        self.p = subprocess.Popen([PYTHON, os.path.join(ROOT, "bench",
                                                        "rate_workload.py"),
                                   "--workload", workload],
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"
        self.pid, self.lines = self.p.pid, []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            t, rate = map(float, line.split())
            self.lines.append((t, rate))

    def steps(self, t0, t1):
        """Steps done between t0 and t1 (each line covers about 1 s)."""
        return sum(r for t, r in self.lines if t0 < t <= t1)

    def kill(self):
        self.p.kill()
        self.p.wait()


def paired(workload, period, cycles, tracer):
    """Two identical jobs at once, the tracer on one of them, swapped
    every period. In each period the traced job's CPU per step over the
    untraced one's: the host's swings (steal, a busy neighbour: 2x within
    a minute here) hit both jobs alike and cancel. Two periods with the
    roles swapped make a pair, whose geometric mean also cancels what
    differs between the two processes (one may run a few % slower all
    along). Returns the pairs' costs, each a ratio less 1."""
    jobs = [RateJob(workload), RateJob(workload)]
    costs = []
    try:
        time.sleep(5)                           # warm-up
        for _ in range(cycles):
            ratios = []
            for k in (0, 1):
                traced, other = jobs[k], jobs[1 - k]
                t = subprocess.Popen([RFBPF] + [str(traced.pid) if x ==
                                                "{pid}" else x
                                                for x in tracer],
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                time.sleep(5)       # attach, calibration, first interval
                t0 = time.monotonic()
                c0 = cpu_seconds(traced.pid), cpu_seconds(other.pid)
                time.sleep(period)
                t1 = time.monotonic()
                c1 = cpu_seconds(traced.pid), cpu_seconds(other.pid)
                time.sleep(1.2)     # the last second's line comes
                t.send_signal(signal.SIGINT)
                t.wait(timeout=60)
                time.sleep(2)       # the job back to untraced
                ratios.append((c1[0] - c0[0]) / traced.steps(t0, t1) /
                              ((c1[1] - c0[1]) / other.steps(t0, t1)))
            costs.append(math.sqrt(ratios[0] * ratios[1]) - 1)
    finally:
        for j in jobs:
            j.kill()
    return costs


def steps_for(workload, seconds):
    """Steps that make a phase of about `seconds`, untraced."""
    probe = 2000 if workload == "tiny" else 40
    t = finish_job(start_job(workload, probe))
    return max(probe, int(probe * seconds / t))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--interval", type=float, default=5)
    ap.add_argument("--period", type=float, default=20)
    ap.add_argument("--only-rates", action="store_true",
                    help="skip the separate-process phases")
    ap.add_argument("--only-paired", action="store_true",
                    help="only the two-jobs-at-once measure")
    ap.add_argument("--paired-period", type=float, default=12)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--one-shot-samples", default="0.000001,0.005",
                    help="plain rfbpf -p --sample P runs to set beside "
                    "the daemon in the paired measure (empty: none)")
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument("--markdown")
    a = ap.parse_args()
    lines = ["| workload | phase, no daemon (median, min-max) | phase under "
             "the daemon | measured cost | budget's estimate | p chosen | "
             "window per interval |", "|---|---|---|---|---|---|---|"]
    for workload in () if a.only_rates or a.only_paired else ("tiny",
                                                               "mlp"):
        steps = steps_for(workload, a.seconds)
        base, under, est = [], [], []
        for _ in range(a.reps):
            base.append(run_once(workload, steps, False, a.interval)[0])
            t, m = run_once(workload, steps, True, a.interval)
            under.append(t)
            est.append(m)
        b, u = statistics.median(base), statistics.median(under)
        last = est[-1]
        lines.append(
            f"| {workload} ({steps} steps) | {b:.2f} s ({min(base):.2f}-"
            f"{max(base):.2f}) | {u:.2f} s ({min(under):.2f}-"
            f"{max(under):.2f}) | {100 * (u / b - 1):+.2f}% | "
            f"{100 * last['estimated_overhead_ratio']:.2f}% | "
            f"{last['sample_probability']:.3g} | "
            f"{1000 * last['window_seconds']:.1f} ms |")
        print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", "One process, the daemon switched on and off every "
              f"{a.period:g} s ({a.cycles} cycles): steps per second, and "
              "CPU per step of the job and of the daemon:", "",
              "| workload | steps/s off (median, min-max) | steps/s on | "
              "cost in steps/s | job CPU per step off | on | job's extra "
              "CPU | daemon's CPU (share of the job's) | CPU cost in all |",
              "|---|---|---|---|---|---|---|---|---|"]
    for workload in () if a.only_paired else ("tiny", "mlp"):
        r = rate_on_off(workload, a.period, a.cycles, a.interval)
        off, on = r["off"], r["on"]
        m_off, m_on = (statistics.median(off["rates"]),
                       statistics.median(on["rates"]))
        cps_off = off["job_cpu"] / off["steps"]
        cps_on = on["job_cpu"] / on["steps"]
        own = on["own_cpu"] / on["steps"] / cps_off
        extra = cps_on / cps_off - 1
        lines.append(
            f"| {workload} | {m_off:.1f} ({min(off['rates']):.1f}-"
            f"{max(off['rates']):.1f}) | {m_on:.1f} "
            f"({min(on['rates']):.1f}-{max(on['rates']):.1f}) | "
            f"{100 * (m_off / m_on - 1):+.2f}% | {1e6 * cps_off:.2f} us | "
            f"{1e6 * cps_on:.2f} us | {100 * extra:+.2f}% | "
            f"{100 * own:.2f}% | {100 * (extra + own):+.2f}% |")
        print(lines[-1], file=sys.stderr, flush=True)
    prom_dir = tempfile.mkdtemp()
    tracers = [("daemon, default budget",
                ["--continuous", "-p", "{pid}", "--interval",
                 str(a.interval), "--prom-file",
                 os.path.join(prom_dir, "m.prom")]),
               # PyTorch redraws a sampled callback's skip in every scope
               # it covers each time a thread's state is set (autograd
               # does it around each node): fewer scopes, less of that.
               ("daemon, default budget, 3 scopes",
                ["--continuous", "-p", "{pid}", "--interval",
                 str(a.interval), "--prom-file",
                 os.path.join(prom_dir, "m.prom"), "--scopes",
                 "function,backward_function,user_scope"])]
    tracers += [(f"rfbpf -p --sample {p}", ["-p", "{pid}", "--no-table",
                                            "--sample", p])
                for p in a.one_shot_samples.split(",") if p]
    lines += ["", "Two identical jobs at once, the tracer on one, swapped "
              f"every {a.paired_period:g} s; a pair of periods gives the "
              "geometric mean of traced over untraced CPU per step "
              f"({a.pairs} pairs):", "",
              "| workload | tracer | CPU cost per step (median of pairs) "
              "| pairs (min-max) |", "|---|---|---|---|"]
    for workload in ("tiny", "mlp"):
        for name, args in tracers:
            c = paired(workload, a.paired_period, a.pairs, args)
            lines.append(f"| {workload} | {name} | "
                         f"{100 * statistics.median(c):+.2f}% | "
                         f"{100 * min(c):+.2f}% to {100 * max(c):+.2f}% |")
            print(lines[-1], file=sys.stderr, flush=True)
    shutil.rmtree(prom_dir)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
