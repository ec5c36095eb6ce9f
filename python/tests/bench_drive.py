"""Units/s through `runlog.drive` beside a bare executor loop doing the same
tiny tasks (submit all, wait for all; nothing recorded), per executor and
worker count. Not collected by pytest; run it:

    python python/tests/bench_drive.py --units 2000 --workers 1 2 4 --rounds 3

Each round builds a fresh executor, warms it (one task per worker), then
times the bare loop and drive on it, alternating which goes first."""

import argparse
import concurrent.futures as cf
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runlog  # noqa: E402


def tiny(unit):
    return len(unit)


def bare(ex, units):
    t = time.perf_counter()
    fs = [ex.submit(tiny, u) for u in units]
    for f in fs:
        f.result()
    return len(units) / (time.perf_counter() - t)


def driven(ex, units, root, run_id, limit):
    t = time.perf_counter()
    s = runlog.drive(root, run_id, tiny, units, executor=ex, max_in_flight=limit,
                     print_summary=False)
    dt = time.perf_counter() - t
    assert s.complete and s.done_now == len(units), s
    return len(units) / dt


def executors(kind, workers):
    if kind == "pool":
        ex = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        return ex, ex.shutdown
    import distributed
    if kind == "dask-own-process":
        # The scheduler in its own process, as on a real cluster (a
        # LocalCluster's scheduler shares the client's process and GIL).
        import subprocess
        code = ("import distributed, sys, time\n"
                "c = distributed.LocalCluster(n_workers=%d, threads_per_worker=1, "
                "processes=True, dashboard_address=None)\n"
                "print(c.scheduler_address, flush=True)\n"
                "sys.stdin.read()\n" % workers)
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        client = distributed.Client(p.stdout.readline().strip())

        def close_ext():
            client.close()
            p.stdin.close()
            p.wait(60)
        return client.get_executor(), close_ext
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                       processes=True, dashboard_address=None)
    client = distributed.Client(cluster)

    def close():
        client.close()
        cluster.close()
    return client.get_executor(), close


def resume(n, remote):
    """Seconds from calling drive to its first submit, with `n` units done and
    10 left; with `remote`, the run is shipped there from one runs root and
    driven from another (restore included)."""
    units = ["u%07d" % i for i in range(n + 10)]
    with tempfile.TemporaryDirectory() as tmp:
        if remote:
            os.environ["RUNLOG_REMOTE_ROOT"] = remote.rstrip("/") + "/" + os.path.basename(tmp)
        t = time.perf_counter()
        with runlog.Runs(os.path.join(tmp, "a")).start("r", units=units) as run:
            for i in range(0, n, 20000):
                run.units([(u, "done") for u in units[i:min(i + 20000, n)]])
        made = time.perf_counter() - t
        first = []

        def fn(unit):
            first.append(time.perf_counter())
            return 1
        t = time.perf_counter()
        with cf.ThreadPoolExecutor(2) as ex:
            s = runlog.drive(os.path.join(tmp, "b" if remote else "a"), "r", fn, units,
                             executor=ex, print_summary=False)
        total = time.perf_counter() - t
        assert s.complete and s.done_before == n, s
        os.environ.pop("RUNLOG_REMOTE_ROOT", None)
        print("| %d | %s | %.1f | %.2f | %.2f |" % (n, remote or "local", made, min(first) - t,
                                                   total), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--resume", type=int, nargs="*",
                    help="measure time to first submit with this many units done instead")
    ap.add_argument("--remote", help="ship every run to this remote root (with --resume: drive from another root)")
    ap.add_argument("--units", type=int, nargs="+", default=[2000])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--executors", nargs="+", default=["pool", "dask"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-in-flight", type=int, default=256)
    a = ap.parse_args()
    if a.resume:
        print("| units done | remote | seconds to make | seconds to first submit | seconds to finish |")
        print("|---:|---|---:|---:|---:|")
        for n in a.resume:
            resume(n, a.remote)
        return
    if a.remote:  # every run driven ships to the remote (policy from RUNLOG_REMOTE_POLICY)
        os.environ["RUNLOG_REMOTE_ROOT"] = a.remote.rstrip("/") + "/%d" % os.getpid()
    print("| executor | workers | units | bare units/s | drive units/s | drive/bare |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in a.executors:
        for w in a.workers:
            for n in a.units:
                units = ["u%07d" % i for i in range(n)]
                b, d, ratios = [], [], []
                for r in range(a.rounds):
                    ex, close = executors(kind, w)
                    try:
                        list(ex.map(tiny, ["w"] * w))  # warm every worker
                        with tempfile.TemporaryDirectory() as root:
                            rid = "b%d" % r
                            if r % 2:
                                dv = driven(ex, units, root, rid, a.max_in_flight)
                                bv = bare(ex, units)
                            else:
                                bv = bare(ex, units)
                                dv = driven(ex, units, root, rid, a.max_in_flight)
                    finally:
                        close()
                    b.append(bv)
                    d.append(dv)
                    ratios.append(dv / bv)
                print("| %s | %d | %d | %.0f | %.0f | %.2f× (%.2f–%.2f) |"
                      % (kind, w, n, statistics.median(b), statistics.median(d),
                         statistics.median(ratios), min(ratios), max(ratios)), flush=True)


if __name__ == "__main__":
    main()
