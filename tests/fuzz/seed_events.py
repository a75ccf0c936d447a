#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Writes the seed corpus of fuzz_events (tests/fuzz/corpus/events/):
record streams as BPF sends them for a few ordinary runs, so the fuzzer
starts from records whose addresses, threads and sizes pair up. The
layouts are bpf/rfbpf.h's and bpf/rfbpf_gpu.h's on x86-64; the input
format is fuzz_events.c's (two option bytes, then records each preceded
by its 16-bit little-endian length).

    tests/fuzz/seed_events.py [DIR]
"""
import os
import struct
import sys

BEFORE, END, THREAD_EXIT, GPU_LAUNCH, GPU_ACTIVITY = 1, 2, 3, 4, 5
FORK, CUPTI_CALL = 6, 7
PY_STACK, INPUTS, OFF_CPU, WAKE = 8, 9, 10, 11
MEMORY = 13
# fuzz_events.c's option bits
O_OFF_CPU, O_PYTHON, O_SHAPES, O_SAMPLED = 1, 2, 4, 8
O_GROUP_STACK, O_GROUP_SHAPES, O_ACTIVATED = 32, 64, 256
O_FLEET = 1 << 15
PID = 100


def hdr(kind, ts, addr, tid, pid=PID, variant=0, scope=0, flags=0,
        name_len=0):
    return struct.pack("<QQIIBBBBI", ts, addr, pid, tid, kind, variant,
                       scope, flags, name_len)


def before(ts, addr, tid, name, seq=-1, scope=0, fwd=0):
    n = name.encode()
    return (hdr(BEFORE, ts, addr, tid, scope=scope, name_len=len(n)) +
            struct.pack("<qQQ", seq, tid, fwd) + n.ljust(128, b"\0"))


def end(ts, addr, tid):
    return hdr(END, ts, addr, tid, variant=7)


def thread_exit(ts, tid, comm):
    return hdr(THREAD_EXIT, ts, 0, tid) + comm.encode().ljust(16, b"\0")


def py_stack(ts, addr, tid, frames, flags=0):
    body = b"".join(struct.pack("<QiI", code, unit, 0)
                    for code, unit in frames)
    return (hdr(PY_STACK, ts, addr, tid) +
            struct.pack("<II", len(frames), flags) + body)


def in_hdr(kind, aux, count, kept, flags=0):
    return kind | flags << 8 | aux << 16 | count << 32 | kept << 48


def inputs(ts, addr, tid):
    # a 2-d float tensor [4, 8] (strides 8, 1), then an int scalar 3
    w = [in_hdr(2, 6, 2, 2), 4, 8, 8, 1, in_hdr(3, 0, 0, 0), 3]
    return (hdr(INPUTS, ts, addr, tid) + struct.pack("<IHH", 2, len(w), 0) +
            struct.pack("<%dQ" % len(w), *w))


def off_cpu(ts, tid, start, reason, waker):
    return (hdr(OFF_CPU, ts, 0, tid) +
            struct.pack("<QQIII", start, ts - 10, reason, waker, PID) +
            b"worker".ljust(16, b"\0") + b"\0" * 4)


def wake(ts, tid, woken):
    return hdr(WAKE, ts, 0, tid) + struct.pack("<II", woken, 0)


def gpu_launch(ts, addr, tid, corr):
    return (hdr(GPU_LAUNCH, ts, addr, tid) +
            struct.pack("<IIBBHI", corr, 211, 1, 0, 1, corr + 1000) +
            b"cudaLaunchKernel".ljust(56, b"\0"))


def gpu_activity(ts, corr, start, stop, name):
    """A kernel's record (struct rf_gpu_activity, offsets from its start)."""
    n = name.encode()[:223]
    act = bytearray(376)
    struct.pack_into("<IIII", act, 0, 1, 376, 1, corr)  # abi, size, kernel
    struct.pack_into("<QQ", act, 16, start, stop)
    struct.pack_into("<Q", act, 40, 7)                  # stream
    struct.pack_into("<I", act, 104, len(n))
    act[112:112 + len(n)] = n
    return hdr(GPU_ACTIVITY, ts, 0, 0) + bytes(act)


def mem(ts, tid, addr, nbytes, source=0, flags=0, dev=(0, -1),
        totals=(0, 0)):
    """A --memory record (struct rf_mem_event): source 0 a CPU
    allocation, 1 a CPU free (size 0), 2 a device's report."""
    return (hdr(MEMORY, ts, addr, tid, variant=source, flags=flags) +
            struct.pack("<qQQbb6x", nbytes, totals[0], totals[1], *dev))


