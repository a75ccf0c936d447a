"""rfbpf -p on a CUDA job started without rfbpf's CUPTI agent: rfbpf loads
the agent in the attach stop (user/gpu/inject.h), leases it while it
traces, and leaves it loaded and idle when it detaches.

The job (tests/workloads/cuda_job.py) is real PyTorch training on the
CPU that has loaded a stand-in libcudart (no GPU here); the agent it gets
is the real librfbpf_cupti.so, and the CUPTI it takes under the lease is
the stand-in libcupti (tests/gpu/sim_libcupti.c), which says who holds
it. The stand-in libcudart's cudaLaunchKernel goes through the stand-in
CUPTI's callbacks and records as CUDA's does, so kernels launched after
the attach reach the trace through the agent rfbpf loaded.
"""
import os
import shutil
import signal
import subprocess
import time

import pytest

from harness import NEEDS_CUDA_TOOLKIT, PYTHON, RFBPF, ROOT, Job, \
    load_trace, ops_of, run, start_rfbpf, stop

AGENT = os.path.join(ROOT, "build", "cupti", "librfbpf_cupti.so")
CUDART = os.path.join(ROOT, "build", "cupti", "sim", "libcudart.so.12")
SIM_CUPTI = os.path.join(ROOT, "build", "cupti", "sim")
CUDA_JOB = os.path.join(ROOT, "tests", "workloads", "cuda_job.py")
LOADED = "loaded the CUPTI agent into process"

pytestmark = NEEDS_CUDA_TOOLKIT


@pytest.fixture(autouse=True)
def built():
    assert os.path.exists(AGENT) and os.path.exists(CUDART), \
        "the CUDA toolkit is here but build/cupti was not built (make cupti)"


class CudaJob(Job):
    def __init__(self, *args, env=None):
        super().__init__([PYTHON, CUDA_JOB, *args],
                         env={**os.environ, "LD_LIBRARY_PATH": SIM_CUPTI,
                              **(env or {})})

    def ask(self, cmd):
        """Sends one command; its answer, without the command's word."""
        self.send(cmd)
        line = self.next_line(120)
        word = cmd.split()[0]
        word = {"steps": "loss", "fork": "child", "fill-fds": "fds",
                "unfill-fds": "fds", "launch": "launched",
                "profile": "profiled", "sync": "synced",
                "copy": "copied", "nvtx-push": "nvtx", "nvtx-pop": "nvtx",
                "nvtx-load": "nvtx"}.get(word, word)
        assert line.startswith(word + " "), (cmd, line)
        return line.split(" ", 1)[1].strip()

    def until(self, cmd, want, timeout=10):
        """Asks cmd again until want(answer) holds; the last answer."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.ask(cmd)
            if want(answer) or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)


def reference_losses(rounds, steps):
    """The job's losses untraced, round by round."""
    r = run([PYTHON, CUDA_JOB],
            input="".join(f"steps {steps}\n" for _ in range(rounds)),
            env={**os.environ, "LD_LIBRARY_PATH": SIM_CUPTI})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == "ready"
    return [l.split(" ", 1)[1] for l in lines[1:] if l.startswith("loss")]


