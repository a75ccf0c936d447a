"""How rfbpf starts, stops and leaves its target: exit status passthrough,
duration, signals, kill -9, and the live status line."""
import os
import signal
import subprocess
import time

from harness import (PYTHON, RFBPF, WORKLOAD, Waiting, load_trace, ops_of,
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
    with Waiting("--observer", "--steps", "30") as w:
        p, _ = start_rfbpf(["-q", "-p", str(w.pid)])
        w.go()
        time.sleep(0.3)
        p.kill()
        p.wait()
        code, out = w.finish()
        assert code == 0 and out == expected


def test_target_exit_ends_tracing_and_counts_are_reported():
    with Waiting("--observer", "--steps", "3") as w:
        p, _ = start_rfbpf(["-p", str(w.pid)])
        w.go()
        code, _ = w.finish()
        assert p.wait(timeout=60) == 0 and code == 0   # exits by itself
        rc, table, err = stop(p)
        assert "Lost or unpaired: drops 0" in table
        assert "Events:" in table


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


def test_early_ctrl_c_in_launch_mode_never_leaves_an_invalid_trace(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it)
    at several moments of a launch's first seconds: before the command
    starts, while it imports torch, once it runs ops. Each time the file
    at -o's path is valid JSON: the good trace that was there, untouched
    (and stderr says it was not written), or a whole new trace with the
    ops the command ran. No temporary is left beside it. rfbpf once left
    100 bytes of a trace's opening over the good file, and said
    nothing."""
    out = tmp_path / "e.json"
    good = '{"traceEvents": [], "otherData": {"mark": "good"}}\n'
    kept = replaced = 0
    for delay in (0.1, 0.2, 0.3, 0.4, 0.8, 1.5, 3.0, 6.0):
        out.write_text(good)
        p = subprocess.Popen([RFBPF, "-q", "--no-table", "-o", str(out),
                              "--", PYTHON, "-c", LOOP, "4"],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        time.sleep(delay)
        os.killpg(p.pid, signal.SIGINT)
        try:
            _, err = p.communicate(timeout=120)
        finally:
            p.kill()
        text = out.read_text()
        print(f"{delay}s: exit {p.returncode}, {len(text)} bytes; "
              f"{err.strip()!r}")
        if text == good:
            kept += 1
            assert "e.json not written (a file there is left as it was)" \
                in err, err
        else:
            trace = load_trace(out)       # whole: valid JSON
            assert ops_of(trace), f"a trace of no op replaced the file: {err}"
            replaced += 1
        assert sorted(os.listdir(tmp_path)) == ["e.json"]
    # Both outcomes were met: the early signals were early enough.
    assert kept >= 1, "no signal came before the first op"
