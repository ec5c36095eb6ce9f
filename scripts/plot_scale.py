#!/usr/bin/env python3
"""Draws what opening a run costs against its size, log-log, from scale JSON.

Reads one or more JSON documents written by
`cargo run --release --example scale -- --json --out FILE` and plots, against
units in the run: the time of a child process that opens the run for writing,
and of a one-shot `runlog unit RUN U in_progress`, one pair of curves per file
(labelled from the command line); for a file written with `--live`, the
live cycle's one-shot call instead, its median and its worst; plus the atomic
whole-document rewrite per
checkpoint (from the first file that measured it with `--atomic`, else from
`--atomic-from docs/checkpoint_cost.json`, the compare example's cost curve).
A dev tool (needs matplotlib), not run in CI.

    python3 scripts/plot_scale.py [--out docs/scale.png] [--atomic-from FILE] \\
        before=docs/scale-before.json [after=docs/scale-after.json ...] \\
        ["live before=docs/scale-live-before.json" ...]
"""

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = [
    (("open",), "secs", "open for writing (child process)", "-", "o"),
    (("oneshot",), "secs", "one-shot `runlog unit … in_progress`", "--", "s"),
]
LIVE_SERIES = [
    (("live", "oneshot"), "secs", "live cycle: one-shot `runlog unit`, median", "-.", "D"),
    (("live", "oneshot"), "secs_max", "live cycle: one-shot `runlog unit`, worst", ":", "v"),
]
COLORS = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
ATOMIC_COLOR = "#d62728"


def fmt_units(n):
    for div, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


def fmt_secs(s):
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def points(data, path, field="secs"):
    """(units, seconds) of every size where `path` (keys) was measured."""
    out = []
    for s in data.get("sizes", []):
        v = s
        for k in path:
            v = v.get(k) or {}
        v = v.get(field)
        if "error" not in s and v:
            out.append((s["units"], v))
    return out


def atomic_curve(files, fallback):
    for _, data in files:
        pts = points(data, ("atomic_rewrite",))
        if pts:
            return pts, "measured by scale --atomic"
    if fallback:
        with open(fallback) as f:
            cc = json.load(f)
        pts = [
            (p["units"], p["json_rewrite_secs"])
            for p in cc.get("points", [])
            if p.get("json_rewrite_secs")
        ]
        return pts, f"from {fallback}"
    return [], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", help="LABEL=FILE (or FILE, labelled by its name)")
    ap.add_argument("--out", default="docs/scale.png")
    ap.add_argument("--atomic-from", help="checkpoint_cost.json for the atomic rewrite curve")
    args = ap.parse_args()

    files = []
    for arg in args.inputs:
        label, _, path = arg.rpartition("=")
        with open(path) as f:
            files.append((label or path, json.load(f)))

    fig, ax = plt.subplots(figsize=(9, 5.6))
    all_units = set()
    for i, (label, data) in enumerate(files):
        color = COLORS[i % len(COLORS)]
        series = LIVE_SERIES if data.get("live_rounds") else SERIES
        for path, field, what, style, marker in series:
            pts = points(data, path, field)
            if not pts:
                continue
            xs, ys = zip(*pts)
            all_units.update(xs)
            ax.plot(xs, ys, style, marker=marker, color=color, label=f"{label}: {what}")
            for x, y in pts:
                ax.annotate(fmt_secs(y), (x, y), textcoords="offset points", xytext=(5, 5),
                            fontsize=8, color=color)
    pts, source = atomic_curve(files, args.atomic_from)
    if pts:
        xs, ys = zip(*pts)
        all_units.update(xs)
        ax.plot(xs, ys, ":", marker="^", color=ATOMIC_COLOR,
                label=f"atomic JSON rewrite per checkpoint, in a live process ({source})")
    if not all_units:
        sys.exit("no measured points in " + ", ".join(p for p in args.inputs))

    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = sorted(all_units)
    ax.set_xticks(ticks)
    ax.set_xticklabels([fmt_units(n) for n in ticks])
    ax.set_xlabel("units in the run (log scale)")
    ax.set_ylabel("wall time per call (log scale)")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda s, _: fmt_secs(s)))
    m = files[0][1].get("machine", {})
    ax.set_title(
        "What a process that opens a run pays, against run size\n"
        f"{m.get('cores', '?')} cores, Linux {m.get('kernel', '?')}, "
        f"{m.get('temp_fs', '?')} on {m.get('temp_device', '?')}; "
        f"median of {files[0][1].get('reps', '?')} calls; codec {files[0][1].get('codec', '?')}; "
        f"1-min load at start {(files[0][1].get('loadavg_at_start') or '?').split()[0]}",
        fontsize=11,
    )
    ax.grid(True, which="major", color="#ddd")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
