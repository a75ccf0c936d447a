"""--off-cpu against what the workload measures itself: a scope that
sleeps, one that spins, two threads contending for a lock (the waker
named), a file read with O_DIRECT (block I/O), and a thread pinned to the
CPU a hog process is pinned to (preemption). tests/workloads/off_cpu.py
sums each scope's wall time and its thread's CPU time between two clock
reads; rfbpf's off-CPU time between those reads must be the difference,
its reasons the right ones."""
import bisect
import collections
import json
import os
import subprocess

import pytest

from harness import (Job, PYTHON, RFBPF, ROOT, bpf_programs, load_trace, ns,
                     ops_of, rebuild_nesting, run, wait_until)

WORKLOAD = os.path.join(ROOT, "tests", "workloads", "off_cpu.py")
DATA = "/var/tmp/rfbpf-offcpu.bin"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """One traced run of every case; (trace, the workload's totals)."""
    if not os.path.exists(DATA):
        with open(DATA, "wb") as f:
            f.write(os.urandom(16 << 20))
    hog = subprocess.Popen([PYTHON, "-c", "while True: pass"],
                           preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    out = tmp_path_factory.mktemp("offcpu") / "t.json"
    folded = out.with_suffix(".folded")
    windows = out.with_suffix(".windows")
    steal = steal_ns()
    try:
        r = run([RFBPF, "-q", "--off-cpu", "--top-wakers", "5", "-o",
                 str(out), "--off-cpu-folded", str(folded), "--", PYTHON,
                 WORKLOAD, "--seconds", "3", "--read", DATA, "--pin", "0",
                 "--windows", str(windows)])
    finally:
        steal = steal_ns() - steal
        hog.kill()
        hog.wait()
    assert r.returncode == 0, r.stderr
    totals = json.loads([l for l in r.stdout.splitlines()
                         if l.startswith("{")][-1])
    return (load_trace(out), totals, r.stdout + folded.read_text(),
            json.loads(windows.read_text()), steal)


def steal_ns():
    """CPU time the hypervisor took from this VM's CPUs (all of them) so
    far, from /proc/stat; its USER_HZ ticks rounded up."""
    with open("/proc/stat") as f:
        ticks = int(f.readline().split()[8])
    return (ticks + 1) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def stats(trace):
    return {s["name"]: s for s in trace["otherData"]["op_stats"]}


def slices(trace, op):
    return [e for e in trace["traceEvents"]
            if e.get("cat") == "off_cpu" and e["args"].get("op") == op]


def off_cpu_within(trace, intervals):
    """Per name, rfbpf's off-CPU time on a thread inside that thread's
    intervals [(name, tid, start, end)] (CLOCK_MONOTONIC ns), and how many
    of its off-CPU intervals that time came from."""
    base = trace["otherData"]["base_monotonic_ns"]
    off = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("cat") == "off_cpu":
            start = base + ns(e["ts"])
            off[e["tid"]].append((start, start + ns(e["dur"])))
    for v in off.values():
        v.sort()
    within, pieces = collections.Counter(), collections.Counter()
    for name, tid, start, end in intervals:
        v = off.get(tid, [])
        # A thread's off-CPU intervals are disjoint: from the last one to
        # start before this window, while they start inside it.
        i = max(bisect.bisect_right(v, (start, float("inf"))) - 1, 0)
        while i < len(v) and v[i][0] < end:
            overlap = min(end, v[i][1]) - max(start, v[i][0])
            if overlap > 0:
                within[name] += overlap
                pieces[name] += 1
            i += 1
    return within, pieces


def test_off_cpu_time_is_what_the_workload_measured(traced):
    trace, totals, _, windows, steal = traced
    st = stats(trace)
    base = trace["otherData"]["base_monotonic_ns"]
    scopes = [(e["name"], e["tid"], base + ns(e["ts"]),
               base + ns(e["ts"]) + ns(e["dur"]))
              for e in ops_of(trace) if e["name"] in totals]
    in_scopes, _ = off_cpu_within(trace, scopes)
    in_clocks, switches = off_cpu_within(trace, windows)
    for name in ("sleep_scope", "spin_scope", "wait_lock", "hold_lock",
                 "read_file", "pinned_spin"):
        t, s = totals[name], st[name]
        assert s["calls"] == t["calls"], (name, s["calls"], t["calls"])
        # The table's off-CPU time is its trace's, to the ns each slice
        # was rounded to.
        assert abs(s["off_cpu_ns"] - in_scopes[name]) <= t["calls"], \
            (name, s["off_cpu_ns"], in_scopes[name])
        # Between its clock reads the workload was off CPU for its wall
        # time less its CPU time; rfbpf, for the time its intervals cover
        # there. (Off CPU between a clock read and the scope's edge, a
        # wait for the GIL or a preemption, is rfbpf's alone.) The
        # hypervisor's steal is off CPU to the thread's clock, on CPU to
        # the scheduler rfbpf watches: no thread loses more than all. The
        # kernel stops and starts a thread's CPU clock a few µs from where
        # sched_switch stamps its intervals (spin_scope, preempted 3,000
        # times in a run, came out 4 µs a switch short here).
        theirs = t["wall_ns"] - t["cpu_ns"]
        ours = in_clocks[name]
        slack = 0.02 * theirs + 5_000 * switches[name]
        assert theirs - slack - steal <= ours <= theirs + slack, \
            (name, ours, theirs, steal)
    # The bar's two ends: a sleeping scope is off CPU, a spinning one on.
    sleep, spin = st["sleep_scope"], st["spin_scope"]
    assert sleep["self_off_cpu_ns"] >= 0.85 * sleep["self_ns"]
    # Self: while the scope itself was innermost, not its aten::mm.
    mm = st["aten::mm"]
    assert spin["self_off_cpu_ns"] + mm["off_cpu_ns"] >= \
        spin["off_cpu_ns"] - 1
    assert spin["off_cpu_ns"] > spin["self_off_cpu_ns"]


def test_reasons_and_wakers(traced):
    trace, _, stdout, _, _ = traced
    by = {}
    for op in ("sleep_scope", "wait_lock", "read_file", "pinned_spin"):
        c = collections.Counter()
        for e in slices(trace, op):
            c[e["args"]["reason"]] += float(e["dur"])
        by[op] = c
    # A sleep is a sleep, woken by its timer (an interrupt, not a task),
    # then maybe a wait for the GIL to run Python again.
    sleep = by["sleep_scope"]
    assert sleep.most_common(1)[0][0] == "sleeping", sleep
    assert sleep["sleeping"] + sleep["GIL"] >= 0.9 * sum(sleep.values())
    timer = [e for e in slices(trace, "sleep_scope")
             if e["args"]["reason"] == "sleeping"]
    assert sum(e["args"].get("waker") == "[interrupt]" for e in timer) >= \
        0.8 * len(timer)
    # The lock's waiter is woken by the holder's thread, in hold_lock.
    woken = [e for e in slices(trace, "wait_lock")
             if e["args"]["reason"] == "sleeping"]
    named = [e["args"].get("waker op") for e in woken
             if e["args"].get("waker op")]
    assert named and collections.Counter(named).most_common(1)[0][0] == \
        "hold_lock", collections.Counter(named)
    assert "hold_lock" in stdout and "Who woke whom" in stdout
    # O_DIRECT reads wait on the device.
    assert by["read_file"]["block I/O"] > 0, by["read_file"]
    assert trace["otherData"]["off_cpu_ns_block_io"] > 0
    # The pinned thread shares its CPU with the hog: preempted.
    assert by["pinned_spin"]["preempted"] > 0, by["pinned_spin"]
    # Every interval lies inside its op: the trace nests.
    _, violations = rebuild_nesting(trace)
    assert violations == []


def test_off_cpu_flame_graph(traced):
    """--off-cpu-folded: each stack weighted by its innermost op's off-CPU
    time, summing to op_stats' self off-CPU time per op."""
    trace, _, text, _, _ = traced
    weight = collections.Counter()
    for line in text.splitlines():
        if ";" in line and line.rsplit(" ", 1)[-1].isdigit():
            stack, w = line.rsplit(" ", 1)
            weight[stack.split(";")[-1]] += int(w)
    st = stats(trace)
    for op in ("sleep_scope", "wait_lock", "read_file"):
        assert weight[op] == st[op]["self_off_cpu_ns"], (op, weight[op])


def test_fleet_profiles_and_metrics_have_off_cpu(tmp_path):
    """The daemon with --off-cpu: pprof has an off_cpu sample type that
    go tool pprof reads, the metrics the time by reason (promtool)."""
    from test_fleet import daemon_profiles, metric, pprof_files, promtool_check
    with Job([PYTHON, WORKLOAD, "--seconds", "60"]) as job:
        files, text = daemon_profiles(job.pid, tmp_path, "--off-cpu",
                                      interval=2)
    status, out = pprof_files(files, "-sample_index", "off_cpu", "-top")
    assert status == 0, out
    assert "sleep_scope" in out, out
    assert metric(text, "rfbpf_job_off_cpu_seconds_total",
                  reason="sleeping") > 0
    promtool_check(text)


# A job that switches often: small ops and sleeps.
SLEEPER = ("import time, torch\na = torch.ones(4)\nprint('ready', flush=True)"
           "\nwhile True:\n    a.add(1)\n    time.sleep(0.002)\n")


def scheduler_programs():
    """How many programs on sched_switch the kernel has of rfbpf's."""
    return bpf_programs("off_cpu_switch")


def test_one_set_of_scheduler_programs_for_every_job(tmp_path):
    """A daemon with --off-cpu on three jobs runs one program on
    sched_switch, not one per job; each job's off-CPU time still reaches
    its own metrics; a job that ends takes its descriptors with it, and
    the last one the programs."""
    from test_fleet import Daemon, metric
    prom = tmp_path / "rfbpf.prom"
    assert scheduler_programs() == 0, "another rfbpf --off-cpu is running"
    with Job([PYTHON, "-c", SLEEPER]) as a, Job([PYTHON, "-c", SLEEPER]) as b, \
            Job([PYTHON, "-c", SLEEPER]) as c:
        jobs = (a, b, c)
        d = Daemon([arg for j in jobs for arg in ("-p", str(j.pid))] +
                   ["--off-cpu", "--interval", "2", "--prom-file",
                    str(prom)])
        try:
            def off_cpu_of_all():
                text = prom.read_text() if prom.exists() else ""
                return all((metric(text, "rfbpf_job_off_cpu_seconds_total",
                                   pid=j.pid, reason="sleeping") or 0) > 0
                           for j in jobs)
            assert wait_until(off_cpu_of_all), d.log()
            assert scheduler_programs() == 1
            fds = len(os.listdir(f"/proc/{d.pid}/fd"))
            c.kill()
            assert wait_until(lambda: len(os.listdir(
                f"/proc/{d.pid}/fd")) < fds), d.log()
            assert scheduler_programs() == 1
            a.kill()
            b.kill()
            assert wait_until(lambda: scheduler_programs() == 0), d.log()
        finally:
            d.finish()


def test_off_cpu_in_a_pid_namespace_is_refused(tmp_path):
    """The scheduler programs see the kernel's ids: rfbpf in a PID
    namespace of its own says so in one line and runs nothing."""
    marker = tmp_path / "ran"
    r = run(["unshare", "--pid", "--fork", "--mount-proc", RFBPF, "-q",
             "--off-cpu", "-o", str(tmp_path / "t.json"), "--", PYTHON,
             "-c", f"open({str(marker)!r}, 'w')"])
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [
        "rfbpf: --off-cpu: rfbpf runs in another PID namespace than the "
        "kernel's (run it in the host's)"], r.stderr
    assert not marker.exists()


def test_top_wakers_needs_off_cpu():
    r = run([RFBPF, "-p", "1", "--top-wakers", "3"])
    assert r.returncode == 2
    assert "--top-wakers needs --off-cpu" in r.stderr
