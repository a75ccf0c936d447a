"""A torch package laid out as a pip wheel installs it, built from
Debian's real torch 1.13 files (PyPI is out of reach here).

A wheel ships its libraries inside the package, unversioned:
site-packages/torch/lib/libtorch_cpu.so, libc10.so, libtorch.so, ...,
each with RUNPATH $ORIGIN (so they find each other there) and the
extension torch/_C.*.so with RUNPATH $ORIGIN/lib. Debian's files are
copied and given exactly that with patchelf (sonames, NEEDED entries and
RUNPATHs), so the dynamic loader finds them the way it finds a wheel's,
with no LD_LIBRARY_PATH. The copies are new inodes: a uprobe on
/usr/lib's libtorch_cpu never fires in a process that maps them.
"""
import os
import shutil
import subprocess

DEBIAN_TORCH = "/usr/lib/python3/dist-packages/torch"
DEBIAN_LIBS = "/usr/lib/x86_64-linux-gnu"
VERSION = "1.13"
# What torch's extension loads, directly or through torch/__init__.py's
# _load_global_deps (libtorch_global_deps.so).
LIBS = ["libc10", "libshm", "libtorch", "libtorch_cpu", "libtorch_global_deps",
        "libtorch_python"]


def patchelf(*args):
    if not shutil.which("patchelf"):
        raise RuntimeError("patchelf is missing: run tools/install-deps.sh")
    subprocess.run(["patchelf", *args], check=True)


def unversion_needed(path):
    """NEEDED libX.so.1.13 -> libX.so, for every library of the wheel."""
    args = []
    for lib in LIBS:
        args += ["--replace-needed", f"{lib}.so.{VERSION}", f"{lib}.so"]
    patchelf(*args, path)


def build(site_packages):
    """site-packages/torch as a wheel lays it out; returns the path of
    its libtorch_cpu.so."""
    pkg = os.path.join(site_packages, "torch")
    # include/ and test/ are symlinks into other packages; lib/ is built.
    shutil.copytree(DEBIAN_TORCH, pkg, symlinks=True,
                    ignore=lambda d, names: {"lib", "include", "test"}
                    if d == DEBIAN_TORCH else set())
    lib_dir = os.path.join(pkg, "lib")
    os.mkdir(lib_dir)
    for lib in LIBS:
        dst = os.path.join(lib_dir, f"{lib}.so")
        shutil.copy(os.path.join(DEBIAN_LIBS, f"{lib}.so.{VERSION}"), dst)
        patchelf("--set-soname", f"{lib}.so", "--set-rpath", "$ORIGIN", dst)
        unversion_needed(dst)
    for name in os.listdir(pkg):
        if name.endswith(".so"):        # _C, _C_flatbuffer
            ext = os.path.join(pkg, name)
            unversion_needed(ext)
            patchelf("--set-rpath", "$ORIGIN/lib", ext)
    return os.path.join(lib_dir, "libtorch_cpu.so")
