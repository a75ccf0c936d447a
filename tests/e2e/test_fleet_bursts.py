# SPDX-License-Identifier: BSD-2-Clause
"""Fleet mode's --bursts (issue 26): a control thread rfbpf starts in the
job switches a full trace on for short random bursts, with nothing
registered in between. What the job must never feel: the thread named as
rfbpf's while the daemon runs, gone with the daemon (SIGTERM, or kill -9
and its lease), no callback left behind, forks (DataLoader workers) while
the thread switches, and the job's results unchanged."""
import os
import random
import re
import signal
import struct
import time

from harness import Job, PYTHON, RFBPF, ROOT, run, text_changed
from test_fleet import BUSY, BusyJob, Daemon, jobs, metric, \
    ops_seen_passively  # noqa: F401 (jobs: a fixture)

DATALOADER = os.path.join(ROOT, "tests", "workloads", "dataloader_train.py")
LEASE_S = 2.0                   # CONTROL_LEASE_NS


def control_threads(pid):
    """The job's threads named as rfbpf's control thread."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                n += f.read().strip() == "rfbpf-control"
        except OSError:
            pass
    return n


def wait_until(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def bursts_daemon(prom, *pids, interval=1, env=None):
    """A daemon in bursts on pids, writing its metrics to prom."""
    args = [a for pid in pids for a in ("-p", str(pid))]
    return Daemon([*args, "--bursts", "--interval", str(interval),
                   "--prom-file", str(prom)], env=env)


def windows_written(prom, pid):
    """rfbpf_job_windows_total of pid in the metrics file (0 before)."""
    return prom.exists() and metric(prom.read_text(),
                                    "rfbpf_job_windows_total",
                                    pid=pid) or 0


# busy_ops.py --counter writes its count every 64 steps.
COUNTER_STEP = 64
# How low the calls of the first test may read beyond their errors
# (docs/fleet.md, "What r leaves").
CALLBACK_PATH_BIAS = 0.05


def add_metric(text, name, pid):
    return metric(text, name, pid=pid, op="aten::add") or 0


def add_se(text, text0, pid):
    """The standard error of aten::add's calls between two exports."""
    return max(0, add_metric(text, "rfbpf_op_calls_stderr", pid) ** 2 -
               add_metric(text0, "rfbpf_op_calls_stderr", pid) ** 2) ** 0.5


def steps_at_next_export(prom, counter):
    """Waits for the daemon's next write of prom, and returns the job's
    steps then (its counter file) and the metrics written."""
    mtime = prom.stat().st_mtime_ns
    assert wait_until(lambda: prom.stat().st_mtime_ns != mtime, 5)
    with open(counter, "rb") as f:
        steps = struct.unpack("=Q", f.read(8))[0]
    return steps, prom.read_text()


def test_bursts_trace_through_the_control_thread_and_leave_nothing(
        tmp_path, jobs):
    """A job of one aten::add a step, which counts its steps, under
    bursts: the thread named as rfbpf's while the daemon runs; the price
    of a traced burst measured in the job; the calls of aten::add over 8
    intervals or more estimated within 4 of the daemon's own standard
    errors, and those small enough to see a weight 25% off (K/K_t left
    out, or the ops a traced burst's time holds taken for the job's: 12
    times fewer on this loop); then the thread gone with the daemon, and
    its callback with it.

    The error shrinks with the adds the traced bursts catch: on a host
    where a step took 5 ms (one CI run; 0.12 ms here) 8 intervals left it
    at 6.4%, so the test reads on, up to 24 intervals, until it is under
    the 6.25% it needs."""
    counter = tmp_path / "steps"
    job = BusyJob("--seconds", "60", "--size", "262144", "--counter",
                  str(counter))
    jobs.append(job)
    prom = tmp_path / "m.prom"
    d = Daemon(["-p", str(job.pid), "--bursts", "--interval", "1",
                "--budget", "5", "--prom-file", str(prom)])
    try:
        d.wait_for(rf"pid {job.pid} .*traced")
        assert control_threads(job.pid) == 1
        assert wait_until(prom.exists, 5), d.log()
        for _ in range(5):      # until the price is measured
            steps_at_next_export(prom, counter)
        first, text0 = steps_at_next_export(prom, counter)
        for n in range(1, 25):
            last, text = steps_at_next_export(prom, counter)
            if n >= 8 and add_se(text, text0, job.pid) < (last - first) / 16:
                break
    finally:
        rc = d.finish()
    assert rc == 0, d.log()

    calls = add_metric(text, "rfbpf_op_calls_total", job.pid) - \
        add_metric(text0, "rfbpf_op_calls_total", job.pid)
    se = add_se(text, text0, job.pid)
    truth = last - first
    counting = metric(text, "rfbpf_job_bursts_counting_total", pid=job.pid)
    cost = metric(text, "rfbpf_job_burst_cost_ratio", pid=job.pid)
    print(f"aten::add: {truth} calls, estimated {calls:.0f} ± {se:.0f} "
          f"over {n} intervals; {counting:.0f} counting bursts; a traced "
          f"burst priced {100 * cost:.0f}% of the job's CPU")
    assert 0 < se < truth / 16, \
        f"4 errors must be under 25% (read {n} intervals)"
    # The counter moves in steps of 64, so the truth is known to ±64.
    # Below it, also the bias docs/fleet.md states: the counting bursts
    # pay PyTorch's own callback path, so the calls read a few percent low
    # on these ops (1 to 3% in runs here, with standard errors of 0.6%).
    assert -(4 * se + CALLBACK_PATH_BIAS * truth + COUNTER_STEP) <= \
        calls - truth <= 4 * se + COUNTER_STEP
    assert add_metric(text, "rfbpf_op_self_seconds_total", job.pid) > 0, \
        text
    assert counting >= 4 and 0 < cost < 1, text
    # gone with the daemon, and its callback with it
    assert control_threads(job.pid) == 0
    assert ops_seen_passively(job.pid) == 0
    assert job.poll() is None


