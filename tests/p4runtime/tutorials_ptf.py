"""The p4lang tutorials' PTF tests for `basic` and `basic_tunnel`, unchanged, against hotplane.

Each exercise's own `runptf.sh` runs as it is, inside a network namespace of its own (its veths,
its loopback, its switch and its PTF run never leave it), in a copy of the tutorials' files
(they write `build/` and `logs/` next to themselves). The tools it calls are hotplane under
BMv2's names: `p4c` (hotplane p4c) and `simple_switch_grpc` (hotplane switch), found first on
PATH, with `sudo` as a pass-through (the test runs as root). The PTF tests use the tutorials'
`p4runtime_lib` and `p4.tmp.p4config_pb2` (tests/p4runtime/p4tmp, copied into the environment).

    HOTPLANE_BIN=target/debug/hotplane VENV/bin/python tests/p4runtime/tutorials_ptf.py

Exit status 0: every test passed; 1: a test failed; 2: not run (no root, or the tutorials'
files are not next to the checkout: set HOTPLANE_SHARED to the directory holding
`thirdparty/p4lang-tutorials`).
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

from testenv import not_run, run_inside, tutorials

REPO = Path(__file__).resolve().parents[2]
WHAT = "tutorials' PTF tests"
EXERCISES = ["basic", "basic_tunnel"]




def tools(work, binary):
    """A directory of BMv2's tool names that run hotplane, and a pass-through sudo."""
    bin_dir = work / "tools"
    bin_dir.mkdir()
    for name in ["p4c", "simple_switch_grpc"]:
        (bin_dir / name).symlink_to(binary)
    sudo = bin_dir / "sudo"
    sudo.write_text('#!/bin/sh\nexec "$@"\n')
    sudo.chmod(0o755)
    return bin_dir


def run_exercise(tut, work, name, env):
    """Run the exercise's runptf.sh in a namespace of its own; True when PTF passed."""
    copy = work / name
    for part in [f"exercises/{name}", "utils", "bin"]:
        if not (copy / part).exists():
            shutil.copytree(tut / part, copy / part, symlinks=True)
    exercise = copy / "exercises" / name
    # basic_fwd.py logs its requests to logs/ (basic's runptf.sh does not make it).
    (exercise / "logs").mkdir(exist_ok=True)
    r = run_inside(
        f"hp-ptf-{name}",
        ["bash", "-c", f"cd {exercise} && ./runptf.sh"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = r.stdout + r.stderr
    ran = [line for line in out.splitlines() if line.startswith("Ran ")]
    passed = r.returncode == 0 and ran and "\nOK" in out
    if os.environ.get("HOTPLANE_PTF_VERBOSE"):
        print(out)
    print(f"{name}: {'passed' if passed else 'FAILED'} ({ran[-1] if ran else 'no tests ran'})")
    if not passed:
        print(out[-6000:])
        log = exercise / "ss-log.txt"
        if log.exists():
            print(log.read_text()[-3000:])
    return passed


def main():
    if os.geteuid() != 0:
        not_run(WHAT, "needs root for its network namespace")
    tut = tutorials(WHAT)
    binary = Path(os.environ.get("HOTPLANE_BIN", REPO / "target" / "debug" / "hotplane")).resolve()
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "ptf").exists():
        not_run(WHAT, f"no ptf next to {sys.executable}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="hotplane-ptf-") as w:
        work = Path(w)
        env = dict(os.environ)
        env["PATH"] = f"{tools(work, binary)}:{venv_bin}:{env.get('PATH', '/usr/bin:/bin')}"
        for name in EXERCISES:
            ok &= run_exercise(tut, work, name, env)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
