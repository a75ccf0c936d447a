#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Writes the seed corpus of fuzz_cupti (tests/fuzz/corpus/cupti/): an
activity buffer as CUPTI 13 (or 12) fills it (a kernel, a copy, a runtime
API record the agent skips, a set, a peer copy), then the API callbacks
of a cudaLaunchKernel that nests a cuLaunchKernel, a failed launch and a
device sync. The record layouts are CUDA 13's headers' (CUDA 12's kernel
and memcpy are 8 bytes shorter, their fields where 13 has them); the
input format is fuzz_cupti.c's.

    tests/fuzz/seed_cupti.py [DIR]
"""
import os
import struct
import sys

KERNEL, CONC_KERNEL, MEMCPY, MEMSET, MEMCPY2, RUNTIME = 3, 10, 1, 2, 22, 5
SIZES = {13: {CONC_KERNEL: 216, MEMCPY: 96}, 12: {CONC_KERNEL: 208,
                                                  MEMCPY: 88}}
DOM_DRIVER, DOM_RUNTIME = 1, 2
CB_CUDA_LAUNCH, CB_CU_LAUNCH, CB_DEVICE_SYNC = 211, 307, 165
F_CUDA12, F_LEASE, F_HANDSHAKE = 1, 2, 4


def record(size, kind, corr_at, corr, start, end, extra=()):
    r = bytearray(size)
    struct.pack_into("<I", r, 0, kind)
    struct.pack_into("<QQ", r, 16, start, end)
    struct.pack_into("<I", r, corr_at, corr)
    for at, fmt, v in extra:
        struct.pack_into(fmt, r, at, v)
    return bytes(r)


def buffer(cuda):
    s = SIZES[cuda]
    return b"".join((
        # name: a string at offset 4 of the input (the buffer's start)
        record(s[CONC_KERNEL], CONC_KERNEL, 92, 11, 1000, 2000,
               ((104, "<Q", 4), (40, "<I", 0), (48, "<I", 7))),
        record(s[MEMCPY], MEMCPY, 44, 12, 2100, 2200, ((8, "<Q", 4096),)),
        record(40, RUNTIME, 36, 13, 900, 950),
        record(88, MEMSET, 44, 14, 2300, 2400),
        record(96, MEMCPY2, 60, 15, 2500, 2600),
    ))


def call(domain, site, cbid, corr, ret=None, name=0):
    flags = site | (2 if ret is not None else 0)
    return struct.pack("<BBIIiH", domain, flags, cbid, corr, ret or 0, name)


def calls():
    enter, leave = 0, 1
    return b"".join((
        call(DOM_RUNTIME, enter, CB_CUDA_LAUNCH, 11),
        call(DOM_DRIVER, enter, CB_CU_LAUNCH, 12),
        call(DOM_DRIVER, leave, CB_CU_LAUNCH, 12, 0),
        call(DOM_RUNTIME, leave, CB_CUDA_LAUNCH, 11, 0, name=4),
        call(DOM_RUNTIME, enter, CB_CUDA_LAUNCH, 13),
        call(DOM_RUNTIME, leave, CB_CUDA_LAUNCH, 13, 1, name=4),
        call(DOM_RUNTIME, enter, CB_DEVICE_SYNC, 14),
        call(DOM_RUNTIME, leave, CB_DEVICE_SYNC, 14, 0, name=4),
    ))


def seed(flags, cuda):
    b = buffer(cuda)
    return struct.pack("<BBH", flags, 3, len(b)) + b + calls() + b"0.25"


# fuzz_cupti.c's handshake steps: lease kind, requests, CUPTI's answers.
NO_LEASE, EXPIRED, HELD, LEASE_AT = 0, 1, 2, 3
YIELD, FLUSH = 4, 8
OK, REFUSED = 0, 3        # success; held by another subscriber


def step(lease, requests=0, subscribe=OK, other=OK, v2=1, ms=1000,
         word=0):
    return struct.pack("<BBBBIQ", lease | requests, subscribe, other, v2,
                       ms, word)


def handshake(cuda):
    """A run as rfbpf drives it: the lease starts, a flush is asked for
    before the end, the lease runs out; a second tracer comes and finds
    CUPTI held; another tool starts using CUPTI (yield)."""
    b = buffer(cuda)
    steps = (step(NO_LEASE), step(HELD), step(HELD, FLUSH),
             step(EXPIRED), step(HELD, subscribe=REFUSED), step(NO_LEASE),
             step(HELD, v2=0), step(HELD, YIELD), step(HELD),
             step(LEASE_AT, word=1 << 62))
    return (struct.pack("<BBH", F_HANDSHAKE |
                        (F_CUDA12 if cuda == 12 else 0), 0, len(b)) + b +
            b"".join(steps))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "corpus", "cupti")
    os.makedirs(out, exist_ok=True)
    for name, data in (("cuda13_leased", seed(F_LEASE, 13)),
                       ("cuda12_leased", seed(F_LEASE | F_CUDA12, 12)),
                       ("cuda13_no_lease", seed(0, 13)),
                       ("cuda13_handshake", handshake(13)),
                       ("cuda12_handshake", handshake(12))):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
