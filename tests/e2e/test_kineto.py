"""The Chrome trace as Kineto writes it, and estimates that are sound under
sampling, on a 3-thread training workload whose steps are its top-level
op trees (tests/workloads/three_threads.py)."""
import collections
import os

import pytest

from harness import (PYTHON, RFBPF, ROOT, capture, load_trace, ops_of,
                    rebuild_nesting, run)

THREE = os.path.join(ROOT, "tests", "workloads", "three_threads.py")


def three(tmp_path, name, *opts):
    """(trace, table) of three_threads.py under rfbpf *opts."""
    trace, r = capture(tmp_path, [PYTHON, THREE, "--steps", "40"], *opts,
                       name=name)
    assert "done" in r.stdout
    return trace, r.stdout


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    return three(tmp_path_factory.mktemp("full"), "full")


def test_full_trace_reads_as_kineto(full):
    trace, _ = full
    assert trace["displayTimeUnit"] == "ms"
    assert trace["baseTimeNanoseconds"] > 1.6e18      # wall clock, ns
    ops = ops_of(trace)
    assert len({e["tid"] for e in ops}) >= 3
    for e in ops:
        scope = e["args"]["scope"]
        assert e["cat"] == ("user_annotation" if scope == "user_scope"
                            else "cpu_op"), e
        assert e["args"].get("Sequence number", 0) >= 0, e
        assert e["args"]["External id"] >= 1
        # Relative times: no absolute monotonic µs.
        assert 0 <= e["ts"] < 3600e6
    backward = [e for e in ops if e["args"]["scope"] == "backward_function"
                and "Sequence number" in e["args"]]
    assert backward
    assert all(e["args"].get("Fwd thread id", 0) > 0 for e in backward)
    forward = [e for e in ops if e["args"]["scope"] == "function"
               and "Sequence number" in e["args"]]
    assert forward and all(e["args"]["Fwd thread id"] == 0 for e in forward)
    # fwdbwd flows: a start on a forward op with the backward op's
    # sequence number, an end on the backward op, same id.
    flows = [e for e in trace["traceEvents"] if e.get("cat") == "fwdbwd"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    ends = {e["id"]: e for e in flows if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    at = {(e["tid"], e["ts"]): e for e in ops}
    for i, s in starts.items():
        f = ends[i]
        fwd, bwd = at[(s["tid"], s["ts"])], at[(f["tid"], f["ts"])]
        assert f["bp"] == "e"
        assert fwd["args"]["Sequence number"] == \
            bwd["args"]["Sequence number"]
        assert bwd["args"]["scope"] == "backward_function"
        assert fwd["ts"] < bwd["ts"]
    assert trace["otherData"]["fwdbwd_flows"] == len(starts)
    # Thread names are the comm alone; every thread has a sort index.
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    names = {e["tid"]: e["args"]["name"] for e in meta
             if e["name"] == "thread_name"}
    assert names and all(f"[{tid}]" not in n for tid, n in names.items())
    assert {e["tid"] for e in meta if e["name"] == "thread_sort_index"} \
        == set(names)


def test_sampled_self_time_is_not_available(tmp_path):
    trace, table = three(tmp_path, "sampled", "--sample", "0.1")
    other = trace["otherData"]
    assert "not available" in other["self_time"]
    assert other["op_stats"]
    for row in other["op_stats"]:
        assert "est_self_ns" not in row and "self_ns" not in row, row
        assert "est_total_ns" in row and "est_calls" in row
    assert "Self time: not available under --sample" in table
    r = run([RFBPF, "--sample", "0.1", "--folded", str(tmp_path / "f"),
             "--", PYTHON, "-c", "pass"])
    assert r.returncode != 0 and r.stderr.count("\n") == 1
    assert "--tree-sample" in r.stderr


def test_tree_sampled_estimates_agree_with_a_full_trace(full, tmp_path):
    """Whole steps kept with p = 0.25: every op's time is in its step, so
    the estimated self times add up to the steps' estimated total, and
    counts fall within 4 standard errors of the full trace's (a
    deterministic workload: the same ops every run)."""
    truth = collections.Counter(e["name"] for e in ops_of(full[0]))
    trace, table = three(tmp_path, "trees", "--tree-sample", "0.25")
    stats = {r["name"]: r for r in trace["otherData"]["op_stats"]}
    est_self = sum(r["est_self_ns"] for r in stats.values())
    step = stats["step"]["est_total_ns"]
    print(f"sum of est. self {est_self / 1e6:.1f} ms, est. step total "
          f"{step / 1e6:.1f} ms")
    assert 0.7 <= est_self / step <= 1.4
    checked = 0
    for name, r in stats.items():
        if truth[name] < 100:
            continue
        assert abs(r["est_calls"] - truth[name]) <= \
            4 * r["est_calls_se"] + 1, (name, r, truth[name])
        checked += 1
    assert checked >= 5
    assert "+- self" in table and "TREE-SAMPLED" in table


def test_torchscript_fork_wait_nests_on_every_thread(tmp_path):
    """model() ends on a pool thread: an async slice from its thread to
    that one, no X event crossing the slices either thread opened after
    it, and no self time (as torch.profiler gives async ops)."""
    out = tmp_path / "fork.json"
    r = run([RFBPF, "-q", "-o", str(out), "--top", "0", "--", PYTHON,
             os.path.join(ROOT, "tests", "workloads", "torchscript_fork.py")])
    assert r.returncode == 0, r.stderr
    trace = load_trace(out)
    assert trace["otherData"]["async_ends"] >= 20
    begins = [e for e in trace["traceEvents"] if e["ph"] == "b"]
    ends = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "e"}
    assert len(begins) == trace["otherData"]["async_ends"]
    for b in begins:
        e = ends[b["id"]]
        assert b["name"] == e["name"] == "model" and b["cat"] == "cpu_op"
        assert e["tid"] == b["args"]["end tid"] != b["tid"]
        assert e["ts"] >= b["ts"]
    assert not [e for e in ops_of(trace) if e["name"] == "model"]
    assert rebuild_nesting(trace)[1] == []
    model = next(s for s in trace["otherData"]["op_stats"]
                 if s["name"] == "model")
    assert model["self_ns"] == 0 and model["total_ns"] > 0
    row = next(l for l in r.stdout.splitlines() if l.startswith("model "))
    assert "0.000us" in row
