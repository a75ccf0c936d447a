"""rfbpf's BPF decoding of every before() argument shape, in the real
kernel, against tests/abi/rf_abi_driver.cpp: a program exporting the exact
mangled RecordFunction symbols of every PyTorch release (built with both
std::string ABIs) that prints what it passed. Covers what no PyTorch on
this machine runs: old-ABI strings, FunctionDescriptor holding a schema,
the DispatchKey overload; and names that fit exactly or are cut."""
import collections
import os

import pytest

from harness import RFBPF, ROOT, load_trace, ops_of, run

ABI_DIR = os.path.join(ROOT, "tests", "abi")
SCOPES = ["function", "backward_function", "torchscript_function",
          "kernel_function_dtype", "custom_class", "build_feature",
          "lite_interpreter", "user_scope", "static_runtime_op",
          "static_runtime_model"]


@pytest.mark.parametrize("abi", ["cxx11", "old"])
def test_every_variant_decodes(abi, tmp_path):
    driver = os.path.join(ABI_DIR, f"rf_abi_{abi}.bin")
    assert os.path.exists(driver), "built by make e2e (tests/abi/Makefile)"
    out = tmp_path / "t.json"
    r = run([RFBPF, "-q", "--no-table", "--probes", "entry", "--lib",
             driver, "-o", str(out), "--", driver])
    assert r.returncode == 0, r.stderr
    expected = [l.rstrip("\n").split("\t", 3)
                for l in r.stdout.splitlines(keepends=True)]
    trace = load_trace(out)
    ops = ops_of(trace)
    assert len(ops) == len(expected) == 28
    cut = 0
    for op, (variant, scope, seq, name) in zip(ops, expected):
        assert op["name"] == name[:127], (variant, op["name"][:40])
        assert op["args"]["scope"] == SCOPES[int(scope)], variant
        # As Kineto: the sequence number only when there is one.
        if int(seq) >= 0:
            assert op["args"]["Sequence number"] == int(seq), variant
        else:
            assert "Sequence number" not in op["args"], variant
        assert op["args"].get("name_truncated", False) == (len(name) > 127)
        cut += len(name) > 127
    other = trace["otherData"]
    assert other["names_truncated"] == cut == 7
    assert other["name_faults"] == 0 and other["drops"] == 0
    per_variant = collections.Counter(v for v, *_ in expected)
    for variant, n in per_variant.items():
        assert other["before_events"][variant] == n, variant
    assert other["end_events"] == 28
    assert other["truncated_ops"] == 0 and other["unmatched_ends"] == 0
    string_abi = "pre-C++11" if abi == "old" else "C++11"
    assert f"{string_abi} string ABI" in other["build"]