def stream(opt, records):
    out = struct.pack("<H", opt)
    for r in records:
        out += struct.pack("<H", len(r)) + r
    return out


def nested():
    """A training step: forward, a linear layer, its matmul, backward."""
    return stream(0, [
        before(1000, 0xa0, 7, "ProfilerStep#0", scope=7),
        before(1100, 0xb0, 7, "aten::linear", seq=5),
        before(1150, 0xc0, 7, "aten::addmm", seq=6),
        end(1400, 0xc0, 7),
        end(1500, 0xb0, 7),
        before(1600, 0xd0, 8, "autograd::engine::evaluate_function: "
               "AddmmBackward0", seq=6, scope=1, fwd=7),
        end(1900, 0xd0, 8),
        end(2000, 0xa0, 7),
        end(2100, 0xe0, 7),                 # unmatched
    ])


def python_shapes_off_cpu():
    return stream(O_OFF_CPU | O_PYTHON | O_SHAPES | O_GROUP_STACK |
                  O_GROUP_SHAPES | O_ACTIVATED, [
        before(1000, 0xa0, 7, "aten::mm"),
        py_stack(1001, 0xa0, 7, [(0x1100, 12), (0x1200, 3), (0x1301, 0)]),
        inputs(1002, 0xa0, 7),
        before(1100, 0xb0, 7, "aten::copy_"),
        py_stack(1101, 0xb0, 7, [], flags=1),
        off_cpu(1300, 7, 1150, 5, 9),
        wake(1310, 9, 7),
        end(1400, 0xb0, 7),
        end(1500, 0xa0, 7),
        before(1600, 0xf0, 9, "aten::add"),
        thread_exit(1700, 9, "pt_autograd_0"),
    ])


def gpu():
    return stream(O_SAMPLED, [
        before(1000, 0xa0, 7, "aten::mm"),
        gpu_launch(1100, 0xa0, 7, 42),
        end(1200, 0xa0, 7),
        gpu_activity(1300, 42, 1250, 1280, "_Z10sgemm_kernelv"),
        gpu_activity(1310, 43, 1290, 1295, "_Z4orphanv"),
    ])


def session_hooks():
    """What the live session's hooks see (fuzz_events.c takes the
    target's answers from each record's tail): a thread first seen by an
    end, named from it; a Python thread name; a fork; a watched CUPTI
    call, then one with an index past the table."""
    return stream(O_PYTHON | O_ACTIVATED, [
        end(900, 0x90, 11) + b"mlp-worker",
        before(1000, 0xa0, 9, "aten::mm"),
        py_stack(1001, 0xa0, 9, [(0x1100, 12)]) + b"data-loader \xff",
        hdr(FORK, 1050, 4242, 9),
        hdr(CUPTI_CALL, 1060, 4, 12) + b"pt_main_thread",
        hdr(CUPTI_CALL, 1070, 1000, 13),
        end(1100, 0xa0, 9),
    ])


def memory():
    """--memory: a block made in an op and freed on another thread, one
    kept, a free of a block made before tracing, a byte-sampled block,
    and a CUDA device's report; fleet mode keeps stacks."""
    return stream(O_FLEET, [
        before(1000, 0xa0, 7, "keep", scope=7),
        before(1010, 0xb0, 7, "aten::empty"),
        mem(1011, 7, 0x7000, 4 << 20),
        mem(1013, 7, 0x8000, 256),
        end(1020, 0xb0, 7),
        end(1030, 0xa0, 7),
        mem(1040, 9, 0x8000, 0, source=1),
        mem(1050, 9, 0x9000, 0, source=1),          # made before
        mem(1061, 7, 0xa000, 65536, flags=8),       # byte-sampled
        before(1070, 0xc0, 7, "cuda_op"),
        mem(1071, 7, 0x7f0000000000, 1 << 20, source=2, dev=(1, 0),
            totals=(1 << 20, 2 << 20)),
        end(1080, 0xc0, 7),
    ])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "corpus", "events")
    os.makedirs(out, exist_ok=True)
    for name, make in (("nested", nested),
                       ("python_shapes_off_cpu", python_shapes_off_cpu),
                       ("gpu", gpu), ("session_hooks", session_hooks),
                       ("memory", memory)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(make())


if __name__ == "__main__":
    main()
