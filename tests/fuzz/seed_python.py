#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Writes the seed corpus of fuzz_python (tests/fuzz/corpus/python/):
memory images of an interpreter with two threads, each a few frames deep
in code objects with names, files and location tables, for CPython 3.11
(py_offsets_311's layout) and 3.13 and 3.14 (offsets in _Py_DebugOffsets
at _PyRuntime's start, indexed as user/python/py_debug_words.h says).
The input format is fuzz_python.c's: a version byte (0: 3.11, 1: 3.13,
2: 3.14), then the memory from IMAGE_BASE on.

    tests/fuzz/seed_python.py [DIR]
"""
import os
import struct
import sys

BASE = 0x10000          # fuzz_python.c's IMAGE_BASE

# Where each layout keeps the fields the reader uses. 3.11's are
# py_offsets_311; for 3.13+ they are whatever the debug offsets say, so
# the seeds pick their own (3.14's frame owner sits at 74).
L311 = dict(interp_head=40, threads_head=16, tstate_next=8, native_id=160,
            cframe=56, current_frame=8, frame_code=32, frame_previous=48,
            frame_instr=56, frame_owner=69, code_filename=112,
            code_qualname=128, code_firstlineno=72, code_linetable=136,
            code_adaptive=184, str_length=16, str_state=32, str_ascii=48,
            bytes_size=16, bytes_data=32)
L313 = dict(L311, interp_head=700, threads_head=24, tstate_next=16,
            native_id=152, cframe=None, current_frame=72, frame_code=0,
            frame_previous=8, frame_instr=56, frame_owner=70,
            code_adaptive=200, interp_gil=3000)
L314 = dict(L313, frame_owner=74)
# py_debug_words.h: word index of each offset, per minor.
WORDS = {
    13: dict(free_threaded=2, interp_head=5, threads_head=9, tstate_next=21,
             current_frame=23, native_id=25, frame_previous=29,
             frame_code=30, frame_instr=31, frame_owner=33,
             code_filename=35, code_qualname=37, code_linetable=38,
             code_firstlineno=39, code_adaptive=43, bytes_size=65,
             bytes_data=66, str_state=68, str_length=69, str_ascii=70,
             interp_gil=15),
    14: dict(free_threaded=2, interp_head=5, threads_head=9, tstate_next=24,
             current_frame=26, native_id=28, frame_previous=32,
             frame_code=33, frame_instr=34, frame_owner=36,
             code_filename=40, code_qualname=42, code_linetable=43,
             code_firstlineno=44, code_adaptive=48, bytes_size=75,
             bytes_data=76, str_state=78, str_length=79, str_ascii=80,
             interp_gil=16),
}


class Image:
    """The target's memory from BASE on, allocated as it is built."""

    def __init__(self, runtime_size):
        self.mem = bytearray(runtime_size)

    def alloc(self, size):
        at = (len(self.mem) + 15) & ~15
        self.mem.extend(b"\0" * (at + size - len(self.mem)))
        return BASE + at

    def put(self, addr, fmt, *v):
        struct.pack_into("<" + fmt, self.mem, addr - BASE, *v)

    def write(self, addr, data):
        self.mem[addr - BASE:addr - BASE + len(data)] = data


def ascii_str(img, lay, text):
    s = img.alloc(lay["str_ascii"] + len(text) + 1)
    img.put(s + lay["str_length"], "Q", len(text))
    img.put(s + lay["str_state"], "I", 1 << 2 | 1 << 5 | 1 << 6)
    img.write(s + lay["str_ascii"], text.encode())
    return s


def line_table(units_per_line):
    """Form 13 entries (a line delta only), one line after another."""
    out = b""
    for n in units_per_line:
        out += bytes([0x80 | 13 << 3 | (n - 1), 2])  # delta +1
    return out


def code_object(img, lay, name, filename, first_line):
    table = line_table([4, 8, 2, 6])
    b = img.alloc(lay["bytes_data"] + len(table))
    img.put(b + lay["bytes_size"], "Q", len(table))
    img.write(b + lay["bytes_data"], table)
    c = img.alloc(lay["code_adaptive"] + 64)
    img.put(c + lay["code_qualname"], "Q", ascii_str(img, lay, name))
    img.put(c + lay["code_filename"], "Q", ascii_str(img, lay, filename))
    img.put(c + lay["code_firstlineno"], "i", first_line)
    img.put(c + lay["code_linetable"], "Q", b)
    return c


def frames(img, lay, codes, owner_shim=None):
    """Frames outermost first in codes; the innermost is returned."""
    prev = 0
    for i, (code, unit) in enumerate(codes):
        f = img.alloc(80)
        img.put(f + lay["frame_code"], "Q", code)
        img.put(f + lay["frame_previous"], "Q", prev)
        img.put(f + lay["frame_instr"], "Q",
                code + lay["code_adaptive"] + 2 * unit)
        if owner_shim is not None and i == 1:
            img.put(f + lay["frame_owner"], "B", owner_shim)
        prev = f
    return prev


