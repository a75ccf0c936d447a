"""--sample P: RecordFunction's own geometric sampler picks the ops, rfbpf
scales counts and times by 1/P and reports standard errors. Checked over
more than 100,000 ops against the exact counts of the same deterministic
workload."""
import collections
import math
import os

import pytest

from harness import PYTHON, RFBPF, ROOT, capture, load_trace, ops_of, run

TINY = os.path.join(ROOT, "tests", "workloads", "tiny_ops.py")
STEPS = 9000


def tiny(tmp_path, steps, *opts):
    """The trace of tiny_ops.py --steps steps under rfbpf *opts."""
    return capture(tmp_path, [PYTHON, TINY, "--steps", str(steps)],
                   "--no-table", *opts, name=f"t{steps}{'_'.join(opts)}",
                   input="go\n")[0]


@pytest.fixture(scope="module")
def exact(tmp_path_factory):
    """Exact op counts per name at STEPS, from two full captures: the
    workload runs a fixed set-up plus the same ops every step."""
    tmp = tmp_path_factory.mktemp("exact")
    a = collections.Counter(e["name"] for e in ops_of(tiny(tmp, 200)))
    b = collections.Counter(e["name"] for e in ops_of(tiny(tmp, 400)))
    n = {}
    for name in a | b:
        per_step = (b[name] - a[name]) / 200
        assert per_step == int(per_step)
        n[name] = a[name] + per_step * (STEPS - 200)
    return n


@pytest.mark.parametrize("p", [0.1, 0.01])
def test_sampled_counts_and_estimates(exact, tmp_path, p):
    trace = tiny(tmp_path, STEPS, "--sample", str(p))
    other = trace["otherData"]
    assert float(other["sample_prob"]) == p
    assert other["drops"] == 0
    total = sum(exact.values())
    assert total > 100000
    k = len(ops_of(trace))
    sigma = math.sqrt(total * p * (1 - p))
    assert abs(k - p * total) <= 4 * sigma, (k, p * total, sigma)
    checked = 0
    for row in other["op_stats"]:
        n = exact.get(row["name"], 0)
        if n * p < 20:
            continue        # too rare for a normal error band
        est, se = float(row["est_calls"]), float(row["est_calls_se"])
        assert abs(est - n) <= 4 * se, (row["name"], est, n, se)
        assert est == pytest.approx(row["calls"] / p)
        checked += 1
    assert checked >= 5


def test_sampled_table_says_so(tmp_path):
    r = run([RFBPF, "-q", "--sample", "0.05", "--", PYTHON, TINY, "--steps",
             "2000"], input="go\n")
    assert r.returncode == 0, r.stderr
    assert "SAMPLED" in r.stdout and "p=0.05" in r.stdout
    assert "Est. calls" in r.stdout and "+- calls" in r.stdout


def test_threads_started_while_sampled_are_reported_as_biased(tmp_path):
    """PyTorch's sampler starts every thread from the same unseeded state:
    a thread per call samples the same ops each call. rfbpf cannot undo
    that, so it says so in the table and the trace, with the counts."""
    calls, p = 3000, 0.01
    out = tmp_path / "t.json"
    r = run([RFBPF, "-q", "--sample", str(p), "-o", str(out), "--", PYTHON,
             os.path.join(ROOT, "tests", "workloads", "thread_per_call.py"),
             "--calls", str(calls)])
    assert r.returncode == 0, r.stderr
    assert "BIASED:" in r.stdout and "threads started while traced" in \
        r.stdout, r.stdout
    other = load_trace(out)["otherData"]
    # Launch mode registers the callback around the job's first ops: a
    # call's thread that already ran by then was alive as tracing began,
    # so it is no thread started while traced (seen once in CI: 2999 of
    # 3000).
    assert other["threads_started"] >= calls - 1
    assert other["ops_on_started_threads"] * 20 >= other["ops"]
    assert "unseeded" in other["sampler_bias"]
    # What the line warns of: the estimates are off by far more than
    # their standard errors (each op ran 50 times a call).
    rows = {row["name"]: row for row in other["op_stats"]}
    worst = max(abs(float(rows[n]["est_calls"]) - 50 * calls) /
                max(float(rows[n]["est_calls_se"]), 1.0)
                for n in ("aten::add", "aten::mul") if n in rows)
    assert worst > 6, rows


def test_long_lived_threads_are_not_reported_as_biased():
    r = run([RFBPF, "-q", "--sample", "0.05", "--", PYTHON, TINY, "--steps",
             "2000"], input="go\n")
    assert r.returncode == 0, r.stderr
    assert "SAMPLED" in r.stdout and "BIASED" not in r.stdout