def kernels_joined_to_their_scope(trace, n):
    """The trace has the n kernels launched in launch_scope after the
    attach (the stand-in CUPTI's records, delivered by the agent rfbpf
    loaded), each joined to the scope and to its launch's cuda_runtime
    slice on the scope's thread. The GPU is described as the job's
    driver (the stand-in's H100) says, and each kernel (64 blocks of 256
    threads, 32 registers each) has Kineto's occupancy estimate: 64/132
    blocks per SM of the 8 that fit, 6% of the SM's 2048 threads."""
    (gpu,) = trace["deviceProperties"]
    assert gpu["id"] == 0 and gpu["name"] == "Stand-in H100 80GB HBM3", gpu
    assert (gpu["numSms"], gpu["maxThreadsPerMultiprocessor"],
            gpu["regsPerMultiprocessor"], gpu["computeMajor"],
            gpu["totalGlobalMem"]) == (132, 2048, 65536, 9, 80 << 30), gpu
    for k in (e for e in trace["traceEvents"] if e.get("cat") == "kernel"):
        assert abs(float(k["args"]["blocks per SM"]) - 64 / 132) < 1e-5, k
        assert abs(float(k["args"]["warps per SM"]) - 8 * 64 / 132) < 1e-5, k
        assert k["args"]["est. achieved occupancy %"] == 6, k
    events = trace["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("cat") == "cuda_runtime"}
    (scope,) = [e for e in ops_of(trace) if e["name"] == "launch_scope"]
    assert len(kernels) == n, kernels
    for k in kernels:
        assert k["name"] == "sim_kernel", k
        assert k["args"].get("launched by") == "launch_scope", k
        call = calls[k["args"]["correlation"]]
        assert call["name"] == "cudaLaunchKernel", call
        assert call["tid"] == scope["tid"]
        assert scope["ts"] <= call["ts"] and \
            call["ts"] + call["dur"] <= scope["ts"] + scope["dur"]
        assert k["ts"] >= call["ts"], (k, call)


def test_three_attaches_load_the_agent_once_and_leave_it_idle(tmp_path):
    want = reference_losses(3, 20)
    with CudaJob() as job:
        assert job.ask("agents") == "0"
        assert job.ask("holder") == "no-cupti"
        losses = []
        for i in range(3):
            out = tmp_path / f"t{i}.json"
            r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid),
                                "-o", str(out)])
            assert job.ask("agents") == "1"
            assert "rfbpf-cupti" in job.ask("threads").split(",")
            # Under the lease the agent takes CUPTI (it looks every
            # 100 ms)...
            assert job.until("holder", lambda h: h not in
                             ("-", "no-cupti")) not in ("-", "no-cupti")
            losses.append(job.ask("steps 20"))
            assert job.ask("launch 5") == "5"
            rc, _, err = stop(r)
            assert rc == 0, err
            assert (LOADED in err) == (i == 0), err
            trace = load_trace(out)
            assert ops_of(trace), "no op traced"
            kernels_joined_to_their_scope(trace, 5)
            # ...and gives it back once the lease is ended: launches then
            # reach no one (the next trace has its own 5 only).
            assert job.until("holder", lambda h: h == "-") == "-"
            assert "rfbpf-cupti" in job.ask("threads").split(",")
            assert job.ask("launch 3") == "3"
        rc, out = job.finish()
        assert rc == 0
    assert losses == want
    # The thread rfbpf held keeps no error of rfbpf's dlopen calls.
    assert "dlerror -" in out, out


def test_a_job_without_cuda_gets_no_agent(tmp_path):
    with CudaJob("--no-cuda") as job:
        r, _ = start_rfbpf(["-q", "--no-table", "-v", "-p", str(job.pid),
                            "-o", str(tmp_path / "t.json")])
        job.ask("steps 5")
        assert job.ask("agents") == "0"
        rc, _, err = stop(r)
        assert rc == 0 and LOADED not in err, err
        assert "maps no libcudart or libcuda" in err, err


def not_loaded(tmp_path, job_args, rfbpf_args, why, env=None):
    """rfbpf -p on a CUDA job loads no agent, says so in one line that
    holds why, and traces the job's ops all the same."""
    with CudaJob(*job_args, env=env) as job:
        r, _ = start_rfbpf(["-q", "--no-table", *rfbpf_args, "-p",
                            str(job.pid), "-o", str(tmp_path / "t.json")])
        job.ask("steps 5")
        assert job.ask("agents") == "0"
        rc, _, err = stop(r)
        assert rc == 0, err
        lines = [l for l in err.splitlines() if "CUPTI agent was not" in l]
        assert len(lines) == 1 and why in lines[0], err
        assert ops_of(load_trace(tmp_path / "t.json"))


