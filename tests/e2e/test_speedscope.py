"""rfbpf's Chrome trace and folded stacks in a real client: speedscope
(the npm package's own release) in Debian's headless chromium, driven by
tests/speedscope/check.js. A file passes when speedscope imports it with
the importer for its format, draws it, and shows what is in the file: the
trace's threads as its profiles with every op as a frame, the folded
file's distinct frames, and the heaviest frames by self time. A cut trace
must fail. Each check leaves a screenshot, checked to be a whole PNG with
a drawn flame chart in it. With --python-stacks, on a training job with
record_function scopes that outlive the frames they begin in, the
time-ordered view is as deep as each thread's slices nest (ops and
Python frames), not a staircase."""
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import zlib

import pytest

from harness import (PYTHON, RFBPF, ROOT, WORKLOAD, load_trace, ns,
                    rebuild_nesting, run, sid_root_with)

SPEEDSCOPE = os.path.join(ROOT, "tests", "speedscope")
CHECK = os.path.join(SPEEDSCOPE, "check.js")
CHROMIUM = "/usr/bin/chromium"
STEPS = 5


def node():
    """node, chromium and the npm packages: `make deps` installs all three,
    so a missing one fails (it is not a reason to skip)."""
    exe = shutil.which("node")
    if exe is None:
        pytest.fail("node not found: `make deps` installs nodejs")
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not found: `make deps` installs chromium")
    for pkg in ("speedscope", "playwright-core"):
        if not os.path.isdir(os.path.join(SPEEDSCOPE, "node_modules", pkg)):
            pytest.fail(f"{pkg} not in {SPEEDSCOPE}/node_modules: "
                        "`make deps` runs npm ci there")
    return exe


def speedscope(profile, shot, view="time-ordered", depth=False):
    """check.js on one file: (exit code, its JSON line or None, stderr);
    depth: each profile with the depth of its time-ordered view."""
    r = run([node(), CHECK, "--view", view, *(["--depth"] if depth else []),
             str(profile), str(shot)], timeout=180)
    info = json.loads(r.stdout) if r.returncode == 0 else None
    return r.returncode, info, r.stderr.strip()


