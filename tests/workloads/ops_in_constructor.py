"""A CUDA job (the stand-in libcudart) whose main thread runs ops only
inside a library's constructor, that is inside the dynamic loader, for
CTOR_SECONDS: the library is build/cupti/ctor/libops_in_constructor.so
(tests/gpu/ops_in_constructor.c). Prints "ready", waits for a line,
loads the library ("in constructor" while its ops run), then "done"."""
import ctypes
import os
import sys

import torch  # noqa: F401  (the constructor's ops need it loaded)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ctypes.CDLL(os.path.join(ROOT, "build", "cupti", "sim", "libcudart.so.12"))
print("ready", flush=True)
sys.stdin.readline()
ctypes.CDLL(os.path.join(ROOT, "build", "cupti", "ctor",
                         "libops_in_constructor.so"))
print("done", flush=True)
