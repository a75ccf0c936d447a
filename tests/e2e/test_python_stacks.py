"""--python-stacks against the interpreter itself: a two-thread workload
(tests/workloads/py_callsites.py) prints where each of its call sites is,
from sys._getframe(), and rfbpf, attached to it, must name the same
FUNCTION (FILE:LINE) above every op it recorded there; the same frames
(function and file) as torch.profiler(with_stack=True) records for the
same code; a deep recursion cut at the depth cap and marked; and a
process that is not Python traced without frames after one warning; and
threads labelled with their threading.Thread names. A training job with
Adam's own record_function scopes and the user's (tests/workloads/
optim_train.py): every thread's slices nest, and each scope sits under
the frame holding its `with` (or decorator), not under
record_function.__enter__, which returns long before the scope ends."""
import collections
import os
import re
import subprocess

import pytest

from harness import (Job, PYTHON, RFBPF, ROOT, all_nodes, load_trace,
                    rebuild_nesting, run, sid_root_with)

CALLSITES = os.path.join(ROOT, "tests", "workloads", "py_callsites.py")
OPTIM = os.path.join(ROOT, "tests", "workloads", "optim_train.py")
LABEL = re.compile(r"^(.*) \((.*):(-?\d+)\)$")
TRUNCATED = "[python stack truncated]"


class Workload:
    """py_callsites.py --expect, running until killed or --seconds."""

    def __init__(self, seconds=60, python=(PYTHON, CALLSITES)):
        self.p = subprocess.Popen([*python, "--expect",
                                   "--seconds", str(seconds)],
                                  stdout=subprocess.PIPE, text=True)
        self.sites = {}
        for line in self.p.stdout:
            if line.strip() == "ready":
                break
            if line.count("\t") != 3:   # sid's UCX warns on stdout
                continue
            site, fn, file, lineno = line.rstrip("\n").split("\t")
            self.sites[site] = f"{fn} ({file}:{lineno})"
        assert len(self.sites) == 7, self.sites
        self.pid = self.p.pid       # chroot execs the interpreter

    def close(self):
        self.p.kill()
        self.p.wait()


@pytest.fixture
def workload():
    w = Workload()
    yield w
    w.close()


def folded_rows(path):
    """(python frames, op frames, weight) per folded line: Python frames
    are the labels before the first op frame."""
    rows = []
    with open(path) as f:
        for line in f:
            stack, weight = line.rstrip("\n").rsplit(" ", 1)
            frames = stack.split(";")[2:]      # process; thread; ...
            py, ops = [], []
            for fr in frames:
                if not ops and (LABEL.match(fr) or fr == TRUNCATED):
                    py.append(fr)
                else:
                    ops.append(fr)
            rows.append((py, ops, int(weight)))
    return rows


def trace(pid, tmp_path, *extra, named=True):
    folded = tmp_path / "f.folded"
    r = run([RFBPF, "-q", "-p", str(pid), "-d", "3", "--python-stacks",
             "--folded", str(folded), "--no-table", *extra])
    assert r.returncode == 0, r.stderr
    # Each worker thread by its Python name.
    threads = {l.split(";")[1].rsplit(" [", 1)[0]
               for l in folded.read_text().splitlines()}
    assert not named or {"req-0", "req-1"} <= threads, threads
    return folded_rows(folded), r.stderr


def innermost_by_op(rows, op):
    """Weight per innermost Python frame, over the rows whose outermost
    op is op (its nested ops included)."""
    w = collections.Counter()
    for py, ops, weight in rows:
        if ops and ops[0] == op:
            w[py[-1] if py else None] += weight
    return w


@pytest.mark.parametrize("probes", ["callback", "entry"])
def test_every_op_is_under_the_line_that_called_it(workload, tmp_path,
                                                    probes):
    rows, err = trace(workload.pid, tmp_path, "--probes", probes)
    assert "warning" not in err, err
    check_call_sites(rows, workload.sites)


