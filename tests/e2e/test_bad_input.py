"""Bad input: one line on stderr saying what is wrong and what to do, a
non-zero exit, and the target untouched (still running, same output)."""
import os
import subprocess
import time

import pytest

from conftest import PYTHON, RFBPF, Waiting, run


def one_line_error(r, *words):
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rfbpf: "), r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def free_pid():
    """A pid that belonged to a process which is gone."""
    p = subprocess.Popen(["true"])
    p.wait()
    assert not os.path.exists(f"/proc/{p.pid}")
    return p.pid


def test_pid_that_does_not_exist():
    r = run([RFBPF, "-p", str(free_pid())])
    one_line_error(r, "no process with PID")


def test_process_without_pytorch():
    sleeper = subprocess.Popen(["sleep", "100"])
    try:
        r = run([RFBPF, "-p", str(sleeper.pid)])
        one_line_error(r, "libtorch_cpu", "--lib")
        assert sleeper.poll() is None       # untouched, still running
    finally:
        sleeper.kill()
        sleeper.wait()


def test_process_that_exits_during_attach():
    w = Waiting("--observer", "--steps", "1")
    try:
        p = subprocess.Popen([RFBPF, "--probes", "entry", "-p", str(w.pid)],
                             env=dict(os.environ,
                                      RFBPF_TEST_ATTACH_DELAY_MS="1500"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(0.5)
        w.kill()
        out, err = p.communicate(timeout=60)
        r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        one_line_error(r, "exited during attach")
    finally:
        w.kill()


def test_lib_that_is_not_elf(tmp_path):
    junk = tmp_path / "libtorch_cpu.so"
    junk.write_text("not a library\n")
    r = run([RFBPF, "--lib", str(junk), "--", "true"])
    one_line_error(r, "not an ELF file", str(junk))


def test_lib_without_recordfunction_symbols():
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    r = run([RFBPF, "--lib", libc, "--", "true"])
    one_line_error(r, "no at::RecordFunction", "supports")


def test_lib_that_does_not_exist():
    r = run([RFBPF, "--lib", "/nonexistent/libtorch_cpu.so", "--", "true"])
    one_line_error(r, "No such file")


@pytest.mark.parametrize("tool", ["capsh", "setpriv"])
def test_without_privileges(tool):
    w = Waiting("--observer", "--steps", "2")
    try:
        if tool == "capsh":
            cmd = ["capsh", "--drop=cap_bpf,cap_perfmon,cap_sys_admin",
                   "--", "-c", f"exec {RFBPF} -p {w.pid}"]
        else:
            cmd = ["setpriv", "--inh-caps=-all", "--bounding-set=-all",
                   "--reuid=65534", "--regid=65534", "--clear-groups",
                   RFBPF, "-p", str(w.pid)]
        r = run(cmd)
        one_line_error(r, "CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN")
        w.go()
        code, _ = w.finish()
        assert code == 0
    finally:
        w.kill()


def test_unknown_option():
    r = run([RFBPF, "--no-such-option"])
    assert r.returncode != 0
    assert "no-such-option" in r.stderr.splitlines()[0]


@pytest.mark.parametrize("args,words", [
    (["-p", "abc"], "invalid PID"),
    (["-p", "1", "-d", "-3"], "invalid duration"),
    (["-p", "1", "--sort", "fastest"], "invalid --sort"),
    (["-p", "1", "--ringbuf-mb", "3"], "power of two"),
    (["-p", "1", "--", "true"], "exclude each other"),
    (["-p", "1", "--sample", "0"], "invalid --sample"),
    (["-p", "1", "--sample", "1.5"], "invalid --sample"),
    (["-p", "1", "--tree-sample", "abc"], "invalid --tree-sample"),
    (["-p", "1", "--scopes", "function,bogus"], "invalid --scopes entry"),
    (["--deactivate", "--", "true"], "--deactivate needs -p"),
    (["-p", "1", "--no-activate", "--sample", "0.5"], "needs activation"),
    ([], "nothing to trace"),
])
def test_bad_values(args, words):
    r = run([RFBPF, *args])
    one_line_error(r, words)


@pytest.mark.parametrize("flag", ["-o", "--folded", "--gpu-folded"])
def test_unwritable_output_is_refused_before_tracing(flag):
    """Every output path is tried at start: the run does not trace for
    nothing, and the target is left as it was."""
    w = Waiting("--observer", "--steps", "1")
    try:
        r = run([RFBPF, "-p", str(w.pid), flag, "/proc/1/no/such/file"])
        one_line_error(r, "cannot create /proc/1/no/such/file")
        with open(f"/proc/{w.pid}/maps") as f:
            assert "rfbpf" not in f.read()      # no stub page mapped
        code, _ = w.finish()
        assert code == 0
    finally:
        w.kill()


def test_a_run_that_writes_nothing_says_so():
    r = run([RFBPF, "-q", "--no-table", "--", PYTHON, "-c", "pass"])
    assert "this run writes nothing" in r.stderr
