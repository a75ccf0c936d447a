"""Threads keep the names their job gives them (issue 34, item 3).

mlp_threads.py names its worker's OS thread `mlp-worker` (PR_SET_NAME);
the main thread is `python3`. Those names must be the Chrome trace's
thread_name metadata and the folded stacks' thread frames:
- in launch mode (`make demo`), where a short job's records are read only
  as it exits, when /proc no longer has its threads;
- with -p PID --off-cpu, where a thread's first record is often an
  off-CPU interval (with --python-stacks too).
Both named every thread `thread`."""
import collections
import time

from harness import (PYTHON, RFBPF, WORKLOAD, Waiting, load_trace, run,
                    sid_root_with, start_rfbpf, stop, torch_lib)

NAMES = {"python3", "mlp-worker"}


def thread_names(trace):
    """{tid: name} from the trace's thread_name metadata."""
    return {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


def folded_threads(text):
    """{thread frame (name [tid]): samples} of a folded-stacks file."""
    seen = collections.Counter()
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        seen[stack.split(";")[1]] += int(n)
    return seen


def check_names(trace, folded):
    names = thread_names(trace)
    assert NAMES <= set(names.values()), names
    assert "thread" not in names.values(), names
    frames = folded_threads(folded)
    assert not [f for f in frames if f.startswith("thread [")], frames
    assert NAMES <= {f.rsplit(" [", 1)[0] for f in frames}, frames


def test_launch_mode_names_threads_as_the_job_did(tmp_path):
    """`make demo`'s command: the job exits before rfbpf reads most of
    its records."""
    out, folded = tmp_path / "t.json", tmp_path / "t.folded"
    r = run([RFBPF, "-q", "--no-table", "-o", str(out), "--folded",
             str(folded), "--", PYTHON, WORKLOAD, "--observer", "--steps",
             "20"])
    assert r.returncode == 0, r.stderr
    check_names(load_trace(out), folded.read_text())


def test_launch_mode_off_cpu_on_python_3_14_names_threads(tmp_path):
    """torch 2.14 on Python 3.14 (the sid root, through chroot), launched
    with --off-cpu: the same names (3.14 names a thread's comm after its
    threading name; the worker renames itself after)."""
    root = sid_root_with(WORKLOAD)
    out, folded = tmp_path / "t.json", tmp_path / "t.folded"
    r = run([RFBPF, "-q", "--no-table", "--off-cpu", "-o", str(out),
             "--folded", str(folded), "--lib", torch_lib(root), "--",
             "chroot", root, "python3", "/tmp/mlp_threads.py", "--observer",
             "--steps", "5"], timeout=300)
    assert r.returncode == 0, r.stderr
    check_names(load_trace(out), folded.read_text())


def attached(tmp_path, *flags):
    """-p PID with flags on a job training round after round."""
    out, folded = tmp_path / "t.json", tmp_path / "t.folded"
    with Waiting("--rounds-until-line", "--steps", "5") as job:
        p, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(out), "--folded", str(folded), *flags])
        job.go()
        time.sleep(2)
        code, _, err = stop(p)
        assert code == 0, err
        job.go()            # its stop line
        assert job.finish()[0] == 0
    return load_trace(out), folded.read_text()


def test_off_cpu_keeps_thread_names(tmp_path):
    check_names(*attached(tmp_path, "--off-cpu"))


def test_off_cpu_with_python_stacks_keeps_thread_names(tmp_path):
    trace, folded = attached(tmp_path, "--off-cpu", "--python-stacks")
    # Python 3.11 names the threads by their threading names where it
    # can read them (MainThread, worker): never `thread`.
    names = thread_names(trace)
    assert names and "thread" not in names.values(), names
    frames = folded_threads(folded)
    assert not [f for f in frames if f.startswith("thread [")], frames
