#!/usr/bin/env python3
"""What fleet mode costs a job: the tiny-op and MLP workloads with no
daemon and under `rfbpf --continuous` at the default budget (1%), runs
interleaved (A B A B ...) in one run, medians compared within the run.
The daemon traces in bursts, its default; --sampled adds its sampled mode
(p < 1 and windows, the default before issue 26).

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

The measure issue 26's bar is read from (--only-paired): two identical
jobs at once, the tracer on one, the roles swapped every 10-20 s (drawn),
2 s left out after each swap, 10 pairs; the figure is the traced job's
CPU per step plus the tracer's own CPU share, over the other job's. An
A/A run (nothing on either job) and PyTorch's own empty observer at
p = 1e-6 take their turns in the same run, on the same two jobs, with a
bootstrap 90% interval beside each median.

Each run is one timed phase of bench/timed_workload.py (the ops only),
long enough to span several of the daemon's intervals (--interval, 5 s by
default here: more re-registrations and windows per minute than the 60 s
default, so the cost measured is on the high side). The daemon is started
on the waiting job with -p and the phase begins once the job is traced.
The budget's own estimate (rfbpf_job_estimated_overhead_ratio) and the
window and sampling it chose are read from its metrics and shown beside
the measured cost.

  sudo bench/fleet_overhead.py [--seconds 30] [--reps 3] [--markdown FILE]
  sudo bench/fleet_overhead.py --only-paired [--pairs 10] [--workloads mlp]
      [--late S]   (each tracer measured again from S s after the swap)
"""
import argparse
import math
import os
import random
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# RFBPF=PATH: another build (a copy, so that a rebuild during a long run
# does not pull the binary from under it).
RFBPF = os.environ.get("RFBPF") or os.path.join(ROOT, "rfbpf")


def traced_line(line):
    """The daemon's 'pid N (comm): traced ...' (in bursts or sampling)
    or one-shot rfbpf's 'tracing PID' line."""
    return "): traced" in line or line.startswith("rfbpf: tracing PID")
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
            if traced_line(line):
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


