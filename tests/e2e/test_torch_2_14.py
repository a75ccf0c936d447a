"""Tracing a real torch 2.14.1 (Debian sid), whose only before() overload
takes a FunctionDescriptor (a std::variant passed on the stack), on both
probe paths (entry probes decode that argument; callback probes read the
RecordFunction's fn_): op names right, counts equal the kernel's, nesting
holds, output unchanged.

The sid root is built once with debootstrap (tools/make-torch-root.sh);
the workload runs in it with chroot, so rfbpf also opens the library
through /proc/PID/root as it does for containers."""
import pytest

from harness import (DESCRIPTOR_SYMBOLS, KernelCounts, RFBPF, WORKLOAD,
                    load_trace, ops_of, rebuild_nesting, run, sid_root_with,
                    torch_lib)

STEPS = 5


@pytest.fixture(scope="module")
def sid_root():
    return sid_root_with(WORKLOAD)


def losses(stdout):
    # Without /proc in the chroot, sid's UCX prints a warning to stdout.
    return [l for l in stdout.splitlines() if l.startswith(("main ", "worker "))]


def workload(root):
    return ["chroot", root, "python3", "/tmp/mlp_threads.py", "--observer",
            "--steps", str(STEPS)]


@pytest.mark.parametrize("probes", ["entry", "callback"])
def test_torch_2_14(sid_root, tmp_path, probes):
    lib = torch_lib(sid_root)
    untraced = run(workload(sid_root))
    assert untraced.returncode == 0, untraced.stderr
    kc = KernelCounts(lib, DESCRIPTOR_SYMBOLS)
    try:
        perf_out = tmp_path / "perf.csv"
        out = tmp_path / "t.json"
        r = run(kc.perf_args(str(perf_out), every_cpu=True) + [
            "--", RFBPF, "-q", "--no-table", "--probes", probes, "-o",
            str(out), "--lib", lib, "--"] + workload(sid_root))
        kernel = kc.parse(perf_out, kc.events)
    finally:
        kc.close()
    assert r.returncode == 0, r.stderr
    assert losses(r.stdout) == losses(untraced.stdout) != []
    trace = load_trace(out)
    # Named as it runs (python3), not as launched (chroot execs it).
    tracing = [l for l in r.stderr.splitlines() if "tracing PID" in l]
    assert len(tracing) == 1 and "(python3)" in tracing[0], r.stderr
    procs = {e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert "python3" in procs and "chroot" not in procs, procs
    other = trace["otherData"]
    assert other["drops"] == 0 and other["name_faults"] == 0
    befores = kernel["before(FunctionDescriptor)"]
    assert befores > 300
    if probes == "entry":
        assert other["before_events"]["before(FunctionDescriptor)"] == befores
        assert other["end_events"] == kernel["end()"]
    else:   # rfbpf's start callback ran once per before(), names from fn_
        assert other["before_events"]["start callback"] == befores
        assert other["end_events"] == befores
    check_mlp_trace(trace)


def check_mlp_trace(trace):
    """mlp_threads.py's trace on a torch 2.x: names, nesting, Kineto's
    categories, and backward ops joined to their forward thread."""
    other = trace["otherData"]
    names = {e["name"] for e in ops_of(trace)}
    assert {"aten::linear", "aten::addmm", "AddmmBackward0", "train_step",
            "forward", "backward"} <= names
    roots, violations = rebuild_nesting(trace)
    assert violations == []
    cats = {e["name"]: e["cat"] for e in ops_of(trace)}
    assert cats["train_step"] == "user_annotation"
    assert cats["aten::addmm"] == "cpu_op"
    # fwd_thread_id_ moved in 2.4 (kwinputs_): backward ops still name
    # their forward thread, and the flows join them.
    assert other["fwd_thread_ids"] is True
    backward = [e for e in ops_of(trace)
                if e["args"]["scope"] == "backward_function"
                and "Sequence number" in e["args"]]
    assert backward and all(0 < e["args"]["Fwd thread id"] < 1000
                            for e in backward)
    assert other["fwdbwd_flows"] > 0
