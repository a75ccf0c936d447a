# SPDX-License-Identifier: BSD-2-Clause
"""Fleet mode's --bursts (issue 26): a control thread rfbpf starts in the
job switches a full trace on for short random bursts, with nothing
registered in between. What the job must never feel: the thread named as
rfbpf's while the daemon runs, gone with the daemon (SIGTERM, or kill -9
and its lease), no callback left behind, forks (DataLoader workers) while
the thread switches, and the job's results unchanged."""
import os
import random
import signal
import time

from harness import Job, PYTHON, ROOT, run
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


def test_bursts_trace_through_the_control_thread_and_leave_nothing(
        tmp_path, jobs):
    job = BusyJob("--seconds", "120")
    jobs.append(job)
    prom = tmp_path / "m.prom"
    d = Daemon(["-p", str(job.pid), "--bursts", "--interval", "2",
                "--prom-file", str(prom)])
    try:
        d.wait_for(rf"pid {job.pid} .*traced")
        assert control_threads(job.pid) == 1
        assert wait_until(lambda: prom.exists() and (metric(
            prom.read_text(), "rfbpf_job_windows_total",
            pid=job.pid) or 0) >= 10, 20), d.log()
        time.sleep(2.5)                 # one interval with bursts in it
        text = prom.read_text()
    finally:
        rc = d.finish()
    assert rc == 0, d.log()
    calls = metric(text, "rfbpf_op_calls_total", pid=job.pid, op="aten::add")
    self_s = metric(text, "rfbpf_op_self_seconds_total", pid=job.pid,
                    op="aten::add")
    assert calls and calls > 0 and self_s and self_s > 0, text
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
        assert job.next_line().strip() == ref.stdout.split()[-1]
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
