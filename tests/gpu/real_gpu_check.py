#!/usr/bin/env python3
"""Every GPU check end to end against real CUDA, on a machine with a GPU
(tests/gpu/REAL_GPU.md says how to run it and what each row means).

It runs tests/gpu/real_gpu_job.py twice under the real CUPTI agent
(CUDA_INJECTION64_PATH), traces it with `rfbpf -p`, and prints a table of
PASS / FAIL / SKIP with what was seen:
  run 1: kernels, pageable and pinned copies, a set, a CUDA graph (its
         captured launches counted apart, its kernels' node ids), the
         waits of .item() (CUPTI's sync records), the GPU's description
         and the kernels' occupancy, two
         streams, a peer copy and two devices (when there are two), and a
         torch.profiler session started during rfbpf's lease;
  run 2: torch.profiler run before rfbpf came (Kineto keeps CUPTI);
  run 3: the job started without the agent: `rfbpf -p` loads it at
         attach (user/gpu/inject.h), and the kernels launched after
         are joined to their ops.
Exit status 0 only if no row failed. --keep DIR: each run's trace and
rfbpf's stderr kept in DIR (and Kineto's trace of run 1), to look into a
row that failed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RFBPF = os.path.join(ROOT, "rfbpf")
AGENT = os.path.join(ROOT, "build", "cupti", "librfbpf_cupti.so")
JOB = os.path.join(ROOT, "tests", "gpu", "real_gpu_job.py")
PYTHON = os.environ.get("PYTHON", sys.executable)
KEEP = sys.argv[2] if sys.argv[1:2] == ["--keep"] else None
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")

rows = []


def row(name, ok, seen):
    rows.append((name, "SKIP" if ok is None else "PASS" if ok else "FAIL",
                 seen))


def traced_run(tmp, job_args, injected=True):
    """Runs the job under rfbpf; returns (trace, job lines, rfbpf err).
    injected=False: the job starts without the agent (rfbpf loads it)."""
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT) if injected \
        else {k: v for k, v in os.environ.items()
              if k != "CUDA_INJECTION64_PATH"}
    job = subprocess.Popen([PYTHON, JOB, *job_args], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    ready = job.stdout.readline().split()
    if not ready or ready[0] != "ready":
        job.kill()
        sys.exit(f"the job did not start: {ready}")
    out = os.path.join(tmp, "trace.json")
    r = subprocess.Popen([RFBPF, "-p", str(job.pid), "-o", out, "--top",
                          "0", "--memory"], stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True)
    err = []
    for line in r.stderr:               # the agent answered the lease
        err.append(line)
        # "rfbpf: GPU: CUPTI 13 (API 130001): subscribed; ..."
        if re.search(r"GPU: CUPTI[^:]*: ", line):
            break
    job.stdin.write("go\n")
    job.stdin.flush()
    lines = []
    for line in job.stdout:
        lines.append(line.strip())
        if line.startswith("done"):
            break
    r.send_signal(2)
    err += r.stderr.readlines()
    r.wait(timeout=60)
    job.stdin.write("end\n")
    job.stdin.flush()
    job.wait(timeout=60)
    if KEEP:
        tag = "_".join(a.lstrip("-") for a in job_args
                       if a.startswith("--")) or "plain"
        shutil.copy(out, os.path.join(KEEP, f"trace_{tag}.json"))
        with open(os.path.join(KEEP, f"rfbpf_{tag}.err"), "w") as f:
            f.write("".join(err))
    with open(out) as f:
        return json.load(f), lines, "".join(err), int(ready[1])


def by_case(trace):
    """GPU events per case: launched by an op inside that case's scope."""
    ev = trace["traceEvents"]
    ops = {e["args"]["External id"]: e for e in ev
           if e.get("ph") == "X" and e.get("cat") not in GPU_CATS and
           "External id" in e.get("args", {})}
    cases = [e for e in ev if e.get("ph") == "X" and
             e.get("name", "").startswith("case::")]
    out = {c["name"][6:]: [] for c in cases}
    for g in ev:
        if g.get("cat") not in GPU_CATS:
            continue
        op = ops.get(g.get("args", {}).get("External id"))
        for c in cases:
            if op and op["tid"] == c["tid"] and \
               c["ts"] <= op["ts"] <= c["ts"] + c["dur"]:
                out[c["name"][6:]].append(g)
    return out


