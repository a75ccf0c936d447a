"""--children records every op of forked workers (issue 34, item 2).

dataloader_train.py --clone runs one aten::clone per sample in its
DataLoader workers (forked each epoch) and counts them itself, in shared
memory: 3 epochs of 768 samples are 2304. rfbpf must record that many
aten::clone in the workers, or count exactly the ones it missed (the
footer's and otherData's `ops missed in children`).

Before, a worker was probed only once the loader had read its fork and
attached uprobes to it: 2080, 608 and 0 of 2304 with --python-stacks
(whose records delay the loader), 1504 to 2240 without, and nothing said
so."""
import re

import pytest

from harness import (Job, PYTHON, RFBPF, ROOT, load_trace, run, start_rfbpf,
                    stop)

DATALOADER = f"{ROOT}/tests/workloads/dataloader_train.py"
ARGS = [DATALOADER, "--epochs", "3", "--samples", "768", "--workers", "2",
        "--clone"]


def workers_clones(trace):
    """aten::clone recorded in processes other than the target's."""
    main = next(e["pid"] for e in trace["traceEvents"]
                if e.get("name") == "process_name"
                and "child of" not in e["args"]["name"])
    return sum(1 for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("name") == "aten::clone"
               and e["pid"] != main)


def their_count(stdout):
    return int(re.search(r"^clones (\d+)$", stdout, re.M).group(1))


def check(trace, table, clones):
    missed = trace["otherData"].get("child_ops_missed", 0)
    assert clones == 2304
    # Every worker op recorded, or the ones missed counted: the count
    # covers every op of theirs, so the clones alone are a lower bound.
    assert workers_clones(trace) + missed >= clones, \
        (workers_clones(trace), missed)
    assert workers_clones(trace) <= clones
    if missed == 0:
        assert workers_clones(trace) == clones
    assert f"ops missed in children {missed}" in table or \
        (missed == 0 and "ops missed in children" not in table), table


@pytest.mark.parametrize("flags", [[], ["--python-stacks"]],
                         ids=["plain", "python-stacks"])
def test_launched_dataloader_workers_ops_all_recorded(tmp_path, flags):
    out = tmp_path / "t.json"
    r = run([RFBPF, "-q", "--children", *flags, "--top", "3", "-o",
             str(out), "--", PYTHON, *ARGS], timeout=300)
    assert r.returncode == 0, r.stderr
    check(load_trace(out), r.stdout, their_count(r.stdout))


def test_off_cpu_reaches_the_workers(tmp_path):
    """--children --off-cpu: the workers' context switches are traced
    too (each process is added to rfbpf's one set of scheduler programs
    as it is adopted), into their own processes' slices."""
    out = tmp_path / "t.json"
    r = run([RFBPF, "-q", "--children", "--off-cpu", "--no-table", "-o",
             str(out), "--", PYTHON, *ARGS], timeout=300)
    assert r.returncode == 0, r.stderr
    trace = load_trace(out)
    main = next(e["pid"] for e in trace["traceEvents"]
                if e.get("name") == "process_name"
                and "child of" not in e["args"]["name"])
    workers = {e["pid"] for e in trace["traceEvents"]
               if e.get("cat") == "off_cpu"} - {main}
    assert len(workers) >= 2, workers
    assert trace["otherData"]["drops"] == 0


def test_attached_dataloader_workers_ops_all_recorded(tmp_path):
    """-p PID --children: workers forked after rfbpf attached."""
    trace, table, rest, _ = attached([PYTHON, *ARGS, "--wait"], tmp_path)
    check(trace, table, their_count(rest))


def attached(argv, tmp_path):
    """Runs a job that prints "ready" and waits for a line, traced by
    -p --children from then on; (trace, table, the job's output after
    "ready", its pid)."""
    out = tmp_path / "t.json"
    with Job(argv) as job:
        p, _ = start_rfbpf(["-q", "--children", "--top", "3", "-p",
                            str(job.pid), "-o", str(out)])
        job.go()
        rc, rest = job.finish(300)
        assert rc == 0
        code, table, err = stop(p)
        assert code == 0, err
    return load_trace(out), table, rest, job.pid


FORKER = """
import os, sys, time, torch
torch.set_num_threads(1)
print("ready", flush=True)
sys.stdin.readline()
x = torch.ones(16, 16)
for i in range(6):
    pid = os.fork()
    if pid == 0:
        for _ in range(200):
            torch.mm(x, x)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.35)
print("done", 6 * 200, flush=True)
"""


def test_attached_short_children_ops_all_recorded(tmp_path):
    """-p PID --children on a job forking a child every 0.35 s that runs
    its 200 ops at once and exits: the children's aten::mm must be the
    job's 1200, or the ones missed counted. Before, most children were
    done before rfbpf had probed them (1 or 2 of 6 seen)."""
    trace, table, rest, main = attached([PYTHON, "-c", FORKER], tmp_path)
    theirs = int(re.search(r"^done (\d+)$", rest, re.M).group(1))
    ours = sum(1 for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("name") == "aten::mm"
               and e["pid"] != main)
    missed = trace["otherData"].get("child_ops_missed", 0)
    assert ours <= theirs <= ours + missed, (ours, missed, theirs)
    assert "unmatched ends 0; repeated ends 0" in table, table


def test_entry_probes_say_which_children_were_probed_late(tmp_path):
    """--probes entry: a worker is probed once rfbpf finds it, and what it
    ran before is seen by nothing, so it cannot be counted. The footer
    and otherData say how many children that was, and how many were gone
    before rfbpf could probe them at all, so a shortfall is never silent:
    the 6 workers (2 an epoch, 3 epochs) are all in one count or the
    other. (A CI run once recorded none of the workers' ops, and said
    nothing: the children it could not probe were not counted then.)"""
    out = tmp_path / "t.json"
    r = run([RFBPF, "-q", "--children", "--probes", "entry", "--top", "3",
             "-o", str(out), "--", PYTHON, *ARGS], timeout=300)
    assert r.returncode == 0, r.stderr
    trace, clones = load_trace(out), their_count(r.stdout)
    other = trace["otherData"]
    late, never = (other["children_probed_after_fork"],
                   other["children_never_probed"])
    said = {k: v for k, v in other.items() if "child" in k}
    assert clones == 2304 and workers_clones(trace) <= clones, said
    assert late + never >= 6, (said, r.stderr)
    if late:
        assert (f"uncounted ones in the first moments of {late} children "
                "probed after their fork") in r.stdout, r.stdout
    if never:
        assert (f"{never} children never probed (gone before rfbpf "
                "reached them)") in r.stdout, r.stdout
