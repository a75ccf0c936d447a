"""What the end-to-end tests share (conftest.py keeps only fixtures and
pytest's hooks): the paths, running rfbpf and jobs, reading traces, and
the kernel-count referee.

Everything here drives the real thing: the rfbpf binary, the kernel's BPF
and uprobes, and Debian's PyTorch under /usr/bin/python3. The one outside
referee is the kernel's own count of uprobe hits, taken with tracefs
uprobes counted by `perf stat`, at offsets this file computes from the ELF
with readelf (independently of rfbpf's libelf code).
"""
import collections
import decimal
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RFBPF = os.path.join(ROOT, "rfbpf")
PYTHON = "/usr/bin/python3"
WORKLOAD = os.path.join(ROOT, "tests", "workloads", "mlp_threads.py")
LIBTORCH = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"
TRACEFS = "/sys/kernel/tracing"
# Per test process: two runs of the suite on one host (a CI run beside a
# developer's) would otherwise both define rfbpf_gt/before_cstr, and the
# second gets EEXIST. Groups of processes that died without close() are
# removed by the next KernelCounts (clear_dead_groups).
GROUP_PREFIX = "rfbpf_gt_"
GROUP = f"{GROUP_PREFIX}{os.getpid()}"

# The symbols rfbpf names per variant in its trace's otherData.
VARIANT_SYMBOLS = {
    "before(const char*)": "_ZN2at14RecordFunction6beforeEPKcl",
    "before(std::string)": "_ZN2at14RecordFunction6beforeENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEl",
    "before(FunctionSchema)": "_ZN2at14RecordFunction6beforeESt17reference_wrapperIKN3c1014FunctionSchemaEEl",
    "end()": "_ZN2at14RecordFunction3endEv",
}
DESCRIPTOR_SYMBOLS = {
    "before(FunctionDescriptor)": "_ZN2at14RecordFunction6beforeESt7variantIJSt17basic_string_viewIcSt11char_traitsIcEESt17reference_wrapperIKN3c1014FunctionSchemaEEEEl",
    "end()": "_ZN2at14RecordFunction3endEv",
}
PERF_EVENT = {
    "before(const char*)": "before_cstr",
    "before(std::string)": "before_string",
    "before(FunctionSchema)": "before_schema",
    "before(FunctionDescriptor)": "before_descriptor",
    "end()": "end_call",
}


# Debian roots with another release's PyTorch, built once each by
# tools/make-torch-root.sh: suite -> (directory, what it holds).
TORCH_ROOTS = {
    "sid": ("/var/tmp/rfbpf-sid-root", "torch 2.14, Python 3.14"),
    "trixie": ("/var/tmp/rfbpf-trixie-root", "torch 2.6, Python 3.13"),
}
SID_ROOT = TORCH_ROOTS["sid"][0]
TRIXIE_ROOT = TORCH_ROOTS["trixie"][0]


def torch_root_with(suite, *files):
    """The Debian root of suite (see TORCH_ROOTS), files copied into its
    /tmp; skips the test where it cannot be built."""
    root, holds = TORCH_ROOTS[suite]
    r = run([os.path.join(ROOT, "tools", "make-torch-root.sh"), suite,
             root], timeout=1800)
    if r.returncode != 0:
        pytest.skip(f"cannot build a Debian {suite} root with {holds} "
                    f"(debootstrap failed: {r.stderr.strip()[-300:]})")
    for f in files:
        shutil.copy(f, os.path.join(root, "tmp", os.path.basename(f)))
    return root
# rfbpf's state directory, as rfbpf itself chooses it: RFBPF_STATE_DIR
# lets a test run keep off the host's /run/rfbpf (other runs' files).
STATE_DIR = os.environ.get("RFBPF_STATE_DIR") or "/run/rfbpf"
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
# The GPU tests' mark: without a toolkit there is no agent to test; with
# one, a missing agent is a build failure, not a reason to skip.
NEEDS_CUDA_TOOLKIT = pytest.mark.skipif(
    not os.path.exists(os.path.join(CUDA_HOME, "include", "cupti.h")),
    reason=f"GPU tests skipped: CUDA toolkit not found in {CUDA_HOME} "
           f"(set CUDA_HOME), so librfbpf_cupti.so is not built")


def sid_root_with(*files):
    """The Debian sid root (torch 2.14) with files in its /tmp."""
    return torch_root_with("sid", *files)


def torch_lib(root):
    """The root's libtorch_cpu.so.X.Y.Z, by its real name."""
    return glob.glob(os.path.join(root, "usr/lib/*/libtorch_cpu.so.*.*.*"))[0]


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, **kw)


