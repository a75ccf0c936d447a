#!/usr/bin/env python3
"""What a uprobe attached for one pid costs that process at every context
switch, though nothing ever hits it.

libbpf attaches a uprobe for a pid as a perf event bound to that thread
(perf_event_open with pid, cpu -1); the kernel schedules a thread's perf
events out and in with it at every context switch. A uprobe for every
process (pid -1) is a perf event bound to a CPU instead, which no context
switch touches. rfbpf's page is one job's own file, so its two uprobes
are attached the second way (user/session/session.c, probe_stubs).

bench/switch_pingpong (two threads pinned to one CPU handing a byte back
and forth) runs with no event, with a uprobe on a libc function it never
calls bound to its main thread, and with the same uprobe for every
process; the three take turns, and each prints the median ns per switch
of its runs.

  sudo bench/task_event_switch.py [--runs 8] [--markdown FILE]
"""
import argparse
import ctypes
import os
import statistics
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINGPONG = os.path.join(ROOT, "build", "bench", "switch_pingpong")
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
NEVER_CALLED = "getpwnam"
SYS_perf_event_open = 298
PERF_FLAG_FD_CLOEXEC = 8

libc = ctypes.CDLL(None, use_errno=True)


def symbol_offset(path, name):
    """A function's file offset in path (its value: libc is linked at 0)."""
    import subprocess
    out = subprocess.run(["readelf", "-Ws", "--dyn-syms", path],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[7].split("@")[0] == name:
            return int(f[1], 16)
    sys.exit(f"{name} not found in {path}")


def uprobe_attr(path_buf, offset):
    """perf_event_attr for a uprobe at path+offset (the uprobe PMU's type
    from sysfs; config1 the path, config2 the offset), enabled."""
    with open("/sys/bus/event_source/devices/uprobe/type") as f:
        pmu = int(f.read())
    attr = bytearray(128)
    struct.pack_into("=IIQ", attr, 0, pmu, len(attr), 0)
    struct.pack_into("=QQ", attr, 56, ctypes.addressof(path_buf), offset)
    return (ctypes.c_char * len(attr)).from_buffer(attr)


def run(event, attr, switches, reps):
    """switch_pingpong's median ns per switch; event: None, "thread" (bound
    to its main thread before it starts) or "every" (pid -1, CPU 0)."""
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.read(go_r, 1)
        os.dup2(out_w, 1)
        os.execv(PINGPONG, [PINGPONG, str(switches), str(reps), "0"])
    os.close(go_r)
    os.close(out_w)
    fd = -1
    if event:
        fd = libc.syscall(SYS_perf_event_open, attr,
                          pid if event == "thread" else -1,
                          -1 if event == "thread" else 0, -1,
                          PERF_FLAG_FD_CLOEXEC)
        if fd < 0:
            os.kill(pid, 9)
            sys.exit("perf_event_open: " +
                     os.strerror(ctypes.get_errno()))
    os.write(go_w, b"x")
    os.close(go_w)
    text = os.read(out_r, 64).decode()
    os.close(out_r)
    os.waitpid(pid, 0)
    if fd >= 0:
        os.close(fd)
    return float(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--switches", type=int, default=200000)
    ap.add_argument("--markdown")
    a = ap.parse_args()
    if not os.path.exists(PINGPONG):
        sys.exit(f"{PINGPONG} missing: make bench")
    path = ctypes.create_string_buffer(LIBC.encode())
    attr = uprobe_attr(path, symbol_offset(LIBC, NEVER_CALLED))
    kinds = [None, "thread", "every"]
    ns = {k: [] for k in kinds}
    for i in range(a.runs):
        for k in kinds[i % 3:] + kinds[:i % 3]:     # turns rotate
            ns[k].append(run(k, attr, a.switches, 5))
    base = statistics.median(ns[None])
    lines = ["", f"A uprobe on libc's {NEVER_CALLED}, never called, and "
             "what a context switch of bench/switch_pingpong costs "
             f"({a.runs} runs each, in turns):", "",
             "| the uprobe | ns per switch (median of runs) | runs "
             "(min-max) | over none |", "|---|---|---|---|"]
    for k, label in zip(kinds, ["none", "for the pid: bound to its main "
                                "thread", "for every process (pid -1)"]):
        m = statistics.median(ns[k])
        lines.append(f"| {label} | {m:.0f} | {min(ns[k]):.0f}-"
                     f"{max(ns[k]):.0f} | {m - base:+.0f} ns |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
