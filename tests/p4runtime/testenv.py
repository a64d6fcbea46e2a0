"""What the P4Runtime client tests share: running inside a network namespace of their own
(leaving nothing behind: every process still in it is killed and the namespace, with its
interfaces, deleted), finding the p4lang tutorials' files, and saying plainly when a test could
not run (exit status 2, never counted as passed)."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def not_run(what, why):
    """Say that `what` did not run, and why; exit with status 2."""
    print(f"{what}: NOT RUN ({why})")
    sys.exit(2)


def tutorials(what):
    """The p4lang tutorials' files next to the checkout (or at $HOTPLANE_SHARED)."""
    shared = Path(os.environ.get("HOTPLANE_SHARED", REPO.parent / "shared"))
    tut = shared / "thirdparty" / "p4lang-tutorials"
    if not (tut / "exercises").is_dir():
        not_run(what, f"{tut} is absent; set HOTPLANE_SHARED")
    return tut


def run_inside(prefix, argv, env=None, timeout=900, **kw):
    """Run `argv` in a fresh namespace `PREFIX-PID` (loopback up); its CompletedProcess."""
    ns = f"{prefix}-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        return subprocess.run(["ip", "netns", "exec", ns, *argv], env=env, timeout=timeout, **kw)
    finally:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        for pid in pids.stdout.split():
            subprocess.run(["kill", "-9", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], check=False)


def free_port():
    """A TCP port of loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, seconds=30):
    """Wait until something listens on `port` of loopback; fail if `proc` exits first."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"hotplane exited early with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port} after {seconds} s")
