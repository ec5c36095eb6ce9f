#!/usr/bin/env python3
"""Draws checkpoints/s against the number of one-shot writer processes, with
the process floor, from `scale --processes` JSON.

Reads JSON documents written by
`cargo run --release --example scale -- --processes 1,2,8,32 --json --out FILE`
(labelled from the command line, e.g. `after=docs/processes-after.json`) and
plots, for every size in each: checkpoints/s of that many concurrent one-shot
`runlog unit` spawners, and, dashed, the floor: the same spawners running
`runlog --version`; with `--serve` in the run, also the served passes
(the same calls while `runlog serve` takes their changes), dash-dotted. A
file whose label starts with `served` adds only its served passes (a run
with another `--serve-commit-delay`). A dev tool (needs matplotlib), not run
in CI.

    python3 scripts/plot_processes.py [--out docs/processes.png] \\
        after=docs/processes-after.json [before=docs/processes-before.json] \\
        ["served, --commit-delay 0.001=docs/processes-delay.json"]
"""

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/processes.png")
    p.add_argument("files", nargs="+", help="LABEL=FILE")
    args = p.parse_args()
    fig, ax = plt.subplots(figsize=(11, 5))
    floors = {}
    for spec in args.files:
        label, _, path = spec.rpartition("=")
        served_only = label.startswith("served")
        with open(path) as f:
            doc = json.load(f)
        for size in doc["sizes"]:
            rows = [r for r in size["processes"]["rows"] if r.get("checkpoints_per_sec")]
            if not rows:
                continue
            xs = [r["writers"] for r in rows]
            units = size["units"]
            name = "%s units" % ("{:,}".format(units))
            if not served_only:
                ax.plot(
                    xs,
                    [r["checkpoints_per_sec"] for r in rows],
                    marker="o",
                    linestyle="-" if label != "before" else ":",
                    label="%s, %s" % (label, name),
                )
            served = [r for r in rows if (r.get("served") or {}).get("checkpoints_per_sec")]
            if served:
                ax.plot(
                    [r["writers"] for r in served],
                    [r["served"]["checkpoints_per_sec"] for r in served],
                    marker="s" if not served_only else "^",
                    linestyle="-." if not served_only else (0, (3, 1, 1, 1, 1, 1)),
                    label=("%s, %s" if served_only else "%s, %s, through runlog serve") % (label, name),
                )
            if label != "before" and not served_only:
                floors.setdefault(units, (xs, [r["floor_per_sec"] for r in rows]))
    for units, (xs, ys) in sorted(floors.items()):
        ax.plot(xs, ys, linestyle="--", color="grey", alpha=0.7,
                label="process floor (runlog --version), %s units run" % "{:,}".format(units))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent one-shot writer processes")
    ax.set_ylabel("checkpoints / s")
    ax.set_title("Many writer processes on one run (2 cores, ext4)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("wrote", args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
