"""Ops flow through rfbpf and are forgotten: a full trace of a fast job
for two minutes keeps rfbpf's memory flat after warm-up, while the Chrome
trace streams to its file and still holds every op."""
import json
import os
import time

from harness import Job, PYTHON, ROOT, rss_kb, start_rfbpf, stop

BUSY = os.path.join(ROOT, "tests", "workloads", "busy_ops.py")



def test_full_trace_for_two_minutes_keeps_memory_flat(tmp_path):
    seconds = 130
    with Job([PYTHON, BUSY, "--seconds", str(seconds + 30),
              "--churn-ms", "500"]) as job:
        out = tmp_path / "trace.json"
        folded = tmp_path / "folded.txt"
        p, _ = start_rfbpf(["-q", "-p", str(job.pid), "-o", str(out),
                            "--folded", str(folded), "--top", "5"])
        samples = []
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            time.sleep(5)
            samples.append((time.monotonic() - start, rss_kb(p.pid),
                            out.stat().st_size))
        code, table, err = stop(p)
    assert code == 0, err
    # Warm-up: the first 20 s (names, stacks, ring buffer pages touched).
    warm = [rss for t, rss, _ in samples if t >= 20]
    base = warm[0]
    print("rfbpf RSS (s, kB, trace bytes):", samples)
    assert max(warm) <= base * 1.25, samples
    # The trace grew as ops closed, not only at the end.
    sizes = [size for _, _, size in samples]
    assert sizes[len(sizes) // 2] > 10 * 1024 * 1024, sizes
    assert sizes[-1] > sizes[len(sizes) // 2], sizes
    # Every op the table counted is an event in the streamed file (one
    # event a line; the file is gigabytes, so it is not parsed whole).
    xs, tail = 0, []
    with open(out) as f:
        for line in f:
            xs += line.startswith('{"ph":"X"')
            if tail or line.startswith('"otherData"'):
                tail.append(line)
    other = json.loads("{" + "".join(tail))["otherData"]
    ops = other["ops"]
    assert ops > 1_000_000 and xs == ops, (ops, xs)
    assert other["threads_seen"] > 100
    assert f"{ops} ops" in table
    assert folded.read_text().count("aten::add") >= 1
