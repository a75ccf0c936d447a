"""Zero-config attach: rfbpf switches RecordFunction on inside a process
that never calls the profiler, and switches it off on every way out."""
import collections
import json
import os
import signal
import subprocess
import time

import pytest

from harness import (Job, KernelCounts, PYTHON, RFBPF, ROOT, STATE_DIR,
                    load_trace, ops_of, refused, run, start_rfbpf, stop,
                    text_changed)

TINY = os.path.join(ROOT, "tests", "workloads", "tiny_ops.py")
STATE = STATE_DIR + "/{}.state"


class Phased(Job):
    """tiny_ops.py: each phase runs when a line is written to its stdin;
    lines: the phases' result lines."""

    def __init__(self, *args):
        super().__init__([PYTHON, TINY, *args])

    def phase(self):
        self.go()
        line = self.next_line()
        assert line.startswith("phase"), line
        return line

    def finish(self):
        """Its exit status, once it has run its phases."""
        return super().finish(120)[0]


def untraced(*args, phases=1):
    r = run([PYTHON, TINY, *args, "--phases", str(phases)],
            input="go\n" * phases)
    assert r.returncode == 0, r.stderr
    return [l + "\n" for l in r.stdout.splitlines()[1:]]


def passive_count(target, tmp_path, name):
    """Ops a second rfbpf sees without activating (the target's own
    callbacks only) during one phase."""
    out = tmp_path / name
    p, _ = start_rfbpf(["-q", "--no-activate", "-p", str(target.pid),
                        "-o", str(out)])
    target.phase()
    rc, _, err = stop(p)
    assert rc == 0, err
    return len(ops_of(load_trace(out)))


@pytest.fixture
def reference(tmp_path):
    """torch.profiler's event names for one 500-step phase, in another
    process, and the kernel's count of before() hits in that process."""
    path, perf_out = tmp_path / "prof.json", tmp_path / "perf.csv"
    kc = KernelCounts()
    try:
        r = run(kc.perf_args(str(perf_out)) + [
            "--", PYTHON, TINY, "--steps", "500", "--profile-out",
            str(path)], input="go\n")
        kernel = kc.parse(perf_out, kc.events)
    finally:
        kc.close()
    assert r.returncode == 0, r.stderr
    with open(path) as f:
        names = collections.Counter(json.load(f))
    return names, sum(v for k, v in kernel.items() if k != "end()")


def check_against_profiler(ours, reference):
    """Equal to torch.profiler's event list, except where the kernel's
    count of the same work shows the profiler lost events: torch 1.13's
    profiler drops a varying share of ops nested in an op of the same name
    (aten::sum inside aten::sum here)."""
    names, kernel_hits = reference
    assert sum(ours.values()) == kernel_hits
    missing_in_profiler = ours - names
    assert not names - ours, names - ours
    assert sum(missing_in_profiler.values()) == \
        kernel_hits - sum(names.values())
    if missing_in_profiler:
        print("torch.profiler lacks", dict(missing_in_profiler),
              "that the kernel counted and rfbpf has")


def test_full_capture_equals_torch_profiler_and_is_undone(reference,
                                                           tmp_path):
    expected = untraced("--steps", "500", phases=2)
    with Phased("--steps", "500", "--phases", "2") as t:
        out = tmp_path / "t.json"
        p, _ = start_rfbpf(["-q", "-p", str(t.pid), "-o", str(out)])
        assert os.path.exists(STATE.format(t.pid))
        t.phase()
        rc, table, err = stop(p, signal.SIGINT)
        assert rc == 0, err
        assert not os.path.exists(STATE.format(t.pid))
        ours = collections.Counter(e["name"] for e in ops_of(load_trace(out)))
        check_against_profiler(ours, reference)
        # The callback is gone: RecordFunction no longer runs before().
        assert passive_count(t, tmp_path, "after.json") == 0
        assert t.finish() == 0
        assert t.lines == expected


def test_kill_9_leaves_callback_then_deactivate_removes_it(tmp_path):
    expected = untraced("--steps", "3000", phases=3)
    with Phased("--steps", "3000", "--phases", "3") as t:
        p, _ = start_rfbpf(["-q", "-p", str(t.pid)])
        t.go()
        time.sleep(0.3)
        p.kill()                       # mid-phase, no cleanup at all
        p.wait()
        t.next_line()
        assert os.path.exists(STATE.format(t.pid))
        # Still registered: a passive rfbpf sees every op of a phase.
        assert passive_count(t, tmp_path, "left.json") > 3000
        r = run([RFBPF, "--deactivate", "-p", str(t.pid)])
        assert r.returncode == 0, r.stderr
        assert "removed" in r.stdout
        assert not os.path.exists(STATE.format(t.pid))
        assert passive_count(t, tmp_path, "gone.json") == 0
        assert t.finish() == 0
        assert t.lines == expected