def test_kill_9_of_the_daemon_ends_the_thread_within_its_lease(
        tmp_path, jobs):
    steps = 150000
    ref = run([PYTHON, BUSY, "--steps", str(steps)])
    assert ref.returncode == 0, ref.stderr
    for attempt in range(3):
        job = BusyJob("--wait", "--steps", str(steps), "--linger", "60")
        jobs.append(job)
        d = Daemon(["-p", str(job.pid), "--bursts", "--interval", "1",
                    "--prom-file", str(tmp_path / "m.prom")])
        d.wait_for(rf"pid {job.pid} .*traced")
        job.go()
        time.sleep(random.uniform(0.2, 3.0))
        d.kill()
        killed = time.monotonic()
        d.wait()
        assert wait_until(lambda: control_threads(job.pid) == 0,
                          LEASE_S + 1.0), f"attempt {attempt}"
        print(f"attempt {attempt}: thread gone "
              f"{time.monotonic() - killed:.2f} s after kill -9")
        assert text_changed(job.pid) == []   # no breakpoint left
        assert job.next_line().strip() == ref.stdout.split()[-1]
        assert ops_seen_passively(job.pid) == 0
        job.end()


def test_an_attach_longer_than_a_lease_leaves_the_other_jobs_running(
        tmp_path, jobs):
    """The daemon's loop held up by an attach for longer than a lease
    (each attach made 3 s long by a test-only delay): the other job's
    control thread goes on, its lease renewed meanwhile by the daemon's
    own thread. Before, its lease ran out during the second attach and
    the thread ended for good."""
    a, b = BusyJob("--seconds", "120"), BusyJob("--seconds", "120")
    jobs += [a, b]
    prom = tmp_path / "m.prom"
    d = bursts_daemon(prom, a.pid, b.pid,
                      env={**os.environ,
                           "RFBPF_TEST_ATTACH_DELAY_MS": "3000"})
    try:
        d.wait_for(rf"pid {a.pid} .*traced in bursts")
        d.wait_for(rf"pid {b.pid} .*traced in bursts", timeout=60)
        time.sleep(LEASE_S + 1.5)       # a scan would have seen a lapse
        assert control_threads(a.pid) == 1, d.log()
        assert control_threads(b.pid) == 1, d.log()
        assert wait_until(lambda: prom.exists() and metric(
            prom.read_text(), "rfbpf_control_leases_lapsed_total") == 0,
            10), d.log()
        assert "lease" not in d.log(), d.log()
    finally:
        rc = d.finish()
    assert rc == 0, d.log()
    for job in (a, b):
        assert control_threads(job.pid) == 0
        assert job.poll() is None


