#!/usr/bin/env python3
"""Draw the workspace's crate graph as SVG, from the Cargo manifests (`cargo metadata`).

    python3 scripts/crate-graph.py            # writes docs/crates.svg
    python3 scripts/crate-graph.py --check    # fails if docs/crates.svg is out of date

Crates are placed in layers: a crate sits one row above the highest crate it depends on, so
every arrow points down. Only direct dependencies that are not also implied through another
crate are drawn (the transitive reduction); optional ones (cargo features) are dashed.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "crates.svg")
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 150, 34, 26, 70, 20


def workspace_graph():
    meta = json.loads(
        subprocess.check_output(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
            cwd=ROOT,
        )
    )
    names = {p["name"] for p in meta["packages"]}
    edges = set()
    for p in meta["packages"]:
        for d in p["dependencies"]:
            if d["name"] in names and d["kind"] is None:
                edges.add((p["name"], d["name"], bool(d.get("optional"))))
    return sorted(names), sorted(edges)


def reduce(names, edges):
    """Drop an edge a -> d when d is reachable from a through another dependency (through
    required ones only, for a required edge: an optional path does not imply it)."""
    deps = {n: {d for (a, d, _) in edges if a == n} for n in names}
    required = {n: {d for (a, d, o) in edges if a == n and not o} for n in names}

    def reaches(start, goal, skip, graph):
        stack, seen = [m for m in graph[start] if m != skip], set()
        while stack:
            m = stack.pop()
            if m == goal:
                return True
            if m not in seen:
                seen.add(m)
                stack.extend(graph[m])
        return False

    return [(a, d, o) for (a, d, o) in edges if not reaches(a, d, d, deps if o else required)]


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def layout(names, edges):
    """Rows by longest path. An edge that spans rows passes through a point in each row
    between (Sugiyama's dummy nodes), so ordering a row by where its neighbours above sit
    also makes room for the edges that pass it. Returns the rows, each crate's and each
    point's x, and each edge's points."""
    deps = {n: [d for (a, d, _) in edges if a == n] for n in names}
    level = {}

    def depth(n):
        if n not in level:
            level[n] = 0 if not deps[n] else 1 + max(depth(d) for d in deps[n])
        return level[n]

    for n in names:
        depth(n)
    rows = [sorted(n for n in names if level[n] == k) for k in range(max(level.values()) + 1)]
    up, down, route = {}, {}, {}
    for a, d, _ in edges:
        chain = [a] + [("via", a, d, k) for k in range(level[a] - 1, level[d], -1)] + [d]
        for k, via in enumerate(chain[1:-1]):
            rows[level[a] - 1 - k].append(via)
        for u, v in zip(chain, chain[1:]):
            down.setdefault(u, []).append(v)
            up.setdefault(v, []).append(u)
        route[(a, d)] = chain
    width = {n: (BOX_W if isinstance(n, str) else 0) for row in rows for n in row}
    x = {n: 0.0 for row in rows for n in row}

    def place(row, want):
        last = None
        for n in row:
            gap = GAP_X + width[last] / 2 + width[n] / 2 if last is not None else 0
            x[n] = want(n) if last is None else max(want(n), x[last] + gap)
            last = n

    rows[-1].sort()
    place(rows[-1], lambda n: 0)
    for _ in range(4):  # alternate the two passes until the picture settles
        for row in reversed(rows[:-1]):  # top down: under the neighbours above, in their order
            over = {n: mean(x[u] for u in up.get(n, [n])) for n in row}
            under = {n: mean(x[v] for v in down.get(n, [n])) for n in row}
            row.sort(key=lambda n: (over[n], under[n], str(n)))
            place(row, over.get)
        for row in rows[1:]:  # bottom up: over the neighbours below
            place(row, lambda n: mean(x[v] for v in down.get(n, [n])))
        place(rows[0], lambda n: mean(x[u] for u in up.get(n, [n])))
    low = min(x[n] - width[n] / 2 for n in x)
    return rows, {n: v - low for n, v in x.items()}, route


def svg(names, edges):
    edges = reduce(names, edges)
    rows, x, route = layout(names, edges)
    width = max(x.values()) + BOX_W / 2 + 2 * MARGIN
    height = len(rows) * (BOX_H + GAP_Y) - GAP_Y + 2 * MARGIN + 24
    row_y = [height - MARGIN - 24 - (i + 1) * BOX_H - i * GAP_Y for i in range(len(rows))]
    pos = {}
    for i, row in enumerate(rows):
        for n in row:
            pos[n] = (MARGIN + x[n] - (BOX_W / 2 if isinstance(n, str) else 0), row_y[i])
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'font-family="sans-serif" font-size="13">',
        '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
    ]
    for a, d, optional in edges:
        points = []
        for n in route[(a, d)]:
            px, py = pos[n]
            if isinstance(n, str):
                points.append((px + BOX_W / 2, py + (BOX_H if n == a else 0)))
            else:  # pass through the row, top to bottom
                points += [(px, py), (px, py + BOX_H)]
        path = " ".join(f"{px:.0f},{py:.0f}" for px, py in points)
        dash = ' stroke-dasharray="5,4"' if optional else ""
        out.append(
            f'<polyline points="{path}" fill="none" stroke="#555"{dash} marker-end="url(#a)"/>'
        )
    for n in names:
        x, y = pos[n]
        out.append(
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="6" '
            f'fill="#eef3fb" stroke="#345"/>'
        )
        out.append(
            f'<text x="{x + BOX_W / 2:.0f}" y="{y + BOX_H / 2 + 5:.0f}" '
            f'text-anchor="middle">{n}</text>'
        )
    out.append(
        f'<text x="{MARGIN}" y="{height - 10:.0f}" fill="#555" font-size="11">'
        "arrows point to dependencies (direct ones not implied by another); dashed: optional. "
        "Generated by scripts/crate-graph.py from the Cargo manifests.</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    names, edges = workspace_graph()
    text = svg(names, edges)
    if "--check" in sys.argv:
        current = open(OUT).read() if os.path.exists(OUT) else ""
        if current != text:
            sys.exit("docs/crates.svg is out of date: run python3 scripts/crate-graph.py")
        print("docs/crates.svg is up to date")
        return
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(names)} crates, {len(edges)} edges")


if __name__ == "__main__":
    main()
