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
import signal
import subprocess
import threading

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


def kill_job(job):
    """The launcher and its ranks (its process group): none is left to
    load the tests that follow."""
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait()


def traced_run(tmp_path, launch, wait_file, slow_rank):
    """The job held before its first step, `rfbpf --all` attached to every
    rank, then let go; (the job's output, rfbpf's run, the trace dir)."""
    out = tmp_path / "traces"
    job = subprocess.Popen(launch + ["--slow-rank", str(slow_rank),
                                     "--slow-ms", str(SLOW_MS)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
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
        # A thread reads rfbpf's stderr, so that a tracer that never
        # starts fails the test with what rfbpf said instead of hanging
        # it (the ranks wait for the file, and rank 0's tracer for them).
        err_lines, out_lines = [], []
        readers = [threading.Thread(target=lambda f=f, to=to: to.extend(
            iter(f.readline, "")), daemon=True)
            for f, to in ((tracer.stderr, err_lines),
                          (tracer.stdout, out_lines))]
        for r in readers:
            r.start()
        started = wait_until(lambda: sum(
            "rfbpf: tracing PID" in l for l in err_lines) >= RANKS or
            tracer.poll() is not None, 180)
        if not started or tracer.poll() is not None:
            tracer.kill()
            for r in readers:
                r.join(10)
            raise AssertionError("rfbpf --all did not trace every rank:\n"
                                 + "".join(err_lines))
        open(wait_file, "w").close()
        tracer.wait(timeout=300)
        for r in readers:
            r.join(10)
        stdout, rest = "".join(out_lines), ""
        job_out, _ = job.communicate(timeout=300)
    finally:
        kill_job(job)
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


# The PromQL docs/distributed.md gives for the straggler: per job (run_id),
# the rank whose collectives took least time.
STRAGGLER_PROMQL = (
    "bottomk by (run_id) (1, sum by (instance, pid) "
    "(rate(rfbpf_collective_seconds_total[2m])) * on (instance, pid) "
    "group_left (rank, run_id) rfbpf_job_rank_info)")


def samples(text, name):
    """{labels text: value} of every sample of name."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name):].rsplit(" ", 1)
            out[labels] = float(value)
    return out


def test_fleet_metrics_label_ranks_and_promql_finds_the_straggler(tmp_path):
    """A daemon in bursts over the 3 ranks: each job's rank info, its
    collectives' seconds, calls and bytes, and its steps; promtool reads
    the file, and Prometheus's own engine (promtool test rules), fed two
    exports of it, returns the slowed rank for the docs' query."""
    from test_fleet import Daemon, metric
    wait_file = tmp_path / "go"
    slow = 1
    job = subprocess.Popen(
        [PYTHON, DIST, "--ranks", str(RANKS), "--steps", "100000",
         "--slow-rank", str(slow), "--slow-ms", str(SLOW_MS),
         "--wait-file", str(wait_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    prom = tmp_path / "m.prom"
    d = None
    try:
        pids = [int(p) for p in job.stdout.readline().split()[1:]]
        assert len(pids) == RANKS
        assert wait_until(lambda: all(
            "libtorch_cpu" in open(f"/proc/{p}/maps").read() for p in pids),
            120)
        open(wait_file, "w").close()
        d = Daemon([a for p in pids for a in ("-p", str(p))] +
                   ["--interval", "5", "--budget", "20", "--prom-file",
                    str(prom)])
        for p in pids:
            d.wait_for(rf"pid {p} .*traced", 60)
        # The first export with every rank's collectives (the first
        # interval prices the bursts), then the third after it.
        first = last = None
        mtime, after = 0, 0
        for _ in range(16):
            if last is not None:
                break
            assert wait_until(lambda: prom.exists() and
                              prom.stat().st_mtime > mtime, 30), d.log()
            mtime = prom.stat().st_mtime
            text = prom.read_text()
            if first is None and all(
                    metric(text, "rfbpf_collective_seconds_total", pid=p)
                    for p in pids):
                first = text
            elif first is not None:
                after += 1
                if after == 3:
                    last = text
        assert first and last, "no 3 exports after one with every " \
            "rank's collectives in 16: " + d.log()
    finally:
        if d:
            assert d.finish() == 0, d.log()
        kill_job(job)
    r = subprocess.run(["promtool", "check", "metrics"], input=last,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank, pid in enumerate(pids):
        assert metric(last, "rfbpf_job_rank_info", pid=pid, rank=rank,
                      world_size=RANKS, backend="gloo",
                      run_id="rfbpf-test") == 1, last
        assert metric(last, "rfbpf_collective_seconds_total", pid=pid,
                      collective="gloo:all_reduce", group="") > 0
        calls = metric(last, "rfbpf_collective_calls_total", pid=pid,
                       collective="gloo:all_reduce")
        nbytes = metric(last, "rfbpf_collective_bytes_total", pid=pid,
                        collective="gloo:all_reduce")
        # Every all_reduce here moves one of 4 float tensors: 19210
        # elements a step in 4 calls, so 19210 bytes a call on average,
        # give or take which of them the bursts caught.
        assert 0.25 * 19210 <= nbytes / calls <= 4 * 19210, (nbytes, calls)
        assert metric(last, "rfbpf_job_steps_total", pid=pid) > 0
        assert metric(last, "rfbpf_job_step_seconds", pid=pid) > 0

    # Two exports 2 minutes apart, as Prometheus would have scraped them.
    series, slow_rate = [], 0
    for name in ("rfbpf_collective_seconds_total", "rfbpf_job_rank_info"):
        a, b = samples(first, name), samples(last, name)
        for labels in b:
            lab = labels[:-1] + ',instance="host-a"}'
            # "_": no sample then (the backend label comes with the
            # first collective).
            series.append(f"      - series: '{name}{lab}'\n"
                          f"        values: '{a.get(labels, '_')} "
                          f"{b[labels]}'\n")
            if name.startswith("rfbpf_collective") and \
                    f'pid="{pids[slow]}"' in labels:
                slow_rate += (b[labels] - a.get(labels, 0)) / 120
    test = tmp_path / "straggler.yml"
    test.write_text(
        "rule_files: []\nevaluation_interval: 2m\ntests:\n"
        "  - interval: 2m\n    input_series:\n" + "".join(series) +
        "    promql_expr_test:\n"
        f"      - expr: '{STRAGGLER_PROMQL}'\n        eval_time: 2m\n"
        "        exp_samples:\n"
        f"          - labels: '{{instance=\"host-a\",pid=\"{pids[slow]}\","
        f"rank=\"{slow}\",run_id=\"rfbpf-test\"}}'\n"
        f"            value: {slow_rate!r}\n")
    r = subprocess.run(["promtool", "test", "rules", str(test)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr + test.read_text()


def test_all_without_privileges_names_the_capabilities():
    """Checked before the scan: without them other users' maps are
    closed, and "no PyTorch process" would be the wrong reason."""
    r = run(["capsh", "--drop=cap_bpf,cap_perfmon,cap_sys_admin", "--",
             "-c", f"exec {RFBPF} --all -d 1"])
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1, r.stderr
    for cap in ("CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"):
        assert cap in r.stderr, r.stderr