def str_dict(img, items):
    """A combined dict of str keys (3.11: unicode entries, key and value)."""
    keys = img.alloc(32 + 8 + 16 * len(items))
    img.put(keys + 9, "B", 3)                   # log2 of 8 index bytes
    img.put(keys + 10, "B", 1)                  # all keys str
    img.put(keys + 24, "Q", len(items))
    for i, (k, v) in enumerate(items):
        img.put(keys + 32 + 8 + 16 * i, "QQ", k, v)
    d = img.alloc(48)
    img.put(d + 32, "Q", keys)
    return d


def thread_names(img, lay, interp, threads):
    """sys.modules["threading"]._active: ident -> Thread, each with a
    managed dict of _name and _native_id (3.11's layout)."""
    thread_type = img.alloc(1024)
    img.put(thread_type + 168, "Q", 1 << 4)     # Py_TPFLAGS_MANAGED_DICT
    attr_keys = img.alloc(32 + 8 + 32)
    img.put(attr_keys + 9, "B", 3)
    img.put(attr_keys + 10, "B", 1)
    img.put(attr_keys + 24, "Q", 2)
    img.put(attr_keys + 40, "QQ", ascii_str(img, lay, "_name"), 0)
    img.put(attr_keys + 56, "QQ", ascii_str(img, lay, "_native_id"), 0)
    img.put(thread_type + 872, "Q", attr_keys)
    active_keys = img.alloc(32 + 8 + 24 * len(threads))
    img.put(active_keys + 9, "B", 3)
    img.put(active_keys + 10, "B", 0)           # int keys: general
    img.put(active_keys + 24, "Q", len(threads))
    for i, (tid, name) in enumerate(threads):
        native = img.alloc(32)
        img.put(native + 16, "q", 1)
        img.put(native + 24, "I", tid)
        values = img.alloc(16)
        img.put(values, "QQ", ascii_str(img, lay, name), native)
        obj = img.alloc(64) + 32                # values 4 words before
        img.put(obj - 32, "Q", values)
        img.put(obj + 8, "Q", thread_type)
        img.put(active_keys + 40 + 24 * i, "QQQ", tid, native, obj)
    active = img.alloc(48)
    img.put(active + 32, "Q", active_keys)
    threading = img.alloc(32)
    img.put(threading + 16, "Q",
            str_dict(img, [(ascii_str(img, lay, "_active"), active)]))
    img.put(interp + 888, "Q",
            str_dict(img, [(ascii_str(img, lay, "threading"), threading)]))


def interpreter(minor):
    lay = {11: L311, 13: L313, 14: L314}[minor]
    img = Image(4096)
    codes = [code_object(img, lay, q, "/srv/train.py", l) for q, l in
             (("<module>", 1), ("train", 10), ("Model.forward", 40))]
    interp = img.alloc(4096)
    img.put(BASE + lay["interp_head"], "Q", interp)
    states = []
    for tid, stack in ((4242, [(codes[0], 3), (codes[1], 7),
                               (codes[2], 12)]),
                       (4243, [(codes[1], -1)])):
        t = img.alloc(512)
        frame = frames(img, lay, stack,
                       owner_shim={13: 3, 14: 4}.get(minor))
        if lay["cframe"] is None:
            img.put(t + lay["current_frame"], "Q", frame)
        else:
            cf = img.alloc(32)
            img.put(t + lay["cframe"], "Q", cf)
            img.put(cf + lay["current_frame"], "Q", frame)
        img.put(t + lay["native_id"], "Q", tid)
        states.append(t)
    if minor == 11:
        thread_names(img, lay, interp, ((4242, "MainThread"),
                                        (4243, "loader-0")))
    img.put(interp + lay["threads_head"], "Q", states[0])
    img.put(states[0] + lay["tstate_next"], "Q", states[1])
    if minor != 11:
        img.mem[0:8] = b"xdebugpy"
        img.put(BASE + 8, "Q", 3 << 24 | minor << 16)
        for field, word in WORDS[minor].items():
            if field != "free_threaded":
                img.put(BASE + 8 * word, "Q", lay[field])
    return bytes([{11: 0, 13: 1, 14: 2}[minor]]) + bytes(img.mem)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "corpus", "python")
    os.makedirs(out, exist_ok=True)
    for minor in (11, 13, 14):
        with open(os.path.join(out, "cpython3.%d" % minor), "wb") as f:
            f.write(interpreter(minor))


if __name__ == "__main__":
    main()
