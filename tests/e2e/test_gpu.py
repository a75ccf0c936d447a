"""GPU attribution end to end, without a GPU: the real CUPTI agent
(librfbpf_cupti.so) inside a real PyTorch job, fed by libgpu_synth.so the
way the CUDA driver and CUPTI would feed it (tests/workloads/
gpu_synthetic.py), traced by rfbpf through the agent's real probes, the
real BPF programs and the real ring buffer.

What a GPU would add and these tests cannot show: real CUPTI subscription,
real activity buffers and the timestamp callback (CUPTI refuses the
subscription without a driver, so the agent sets no clock here and the
simulated records carry CLOCK_MONOTONIC times as they are). One test
swaps in the stand-in libcupti (tests/gpu/sim_libcupti.c) to play a CUPTI
held by another tool.
"""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from harness import (NEEDS_CUDA_TOOLKIT, PYTHON, RFBPF, ROOT, STATE_DIR, Job,
                     KernelCounts, load_trace, ns, ops_of, run, start_rfbpf,
                     stop)

AGENT = os.path.join(ROOT, "build", "cupti", "librfbpf_cupti.so")
SYNTH = os.path.join(ROOT, "build", "cupti", "libgpu_synth.so")
GPU_WORKLOAD = os.path.join(ROOT, "tests", "workloads", "gpu_synthetic.py")
KERNEL, GRAPH, DRIVER, MEMCPY, MEMSET, SYNC, V1 = range(7)
API = {KERNEL: "cudaLaunchKernel", GRAPH: "cudaGraphLaunch",
       DRIVER: "cuLaunchKernel", MEMCPY: "cudaMemcpyAsync",
       MEMSET: "cudaMemsetAsync", SYNC: "cudaStreamSynchronize"}
# What a sync waits in gpu_synth.c (SYNC_WAIT_NS).
SYNC_WAIT_NS = 300000
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
API_CATS = {"cuda_runtime", "cuda_driver"}

pytestmark = NEEDS_CUDA_TOOLKIT


@pytest.fixture(autouse=True)
def agent_built():
    assert os.path.exists(AGENT) and os.path.exists(SYNTH), \
        "the CUDA toolkit is here but build/cupti was not built (make cupti)"


class GpuJob(Job):
    """gpu_synthetic.py in the background, attached to with -p."""

    def __init__(self, tmp_path, *args, env=None):
        self.expect_path = tmp_path / "expect.json"
        super().__init__([PYTHON, GPU_WORKLOAD, "--expect",
                          str(self.expect_path), *args],
                         stderr=subprocess.PIPE,
                         env={**os.environ, **(env or {})})

    def wait_line(self, prefix, timeout=120):
        """The next line that starts with prefix, and the lines read to
        it."""
        deadline = time.time() + timeout
        lines = []
        while time.time() < deadline:
            line = self.next_line(max(0, deadline - time.time()))
            if not line:
                break
            lines.append(line)
            if line.startswith(prefix):
                return line, lines
        raise AssertionError(f"no '{prefix}' line: {lines} "
                             f"{self.p.stderr.read() if self.p.poll() is not None else ''}")

    def expected(self):
        with open(self.expect_path) as f:
            return json.load(f)

    def finish(self):
        """(status, all it printed after ready, its stderr)."""
        rc, out = super().finish(120)
        return rc, out, self.p.stderr.read()


def traced_job(tmp_path, extra=(), job_args=(), env=None, during=None):
    """Runs the job under `rfbpf -p` until its work is done (then calls
    during(job) while rfbpf still traces); returns the trace, the
    expectations, rfbpf's stdout/stderr and the job."""
    # --hold: the job outlives rfbpf's final flush and detach.
    out_json = tmp_path / "t.json"
    with GpuJob(tmp_path, "--wait-tracer", "--hold", "5", *job_args,
                env=env) as job:
        r, _ = start_rfbpf(["-q", "-p", str(job.pid), "-o", str(out_json),
                            "--gpu-folded", str(tmp_path / "g.folded"),
                            "--top", "0", *extra])
        job.wait_line("work done")
        if during:
            during(job)
        code, out, err = stop(r)
        assert code == 0, err
        rc, jout, jerr = job.finish()
        assert rc == 0 and "exit ok" in jout, jerr
        return load_trace(out_json), job.expected(), out, err, job


