"""Never harm the job: forked children, busy threads, signals, rfbpf
killed at any moment, another tracer on the same job, a container's PID
namespace. Everything real: Debian's torch, the kernel's uprobes and
ptrace, and the job's own view of what happened."""
import os
import random
import re
import shutil
import signal
import subprocess
import time

import pytest

from harness import (Job, PYTHON, RFBPF, ROOT, KernelCounts, refused, run,
                    start_rfbpf, stop, text_changed)

DATALOADER = os.path.join(ROOT, "tests", "workloads", "dataloader_train.py")

# Forks children that run ops, while (maybe) traced: prints each child's
# wait status.
FORKER = """
import os, sys, torch
x = torch.ones(4)
print("ready", flush=True)
sys.stdin.readline()
for _ in range(1000):       # the parent's probes are hit (and optimized)
    x = x + 1
codes = []
for i in range(3):
    pid = os.fork()
    if pid == 0:
        y = torch.ones(8)
        for _ in range(2000):
            y = (y + 1) * 0.5
        os._exit(0 if float(y.sum()) == 8.0 else 1)
    codes.append(os.waitpid(pid, 0)[1])
print("children", codes, float(x.sum()), flush=True)
"""

# A loop of ops and no system call (time is the vDSO), until SIGUSR1 (a
# Python handler: no system call in the loop either). Prints how many
# iterations ran and a value that depends on every one of them;
# `--iterations N` recomputes the same untraced.
BUSY = """
import signal, sys, torch
stop = []
signal.signal(signal.SIGUSR1, lambda *a: stop.append(1))
x = torch.zeros(4, dtype=torch.float64)
n = 0
limit = int(sys.argv[1]) if len(sys.argv) > 1 else None
print("ready", flush=True)
while not stop and n != limit:
    x = x * 0.999 + n % 7
    n += 1
print(n, repr(float(x.sum())), flush=True)
"""


def start(code, *args, **kw):
    """A Job running python -c code (which prints "ready")."""
    return Job([PYTHON, "-c", code, *args], **kw)


def no_callback_left(pid, tmp_path):
    """A passive rfbpf (--no-activate) sees no op for half a second while
    the job runs: nothing of ours is registered any more."""
    out = tmp_path / "passive.json"
    p, _ = start_rfbpf(["-q", "--no-activate", "-p", str(pid), "-o",
                        str(out), "-d", "0.5"])
    rc, _, err = stop(p)
    assert rc == 0, err
    return '"ph":"X"' not in out.read_text().replace(" ", "")


@pytest.mark.parametrize("probes", ["callback", "entry"])
def test_forked_children_survive(probes):
    """Children forked while traced inherit rfbpf's page, whose probed
    NOPs the kernel rewrote into calls to a trampoline the child lacks;
    the stubs skip them in a child, so every child exits 0."""
    with start(FORKER) as p:
        r, _ = start_rfbpf(["-q", "--probes", probes, "-p", str(p.pid)])
        p.go()
        line = p.next_line()
        rc, table, err = stop(r)
        assert rc == 0, err
        assert line == "children [0, 0, 0] 4004.0\n", line
        assert "aten::add" in table


def test_dataloader_with_fork_workers_gives_the_same_losses():
    """DataLoader forks its workers every epoch; they run ops (transforms,
    collate). Traced from the start, the job's losses are those of an
    untraced run and it exits 0."""
    args = [DATALOADER, "--epochs", "3", "--workers", "2"]
    untraced = run([PYTHON, *args])
    assert untraced.returncode == 0, untraced.stderr
    traced = run([RFBPF, "-q", "--", PYTHON, *args])
    assert traced.returncode == 0, traced.stderr
    losses = [l for l in traced.stdout.splitlines() if l.startswith("epoch")]
    assert losses == untraced.stdout.splitlines()
    assert "enumerate(DataLoader)" in traced.stdout


