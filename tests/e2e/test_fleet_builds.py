"""One fleet daemon, three PyTorch builds at once: torch 1.13 on the host
(/usr/bin/python3), torch 2.6 in a Debian trixie root and torch 2.14 in a
Debian sid root (chroot), each training mlp_threads.py. 1.13 and 2.6
export three before() overloads, 2.14 one (FunctionDescriptor), and their
RecordFunction layouts differ (fwd_thread_id_ moved in 2.4), so the
daemon must resolve symbols and layouts per library, not once.

Every job's ops must appear under its own pid in /metrics (promtool) and
in the pprof files (go tool pprof, by each sample's torch_version label),
each job labelled with its own build; every job lives on, is switched
off at the end, and prints what it prints untraced."""
import re
import subprocess
import threading
import time

import pytest

from harness import PYTHON, WORKLOAD, run, torch_root_with
from test_fleet import (Daemon, free_port, http_get, metric,
                        ops_seen_passively, pprof_files, promtool_check)

STEPS = 10
THREE = "before(const char*), before(std::string), before(FunctionSchema)"
# Ops of every step, user scopes (record_function: a string name) and
# schema ops alike, so each overload's decoding is seen.
OPS = ("aten::addmm", "AddmmBackward0", "aten::linear", "train_step",
       "forward", "backward")


@pytest.fixture(scope="module")
def builds():
    """name -> (the command that runs mlp_threads.py, torch version, the
    RecordFunction entry points its library exports)."""
    sid = torch_root_with("sid", WORKLOAD)
    trixie = torch_root_with("trixie", WORKLOAD)
    # Versions as the libraries' names have them: Debian's 1.13.1 names
    # its libtorch_cpu.so.1.13.0.
    return {
        "host": ([PYTHON, WORKLOAD], "1.13.0", THREE),
        "trixie": (["chroot", trixie, "python3", "/tmp/mlp_threads.py"],
                   "2.6.0", THREE),
        "sid": (["chroot", sid, "python3", "/tmp/mlp_threads.py"],
                "2.14.1", "before(FunctionDescriptor)"),
    }


def losses(stdout):
    # Without /proc in the chroot, UCX prints a warning to stdout.
    return [l for l in stdout.splitlines() if l.startswith(("main ",
                                                            "worker "))]


class Trainer(subprocess.Popen):
    """mlp_threads.py --rounds-until-line: trains round after round (each
    printing the losses of an untraced run of STEPS steps) until stop()."""

    def __init__(self, cmd):
        super().__init__(cmd + ["--wait", "--rounds-until-line", "--steps",
                                str(STEPS)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
        for line in self.stdout:
            if line.strip() == "ready":
                break
        else:
            raise AssertionError("the job ended before 'ready'")
        # Its losses are read as they come: unread, a round's lines
        # filled the pipe within a minute or so and the job stopped,
        # blocked on a write, before every window the test waits for.
        self.out = []
        self.reader = threading.Thread(
            target=lambda: self.out.extend(self.stdout), daemon=True)
        self.reader.start()

    def say(self, line):
        self.stdin.write(line + "\n")
        self.stdin.flush()

    def stop(self):
        self.say("stop")
        self.wait(timeout=300)
        self.reader.join(30)
        return self.returncode, "".join(self.out)


def every_job_seen(text, jobs):
    return all(metric(text, "rfbpf_op_calls_total", pid=j.pid, op=op)
               for j in jobs.values() for op in OPS)


def pprof_by_build(files, versions):
    """version -> go tool pprof -top of the samples labelled with it."""
    out = {}
    for v in versions:
        status, text = pprof_files(files, "-tagfocus",
                                   f"torch_version={re.escape(v)}",
                                   "-nodefraction", "0", "-top")
        assert status == 0 or "no samples" in text.lower(), text
        out[v] = text
    return out


@pytest.mark.parametrize("probes", ["callback", "entry"])
def test_one_daemon_three_builds(builds, tmp_path, probes):
    untraced = {}
    for name, (cmd, _, _) in builds.items():
        r = run(cmd + ["--steps", str(STEPS)])
        assert r.returncode == 0, r.stderr
        untraced[name] = losses(r.stdout)
        assert len(untraced[name]) == 2, r.stdout
    jobs, d = {}, None
    try:
        for name, (cmd, _, _) in builds.items():
            jobs[name] = Trainer(cmd)
        port, pdir = free_port(), tmp_path / "pprof"
        pdir.mkdir()
        args = [a for j in jobs.values() for a in ("-p", str(j.pid))]
        # --sampled: in bursts, one CI run (three jobs on 2 CPUs) saw a
        # job without one of OPS within 240 s; passed here twice. Until
        # that is understood, this test keeps the mode it was written for.
        # --ringbuf-mb 16: at a 50% budget the windows trace every op, and
        # the default 4 MiB ring holds about 40 ms of them; one CI run
        # (three jobs and the daemon on 2 CPUs) saw the daemon away longer
        # and counted 1486 drops. Drops are reported (checked below as 0
        # so the numbers compared are whole), so the ring is sized for the
        # load this test makes, not for production's 1%.
        d = Daemon(args + ["--sampled", "--probes", probes, "--interval",
                           "1", "--budget", "50", "--pprof-dir", str(pdir),
                           "--ringbuf-mb", "16",
                           "--listen", f"127.0.0.1:{port}"])
        for j in jobs.values():
            d.wait_for(rf"pid {j.pid} .*traced", timeout=120)
            j.say("go")
        # However long it takes on this host: the jobs run until told.
        versions = [v for _, v, _ in builds.values()]
        deadline, text, by_build = time.monotonic() + 240, "", {}
        while time.monotonic() < deadline:
            time.sleep(2)
            text = http_get(f"http://127.0.0.1:{port}/metrics")
            if not every_job_seen(text, jobs):
                continue
            files = sorted(map(str, pdir.glob("profile-*.pb.gz")))
            if not files:
                continue
            by_build = pprof_by_build(files, versions)
            if all("aten::addmm" in t for t in by_build.values()):
                break
        assert every_job_seen(text, jobs), (text, d.log())
        for name, j in jobs.items():
            _, version, build = builds[name]
            assert metric(text, "rfbpf_job_torch_info", pid=j.pid,
                          version=version,
                          build=f"{build}; C++11 string ABI") == 1, text
            for why in ("name_unreadable", "name_truncated"):
                assert metric(text, "rfbpf_job_ops_unpaired_total",
                              pid=j.pid, reason=why) == 0, (name, why)
            assert metric(text, "rfbpf_job_events_dropped_total",
                          pid=j.pid) == 0, name
            # The daemon's pprof: this build's ops, under its label.
            assert "aten::addmm" in by_build.get(version, ""), (
                version, by_build)
        promtool_check(text)
        for j in jobs.values():
            assert j.poll() is None     # lived on while traced
        assert d.finish() == 0, d.log()
        for j in jobs.values():
            assert f"pid {j.pid} (python3): switched off" in d.log()
            assert j.poll() is None     # and after
            assert ops_seen_passively(j.pid) == 0
        for name, j in jobs.items():
            rc, out = j.stop()
            assert rc == 0
            got = losses(out)
            # Round after round, each the untraced run's losses.
            assert got and got == untraced[name] * (len(got) // 2), name
    finally:
        if d and d.poll() is None:
            d.kill()
        for j in jobs.values():
            if j.poll() is None:
                j.kill()
                j.wait()
