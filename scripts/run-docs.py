#!/usr/bin/env python3
"""Run the command blocks the docs mark as runnable, and fail on any error.

A block is runnable when the line before its opening fence is

    <!-- runnable -->                               the commands run as they are, or
    <!-- runnable: examples/config/p4.toml -->      against `hotplane run --config` of that file.

Every line of the block is one command (a trailing backslash continues it; blank lines and
`#` comments are skipped), run by bash from the repository's root with `hotplane` being the
binary under test. A data plane started for a block listens on a socket of its own (the
commands find it through HOTPLANE_RUNTIME_DIR, as they would the user's), and is shut down
after the block. A command that exits non-zero, or takes more than a minute, fails the run.

usage: run-docs.py --bin PATH/TO/hotplane [FILE.md ...]   (default: README.md docs/*.md)
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

MARK = re.compile(r"^<!--\s*runnable(?::\s*(\S+))?\s*-->\s*$")


def blocks(path):
    """(line number, config or None, [commands]) of each runnable block of a Markdown file."""
    lines = path.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            sys.exit(f"{path}:{i + 1}: a runnable mark must stand right before a ``` block")
        body, j = [], i + 2
        while j < len(lines) and not lines[j].startswith("```"):
            body.append(lines[j])
            j += 1
        commands, pending = [], ""
        for raw in body:
            text = pending + raw.strip()
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            pending = ""
            if text and not text.startswith("#"):
                commands.append(text)
        found.append((i + 1, m.group(1), commands))
    return found


def run(command, env, cwd):
    try:
        p = subprocess.run(["bash", "-c", command], env=env, cwd=cwd, capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "took more than 60 s"
    return p.returncode == 0, (p.stdout + p.stderr).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    binary = pathlib.Path(args.bin).resolve()
    files = [pathlib.Path(f) for f in args.files] or [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    failures, ran, nblocks = [], 0, 0
    with tempfile.TemporaryDirectory(prefix="hotplane-docs-") as tmp:
        bindir = pathlib.Path(tmp) / "bin"
        bindir.mkdir()
        (bindir / "hotplane").symlink_to(binary)
        env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}",
                   HOTPLANE_RUNTIME_DIR=str(pathlib.Path(tmp) / "run"))
        env.pop("HOTPLANE_SOCKET", None)
        sock = pathlib.Path(tmp) / "run" / "hotplane.sock"
        for path in files:
            for line, config, commands in blocks(path):
                nblocks += 1
                shown = path.resolve()
                shown = shown.relative_to(root) if shown.is_relative_to(root) else shown
                where = f"{shown}:{line}"
                plane = None
                if config:
                    plane = subprocess.Popen([str(binary), "run", "--keep-running", "--config", config],
                                             cwd=root, env=env, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True)
                    deadline = time.time() + 30
                    while not sock.exists() and plane.poll() is None and time.time() < deadline:
                        time.sleep(0.05)
                    if not sock.exists():
                        plane.kill()
                        failures.append(f"{where}: `hotplane run --config {config}` did not start: "
                                        f"{plane.communicate()[1].strip()[-400:]}")
                        continue
                for c in commands:
                    ok, out = run(c, env, root)
                    ran += 1
                    if not ok:
                        failures.append(f"{where}: `{c}` failed:\n    " + out[-600:].replace("\n", "\n    "))
                if plane:
                    run("hotplane push shutdown", env, root)
                    try:
                        plane.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        plane.kill()
                        failures.append(f"{where}: the data plane did not stop")
    for f in failures:
        print(f, file=sys.stderr)
    print(f"docs: {nblocks} runnable block(s), {ran} command(s), {len(failures)} failure(s)")
    sys.exit(1 if failures or nblocks == 0 else 0)


if __name__ == "__main__":
    main()
