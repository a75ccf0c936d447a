"""rfbpf's table of where CPython 3.13 and 3.14 keep each field in their
_Py_DebugOffsets (user/python/py_debug_words.h), held to the versions'
own headers: Debian's libpython3.13-dev (trixie) and libpython3.14-dev
(sid), fetched with a private apt state (tools/fetch-python-headers.sh).
The 3.14 table is also exercised end to end (test_python_stacks.py, in
the sid root); 3.13 runs nowhere here, so this is its check."""
import os

import pytest

from harness import ROOT, run

HEADERS = "/var/tmp/rfbpf-python-headers"


@pytest.fixture(scope="module")
def includes():
    r = run([os.path.join(ROOT, "tools", "fetch-python-headers.sh"),
             HEADERS], timeout=600)
    if r.returncode != 0:
        pytest.skip("cannot fetch libpython3.13-dev/3.14-dev: "
                    + r.stderr.strip()[-300:])
    return r.stdout.split()


@pytest.mark.parametrize("minor", [13, 14])
def test_debug_words_are_the_headers(includes, tmp_path, minor):
    inc = next(i for i in includes if f"libpython3.{minor}-dev" in i)
    exe = tmp_path / "py_debug_words"
    r = run(["gcc", "-Wall", "-Wextra", "-Werror",
             f"-I{inc}/python3.{minor}", f"-I{inc}",
             f"-I{os.path.join(ROOT, 'user', 'python')}",
             f"-I{os.path.join(ROOT, 'bpf')}",
             os.path.join(ROOT, "tests", "fixtures", "py_debug_words.c"),
             "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    r = run([str(exe)])
    assert r.returncode == 0, r.stdout
    assert "MISMATCH" not in r.stdout and r.stdout.count("\n") >= 21