def test_dataloader_attached_mid_run_gives_the_same_losses(tmp_path):
    args = [DATALOADER, "--epochs", "2", "--workers", "2"]
    untraced = run([PYTHON, *args])
    with Job([PYTHON, *args, "--wait"]) as p:
        r, _ = start_rfbpf(["-q", "-p", str(p.pid)])
        out, _ = p.communicate("go\n", timeout=300)
        rc, table, err = stop(r)
        assert p.returncode == 0
        assert out == untraced.stdout
        assert rc == 0 and "aten::mse_loss" in table, err


def busy_loop_left_as_untraced(p, tmp_path):
    """No callback is left in the BUSY job, and once stopped it has
    computed what it computes untraced."""
    assert no_callback_left(p.pid, tmp_path)
    p.send_signal(signal.SIGUSR1)
    out, _ = p.communicate(timeout=60)
    n, value = out.split()
    ref = run([PYTHON, "-c", BUSY, n], input="")
    assert ref.stdout.split()[1:] == [n, value]


def test_busy_loop_attached_and_detached_20_times(tmp_path):
    """No system call, ops only: the op-entry safe point attaches and
    detaches in milliseconds, every time; the job computes what it
    computes untraced, and no callback is left."""
    with start(BUSY) as p:
        for i in range(20):
            t0 = time.monotonic()
            # Every row: which op ranks first by time depends on the
            # machine's load, not on rfbpf.
            r = run([RFBPF, "-q", "-p", str(p.pid), "-d", "0.2", "--top",
                     "0"])
            assert r.returncode == 0, r.stderr
            assert "aten::add" in r.stdout, r.stdout
            assert time.monotonic() - t0 < 10
        busy_loop_left_as_untraced(p, tmp_path)


def test_detach_stops_a_thread_inside_rfbpfs_own_callback(tmp_path):
    """Once rfbpf's callback is in, a detach stops a thread inside that
    callback (where the kernel's optimized uprobe leaves it: in its
    trampoline) rather than attaching a uprobe every op of the job traps
    on; at 1% sampling as well, where only sampled ops get there. The job
    computes what it computes untraced, and no callback is left."""
    with start(BUSY) as p:
        for sample in ("1", "0.01", "1", "0.01"):
            r = run([RFBPF, "-q", "-v", "--sample", sample, "-p",
                     str(p.pid), "-d", "0.3", "--top", "0"])
            assert r.returncode == 0, r.stderr
            holds = re.findall(r"holding thread \d+ (.*) \(after",
                               r.stderr)
            # (A first attach maps rfbpf's page in a hold of its own.)
            assert set(holds[:-1]) == {"at the op-entry point"}, r.stderr
            assert holds[-1] == "in rfbpf's start callback", r.stderr
            assert "aten::mul" in r.stdout, r.stdout
        busy_loop_left_as_untraced(p, tmp_path)


def test_every_thread_in_a_long_system_call():
    """Threads that sleep, wait on a queue and wait on stdin: one of them
    is the safe point; attach takes well under a second, the waits end as
    if undisturbed."""
    code = """
import queue, sys, threading, time, torch
q = queue.Queue()
out = {}
def waiter():
    t0 = time.monotonic(); out["q"] = q.get(); out["qt"] = time.monotonic() - t0
def sleeper():
    t0 = time.monotonic(); time.sleep(4); out["s"] = time.monotonic() - t0
ts = [threading.Thread(target=f) for f in (waiter, sleeper)]
for t in ts: t.start()
print("ready", flush=True)
line = sys.stdin.readline()
q.put(line.strip())
for t in ts: t.join()
print(out["q"], round(out["s"], 1), float((torch.ones(2) + 1).sum()), flush=True)
"""
    with start(code) as p:
        t0 = time.monotonic()
        r, seen = start_rfbpf(["-q", "-v", "-p", str(p.pid)])
        attach_s = time.monotonic() - t0
        rc, _, err = stop(r)
        assert rc == 0, err
        assert "blocked in a system call" in seen
        assert attach_s < 5, attach_s
        out, _ = p.communicate("hello\n", timeout=60)
        assert out == "hello 4.0 4.0\n", out


