"""Training steps (--steps, --from-step, --step-op, --per-step) on a real
training loop (tests/workloads/step_train.py): the trace holds exactly
the steps asked for, whole, marked as Kineto marks them (ProfilerStep#N
slices on the step's thread), whichever marker made them: torch.profiler's
own ProfilerStep#N, the optimizer's Optimizer.step#SGD.step, or a scope
the user names. rfbpf stops by itself after the last step and the job
goes on, its losses those of an untraced run."""
import collections
import os
import re

import pytest

from harness import (Job, PYTHON, RFBPF, ROOT, load_trace, run,
                    sid_root_with, wait_until)

STEPS = os.path.join(ROOT, "tests", "workloads", "step_train.py")
LOSS = re.compile(r"^step (\d+) loss (\S+)$")


def x_events(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def step_marks(trace):
    return sorted((e for e in x_events(trace)
                   if e["name"].startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def losses(lines):
    return {int(m[1]): m[2] for m in map(LOSS.match, lines) if m}


def untraced_losses(*args, steps=60):
    r = run([PYTHON, STEPS, "--steps", str(steps), *args])
    assert r.returncode == 0, r.stderr
    return losses(r.stdout.splitlines())


def check_whole_steps(trace, n, numbers=None):
    """n step marks, consecutive, on one thread; every op on every thread
    began inside them; the step thread's ops each lie inside one step,
    and every step holds the same ops (whole steps of one loop)."""
    marks = step_marks(trace)
    assert len(marks) == n, [m["name"] for m in marks]
    nums = [int(m["name"].split("#")[1]) for m in marks]
    assert nums == list(range(nums[0], nums[0] + n)), nums
    if numbers is not None:
        assert nums == numbers
    tid = marks[0]["tid"]
    assert all(m["tid"] == tid for m in marks)
    lo, hi = marks[0]["ts"], marks[-1]["ts"] + marks[-1]["dur"]
    ops = [e for e in x_events(trace) if e not in marks]
    assert ops
    for e in ops:
        assert lo <= e["ts"] < hi, (e, lo, hi)
    per_step = []
    for m in marks:
        inside = [e["name"] for e in ops if e["tid"] == tid and
                  m["ts"] <= e["ts"] and
                  e["ts"] + e["dur"] <= m["ts"] + m["dur"]]
        per_step.append(collections.Counter(inside))
    on_tid = sum(1 for e in ops if e["tid"] == tid)
    assert sum(sum(c.values()) for c in per_step) == on_tid
    assert all(c == per_step[0] for c in per_step), per_step
    assert per_step[0]["aten::addmm"] >= 2
    return marks


def test_steps_from_the_optimizer_are_exactly_n_whole_steps(tmp_path):
    out = tmp_path / "t.json"
    with Job([PYTHON, STEPS, "--threads", "2", "--step-sleep-ms", "5"]) \
            as job:
        r = run([RFBPF, "-p", str(job.pid), "--steps", "3", "-q",
                 "-o", str(out)], timeout=120)
        assert r.returncode == 0, r.stderr
        # The job goes on after rfbpf stopped by itself.
        n0 = len(job.lines)
        assert wait_until(lambda: len(job.lines) > n0 + 20, timeout=60)
        assert job.p.poll() is None
    t = load_trace(out)
    marks = check_whole_steps(t, 3)
    for m in marks:
        assert m["cat"] == "user_annotation"
        assert m["args"]["rfbpf step marker"] == "Optimizer.step#SGD.step"
    steps = t["otherData"]["steps"]
    assert steps["whole_steps"] == 3 and steps["only_steps"]
    assert steps["ops_outside_steps"] > 0
    # The background thread ran ops in the steps, and they are there.
    assert len({e["tid"] for e in x_events(t)}) == 2
    assert "Steps: 3 whole (Optimizer.step#SGD.step" in r.stdout
    # Tracing changed no result.
    traced = losses(job.lines)
    expect = untraced_losses(steps=max(traced) + 1)
    assert traced == {k: expect[k] for k in traced}


def test_profiler_steps_keep_the_jobs_numbers(tmp_path):
    out = tmp_path / "t.json"
    with Job([PYTHON, STEPS, "--profiler", "--step-sleep-ms", "5"]) as job:
        assert wait_until(lambda: len(job.lines) > 3)
        # About 7 ms a step: rfbpf attaches well before step first.
        first = max(losses(list(job.lines))) + 500
        r = run([RFBPF, "-p", str(job.pid), "--steps", "2", "--from-step",
                 str(first), "-q", "-o", str(out)], timeout=120)
        assert r.returncode == 0, r.stderr
    t = load_trace(out)
    marks = check_whole_steps(t, 2, [first, first + 1])
    # torch.profiler's own scopes, drawn as the ops they are.
    assert all("rfbpf step marker" not in m["args"] for m in marks)
    assert t["otherData"]["steps"]["marker"] == "ProfilerStep#N"
    assert t["otherData"]["steps"]["first_step"] == first
    assert "had passed" not in r.stdout


def test_a_step_already_passed_is_said(tmp_path):
    out = tmp_path / "t.json"
    with Job([PYTHON, STEPS, "--profiler", "--step-sleep-ms", "5"]) as job:
        r = run([RFBPF, "-p", str(job.pid), "--steps", "1", "--from-step",
                 "1", "-q", "-o", str(out)], timeout=120)
        assert r.returncode == 0, r.stderr
    first = load_trace(out)["otherData"]["steps"]["first_step"]
    assert first > 1
    assert f"from step {first}: step 1 had passed when tracing began" \
        in r.stdout, r.stdout


def test_a_named_scope_in_launch_mode_with_a_block_per_step(tmp_path):
    out = tmp_path / "t.json"
    r = run([RFBPF, "--steps", "2", "--from-step", "5", "--step-op",
             "train_step", "--per-step", "--top", "5", "-q", "-o", str(out),
             "--", PYTHON, STEPS, "--steps", "12", "--scope", "train_step"],
            timeout=180)
    assert r.returncode == 0, r.stderr
    t = load_trace(out)
    marks = check_whole_steps(t, 2, [5, 6])
    scopes = sorted((e for e in x_events(t) if e["name"] == "train_step"),
                    key=lambda e: e["ts"])
    assert [(s["ts"], s["dur"]) for s in scopes] == \
        [(m["ts"], m["dur"]) for m in marks]
    # The step slice comes first in the file, so viewers nest the scope
    # inside it.
    evs = t["traceEvents"]
    assert evs.index(marks[0]) < evs.index(scopes[0])
    blocks = re.findall(r"^Step (\d+): \S+ on thread \d+ \(ended by "
                        r"train_step\)$", r.stdout, re.M)
    assert blocks == ["5", "6"], r.stdout
    # The job ran all its steps, as untraced.
    assert losses(r.stdout.splitlines()) == untraced_losses(
        "--scope", "train_step", steps=12)


def test_steps_in_torch_2_14(tmp_path):
    root = sid_root_with(STEPS)
    out = tmp_path / "t.json"
    # ready=None: sid's UCX warns on stdout before the job's own lines.
    with Job(["chroot", root, "python3", "/tmp/step_train.py",
              "--step-sleep-ms", "5"], ready=None) as job:
        assert wait_until(lambda: "ready\n" in job.lines, timeout=120)
        r = run([RFBPF, "-p", str(job.pid), "--steps", "3", "-q",
                 "-o", str(out)], timeout=180)
        assert r.returncode == 0, r.stderr
    check_whole_steps(load_trace(out), 3)


def test_a_job_without_steps_says_so(tmp_path):
    out = tmp_path / "t.json"
    with Job([PYTHON, os.path.join(ROOT, "tests", "workloads",
                                   "busy_ops.py")]) as job:
        r = run([RFBPF, "-p", str(job.pid), "--steps", "2", "-d", "3",
                 "-q", "-o", str(out)], timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"Steps: none traced: no ProfilerStep#N or "
                     r"Optimizer.step#... scope ended .*--step-op",
                     r.stdout), r.stdout
    assert not x_events(load_trace(out))


@pytest.mark.parametrize("args,why", [
    (["--steps", "0"], "invalid --steps '0'"),
    (["--steps", "x"], "invalid --steps 'x'"),
    (["--from-step", "-1"], "invalid --from-step '-1'"),
    (["--step-op", ""], "invalid --step-op ''"),
    (["--steps", "2", "--sample", "0.5"], "need every op seen"),
    (["--per-step", "--scopes", "function"], "add user_scope"),
    (["--continuous", "--all", "--listen", "127.0.0.1:1", "--steps", "2"],
     "are for one run"),
])
def test_bad_step_options_get_one_line(args, why):
    r = run([RFBPF, *args, "--", "true"] if "--continuous" not in args
            else [RFBPF, *args])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and why in lines[0], r.stderr
