"""Bad input: one line on stderr saying what is wrong and what to do, a
non-zero exit, and the target untouched (still running, same output)."""
import os
import re
import stat
import subprocess
import time

import pytest

from harness import PYTHON, RFBPF, Waiting, run


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
    with Waiting("--observer", "--steps", "1") as w:
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


def test_process_killed_before_rfbpf_looked_at_it_exited_during_attach():
    """Killed while rfbpf calibrates, before it reads the process: the
    same line as a death later in the attach, not 'no process with PID'
    (rfbpf holds a pidfd from its start)."""
    with Waiting("--observer", "--steps", "1") as w:
        p = subprocess.Popen([RFBPF, "-v", "-p", str(w.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        first = p.stderr.readline()     # a second before rfbpf looks
        assert first == "rfbpf: calibrating the probe cost\n", first
        w.kill()
        out, err = p.communicate(timeout=60)
        assert p.returncode != 0
        last = err.strip().splitlines()[-1]
        assert last == f"rfbpf: process {w.pid} exited during attach", err


def test_no_activate_on_a_job_that_records_nothing_says_why():
    """--no-activate on a job whose RecordFunction nothing switched on: an
    empty table, and one line saying why and what to do."""
    # No --observer: nothing on.
    with Waiting("--steps", "3") as w:
        p = subprocess.Popen([RFBPF, "-q", "--no-activate", "-d", "2",
                              "-p", str(w.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        w.go()
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        warn = [l for l in err.splitlines() if "warning" in l]
        assert len(warn) == 1 and "drop --no-activate" in warn[0], err


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
    with Waiting("--observer", "--steps", "2") as w:
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


def test_unknown_option():
    r = run([RFBPF, "--no-such-option"])
    assert r.returncode != 0
    assert "no-such-option" in r.stderr.splitlines()[0]


def test_help_is_laid_out_in_columns():
    """Every entry of --help starts at its column and its text at column
    29, no line is wider than 79, and every option is there (glibc's argp
    shifted --gpu-folded's entry and put --group-by's text at column 0)."""
    r = run([RFBPF, "--help"])
    assert r.returncode == 0 and not r.stderr
    text = r.stdout
    options = text[:text.index("\nMandatory or optional")]
    entries = 0
    for line in options.splitlines()[3:]:
        if not line or line[0] != " ":
            continue                    # the description above the list
        if line.startswith(" " * 29):   # an entry's text, continued
            assert line[29] != " ", line
            continue
        entries += 1
        assert line.startswith(("  -", "      --")), line
        if "  " in line.strip():        # its text from column 29 ...
            assert line[27:29] == "  " and line[29] != " ", line
        # ... or from the next line, after a long option alone
    for line in text.splitlines():
        assert len(line) <= 79, line
    src = open(os.path.join(os.path.dirname(RFBPF), "user", "cli.c")).read()
    longs = [name for name, flags in re.findall(
        r'^\t\{ "([a-z0-9-]+)", [^,]+, (?:"[^"]*"|NULL), ([^,]+),', src,
        re.M)
        if "OPTION_HIDDEN" not in flags]
    assert len(longs) > 30
    for name in longs:
        assert f"--{name}" in options, name
    assert entries == len(longs), (entries, len(longs))


def test_man_page_has_every_option_of_help(tmp_path):
    """rfbpf.8 is written by rfbpf from the table --help comes from
    (`make rfbpf.8` runs rfbpf --man): troff reads it without a warning,
    man renders it, and every option --help lists is there with its
    text's first words."""
    r = run([RFBPF, "--man"])
    assert r.returncode == 0 and not r.stderr
    page = tmp_path / "rfbpf.8"
    page.write_text(r.stdout)
    lint = run(["groff", "-man", "-ww", "-z", str(page)])
    assert lint.returncode == 0 and not lint.stderr, lint.stderr
    shown = run(["man", "-l", str(page)],
                env=dict(os.environ, MANWIDTH="1000"))
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    helped = run([RFBPF, "--help"]).stdout
    entries = re.findall(r"^ {2}(?:-\w, )?--([a-z0-9-]+)\S*\s+(\S+ \S+ \S+)",
                         helped, re.M)
    entries += re.findall(r"^ {6}--([a-z0-9-]+)\S*\s+(\S+ \S+ \S+)", helped,
                          re.M)
    assert len(entries) > 30
    for name, words in entries:
        assert f"--{name}" in text, name
        assert words in text, (name, words)
    assert "--man" not in helped


def test_make_install_puts_each_file_where_a_distribution_would(tmp_path):
    r = run(["make", "-s", "install", f"DESTDIR={tmp_path}", "PREFIX=/usr"],
            cwd=os.path.dirname(RFBPF))
    assert r.returncode == 0, r.stderr
    assert os.access(tmp_path / "usr/bin/rfbpf", os.X_OK)
    assert (tmp_path / "usr/share/man/man8/rfbpf.8").read_text().startswith(
        ".TH RFBPF 8")
    unit = (tmp_path / "usr/lib/systemd/system/rfbpf.service").read_text()
    assert "ExecStart=/usr/bin/rfbpf --config" in unit
    agent = os.path.join(os.path.dirname(RFBPF), "build", "cupti",
                         "librfbpf_cupti.so")
    assert os.path.exists(tmp_path / "usr/lib/rfbpf/librfbpf_cupti.so") == \
        os.path.exists(agent)


def test_version_and_usage():
    r = run([RFBPF, "-V"])
    assert r.returncode == 0 and r.stdout.startswith("rfbpf "), r
    r = run([RFBPF, "--usage"])
    assert r.returncode == 0 and "[--python-stacks]" in r.stdout, r


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
    (["-p", "1", "--scopes", "bogus"], "names from function,"),
    (["-p", "1", "--top", "2147483648"], "too large, at most 2147483647"),
    (["-p", "1", "--top", "-1"], "expected a count >= 0"),
    (["-p", "1", "--python-stacks", "--python-depth", "999"],
     "too large, at most 128"),
    (["-p", "1", "--no-gpu", "--sort", "cuda"], "drop --no-gpu"),
    (["--deactivate", "--", "true"], "--deactivate needs -p"),
    (["--deactivate"], "--deactivate needs -p"),
    (["-p", "1", "--no-activate", "--sample", "0.5"], "needs activation"),
    ([], "nothing to trace"),
])
def test_bad_values(args, words):
    r = run([RFBPF, *args])
    line = one_line_error(r, words)
    assert line.count("rfbpf --help") <= 1, line      # said once


@pytest.mark.parametrize("flag", ["-o", "--folded", "--gpu-folded"])
def test_unwritable_output_is_refused_before_tracing(flag):
    """Every output path is tried at start: the run does not trace for
    nothing, and the target is left as it was."""
    with Waiting("--observer", "--steps", "1") as w:
        r = run([RFBPF, "-p", str(w.pid), flag, "/proc/1/no/such/file"])
        one_line_error(r, "cannot create /proc/1/no/such/file")
        with open(f"/proc/{w.pid}/maps") as f:
            assert "rfbpf" not in f.read()      # no stub page mapped
        code, _ = w.finish()
        assert code == 0


def test_a_run_that_writes_nothing_says_so():
    r = run([RFBPF, "-q", "--no-table", "--", PYTHON, "-c", "pass"])
    assert "this run writes nothing" in r.stderr


TORCH_OPS = "import torch; torch.ones(2) + 1"


def warnings_in(stderr):
    return [l for l in stderr.splitlines() if l.startswith("rfbpf: warning")]


def test_top_as_large_as_an_int_shows_every_row():
    r = run([RFBPF, "-q", "--top", "2147483647", "--", PYTHON, "-c",
             TORCH_OPS])
    assert r.returncode == 0, r.stderr
    assert "aten::ones" in r.stdout and "not shown" not in r.stdout


def test_sort_by_a_gpu_column_without_a_gpu_says_what_it_sorts_by():
    for key in ["cuda", "self_cuda", "kernels"]:
        r = run([RFBPF, "-q", "--sort", key, "--", PYTHON, "-c", TORCH_OPS])
        assert r.returncode == 0, r.stderr
        w = warnings_in(r.stderr)
        assert len(w) == 1, r.stderr
        assert f"--sort {key}: the job had no GPU activity" in w[0]
        assert "sorted by self time instead" in w[0]
    r = run([RFBPF, "-q", "--sort", "total", "--", PYTHON, "-c", TORCH_OPS])
    assert r.returncode == 0 and not warnings_in(r.stderr), r.stderr


@pytest.mark.parametrize("cmd,status", [
    ([PYTHON, "-c", "pass"], 0),
    (["sh", "-c", "exit 3"], 3),
])
def test_a_command_that_never_loads_torch_is_told(cmd, status):
    """The command's status is kept (launch mode passes it on); one line
    says that nothing was traced, and why."""
    r = run([RFBPF, "-q", "--", *cmd])
    assert r.returncode == status, r.stderr
    w = warnings_in(r.stderr)
    assert len(w) == 1, r.stderr
    assert "never loaded libtorch_cpu.so, so nothing was traced" in w[0]
    assert "imports torch" in w[0] and "-p" in w[0]


def test_a_torch_command_gets_no_such_hint():
    r = run([RFBPF, "-q", "--", PYTHON, "-c", TORCH_OPS])
    assert r.returncode == 0 and "never loaded" not in r.stderr, r.stderr


def test_pid_1_names_the_real_cause():
    """As root, CAP_SYS_PTRACE is there: a refusal to read PID 1 comes
    from elsewhere (a sandbox's security module here), and PID 1 that can
    be read simply has no torch."""
    r = run([RFBPF, "-q", "-p", "1"])
    line = one_line_error(r)
    assert "other users' processes" not in line
    if "Permission denied" in line:
        assert "security module" in line and "CAP_SYS_PTRACE" in line
        assert "the host" in line
    else:
        assert "has no libtorch_cpu.so mapped" in line


@pytest.mark.parametrize("flag", ["-o", "--folded", None])
def test_a_full_disk_is_said_as_one(flag):
    """Every output, the table on standard output too: the real errno,
    and a non-zero exit although the command succeeded."""
    out = [flag, "/dev/full"] if flag else []
    with open("/dev/full", "w") as full:
        r = run([RFBPF, "-q", *out, "--", PYTHON, "-c", TORCH_OPS],
                capture_output=False, stderr=subprocess.PIPE,
                stdout=full if not flag else subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    errors = [l for l in r.stderr.splitlines() if "cannot write" in l]
    what = "/dev/full" if flag else "the table to standard output"
    assert errors == [f"rfbpf: cannot write {what}: No space left on "
                      f"device"], r.stderr


def test_prom_file_that_is_a_device_is_refused_and_left_alone():
    """--prom-file is replaced by a rename each interval: over /dev/full
    (as root) that would swap the device for a regular file."""
    before = os.stat("/dev/full")
    r = run([RFBPF, "--continuous", "--all", "--prom-file", "/dev/full"],
            timeout=60)
    one_line_error(r, "--prom-file /dev/full", "not a regular file")
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_verbose_is_rfbpf_and_very_verbose_adds_libbpf(tmp_path):
    args = ["-q", "--no-table", "-o", str(tmp_path / "t.json"), "--",
            PYTHON, "-c", TORCH_OPS]
    v = run([RFBPF, "-v", *args])
    assert v.returncode == 0, v.stderr
    assert "registered RecordFunction callback" in v.stderr
    assert "libbpf: prog" not in v.stderr       # no relocation noise
    vv = run([RFBPF, "-vv", *args])
    assert vv.returncode == 0, vv.stderr[-2000:]
    assert "libbpf: prog" in vv.stderr
