"""Durable commits per second: the native package against sqlite3 and the
`runlog apply` pipe, all on one disk, in one run.

    python -m runlog.bench [--commits 2000] [--dir DIR] [--runlog PATH]

Every commit is durable (fsync'd) before it is acknowledged:
- run.unit, 1 thread: one transition per call;
- run.unit, 8 threads: Python threads sharing one run (the GIL is released
  while each call waits, so their fsyncs are shared);
- run.units, batches of 100: one fsync per batch (transitions/s);
- sqlite3: the standard library, WAL, synchronous=FULL, one INSERT per commit;
- runlog apply: the CLI's pipe driven from Python, one line then its ack.

Prints a Markdown table and the ratios the package is held to.
"""

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import runlog

THREADS = 8
BATCH = 100


def names(n, prefix="u"):
    return ["%s%06d" % (prefix, i) for i in range(n)]


def transitions(unit_names):
    """Two commits per unit: in_progress, then done."""
    for n in unit_names:
        yield n, "in_progress"
        yield n, "done"


def native_1(root, commits):
    units = names(commits // 2)
    with runlog.Runs(root).start("one", units=units) as run:
        t = time.perf_counter()
        for n, s in transitions(units):
            run.unit(n, s)
        return commits / (time.perf_counter() - t)


def native_threads(root, commits, linger=None, rid="eight"):
    per = commits // 2 // THREADS
    parts = [names(per, "t%d-" % i) for i in range(THREADS)]
    with runlog.Runs(root, linger=linger).start(rid, units=sum(parts, [])) as run:
        barrier = threading.Barrier(THREADS + 1)

        def work(mine):
            barrier.wait()
            for n, s in transitions(mine):
                run.unit(n, s)

        threads = [threading.Thread(target=work, args=(p,)) for p in parts]
        for th in threads:
            th.start()
        barrier.wait()
        t = time.perf_counter()
        for th in threads:
            th.join()
        return per * THREADS * 2 / (time.perf_counter() - t)


def native_batches(root, commits):
    units = names(commits * 5)  # 10x the commits: a batch is cheap
    with runlog.Runs(root).start("batch", units=units) as run:
        todo = list(transitions(units))
        t = time.perf_counter()
        for i in range(0, len(todo), BATCH):
            run.units(todo[i:i + BATCH])
        return len(todo) / (time.perf_counter() - t)


def sqlite(root, commits):
    db = sqlite3.connect(os.path.join(root, "bench.sqlite"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (unit TEXT, status TEXT, at REAL)")
    t = time.perf_counter()
    for n, s in transitions(names(commits // 2)):
        db.execute("INSERT INTO t VALUES (?, ?, ?)", (n, s, time.time()))
    rate = commits / (time.perf_counter() - t)
    db.close()
    return rate


def apply_pipe(root, commits, binary):
    units = names(commits // 2)
    runlog.Runs(root).start("pipe", units=units).close()
    p = subprocess.Popen([binary, "--dir", root, "apply", "pipe"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    t = time.perf_counter()
    for n, s in transitions(units):
        p.stdin.write(json.dumps({"op": "unit", "unit": n, "status": s}) + "\n")
        p.stdin.flush()
        ack = json.loads(p.stdout.readline())
        if "seq" not in ack:
            raise RuntimeError("runlog apply refused %s %s: %s" % (n, s, ack))
    rate = commits / (time.perf_counter() - t)
    p.stdin.close()
    p.wait()
    return rate


def find_runlog(given):
    if given:
        return given
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.environ.get("RUNLOG_BIN"), shutil.which("runlog"),
                 os.path.join(here, "..", "..", "target", "release", "runlog")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description="durable commits/s: runlog vs sqlite3 vs apply")
    ap.add_argument("--commits", type=int, default=2000, help="commits per measurement")
    ap.add_argument("--dir", help="where to write (default: a temporary directory)")
    ap.add_argument("--runlog", help="the runlog CLI, for the apply row ($RUNLOG_BIN, PATH)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds, each measuring every row in turn; the median is shown")
    args = ap.parse_args(argv)
    base = args.dir or tempfile.mkdtemp(prefix="runlog-bench-")
    os.makedirs(base, exist_ok=True)
    binary = find_runlog(args.runlog)
    n = args.commits
    rows = [
        ("run.unit, 1 thread", lambda d: native_1(d, n)),
        ("run.unit, 8 threads", lambda d: native_threads(d, n * 2)),
        ("run.unit, 8 threads, linger=0.0005", lambda d: native_threads(d, n * 2, 0.0005, "linger")),
        ("run.units, batches of 100 (transitions/s)", lambda d: native_batches(d, n)),
        ("sqlite3 WAL synchronous=FULL, 1 INSERT/commit", lambda d: sqlite(d, n)),
    ]
    if binary:
        rows.append(("runlog apply pipe from Python, 1 thread", lambda d: apply_pipe(d, n, binary)))
    samples = {label: [] for label, _ in rows}
    for r in range(args.rounds):
        # Rows interleaved round by round, so a slow spell of the disk hits all.
        for i, (label, fn) in enumerate(rows):
            d = os.path.join(base, "r%d-m%d" % (r, i))
            os.makedirs(d, exist_ok=True)
            samples[label].append(fn(d))
    results = {label: statistics.median(v) for label, v in samples.items()}
    print("| what | durable commits/s (median of %d) | min | max |" % args.rounds)
    print("|---|---:|---:|---:|")
    for label, _ in rows:
        v = samples[label]
        print("| %s | %.0f | %.0f | %.0f |" % (label, results[label], min(v), max(v)))
    if not binary:
        print("(apply row skipped: no runlog binary; pass --runlog)", file=sys.stderr)
    print()
    # Ratios taken round by round (rows measured seconds apart), then the
    # median: steadier than a ratio of medians when the disk's speed drifts.
    one = "run.unit, 1 thread"
    checks = [
        ("1 thread / sqlite3", one, "sqlite3 WAL synchronous=FULL, 1 INSERT/commit", 1.2),
        ("8 threads / 1 thread", "run.unit, 8 threads", one, 3.0),
    ]
    if binary:
        checks.append(("1 thread / apply pipe", one, "runlog apply pipe from Python, 1 thread", 2.0))
    for label, num, den, target in checks:
        ratios = [a / b for a, b in zip(samples[num], samples[den])]
        print("%s: %.2fx per round median (%.2f-%.2f); target >= %.1fx" % (
            label, statistics.median(ratios), min(ratios), max(ratios), target))
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
