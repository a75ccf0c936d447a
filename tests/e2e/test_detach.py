"""Detaching from a job whose ops keep running: the start probes go
first, the loader drains, then the end probes go, so ops begun before the
detach end with their own end() instead of running on to the detach."""

from harness import Job, PYTHON, RFBPF, load_trace, run

# The job's own global observer keeps RecordFunction on after rfbpf
# leaves (--no-activate: rfbpf switches nothing), so ops run through the
# detach. Nested ops: x * 0.999 + k is two ops, to_copy nests inside to.
OBSERVED = """
import torch
torch.autograd._set_empty_test_observer(True, 1.0)
x = torch.zeros(64, dtype=torch.float64)
print("ready", flush=True)
n = 0
while True:
    x = (x * 0.999 + n % 7).to(torch.float32).to(torch.float64)
    n += 1
"""


def test_ops_running_through_the_detach_end_on_their_own():
    with Job([PYTHON, "-c", OBSERVED]) as job:
        for probes in ("entry", "auto"):
            out = f"/tmp/rfbpf-detach-{job.pid}-{probes}.json"
            r = run([RFBPF, "-q", "--no-activate", "--probes", probes, "-p",
                     str(job.pid), "-d", "1", "-o", out])
            assert r.returncode == 0, r.stderr
            other = load_trace(out)["otherData"]
            print(probes, {k: other[k] for k in (
                "ops", "end_events", "open_at_detach", "replaced",
                "unmatched_ends", "closed_by_parent")})
            assert other["ops"] > 1000
            # At most the ops open at the very moment of the last drain
            # (one thread, a few deep), never the tail of the run.
            assert other["open_at_detach"] <= 5
            assert other["replaced"] == 0 and other["closed_by_parent"] == 0
        assert job.p.poll() is None
