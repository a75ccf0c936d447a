"""How rfbpf starts, stops and leaves its target: exit status passthrough,
duration, signals, kill -9, and the live status line."""
import os
import signal
import subprocess
import time

from conftest import (PYTHON, RFBPF, WORKLOAD, Waiting, load_trace, ops_of,
                      run, start_rfbpf, stop, untraced_output)

LOOP = """
import sys, time, torch
torch.autograd._set_empty_test_observer(True, 1.0)
print("ready", flush=True)
x = torch.ones(4)
deadline = time.time() + float(sys.argv[1])
n = 0
while time.time() < deadline:
    x = (x + 1) * 0.5
    n += 1
print("done", float(x.sum()), flush=True)
"""


def test_launch_returns_the_commands_exit_status():
    r = run([RFBPF, "-q", "--no-table", "--", PYTHON, "-c",
             "import torch, sys; torch.ones(2) + 1; sys.exit(7)"])
    assert r.returncode == 7, r.stderr


def test_launch_of_missing_command():
    r = run([RFBPF, "-q", "--", "/nonexistent/cmd"])
    assert r.returncode != 0
    assert "cannot run /nonexistent/cmd" in r.stderr


def loop_target(seconds):
    p = subprocess.Popen([PYTHON, "-c", LOOP, str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_duration_stops_and_target_runs_on(tmp_path):
    target = loop_target(6)
    try:
        t0 = time.time()
        r = run([RFBPF, "-q", "--no-activate", "-p", str(target.pid), "-d",
                 "1", "-o", str(tmp_path / "t.json")])
        assert r.returncode == 0, r.stderr
        assert time.time() - t0 < 30
        assert target.poll() is None            # still running
        trace = load_trace(tmp_path / "t.json")
        names = {e["name"] for e in ops_of(trace)}
        assert {"aten::add", "aten::mul"} <= names
        out, _ = target.communicate(timeout=60)
        assert target.returncode == 0 and out.startswith("done")
    finally:
        target.kill()


def test_sigterm_and_sigint_write_outputs(tmp_path):
    for sig in (signal.SIGTERM, signal.SIGINT):
        target = loop_target(5)
        try:
            out = tmp_path / f"t{sig}.json"
            p, _ = start_rfbpf(["-q", "--no-activate", "-p",
                                str(target.pid), "-o", str(out)])
            time.sleep(1)
            rc, table, err = stop(p, sig)
            assert rc == 0, err
            assert "aten::add" in table
            assert len(ops_of(load_trace(out))) > 0
            assert target.poll() is None
            target.communicate(timeout=60)
            assert target.returncode == 0
        finally:
            target.kill()


def test_kill_9_leaves_target_running_correctly():
    expected = untraced_output("--observer", "--steps", "30")
    w = Waiting("--observer", "--steps", "30")
    try:
        p, _ = start_rfbpf(["-q", "-p", str(w.pid)])
        w.go()
        time.sleep(0.3)
        p.kill()
        p.wait()
        code, out = w.finish()
        assert code == 0 and out == expected
    finally:
        w.kill()


def test_target_exit_ends_tracing_and_counts_are_reported():
    w = Waiting("--observer", "--steps", "3")
    try:
        p, _ = start_rfbpf(["-p", str(w.pid)])
        w.go()
        code, _ = w.finish()
        assert p.wait(timeout=60) == 0 and code == 0   # exits by itself
        rc, table, err = stop(p)
        assert "Lost or unpaired: drops 0" in table
        assert "Events:" in table
    finally:
        w.kill()


def test_live_status_line_on_a_terminal(tmp_path):
    log = tmp_path / "tty.log"
    # script(1) gives rfbpf a terminal for stderr.
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    r = run(["script", "-qec",
             f"{RFBPF} --no-table -- {PYTHON} {script} 2", str(log)])
    assert r.returncode == 0, r.stdout
    text = log.read_text(errors="replace")
    assert "[rfbpf]" in text and "ops/s" in text and "drops 0" in text


def test_verbose_reports_resolution_and_version():
    r = run([RFBPF, "-v", "--no-table", "--", PYTHON, "-c",
             "import torch; torch.ones(1) + 1"])
    assert r.returncode == 0
    assert "before(FunctionSchema)" in r.stderr
    assert "C++11 string ABI" in r.stderr
    v = run([RFBPF, "--version"])
    assert v.returncode == 0 and v.stdout.startswith("rfbpf ")
    h = run([RFBPF, "--help"])
    assert "Examples:" in h.stdout and "rfbpf -p 1234" in h.stdout


def test_asan_build_traces_cleanly(tmp_path):
    """The loader built with ASan+UBSan (make asan) traces the workload
    with no sanitizer report and no leak."""
    import pytest
    asan = os.path.join(os.path.dirname(RFBPF), "build-asan", "rfbpf-asan")
    if not os.path.exists(asan):
        pytest.skip("build-asan/rfbpf-asan not built (make asan)")
    r = run([asan, "-q", "--top", "5", "-o", str(tmp_path / "t.json"),
             "--folded", str(tmp_path / "f.txt"), "--", PYTHON, WORKLOAD,
             "--observer", "--steps", "3"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr
    assert len(ops_of(load_trace(tmp_path / "t.json"))) > 500