def png_pixels(path):
    """Decodes an 8-bit RGB(A) PNG with zlib alone: every chunk's CRC, the
    inflated size, the row filters. Returns (width, height, rows of
    (r, g, b) tuples)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, ihdr = 8, [], None
    while True:
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) == crc, (path, kind)
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, ihdr
    bpp = 3 if ctype == 2 else 4
    stride = w * bpp
    raw = zlib.decompress(b"".join(idat))
    assert len(raw) == h * (stride + 1), path
    prev, rows = bytearray(stride), []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride) if f else ():
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def check_screenshot(path):
    """A whole PNG of the 1280x720 page whose lower part (the flame chart,
    below the toolbar and the minimap) holds many colors: frames drawn,
    not a blank or single-color page."""
    assert os.path.getsize(path) > 10_000, os.path.getsize(path)
    w, h, rows = png_pixels(path)
    assert (w, h) == (1280, 720)
    chart = collections.Counter(px for row in rows[h // 4:] for px in row)
    background, n = chart.most_common(1)[0]
    assert len(chart) > 50, len(chart)
    assert n < 0.98 * sum(chart.values()), (background, n)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("speedscope")
    trace, folded = d / "trace.json", d / "stacks.folded"
    r = run([RFBPF, "-q", "--no-table", "-o", str(trace), "--folded",
             str(folded), "--", PYTHON, WORKLOAD, "--steps", str(STEPS)])
    assert r.returncode == 0, r.stderr
    return d, trace, folded


def test_chrome_trace_parses_in_speedscope(outputs):
    d, trace, _ = outputs
    shot = d / "trace.png"
    rc, info, err = speedscope(trace, shot)
    assert rc == 0, err
    assert info["importer"] == "Trace Event Format profile"
    assert info["title"] == "trace.json"

    # speedscope makes a profile of each thread, named from the metadata,
    # and a frame of each distinct name + JSON args (the args carry each
    # op's External id, so every op is its own frame).
    events = json.load(open(trace))["traceEvents"]
    meta = {(e["name"], e["pid"], e["tid"]): e["args"]
            for e in events if e["ph"] == "M"}
    frames = collections.defaultdict(set)
    for e in events:
        if e["ph"] == "X":
            frames[e["pid"], e["tid"]].add(
                e["name"] + " " + json.dumps(e["args"], separators=(",", ":"),
                                             ensure_ascii=False))
    expected = {}
    for pid, tid in frames:
        pname = next(a["name"] for (k, p, _), a in meta.items()
                     if k == "process_name" and p == pid)
        tname = meta["thread_name", pid, tid]["name"]
        expected[f"{pname} (pid {pid}), {tname} (tid {tid})"] = (
            len(frames[pid, tid]), frames[pid, tid])
    assert len(expected) == 2              # mlp_threads: main and worker
    shown = {p["name"]: p for p in info["profiles"]}
    assert set(shown) == set(expected), (sorted(shown), sorted(expected))
    for name, (count, names) in expected.items():
        assert shown[name]["frames"] == count, name
        assert set(shown[name]["top"]) <= names, shown[name]["top"]
    check_screenshot(shot)


def test_folded_parses_in_speedscope(outputs):
    d, _, folded = outputs
    shot = d / "folded.png"
    rc, info, err = speedscope(folded, shot, view="left-heavy")
    assert rc == 0, err
    assert info["importer"] == "collapsed stack format"
    assert info["title"] == "stacks.folded"

    # One profile with every distinct frame of the file, its heaviest by
    # self time (the weight of the stacks a frame ends) first.
    names, self_ns = set(), collections.Counter()
    for line in open(folded):
        stack, weight = line.rstrip("\n").rsplit(" ", 1)
        frames = stack.split(";")
        names.update(frames)
        self_ns[frames[-1]] += int(weight)
    [p] = info["profiles"]
    assert p["name"] == "stacks.folded"
    assert p["frames"] == len(names)
    top = [self_ns[n] for n in p["top"]]
    assert top[0] == max(self_ns.values()), p["top"]
    assert top == sorted(top, reverse=True), p["top"]
    check_screenshot(shot)


@pytest.mark.parametrize("broken", ["cut trace", "garbage folded"])
def test_broken_file_fails_in_speedscope(outputs, broken):
    """The check is not a page that loads whatever it is given: half a
    Chrome trace, or text that is no folded stack, fails with speedscope's
    own complaint, and no screenshot."""
    d, trace, _ = outputs
    if broken == "cut trace":
        bad = d / "cut.json"
        data = open(trace, "rb").read()
        bad.write_bytes(data[:len(data) // 2])
    else:
        bad = d / "garbage.folded"
        bad.write_bytes(b"not a profile\nno; weights; here\n\x00\x01\x02\n")
    shot = d / "broken.png"
    rc, info, err = speedscope(bad, shot)
    assert rc == 1, info
    assert err.startswith("speedscope check: speedscope said: "
                          "Unrecognized format!"), err
    assert not shot.exists()


OPTIM = os.path.join(ROOT, "tests", "workloads", "optim_train.py")


def nesting_depth(events, touching_nest=False):
    """How deep a thread's complete events nest. touching_nest: a slice
    that begins exactly where another ends counts as inside it (speedscope
    adds ts and dur in floating point, so it may draw either way)."""
    spans = sorted(((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
                    for e in events), key=lambda s: (s[0], -s[1]))
    stack, deepest = [], 0
    for start, end in spans:
        while stack and (start > stack[-1] or
                         (start == stack[-1] and not touching_nest)):
            stack.pop()
        stack.append(end)
        deepest = max(deepest, len(stack))
    return deepest


@pytest.mark.parametrize("torch_of,probes", [("host", "callback"),
                                             ("sid", "entry")])
def test_python_frames_draw_as_a_tree_in_speedscope(tmp_path, torch_of,
                                                    probes):
    """--python-stacks on optim_train.py (Adam's scopes and the user's
    begin under record_function.__enter__, which returns long before
    they end), torch 1.13 and 2.14, both probe paths: per thread,
    speedscope's time-ordered view is exactly as deep as the trace's
    slices nest, the op tree plus its Python frames."""
    python = [PYTHON, OPTIM]
    if torch_of == "sid":
        python = ["chroot", sid_root_with(OPTIM), "python3",
                  "/tmp/optim_train.py"]
    w = subprocess.Popen([*python, "--seconds", "120"],
                         stdout=subprocess.PIPE, text=True)
    trace = tmp_path / "train.json"
    try:
        for line in w.stdout:      # sid's UCX warns on stdout
            if line.strip() == "ready":
                break
        r = run([RFBPF, "-q", "-p", str(w.pid), "-d", "0.5",
                 "--python-stacks", "--probes", probes, "-o", str(trace),
                 "--no-table"])
        assert r.returncode == 0, r.stderr
    finally:
        w.kill()
        w.wait()
    t = load_trace(trace)
    _, violations = rebuild_nesting(t)
    assert violations == []
    by_tid = collections.defaultdict(list)
    for e in t["traceEvents"]:
        if e["ph"] == "X":
            by_tid[e["tid"]].append(e)
    rc, info, err = speedscope(trace, tmp_path / "train.png", depth=True)
    assert rc == 0, err
    assert len(info["profiles"]) == 2
    for p in info["profiles"]:
        evs = by_tid[int(re.search(r"\(tid (\d+)\)$", p["name"]).group(1))]
        ops = nesting_depth([e for e in evs
                             if e["cat"] != "python_function"])
        want = nesting_depth(evs)
        most = nesting_depth(evs, touching_nest=True)
        # Python frames on top of the op tree, a few dozen deep at most.
        assert ops < want <= most < ops + 64, (p["name"], ops, want, most)
        assert want <= p["depth"] <= most, (p["name"], p["depth"], want)
