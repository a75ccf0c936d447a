"""--memory against torch.profiler(profile_memory=True) on the same code.

tests/workloads/memory_scopes.py makes known allocations per
record_function scope: a 4 MiB tensor kept (the last iteration's), 1000
small tensors made and freed, a block freed by another thread, a block
made before tracing and freed in it, and an 8 MiB leak in a function of
its own. rfbpf attaches (-p) after the job made its old tensors, as
torch.profiler starts after them; both see the same iterations.

- torch 2.14 (a Debian sid root): Kineto's numbers are exact, and every op
  with as many calls in both must have the same Self CPU Mem and CPU Mem,
  within 2% or 8 KiB (the bar).
- torch 1.13: its profiler charges a [memory] event to every op whose
  interval, in whole microseconds and on any thread, holds it. An op of
  a microsecond or less shares its block with the sibling that starts in
  the same microsecond, or loses it: from one profiled run to the next,
  aten::zeros' self memory read 0 and 4 MiB, aten::empty's total 21.5 and
  17.3 MB, and aten::fill_ (which allocates nothing) 160 to 190 KB. The
  churn scope's self memory, which is its frees less what its 2000 tiny
  children are charged, read from -800 to -847 KB where the workload
  frees 750 KB (and rfbpf reads 768876 B: 768000 and 876 B of 1.13's
  record_function handles). Its aten rows and churn's self are no
  reference, so there the other record_function scopes (ms long) are
  compared, with twice the spread of two profiled runs allowed beside 2%
  or 8 KiB, and the rest is checked against what the workload is known
  to allocate.
"""
import collections
import json
import os

import pytest

from perfetto_reader import Trace
from harness import (Job, PYTHON, RFBPF, ROOT, load_trace, run,
                     sid_root_with, start_rfbpf, stop, wait_until)

WORKLOAD = os.path.join(ROOT, "tests", "workloads", "memory_scopes.py")
KIB = 1024
MIB = 1024 * KIB
ITERS = 3