def count(events, cat):
    return sum(e["cat"] == cat for e in events)


def main():
    if not os.path.exists(AGENT) or not os.path.exists(RFBPF):
        sys.exit("build first: make && make cupti")
    n = subprocess.run([PYTHON, "-c", "import torch; "
                        "print(torch.cuda.device_count())"],
                       capture_output=True, text=True).stdout.strip()
    if n in ("", "0"):
        print("no CUDA device visible to torch here: nothing to check "
              "(this is for a machine with a GPU)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        trace, lines, err, ndev = traced_run(
            tmp, ["--profiler-during", tmp])
        gpu = trace["otherData"].get("gpu", {})
        # Said when the lease came: the end state is "taken by another
        # tool", since torch.profiler runs at the end of this run.
        row("agent found, CUPTI subscribed",
            re.search(r"GPU: CUPTI[^:]*: subscribed", err) is not None,
            f"clock_source={gpu.get('clock_source')}, "
            f"cupti_version={gpu.get('cupti_version')}")
        cases = by_case(trace)
        ran = {l.split()[1] for l in lines if l.startswith("ran")}
        errors = [l for l in lines if l.startswith("error")]
        for name, cat, want in (("kernels", "kernel", 1),
                                ("copy_pageable", "gpu_memcpy", 1),
                                ("copy_pinned", "gpu_memcpy", 1),
                                ("memset", "gpu_memset", 1),
                                ("graph", "kernel", 3),
                                ("peer_copy", "gpu_memcpy", 1)):
            if name == "peer_copy" and ndev < 2:
                row(name, None, "one device")
                continue
            n = count(cases.get(name, []), cat)
            row(name, name in ran and n >= want,
                f"{n} {cat} (want >= {want})" +
                ("" if name in ran else " [case failed]"))
        # .item() in case::kernels waits for the GPU: CUPTI's sync record
        # joined to the op that called it (aten::_local_scalar_dense).
        syncs = [e for e in cases.get("kernels", [])
                 if e["cat"] == "cuda_sync"]
        row("syncs: .item()'s wait joined to its op", len(syncs) >= 1,
            f"{len(syncs)} cuda_sync ({', '.join(sorted({e['name'] for e in syncs}))})")
        nvtx = [e for e in trace["traceEvents"] if e.get("cat") == "nvtx"
                and e.get("name") == "nvtx_range"]
        # Seen only where torch's NVTX is the shared libnvToolsExt.so.1;
        # NVTX 3 compiled into torch is out of reach (docs/limits.md).
        row("NVTX range of case::kernels", True if nvtx else None,
            f"{len(nvtx)} nvtx slices" + ("" if nvtx else
            ": torch's NVTX is not the shared library here"))
        props = trace.get("deviceProperties", [])
        occ = [e["args"].get("est. achieved occupancy %")
               for e in cases.get("kernels", []) if e["cat"] == "kernel"]
        row("GPU described, kernels' occupancy estimated",
            bool(props) and props[0].get("numSms", 0) > 0 and
            bool(occ) and None not in occ,
            f"{props[0].get('name') if props else 'no deviceProperties'}"
            f", {props[0].get('numSms') if props else 0} SMs; "
            f"occupancy % {occ}")
        nodes = {(e["args"].get("graph id"), e["args"].get("graph node id"))
                 for e in cases.get("graph", []) if e["cat"] == "kernel"}
        row("graph kernels carry graph and node ids",
            bool(nodes) and all(g and n for g, n in nodes),
            f"(graph id, node id): {sorted(nodes, key=str)}")
        streams = {(e["pid"], e["tid"]) for e in
                   cases.get("two_streams", []) if e["cat"] == "kernel"}
        # The graph case captures its two kernels before replaying them:
        # those launches ran nothing and are counted apart, not lost.
        row("captured launches counted apart",
            gpu.get("agent_launches_captured", 0) >= 2,
            f"agent_launches_captured="
            f"{gpu.get('agent_launches_captured')} (want >= 2)")
        row("two_streams", len(streams) >= 2, f"{len(streams)} stream "
            "tracks with kernels")
        if ndev >= 2:
            devs = {e["pid"] for e in cases.get("two_devices", [])}
            row("two_devices", len(devs) >= 2, f"devices {sorted(devs)}")
        else:
            row("two_devices", None, "one device")
        # Before the profiler's case: its launches after the agent left
        # CUPTI may be launches without a record, and are said so.
        lost = {k: v for k, v in gpu.items() if isinstance(v, int) and v
                and ("without" in k or "lost" in k or "failed" in k or
                     "cut" in k or "refused" in k or "dropped" in k)}
        row("nothing lost", not lost, json.dumps(lost) or "{}")
        kineto = os.path.join(tmp, "kineto.json")
        if KEEP and os.path.exists(kineto):
            shutil.copy(kineto, KEEP)
        kev = []
        if os.path.exists(kineto):
            with open(kineto) as f:
                kev = json.load(f).get("traceEvents", [])
        row("torch.profiler during a lease keeps its kernels",
            any(e.get("cat") == "kernel" for e in kev),
            f"{sum(e.get('cat') == 'kernel' for e in kev)} kernels in "
            "its trace")
        row("torch.profiler during a lease: seen, CUPTI left to it",
            gpu.get("cupti") == "taken by another tool",
            f"cupti={gpu.get('cupti')}, "
            f"taken_by={gpu.get('cupti_taken_by')}")
        row("job ran every case", not errors, "; ".join(errors) or "yes")
        stats = {r["name"]: r for r in trace["otherData"].get("op_stats",
                                                              [])}
        mem = stats.get("case::cuda_memory", {})
        dev = [e for e in trace["traceEvents"] if e.get("name") ==
               "[memory]" and e["args"].get("Device Type") == 1]
        row("CUDA caching allocator under --memory: 64 MiB kept in its case",
            mem.get("device_memory_usage") == 64 << 20 and len(dev) >= 200,
            f"CUDA Mem {mem.get('device_memory_usage')}, self "
            f"{mem.get('self_device_memory_usage')}; {len(dev)} device "
            f"[memory] events")

        trace, lines, err, _ = traced_run(tmp, ["--profiler-first"])
        gpu = trace["otherData"].get("gpu", {})
        row("torch.profiler before rfbpf: CUPTI named as held",
            gpu.get("cupti") == "held by another tool",
            f"cupti={gpu.get('cupti')}, holder={gpu.get('cupti_holder')}")

        trace, lines, err, _ = traced_run(tmp, ["--busy"], injected=False)
        gpu = trace["otherData"].get("gpu", {})
        row("attach loads the agent",
            "loaded the CUPTI agent into process" in err and
            re.search(r"GPU: CUPTI[^:]*: subscribed", err) is not None,
            next((l.strip() for l in err.splitlines()
                  if "agent" in l or "GPU" in l), "no GPU line"))
        kernels = by_case(trace).get("kernels", [])
        joined = [e for e in kernels if e["args"].get("launched by")]
        row("attach: kernels after it joined to their ops",
            len(joined) >= 1 and len(joined) == len(kernels),
            f"{len(joined)} of {len(kernels)} kernels of case::kernels "
            "with an op")
    width = max(len(r[0]) for r in rows)
    for name, verdict, seen in rows:
        print(f"{name:<{width}}  {verdict:<4}  {seen}")
    return 1 if any(r[1] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
