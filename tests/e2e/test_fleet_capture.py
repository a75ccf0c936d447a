"""GET /debug/rfbpf/trace on the fleet daemon: a full trace of one job,
on request, from two real training jobs the daemon traces in bursts.
Answers are gzipped Chrome JSON of that job only, with its every thread;
bad parameters get a 400 and a job the daemon does not trace a 404, each
with one line; requests that come together share one capture; the
daemon's memory is flat over 20 captures; the jobs' results are those of
an untraced run."""
import gzip
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request

from harness import Job, PYTHON, ROOT, rss_kb, run
from test_fleet import Daemon, free_port, metric

STEPS = os.path.join(ROOT, "tests", "workloads", "step_train.py")
CAPTURE = os.path.join(ROOT, "tools", "rfbpf-capture")
LOSS = re.compile(r"^step (\d+) loss (\S+)$")


def get(url, timeout=120):
    """(status, body bytes)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def x_events(body):
    t = json.loads(gzip.decompress(body))
    return t, [e for e in t["traceEvents"] if e.get("ph") == "X"]


class Fleet:
    """Two step_train.py jobs (two threads each) and a daemon on them."""

    def __init__(self, extra=()):
        self.jobs = [Job([PYTHON, STEPS, "--threads", "2",
                          "--step-sleep-ms", "5"]) for _ in range(2)]
        self.port = free_port()
        args = [a for j in self.jobs for a in ("-p", str(j.pid))]
        self.d = Daemon(args + ["--interval", "2", "--listen",
                                f"127.0.0.1:{self.port}", *extra])
        for j in self.jobs:
            self.d.wait_for(rf"pid {j.pid} .*traced", timeout=120)

    def url(self, query):
        return f"http://127.0.0.1:{self.port}/debug/rfbpf/trace?{query}"

    def close(self):
        rc = self.d.finish()
        for j in self.jobs:
            j.kill()
        return rc


def test_a_job_traced_on_request(tmp_path):
    f = Fleet()
    try:
        a, b = f.jobs
        status, body = get(f.url(f"pid={a.pid}&seconds=2"))
        assert status == 200, body
        t, ev = x_events(body)
        # That job only, every one of its threads, two seconds of it.
        assert ev and {e["pid"] for e in ev} == {a.pid}
        assert len({e["tid"] for e in ev}) == 2
        assert {"aten::addmm", "Optimizer.step#SGD.step"} <= \
            {e["name"] for e in ev}
        span = (max(e["ts"] + e["dur"] for e in ev) -
                min(e["ts"] for e in ev))
        # The burst's 2 s, less the control thread's wake-up on a loaded
        # host.
        assert 1.0e6 < span < 2.5e6, span
        assert t["otherData"]["capture"]["seconds"] == 2
        assert t["otherData"]["capture"]["ops"] == len(ev)
        assert t["otherData"]["drops"] == 0
        # One line for each wrong request.
        for query, code, words in [
                ("pid=1&seconds=2", 404, "pid 1 is not a job this daemon "
                 "traces"),
                (f"pid={a.pid}&seconds=0", 400, "bad ?seconds"),
                (f"pid={a.pid}&seconds=601", 400, "bad ?seconds"),
                (f"pid={a.pid}&seconds=x", 400, "bad ?seconds"),
                (f"pid={a.pid}", 400, "want one of ?seconds"),
                (f"pid={a.pid}&seconds=1&steps=1", 400, "want one of"),
                ("seconds=2", 400, "bad ?pid"),
                ("pid=-3&seconds=2", 400, "bad ?pid"),
                (f"pid={a.pid}&steps=0", 400, "bad ?steps"),
                (f"pid={a.pid}&steps=101", 400, "bad ?steps")]:
            status, body = get(f.url(query))
            assert status == code, (query, status, body)
            assert body.decode().count("\n") == 1 and words in \
                body.decode(), (query, body)
        # tools/rfbpf-capture: every matching job of every daemon, at
        # once, into one directory named as tensorboard_trace_handler
        # names its files.
        out = tmp_path / "ranks"
        r = run([CAPTURE, f"127.0.0.1:{f.port}", "--job", "python",
                 "--seconds", "1", "-o", str(out)], timeout=180)
        assert r.returncode == 0, r.stderr
        files = sorted(os.listdir(out))
        assert len(files) == 2 and r.stdout.count("\n") == 2, files
        for name in files:
            m = re.fullmatch(r"127\.0\.0\.1_(\d+)\.\d+\.pt\.trace\."
                             r"json\.gz", name)
            assert m, name
            _, ev = x_events((out / name).read_bytes())
            assert {e["pid"] for e in ev} == {int(m.group(1))}
        assert {int(n.split("_")[1].split(".")[0]) for n in files} == \
            {a.pid, b.pid}
        r = run([CAPTURE, f"127.0.0.1:{f.port}", "--job", "^nothing$",
                 "--seconds", "1", "-o", str(out)])
        assert r.returncode == 1 and "no job matches" in r.stderr
        # The other job goes on being measured as before.
        status, text = get(f"http://127.0.0.1:{f.port}/metrics")
        assert metric(text.decode(), "rfbpf_op_calls_total", pid=b.pid,
                      op="aten::addmm")
    finally:
        assert f.close() == 0, f.d.log()


def test_requests_together_share_one_capture_and_memory_stays_flat():
    f = Fleet()
    try:
        a = f.jobs[0]
        answers = []
        ts = [threading.Thread(target=lambda: answers.append(
            get(f.url(f"pid={a.pid}&seconds=1")))) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert [s for s, _ in answers] == [200] * 3
        assert answers[0][1] == answers[1][1] == answers[2][1]
        assert f.d.log().count("capturing a full trace") == 1, f.d.log()
        rss = []
        for i in range(20):
            status, body = get(f.url(f"pid={f.jobs[i % 2].pid}&seconds=1"))
            assert status == 200, body
            assert x_events(body)[1]
            rss.append(rss_kb(f.d.pid))
        # Flat: what one capture holds is freed with its answer.
        assert max(rss[5:]) - rss[4] < 8 * 1024, rss
        assert f.d.log().count("capture done: 200") == 21
    finally:
        assert f.close() == 0, f.d.log()


def test_a_capture_of_whole_steps_ends_with_them():
    f = Fleet()
    try:
        a = f.jobs[0]
        t0 = time.monotonic()
        status, body = get(f.url(f"pid={a.pid}&steps=3"))
        assert status == 200, body
        t, ev = x_events(body)
        marks = sorted((e for e in ev if e["name"].startswith(
            "ProfilerStep#")), key=lambda e: e["ts"])
        assert len(marks) == 3 and t["otherData"]["capture"][
            "whole_steps"] == 3
        lo, hi = marks[0]["ts"], marks[-1]["ts"] + marks[-1]["dur"]
        assert all(lo <= e["ts"] < hi for e in ev)
        assert len({e["tid"] for e in ev}) == 2
        # The burst ended with the steps, not at its 120 s cap: a
        # capture asked next waits for it, and comes within seconds.
        status, body = get(f.url(f"pid={a.pid}&seconds=1"), timeout=60)
        assert status == 200, body
        assert time.monotonic() - t0 < 60
    finally:
        assert f.close() == 0, f.d.log()


def test_captures_change_no_result():
    steps = 2000
    r = run([PYTHON, STEPS, "--steps", str(steps), "--step-sleep-ms", "5"])
    assert r.returncode == 0, r.stderr
    untraced = r.stdout
    port = free_port()
    job = Job([PYTHON, STEPS, "--steps", str(steps), "--step-sleep-ms",
               "5"])
    d = Daemon(["-p", str(job.pid), "--interval", "2", "--listen",
                f"127.0.0.1:{port}"])
    try:
        d.wait_for(rf"pid {job.pid} .*traced", timeout=120)
        status, _ = get(f"http://127.0.0.1:{port}/debug/rfbpf/trace?"
                        f"pid={job.pid}&seconds=1")
        assert status == 200
        rc, out = job.finish(300)
        assert rc == 0
    finally:
        assert d.finish() == 0, d.log()
        job.kill()
    traced = "".join(job.lines)
    want = [l for l in untraced.splitlines() if LOSS.match(l)]
    got = [l for l in traced.splitlines() if LOSS.match(l)]
    assert got == want


def test_a_sampled_job_has_no_capture():
    f = Fleet(["--sampled", "--budget", "5"])
    try:
        status, body = get(f.url(f"pid={f.jobs[0].pid}&seconds=1"))
        assert status == 409 and b"no rfbpf control thread" in body
    finally:
        assert f.close() == 0, f.d.log()


def test_the_fleet_flight_recorder_holds_each_jobs_bursts(tmp_path):
    out = tmp_path / "traces"
    out.mkdir()
    f = Fleet(["--flight-recorder", "5,8", "--trace-dir", str(out)])
    try:
        time.sleep(6)
        f.d.send_signal(signal.SIGUSR1)
        for j in f.jobs:
            f.d.wait_for(rf"pid {j.pid} .*flight recorder written to "
                         rf".*rfbpf-{j.pid}\.sigusr1-1\.json\.gz")
    finally:
        assert f.close() == 0, f.d.log()
    for j in f.jobs:
        for tag in ("sigusr1-1", "end"):
            t, ev = x_events((out / f"rfbpf-{j.pid}.{tag}.json.gz")
                             .read_bytes())
            fr = t["otherData"]["flight_recorder"]
            assert "bursts" in fr["holds"] and fr["window_s"] == 5
            assert fr["peak_bytes"] <= 8 << 20
            # Bursts of that job only, on both its threads, within the
            # last five seconds.
            assert ev and {e["pid"] for e in ev} == {j.pid}
            assert len({e["tid"] for e in ev}) == 2
            end = max(e["ts"] + e["dur"] for e in ev)
            assert all(e["ts"] + e["dur"] >= end - 5.2e6 for e in ev)
        assert fr["why"] == "the job ended or the daemon stopped"
    assert sorted(os.listdir(out)) == sorted(
        f"rfbpf-{j.pid}.{tag}.json.gz" for j in f.jobs
        for tag in ("sigusr1-1", "end"))


def test_fleet_recorder_options_get_one_line(tmp_path):
    for args, words in [
            (["--flight-recorder", "5"], "needs --trace-dir DIR"),
            (["--trace-dir", str(tmp_path)], "--trace-dir needs "
             "--flight-recorder"),
            (["--flight-recorder", "5", "--trace-dir", str(tmp_path),
              "--slow-step", "100"], "are for one run"),
            (["--flight-recorder", "5", "--trace-dir",
              str(tmp_path / "none")], "--trace-dir")]:
        r = run([os.path.join(ROOT, "rfbpf"), "--continuous", "--all",
                 "--listen", "127.0.0.1:0", *args], timeout=60)
        assert r.returncode != 0, args
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, r.stderr)