def profiled(cmd):
    """torch.profiler's key_averages: name -> (calls, self, total)."""
    r = run(cmd + ["--profile", str(ITERS)], timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            e = json.loads(line)
            rows[e["name"]] = (e["calls"], e["self_cpu_mem"], e["cpu_mem"])
    return rows


def traced(cmd, tmp_path, *opts, out_name="m.json"):
    """rfbpf -p on the job once its old tensors are made, for ITERS
    iterations (and the device's blocks with --device), stopped while the
    job still holds what it kept: (trace, table)."""
    out = tmp_path / out_name
    # ready=None: sid's UCX warns on stdout before the job's own lines.
    with Job(cmd + ["--iters", str(ITERS), "--wait", "--hold", *opts],
             ready=None) as job:
        assert wait_until(lambda: "ready\n" in job.lines, timeout=120)
        p, _ = start_rfbpf(["-p", str(job.pid), "--memory",
                            "--python-stacks", "-o", str(out),
                            "--memory-folded", str(tmp_path / "m.folded")])
        job.go()
        assert wait_until(lambda: any(l.startswith("done")
                                      for l in job.lines)), job.output()
        rc, table, err = stop(p)
    assert rc == 0, err
    assert "warning" not in err, err
    if out_name.endswith(".perfetto-trace"):
        return Trace(str(out)), table
    return load_trace(out), table


def op_rows(trace):
    return {r["name"]: (r["calls"], r["self_cpu_memory_usage"],
                        r["cpu_memory_usage"])
            for r in trace["otherData"]["op_stats"]}


def assert_same_memory(ours, truth, slack=None, scopes_only=False):
    """Every op (or record_function scope) with as many calls in both:
    self and total within 2% or 8 KiB (and slack[name], torch.profiler's
    own spread)."""
    compared = 0
    for name, (calls, self_mem, total) in truth.items():
        if name not in ours or ours[name][0] != calls:
            continue
        if scopes_only and ("::" in name or name == "churn"):
            continue
        extra = (slack or {}).get(name, (0, 0))
        for i, (mine, theirs) in enumerate(((ours[name][1], self_mem),
                                            (ours[name][2], total))):
            allow = max(0.02 * abs(theirs), 8 * KIB, extra[i])
            assert abs(mine - theirs) <= allow, (
                f"{name}: {'self' if i == 0 else 'total'} {mine} vs "
                f"torch.profiler's {theirs} (allowed {allow:.0f})")
        compared += 1
    for scope in ("iteration", "keep_4mb", "churn", "handoff", "free_old",
                  "leak_8mb", "aten::empty", "aten::ones"):
        assert scope in ours and ours[scope][0] == truth[scope][0], scope
    return compared


def assert_workload_facts(trace, table, python_file):
    """What the workload is known to do, whatever torch.profiler says."""
    rows, other = op_rows(trace), trace["otherData"]
    # 4 MiB made in keep_4mb each call, the last call's kept.
    assert rows["keep_4mb"][2] == pytest.approx(4 * MIB, abs=8 * KIB)
    assert rows["leak_8mb"][2] == pytest.approx(8 * MIB, abs=8 * KIB)
    # 1000 tensors of 256 B made and freed per call: a net of about 0,
    # the 256 KB made below it.
    assert abs(rows["churn"][2]) <= 8 * KIB
    assert rows["churn"][1] == pytest.approx(-ITERS * 1000 * 256,
                                             abs=8 * KIB)
    assert rows["aten::ones"][2] == ITERS * 1000 * 256
    assert rows["aten::ones"][1] == 0 and rows["aten::fill_"][1] == 0
    # Every block is made in aten::empty: 4 MiB and 64 KiB per call, 8 MiB
    # once, and the 1000 small ones (plus a few bytes of scope handles on
    # 1.13).
    made = ITERS * (4 * MIB + 64 * KIB + 1000 * 256) + 8 * MIB
    assert rows["aten::empty"][1] == pytest.approx(made, abs=8 * KIB)
    assert rows["aten::zeros"][1] == 0
    # Old blocks freed in free_old: counted, never charged.
    assert rows["free_old"][1] > -8 * KIB and rows["free_old"][2] > -8 * KIB
    assert other["memory_frees_of_blocks_made_before_tracing"] >= ITERS
    # handoff's 64 KiB blocks freed by the freer thread: paired there.
    mem = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    tids = {e["tid"] for e in mem}
    assert len(tids) == 2, tids     # the main thread and the freer
    for e in mem:
        a = e["args"]
        assert {"Addr", "Bytes", "Total Allocated", "Total Reserved",
                "Device Type", "Device Id"} <= a.keys(), a
    # Nothing lost: every probe hit charged, or a free of an old block.
    assert other["drops"] == 0
    assert other["memory_allocator_hits"] == other["memory_allocations"]
    assert other["memory_free_hits"] == (
        other["memory_frees"] +
        other["memory_frees_of_blocks_made_before_tracing"])
    assert any(e.get("ph") == "C" and e["name"] == "Live bytes (CPU)"
               for e in trace["traceEvents"])
    # The leak view: the 8 MiB leak on top, with its scope and line.
    live = other["rfbpf_live_blocks"]
    assert live[0]["bytes"] == 8 * MIB and live[0]["scope"] == "leak_8mb"
    assert live[0]["python"].startswith("leak (") and \
        live[0]["python"].endswith(f"{python_file}:{leak_line()})")
    assert live[1]["bytes"] == 4 * MIB and live[1]["scope"] == "keep_4mb"
    assert "Self CPU Mem" in table and "CPU Mem" in table
    assert "leak_8mb" in table.split("Live at the end")[1]


def leak_line():
    """The line of the 8 MiB allocation in the workload."""
    with open(WORKLOAD) as f:
        for n, line in enumerate(f, 1):
            if "8 MiB: the leak" in line:
                return n
    raise AssertionError("no leak line")


def freer_thread_is_paired(trace):
    """The 64 KiB frees are on another thread than their allocations."""
    mem = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    made = {e["args"]["Addr"]: e["tid"] for e in mem
            if e["args"]["Bytes"] == 64 * KIB}
    freed = [e for e in mem if e["args"]["Bytes"] == -64 * KIB]
    return len(freed) == ITERS and all(
        made.get(e["args"]["Addr"]) not in (None, e["tid"]) for e in freed)


def test_torch_1_13(tmp_path):
    cmd = [PYTHON, WORKLOAD]
    first, second = profiled(cmd), profiled(cmd)
    slack = {n: (2 * abs(first[n][1] - second[n][1]),
                 2 * abs(first[n][2] - second[n][2]))
             for n in first if n in second}
    trace, table = traced(cmd, tmp_path)
    assert assert_same_memory(op_rows(trace), first, slack,
                              scopes_only=True) == 5
    assert_workload_facts(trace, table, WORKLOAD)
    assert freer_thread_is_paired(trace)
    # --memory-folded: every byte allocated, under the stack that did.
    folded = [l.rsplit(" ", 1) for l in
              (tmp_path / "m.folded").read_text().splitlines()]
    assert sum(int(w) for _, w in folded) == \
        trace["otherData"]["memory_allocated_bytes"]
    leak = [int(w) for st, w in folded if f"leak ({WORKLOAD}:" in st]
    assert max(leak) == 8 * MIB


@pytest.fixture(scope="module")
def sid_root():
    return sid_root_with(WORKLOAD)


def test_torch_2_14_equals_kineto(sid_root, tmp_path):
    cmd = ["chroot", sid_root, "python3", "/tmp/memory_scopes.py"]
    truth = profiled(cmd)
    trace, table = traced(cmd, tmp_path)
    assert trace["otherData"]["torch_version"].startswith("2.14")
    assert assert_same_memory(op_rows(trace), truth) >= 8
    assert_workload_facts(trace, table, "/tmp/memory_scopes.py")
    assert freer_thread_is_paired(trace)


def test_device_allocator_reports(tmp_path):
    """The CUDA caching allocator's calls of c10::reportMemoryUsageToProfiler
    (the real function in the job's c10, called as the allocator calls
    it: no GPU here) reach the CUDA columns, the [memory] events of
    device 1:0 and the leak view, never the CPU's."""
    trace, table = traced([PYTHON, WORKLOAD], tmp_path, "--device")
    rows = {r["name"]: r for r in trace["otherData"]["op_stats"]}
    assert rows["cuda_alloc"]["self_device_memory_usage"] == MIB
    assert abs(rows["cuda_alloc"]["self_cpu_memory_usage"]) <= 8 * KIB
    dev = [e["args"] for e in trace["traceEvents"]
           if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1]
    assert [a["Bytes"] for a in dev] == [MIB, MIB, -MIB]
    assert all(a["Device Id"] == 0 for a in dev)
    assert [a["Total Reserved"] for a in dev] == [20 * MIB] * 3
    assert [a["Total Allocated"] for a in dev] == [MIB, 2 * MIB, MIB]
    reserved = [e["args"]["bytes"] for e in trace["traceEvents"]
                if e.get("ph") == "C" and
                e["name"] == "Reserved bytes (CUDA:0)"]
    assert reserved == [20 * MIB] * 3
    assert "Self CUDA Mem" in table
    assert "Memory on CUDA:0: 1.00 Mb live" in table
    live = trace["otherData"]["rfbpf_live_blocks"]
    assert any(b["device"] == "CUDA" and b["bytes"] == MIB for b in live)


def test_perfetto_has_the_instants_and_a_live_bytes_track(tmp_path):
    """-o FILE.perfetto-trace: each allocation and free a [memory] instant
    on its thread, and a counter track of the CPU's live bytes whose every
    value is the running sum of the instants' Bytes."""
    pf, _ = traced([PYTHON, WORKLOAD], tmp_path,
                   out_name="m.perfetto-trace")
    inst = sorted((e[0], e[6]["Bytes"]) for e in pf.events
                  if e[3] == 3 and e[4] == "[memory]")
    assert len(inst) == (pf.counts["memory_allocations"] +
                         pf.counts["memory_frees"]) > 3000
    assert all({"Addr", "Total Allocated", "Total Reserved"} <=
               e[6].keys() for e in pf.events if e[4] == "[memory]")
    tracks = {u for u, n in pf.named.items() if n == "Live bytes (CPU)"}
    assert len(tracks) == 1
    values = [v for _, tr, v in sorted(pf.counters) if tr in tracks]
    running, sums = 0, []
    for _, b in inst:
        running += b
        sums.append(running)
    # As multisets: two threads' events in one nanosecond may be ordered
    # either way.
    assert collections.Counter(values) == collections.Counter(sums)
    assert max(values) >= 12 * MIB


def test_fleet_memory_profiles_and_metrics(tmp_path):
    """A fleet daemon with --memory on a job that keeps 64 KiB more each
    iteration (a grow scope): Prometheus's promtool reads the metrics,
    the job's live bytes estimate what it kept since the attach, and
    go tool pprof reads the four heap sample types, with grow's blocks
    in the in-use profile."""
    from test_fleet import (Daemon, metric, pprof_files, pprof_top,
                            promtool_check)
    prom = tmp_path / "rfbpf.prom"
    with Job([PYTHON, WORKLOAD, "--forever", "--grow"]) as job:
        d = Daemon(["-p", str(job.pid), "--memory", "--memory-sample",
                    "65536", "--interval", "2", "--budget", "50",
                    "--pprof-dir", str(tmp_path), "--prom-file",
                    str(prom)])
        try:
            d.wait_for(r"traced")
            grown_at_attach = last_grown(job)
            # The in-use profile holds the blocks made in a burst's
            # measured part (about 1 in 12 here): wait for a profile
            # with some of grow's.
            assert wait_until(lambda: len(list(tmp_path.glob(
                "profile-*.pb.gz"))) >= 4 and " grow\n" in pprof_top(
                    latest(tmp_path), "-sample_index=inuse_space",
                    "-cum")[1], timeout=120), d.log()
            text = prom.read_text()
            grown = last_grown(job) - grown_at_attach
        finally:
            assert d.finish() == 0, d.log()
    promtool_check(text)
    live = metric(text, "rfbpf_job_live_bytes", pid=job.pid, device="CPU")
    # What it kept since the attach, and the 4 MiB (or two, while one
    # replaces the other) of keep_4mb; byte sampling at 64 KiB.
    kept = grown * 64 * KIB
    assert 0.6 * kept <= live <= 1.4 * kept + 8 * MIB + 512 * KIB, \
        (live, kept)
    total = metric(text, "rfbpf_job_alloc_bytes_total", pid=job.pid)
    empty = metric(text, "rfbpf_op_alloc_bytes_total", pid=job.pid,
                   op="aten::empty")
    # The ops share the job's total out as the bursts saw them allocate:
    # never more than it, and here nearly all of it is aten::empty's.
    assert total > 0 and 0 < empty <= total * 1.000001, (total, empty)
    assert metric(text, "rfbpf_op_alloc_bytes_total", pid=job.pid,
                  op="aten::fill_") == 0
    files = sorted(str(f) for f in tmp_path.glob("profile-*.pb.gz"))
    # Every interval's, merged: one interval's bursts may catch none of
    # aten::empty's sampled blocks.
    rc, out = pprof_files(files, "-sample_index=alloc_space", "-top")
    assert rc == 0 and "aten::empty" in out, out
    for index in ("alloc_objects", "inuse_objects"):
        rc, out = pprof_top(files[-1], f"-sample_index={index}")
        assert rc == 0, out
    rc, out = pprof_top(files[-1], "-sample_index=inuse_space", "-cum")
    assert rc == 0 and " grow\n" in out, out


def latest(directory):
    return str(max(directory.glob("profile-*.pb.gz"),
                   key=lambda f: f.stat().st_mtime))


def last_grown(job):
    """The job's last "grown N" line's N."""
    lines = [l for l in job.lines if l.startswith("grown ")]
    return int(lines[-1].split()[1]) if lines else 0


DATALOADER = os.path.join(ROOT, "tests", "workloads", "dataloader_train.py")


def test_forked_workers_and_a_kill_9_leave_the_job_as_untraced():
    """The allocator probes are on the job's c10: its DataLoader workers,
    forked with them in place, allocate and free through them too. Traced
    from the start with --memory the job's losses are an untraced run's;
    attached and then killed with SIGKILL mid-run, rfbpf leaves a job
    that finishes with the same losses (its uprobes go with its fds)."""
    args = [DATALOADER, "--epochs", "2", "--workers", "2"]
    untraced = run([PYTHON, *args])
    assert untraced.returncode == 0, untraced.stderr
    traced = run([RFBPF, "-q", "--memory", "--", PYTHON, *args])
    assert traced.returncode == 0, traced.stderr
    assert [l for l in traced.stdout.splitlines()
            if l.startswith("epoch")] == untraced.stdout.splitlines()
    assert "Self CPU Mem" in traced.stdout
    with Job([PYTHON, *args, "--wait"]) as job:
        p, _ = start_rfbpf(["-q", "-p", str(job.pid), "--memory"])
        job.go()
        assert wait_until(lambda: job.lines, timeout=120)  # an epoch ran
        p.kill()
        p.wait(timeout=30)
        out, _ = job.communicate(timeout=300)
        assert job.returncode == 0
        assert "".join(job.lines) == untraced.stdout


@pytest.mark.parametrize("args,why", [
    (["--memory", "--sample", "0.5", "--", PYTHON, "-c", "pass"],
     "--sample"),
    (["--memory", "--tree-sample", "0.5", "--", PYTHON, "-c", "pass"],
     "--tree-sample"),
    (["--memory-sample", "4096", "--", PYTHON, "-c", "pass"],
     "--memory-sample needs --memory"),
    (["--memory", "--memory-sample", "-1", "--", PYTHON, "-c", "pass"],
     "--memory-sample"),
    (["--memory-folded", "f", "--", PYTHON, "-c", "pass"],
     "--memory-folded needs --memory"),
])
def test_bad_memory_options_get_one_line(args, why):
    r = run([RFBPF, *args])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and why in lines[0], r.stderr


def test_a_process_without_pytorch(tmp_path):
    with Job([PYTHON, "-c", "print('ready', flush=True); "
              "import time; time.sleep(60)"]) as job:
        r = run([RFBPF, "-p", str(job.pid), "--memory", "-d", "1"])
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no libtorch_cpu.so" in r.stderr