def check_call_sites(rows, s):
    # Every op of the two threads' loops, time-weighted, sits under the
    # exact frame the interpreter gave for its call site.
    for op, sites in (("aten::mm", ["mm_a", "mm_b"]),
                      ("aten::add", ["add_gen", "add_method",
                                     "add_coro"]),
                      ("aten::sub", ["sub_lambda"]),
                      ("aten::relu", ["relu_deep"])):
        w = innermost_by_op(rows, op)
        right = sum(w[s[x]] for x in sites)
        assert right >= 0.99 * sum(w.values()), (op, w.most_common(4))
        assert all(w[s[x]] > 0 for x in sites), (op, w)
    # One op from two call sites, in proportion: site_b calls it three
    # times as often as site_a, with operands of the same size.
    mm = innermost_by_op(rows, "aten::mm")
    ratio = mm[s["mm_b"]] / mm[s["mm_a"]]
    assert 2.4 < ratio < 3.75, ratio
    # Frames outside the call: the threads' own, outermost first.
    for py, ops, _ in rows:
        if ops and ops[0] == "aten::mm" and "work (" in ";".join(py):
            names = [LABEL.match(f).group(1) for f in py]
            assert names[:3] == ["Thread._bootstrap",
                                 "Thread._bootstrap_inner", "Thread.run"]
            assert names[3:] in (["work", "step", "site_a"],
                                 ["work", "step", "site_b"]), names
            break
    else:
        pytest.fail("no aten::mm from a worker thread")


