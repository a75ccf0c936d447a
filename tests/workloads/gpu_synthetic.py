"""A PyTorch job whose "GPU" is simulated: real torch ops and
record_function scopes on several threads, and inside them CUDA launches
made through the real CUPTI agent (librfbpf_cupti.so) by
build/cupti/libgpu_synth.so, which plays the CUDA driver and CUPTI (there
is no GPU on the test machines).

It writes what a tracer must find to --expect FILE (JSON): for every
correlation id, the op the call ran in (null when none), the calling
thread, the CLOCK_MONOTONIC bounds of the call, and every record with its
CLOCK_MONOTONIC start and end. Calls are launches, copies, sets and
synchronize calls (which make no record).

  --wait-tracer   wait (up to 60 s) until the agent sees a tracer's lease
  --sample P      (with RFBPF_SAMPLE set, the agent activates torch itself)
  --hold S        after the work, keep running S seconds, printing the
                  agent's lease state (for the kill -9 test)
  --load-inside-op  load the agent and make a first launch inside an op
                  that began before the agent was loaded
  --v1-launches N also make N kernel launches reported as an agent that
                  predates rf_gpu_launch.enter_ns would (kind V1)
"""
import argparse
import ctypes
import json
import os
import signal
import sys
import threading
import time

import torch
from torch.autograd.profiler import record_function

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYNTH = os.path.join(ROOT, "build", "cupti", "libgpu_synth.so")

KERNEL, GRAPH, DRIVER, MEMCPY, MEMSET, SYNC, V1 = range(7)
CAPTURED_KIND = 6       # gpu_synth.c's SYNTH_CAPTURED (V1 is ours only)

ap = argparse.ArgumentParser()
ap.add_argument("--expect", required=True)
ap.add_argument("--threads", type=int, default=3)
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--graph-kernels", type=int, default=4)
ap.add_argument("--wait-tracer", action="store_true")
ap.add_argument("--hold", type=float, default=0)
ap.add_argument("--load-inside-op", action="store_true")
ap.add_argument("--v1-launches", type=int, default=0)
# Launches on a stream being captured into a CUDA graph, per thread: they
# run nothing and get no record, so they are not in "launches".
ap.add_argument("--captured", type=int, default=0)
# With the stand-in libcupti (build/cupti/sim on LD_LIBRARY_PATH): another
# tool holds CUPTI, as torch.profiler's Kineto does once it has run.
ap.add_argument("--other-cupti", metavar="NAME")
# ...or another tool starts using CUPTI while the agent holds it, as
# torch.profiler does when it starts during rfbpf's lease.
ap.add_argument("--other-cupti-during", action="store_true")
# ...or Kineto as it is starts then: it gives up if its subscribe fails.
ap.add_argument("--kineto-during", action="store_true")
# The job takes the agent's yield signal for itself first (counts it).
ap.add_argument("--take-yield-signal", action="store_true")
args = ap.parse_args()

expected = {}
expected_other = {}         # what the other tool saw of its own start
lock = threading.Lock()
synth = None
cupti = None


def load_agent():
    """What cuInit does through CUDA_INJECTION64_PATH: load the agent (a
    dependency of the synth library) and call InitializeInjection."""
    global synth
    synth = ctypes.CDLL(SYNTH)
    synth.synth_launch.restype = ctypes.c_uint
    synth.synth_launch_v1.restype = ctypes.c_uint
    synth.synth_counter.restype = ctypes.c_ulonglong
    synth.synth_counter.argtypes = [ctypes.c_char_p]
    synth.synth_init()
    if args.other_cupti or args.other_cupti_during or args.kineto_during:
        global cupti
        cupti = ctypes.CDLL("libcupti.so.13")       # the stand-in, loaded
        cupti.sim_cupti_kinds.restype = ctypes.c_ulonglong
        cupti.sim_cupti_clock_replaced.restype = ctypes.c_bool
        cupti.sim_cupti_buffers_are_other.restype = ctypes.c_bool
        cupti.sim_cupti_holder.restype = ctypes.c_char_p
    if args.other_cupti:
        assert cupti.sim_cupti_other_takes(args.other_cupti.encode()) == 0
    if args.take_yield_signal:
        sig = synth.synth_counter(b"yield_signal")
        expected_other["job_signals"] = 0

        def count(signum, frame):
            expected_other["job_signals"] += 1
        signal.signal(sig, count)


def other_tool_starts_during_the_lease():
    """Once the agent holds CUPTI and rfbpf has had a renewal to put its
    probes on libcupti (every second), "Kineto" starts; rfbpf should ask
    the agent to leave CUPTI to it, which the agent says in `yielded`."""
    deadline = time.time() + 20
    while not synth.synth_counter(b"cupti_ok"):
        if time.time() > deadline:
            sys.exit("the agent did not take CUPTI within 20 s")
        time.sleep(0.01)
    time.sleep(4)
    if args.kineto_during:
        expected_other["subscribed"] = cupti.sim_cupti_kineto_starts() == 0
    else:
        cupti.sim_cupti_other_starts(b"Kineto")
    deadline = time.time() + 10
    while not synth.synth_counter(b"yielded") and time.time() < deadline:
        time.sleep(0.01)


