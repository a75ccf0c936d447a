"""-o FILE.perfetto-trace: Perfetto's own protobuf format, read back by a
wire-format reader of its own (tests/e2e/perfetto_reader.py) and by
`protoc --decode` against the project's .proto; the same slices as the
Chrome JSON of the same workload, at under a fifth of its bytes a slice;
streamed with bounded memory; GPU work and its flows with the stand-in
CUDA (tests/gpu). And -o FILE.json.gz, gzipped."""
import collections
import gzip
import json
import os
import re
import subprocess
import time

import pytest

from harness import (Job, NEEDS_CUDA_TOOLKIT, PYTHON, RFBPF, ROOT,
                    load_trace, rss_kb, run, start_rfbpf, stop)
from perfetto_reader import Trace

STEPS = os.path.join(ROOT, "tests", "workloads", "step_train.py")
BUSY = os.path.join(ROOT, "tests", "workloads", "busy_ops.py")
PROTO = os.path.join(ROOT, "user", "export", "perfetto_trace.proto")


def nesting(by_track):
    """(name, enclosing slice's name) counted over every track's slices,
    each given as (start, -duration, name): nesting rebuilt from times."""
    out = collections.Counter()
    for evs in by_track.values():
        stack = []
        for ts, mdur, name in sorted(evs):
            while stack and stack[-1][0] <= ts:
                stack.pop()
            out[(name, stack[-1][1] if stack else None)] += 1
            stack.append((ts - mdur, name))
    return out


def json_slices(trace):
    by_tid = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            by_tid[e["tid"]].append((e["ts"], -e["dur"], e["name"]))
    return nesting(by_tid)


def proto_slices(slices):
    by_track = collections.defaultdict(list)
    for s in slices:
        by_track[s["track"]].append((s["ts"], -s["dur"], s["name"]))
    return nesting(by_track)