@pytest.mark.parametrize("delay", [0.2, 1.3, 2.7])
def test_kill_9_of_the_fleet_daemon_leaves_the_job_right(tmp_path, delay):
    """The fleet daemon (its sampled callback, and the p = 1 windows it
    opens and closes every interval) killed -9 at a moment of its
    intervals: the job's phases print what an untraced run prints, the
    callback it left is removed by --deactivate, and the job exits 0."""
    expected = untraced("--steps", "3000", phases=3)
    t = Phased("--steps", "3000", "--phases", "3")
    d = subprocess.Popen([RFBPF, "--continuous", "--sampled", "-p",
                          str(t.pid), "--interval", "1", "--budget", "50",
                          "--prom-file", str(tmp_path / "m.prom")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    try:
        for line in d.stderr:
            if f"pid {t.pid}" in line and "traced" in line:
                break
        else:
            raise AssertionError("the daemon never traced the job")
        t.phase()
        time.sleep(delay)               # into a window, or between two
        d.kill()
        d.wait()
        assert text_changed(t.pid) == []        # no breakpoint left
        t.phase()
        r = run([RFBPF, "--deactivate", "-p", str(t.pid)])
        assert r.returncode == 0, r.stderr
        assert passive_count(t, tmp_path, "gone.json") == 0
        assert t.finish() == 0
        assert t.lines == expected
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
        t.kill()


def test_reattach_replaces_a_leftover_callback(tmp_path):
    with Phased("--steps", "200", "--phases", "2") as t:
        p, _ = start_rfbpf(["-q", "-p", str(t.pid)])
        p.kill()
        p.wait()
        p, _ = start_rfbpf(["-q", "-p", str(t.pid)])
        rc, _, err = stop(p)
        assert rc == 0 and "replacing the callback" in err
        assert passive_count(t, tmp_path, "x.json") == 0
        assert not os.path.exists(STATE.format(t.pid))


def test_second_rfbpf_on_one_process_is_refused():
    with Phased("--steps", "10") as t:
        p, _ = start_rfbpf(["-q", "-p", str(t.pid)])
        r = run([RFBPF, "-q", "-p", str(t.pid)])
        assert r.returncode != 0
        assert r.stderr.count("\n") == 1 and "already tracing" in r.stderr
        rc, _, err = stop(p)
        assert rc == 0, err
        t.phase()
        assert t.finish() == 0


# Torch imported, but the loop dispatches no op and makes no system call
# (time.time() is the vDSO): no thread ever reaches a safe point.
SPIN = """
import sys, time, torch
print("ready", flush=True)
x = 0.0
end = time.time() + float(sys.argv[1])
while time.time() < end:
    x = (x + 1) * 0.5
print("done", round(x, 3), flush=True)
"""


def test_busy_target_without_a_safe_point_fails_cleanly():
    """One thread, always in pure Python: no op, no wait, so no safe
    point; a clear error within a bounded time, and the target unchanged.
    (A loop of ops is attached: tests/e2e/test_safety.py.)"""
    with Job([PYTHON, "-c", SPIN, "8"]) as p:
        t0 = time.time()
        err = refused(p.pid)
        assert time.time() - t0 < 15
        assert "safe point" in err and "nothing was changed" in err
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and out == "done 1.0\n"


def test_every_thread_captured(tmp_path):
    """Python threads and a torch.jit.fork task run ops at once: each
    thread's ops are all there."""
    steps = 300
    with Phased("--steps", str(steps), "--threads", "3") as t:
        out = tmp_path / "t.json"
        p, _ = start_rfbpf(["-q", "-p", str(t.pid), "-o", str(out)])
        t.phase()
        rc, _, err = stop(p)
        assert rc == 0, err
        relu = collections.Counter(e["tid"] for e in ops_of(load_trace(out))
                                   if e["name"] == "aten::relu")
        # 3 Python threads + the jit.fork task on an inter-op thread.
        assert sorted(relu.values()) == [steps] * 4, relu
        assert len(relu) == 4


def test_launch_mode_activates_before_the_first_op(tmp_path, reference):
    out = tmp_path / "t.json"
    r = run([RFBPF, "-q", "--no-table", "-o", str(out), "--", PYTHON, TINY,
             "--steps", "500"], input="go\n")
    assert r.returncode == 0, r.stderr
    ours = collections.Counter(e["name"] for e in ops_of(load_trace(out)))
    # Every op of the phase, plus whatever torch ran during its import.
    assert not reference[0] - ours, reference[0] - ours


SLEEPERS = """
import select, sys, threading, time, torch
out = {}
def sleeper():
    t0 = time.monotonic(); time.sleep(3); out["sleep"] = time.monotonic() - t0
def selector():
    t0 = time.monotonic(); select.select([], [], [], 3)
    out["select"] = time.monotonic() - t0
ts = [threading.Thread(target=f) for f in (sleeper, selector)]
for t in ts: t.start()
print("ready", flush=True)
line = sys.stdin.readline()             # main thread blocked in read()
for t in ts: t.join()
x = torch.ones(3) + 1
print(line.strip(), round(out["sleep"], 1), round(out["select"], 1),
      float(x.sum()), flush=True)
"""


def signal_state(pid):
    state = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            state[tid] = [l for l in f if l.startswith(("SigBlk", "SigIgn",
                                                        "SigCgt"))]
    return state


def test_interrupted_system_calls_and_signal_state_are_restored():
    """Threads blocked in read, nanosleep and select when rfbpf registers
    and removes its callback: every call completes as if undisturbed, and
    no thread's signal mask or handlers change."""
    with Job([PYTHON, "-c", SLEEPERS]) as p:
        before = signal_state(p.pid)
        r, seen = start_rfbpf(["-q", "-v", "-p", str(p.pid)])
        time.sleep(0.5)
        rc, _, err = stop(r)
        assert rc == 0, err
        assert "registered" in seen
        # A first attach maps rfbpf's page in a stop of its own.
        assert err.count("blocked in a system call") == 3, err
        assert signal_state(p.pid) == before
        out, _ = p.communicate("hello\n", timeout=60)
        line, slept, selected, total = out.split()
        assert line == "hello" and total == "6.0"
        assert slept == "3.0" and selected == "3.0", out


def test_target_exiting_during_activation_fails_cleanly():
    with Job([PYTHON, "-c", SPIN, "30"]) as p:
        r = subprocess.Popen([RFBPF, "-q", "-p", str(p.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(1)          # rfbpf is looking for a safe point
        p.kill()
        _, err = r.communicate(timeout=30)
        assert r.returncode != 0
        assert err.count("\n") == 1 and "exited" in err, err
        assert not os.path.exists(STATE.format(p.pid))


def test_unknown_build_is_refused_and_untouched(tmp_path):
    """A libtorch_cpu whose symbols do not match a build rfbpf knows (here
    the unit tests' fake, with every before() overload of every release and
    no addGlobalCallback): refused with one line, nothing written."""
    fake = os.path.join(ROOT, "tests", "fixtures", "fake_torch.so")
    assert os.path.exists(fake), "built by make unit (tests/fixtures)"
    lib = tmp_path / "libtorch_cpu.so"
    lib.write_bytes(open(fake, "rb").read())
    with Job([PYTHON, "-c", f"import ctypes, sys; "
              f"ctypes.CDLL('{lib}'); print('ready', flush=True);"
              f" sys.stdin.readline()"]) as p:
        err = refused(p.pid)
        assert "layout rfbpf knows" in err and "nothing was changed" in err
        out, _ = p.communicate("x\n", timeout=30)
        assert p.returncode == 0


def stub_page(pid):
    """rfbpf's page in pid: (address, its `on` byte), or None."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            if "/memfd:rfbpf-page " in line:
                addr = int(line.split("-")[0], 16)
                with open(f"/proc/{pid}/mem", "rb") as m:
                    m.seek(addr + 4096)
                    return addr, m.read(1)[0]
    return None


def test_callback_stubs_stay_mapped_and_switched_off_after(tmp_path):
    """The page is mapped on the first attach and kept (an op begun under
    the callback may still enter it); after detach its stubs skip their
    probes, no callback is left, and a second attach uses the same page."""
    expected = untraced("--steps", "300", phases=3)
    with Phased("--steps", "300", "--phases", "3") as t:
        assert stub_page(t.pid) is None
        p, seen = start_rfbpf(["-q", "--probes", "callback", "-p",
                               str(t.pid)])
        assert "callback stubs" in seen
        page = stub_page(t.pid)
        assert page and page[1] == 1
        t.phase()
        rc, table, err = stop(p)
        assert rc == 0, err
        assert "aten::relu" in table
        assert stub_page(t.pid) == (page[0], 0)
        assert passive_count(t, tmp_path, "after.json") == 0
        p, seen = start_rfbpf(["-q", "-v", "--probes", "callback", "-p",
                               str(t.pid)])
        assert f"found rfbpf's page at {page[0]:#x}" in seen, seen
        t.phase()
        rc, table, err = stop(p)
        assert rc == 0 and "aten::relu" in table, err
        assert t.finish() == 0 and t.lines == expected