def test_a_job_held_only_in_a_wait_gets_the_agent_once_it_runs_ops(
        tmp_path):
    """Its one thread waits on stdin at the attach: rfbpf holds it there,
    in a system call that could as well be inside a CUDA call, loads
    nothing, and says it will try again. While the job stays idle it does
    not; once the job runs ops, rfbpf holds that thread at one and loads
    the agent there, and kernels launched after are traced."""
    with CudaJob("--idle") as job:
        out = tmp_path / "t.json"
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(out)])
        time.sleep(3)
        assert job.ask("agents") == "0"
        # Seconds of steps: rfbpf sees their ops and holds the thread at
        # one of them while they last.
        job.ask("steps 3000")
        assert job.until("agents", lambda n: n == "1", 15) == "1"
        assert job.until("holder", lambda h: h not in ("-", "no-cupti"))
        assert job.ask("launch 2") == "2"
        rc, _, err = stop(r)
        assert rc == 0, err
        lines = [l for l in err.splitlines() if "not loaded yet" in l]
        assert len(lines) == 1 and "waiting in a system call" in lines[0], \
            err
        assert LOADED in err, err
        assert "not loaded (" not in err, err
    kernels_joined_to_their_scope(load_trace(out), 2)


def test_a_job_started_with_ld_bind_now_gets_no_agent(tmp_path):
    not_loaded(tmp_path, [], [], "LD_BIND_NOW", env={"LD_BIND_NOW": "1"})


def test_the_held_thread_s_stack_is_read_before_the_dlopen(tmp_path):
    """Before the agent's dlopen, rfbpf unwinds the thread it holds (-v
    lists the frames): from the op's entry in libtorch_cpu down to the
    start of the thread, none in the dynamic loader or in malloc."""
    with CudaJob() as job:
        r, _ = start_rfbpf(["-q", "--no-table", "-v", "-p", str(job.pid),
                            "-o", str(tmp_path / "t.json")])
        job.ask("steps 5")
        assert job.ask("agents") == "1"
        rc, _, err = stop(r)
        assert rc == 0 and LOADED in err, err
    frames = [l for l in err.splitlines() if ": held thread " in l and
              " #" in l]
    (verdict,) = [l for l in err.splitlines() if "none in the dynamic "
                  "loader or malloc" in l]
    assert f" {len(frames)} frames," in verdict, (verdict, len(frames))
    assert "stopped early" not in verdict, verdict
    assert "libtorch_cpu.so" in frames[0], frames[0]
    assert any("_PyEval_EvalFrameDefault" in l for l in frames), frames
    # The outermost frame: the main thread's _start, or a thread's
    # clone in libc (its name is not exported).
    assert "(_start)" in frames[-1] or "libc.so" in frames[-1], frames[-1]
    assert not any("ld-linux" in l for l in frames), frames


def test_an_op_inside_a_library_constructor_gets_no_agent(tmp_path):
    """The job's only ops run inside a library's constructor, that is
    inside the dynamic loader: rfbpf's held thread is there, its stack
    says so, and no agent is loaded from it. One line says why; the ops
    are traced and the job finishes as it would."""
    job = Job([PYTHON, os.path.join(ROOT, "tests", "workloads",
                                    "ops_in_constructor.py")],
              env={**os.environ, "CTOR_SECONDS": "6"})
    with job:
        job.send("go")
        assert job.next_line().strip() == "in constructor"
        out = tmp_path / "t.json"
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(out)])
        time.sleep(1)
        with open(f"/proc/{job.pid}/maps") as f:
            assert "rfbpf_cupti" not in f.read()
        rc, _, err = stop(r)
        assert rc == 0, err
        lines = [l for l in err.splitlines() if "CUPTI agent was not" in l]
        assert len(lines) == 1, err
        assert "inside the dynamic loader" in lines[0], lines
        assert "ld-linux" in lines[0], lines
        assert job.next_line(60).strip() == "done"
        rc, _ = job.finish()
        assert rc == 0
    assert any(e["name"] == "ctor_scope" for e in ops_of(load_trace(out)))


def test_no_gpu_inject_loads_nothing(tmp_path):
    with CudaJob() as job:
        r, _ = start_rfbpf(["-q", "--no-table", "--no-gpu-inject", "-p",
                            str(job.pid), "-o", str(tmp_path / "t.json")])
        job.ask("steps 5")
        assert job.ask("agents") == "0"
        rc, _, err = stop(r)
        assert rc == 0 and LOADED not in err, err


def test_an_agent_file_that_is_not_one_is_said_and_tracing_goes_on(
        tmp_path):
    fake = tmp_path / "librfbpf_cupti.so"
    fake.write_bytes(b"not an ELF file")
    not_loaded(tmp_path, [], ["--gpu-agent", str(fake)], "dlopen")


