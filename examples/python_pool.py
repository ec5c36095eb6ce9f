#!/usr/bin/env python3
"""A concurrent.futures pool working through a run with the native `runlog`
package (`pip install ./python`), resumable after a kill -9.

    python3 examples/python_pool.py --dir /tmp/pool --units 100 --workers 8

The DAG: unit uNNN (N >= 1) depends on u((N-1)/2). The pool runs the eligible
units; each is written `in_progress`, worked on, then `done` with its result in
the note. `run.unit` returns once the transition is fsync'd, with the GIL
released while it waits, so the pool's threads share fsyncs. A unit's
dependents are submitted once its `done` is acknowledged.

Restart: run again with the same arguments after a crash or kill -9.
`runs.start` restores the live run (same fingerprint) and `run.resume()` lists
what to run; units interrupted while in_progress run again, done ones never.
"""

import argparse
import collections
import hashlib
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import runlog


def unit_name(i):
    return "u%03d" % i


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True, help="runs root")
    p.add_argument("--run", default="pool", help="run id")
    p.add_argument("--units", type=int, default=100)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--work-ms", type=float, default=10.0, help="simulated work per unit")
    return p.parse_args()


def main():
    args = parse()
    names = [unit_name(i) for i in range(args.units)]
    deps = {unit_name(i): [unit_name((i - 1) // 2)] for i in range(1, args.units)}
    children = collections.defaultdict(list)
    for child, (parent,) in deps.items():
        children[parent].append(child)

    runs = runlog.Runs(args.dir)
    with runs.start(args.run, task="python pool example", units=names, deps=deps,
                    fingerprint={"units": str(args.units)}) as run:
        print("%s %s: %d/%d done" % ("resumed" if run.resumed else "started", run.id,
                                     run.counts().done, args.units), flush=True)

        out = threading.Lock()  # one whole line per print, whatever the threads do

        def work(name):
            run.unit(name, "in_progress")
            time.sleep(args.work_ms / 1000.0)
            result = hashlib.sha256(name.encode()).hexdigest()[:12]
            run.unit(name, "done", note=result)
            with out:  # acknowledged: durable before this line is printed
                print("done", name, flush=True)
            return name

        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            futures = {pool.submit(work, n) for n in run.resume().eligible}
            while futures:
                finished, futures = wait(futures, return_when=FIRST_COMPLETED)
                for f in finished:
                    for child in children[f.result()]:
                        futures.add(pool.submit(work, child))
        counts = run.counts()
        if counts.done != args.units:
            print("not finished: %r" % counts, file=sys.stderr)
            return 1
        run.finalize("done", result="%d units" % args.units)
        print("finished %s: %d units" % (run.id, args.units), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