def test_fork_loop_with_tcache_off_never_deadlocks(tmp_path):
    """glibc's fork() holds every malloc arena lock across clone; with the
    tcache off a call into malloc on that thread would wait on its own
    lock. rfbpf never takes a thread in clone: attach and detach finish
    and the job runs on."""
    code = """
import os, signal, sys, torch
stop = []
signal.signal(signal.SIGUSR1, lambda *a: stop.append(1))
print("ready", flush=True)
n = 0
while not stop:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    torch.ones(2).add_(1)
    n += 1
print("forked", n, flush=True)
"""
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.tcache_count=0")
    with start(code, env=env) as p:
        for _ in range(5):
            r = run([RFBPF, "-q", "-p", str(p.pid), "-d", "0.3"],
                    timeout=60)
            assert r.returncode == 0, r.stderr
        time.sleep(1)       # forking on after the last detach
        p.send_signal(signal.SIGUSR1)
        out, _ = p.communicate(timeout=60)
        word, n = out.split()
        # Some 40 forks a second here, across five attaches and detaches
        assert word == "forked" and int(n) > 100, out


def test_faulthandler_and_a_thread_blocking_sigsegv_keep_their_handlers():
    code = """
import faulthandler, signal, sys, threading, time, torch
faulthandler.enable()
stop = []
def blocked():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGSEGV])
    x = torch.ones(3)
    while not stop:
        x = x + 1
t = threading.Thread(target=blocked); t.start()
print("ready", flush=True)
sys.stdin.readline()
stop.append(1); t.join()
print(faulthandler.is_enabled(), flush=True)
"""
    with start(code) as p:
        def caught():
            with open(f"/proc/{p.pid}/status") as f:
                return [l for l in f if l.startswith(("SigCgt", "SigIgn"))]
        before = caught()
        for _ in range(5):
            r = run([RFBPF, "-q", "-p", str(p.pid), "-d", "0.2"])
            assert r.returncode == 0, r.stderr
        assert caught() == before
        out, _ = p.communicate("x\n", timeout=60)
        assert out == "True\n"