def test_a_failure_in_the_job_leaves_its_thread_as_it_was(tmp_path):
    """The job has no descriptor left when rfbpf (its page made by an
    attach before) makes the agent's memfd: the load fails after the
    dlopen that looked for an agent already there, said in one line, and
    the thread rfbpf held keeps no dlerror() of rfbpf's."""
    with CudaJob() as job:
        r, _ = start_rfbpf(["-q", "--no-table", "--no-gpu-inject", "-p",
                            str(job.pid), "-o", os.devnull])
        assert stop(r)[0] == 0
        assert job.ask("fill-fds").isdigit()
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(tmp_path / "t.json")])
        rc, _, err = stop(r)
        assert rc == 0, err
        lines = [l for l in err.splitlines() if "CUPTI agent was not" in l]
        assert len(lines) == 1 and "Too many open files" in lines[0], err
        assert job.ask("unfill-fds") == "restored"
        assert job.ask("agents") == "0"
        job.ask("steps 2")
        rc, out = job.finish()
        assert rc == 0
    assert "dlerror -" in out, out


def test_kill_9_right_after_the_dlopen_then_a_second_attach(tmp_path):
    want = reference_losses(2, 20)
    with CudaJob() as job:
        r = start_killable(job, {"RFBPF_TEST_INJECT_DELAY_MS": "20000"})
        r.send_signal(signal.SIGKILL)
        r.wait(30)
        # The held thread came back by itself through rfbpf's page; the
        # agent is loaded, never started.
        first = job.ask("steps 20")
        assert job.ask("agents") == "1"
        assert "rfbpf-cupti" not in job.ask("threads").split(",")
        assert not [fd for fd in os.listdir(f"/proc/{job.pid}/fd")
                    if "librfbpf_cupti" in
                    os.readlink(f"/proc/{job.pid}/fd/{fd}")]
        # The next rfbpf (replacing the callback the killed one left)
        # starts the agent it finds.
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(tmp_path / "t.json")])
        assert job.ask("agents") == "1"
        assert "rfbpf-cupti" in job.ask("threads").split(",")
        assert job.until("holder", lambda h: h not in ("-", "no-cupti")) \
            not in ("-", "no-cupti")
        second = job.ask("steps 20")
        rc, _, err = stop(r)
        assert rc == 0, err
        assert job.until("holder", lambda h: h == "-") == "-"
        rc, _ = job.finish()
        assert rc == 0
    assert [first, second] == want


def start_killable(job, env):
    """rfbpf -p job with env, returned once the agent is mapped in the
    job (rfbpf is then inside its attach stop, in the test's delay)."""
    r = subprocess.Popen([RFBPF, "-q", "--no-table", "-p", str(job.pid),
                          "-o", os.devnull],
                         stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL,
                         env={**os.environ, **env})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{job.pid}/maps") as f:
            if "librfbpf_cupti" in f.read():
                return r
        time.sleep(0.05)
    r.kill()
    raise AssertionError("the agent was never mapped")


def test_the_job_forks_with_the_agent_loaded(tmp_path):
    with CudaJob() as job:
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(tmp_path / "t.json")])
        job.until("holder", lambda h: h not in ("-", "no-cupti"))
        assert job.ask("fork") == "0"
        rc, _, err = stop(r)
        assert rc == 0, err
        assert job.ask("fork") == "0"
        assert job.ask("agents") == "1"
        rc, _ = job.finish()
        assert rc == 0


