#!/usr/bin/env python3
"""Compare two hotplane binaries on the same benchmarks, alternating, in one session.

    python3 scripts/bench-ab.py --old OLD/hotplane --new target/release/hotplane [--rounds 3]

Each round runs every benchmark with both binaries, in the order old, new on odd rounds and
new, old on even ones, so that drift of a shared machine falls on both. For each figure it
prints the median of each binary and the ratio new/old, with whether higher or lower is
better; the last line is one JSON object with every figure. Used for refactors that must not
cost speed (docs/benchmarks.md, "Engine as a library").
"""
import argparse
import json
import statistics
import subprocess
import sys

P4 = ["--program", "tests/p4/basic.p4", "--entries", "tests/p4/basic.json"]

# name -> (arguments, {figure: (extract(json), higher_is_better)})
BENCHES = {
    "pipeline": (
        ["pipeline", "--no-testpmd"],
        {"Mpps per core": (lambda d: d["mpps_per_core"], True)},
    ),
    "swap": (
        ["swap"],
        {
            "visible p50 us": (lambda d: d["visible_us_p50"], False),
            "replace p50 us": (lambda d: d["replace_us_p50"], False),
            "lost": (lambda d: d["lost"], False),
        },
    ),
    "ebpf": (
        ["ebpf", "--no-kernel", "--no-rbpf"],
        {
            **{
                f"{p} JIT stage ns": (lambda d, p=p: prog(d, p)["jit_ns"], False)
                for p in ("dummy", "filter", "change", "count", "lb")
            },
            "lb interp ns": (lambda d: prog(d, "lb")["interp_ns"], False),
            "update visible p50 us (median)": (
                lambda d: statistics.median(u["visible_us_p50"] for u in d["updates"]),
                False,
            ),
        },
    ),
    "lua": (
        ["lua"],
        {
            "JIT ns/packet": (lambda d: d["lua_ns"], False),
            "interpreted ns/packet": (lambda d: d["lua_interp_ns"], False),
        },
    ),
    "p4": (
        ["p4", *P4],
        {
            "native Mpps per core": (lambda d: d["mpps_per_core"], True),
            "closures Mpps": (lambda d: d["closures_mpps"], True),
        },
    ),
}


def prog(d, name):
    return next(p for p in d["execution"] if p["program"] == name)


def run(binary, args):
    out = subprocess.run(
        [binary, "bench", *args, "--json"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        sys.exit(f"{binary} bench {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="benchmarks to run (default: all)")
    a = ap.parse_args()
    names = a.only or list(BENCHES)
    figures = {(b, f): {"old": [], "new": []} for b in names for f in BENCHES[b][1]}
    for r in range(a.rounds):
        for b in names:
            args, extract = BENCHES[b]
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            for which in order:
                d = run(getattr(a, which), args)
                for f, (get, _) in extract.items():
                    figures[(b, f)][which].append(get(d))
                print(f"round {r + 1}/{a.rounds}: {b} ({which}) done", file=sys.stderr)
    rows = []
    print(f"{'bench':<9} {'figure':<32} {'old':>10} {'new':>10} {'new/old':>8}  better")
    for (b, f), v in figures.items():
        old, new = statistics.median(v["old"]), statistics.median(v["new"])
        ratio = new / old if old else None
        higher = BENCHES[b][1][f][1]
        print(
            f"{b:<9} {f:<32} {old:>10.3f} {new:>10.3f} "
            f"{(f'{ratio:.3f}' if ratio is not None else '-'):>8}  {'higher' if higher else 'lower'}"
        )
        rows.append(
            {"bench": b, "figure": f, "old": v["old"], "new": v["new"], "old_median": old,
             "new_median": new, "new_over_old": ratio, "higher_is_better": higher}
        )
    print(json.dumps({"bench": "ab", "rounds": a.rounds, "figures": rows}))


if __name__ == "__main__":
    main()