def cpu_ops(trace):
    """The op slices (not GPU work, not CUDA API calls)."""
    return [e for e in ops_of(trace)
            if e["cat"] not in GPU_CATS | API_CATS]


def op_slices(trace, with_calls=False):
    """The op slices of each thread (and the API calls' too), for "which
    slice encloses t"."""
    by_tid = {}
    for e in ops_of(trace):
        if e["cat"] in GPU_CATS or (e["cat"] in API_CATS and
                                    not with_calls):
            continue
        by_tid.setdefault(e["tid"], []).append(
            (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"], e))
    return by_tid


def innermost(slices, ts):
    best = None
    for s in slices:
        if s[0] <= ts <= s[1] and (best is None or s[0] >= best[0]):
            best = s
    return best


def gpu_events(trace):
    return [e for e in trace["traceEvents"]
            if e["ph"] == "X" and e["cat"] in GPU_CATS]


def api_calls(trace):
    return [e for e in trace["traceEvents"]
            if e["ph"] == "X" and e["cat"] in API_CATS]


def test_every_kernel_is_joined_to_the_op_that_launched_it(tmp_path):
    trace, exp, out, err, _ = traced_job(tmp_path)
    launches = {int(k): v for k, v in exp["launches"].items()}
    records = exp["records"]
    gpu = gpu_events(trace)
    # The job's CUPTI (the toolkit's, CUDA 13) is named with its version
    # (with no GPU here it cannot subscribe; gpu_synth plays the records).
    assert re.search(r"rfbpf: GPU: CUPTI 13 \(API 13\d{4}\): ", err), err
    assert 130000 <= trace["otherData"]["gpu"]["cupti_version"] < 140000
    # Every record the job made arrived, once.
    assert len(gpu) == len(records)
    by_corr = {}
    for e in gpu:
        by_corr.setdefault(e["args"]["correlation"], []).append(e)
    for corr, want in launches.items():
        got = by_corr.get(corr, [])
        n = sum(1 for r in records if r["corr"] == corr)
        assert len(got) == n, (corr, want)
        for e in got:
            # 100% attribution: the op that was innermost at the launch.
            assert e["args"].get("launched by") == want["op"], (corr, e)
            assert e["args"]["launch tid"] == want["tid"]
            # Nested driver calls were reported once, as the runtime call.
            assert e["args"]["launch api"] == API[want["kind"]]
    # Graph launches fan out to all of their kernels.
    graphs = [c for c, v in launches.items() if v["kind"] == GRAPH]
    assert graphs and all(len(by_corr[c]) == 4 for c in graphs)
    # Clock: the record times the agent converted are the CLOCK_MONOTONIC
    # times the job put in, to the nanosecond (trace has ns digits).
    want_times = sorted((r["corr"], r["start_ns"], r["end_ns"])
                        for r in records)
    base = trace["otherData"]["base_monotonic_ns"]
    got_times = sorted((e["args"]["correlation"], base + ns(e["ts"]),
                        base + ns(e["ts"]) + ns(e["dur"])) for e in gpu)
    assert got_times == want_times
    # Copies and sets are on their stream's track with their bytes, named
    # from their kinds as Kineto names them.
    copies = [e for e in gpu if e["cat"] == "gpu_memcpy"]
    assert copies and all(e["tid"] == 9 and e["args"]["bytes"] == 1 << 20
                          and e["name"] == "Memcpy HtoD (Pageable -> Device)"
                          for e in copies)
    sets = [e for e in gpu if e["cat"] == "gpu_memset"]
    assert sets and all(e["tid"] == 9 and e["name"] == "Memset (Device)"
                        for e in sets)
    # Every GPU event is on its device's process, pid 0 for GPU 0.
    assert all(e["pid"] == 0 for e in gpu)
    other = trace["otherData"]
    g = other["gpu"]
    n_syncs = sum(1 for v in launches.values() if v["kind"] == SYNC)
    assert n_syncs > 0
    assert other["drops"] == 0
    assert g["launches"] == len(launches) - n_syncs
    assert g["syncs"] == n_syncs
    # One BPF program takes the launch and the sync probes.
    assert g["bpf_launch_hits"] == len(launches)
    assert g["agent_launches"] == len(launches)
    assert g["records"] == len(records) == g["agent_records"]
    assert g["records_without_launch"] == 0
    assert g["launches_without_record_at_detach"] == 0
    assert g["launches_in_unrecorded_ops"] == 0
    assert g["launches_outside_ops"] == sum(
        1 for v in launches.values() if v["op"] is None)
    assert g["bad_records"] == 0 and g["agent_untraced_records"] == 0
    # Names longer than the event's 255 bytes arrive cut and are read
    # whole from where CUPTI keeps them in the job: none stays cut.
    long_ones = [e for e in gpu if "long_namespace_13::kernel" in e["name"]]
    assert long_ones and g["kernel_names_read_whole"] == len(long_ones)
    assert g["kernel_names_truncated"] == 0
    assert not any(e["args"].get("name_truncated") for e in gpu)
    assert g["final_flush_missed"] is False
    assert g["agent_counters_stale"] is False
    # The table has the CUDA columns, with the right sums for one op.
    assert "Self CUDA" in out and "CUDA total" in out and "Kernels" in out
    row = next(l for l in out.splitlines()
               if l.startswith("gpu_test::graph_replay "))
    n_graph = len(graphs)
    assert row.split()[-2] == str(4 * n_graph)
    # GPU wait: every sync is in to_device, which runs no other op that
    # syncs; its time is its syncs' calls, each within the bounds the job
    # read around it and at least the time it waited.
    syncs = [v for v in launches.values() if v["kind"] == SYNC]
    assert {v["op"] for v in syncs} == {"gpu_test::to_device"}
    (stats,) = [s for s in other["op_stats"]
                if s["name"] == "gpu_test::to_device"]
    assert len(syncs) * SYNC_WAIT_NS <= stats["gpu_wait_ns"] <= \
        sum(v["after_ns"] - v["before_ns"] for v in syncs)
    row = next(l for l in out.splitlines()
               if l.startswith("gpu_test::to_device "))
    assert row.split()[-1] == "%.3fms" % (stats["gpu_wait_ns"] / 1e6)
    assert "GPU: %d launches, %d records, %d syncs" % (
        len(launches) - n_syncs, len(records), n_syncs) in out


def demangled(names):
    """What binutils' c++filt (libiberty's demangler, not the one rfbpf
    uses) makes of each name."""
    r = subprocess.run(["c++filt"], input="\n".join(names), text=True,
                       capture_output=True, check=True)
    return dict(zip(names, r.stdout.splitlines()))


def test_kernels_are_shown_demangled(tmp_path):
    trace, exp, _, _, _ = traced_job(tmp_path)
    kernels = [e for e in gpu_events(trace) if e["cat"] == "kernel"]
    mangled = sorted({e["args"]["mangled name"] for e in kernels
                      if "mangled name" in e["args"]})
    # gemm_tiled, vectorized_elementwise_kernel, reduce_sum, and the
    # 293-byte one, which the event cut and rfbpf read whole.
    assert len(mangled) == 4
    assert max(len(m) for m in mangled) == 293
    want = demangled(mangled)
    for e in kernels:
        assert e["name"] == want[e["args"]["mangled name"]] != \
            e["args"]["mangled name"]
        assert "(" in e["name"]
    # The folded stacks show the same names.
    folded = (tmp_path / "g.folded").read_text()
    assert "[gpu] gemm_tiled(float const*, float const*, float*, int, " \
        "int, int) " in folded


def test_every_call_is_a_slice_on_its_thread(tmp_path):
    """Each call the job made (launches, copies, sets, syncs) is one
    cuda_runtime slice (cuda_driver for a driver launch) on its thread, in
    its process, within the times the job saw around the call, with its
    correlation id, cbid and the op's External id; a sync's slice holds
    the wait, and has no flow."""
    trace, exp, _, _, job = traced_job(tmp_path)
    base = trace["otherData"]["base_monotonic_ns"]
    calls = {int(k): v for k, v in exp["launches"].items()}
    by_corr = {}
    for e in api_calls(trace):
        by_corr.setdefault(e["args"]["correlation"], []).append(e)
    assert set(by_corr) == set(calls)
    ops = op_slices(trace)
    externals = {}
    for corr, want in calls.items():
        (e,) = by_corr[corr]
        assert e["name"] == API[want["kind"]]
        assert e["cat"] == ("cuda_driver" if want["kind"] == DRIVER
                            else "cuda_runtime")
        assert e["pid"] == job.pid and e["tid"] == want["tid"]
        start = base + ns(e["ts"])
        end = start + ns(e["dur"])
        assert want["before_ns"] <= start < end <= want["after_ns"], \
            (corr, want, start, end)
        assert isinstance(e["args"]["cbid"], int) and e["args"]["cbid"] > 0
        assert "enter_unknown" not in e["args"]
        # Inside the op it was made in.
        op = innermost(ops.get(e["tid"], []), ns(e["ts"]))
        assert (op and op[2]) == want["op"], (corr, want, op)
        if want["op"] is None:
            assert "External id" not in e["args"]
            continue
        ext = e["args"]["External id"]
        # One id per op instance (the op side writes op id + 1).
        assert externals.setdefault(id(op[3]), ext) == ext
        if "External id" in op[3]["args"]:
            assert op[3]["args"]["External id"] == ext
        if want["kind"] == SYNC:
            assert end - start >= SYNC_WAIT_NS
    assert len(set(externals.values())) == len(externals) > 0
    # Kernels, copies and sets carry their call's External id.
    for e in gpu_events(trace):
        (call,) = by_corr[e["args"]["correlation"]]
        assert e["args"].get("External id") == \
            call["args"].get("External id")
    # No flow starts at a sync.
    syncs = {c for c, v in calls.items() if v["kind"] == SYNC}
    assert syncs
    assert not any(e.get("cat") == "ac2g" and
                   e["args"]["correlation"] in syncs
                   for e in trace["traceEvents"])


def test_launches_of_an_older_agent_are_read(tmp_path):
    """An agent built before rf_gpu_launch.enter_ns was appended sends the
    76-byte first layout: rfbpf reads it, and nothing past it (the job
    leaves a decoy enter time there), so its calls start at their exit,
    flagged, and their kernels are joined to them as before."""
    trace, exp, _, _, job = traced_job(tmp_path,
                                       job_args=("--v1-launches", "3"))
    base = trace["otherData"]["base_monotonic_ns"]
    calls = {int(k): v for k, v in exp["launches"].items()}
    old = {c for c, v in calls.items() if v["kind"] == V1}
    assert len(old) == 3 * 3
    by_corr = {}
    for e in api_calls(trace) + gpu_events(trace):
        by_corr.setdefault(e["args"]["correlation"], []).append(e)
    for corr, want in calls.items():
        call = [e for e in by_corr[corr] if e["cat"] in API_CATS]
        assert len(call) == 1
        call = call[0]
        at = base + ns(call["ts"])
        if corr not in old:
            assert "enter_unknown" not in call["args"]
            continue
        assert call["args"]["enter_unknown"] is True
        assert ns(call["dur"]) == 0
        assert want["before_ns"] <= at <= want["after_ns"]
        (kernel,) = [e for e in by_corr[corr] if e["cat"] == "kernel"]
        assert kernel["args"]["launched by"] == "gpu_test::v1"
        assert kernel["args"]["External id"] == call["args"]["External id"]
    g = trace["otherData"]["gpu"]
    assert g["bad_records"] == 0
    assert g["launches_without_record_at_detach"] == 0


def test_gpu_processes_are_named_as_kineto_does(tmp_path):
    trace, _, _, _, _ = traced_job(tmp_path)
    meta = [(e["name"], e["pid"], e["tid"], e["args"])
            for e in trace["traceEvents"] if e["ph"] == "M"]
    assert ("process_name", 0, 0, {"name": "GPU 0"}) in meta
    assert ("process_labels", 0, 0, {"labels": "GPU 0"}) in meta
    assert ("process_sort_index", 0, 0, {"sort_index": 5000000}) in meta
    for stream in (7, 9):
        assert ("thread_name", 0, stream,
                {"name": f"stream {stream}"}) in meta
        assert ("thread_sort_index", 0, stream,
                {"sort_index": stream}) in meta


def test_launch_mode_finds_the_agent_when_it_loads(tmp_path):
    """rfbpf -- COMMAND: the agent appears only once the job starts CUDA
    (here: after import torch, inside an op); rfbpf notices it and attaches
    then, and the launch in the op that was already open is attributed to
    it all the same."""
    out_json = tmp_path / "t.json"
    expect = tmp_path / "expect.json"
    r = run([RFBPF, "-q", "--no-table", "-o", str(out_json), "--", PYTHON,
             GPU_WORKLOAD, "--expect", str(expect), "--wait-tracer",
             "--load-inside-op", "--steps", "10"])
    assert r.returncode == 0, r.stderr
    assert "CUPTI agent" in r.stderr and "found" in r.stderr
    trace = load_trace(out_json)
    exp = json.loads(expect.read_text())
    launches = {int(k): v for k, v in exp["launches"].items()}
    gpu = gpu_events(trace)
    assert len(gpu) == len(exp["records"]) > 0
    for e in gpu:
        assert e["args"].get("launched by") == \
            launches[e["args"]["correlation"]]["op"]
    assert "gpu_test::init" in {v["op"] for v in launches.values()}
    assert trace["otherData"]["gpu"]["launches_outside_ops"] == sum(
        1 for v in launches.values() if v["op"] is None)
    assert trace["otherData"]["gpu"]["agent_counters_stale"] is True


def test_flows_go_from_the_launching_call_to_each_kernel(tmp_path):
    trace, exp, _, _, _ = traced_job(tmp_path)
    slices = op_slices(trace, with_calls=True)
    ops = op_slices(trace)
    kernels = {}
    for e in gpu_events(trace):
        kernels.setdefault((e["pid"], e["tid"], ns(e["ts"])), e)
    starts, finishes = {}, {}
    for e in trace["traceEvents"]:
        if e.get("cat") != "ac2g":
            continue
        assert e["name"] == "ac2g" and "correlation" in e["args"]
        (starts if e["ph"] == "s" else finishes)[e["id"]] = e
    assert starts and set(starts) == set(finishes)
    # Every record came from a launch rfbpf saw: one flow each.
    assert len(starts) == len(gpu_events(trace)) == len(exp["records"])
    for fid, s in starts.items():
        f = finishes[fid]
        assert f["ph"] == "f" and f["bp"] == "e"
        assert s["args"]["correlation"] == f["args"]["correlation"]
        # The start is the launch's API slice: the innermost slice at
        # its time on its thread, which starts there...
        call = innermost(slices[s["tid"]], ns(s["ts"]))
        assert call and call[3]["cat"] in API_CATS
        assert call[0] == ns(s["ts"])
        assert call[3]["args"]["correlation"] == s["args"]["correlation"]
        # ...inside the op the kernel names as its launcher...
        k = kernels[(f["pid"], f["tid"], ns(f["ts"]))]
        op = innermost(ops.get(s["tid"], []), ns(s["ts"]))
        assert (op and op[2]) == k["args"].get("launched by")
        # ...and the finish is the kernel's start, after the launch.
        assert ns(f["ts"]) > ns(s["ts"])


def test_gpu_folded_hangs_kernels_under_their_op_stacks(tmp_path):
    trace, exp, _, _, _ = traced_job(tmp_path)
    lines = (tmp_path / "g.folded").read_text().splitlines()
    weights = {}
    for line in lines:
        stack, w = line.rsplit(" ", 1)
        weights[stack] = weights.get(stack, 0) + int(w)
    total = sum(r["end_ns"] - r["start_ns"] for r in exp["records"])
    assert sum(weights.values()) == total
    assert all(s.split(";")[-1].startswith("[gpu] ") for s in weights)
    graph = [s for s in weights
             if s.split(";")[-2] == "gpu_test::graph_replay"]
    assert graph and all(".forward;gpu_test::graph_replay;" in s
                         for s in graph)
    assert any("[outside any op];[gpu] " in s for s in weights)


def probe_counts(tmp_path, cmd):
    """Kernel-side hit counts of the agent's three GPU probes (tracefs
    uprobes counted by perf on every CPU: cmd may be rfbpf's launch mode,
    harness.KernelCounts.perf_args says why), while cmd runs."""
    syms = {"gpu_launch": "rfbpf_probe_gpu_launch",
            "gpu_sync": "rfbpf_probe_gpu_sync",
            "gpu_activity": "rfbpf_probe_gpu_activity"}
    kc = KernelCounts(AGENT, syms, {k: k for k in syms})
    try:
        out = tmp_path / "perf.txt"
        r = run([*kc.perf_args(str(out), every_cpu=True), *cmd])
        return r, kc.parse(out, kc.events)
    finally:
        kc.close()


SIM_CUPTI = os.path.join(ROOT, "build", "cupti", "sim")
# The kinds the stand-in's "other tool" enables (tests/gpu/sim_libcupti.c):
# concurrent kernel (10), memcpy (1), memset (2), runtime (5).
OTHER_KINDS = (1 << 10) | (1 << 1) | (1 << 2) | (1 << 5)
# The kind only the agent enables: peer copies (MEMCPY2, 22).
OUR_ONLY_KINDS = 1 << 22


def test_cupti_held_by_another_tool_is_named_and_left_alone(tmp_path):
    """The job's CUPTI (the stand-in libcupti, which allows one subscriber
    per process) is held by "Kineto", as torch.profiler leaves it: the
    agent's subscribe fails, it enables no kind and keeps its clock off
    CUPTI, and rfbpf names the holder on stderr, in the table's footer and
    in the trace's otherData."""
    trace, expect, out, err, _ = traced_job(
        tmp_path, job_args=("--other-cupti", "Kineto"),
        env={"LD_LIBRARY_PATH": SIM_CUPTI})
    other = expect["other_cupti"]
    assert other == {"kinds": OTHER_KINDS, "clock_replaced": False,
                     "buffers_are_its_own": True, "holder": "Kineto"}, other
    assert re.search(r"rfbpf: GPU: CUPTI 13 \(API \d+\): held by Kineto",
                     err), err
    assert re.search(r"CUPTI 13 \(API \d+\): held by Kineto", out), out
    gpu = trace["otherData"]["gpu"]
    assert gpu["cupti"] == "held by another tool", gpu
    assert gpu["cupti_holder"] == "Kineto"
    assert gpu["cupti_result"] == 39        # MULTIPLE_SUBSCRIBERS


def test_another_tool_starting_during_the_lease_gets_cupti(tmp_path):
    """The agent holds the job's CUPTI (the stand-in); then another tool
    starts in the job, as torch.profiler does when a profile begins during
    rfbpf's run: it subscribes, registers its buffers and enables its
    kinds. rfbpf's uprobe on the job's cuptiSubscribe sees the call, says
    so, and signals the calling thread, whose handler (the agent's) leaves
    CUPTI before the call goes on: the agent's kinds are off, and the
    other tool's buffers, kinds and CUPTI's clock stay as it set them,
    after rfbpf is gone too."""
    trace, expect, out, err, _ = traced_job(
        tmp_path, job_args=("--other-cupti-during",),
        env={"LD_LIBRARY_PATH": SIM_CUPTI})
    assert expect["agent"]["yielded"] == 1, (expect["agent"], err)
    assert expect["agent"]["yields_in_call"] == 1, (expect["agent"], err)
    other = expect["other_cupti"]
    assert other == {"kinds": OTHER_KINDS,
                     "clock_replaced": False, "buffers_are_its_own": True,
                     "holder": ""}, other
    m = re.search(r"rfbpf: GPU: another tool started using CUPTI in the job "
                  r'\(thread (\d+) "[^"]*" called (cupti\w+)', err)
    assert m, err
    assert m.group(2) == "cuptiSubscribe"   # Kineto's first call
    gpu = trace["otherData"]["gpu"]
    assert gpu["cupti"] == "taken by another tool", gpu
    assert gpu["cupti_taken_by"] == "cuptiSubscribe"
    assert gpu["cupti_taken_tid"] == int(m.group(1))
    assert "then another tool started using it" in out, out


def test_kineto_starting_during_the_lease_subscribes(tmp_path):
    """Kineto as torch 2.11 has it on a real GPU: it starts with
    cuptiSubscribe and gives up its CUDA activity for good if that fails
    (an H200 showed a profile of 0 kernels while rfbpf held CUPTI). So the
    agent leaves inside that call, in the calling thread (rfbpf's probe
    sends it the agent's signal): Kineto's subscribe succeeds, it keeps
    its subscription and sets up its buffers and kinds; none of the
    agent's kinds is left on, and its buffers all came back in its flush
    (none left for Kineto to drop). The stand-in's launches go on calling
    the agent after it left, which real CUPTI does not, so launches
    without a record are not checked here: on the H200 there were none."""
    trace, expect, out, err, _ = traced_job(
        tmp_path, job_args=("--kineto-during",),
        env={"LD_LIBRARY_PATH": SIM_CUPTI})
    assert expect["agent"]["yields_in_call"] == 1, (expect["agent"], err)
    other = expect["other_cupti"]
    assert other == {"kinds": OTHER_KINDS, "clock_replaced": False,
                     "buffers_are_its_own": True, "holder": "",
                     "subscribed": True}, other
    gpu = trace["otherData"]["gpu"]
    assert gpu["cupti"] == "taken by another tool", gpu
    assert gpu["cupti_taken_by"] == "cuptiSubscribe"
    assert gpu["agent_left_cupti_inside_its_subscribe"] == 1, gpu
    assert gpu["agent_buffers_left_to_another_tool"] == 0, gpu
    assert "CUPTI left to it inside that call" in out, out


def test_a_job_that_takes_the_agents_signal_is_never_sent_it(tmp_path):
    """The job sets its own handler for the agent's signal after CUDA
    started; rfbpf's probe reads the job's handlers in the kernel and
    sends nothing, so the job's handler is never called. The agent leaves
    at its next tick instead, too late for this Kineto, whose subscribe
    fails."""
    trace, expect, out, err, _ = traced_job(
        tmp_path, job_args=("--kineto-during", "--take-yield-signal"),
        env={"LD_LIBRARY_PATH": SIM_CUPTI})
    other = expect["other_cupti"]
    assert other["job_signals"] == 0, other
    assert other["subscribed"] is False, other
    assert expect["agent"]["yields_in_call"] == 0, expect["agent"]
    assert expect["agent"]["yielded"] == 1, (expect["agent"], err)


def test_launches_captured_into_a_graph_are_counted_apart(tmp_path):
    """Launches made while their stream is captured into a CUDA graph (the
    agent sees a graph node made inside the call) ran nothing and get no
    record: they are counted apart in every output, not reported as
    launches, so they are not launches without a record either."""
    trace, expect, out, err, _ = traced_job(
        tmp_path, extra=("--top", "5"),
        job_args=("--captured", "4", "--threads", "2"))
    assert expect["agent"]["launches_captured"] == 8, expect["agent"]
    gpu = trace["otherData"]["gpu"]
    assert gpu["agent_launches_captured"] == 8, gpu
    assert gpu["launches_evicted_without_record"] == 0, gpu
    assert gpu["launches_without_record_at_detach"] == 0, gpu
    assert "launches captured into graphs 8" in out, out
    # None of them is drawn as a call: the call slices are exactly the
    # launches that ran, while the capture scopes are there.
    capture = [e for e in trace["traceEvents"]
               if e.get("name") == "gpu_test::capture"]
    assert len(capture) == 8
    calls = {e["args"]["correlation"] for e in api_calls(trace)}
    assert calls == {int(k) for k in expect["launches"]}


def test_without_a_tracer_the_agent_emits_nothing(tmp_path):
    exp_path = tmp_path / "e.json"
    r, counts = probe_counts(tmp_path, [PYTHON, GPU_WORKLOAD, "--expect",
                                        str(exp_path), "--steps", "10"])
    assert r.returncode == 0, r.stderr
    exp = json.loads(exp_path.read_text())
    # The kernel saw no call of any probe...
    assert counts == {"gpu_launch": 0, "gpu_sync": 0, "gpu_activity": 0}
    # ...and would have (the same count, with a tracer: the offsets are
    # right and the count can be anything but 0).
    r2, traced = probe_counts(tmp_path, [
        RFBPF, "-q", "--no-table", "--", PYTHON, GPU_WORKLOAD, "--expect",
        str(tmp_path / "e2.json"), "--steps", "10", "--wait-tracer"])
    assert r2.returncode == 0, r2.stderr
    exp2 = json.loads((tmp_path / "e2.json").read_text())
    n_syncs = sum(1 for v in exp2["launches"].values() if v["kind"] == SYNC)
    assert n_syncs > 0
    assert traced == {"gpu_launch": len(exp2["launches"]) - n_syncs,
                      "gpu_sync": n_syncs,
                      "gpu_activity": len(exp2["records"])}
    # ...and the agent switched no activity on, and says why it dropped
    # the records it was handed.
    a = exp["agent"]
    assert a["launches"] == 0 and a["records"] == 0
    assert a["activity_starts"] == 0 and a["activity_enabled"] == 0
    assert a["records_untraced"] == len(exp["records"]) > 0


def test_agent_activation_needs_no_ptrace(tmp_path):
    """RFBPF_SAMPLE=1: the agent registers the RecordFunction callback
    itself; rfbpf -p probes the agent's callback stubs and registers
    nothing (no /run/rfbpf state)."""
    def nothing_registered_by_rfbpf(job):
        # While rfbpf traces: it holds its lock but registered nothing.
        assert os.path.exists(f"{STATE_DIR}/{job.pid}.lock")
        assert not os.path.exists(f"{STATE_DIR}/{job.pid}.state")

    trace, exp, out, err, job = traced_job(
        tmp_path, env={"RFBPF_SAMPLE": "1"},
        during=nothing_registered_by_rfbpf)
    assert "switched RecordFunction on (RFBPF_SAMPLE)" in err
    assert exp["agent"]["torch_callback_handle"] > 0
    assert trace["otherData"]["probes"].startswith("CUPTI agent")
    names = {e["name"] for e in cpu_ops(trace)}
    assert {"gpu_test::matmul", "aten::mul", "aten::sum"} <= names
    launches = {int(k): v for k, v in exp["launches"].items()}
    gpu = gpu_events(trace)
    assert len(gpu) == len(exp["records"]) > 0
    for e in gpu:
        assert e["args"].get("launched by") == \
            launches[e["args"]["correlation"]]["op"]


def test_lease_runs_out_after_kill_9(tmp_path):
    with GpuJob(tmp_path, "--wait-tracer", "--hold", "14",
                "--steps", "5") as job:
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid)])
        job.wait_line("work done")
        job.wait_line("lease_seen 1")
        t_kill = time.monotonic()
        r.send_signal(signal.SIGKILL)
        r.wait(30)
        line, _ = job.wait_line("lease_seen 0", timeout=30)
        t_off = float(line.split()[-1])
        # The lease is 5 s ahead, renewed every second; the agent looks
        # every 100 ms.
        assert t_off - t_kill < 7.0
        # The RecordFunction callback the killed rfbpf left goes too.
        d = run([RFBPF, "--deactivate", "-p", str(job.pid)])
        assert d.returncode == 0 and "removed" in d.stdout, d.stderr
        rc, out, err = job.finish()
        assert rc == 0 and "exit ok" in out, err