def test_the_fleet_daemon_loads_the_agent_and_profiles_the_kernels(tmp_path):
    """rfbpf --continuous on a CUDA job started without the agent loads it
    as rfbpf -p does: CUPTI is taken (rfbpf_job_cupti_info says
    subscribed), the kernels launched in launch_scope reach pprof's gpu
    sample type under that scope (go tool pprof reads it), the syncs in
    sync_scope its rfbpf_op_gpu_wait_seconds_total, and at the end the
    agent gives CUPTI back and the job's losses are untouched."""
    from test_fleet import Daemon, metric, pprof_files, promtool_check
    want = reference_losses(1, 20)
    prom = tmp_path / "rfbpf.prom"
    with CudaJob() as job:
        d = Daemon(["-p", str(job.pid), "--interval", "2", "--budget",
                    "50", "--pprof-dir", str(tmp_path), "--prom-file",
                    str(prom)])
        try:
            d.wait_for(LOADED)
            deadline = time.monotonic() + 90
            top = ""
            waited = None
            while time.monotonic() < deadline:
                job.ask("launch 200")
                job.ask("sync 5")
                files = sorted(str(f) for f in tmp_path.glob(
                    "profile-*.pb.gz"))
                text = prom.read_text() if prom.exists() else ""
                waited = metric(text, "rfbpf_op_gpu_wait_seconds_total",
                                pid=job.pid, op="sync_scope")
                if len(files) >= 2 and waited:
                    status, top = pprof_files(files, "-sample_index",
                                              "gpu", "-top")
                    if status == 0 and "launch_scope" in top:
                        break
            assert "launch_scope" in top, top + d.log()
            # The syncs' waits, estimated from the bursts that caught
            # them (weighed, so not the 10 ms a round exactly).
            assert waited and waited > 0, text
            text = prom.read_text()
            promtool_check(text)
            assert metric(text, "rfbpf_job_cupti_info", pid=job.pid,
                          state="subscribed") == 1, text
        finally:
            assert d.finish() == 0, d.log()
        assert job.until("holder", lambda h: h == "-") == "-"
        assert job.ask("steps 20") == want[0]
        rc, _ = job.finish()
        assert rc == 0


def test_a_job_in_another_mount_namespace_gets_the_agent_by_memfd(tmp_path):
    """A container's view: in the job's mount namespace rfbpf's build of
    the agent is hidden (a tmpfs over build/cupti), and its CUDA
    libraries are copies elsewhere. rfbpf loads the agent all the same
    (the job dlopens a memfd rfbpf filled), and its kernels are traced."""
    sim = tmp_path / "sim"
    sim.mkdir()
    for f in (CUDART, os.path.join(os.path.dirname(CUDART), "libcuda.so.1"),
              os.path.join(SIM_CUPTI, "libcupti.so.13")):
        shutil.copy(f, sim)
    hidden = os.path.dirname(AGENT)
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs none {hidden} && exec "$@"', "sh", PYTHON,
            CUDA_JOB, "--cudart", str(sim / "libcudart.so.12")]
    with Job(argv, env={**os.environ, "LD_LIBRARY_PATH": str(sim)}) as job:
        assert not os.path.exists(f"/proc/{job.pid}/root{AGENT}")
        out = tmp_path / "t.json"
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(out)])
        job.send("agents")
        assert job.next_line().strip() == "agents 1"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            job.send("holder")
            if job.next_line().strip() not in ("holder -",
                                               "holder no-cupti"):
                break
            time.sleep(0.1)
        job.send("launch 4")
        assert job.next_line().strip() == "launched 4"
        rc, _, err = stop(r)
        assert rc == 0, err
        assert LOADED in err, err
        kernels_joined_to_their_scope(load_trace(out), 4)


def test_torch_profiler_in_the_job_before_during_and_after(tmp_path):
    """The job's own torch.profiler, before rfbpf attaches (and loads the
    agent), while it traces and after it detaches: each run records the
    same ops, rfbpf's trace has the ops and kernels of its own, and the
    job's losses are those of an untraced run."""
    r = run([PYTHON, CUDA_JOB], input="profile 5\nprofile 5\nlaunch 2\n"
            "profile 5\nsteps 20\n",
            env={**os.environ, "LD_LIBRARY_PATH": SIM_CUPTI})
    assert r.returncode == 0, r.stderr
    (want,) = [l.split(" ", 1)[1] for l in r.stdout.split("\n")
               if l.startswith("loss")]
    with CudaJob() as job:
        before = job.ask("profile 5")
        assert int(before) == 10        # two Linear layers a step
        out = tmp_path / "t.json"
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(out)])
        job.until("holder", lambda h: h not in ("-", "no-cupti"))
        assert job.ask("profile 5") == before
        assert job.ask("launch 2") == "2"
        rc, _, err = stop(r)
        assert rc == 0, err
        assert LOADED in err, err
        trace = load_trace(out)
        assert [e for e in ops_of(trace) if e["name"] == "aten::addmm"]
        kernels_joined_to_their_scope(trace, 2)
        assert job.ask("profile 5") == before
        assert job.until("holder", lambda h: h == "-") == "-"
        assert job.ask("steps 20") == want
        rc, _ = job.finish()
        assert rc == 0