def protoc_decode(path):
    """protoc's own reading of the file with the project's schema."""
    with open(path, "rb") as f:
        r = subprocess.run(["protoc", f"--proto_path={os.path.dirname(PROTO)}",
                            "--decode=perfetto.protos.Trace",
                            os.path.basename(PROTO)], stdin=f,
                           capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return r.stdout.decode()


def test_same_slices_as_the_json_in_a_fifth_of_the_bytes(tmp_path):
    """One deterministic workload, run twice in launch mode: once to the
    JSON, once to Perfetto's format."""
    job = [PYTHON, STEPS, "--steps", "60", "--step-sleep-ms", "0"]
    out = {}
    for ext in ("json", "perfetto-trace"):
        out[ext] = tmp_path / f"t.{ext}"
        r = run([RFBPF, "-q", "--no-table", "-o", str(out[ext]), "--",
                 *job], timeout=180)
        assert r.returncode == 0, r.stderr
    j = load_trace(out["json"])
    t = Trace(out["perfetto-trace"])
    slices, unmatched = t.slices()
    assert unmatched == 0
    ops = [s for s in slices if s["track"] in t.threads]
    assert json_slices(j) == proto_slices(ops)
    jx = sum(1 for e in j["traceEvents"] if e.get("ph") == "X")
    assert len(ops) == jx == int(j["otherData"]["ops"])
    # Every op on its thread's track, named as in the JSON.
    pids = {p for p, _ in t.processes.values()}
    assert len(t.threads) == \
        len({e["tid"] for e in j["traceEvents"] if e.get("ph") == "X"})
    assert len(pids) == 1
    cats = collections.Counter(s["cat"] for s in ops)
    assert set(cats) == {"cpu_op", "user_annotation"}, cats
    # Backward ops carry their sequence number and a flow from their
    # forward op's start.
    bwd = [s for s in ops if "Fwd thread id" in s["args"]]
    assert bwd and all("Sequence number" in s["args"] for s in bwd)
    starts = {f for ev in t.events if ev[4] == "fwdbwd" for f in ev[7]}
    ends = {f for s in bwd for f in s["flows"]}
    assert starts and ends <= starts and len(ends) >= len(bwd) // 2
    # The counters: what the JSON's otherData says.
    assert t.counts["ops"] == int(j["otherData"]["ops"])
    assert t.counts["drops"] == 0 and t.counts["unmatched_ends"] == 0
    # Under a fifth of the JSON's bytes a slice.
    per_json = os.path.getsize(out["json"]) / jx
    per_proto = os.path.getsize(out["perfetto-trace"]) / len(ops)
    assert per_json / per_proto >= 5, (per_json, per_proto)
    # protoc reads it with the schema, to the same number of slices.
    text = protoc_decode(out["perfetto-trace"])
    assert text.count("type: TYPE_SLICE_BEGIN") == len(slices)
    assert text.count("type: TYPE_SLICE_END") == len(slices)


def test_a_long_trace_streams_in_bounded_memory(tmp_path):
    out = tmp_path / "t.pftrace"
    with Job([PYTHON, BUSY]) as job:
        p, _ = start_rfbpf(["-p", str(job.pid), "-q", "--no-table",
                            "-o", str(out)])
        try:
            sizes, rss = [], []
            for _ in range(12):
                time.sleep(1)
                sizes.append(os.path.getsize(out) if out.exists() else 0)
                rss.append(rss_kb(p.pid))
        finally:
            code, _, err = stop(p)
        assert code == 0, err
    # Written as it runs, not at the end.
    assert sizes[3] > 0 and sizes[-1] > 2 * sizes[3], sizes
    assert max(rss) < 100 * 1024, rss
    slices, unmatched = Trace(out).slices()
    assert len(slices) > 10000 and unmatched == 0


def test_json_gz_is_gzipped(tmp_path):
    out = tmp_path / "t.json.gz"
    r = run([RFBPF, "-q", "--no-table", "-o", str(out), "--", PYTHON,
             STEPS, "--steps", "5"], timeout=120)
    assert r.returncode == 0, r.stderr
    with gzip.open(out) as f:
        t = json.load(f)
    assert sum(1 for e in t["traceEvents"] if e.get("ph") == "X") == \
        t["otherData"]["ops"] > 100


def test_the_flight_recorder_refuses_perfetto_files():
    r = run([RFBPF, "--flight-recorder", "5", "-o", "t.pftrace", "--",
             "true"])
    assert r.returncode == 2
    assert "--flight-recorder writes Chrome JSON" in r.stderr


@NEEDS_CUDA_TOOLKIT
def test_gpu_work_and_its_flows(tmp_path):
    from test_gpu import GpuJob
    out = tmp_path / "t.perfetto-trace"
    with GpuJob(tmp_path, "--wait-tracer", "--hold", "5") as job:
        r, _ = start_rfbpf(["-q", "-p", str(job.pid), "-o", str(out),
                            "--no-table"])
        job.wait_line("work done")
        code, _, err = stop(r)
        assert code == 0, err
        rc, jout, jerr = job.finish()
        assert rc == 0, jerr
        exp = job.expected()
    t = Trace(out)
    slices, unmatched = t.slices()
    assert unmatched == 0
    gpu = [s for s in slices if s["cat"] in
           ("kernel", "gpu_memcpy", "gpu_memset")]
    calls = [s for s in slices if s["cat"] in
             ("cuda_runtime", "cuda_driver")]
    assert len(gpu) == len(exp["records"]) and calls
    # Each on a stream track of a "GPU N" track.
    assert all(re.fullmatch(r"stream \d+|context syncs",
                            t.named[s["track"]]) for s in gpu)
    assert {v for v in t.named.values() if v.startswith("GPU ")}
    # A flow from the launching call to each.
    call_flows = {f for s in calls for f in s["flows"]}
    assert all(set(s["flows"]) & call_flows for s in gpu)
    assert {s["args"]["correlation"] for s in gpu} <= \
        {s["args"]["correlation"] for s in calls}
