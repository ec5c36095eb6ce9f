#!/usr/bin/env python3
"""Checkpoints/s of P Python processes x T threads writing one run, two ways
(FORMAT.md §5.8), with the native package (`pip install ./python`):

- one-shot: every thread calls `runs.unit(run, name, status)`, a one-shot
  writer of its own: the writer lock only for the catch-up and the write, the
  fdatasync shared with every other thread and process;
- held: each process opens the run (`runs.open`) and its threads share that
  `Run` (group commit inside the process); the processes take turns at the
  writer lock, a batch of units per turn;
- served (with `--serve BIN`, the `runlog` CLI): the one-shot calls again,
  while `BIN serve` holds the run: each call hands its change to the server
  (FORMAT.md §5.9), which applies every connection's changes in shared
  batches.

    python3 examples/python_writers.py --procs 4 --threads 8 --units 40 --rounds 3

Prints the median of `--rounds` runs of each, alternating, and their ratio.
"""

import argparse
import multiprocessing
import statistics
import subprocess
import tempfile
import threading
import time

import runlog


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--units", type=int, default=40, help="units per thread")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--serve", metavar="BIN", help="the runlog CLI, for the served row")
    return p.parse_args()


def names(p, t, units):
    return ["p%d-t%d-%04d" % (p, t, i) for i in range(units)]


def one_shot(root, run, p, threads, units, start):
    runs = runlog.Runs(root, lock_wait=120)
    start.wait()

    def work(t):
        for n in names(p, t, units):
            runs.unit(run, n, "in_progress")
            runs.unit(run, n, "done")

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()


def held(root, run, p, threads, units, start):
    runs = runlog.Runs(root, lock_wait=120)
    start.wait()
    per_turn = 5
    for at in range(0, units, per_turn):
        with runs.open(run) as r:

            def work(t):
                for n in names(p, t, units)[at : at + per_turn]:
                    r.unit(n, "in_progress")
                    r.unit(n, "done")

            ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
            for th in ts:
                th.start()
            for th in ts:
                th.join()


def serve(binary, root):
    """`BIN serve w`, once it said it listens."""
    server = subprocess.Popen([binary, "--dir", root, "serve", "w"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if "serving run w at" not in line:
        server.kill()
        raise SystemExit("serve said %r: %s" % (line, server.stderr.read()))
    return server


def measure(kind, args):
    with tempfile.TemporaryDirectory() as root:
        runlog.Runs(root).start("w").close()
        server = serve(args.serve, root) if kind == "served" else None
        ctx = multiprocessing.get_context("spawn")
        start = ctx.Event()
        target = held if kind == "held" else one_shot
        procs = [
            ctx.Process(target=target, args=(root, "w", p, args.threads, args.units, start))
            for p in range(args.procs)
        ]
        for pr in procs:
            pr.start()
        time.sleep(1.0)  # every interpreter started and imported runlog
        t0 = time.perf_counter()
        start.set()
        for pr in procs:
            pr.join()
            if pr.exitcode != 0:
                raise SystemExit("%s: a writer process failed (%s)" % (kind, pr.exitcode))
        secs = time.perf_counter() - t0
        if server:
            server.terminate()
            _, err = server.communicate(timeout=60)
            if server.returncode != 0:
                raise SystemExit("serve failed (%s): %s" % (server.returncode, err))
        c = runlog.Runs(root).get("w").counts()
        want = args.procs * args.threads * args.units
        if c.done != want:
            raise SystemExit("%s: %d units done, %d written" % (kind, c.done, want))
        return 2 * want / secs


def main():
    args = parse()
    rates = {"one-shot": [], "held": []}
    if args.serve:
        rates["served"] = []
    for _ in range(args.rounds):
        for kind in rates:
            rates[kind].append(measure(kind, args))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(
        "%d processes x %d threads, %d units each (2 checkpoints a unit), median of %d:"
        % (args.procs, args.threads, args.units, args.rounds)
    )
    for k, v in rates.items():
        print("  %-9s %8.0f checkpoints/s  (runs: %s)" % (k, med[k], ", ".join("%.0f" % x for x in v)))
    print("  one-shot / held: %.2f" % (med["one-shot"] / med["held"]))
    if args.serve:
        print("  served / one-shot: %.2f" % (med["served"] / med["one-shot"]))


if __name__ == "__main__":
    main()
