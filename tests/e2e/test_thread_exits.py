"""Threads that exit with an op open, and the one thread-exit program of
an rfbpf process (bpf/thread_exits.bpf.c, user/attach/exit_hooks.c):
the exit reaches the session that traces the process, closes the op and
names the thread, and a daemon's jobs share one program on
sched_process_exit, gone with the last of them."""
import os

from harness import (Job, PYTHON, ROOT, bpf_programs, capture, ops_of,
                     wait_until)

WORKLOAD = os.path.join(ROOT, "tests", "workloads", "exiting_threads.py")


def exit_programs():
    """How many of rfbpf's thread-exit programs the kernel has."""
    return bpf_programs("thread_exit")


def test_a_thread_that_exits_mid_op_is_closed_there_and_named(tmp_path):
    """Three threads each leave exiting_scope open as they exit: each is
    counted open at its thread's exit, ends no later than the exit, and
    the thread keeps the comm it had (gone from /proc by the time the
    records are read, it is named by the comm its exit left)."""
    trace, r = capture(tmp_path, [PYTHON, WORKLOAD, "--threads", "3"])
    assert "done 3" in r.stdout
    other = trace["otherData"]
    assert other["thread_exits"] >= 3, other
    assert other["open_at_thread_exit"] == 3, other
    scopes = [e for e in ops_of(trace) if e["name"] == "exiting_scope"]
    assert len(scopes) == 3, scopes
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for s in scopes:
        assert names.get(s["tid"]) == "rf-exiter", (s, names)
        inner = [e for e in ops_of(trace) if e["tid"] == s["tid"] and
                 e["name"] == "aten::add"]
        assert inner and all(s["ts"] <= i["ts"] and
                             i["ts"] + i["dur"] <= s["ts"] + s["dur"]
                             for i in inner), (s, inner)
    assert len({s["tid"] for s in scopes}) == 3


def test_a_forked_child_s_thread_exits_reach_the_trace(tmp_path):
    """--children: the child's threads exit mid-op as well; their exits
    are routed to the session that adopted the child (by its fork
    program, before the child runs, or by the loader)."""
    trace, r = capture(tmp_path, [PYTHON, WORKLOAD, "--threads", "3",
                                  "--fork"], "--children")
    assert "done 3" in r.stdout and "child 0" in r.stdout, r.stdout
    other = trace["otherData"]
    assert other["open_at_thread_exit"] == 3, other
    scopes = [e for e in ops_of(trace) if e["name"] == "exiting_scope"]
    assert len(scopes) == 3 and len({s["pid"] for s in scopes}) == 1
    names = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(names.get((s["pid"], s["tid"])) == "rf-exiter"
               for s in scopes), (scopes, names)


def test_one_thread_exit_program_for_every_job(tmp_path):
    """A daemon on three jobs whose threads keep exiting mid-op runs one
    program on sched_process_exit, not one per job; each job's exits
    reach its own metrics; the last job to end takes the program."""
    from test_fleet import Daemon, metric
    prom = tmp_path / "rfbpf.prom"
    # Every rfbpf loads the program: one a test before left may still
    # be on its way out.
    assert wait_until(lambda: exit_programs() == 0, 30), \
        "another rfbpf is running"
    argv = [PYTHON, WORKLOAD, "--forever"]
    with Job(argv) as a, Job(argv) as b, Job(argv) as c:
        jobs = (a, b, c)
        d = Daemon([arg for j in jobs for arg in ("-p", str(j.pid))] +
                   ["--interval", "2", "--budget", "50", "--prom-file",
                    str(prom)])
        try:
            def exits_of_all():
                text = prom.read_text() if prom.exists() else ""
                return all((metric(text, "rfbpf_job_ops_unpaired_total",
                                   pid=j.pid, reason="open_at_thread_exit")
                            or 0) > 0 for j in jobs)
            assert wait_until(exits_of_all, 90), d.log()
            assert exit_programs() == 1
            c.kill()
            a.kill()
            b.kill()
            assert wait_until(lambda: exit_programs() == 0), d.log()
        finally:
            d.finish()