def test_copies_and_sets_after_the_attach_are_joined_to_their_op(tmp_path):
    """Copies and sets made after the attach (the stand-in's records carry
    the nested driver call's id, as CUDA 13's CUPTI's do) are in the
    trace as Kineto draws them, each joined to copy_scope and to its
    runtime call, and their GPU time is the scope's."""
    with CudaJob() as job:
        out = tmp_path / "t.json"
        r, _ = start_rfbpf(["-q", "-p", str(job.pid), "-o", str(out)])
        job.until("holder", lambda h: h not in ("-", "no-cupti"))
        assert job.ask("copy 3") == "3"
        rc, table, err = stop(r)
        assert rc == 0, err
    trace = load_trace(out)
    events = trace["traceEvents"]
    (scope,) = [e for e in ops_of(trace) if e["name"] == "copy_scope"]
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("cat") == "cuda_runtime"}
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    sets = [e for e in events if e.get("cat") == "gpu_memset"]
    assert len(copies) == 3 and len(sets) == 3, (copies, sets)
    for e, api in [(c, "cudaMemcpyAsync") for c in copies] + \
            [(s, "cudaMemsetAsync") for s in sets]:
        call = calls[e["args"]["correlation"]]
        assert call["name"] == api and call["tid"] == scope["tid"], call
        assert e["args"]["External id"] == call["args"]["External id"]
        assert e["args"]["launched by"] == "copy_scope", e
        # A set's record has only the driver call's id (joined through
        # the driver call the agent saw nested in the runtime's); a copy's
        # names the runtime call too.
        if api == "cudaMemsetAsync":
            assert e["args"]["record correlation"] != \
                call["args"]["correlation"], e
        else:
            assert "record correlation" not in e["args"], e
    assert {c["name"] for c in copies} == \
        {"Memcpy HtoD (Pageable -> Device)"}, copies
    assert {c["args"]["bytes"] for c in copies} == {4096}
    assert {s["name"] for s in sets} == {"Memset (Device)"}, sets
    assert {s["args"]["bytes"] for s in sets} == {1024}
    gpu = trace["otherData"]["gpu"]
    assert gpu["records_without_launch"] == 0, gpu
    assert gpu["launches_evicted_without_record"] == 0, gpu
    (stats,) = [s for s in trace["otherData"]["op_stats"]
                if s["name"] == "copy_scope"]
    want = sum(e["dur"] for e in copies + sets) * 1000
    assert abs(stats["self_cuda_ns"] - want) <= 6, (stats, want)
    assert stats["kernels"] == 0, stats


def test_nvtx_ranges_nest_with_the_ops(tmp_path):
    """NVTX ranges the job pushes through its shared NVTX library, which
    it loads after the attach: each "nvtx_outer" range is an "nvtx" slice
    on its thread around the user scope and op inside it, and the range
    pushed inside that scope nests in it, in the trace and in the folded
    stacks. A pop of a range pushed before the attach is counted, not
    paired with anything."""
    with CudaJob() as job:
        assert job.ask("nvtx-load") == "loaded"
        assert job.ask("nvtx-push early") == "0"
        out, folded = tmp_path / "t.json", tmp_path / "f.txt"
        r, _ = start_rfbpf(["-q", "--no-table", "-p", str(job.pid), "-o",
                            str(out), "--folded", str(folded)])
        time.sleep(2)       # rfbpf looks for the library once a second
        assert job.ask("nvtx 3") == "3"
        assert job.ask("nvtx-pop") == "0"
        rc, _, err = stop(r)
        assert rc == 0, err
    trace = load_trace(out)
    slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    outer = [e for e in slices if e["name"] == "nvtx_outer"]
    leaves = [e for e in slices if e["name"] == "nvtx_leaf"]
    scopes = [e for e in slices if e["name"] == "nvtx_inner_scope"]
    assert len(outer) == len(leaves) == len(scopes) == 3, slices
    for o in outer:
        assert o["cat"] == "nvtx" and o["args"]["scope"] == "nvtx", o
        (s,) = [e for e in scopes if e["tid"] == o["tid"] and
                o["ts"] <= e["ts"] and
                e["ts"] + e["dur"] <= o["ts"] + o["dur"]]
        (l,) = [e for e in leaves if e["tid"] == o["tid"] and
                s["ts"] <= e["ts"] and
                e["ts"] + e["dur"] <= s["ts"] + s["dur"]]
        assert l["cat"] == "nvtx", l
    assert trace["otherData"]["nvtx_pops_unmatched"] == 1, \
        trace["otherData"]
    stacks = folded.read_text()
    assert ";nvtx_outer;nvtx_inner_scope;nvtx_leaf " in stacks, stacks
    assert "early" not in stacks, stacks