def wait_tracer():
    deadline = time.time() + 60
    while not synth.synth_lease_seen():
        if time.time() > deadline:
            sys.exit("no tracer lease within 60 s")
        time.sleep(0.01)


if args.load_inside_op:
    # The agent appears while an op is open (as when CUDA initializes
    # inside a training step): its launch must still be attributed to it.
    with record_function("gpu_test::init"):
        load_agent()
        print("ready", flush=True)
        wait_tracer()
        corr = synth.synth_launch(KERNEL, 1, 7)
        expected[corr] = {"op": "gpu_test::init",
                          "tid": threading.get_native_id(), "kind": KERNEL}
        synth.synth_flush()
else:
    load_agent()
    print("ready", flush=True)
    if args.wait_tracer:
        wait_tracer()
    if args.other_cupti_during or args.kineto_during:
        other_tool_starts_during_the_lease()


def launch(kind, op, n=1, stream=7):
    corr = synth.synth_launch(kind, n, stream)
    with lock:
        expected[corr] = {"op": op, "tid": threading.get_native_id(),
                          "kind": kind}


def v1_launch():
    with record_function("gpu_test::v1"):
        corr = synth.synth_launch_v1(7)
    with lock:
        expected[corr] = {"op": "gpu_test::v1",
                          "tid": threading.get_native_id(), "kind": V1}


def step(t, i):
    x = torch.ones(64)
    outer = f"gpu_test::t{t}.forward"
    with record_function(outer):
        x = x * 2 + 1                       # real aten ops around
        with record_function("gpu_test::matmul"):
            launch(KERNEL, "gpu_test::matmul")
        with record_function("gpu_test::graph_replay"):
            launch(GRAPH, "gpu_test::graph_replay", args.graph_kernels)
        launch(DRIVER, outer)               # directly in the outer scope
        if i % 4 == 0:
            with record_function("gpu_test::to_device"):
                launch(MEMCPY, "gpu_test::to_device", stream=9)
                launch(MEMSET, "gpu_test::to_device", stream=9)
                launch(SYNC, "gpu_test::to_device", stream=9)
        y = x.sum()
    if i % 10 == 0:
        launch(KERNEL, None)                # outside any op
    if i % 8 == 7:
        synth.synth_flush()                 # CUPTI hands buffers over late
    return float(y)


def worker(t):
    for i in range(args.steps):
        step(t, i)
        if i < args.v1_launches:
            v1_launch()
        if i < args.captured:
            with record_function("gpu_test::capture"):
                synth.synth_launch(CAPTURED_KIND, 1, 11)
    synth.synth_flush()


threads = [threading.Thread(target=worker, args=(t,))
           for t in range(args.threads)]
for th in threads:
    th.start()
for th in threads:
    th.join()

records = []
buf = ctypes.create_string_buffer(128)
for i in range(synth.synth_nr_records()):
    synth.synth_record(i, buf, 128)
    corr, kind, start, end = (int(v) for v in buf.value.split())
    records.append({"corr": corr, "kind": kind, "start_ns": start,
                    "end_ns": end})
for corr, call in expected.items():
    assert synth.synth_call_bounds(corr, buf, 128) > 0, corr
    call["before_ns"], call["after_ns"] = (int(v) for v in buf.value.split())
counters = {name: synth.synth_counter(name.encode()) for name in
            ("launches", "records", "records_untraced", "activity_starts",
             "activity_enabled", "torch_callback_handle",
             "launches_captured", "yielded", "yields_in_call",
             "cupti_ok")}
other = None
if cupti:
    # What the other tool finds of its CUPTI after rfbpf's lease.
    other = {"kinds": cupti.sim_cupti_kinds(),
             "clock_replaced": cupti.sim_cupti_clock_replaced(),
             "buffers_are_its_own": cupti.sim_cupti_buffers_are_other(),
             "holder": (cupti.sim_cupti_holder() or b"").decode(),
             **expected_other}
with open(args.expect, "w") as f:
    json.dump({"launches": expected, "records": records,
               "agent": counters, "other_cupti": other}, f)
print("work done", len(expected), len(records), flush=True)

if args.hold:
    deadline = time.time() + args.hold
    seen = None
    while time.time() < deadline:
        now = synth.synth_lease_seen()
        if now != seen:
            print(f"lease_seen {now} at {time.monotonic():.3f}", flush=True)
            seen = now
        x = torch.ones(4) + 1               # keep doing ops meanwhile
        time.sleep(0.02)
print("exit ok", flush=True)
