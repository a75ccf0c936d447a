"""Distributed jobs (issue 30): a real gloo job of 3 ranks on CPU, started
the way torchrun starts ranks (tests/workloads/dist_train.py --ranks),
traced from outside with `rfbpf --all --steps 4 -o DIR/`, on torch 1.13
and in the sid root (2.14). One rank sleeps before its all_reduce every
step, so the others wait for it there.

Checked: a trace per rank, named by rank, with Kineto's distributedInfo
(rank, world size, backend gloo); every gloo collective with the input
dims torch.profiler records for the same job; the ranks table names the
slowed rank; the ranks' losses equal an untraced run's."""
import glob
import json
import os
import re
import subprocess

import pytest

from harness import PYTHON, RFBPF, ROOT, run, sid_root_with, wait_until

DIST = os.path.join(ROOT, "tests", "workloads", "dist_train.py")
RANKS, STEPS, SLOW_MS = 3, 8, 40


def losses(text):
    return sorted(re.findall(r"rank \d+/\d+ losses \[[^]]*\]", text))


def comm_dims(events):
    """(name, dims) of each gloo/nccl collective, as a multiset."""
    out = {}
    for name, dims in events:
        key = (name, json.dumps(dims))
        out[key] = out.get(key, 0) + 1
    return out


def rfbpf_comms(trace):
    return [(e["name"], e["args"]["Input Dims"]) for e in trace["traceEvents"]
            if e.get("ph") == "X" and e["name"].startswith(("gloo:", "nccl:"))]


def traced_run(tmp_path, launch, wait_file, slow_rank):
    """The job held before its first step, `rfbpf --all` attached to every
    rank, then let go; (the job's output, rfbpf's run, the trace dir)."""
    out = tmp_path / "traces"
    job = subprocess.Popen(launch + ["--slow-rank", str(slow_rank),
                                     "--slow-ms", str(SLOW_MS)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        first = job.stdout.readline()
        assert first.startswith("ranks "), first
        pids = [int(p) for p in first.split()[1:]]
        # Each rank maps libtorch once it imported torch.
        assert wait_until(lambda: all(
            "libtorch_cpu" in open(f"/proc/{p}/maps").read() for p in pids),
            120)
        tracer = subprocess.Popen([RFBPF, "--all", "--steps", "4", "-o",
                                   f"{out}/", "--top", "5"],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        err_lines = []
        while sum("rfbpf: tracing PID" in l for l in err_lines) < RANKS:
            line = tracer.stderr.readline()
            assert line, "".join(err_lines)
            err_lines.append(line)
        open(wait_file, "w").close()
        stdout, rest = tracer.communicate(timeout=300)
        job_out, _ = job.communicate(timeout=300)
    finally:
        job.kill()
        job.wait()
    tracer.stderr_text = "".join(err_lines) + rest
    return first + job_out, tracer, stdout, out, pids


def check(tmp_path, launch, wait_arg, wait_file, profiled, slow_rank):
    untraced = run(launch + ["--slow-rank", str(slow_rank), "--slow-ms",
                             str(SLOW_MS)])
    assert untraced.returncode == 0, untraced.stdout + untraced.stderr
    assert len(losses(untraced.stdout)) == RANKS, untraced.stdout
    job_out, tracer, table, out, pids = traced_run(
        tmp_path, launch + ["--wait-file", wait_arg], wait_file, slow_rank)
    assert tracer.returncode == 0, tracer.stderr_text
    assert losses(job_out) == losses(untraced.stdout)

    files = sorted(glob.glob(f"{out}/*.pt.trace.json"))
    assert len(files) == RANKS, files
    torch_comms = {}
    for r in range(RANKS):
        with open(os.path.join(profiled, f"rank-{r}.comms.json")) as f:
            torch_comms[r] = comm_dims((e["name"], e["input_shapes"])
                                       for e in json.load(f))
    for r in range(RANKS):
        named = [f for f in files if f".rank{r}.{pids[r]}." in f]
        assert len(named) == 1, (r, files)
        with open(named[0]) as f:
            trace = json.load(f)
        info = trace["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == \
            (r, RANKS, "gloo"), info
        assert info["local_rank"] == r and info["master_addr"] == "127.0.0.1"
        mine = comm_dims(rfbpf_comms(trace))
        # 4 steps of 4 all_reduces (one per parameter), each with the
        # dims torch.profiler gives the same call.
        assert sum(mine.values()) == 16, mine
        for key, n in mine.items():
            assert key in torch_comms[r], (key, torch_comms[r])
            assert n == 4 and torch_comms[r][key] == STEPS, (key, n)
        assert len(mine) == 4
        assert trace["otherData"]["drops"] == 0

    # The ranks table, after the three tables.
    assert table.count("Distributed: rank ") == RANKS, table
    rows = re.findall(r"^\s+(\d)\s+(\d+)\s+\S+\s+4\s+.*$", table, re.M)
    assert sorted(int(r) for r, _ in rows) == list(range(RANKS)), table
    m = re.search(r"^Straggler: rank (\d) \(PID (\d+)\)", table, re.M)
    assert m, table
    assert (int(m.group(1)), int(m.group(2))) == \
        (slow_rank, pids[slow_rank]), table
    assert re.search(r"^gloo:all_reduce\s+16\s", table, re.M), table
    return table


def test_three_gloo_ranks_on_torch_1_13(tmp_path):
    wait_file = tmp_path / "go"
    launch = [PYTHON, DIST, "--ranks", str(RANKS), "--steps", str(STEPS)]
    profiled = tmp_path / "prof"
    r = run(launch + ["--profile", str(profiled)])
    assert r.returncode == 0, r.stdout + r.stderr
    check(tmp_path, launch, str(wait_file), wait_file, profiled,
          slow_rank=1)


def test_three_gloo_ranks_on_torch_2_14(tmp_path):
    root = sid_root_with(DIST)
    wait_file = os.path.join(root, "tmp", "rfbpf-dist-go")
    if os.path.exists(wait_file):
        os.unlink(wait_file)
    launch = ["chroot", root, "python3", "/tmp/dist_train.py", "--ranks",
              str(RANKS), "--steps", str(STEPS)]
    r = run(launch + ["--profile", "/tmp/rfbpf-dist-prof"])
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        check(tmp_path, launch, "/tmp/rfbpf-dist-go", wait_file,
              os.path.join(root, "tmp", "rfbpf-dist-prof"), slow_rank=2)
    finally:
        if os.path.exists(wait_file):
            os.unlink(wait_file)


@pytest.mark.parametrize("args, says", [
    (["--all", "-p", "1"], "drop -p and the command"),
    (["--all", "-o", "/tmp/rfbpf-not-a-dir.json"],
     "give -o a directory"),
    (["--all", "--folded", "/tmp/x.folded"], "take one process"),
    (["--all", "--flight-recorder", "10", "-o", "/tmp/"], "takes one process"),
])
def test_bad_all_options_say_what_is_wrong(args, says):
    r = run([RFBPF, *args])
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


def torch_processes():
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/maps") as f:
                    if "libtorch_cpu" in f.read():
                        found.append(int(d))
            except OSError:
                pass
    return found


def test_all_without_a_pytorch_process_says_so():
    if torch_processes():
        pytest.skip("a PyTorch process runs on this host")
    r = run([RFBPF, "--all", "-d", "1"])
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "no process on this host maps a " \
        "libtorch_cpu" in r.stderr, r.stderr