def test_syncs_after_the_attach_are_the_op_s_gpu_wait(tmp_path):
    """Three cudaStreamSynchronize calls (2 ms each in the stand-in) in
    sync_scope, after the attach that loads the agent: each is a
    cuda_runtime slice inside the scope on its thread, and their time is
    the scope's GPU wait, in the trace's op_stats and in the table. The
    waits CUPTI timed (its synchronization records) are "Stream Sync"
    slices on the stream, each inside its call, with the call's
    correlation and External id and a flow from the call."""
    with CudaJob() as job:
        out = tmp_path / "t.json"
        r, _ = start_rfbpf(["-q", "-p", str(job.pid), "-o", str(out),
                            "--sort", "gpu_wait"])
        job.until("holder", lambda h: h not in ("-", "no-cupti"))
        assert job.ask("sync 3") == "3"
        rc, table, err = stop(r)
        assert rc == 0, err
    trace = load_trace(out)
    (scope,) = [e for e in ops_of(trace) if e["name"] == "sync_scope"]
    syncs = [e for e in trace["traceEvents"]
             if e.get("cat") == "cuda_runtime" and
             e["name"] == "cudaStreamSynchronize"]
    assert len(syncs) == 3, syncs
    for e in syncs:
        assert e["tid"] == scope["tid"] and e["dur"] >= 2000
        assert scope["ts"] <= e["ts"] and \
            e["ts"] + e["dur"] <= scope["ts"] + scope["dur"]
    (stats,) = [s for s in trace["otherData"]["op_stats"]
                if s["name"] == "sync_scope"]
    waited = sum(e["dur"] for e in syncs) * 1000
    assert abs(stats["gpu_wait_ns"] - waited) <= 3, (stats, waited)
    header = next(l for l in table.splitlines() if "GPU wait" in l)
    assert header.rstrip().endswith("GPU wait"), header
    lines = table.splitlines()
    row = lines[lines.index(header) + 2]    # the first, by --sort gpu_wait
    assert row.startswith("sync_scope"), table
    cell = row.split()[-1]
    assert cell.endswith("ms") and float(cell[:-2]) >= 6.0, row
    waits = [e for e in trace["traceEvents"] if e.get("cat") == "cuda_sync"]
    assert len(waits) == 3, waits
    flows = {e["id"]: e for e in trace["traceEvents"]
             if e.get("cat") == "ac2g" and e["ph"] == "s"}
    for wait in waits:
        call = next(e for e in syncs if e["args"]["correlation"] ==
                    wait["args"]["correlation"])
        assert wait["name"] == "Stream Sync", wait
        assert (wait["pid"], wait["tid"]) == (0, 7), wait
        assert wait["args"]["External id"] == call["args"]["External id"]
        assert wait["dur"] >= 2000, wait
        assert call["ts"] <= wait["ts"] and \
            wait["ts"] + wait["dur"] <= call["ts"] + call["dur"], (call, wait)
        (arrow,) = [e for e in trace["traceEvents"] if e.get("cat") ==
                    "ac2g" and e["ph"] == "f" and e["ts"] == wait["ts"] and
                    e["pid"] == 0]
        assert flows[arrow["id"]]["tid"] == call["tid"], arrow
    gpu = trace["otherData"]["gpu"]
    assert gpu["sync_records"] == 3 and gpu["syncs_without_record"] == 0, gpu
    assert gpu["records_without_launch"] == 0, gpu