def elf_offsets(path, symbols):
    """File offsets of symbols, from readelf's symbol and segment tables."""
    real = os.path.realpath(path)
    syms = run(["readelf", "-W", "--dyn-syms", real]).stdout
    addrs = {}
    for line in syms.splitlines():
        f = line.split()
        if len(f) >= 8 and f[7] in symbols and f[6] != "UND":
            addrs[f[7]] = int(f[1], 16)
    segs = []
    for line in run(["readelf", "-lW", real]).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
    out = {}
    for s, a in addrs.items():
        for off, vaddr, filesz in segs:
            if vaddr <= a < vaddr + filesz:
                out[s] = a - vaddr + off
    return out


class KernelCounts:
    """tracefs uprobes on each RecordFunction symbol, counted by perf stat."""

    def __init__(self, lib=LIBTORCH, symbols=VARIANT_SYMBOLS,
                 event_names=PERF_EVENT, group=GROUP):
        """group: the tracefs group of the events; tests that may run at
        the same time as others on this host pick one of their own."""
        if not os.path.exists(os.path.join(TRACEFS, "uprobe_events")):
            run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
        clear_dead_groups()
        self.lib = os.path.realpath(lib)
        offs = elf_offsets(self.lib, set(symbols.values()))
        self.events = []
        for variant, sym in symbols.items():
            name = event_names[variant]
            self._write(f"p:{group}/{name} {self.lib}:0x{offs[sym]:x}\n")
            self.events.append((variant, f"{group}:{name}"))

    def _write(self, line):
        # Unbuffered append: Python's "a" mode seeks, which tracefs refuses.
        fd = os.open(os.path.join(TRACEFS, "uprobe_events"),
                     os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def perf_args(self, out, pid=None, every_cpu=False):
        """perf stat counting the events in process pid, or in the command
        after these arguments; either way in the threads and children they
        start. every_cpu: on every CPU instead, for as long as the command
        runs, for a job that is not perf's own child (rfbpf's launch mode:
        perf, rfbpf, then the job).

        Counting per task loses hits there. perf swaps the inherited
        counters' contexts between the tasks of its tree at context
        switches, so a task that exits (a thread of rfbpf's, say) can free
        the counter that stood for a job thread still running; perf's own
        counter, never freed, is rfbpf's. The uprobe's per-task filter
        (trace_uprobe.c, __uprobe_perf_filter) then covers no task of the
        job's memory, and the kernel takes the breakpoint out of it: 0 hits
        of before() in one CI run, end() 44 against 4753 befores in
        another. With --probes entry rfbpf's own consumer kept the
        breakpoint in; with the callback nothing did. Counting on every
        CPU has no filter; nothing else maps the library while a test
        counts (the tests run one at a time)."""
        ev = ",".join(e for _, e in self.events)
        where = ["-p", str(pid)] if pid else ["-a"] if every_cpu else []
        return ["perf", "stat", "--no-big-num", "-x", ",", "-o", out, "-e",
                ev, *where]

    @staticmethod
    def parse(out_path, events):
        counts = {}
        with open(out_path) as f:
            for line in f:
                f_ = line.strip().split(",")
                if len(f_) > 2:
                    for variant, ev in events:
                        if f_[2] == ev:
                            counts[variant] = int(f_[0])
        return counts

    def close(self):
        for _, ev in self.events:
            try:
                self._write(f"-:{ev.replace(':', '/')}\n")
            except OSError:
                pass


def clear_dead_groups():
    """Remove the uprobe events of KernelCounts groups whose test process
    is gone (killed mid-test, so close() never ran)."""
    path = os.path.join(TRACEFS, "uprobe_events")
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        # "p:rfbpf_gt_123_x/before_cstr /path:0x..."
        m = re.match(r"[pr]:(%s(\d+)\w*)/(\S+)" % GROUP_PREFIX, line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, f"-:{m.group(1)}/{m.group(3)}\n".encode())
            except OSError:
                pass        # in use by a perf still running: left for later
            finally:
                os.close(fd)


def agrees_with_kernel(trace, kernel, probes):
    """The referee: rfbpf's event counts in trace against the kernel's
    uprobe hits on the RecordFunction symbols (KernelCounts). Entry probes:
    per before() variant, rfbpf's events equal the hits on that symbol, its
    ends the hits on end(). Callback probes: each before() call ran rfbpf's
    start callback once, so the starts equal the before() hits summed, and
    every started op ended. Nothing dropped either way. Returns the
    before() hits summed."""
    other = trace["otherData"]
    assert other["drops"] == 0
    ours = other["before_events"]
    befores = sum(v for k, v in kernel.items() if k != "end()")
    if probes == "callback":
        assert "callback" in other["probes"]
        assert ours["start callback"] == befores
        assert other["end_events"] == befores
        assert other["unmatched_ends"] == 0
        return befores
    assert "entry" in other["probes"]
    for variant, hits in kernel.items():
        if variant != "end()":
            assert ours[variant] == hits, (variant, ours[variant], hits)
    assert other["end_events"] == kernel["end()"]
    return befores


def load_trace(path):
    with open(path) as f:
        return json.load(f, parse_float=decimal.Decimal)


def ops_of(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def ns(us):
    """Chrome-trace microseconds with 3 decimals -> integer ns, exactly."""
    return int(decimal.Decimal(us) * 1000)


class Node:
    def __init__(self, ev):
        self.ev = ev
        self.start = ns(ev["ts"])
        self.end = self.start + ns(ev["dur"])
        self.children = []
        self.parent = None

    @property
    def name(self):
        return self.ev["name"]

    def ancestors(self):
        n = self.parent
        while n:
            yield n
            n = n.parent


def rebuild_nesting(trace):
    """Rebuilds each thread's tree from the intervals alone (not from any
    parent field). Returns (roots per tid, violations): a violation is an
    interval that overlaps the enclosing one without lying inside it."""
    by_tid = collections.defaultdict(list)
    for e in ops_of(trace):
        by_tid[e["tid"]].append(Node(e))
    roots, violations = {}, []
    for tid, nodes in by_tid.items():
        nodes.sort(key=lambda n: (n.start, -n.end))
        stack, roots[tid] = [], []
        for n in nodes:
            while stack and n.start >= stack[-1].end and not (
                    n.start == stack[-1].end == n.end):
                stack.pop()
            if stack:
                if n.end > stack[-1].end:
                    violations.append((stack[-1].name, n.name))
                n.parent = stack[-1]
                stack[-1].children.append(n)
            else:
                roots[tid].append(n)
            stack.append(n)
    return roots, violations


def all_nodes(roots):
    out = []
    todo = [n for r in roots.values() for n in r]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(n.children)
    return out


class Job:
    """A job under test, as a context manager: started, waited for until
    it prints its ready line, its output then read by a thread as it comes
    (a job blocked on a full pipe runs no ops), and killed on the way out
    of the with, whatever happened in it."""

    def __init__(self, argv, ready="ready", **popen):
        popen.setdefault("stdin", subprocess.PIPE)
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,
                                  **popen)
        self.pid, self.lines, self.taken = self.p.pid, [], 0
        self.eof, self.more = False, threading.Condition()
        if ready is not None:
            line = self.p.stdout.readline()
            if line.strip() != ready:
                self.kill()
                raise AssertionError(f"{argv}: {line!r}, not {ready!r}")
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            with self.more:
                self.lines.append(line)
                self.more.notify_all()
        with self.more:
            self.eof = True
            self.more.notify_all()

    def next_line(self, timeout=120):
        """The next line it prints after the last one this returned; ''
        once it has closed its output, or after timeout seconds."""
        with self.more:
            self.more.wait_for(lambda: len(self.lines) > self.taken or
                               self.eof, timeout)
            if len(self.lines) == self.taken:
                return ""
            self.taken += 1
            return self.lines[self.taken - 1]

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.kill()

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def go(self):
        """The line a workload started with --wait waits for."""
        self.send("go")

    def output(self):
        """What it printed after its ready line, so far."""
        return "".join(self.lines)

    def finish(self, timeout=300):
        """Waits for its exit: (status, what it printed after ready)."""
        if self.p.stdin:
            self.p.stdin.close()
        self.p.wait(timeout=timeout)
        self.reader.join(timeout)
        return self.p.returncode, self.output()

    def communicate(self, input=None, timeout=300):
        """As Popen's: input written, its exit waited for; (what it printed
        that next_line() has not returned, None)."""
        if input:
            self.p.stdin.write(input)
        self.finish(timeout)
        rest, self.taken = "".join(self.lines[self.taken:]), len(self.lines)
        return rest, None

    def poll(self):
        return self.p.poll()

    def send_signal(self, sig):
        self.p.send_signal(sig)

    @property
    def returncode(self):
        return self.p.returncode

    def wait(self, timeout=None):
        return self.p.wait(timeout=timeout)

    def kill(self, timeout=60):
        """SIGKILL, and its exit waited for (a test fails, rather than
        hangs, on a job that cannot be reaped)."""
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=timeout)


