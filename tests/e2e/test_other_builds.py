"""Symbol resolution on Debian's other PyTorch builds (trixie 2.6, sid
2.14), which cannot run on bookworm: their .debs are downloaded from
Debian's registry into a private apt state and unpacked. rfbpf's offsets
(printed with -v) must equal readelf's, and each build must resolve the
variants it really exports."""
import os
import re

import pytest

from harness import RFBPF, ROOT, elf_offsets, run

CACHE = "/var/tmp/rfbpf-torch-builds"
EXPECTED = {
    "2.6.0": {"before(const char*)", "before(std::string)",
              "before(FunctionSchema)", "end()"},
    "2.14.1": {"before(FunctionDescriptor)", "end()"},
}
SYMBOL = {
    "before(const char*)": "_ZN2at14RecordFunction6beforeEPKcl",
    "before(std::string)": "_ZN2at14RecordFunction6beforeENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEl",
    "before(FunctionSchema)": "_ZN2at14RecordFunction6beforeESt17reference_wrapperIKN3c1014FunctionSchemaEEl",
    "before(FunctionDescriptor)": "_ZN2at14RecordFunction6beforeESt7variantIJSt17basic_string_viewIcSt11char_traitsIcEESt17reference_wrapperIKN3c1014FunctionSchemaEEEEl",
    "end()": "_ZN2at14RecordFunction3endEv",
}


@pytest.fixture(scope="module")
def builds():
    r = run([os.path.join(ROOT, "tools", "fetch-torch-builds.sh"), CACHE],
            timeout=900)
    if r.returncode != 0:
        pytest.skip("Debian's registry is unreachable: cannot fetch "
                    f"libtorch 2.6/2.14 ({r.stderr.strip()[-200:]})")
    return r.stdout.split()


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_resolves_real_build(builds, version):
    lib = next(b for b in builds if b.endswith(version))
    r = run([RFBPF, "-v", "-q", "--no-table", "--probes", "entry", "--lib",
             lib, "--", "true"])
    assert r.returncode == 0, r.stderr
    found = {}
    for m in re.finditer(r"uprobe (.+?) at .*\+0x([0-9a-f]+)", r.stderr):
        found[m.group(1)] = int(m.group(2), 16)
    assert set(found) == EXPECTED[version], r.stderr
    truth = elf_offsets(lib, {SYMBOL[v] for v in found})
    for variant, off in found.items():
        assert truth[SYMBOL[variant]] == off, variant
    assert "C++11 string ABI" in r.stderr