def cpu_ns(pid):
    """A process's CPU time so far, all its threads, in ns: read from its
    CPU clock (the id clock_getcpuclockid(3) makes), not /proc's ticks."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)


class RateJob:
    """bench/rate_workload.py in the background: its steps so far read
    from the counter it keeps in a file, its per-second lines drained."""

    def __init__(self, workload):
        fd, self.counter = tempfile.mkstemp(prefix="rfbpf-steps-")
        os.close(fd)
        self.p = subprocess.Popen([PYTHON, os.path.join(ROOT, "bench",
                                                        "rate_workload.py"),
                                   "--workload", workload,
                                   "--counter", self.counter],
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"
        self.pid = self.p.pid
        threading.Thread(target=self.p.stdout.read, daemon=True).start()

    def steps(self):
        """Steps done so far (read twice, against a torn read)."""
        with open(self.counter, "rb") as f:
            while True:
                a, b = os.pread(f.fileno(), 8, 0), os.pread(f.fileno(), 8, 0)
                if a == b:
                    return struct.unpack("=Q", a)[0] if len(a) == 8 else 0

    def kill(self):
        self.p.kill()
        self.p.wait()
        os.unlink(self.counter)


class Tracer:
    """What is switched on over one job of a pair: an rfbpf process
    (args, with {pid} for the job's pid), PyTorch's empty observer inside
    the job ("observer"), or nothing (None: the A/A run)."""

    def __init__(self, args, binary=None):
        self.args, self.p = args, None
        self.binary = binary or RFBPF
        self.estimates = []     # the daemon's own, at each period's end

    def start(self, job):
        """Switches it on over job, back once it is in place."""
        if self.args == "observer":
            os.kill(job.pid, signal.SIGUSR1)
            return
        if self.args is None:
            return
        self.p = subprocess.Popen(
            [self.binary] + [str(job.pid) if x == "{pid}" else x
                       for x in self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.p.stderr:
            if traced_line(line):
                break
        else:
            raise RuntimeError(f"{self.args}: did not trace the job")
        threading.Thread(target=self.p.stderr.read, daemon=True).start()

    def cpu(self):
        """Its own CPU so far, ns (an observer's is the job's)."""
        return cpu_ns(self.p.pid) if self.p else 0

    def stop(self, job):
        if self.args == "observer":
            os.kill(job.pid, signal.SIGUSR2)
        elif self.p:
            if "--prom-file" in self.args:
                prom = self.args[self.args.index("--prom-file") + 1]
                with open(prom) as f:
                    self.estimates.append(metric(
                        f.read(), "rfbpf_job_estimated_overhead_ratio"))
            self.p.send_signal(signal.SIGINT)
            self.p.wait(timeout=60)
            self.p = None


def paired(workload, periods, drop, pairs, tracers, late=0):
    """Two identical jobs at once, a tracer on one of them; the roles swap
    after each period (drawn from `periods`, seconds), the first `drop` s
    after each swap left out. In each period, the traced job's CPU per
    step plus the tracer's own CPU over those steps, over the untraced
    job's CPU per step: the host's swings (steal, a busy neighbour: 2x
    within a minute here) hit both jobs alike and cancel. Two periods with
    the roles swapped make a pair, whose geometric mean also cancels what
    differs between the two processes (one may run a few % slower all
    along). The tracers take turns pair by pair on the same two jobs, so
    each meets the same host. Returns each tracer's pairs' costs, each a
    ratio less 1, and its periods' own CPU over the traced job's.
    late > drop: each tracer also gets a row measured from `late` s after
    the swap to the period's end (its name with " (late)"): a cost that
    is gone by then is one of the first seconds after an attach."""
    jobs = [RateJob(workload), RateJob(workload)]
    names = list(tracers) + ([f"{n} (late)" for n in tracers] if late
                             else [])
    costs = {name: [] for name in names}
    own = {name: [] for name in names}
    try:
        time.sleep(5)                           # warm-up
        for _ in range(pairs):
            for name, tracer in tracers.items():
                ratios = {name: [], f"{name} (late)": []}
                for k in (0, 1):
                    traced, other = jobs[k], jobs[1 - k]

                    def reading():
                        return (cpu_ns(traced.pid), traced.steps(),
                                cpu_ns(other.pid), other.steps(),
                                tracer.cpu())
                    tracer.start(traced)
                    time.sleep(drop)
                    before, t0 = reading(), time.monotonic()
                    length = random.uniform(*periods)
                    if late:
                        time.sleep(late - drop)
                        mid = reading()
                    time.sleep(max(0, t0 + length - time.monotonic()))
                    after = reading()
                    tracer.stop(traced)
                    for row, start in ((name, before),
                                       (f"{name} (late)",
                                        mid if late else None)):
                        if start is None:
                            continue
                        d = [b - a for a, b in zip(start, after)]
                        ratios[row].append((d[0] + d[4]) / d[1] /
                                           (d[2] / d[3]))
                        own[row].append(d[4] / d[0])
                for row, r in ratios.items():
                    if r:
                        costs[row].append(math.sqrt(r[0] * r[1]) - 1)
    finally:
        for j in jobs:
            j.kill()
    return costs, own


def bootstrap_median(xs, level=0.9, rounds=4000):
    """The median of xs and a bootstrap interval of it (resampling xs)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs)))
                  for _ in range(rounds))
    tail = (1 - level) / 2
    return (statistics.median(xs), meds[int(tail * rounds)],
            meds[min(rounds - 1, int((1 - tail) * rounds))])


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
    ap.add_argument("--paired-periods", default="10,20",
                    help="MIN,MAX: each period of the paired measure lasts "
                    "a time drawn between them, in seconds")
    ap.add_argument("--drop", type=float, default=2,
                    help="seconds left out after each swap")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--late", type=float, default=0,
                    help="also each tracer's cost from this many seconds "
                    "after the swap (more than --drop, less than the "
                    "shortest period plus --drop): is the cost in the "
                    "first seconds after an attach?")
    ap.add_argument("--workloads", default="tiny,mlp")
    ap.add_argument("--scopes", default="",
                    help="also the daemon with these --scopes, e.g. "
                    "function,backward_function,user_scope")
    ap.add_argument("--sampled", action="store_true",
                    help="also the daemon with --sampled (p < 1 and "
                    "windows, the default before bursts)")
    ap.add_argument("--no-observer", action="store_true",
                    help="leave out PyTorch's empty observer (a quicker "
                    "run: A/A and the default daemon stay)")
    ap.add_argument("--budgets", default="",
                    help="also the daemon at these --budget percents "
                    "(comma-separated): the slope prices a burst")
    ap.add_argument("--one-shot-samples", default="",
                    help="plain rfbpf -p --sample P runs to set beside "
                    "the daemon in the paired measure (comma-separated)")
    ap.add_argument("--also", default="",
                    help="other rfbpf binaries (a build before a change, "
                    "copied out of the tree), comma-separated: each a "
                    "daemon row at the default budget, taking its turn "
                    "pair by pair with the others")
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument("--markdown")
    a = ap.parse_args()
    lines = [] if a.only_rates or a.only_paired else [
             "| workload | phase, no daemon (median, min-max) | phase under "
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
    lines += [] if a.only_paired else [
              "", "One process, the daemon switched on and off every "
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
    daemon = ["--continuous", "-p", "{pid}", "--interval", str(a.interval),
              "--prom-file", os.path.join(prom_dir, "m.prom")]
    tracers = {
        # Both jobs untraced: what the measure reads when there is nothing
        # to read, the noise the other rows stand in.
        "A/A: nothing on either job": Tracer(None),
        # PyTorch's price for a sampled callback being registered at all
        # (autograd rebuilds the callback lists around each node).
        "PyTorch's empty observer, p = 1e-6": Tracer("observer"),
        # The default mode: a control thread in the job switches a full
        # trace on for short random bursts, nothing registered between.
        "daemon, default budget": Tracer(daemon),
    }
    if a.no_observer:
        del tracers["PyTorch's empty observer, p = 1e-6"]
    # The sampled mode: a callback at p < 1 always registered.
    if a.sampled:
        tracers["daemon, default budget, --sampled"] = Tracer(
            daemon + ["--sampled"])
    # --budgets prices a burst: the cost at a few budgets (the number of
    # bursts grows with the budget) gives the fixed part (the control
    # thread, the daemon) and the part each burst adds.
    for b in filter(None, a.budgets.split(",")):
        tracers[f"daemon, --budget {b}"] = Tracer(daemon + ["--budget", b])
    # PyTorch redraws a sampled callback's skip in every scope it covers
    # each time a thread's state is set: fewer scopes, less of that.
    if a.scopes:
        tracers[f"daemon, default budget, --scopes {a.scopes}"] = Tracer(
            daemon + ["--scopes", a.scopes])
    for binary in filter(None, a.also.split(",")):
        tracers[f"daemon ({binary}), default budget"] = Tracer(daemon,
                                                               binary)
    for p in filter(None, a.one_shot_samples.split(",")):
        tracers[f"rfbpf -p --sample {p}"] = Tracer(
            ["-p", "{pid}", "--no-table", "--sample", p])
    periods = tuple(map(float, a.paired_periods.split(",")))
    if a.late and not a.drop < a.late < a.drop + periods[0]:
        ap.error("--late must be after --drop and before the shortest "
                 "period's end")
    lines += ["", "Two identical jobs at once, the tracer on one; the roles "
              f"swap every {periods[0]:g}-{periods[1]:g} s (drawn), "
              f"{a.drop:g} s left out after each swap; the tracers take "
              "turns pair by pair on the same two jobs. A pair's cost is "
              "the geometric mean over its two periods of the traced "
              "job's CPU per step, plus the tracer's own CPU, over the "
              f"untraced job's ({a.pairs} pairs; the daemon at "
              f"--interval {a.interval:g}):", "",
              "| workload | tracer | CPU cost per step (median of pairs) "
              "| bootstrap 90% interval | pairs (min-max) | of it, the "
              "tracer's own CPU (median) | the daemon's estimate (median) "
              "|", "|---|---|---|---|---|---|---|"]
    for workload in a.workloads.split(","):
        costs, own = paired(workload, periods, a.drop, a.pairs, tracers,
                            a.late)
        for name, c in costs.items():
            med, lo, hi = bootstrap_median(c)
            est = tracers[name].estimates if name in tracers else []
            lines.append(f"| {workload} | {name} | {100 * med:+.2f}% | "
                         f"{100 * lo:+.2f}% to {100 * hi:+.2f}% | "
                         f"{100 * min(c):+.2f}% to {100 * max(c):+.2f}% | "
                         f"{100 * statistics.median(own[name]):.2f}% | "
                         + (f"{100 * statistics.median(est):.2f}% |"
                            if est else "|"))
            est.clear()
            print(lines[-1], file=sys.stderr, flush=True)
    shutil.rmtree(prom_dir)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
