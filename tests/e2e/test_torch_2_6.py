"""Tracing a real torch 2.6.0 with Python 3.13 (Debian trixie), whose
before() comes in three overloads (const char*, std::string and
FunctionSchema, C++11 string ABI) where 2.14 has one: both probe paths
against the kernel's own uprobe hit counts per overload, the same names,
nesting, categories and forward/backward flows as on 2.14, the job's
output unchanged; --python-stacks read from 3.13's _Py_DebugOffsets; and
--shapes against what torch.profiler writes in the same root.

The trixie root is built once with debootstrap (tools/make-torch-root.sh)
and the jobs run in it with chroot, as the sid tests do."""
import os

import pytest

from harness import (KernelCounts, RFBPF, VARIANT_SYMBOLS, WORKLOAD,
                    load_trace, run, torch_lib, torch_root_with)
from test_python_stacks import CALLSITES, check_python_in_root
from test_shapes import SHAPED, check_writes_what_kineto_writes
from test_torch_2_14 import check_mlp_trace, losses, workload

OVERLOADS = ("before(const char*)", "before(std::string)",
             "before(FunctionSchema)")


@pytest.fixture(scope="module")
def trixie_root():
    return torch_root_with("trixie", WORKLOAD, CALLSITES, SHAPED)


def test_the_root_holds_torch_2_6_and_python_3_13(trixie_root):
    """What the other tests here claim to test: the library by its name,
    the interpreter by itself, and torch's own version."""
    assert os.path.basename(torch_lib(trixie_root)) == "libtorch_cpu.so.2.6.0"
    r = run(["chroot", trixie_root, "python3", "-c",
             "import sys, torch; print(sys.version_info[:2], "
             "torch.__version__)"])
    assert r.returncode == 0, r.stderr
    assert "(3, 13) 2.6.0" in r.stdout, r.stdout


@pytest.mark.parametrize("probes", ["entry", "callback"])
def test_torch_2_6(trixie_root, tmp_path, probes):
    lib = torch_lib(trixie_root)
    untraced = run(workload(trixie_root))
    assert untraced.returncode == 0, untraced.stderr
    # The kernel counts the overloads this build really exports (checked
    # against its symbols by test_other_builds): the three, and end().
    kc = KernelCounts(lib, VARIANT_SYMBOLS)
    try:
        perf_out = tmp_path / "perf.csv"
        out = tmp_path / "t.json"
        r = run(kc.perf_args(str(perf_out), every_cpu=True) + [
            "--", RFBPF, "-q", "--no-table", "--probes", probes, "-o",
            str(out), "--lib", lib, "--"] + workload(trixie_root))
        kernel = kc.parse(perf_out, kc.events)
    finally:
        kc.close()
    assert r.returncode == 0, r.stderr
    assert losses(r.stdout) == losses(untraced.stdout) != []
    trace = load_trace(out)
    other = trace["otherData"]
    assert other["drops"] == 0 and other["name_faults"] == 0
    assert set(kernel) == set(VARIANT_SYMBOLS), kernel
    # The job calls every overload (record_function's names are strings,
    # ops' schemas), so a probe decoding one of them wrongly shows.
    assert all(kernel[v] > 0 for v in OVERLOADS), kernel
    befores = sum(kernel[v] for v in OVERLOADS)
    assert befores > 300
    seen = other["before_events"]
    if probes == "entry":
        for v in OVERLOADS:
            assert seen[v] == kernel[v], (v, seen, kernel)
        assert other["end_events"] == kernel["end()"]
    else:   # rfbpf's start callback ran once per before(), names from fn_
        assert seen["start callback"] == befores, (seen, kernel)
        assert other["end_events"] == befores
    # Overloads 2.6 does not have stay unprobed.
    assert seen["before(std::string, old ABI)"] == 0
    assert seen["before(FunctionDescriptor)"] == 0
    check_mlp_trace(trace)


def test_python_3_13_from_its_debug_offsets(trixie_root, tmp_path):
    """py_callsites.py on Python 3.13 and torch 2.6: the checks the sid
    root's 3.14 passes, with the frames torch.profiler records there."""
    check_python_in_root(("chroot", trixie_root, "python3",
                          "/tmp/py_callsites.py"), tmp_path)


def test_torch_2_6_writes_what_kineto_writes(trixie_root, tmp_path):
    """--shapes with 2.6's layout row (IValue tags and TensorImpl offsets
    of 2.6, not 2.14's): the very Input Dims, types, strides and concrete
    inputs torch.profiler(record_shapes=True) writes in the same root."""
    check_writes_what_kineto_writes(trixie_root, tmp_path)