class Waiting(Job):
    """The bundled workload started with --wait: it prints 'ready' and
    waits for a line on stdin, so a tracer can attach before any op runs."""

    def __init__(self, *args):
        super().__init__([PYTHON, WORKLOAD, "--wait", *args])


def capture(tmp_path, command, *opts, name="t", **kw):
    """Launches command under `rfbpf -q -o FILE *opts`; (trace, the run).
    kw goes to run() (input=, timeout=)."""
    out = tmp_path / f"{name}.json"
    r = run([RFBPF, "-q", "-o", str(out), *opts, "--", *command], **kw)
    assert r.returncode == 0, r.stderr
    return load_trace(out), r


class Rfbpf(subprocess.Popen):
    """rfbpf in the background; a thread collects its stderr so that
    start_rfbpf can wait for the 'tracing' line without losing the rest."""

    def __init__(self, args):
        super().__init__([RFBPF, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        self.err_lines = []
        self.tracing = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.stderr:
            self.err_lines.append(line)
            if line.startswith("rfbpf: tracing"):
                self.tracing.set()
        self.tracing.set()          # EOF: rfbpf exited

    def stderr_text(self):
        return "".join(self.err_lines)


def start_rfbpf(args):
    """Starts rfbpf and waits for its 'tracing' line on stderr. Returns the
    process and what it printed so far."""
    p = Rfbpf(args)
    p.tracing.wait(60)
    if p.poll() is not None or not any(
            l.startswith("rfbpf: tracing") for l in p.err_lines):
        p.kill()
        raise AssertionError(f"rfbpf did not start tracing: "
                             f"{p.stderr_text()}")
    return p, p.stderr_text()


def stop(p, sig=signal.SIGINT, timeout=120):
    """Stops rfbpf; returns its status, stdout and all of its stderr."""
    if p.poll() is None:
        p.send_signal(sig)
    out = p.stdout.read()
    p.wait(timeout=timeout)
    if isinstance(p, Rfbpf):
        p.reader.join(timeout)
        return p.returncode, out, p.stderr_text()
    return p.returncode, out, p.stderr.read()


def refused(pid):
    """rfbpf -p pid must refuse: a non-zero exit, one line on stderr
    (returned), and nothing recorded or mapped in the target."""
    r = run([RFBPF, "-q", "-p", str(pid)])
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1, r.stderr
    assert not os.path.exists(f"{STATE_DIR}/{pid}.state")
    with open(f"/proc/{pid}/maps") as f:
        assert "rfbpf-page" not in f.read()
    return r.stderr


def rss_kb(pid):
    """A process's resident memory now, in kB (0 if gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def untraced_output(*args):
    r = run([PYTHON, WORKLOAD, *args])
    assert r.returncode == 0, r.stderr
    return r.stdout


def text_changed(pid):
    """Where pid's executable file mappings differ from their files, as
    (file, file offset) pairs, one per differing 16-byte block. A uprobe
    leaves its int3 in the process's copy of the page; a probe that is
    gone leaves the file's bytes. So anything here after rfbpf has gone
    is a breakpoint left behind: the job would trap into the kernel on
    every pass through it, slower after detach. (The kernel may keep the
    probe's private copy of a page once the bytes are restored, so
    smaps' Anonymous is no test; the bytes are.)"""
    changed = []
    with open(f"/proc/{pid}/maps") as f:
        maps = [l.split() for l in f]
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for m in maps:
            if len(m) < 6 or "x" not in m[1] or m[5].startswith("["):
                continue
            lo, hi = (int(v, 16) for v in m[0].split("-"))
            offset = int(m[2], 16)
            path = f"/proc/{pid}/map_files/{m[0]}"
            try:
                with open(path, "rb") as disk:
                    disk.seek(offset)
                    want = disk.read(hi - lo)
                mem.seek(lo)
                have = mem.read(len(want))
            except OSError:
                continue                # unmapped meanwhile
            if have == want:
                continue
            for i in range(0, len(want), 16):
                if have[i:i + 16] != want[i:i + 16]:
                    changed.append((m[5], offset + i))
    return changed


def bpf_programs(name):
    """How many BPF programs called name the kernel has loaded (rfbpf's
    programs shared by every job of an rfbpf process are counted so)."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"],
                         capture_output=True, text=True, check=True).stdout
    return sum(p.get("name") == name for p in json.loads(out))


def wait_until(check, timeout=60):
    """Polls check() until it holds or timeout seconds pass; its last
    value."""
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.2)
    return check()