def test_a_daemon_held_up_past_the_lease_traces_the_job_again(
        tmp_path, jobs):
    """SIGSTOP of the daemon for longer than the lease: the control thread
    removes the callback and ends (the lease is what guards a daemon that
    cannot act). Once the daemon runs again it says so, counts it, lets
    the job go and traces it anew: a new control thread, and bursts again.
    The job's results are exact."""
    steps = 150000
    ref = run([PYTHON, BUSY, "--steps", str(steps)])
    assert ref.returncode == 0, ref.stderr
    job = BusyJob("--wait", "--steps", str(steps), "--linger", "60")
    jobs.append(job)
    prom = tmp_path / "m.prom"
    d = bursts_daemon(prom, job.pid)
    try:
        d.wait_for(rf"pid {job.pid} .*traced in bursts")
        job.go()
        time.sleep(1.0)
        d.send_signal(signal.SIGSTOP)
        assert wait_until(lambda: control_threads(job.pid) == 0,
                          LEASE_S + 2.0)
        d.send_signal(signal.SIGCONT)
        d.wait_for(rf"pid {job.pid} .*lease having run out")
        resumed = time.monotonic()
        assert wait_until(lambda: control_threads(job.pid) == 1, 15), \
            d.log()
        assert len([l for l in d.log().splitlines() if re.search(
            rf"pid {job.pid} .*traced in bursts", l)]) == 2, d.log()
        assert wait_until(lambda: windows_written(prom, job.pid) >= 5, 15), \
            d.log()
        assert metric(prom.read_text(),
                      "rfbpf_control_leases_lapsed_total") == 1, d.log()
        print(f"traced again, {windows_written(prom, job.pid)} windows "
              f"{time.monotonic() - resumed:.1f} s after SIGCONT")
    finally:
        d.send_signal(signal.SIGCONT)
        rc = d.finish()
    assert rc == 0, d.log()
    assert job.next_line().strip() == ref.stdout.split()[-1]
    assert control_threads(job.pid) == 0
    assert ops_seen_passively(job.pid) == 0
    job.end()


def test_dataloader_forks_while_bursts_switch_and_gives_the_same_losses(
        tmp_path):
    args = [DATALOADER, "--epochs", "3", "--workers", "2"]
    untraced = run([PYTHON, *args])
    assert untraced.returncode == 0, untraced.stderr
    with Job([PYTHON, *args, "--wait"]) as p:
        d = Daemon(["-p", str(p.pid), "--bursts", "--interval", "1",
                    "--budget", "50", "--prom-file",
                    str(tmp_path / "m.prom")])
        try:
            d.wait_for(rf"pid {p.pid} .*traced")
            assert control_threads(p.pid) == 1
            out, _ = p.communicate("go\n", timeout=300)
        finally:
            rc = d.finish()
        assert p.returncode == 0
        assert rc == 0, d.log()
    assert out == untraced.stdout


MLP = os.path.join(ROOT, "tests", "workloads", "mlp_threads.py")


def self_by_op_folded(path):
    """Self seconds per op from --folded (each line: its stack, then the
    leaf op's self time in ns)."""
    out = {}
    with open(path) as f:
        for line in f:
            stack, _, ns = line.rstrip("\n").rpartition(" ")
            op = stack.split(";")[-1]
            out[op] = out.get(op, 0) + int(ns) * 1e-9
    return out


def self_by_op_metrics(text, pid, name="rfbpf_op_self_seconds_total"):
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") and f'pid="{pid}"' in line:
            op = line.split('op="', 1)[1].split('"}', 1)[0]
            out[op] = float(line.rsplit(" ", 1)[1])
    return out


def shares(d):
    total = sum(d.values())
    return {k: v / total for k, v in d.items()} if total else {}