def test_signals_sent_during_calls_are_all_delivered():
    """Real-time signals queue (none merges with another): every one sent
    while rfbpf attaches and detaches, over and over, reaches the job.
    Counted where the kernel delivers them: Python's C-level handler
    writes one byte per delivery to the wakeup fd (its Python-level
    handler would merge a burst into one call)."""
    code = """
import os, signal, sys, torch
r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w)
signal.signal(signal.SIGRTMIN, lambda *a: None)
x = torch.ones(2)
print("ready", flush=True)
while sys.stdin.readline():
    x = x + 1
signal.set_wakeup_fd(-1)
os.set_blocking(r, False)
data = b""
try:
    while True:
        data += os.read(r, 65536)
except BlockingIOError:
    pass
print(data.count(bytes([signal.SIGRTMIN])), flush=True)
"""
    with start(code) as p:
        sent = 0
        for _ in range(6):
            r = subprocess.Popen([RFBPF, "-q", "-p", str(p.pid), "-d",
                                  "0.1"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            while r.poll() is None:
                os.kill(p.pid, signal.SIGRTMIN)
                sent += 1
                time.sleep(0.002)
            assert r.returncode == 0, r.stderr.read()
        time.sleep(0.5)
        out, _ = p.communicate("", timeout=60)
        assert sent > 100 and int(out) == sent, (out, sent)


def test_ctrl_c_in_launch_mode_reaches_only_the_command(tmp_path):
    """One Ctrl-C (SIGINT to the process group) at a random moment of
    start-up or tracing: the job's own handler runs and its exit status
    passes through; rfbpf never turns it into a SIGTERM."""
    code = """
import sys, time
try:
    import torch
    x = torch.ones(3)
    print("started", flush=True)
    for _ in range(10 ** 9):
        x = x + 1
        time.sleep(0.0005)
except KeyboardInterrupt:
    print("saved checkpoint", flush=True)
    sys.exit(130)
"""
    rng = random.Random(7)
    # A fatal signal in the command prints its Python stack (stderr).
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    for i in range(10):
        r = subprocess.Popen([RFBPF, "-q", "--no-table", "--", PYTHON, "-c",
                              code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             start_new_session=True, env=env)
        time.sleep(rng.uniform(0.05, 3.0))
        os.killpg(r.pid, signal.SIGINT)
        out, err = r.communicate(timeout=120)
        assert "faulted" not in err, err
        # Interrupted inside `import torch`, the import may fail with
        # another exception (untraced too): status 1, never 143. On a
        # failure the whole stderr is printed (pytest's message would cut
        # its middle, where the command's own last words would be).
        if r.returncode not in (130, 1):
            print(f"run {i}: status {r.returncode}\n--- stdout\n{out}"
                  f"--- stderr\n{err}")
        assert r.returncode in (130, 1), (r.returncode, out, err)
        if "started" in out:
            assert "saved checkpoint" in out, (out, err)
            assert r.returncode == 130


def test_kill_9_at_random_moments_of_attach_and_detach(tmp_path):
    """rfbpf killed at any moment, 50 times on one job: the job computes
    what it computes untraced, and --deactivate cleans up what is left."""
    rng = random.Random(9)
    with start(BUSY) as p:
        for i in range(50):
            r = subprocess.Popen([RFBPF, "-q", "-p", str(p.pid), "-d",
                                  "0.05"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.0, 0.4))
            r.kill()
            r.wait()
            assert p.poll() is None, f"the job died after kill {i}"
        # The kernel took rfbpf's probes out with it, even those whose
        # links a kill interrupted mid-close (dmesg may say "leaking
        # uprobe" then: the kernel's record of it, not its breakpoint).
        assert text_changed(p.pid) == []
        d = run([RFBPF, "--deactivate", "-p", str(p.pid)])
        assert d.returncode == 0, d.stderr
        assert no_callback_left(p.pid, tmp_path)
        p.send_signal(signal.SIGUSR1)
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        n, value = out.split()
        ref = run([PYTHON, "-c", BUSY, n], input="")
        assert ref.stdout.split()[1:] == [n, value]


def test_a_probe_left_in_the_job_would_be_seen():
    """text_changed, which the kill -9 tests trust to find a breakpoint
    left behind, finds rfbpf's while it traces (in libtorch's text with
    --probes entry, in rfbpf's page with the callback) and none after."""
    with start(BUSY) as p:
        assert text_changed(p.pid) == []
        for probes, where in (("entry", "libtorch_cpu"),
                              ("callback", "rfbpf-page")):
            r, _ = start_rfbpf(["-q", "-p", str(p.pid), "--probes", probes])
            seen = text_changed(p.pid)
            rc, _, err = stop(r)
            assert rc == 0, err
            assert seen and all(where in f for f, _ in seen), seen
            assert text_changed(p.pid) == []
        p.send_signal(signal.SIGUSR1)
        p.communicate(timeout=60)


def fds_named(pid, name):
    """How many of pid's descriptors point at a file whose name has name."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += name in os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return n


def test_kill_9_while_the_page_is_being_mapped(tmp_path):
    """rfbpf killed between two of the system calls that map its page into
    the job (held there by a test-only delay): the thread it held comes
    back through the signal frame under its stack, the job computes what it
    computes untraced, and the next rfbpf attaches and detaches as usual."""
    with start(BUSY) as p:
        env = dict(os.environ, RFBPF_TEST_PAGE_DELAY_MS="3000")
        r = subprocess.Popen([RFBPF, "-q", "-p", str(p.pid), "-d", "0.05"],
                             env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not fds_named(p.pid, "rfbpf-page") and r.poll() is None:
            assert time.monotonic() < deadline, "rfbpf never made its memfd"
            time.sleep(0.005)
        r.kill()
        r.wait()
        time.sleep(0.5)
        assert p.poll() is None, "the job died"
        again = run([RFBPF, "-q", "-p", str(p.pid), "-d", "0.2", "--top",
                     "1"])
        assert again.returncode == 0, again.stderr
        assert no_callback_left(p.pid, tmp_path)
        p.send_signal(signal.SIGUSR1)
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        n, value = out.split()
        ref = run([PYTHON, "-c", BUSY, n], input="")
        assert ref.stdout.split()[1:] == [n, value]


@pytest.mark.skipif(not shutil.which("perf"), reason="needs linux-perf")
def test_attach_while_another_tracer_probes_the_job(tmp_path):
    """perf counting uprobes on before()/end() of the same library in the
    same job (a second profiler on the host), 20 attaches in a row."""
    p = start(BUSY)
    kc = KernelCounts()
    perf = None
    try:
        perf = subprocess.Popen(kc.perf_args(str(tmp_path / "perf.csv"),
                                             pid=p.pid),
                                stderr=subprocess.DEVNULL)
        time.sleep(1)
        for _ in range(20):
            r = run([RFBPF, "-q", "-p", str(p.pid), "-d", "0.1", "--top",
                     "1"])
            assert r.returncode == 0, r.stderr
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
        p.send_signal(signal.SIGUSR1)
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and len(out.split()) == 2
    finally:
        if perf and perf.poll() is None:
            perf.kill()
        kc.close()
        p.kill()


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs util-linux")
def test_inside_a_pid_namespace(tmp_path):
    """rfbpf and the job in a new PID namespace (kubectl exec into a pod,
    unshare): BPF matches the job by the ids rfbpf sees there."""
    script = (f"{PYTHON} -c '{BUSY}' > {tmp_path}/job.out & "
              f"sleep 3; {RFBPF} -q -p $! -d 1 --top 3; echo rc=$?; "
              f"kill -USR1 $!; wait")
    r = run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
             script], timeout=120)
    assert "rc=0" in r.stdout, r.stdout + r.stderr
    assert "aten::add" in r.stdout
    m = re.search(r"(\d+) ops on 1 thread in PID (\d+)", r.stdout)
    assert m and int(m.group(1)) > 1000 and int(m.group(2)) < 100, r.stdout


def test_children_traced_with_children_option(tmp_path):
    """--children: the DataLoader's workers (forked every epoch) are traced
    too. aten::sin runs only in them (the dataset's transform); each
    worker is its own process in the trace; the losses are untouched.
    Each worker gets 32 batches: a child is traced from the moment rfbpf
    finds it, milliseconds after its fork, and with the default 4 a worker
    could finish before then (seen: 2 to 5 of 6 traced on a loaded run)."""
    args = [DATALOADER, "--epochs", "3", "--workers", "2",
            "--samples", "2048"]
    untraced = run([PYTHON, *args])
    out = tmp_path / "t.json"
    traced = run([RFBPF, "-q", "--children", "--top", "0", "-o", str(out),
                  "--", PYTHON, *args])
    assert traced.returncode == 0, traced.stderr
    assert [l for l in traced.stdout.splitlines()
            if l.startswith("epoch")] == untraced.stdout.splitlines()
    assert "aten::sin" in traced.stdout
    assert "and 6 child processes" in traced.stdout, traced.stdout
    assert "unmatched ends 0; repeated ends 0; async ends 0" in traced.stdout
    with open(out) as f:
        trace = __import__("json").load(f)
    sin_pids = {e["pid"] for e in trace["traceEvents"]
                if e.get("name") == "aten::sin"}
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("name") == "process_name"}
    assert len(sin_pids) == 6 and all("child of" in names[p]
                                      for p in sin_pids), names
    plain = run([RFBPF, "-q", "--top", "0", "--", PYTHON, *args])
    assert plain.returncode == 0 and "aten::sin" not in plain.stdout


def test_detach_removes_the_callback_from_forked_children(tmp_path):
    """Persistent DataLoader workers forked while rfbpf traced the parent
    inherited its callback; after rfbpf stops, they no longer run
    RecordFunction (a passive rfbpf on a worker sees no op)."""
    args = [DATALOADER, "--epochs", "4", "--workers", "2", "--persistent",
            "--pause-after", "2", "--wait"]
    untraced = run([PYTHON, *args], input="go\ngo\n")
    with Job([PYTHON, *args]) as p:
        r, _ = start_rfbpf(["-q", "-p", str(p.pid)])
        p.go()
        lines = [p.next_line() for _ in range(3)]
        assert lines[2].startswith("paused"), lines
        workers = [int(w) for w in lines[2].split()[1:]]
        rc, table, err = stop(r)
        assert rc == 0, err
        out = tmp_path / "worker.json"
        passive, _ = start_rfbpf(["-q", "--no-activate", "-p",
                                  str(workers[0]), "-o", str(out)])
        rest, _ = p.communicate("go\n", timeout=300)
        rc, _, err = stop(passive)
        assert p.returncode == 0
        assert "".join(lines[:2]) + rest == "".join(
            l + "\n" for l in untraced.stdout.splitlines()
            if not l.startswith(("ready", "paused")))
        assert '"ph":"X"' not in out.read_text().replace(" ", ""), \
            "the worker still runs RecordFunction"


def test_op_ended_on_another_thread_does_not_freeze_tree_sampling():
    """A record_function scope whose end runs on the thread that completes
    its future: BPF drops it from the first thread's stack, so that
    thread's trees keep ending and being sampled (before, one such op
    froze them: every later tree kept, or every one skipped)."""
    code = """
import sys, threading, torch
from torch.autograd.profiler import record_function
x = torch.ones(8)
print("ready", flush=True)
sys.stdin.readline()
for i in range(400):
    fut = torch.futures.Future()
    with record_function("async_scope") as rf:
        done = rf._call_end_callbacks_on_future(fut)
    t = threading.Thread(target=lambda: fut.set_result(x))
    t.start(); t.join()
    done.wait()
    for _ in range(3):
        with record_function("step"):
            torch.mul(x, 2)
print("done", flush=True)
"""
    with start(code) as p:
        r, _ = start_rfbpf(["-q", "--probes", "callback", "--tree-sample",
                            "0.5", "-p", str(p.pid)])
        p.go()
        assert p.next_line() == "done\n"
        rc, table, err = stop(r)
        assert rc == 0, err
        m = re.search(r"kept (\d+) of (\d+) top-level op trees", table)
        kept, seen = int(m.group(1)), int(m.group(2))
        assert seen >= 1600, table      # 400 async scopes, 1200 steps
        assert 0.4 < kept / seen < 0.6, table
        assert "truncated ops 0" in table, table
        assert re.search(r"async ends [1-9]", table), table


SECCOMP_EXEC = r"""
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Runs argv[1..] under a filter that kills the process on memfd_create. */
int main(int argc, char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 126;
	execv(argv[1], argv + 1);
	return 127;
}
"""


def test_seccomp_filtered_job_is_refused_and_untouched(tmp_path):
    """A job whose seccomp filter kills it on memfd_create (which mapping
    rfbpf's page needs): one line, a non-zero exit, and the job runs on
    unchanged."""
    src, exe = tmp_path / "seccomp_exec.c", tmp_path / "seccomp_exec"
    src.write_text(SECCOMP_EXEC)
    assert run(["gcc", "-O1", "-o", str(exe), str(src)]).returncode == 0
    code = ("import sys, torch\nx = torch.ones(2)\nprint('ready', "
            "flush=True)\nsys.stdin.readline()\nprint(float((x + 1).sum()),"
            " flush=True)\n")
    with Job([str(exe), PYTHON, "-c", code]) as p:
        assert "seccomp" in refused(p.pid)
        out, _ = p.communicate("go\n", timeout=60)
        assert p.returncode == 0 and out == "4.0\n"


def test_target_killed_while_held_is_reaped_by_its_parent(tmp_path):
    """A job killed -9 while rfbpf holds one of its threads (here for 3 s,
    a test-only delay) is a zombie that only its tracer can release: the
    daemon, which outlives the attach, must take its exit at once so the
    job's parent (a DataLoader reaping its workers, a supervisor) is not
    left waiting for as long as rfbpf runs."""
    job = start(BUSY)
    daemon = subprocess.Popen(
        [RFBPF, "--continuous", "-p", str(job.pid), "--interval", "60",
         "--prom-file", str(tmp_path / "m.prom")],
        env=dict(os.environ, RFBPF_TEST_HOLD_DELAY_MS="3000"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and tracer_of(job.pid) == 0:
            time.sleep(0.01)
        assert tracer_of(job.pid) == daemon.pid     # seized
        time.sleep(0.5)                             # held now
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=15)        # hangs while rfbpf keeps the zombie
        assert daemon.poll() is None
    finally:
        job.kill()
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert "Traceback" not in err


def tracer_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


VFORK_LIB = os.path.join(ROOT, "tests", "fixtures", "vfork_wait.so")
# Four threads that spend nearly all their time in vfork(2), staggered:
# whenever rfbpf lets the job's threads go after a hold, some of them
# have more than a second of their wait left.
VFORKER = """
import ctypes, sys, threading, time, torch
lib = ctypes.CDLL(sys.argv[1])
def forker():
    while True:
        lib.vfork_wait(2500)
for _ in range(4):
    threading.Thread(target=forker, daemon=True).start()
    time.sleep(0.6)
x = torch.ones(4)
print("ready", flush=True)
while True:
    x.add(1)
    time.sleep(0.001)
"""


def traced_stops(pid, p):
    """While p runs: per thread of pid, the longest time it stayed in a
    tracing stop ('t'), sampled every 20 ms."""
    since, longest = {}, {}
    while p.poll() is None:
        now = time.monotonic()
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state == "t":
                since.setdefault(tid, now)
                longest[tid] = max(longest.get(tid, 0), now - since[tid])
            else:
                since.pop(tid, None)
        time.sleep(0.02)
    return longest


def test_thread_that_cannot_stop_at_a_release_is_let_go_when_it_does(
        tmp_path):
    """A thread waiting for its vfork child cannot be stopped by
    PTRACE_INTERRUPT until the child exits, so the release after a hold
    finds it still running a second later. It must be let go as soon as
    it stops: before, it stayed stopped for as long as rfbpf ran, and
    the detach could not seize the job again."""
    out, job_err = tmp_path / "t.json", tmp_path / "job.err"
    with open(job_err, "w") as errf, \
            Job([PYTHON, "-c", VFORKER, VFORK_LIB], stderr=errf) as job:
        p, _ = start_rfbpf(["-q", "-p", str(job.pid), "-d", "8", "-o",
                            str(out), "--no-table"])
        longest = traced_stops(job.pid, p)
        rc, _, err = stop(p)
        assert rc == 0, err
        assert "warning" not in err, err
        assert job.p.poll() is None
    # A hold stops every thread for a few ms, a release waits a second
    # for the slowest: nothing near the 8 s of the run.
    assert max(longest.values(), default=0) < 2.5, longest
    # The vfork children share the job's memory: rfbpf's detach leaves
    # them alone (it used to remove the job's callback a second time
    # through them, and PyTorch logged that to the job's stderr).
    assert "callback is not found" not in job_err.read_text()
