#!/usr/bin/env python3
"""Write docs/cli.md, every command of the hotplane binary with its flags, from the binary's own
--help (so the page cannot drift from the code).

    python3 scripts/cli-doc.py --bin target/debug/hotplane           # writes docs/cli.md
    python3 scripts/cli-doc.py --bin target/debug/hotplane --check   # fails if it is out of date

Commands with a command line of another tool's shape (`switch`, `p4c`) print their usage.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "cli.md")

INTRO = """# The hotplane command line

Every command and its flags, as `hotplane COMMAND --help` prints them (this page is generated
from the binary by `scripts/cli-doc.py`; the test command checks it is current). Where a command
belongs is explained in the topic pages: [config.md](config.md) (`run`), [ports.md](ports.md)
(`gen`), [ebpf.md](ebpf.md), [lua.md](lua.md), [p4.md](p4.md), [p4runtime.md](p4runtime.md)
(`switch`, `p4c`), [wasp.md](wasp.md), [tables.md](tables.md) (`table`),
[control-api.md](control-api.md) (`push`), [benchmarks.md](benchmarks.md) (`bench`).
"""


def help_text(binary, path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOTPLANE_")}
    env["COLUMNS"] = "100"
    r = subprocess.run(
        [binary, *path, "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    text = (r.stdout or r.stderr).rstrip()
    # Hand-parsed commands answer --help with their usage as an error.
    text = re.sub(r"^hotplane: error: ", "", text)
    # The default socket depends on who runs it (root: /run/hotplane/hotplane.sock).
    return re.sub(r"\[default: [^\]]*\.sock\]", "[default: the user's socket, see control-api.md]", text)


def subcommands(text):
    m = re.search(r"^Commands:\n((?:  .*\n?)+)", text, re.M)
    if not m:
        return []
    names = []
    for line in m.group(1).splitlines():
        word = line.split()[0] if line.strip() else ""
        # Continuation lines of a wrapped description are indented further.
        if line.startswith("  ") and not line.startswith("   ") and word != "help":
            names.append(word)
    return names


def walk(binary, path, out):
    text = help_text(binary, path)
    out.append((path, text))
    for name in subcommands(text):
        walk(binary, path + [name], out)


def render(binary):
    pages = []
    walk(binary, [], pages)
    parts = [INTRO]
    for path, text in pages:
        title = " ".join(["hotplane", *path])
        parts.append(f"## `{title}`\n\n```\n{text}\n```\n")
    return "\n".join(parts)


def main():
    args = sys.argv[1:]
    check = "--check" in args
    if "--bin" not in args:
        sys.exit("usage: cli-doc.py --bin PATH/TO/hotplane [--check]")
    binary = args[args.index("--bin") + 1]
    doc = render(binary)
    if check:
        current = open(OUT).read() if os.path.exists(OUT) else ""
        if current != doc:
            sys.exit(
                "docs/cli.md is out of date: run python3 scripts/cli-doc.py --bin " + binary
            )
        print("docs/cli.md is up to date")
        return
    with open(OUT, "w") as f:
        f.write(doc)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
