#!/usr/bin/env python3
"""Draws the checkpoint cost vs run size chart as a hand-written SVG.

Reads the JSON that `cargo run --release -p runlog-bench --example compare -- --cost-curve --json`
prints and writes docs/checkpoint_cost.svg: seconds per durable checkpoint against
units in the run, both axes logarithmic, for runlog (append one transition; and
the same plus its share of the automatic snapshot) and the atomic rewrite of a
JSON run document. Standard library only.

    python3 scripts/plot_checkpoint_cost.py docs/checkpoint_cost.json docs/checkpoint_cost.svg
"""

import json
import math
import sys

SERIES = [
    ("json_rewrite_secs", "atomic JSON rewrite (temp, fsync, rename, fsync dir)", "#d62728"),
    ("runlog_amortized_secs", "runlog append + its share of auto snapshot", "#9467bd"),
    ("runlog_append_secs", "runlog append (fsync'd log record)", "#1f77b4"),
]

W, H = 760, 470
LEFT, RIGHT, TOP, BOTTOM = 80, 20, 50, 120


def fmt_secs(s):
    if s >= 1:
        return f"{s:g} s"
    if s >= 1e-3:
        return f"{s * 1e3:g} ms"
    return f"{s * 1e6:g} µs"


def fmt_units(n):
    return {1_000: "1k", 10_000: "10k", 100_000: "100k", 1_000_000: "1M"}.get(n, str(n))


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    points = [p for p in data["points"] if "error" not in p]
    if not points:
        sys.exit("no points in " + src)
    units = [p["units"] for p in points]
    values = [p[k] for p in points for k, _, _ in SERIES if p.get(k)]
    x_lo, x_hi = math.log10(min(units)), math.log10(max(units))
    y_lo = math.floor(math.log10(min(values)))
    y_hi = math.ceil(math.log10(max(values)))
    if x_hi == x_lo:
        x_hi += 1
    if y_hi == y_lo:
        y_hi += 1
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(n):
        return LEFT + (math.log10(n) - x_lo) / (x_hi - x_lo) * pw

    def py(s):
        return TOP + (y_hi - math.log10(s)) / (y_hi - y_lo) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">'
        "Cost of one durable checkpoint vs run size</text>",
    ]
    m = data.get("machine", {})
    out.append(
        f'<text x="{W / 2}" y="39" text-anchor="middle" fill="#555">'
        + esc(
            f"{m.get('cores', '?')} cores, Linux {m.get('kernel', '?')}, "
            f"{m.get('temp_fs', '?')} on {m.get('temp_device', '?')}; "
            f"median of {data.get('reps', '?')} rounds"
        )
        + "</text>"
    )
    # Grid and axes.
    for e in range(y_lo, y_hi + 1):
        y = py(10**e)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(fmt_secs(10**e))}</text>'
        )
    for n in units:
        x = px(n)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + ph + 16}" text-anchor="middle">{fmt_units(n)}</text>')
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>'
    )
    out.append(
        f'<text x="{LEFT + pw / 2}" y="{TOP + ph + 34}" text-anchor="middle">'
        "units in the run (log scale)</text>"
    )
    out.append(
        f'<text x="18" y="{TOP + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {TOP + ph / 2})">time per checkpoint (log scale)</text>'
    )
    # Series.
    for i, (key, label, color) in enumerate(SERIES):
        pts = [(px(p["units"]), py(p[key])) for p in points if p.get(key)]
        if not pts:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for (x, y), p in zip(pts, [p for p in points if p.get(key)]):
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"/>')
            if key != "runlog_amortized_secs":
                out.append(
                    f'<text x="{x + 6:.1f}" y="{y - 6:.1f}" fill="{color}" font-size="10">'
                    f"{esc(fmt_secs(float(f'{p[key]:.2g}')))}</text>"
                )
        ly = TOP + ph + 54 + i * 18
        out.append(
            f'<line x1="{LEFT}" y1="{ly - 4}" x2="{LEFT + 24}" y2="{ly - 4}" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        out.append(f'<text x="{LEFT + 30}" y="{ly}">{esc(label)}</text>')
    out.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
