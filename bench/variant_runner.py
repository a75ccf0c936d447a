"""Runs one variant of a workload once and returns what it measured.

A variant is untraced, torch.profiler (in-process, "torch_stack": with
with_stack and record_shapes, "torch_memory": with profile_memory), rfbpf
in launch mode
with some options, or bench/callback_only (rfbpf's callback without
rfbpf's programs, attached with -p to a waiting workload). For rfbpf runs
the process's own CPU time (utime+stime, read from /proc while it is a
zombie, so nothing of its exit is missed and none of its child's time is
counted) and its peak RSS (VmHWM, sampled every 20 ms) are recorded, with
the events it read.
"""
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RFBPF = os.path.join(ROOT, "rfbpf")
PYTHON = "/usr/bin/python3"
DRIVER = os.path.join(ROOT, "bench", "timed_workload.py")
CALLBACK_ONLY = os.path.join(ROOT, "build", "bench", "callback_only")
TICK = os.sysconf("SC_CLK_TCK")


def driver(workload, steps, threads, extra=()):
    return [PYTHON, DRIVER, "--workload", workload, "--steps", str(steps),
            "--threads", str(threads), *extra]


def seconds(text, key):
    m = re.search(key + r"=([0-9.]+)", text)
    return float(m.group(1)) if m else None


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"VmHWM:\s+(\d+)", f.read())
        return int(m.group(1)) if m else 0
    except OSError:
        return 0


def cpu_seconds_of_zombie(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def run_rfbpf(args, work):
    """rfbpf -q --no-table ARGS -- WORK, with its CPU and peak RSS."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    p = subprocess.Popen([RFBPF, "-q", *args, "--", *work], text=True,
                         stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    hwm = 0
    while True:
        hwm = max(hwm, vm_hwm_kib(p.pid))
        st = os.waitid(os.P_PID, p.pid,
                       os.WEXITED | os.WNOWAIT | os.WNOHANG)
        if st is not None:
            break
        time.sleep(0.02)
    cpu = cpu_seconds_of_zombie(p.pid)
    p.wait()
    out.seek(0)
    err.seek(0)
    stdout, stderr = out.read(), err.read()
    m = re.search(r"Events: (\d+)", stdout)
    if p.returncode or not m:
        raise RuntimeError(f"rfbpf {' '.join(args)} failed:\n"
                           f"{stderr[-2000:]}{stdout[-1000:]}")
    return stdout, stderr, {"cpu_s": cpu, "rss_mib": hwm / 1024,
                            "events": int(m.group(1))}


def run_callback_only(work, helper_args):
    """The workload waits; the helper registers the callback; go."""
    w = subprocess.Popen(work + ["--wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert w.stdout.readline().strip() == "ready"
    h = subprocess.Popen([CALLBACK_ONLY, str(w.pid), *helper_args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    if h.stdout.readline().strip() != "active":
        w.kill()
        raise RuntimeError("callback_only could not activate")
    _, err = w.communicate("go\n", timeout=600)
    h.communicate("\n")
    return err


def run_variant(kind, args, workload, steps, threads):
    """Returns ({figure: seconds}, rfbpf accounting or None)."""
    work = driver(workload, steps, threads)
    acct = None
    if kind in ("untraced", "torch", "torch_stack", "torch_memory"):
        extra = {"untraced": [], "torch": ["--torch-profiler"],
                 "torch_stack": ["--torch-profiler", "--with-stack"],
                 "torch_memory": ["--torch-profiler",
                                  "--profile-memory"]}[kind]
        r = subprocess.run(driver(workload, steps, threads, extra),
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            raise RuntimeError(f"workload failed:\n{r.stderr[-2000:]}")
        err = r.stderr
    elif kind == "callback_only":
        err = run_callback_only(work, args)
    else:
        _, err, acct = run_rfbpf(["--top", "5", *args], work)
    figures = {k: seconds(err, k) for k in
               ("phase_seconds", "phase_cpu_seconds", "e2e_table_seconds",
                "e2e_trace_seconds")}
    if figures["phase_seconds"] is None:
        raise RuntimeError(f"no phase time from {kind} {args}:\n{err}")
    return figures, acct


def ops_per_step(workload, threads):
    """From two full rfbpf captures: the ops one step runs."""
    counts = []
    steps = (100, 200) if workload == "tiny" else (10, 20)
    for n in steps:
        out, _, _ = run_rfbpf(["--top", "1"],
                              driver(workload, n, threads))
        counts.append(int(re.search(r"; (\d+) ops? on \d+ threads?", out).group(1)))
    return (counts[1] - counts[0]) / (steps[1] - steps[0])