def test_threads_started_after_launch_have_their_stacks(tmp_path):
    """Launch mode: rfbpf is there before the job's threads exist; each
    is found at its first op and its ops sit under their call sites."""
    folded = tmp_path / "f.folded"
    r = run([RFBPF, "-q", "--python-stacks", "--folded", str(folded),
             "--no-table", "--", PYTHON, CALLSITES, "--expect",
             "--seconds", "2"])
    assert r.returncode == 0, r.stderr
    sites = {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if len(f) == 4:
            sites[f[0]] = f"{f[1]} ({f[2]}:{f[3]})"
    rows = folded_rows(folded)
    w = innermost_by_op(rows, "aten::mm")
    right = w[sites["mm_a"]] + w[sites["mm_b"]]
    assert right >= 0.99 * sum(w.values()), w.most_common(4)
    threads = {l.split(";")[1].rsplit(" [", 1)[0]
               for l in folded.read_text().splitlines()}
    assert {"req-0", "req-1"} <= threads, threads


def test_deep_recursion_is_cut_at_the_cap_and_marked(workload, tmp_path):
    for depth, args in ((64, []), (8, ["--python-depth", "8"])):
        rows, _ = trace(workload.pid, tmp_path, *args)
        deep = [py for py, ops, _ in rows if ops[:1] == ["aten::relu"]]
        assert deep
        for py in deep:
            assert py[0] == TRUNCATED, py[:2]
            assert len(py) == depth + 1, len(py)
            assert py[-1] == workload.sites["relu_deep"]
        # Shallow stacks are whole: no mark.
        assert not any(py[:1] == [TRUNCATED] for py, ops, _ in rows
                       if ops[:1] == ["aten::mm"])


def test_frames_are_torch_profilers_own(workload, tmp_path):
    """torch.profiler(with_stack=True) on the same code, in its own
    process: per op, its two innermost Python frames' function and file
    are rfbpf's. (torch.profiler gives each frame the line it was at when
    its tracer first saw it, a function's first line, where rfbpf gives
    the line it is at when the op starts, the call site; and it shortens
    the file names rfbpf gives whole.)"""
    rows, _ = trace(workload.pid, tmp_path)
    check_torch_profilers_frames(rows, [PYTHON, CALLSITES])


def check_torch_profilers_frames(rows, python):
    prof = run([*python, "--profile"])
    assert prof.returncode == 0, prof.stderr
    theirs = collections.defaultdict(set)
    for line in prof.stdout.splitlines():
        if line.count("\t") != 3:
            continue
        op, frames, _, _ = line.split("\t")
        inner = []
        for fr in frames.split(";")[:2]:
            m = re.match(r"^(.*)\((\d+)\): (.*)$", fr)
            inner.append((m.group(3), os.path.basename(m.group(1))))
        theirs[op].add(tuple(inner))
    ours = collections.defaultdict(set)
    for py, ops, _ in rows:
        if len(py) < 2:
            continue
        inner = []
        for fr in reversed(py[-2:]):
            fn, file, _ = LABEL.match(fr).groups()
            # torch.profiler names a function by co_name, without the
            # class or enclosing function co_qualname adds.
            inner.append((fn.rsplit(".", 1)[-1], os.path.basename(file)))
        for op in ops:
            ours[op].add(tuple(inner))
    for op in ("aten::mm", "aten::add", "aten::sub", "aten::relu",
               "aten::resolve_conj", "aten::to"):
        assert theirs[op], (op, prof.stdout)
        assert ours[op] == theirs[op], (op, ours[op], theirs[op])


@pytest.fixture(scope="module")
def sid_python():
    """Python 3.14 with torch 2.14 (Debian sid), where the offsets come
    from the interpreter's own _Py_DebugOffsets."""
    return ("chroot", sid_root_with(CALLSITES), "python3",
            "/tmp/py_callsites.py")


def test_python_3_14_from_its_debug_offsets(sid_python, tmp_path):
    """The same checks on Python 3.14 and torch 2.14."""
    check_python_in_root(sid_python, tmp_path)


def check_python_in_root(python, tmp_path):
    """py_callsites.py run by python (a chroot's interpreter): every op
    under the line that called it, in proportion, deep stacks cut and
    marked, and the frames torch.profiler(with_stack=True) records."""
    w = Workload(python=python)
    try:
        rows, err = trace(w.pid, tmp_path, named=False)
        assert "warning" not in err, err
        check_call_sites(rows, w.sites)
        deep = [py for py, ops, _ in rows if ops[:1] == ["aten::relu"]]
        assert deep and all(py[0] == TRUNCATED and len(py) == 65
                            for py in deep)
        assert w.p.poll() is None
    finally:
        w.close()
    check_torch_profilers_frames(rows, python)


def test_a_process_without_python_gets_one_warning(tmp_path):
    """A C program with libtorch_cpu loaded: traced, without frames."""
    src = tmp_path / "ldtorch.c"
    exe = tmp_path / "ldtorch"
    src.write_text('#include <dlfcn.h>\n#include <stdio.h>\n'
                   '#include <unistd.h>\nint main(void) {\n'
                   '  if (!dlopen("libtorch_cpu.so.1.13", RTLD_NOW))\n'
                   '    return 1;\n  puts("ready"); fflush(stdout);\n'
                   '  pause();\n}\n')
    assert run(["gcc", str(src), "-o", str(exe), "-ldl"]).returncode == 0
    with Job([str(exe)]) as p:
        r = run([RFBPF, "-q", "-p", str(p.pid), "-d", "1",
                 "--python-stacks", "--no-table"])
        assert r.returncode == 0, r.stderr
        warnings = [l for l in r.stderr.splitlines() if "python" in l]
        assert len(warnings) == 1, r.stderr
        assert "runs no CPython" in warnings[0]
        assert "without Python frames" in warnings[0]
        assert p.p.poll() is None


def test_table_grouped_by_call_site(workload):
    """--group-by stack:2: aten::mm gets a row per call site, each with
    its two innermost frames as its Source Location, calls 1:3."""
    r = run([RFBPF, "-q", "-p", str(workload.pid), "-d", "3",
             "--python-stacks", "--group-by", "stack:2", "--top", "0"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(l for l in lines if l.startswith("Name"))
    col = header.index("Source Location")
    calls = {}
    for i, l in enumerate(lines):
        if l.startswith("aten::mm "):
            inner = l[col:].strip()
            outer = lines[i + 1][col:].strip()
            assert lines[i + 1][:col].strip() == ""
            assert outer.startswith("step ("), outer
            calls[inner] = int(l[:col].split()[-1])
    s = workload.sites
    assert set(calls) == {s["mm_a"], s["mm_b"]}, calls
    assert abs(calls[s["mm_b"]] - 3 * calls[s["mm_a"]]) <= 6, calls


def test_fleet_pprof_places_ops_in_model_code(workload, tmp_path):
    """The daemon with --python-stacks: its pprof files, as go tool
    pprof reads them, put aten::mm under its call sites' file:line."""
    from test_fleet import daemon_profiles, metric, pprof_files, promtool_check
    files, text = daemon_profiles(workload.pid, tmp_path, "--python-stacks")
    # Every interval's profile, merged as go tool pprof merges them (an
    # interval's window may be too short to hold both call sites).
    status, out = pprof_files(files, "-lines", "-focus", "aten::mm", "-top")
    assert status == 0, out
    for site in ("mm_a", "mm_b"):
        fn, rest = workload.sites[site].split(" (", 1)
        assert f"{fn} {rest[:-1]}" in out, (site, out)
    # The metrics count the stacks read and what was lost, and pass
    # promtool.
    assert metric(text, "rfbpf_job_python_stacks_total", kind="whole") > 0
    assert metric(text, "rfbpf_job_python_stacks_lost_total",
                  reason="truncated") > 0       # deep() is 80 deep
    promtool_check(text)


def test_chrome_trace_has_python_function_slices(workload, tmp_path):
    """-o: Python frames as Kineto's python_function slices, nesting with
    the ops: each aten::mm sits inside its call site's slice, itself
    inside step's, on the op's own thread."""
    out = tmp_path / "t.json"
    r = run([RFBPF, "-q", "-p", str(workload.pid), "-d", "2",
             "--python-stacks", "--python-depth", "8", "-o", str(out),
             "--no-table"])
    assert r.returncode == 0, r.stderr
    # Stopped by -d, not by the job's end: a loader slower than the job
    # (64 slices a step here without the depth cap) still comes up for
    # air.
    assert workload.p.poll() is None
    t = load_trace(out)
    x = [e for e in t["traceEvents"] if e["ph"] == "X"]
    py = [e for e in x if e["cat"] == "python_function"]
    assert py and t["otherData"]["python_stacks"] > 0
    roots, violations = rebuild_nesting(t)
    assert violations == []
    s = workload.sites

    def kineto(site):
        fn, rest = s[site].split(" (", 1)
        file, line = rest[:-1].rsplit(":", 1)
        return f"{file}({line}): {fn}"
    # Threads named as threading.Thread(name=...) named them.
    names = {e["tid"]: e["args"]["name"] for e in t["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"req-0", "req-1"} <= set(names.values()), names
    mm = [n for n in all_nodes(roots) if n.name == "aten::mm"]
    assert mm
    under_site = sum(n.parent is not None and n.parent.name in
                     (kineto("mm_a"), kineto("mm_b")) for n in mm)
    assert under_site >= 0.99 * len(mm), (under_site, len(mm))
    for n in mm:
        if n.parent is not None:
            assert n.parent.ev["cat"] == "python_function"
            assert n.parent.parent.name.endswith(": step")
            break


# record_function's own frames: a scope begins under them, and they
# return long before it ends.
ENTER_FRAMES = ("record_function.__enter__", "OpOverloadPacket.__call__")
# optim_train.py's scopes and the function of the frame each must sit in:
# the one holding the `with` (or the decorator's wrapper).
SCOPE_HOLDERS = {
    "Optimizer.zero_grad#Adam.zero_grad": "Optimizer.zero_grad",
    "Optimizer.step#Adam.step": "wrapper",
    "my_scope": "step",
    "decorated_step": "inner",
}


class Training:
    """optim_train.py: two threads training with Adam, until killed."""

    def __init__(self, python=(PYTHON, OPTIM)):
        self.p = subprocess.Popen([*python, "--seconds", "120"],
                                  stdout=subprocess.PIPE, text=True)
        for line in self.p.stdout:
            if line.strip() == "ready":
                break
        self.pid = self.p.pid

    def close(self):
        self.p.kill()
        self.p.wait()


def misnested_per_thread(t):
    """Each thread's slices (ops, Python frames, off-CPU) that start
    inside another and end after it."""
    by_tid = collections.defaultdict(list)
    for e in t["traceEvents"]:
        if e["ph"] == "X":
            by_tid[e["tid"]].append(e)
    return {tid: rebuild_nesting({"traceEvents": evs})[1]
            for tid, evs in by_tid.items()}


def trace_training(python, tmp_path, *extra):
    """rfbpf -p on optim_train.py run by python: the Chrome trace, and
    the folded stacks as (python frames, op frames, weight) rows."""
    w = Training(python)
    out, folded = tmp_path / "t.json", tmp_path / "t.folded"
    try:
        r = run([RFBPF, "-q", "-p", str(w.pid), "-d", "2",
                 "--python-stacks", "-o", str(out), "--folded",
                 str(folded), "--no-table", *extra])
        assert r.returncode == 0, r.stderr
        assert "warning" not in r.stderr, r.stderr
        assert w.p.poll() is None
    finally:
        w.close()
    return load_trace(out), folded


def frame_function(slice_name):
    """The function of a python_function slice, "FILE(LINE): FUNCTION"."""
    return slice_name.rsplit("): ", 1)[-1]


def held_by(fn, holder):
    """Whether a frame's function (a co_qualname) is holder's."""
    return fn == holder or fn.endswith("." + holder)


def check_training(t, folded, extra):
    # Each thread has its own decorated function (optim_train.py): no
    # scope is ended by the other thread, so each closes in its frame.
    assert t["otherData"]["async_ends"] == 0, t["otherData"]
    violations = misnested_per_thread(t)
    assert len(violations) >= 2, violations.keys()
    for tid, v in violations.items():
        assert v == [], (tid, len(v), v[:5])
    roots, _ = rebuild_nesting(t)
    nodes = all_nodes(roots)
    assert any(n.ev["cat"] == "python_function" for n in nodes)
    # Each scope under the frame holding its `with`, never inside
    # record_function's own frames.
    seen = collections.Counter()
    for n in nodes:
        holder = SCOPE_HOLDERS.get(n.name)
        if holder is None or n.ev["cat"] != "user_annotation":
            continue
        seen[n.name] += 1
        assert n.parent is not None and \
            n.parent.ev["cat"] == "python_function", n.name
        fn = frame_function(n.parent.name)
        assert held_by(fn, holder), (n.name, n.parent.name)
        for a in n.ancestors():
            assert not frame_function(a.name).endswith(ENTER_FRAMES), \
                (n.name, a.name)
    assert set(seen) == set(SCOPE_HOLDERS), seen
    if "--off-cpu" in extra:
        assert any(n.ev["cat"] == "off_cpu" for n in nodes)
    if "--shapes" in extra:
        assert any("Input Dims" in n.ev["args"] for n in nodes)
    # Folded stacks: a scope follows its holder's frame, not __enter__'s.
    rows = folded_rows(folded)
    under = collections.Counter()
    wrong = collections.Counter()
    for line in open(folded):
        frames = line.rsplit(" ", 1)[0].split(";")[2:]
        for i, fr in enumerate(frames):
            if fr in SCOPE_HOLDERS and i:
                fn = frames[i - 1].split(" (", 1)[0]
                assert not fn.endswith(ENTER_FRAMES), (fr, frames[i - 1])
                # A stack read while its thread ran can hit a frame being
                # replaced: it is marked (and counted), not misplaced.
                if fn.startswith("[python"):
                    continue
                ok = held_by(fn, SCOPE_HOLDERS[fr])
                under[fr, ok] += 1
                if not ok:
                    wrong[fr, fn] += 1
    assert rows and under and all(ok for (_, ok) in under), (under, wrong)


@pytest.mark.parametrize("probes,extra", [
    ("callback", []), ("entry", []),
    ("callback", ["--shapes", "--off-cpu"])])
def test_training_scopes_nest_with_their_python_frames(tmp_path, probes,
                                                       extra):
    """torch 1.13: zero misnested slices per thread, on both probe paths
    and with --shapes and --off-cpu, and every scope under its holder."""
    t, folded = trace_training((PYTHON, OPTIM), tmp_path, "--probes",
                               probes, *extra)
    check_training(t, folded, extra)


@pytest.mark.parametrize("probes,extra", [
    ("callback", []), ("entry", ["--shapes", "--off-cpu"])])
def test_training_scopes_nest_in_torch_2_14(tmp_path, probes, extra):
    """The same on Python 3.14 and torch 2.14 (the sid root), where
    zero_grad runs no op inside its scope."""
    root = sid_root_with(OPTIM)
    t, folded = trace_training(("chroot", root, "python3",
                                "/tmp/optim_train.py"), tmp_path,
                               "--probes", probes, *extra)
    check_training(t, folded, extra)
