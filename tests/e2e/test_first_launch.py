"""A fresh machine: no state directory yet. Every mode that writes state
makes it (with its parents) and says nothing about it, and leaves nothing
of its own behind; stale files of dead or reused pids are dropped at
start. Each test gets a nested directory that does not exist yet, through
RFBPF_STATE_DIR, so the host's /run/rfbpf (other runs') is never touched;
the default path is tested in a private mount namespace with an empty
/run."""
import os
import shutil
import signal
import stat
import subprocess
import time

import pytest

from harness import PYTHON, RFBPF, Waiting, run, start_rfbpf, stop

IMPORTS_TORCH = "import torch; torch.ones(2) + 1"


@pytest.fixture
def fresh(tmp_path):
    """A state directory two levels below anything that exists."""
    d = tmp_path / "machine" / "run" / "rfbpf"
    assert not (tmp_path / "machine").exists()
    return str(d)


def env_with(state_dir):
    return dict(os.environ, RFBPF_STATE_DIR=state_dir)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def assert_made(state_dir):
    assert mode_of(state_dir) == 0o700
    assert mode_of(os.path.dirname(state_dir)) == 0o755
    assert mode_of(os.path.dirname(os.path.dirname(state_dir))) == 0o755


def no_warning(err):
    assert "warning" not in err and "cannot" not in err, err


def test_launch_makes_the_directory_and_leaves_it_empty(fresh):
    r = run([RFBPF, "-q", "--", PYTHON, "-c", IMPORTS_TORCH],
            env=env_with(fresh))
    assert r.returncode == 0, r.stderr
    no_warning(r.stderr)
    assert_made(fresh)
    assert os.listdir(fresh) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_attach_records_there_and_cleans_up_on_a_signal(fresh, sig,
                                                        monkeypatch):
    monkeypatch.setenv("RFBPF_STATE_DIR", fresh)
    with Waiting("--observer", "--steps", "2") as w:
        p, seen = start_rfbpf(["-q", "-p", str(w.pid)])
        no_warning(seen)
        assert_made(fresh)
        # Both files rfbpf keeps while tracing are in the override.
        assert sorted(os.listdir(fresh)) == [f"{w.pid}.lock",
                                             f"{w.pid}.state"]
        rc, _, err = stop(p, sig)
        assert rc == 0, err
        no_warning(err)
        assert os.listdir(fresh) == []


def test_deactivate_makes_the_directory(fresh):
    with Waiting("--observer", "--steps", "1") as w:
        r = run([RFBPF, "--deactivate", "-p", str(w.pid)],
                env=env_with(fresh))
        assert r.returncode == 0, r.stderr
        assert "no callback left" in r.stdout
        no_warning(r.stderr)
        assert_made(fresh)


def test_the_fleet_daemon_makes_the_directory(fresh, tmp_path):
    w = Waiting("--observer", "--steps", "1")
    prom = tmp_path / "rfbpf.prom"
    d = None
    try:
        d = subprocess.Popen([RFBPF, "--continuous", "-p", str(w.pid),
                              "--interval", "1", "--prom-file", str(prom)],
                             env=env_with(fresh), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        # The first export comes after the daemon's start, which made the
        # directory: waiting for it orders the two without a sleep.
        for _ in range(600):
            if prom.exists() or d.poll() is not None:
                break
            time.sleep(0.1)
        assert prom.exists(), d.stderr.read() if d.poll() is not None else ""
        assert_made(fresh)
        d.send_signal(signal.SIGTERM)
        _, err = d.communicate(timeout=60)
        assert d.returncode == 0, err
        no_warning(err)
        assert os.listdir(fresh) == []
    finally:
        if d and d.poll() is None:
            d.kill()
        w.kill()


def start_time(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def test_stale_files_of_dead_and_reused_pids_are_dropped(fresh):
    os.makedirs(fresh)
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "100"])
    reused = subprocess.Popen(["sleep", "100"])
    try:
        line = "start_time={} handle=1 page=0x0 lib=/x\n"
        files = {
            f"{gone.pid}.state": line.format(start_time(alive.pid)),
            f"{gone.pid}.lock": "",
            f"{alive.pid}.state": line.format(start_time(alive.pid)),
            f"{alive.pid}.lock": "",
            # Written about an earlier process that had reused's pid.
            f"{reused.pid}.state": line.format(start_time(reused.pid) + 1),
        }
        for name, text in files.items():
            with open(os.path.join(fresh, name), "w") as f:
                f.write(text)
        r = run([RFBPF, "-q", "--", PYTHON, "-c", IMPORTS_TORCH],
                env=env_with(fresh))
        assert r.returncode == 0, r.stderr
        assert sorted(os.listdir(fresh)) == [f"{alive.pid}.lock",
                                             f"{alive.pid}.state"]
    finally:
        for p in (alive, reused):
            p.kill()
            p.wait()


@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")
def test_the_default_path_is_made_by_the_same_code(tmp_path):
    """/run/rfbpf itself, absent: in a mount namespace of its own whose
    /run is an empty tmpfs, so the host's /run/rfbpf is not touched."""
    script = (f"mount -t tmpfs -o mode=0755 tmpfs /run && "
              f"{RFBPF} -q -- {PYTHON} -c '{IMPORTS_TORCH}' >/dev/null && "
              f"stat -c %a /run/rfbpf && ls -A /run/rfbpf")
    env = {k: v for k, v in os.environ.items() if k != "RFBPF_STATE_DIR"}
    r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
             script], env=env)
    assert r.returncode == 0, r.stderr
    no_warning(r.stderr)
    assert r.stdout.split() == ["700"]      # made, and left empty
