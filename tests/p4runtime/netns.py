"""Run a test inside a network namespace of its own, and leave nothing behind: every process
still in it is killed and the namespace (with its interfaces) deleted."""

import os
import subprocess


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