def test_one_interval_of_bursts_gives_the_self_time_shares_of_a_full_trace(
        tmp_path):
    """Issue 26's bar: for the ops holding at least 5% of a job's self
    time, one 60 s interval of bursts at the default budget gives shares
    within 25% (relative) of a full trace of the same period. Two
    identical jobs run at once: the daemon on one, and for the daemon's
    second interval (its first prices bursts before the job's rates are
    known) a full one-shot trace of the other.

    Where the daemon's own standard error of an op's seconds is over a
    quarter of 25%, the op may be off by up to 4 of them instead: on this
    2-CPU host an op of 5% has one of about 14% at the default budget
    (about 150 bursts of 8 ms a minute, self time counted by wall clock
    while 4 job threads share 2 CPUs): 25% is 1.8 of them, which runs
    miss by chance (forward read 0.68 to 1.13 times its share in 5 runs).
    Four, not three: the truth is another job's, and a user scope's self
    time is mostly its threads' wait for the GIL, which differs between
    two jobs as much as the bursts' error (backward read 1.32 times its
    share, 4.0 of its errors, in one CI run, and 1.00 to 1.09 in the next
    three runs here). A bias under 4 errors (about 50% for an op of
    5%, 32% for one of 11%) passes unseen here; the unit tests of
    window_self.c hold the estimator's parts exactly."""
    argv = [PYTHON, MLP, "--steps", "50", "--rounds-until-line"]
    prom = tmp_path / "m.prom"
    with Job(argv, ready=None) as a, Job(argv, ready=None) as b:
        assert a.next_line() and b.next_line()     # torch is loaded
        d = bursts_daemon(prom, b.pid, interval=60)
        try:
            d.wait_for(rf"pid {b.pid} .*traced")
            assert wait_until(prom.exists, 10), d.log()
            mtime = prom.stat().st_mtime        # written at the start
            assert wait_until(lambda: prom.stat().st_mtime > mtime, 75)
            first = self_by_op_metrics(prom.read_text(), b.pid)
            first_se = self_by_op_metrics(prom.read_text(), b.pid,
                                          "rfbpf_op_self_seconds_stderr")
            mtime = prom.stat().st_mtime
            folded = tmp_path / "full.folded"
            full = run([RFBPF, "-q", "--no-table", "-p", str(a.pid), "-d",
                        "60", "--folded", str(folded)])
            assert full.returncode == 0, full.stderr
            assert wait_until(lambda: prom.stat().st_mtime > mtime, 30)
            second = self_by_op_metrics(prom.read_text(), b.pid)
            second_se = self_by_op_metrics(prom.read_text(), b.pid,
                                           "rfbpf_op_self_seconds_stderr")
        finally:
            assert d.finish() == 0, d.log()
        a.send("stop")
        b.send("stop")
    secs = {op: second[op] - first.get(op, 0) for op in second}
    est = shares(secs)
    truth = shares(self_by_op_folded(folded))
    big = {op: s for op, s in truth.items() if s >= 0.05}
    assert len(big) >= 3, truth
    allowed = {}
    for op, s in sorted(big.items(), key=lambda kv: -kv[1]):
        # The second interval's own standard error (the metric sums the
        # intervals' variances), relative to its seconds.
        var = second_se.get(op, 0) ** 2 - first_se.get(op, 0) ** 2
        rel = var ** 0.5 / secs[op] if secs.get(op) and var > 0 else 0
        allowed[op] = max(0.25, 4 * rel)
        print(f"{op}: full trace {100 * s:.1f}%, bursts "
              f"{100 * est.get(op, 0):.1f}% (its seconds ±{100 * rel:.0f}%,"
              f" allowed ±{100 * allowed[op]:.0f}%)")
    for op, s in big.items():
        assert abs(est.get(op, 0) / s - 1) <= allowed[op], \
            (op, s, est.get(op), allowed[op])


def test_a_second_tracer_is_refused_and_the_bursts_go_on(tmp_path, jobs):
    job = BusyJob("--seconds", "120")
    jobs.append(job)
    prom = tmp_path / "m.prom"
    d = bursts_daemon(prom, job.pid)
    try:
        d.wait_for(rf"pid {job.pid} .*traced")
        r = run([RFBPF, "-q", "-p", str(job.pid), "-d", "1"])
        assert r.returncode != 0
        assert r.stderr.count("\n") == 1 and "already tracing" in r.stderr
        assert control_threads(job.pid) == 1
        assert wait_until(lambda: windows_written(prom, job.pid) > 0, 10)
        before = windows_written(prom, job.pid)
        assert wait_until(lambda: windows_written(prom, job.pid) > before,
                          10)
    finally:
        assert d.finish() == 0, d.log()
    assert control_threads(job.pid) == 0


def test_a_job_under_seccomp_gets_no_thread_and_runs_unchanged(tmp_path):
    from test_safety import SECCOMP_EXEC
    src, exe = tmp_path / "seccomp_exec.c", tmp_path / "seccomp_exec"
    src.write_text(SECCOMP_EXEC)
    assert run(["gcc", "-O1", "-o", str(exe), str(src)]).returncode == 0
    code = ("import sys, torch\nx = torch.ones(2)\nprint('ready', "
            "flush=True)\nsys.stdin.readline()\nprint(float((x + 1).sum()),"
            " flush=True)\n")
    with Job([str(exe), PYTHON, "-c", code]) as p:
        d = Daemon(["-p", str(p.pid), "--bursts", "--interval", "1",
                    "--prom-file", str(tmp_path / "m.prom")])
        try:
            d.wait_for(rf"pid {p.pid}.*seccomp")
            assert control_threads(p.pid) == 0
        finally:
            d.finish()
        out, _ = p.communicate("go\n", timeout=60)
        assert p.returncode == 0 and out == "4.0\n"
