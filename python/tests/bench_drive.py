"""Units/s and the coordinator's CPU per unit through `runlog.drive`, beside a
bare executor loop doing the same tiny tasks (submit all, wait for all;
nothing recorded), per executor, worker count and units per task. Not
collected by pytest; run it:

    python python/tests/bench_drive.py --units 2000 --workers 1 2 4 --rounds 3
    python python/tests/bench_drive.py --executors pool --workers 2 --units 20000 \
        --units-per-task 1 64

Each round builds a fresh executor, warms it (one task per worker), then
times the bare loop and drive on it, alternating which goes first. CPU is
the coordinator process's own (user + system, its executor threads
included; the workers are other processes), divided by the units. With
`--units-per-task k` the bare loop sends k units a task too. `--pin` gives
the coordinator CPU 0 and the pool's workers the others (Linux): the
coordinator with a core of its own, on a machine of two.

    python python/tests/bench_drive.py --big 10000000 --big-root /tmp/big \
        --units-per-task 256 --stop-after 500000

makes (once) a run of that many pending units under `--big-root` (its own
process, which needs no list of them), then drives a copy of it with
`units=None` through a process pool: the seconds to its first submit, its
units/s after that, the coordinator's CPU per unit and its peak RSS (this
process's: the workers are others), stopping after `--stop-after` units (0:
all). With `--big-restore` the run is made shipped to a file:// remote
under `--big-root`, and each measurement drives it from an empty runs root
with a copy of that remote: a new host restoring the run first."""

import argparse
import concurrent.futures as cf
import multiprocessing
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runlog  # noqa: E402


def tiny(unit):
    return len(unit)


def tiny_many(units):
    return [len(u) for u in units]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bare(ex, units, k):
    """(units/s, coordinator CPU µs a unit) of the bare loop, k units a task."""
    t, c = time.perf_counter(), cpu()
    if k == 1:
        fs = [ex.submit(tiny, u) for u in units]
    else:
        fs = [ex.submit(tiny_many, units[i:i + k]) for i in range(0, len(units), k)]
    for f in fs:
        f.result()
    return len(units) / (time.perf_counter() - t), (cpu() - c) / len(units) * 1e6


def driven(ex, units, root, run_id, limit, k):
    t, c = time.perf_counter(), cpu()
    s = runlog.drive(root, run_id, tiny, units, executor=ex, max_in_flight=limit,
                     units_per_task=k, print_summary=False)
    dt, dc = time.perf_counter() - t, cpu() - c
    assert s.complete and s.done_now == len(units), s
    return len(units) / dt, dc / len(units) * 1e6


def pin_worker():
    """A pool worker's initializer under --pin: every CPU but the coordinator's."""
    os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))


def executors(kind, workers, pin=False):
    if kind == "pool":
        ex = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                    initializer=pin_worker if pin else None)
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


class _Stop(BaseException):
    """Ends a --big drive once --stop-after units were submitted."""


class Watched(cf.Executor):
    """Hands each submit to ``ex``; notes when the first came, and raises
    ``_Stop`` once ``stop_after`` units went (tasks × ``k``; 0: never)."""

    def __init__(self, ex, k, stop_after):
        self.ex, self.k, self.stop_after = ex, k, stop_after
        self.first, self.units = None, 0

    def submit(self, fn, /, *args, **kwargs):
        if self.first is None:
            self.first = time.perf_counter()
        if self.stop_after and self.units >= self.stop_after:
            raise _Stop()
        self.units += self.k
        return self.ex.submit(fn, *args, **kwargs)

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.ex.shutdown(wait=wait, cancel_futures=cancel_futures)


def make_big(root, n, remote=None):
    """A run ``big`` of ``n`` pending units under ``root``, in its own process
    (added 50,000 a write: no list of them all), then compacted; with
    ``remote``, shipped there as it is made."""
    code = ("import runlog, sys\n"
            "n = int(sys.argv[2])\n"
            "with runlog.Runs(sys.argv[1]).start('big', fingerprint={'n': n}) as run:\n"
            "    for i in range(0, n, 50000):\n"
            "        run.units([('u%010d' % j, 'pending') for j in range(i, min(i + 50000, n))])\n"
            "    run.compact()\n")
    env = dict(os.environ)
    env.pop("RUNLOG_REMOTE_ROOT", None)
    if remote:
        env["RUNLOG_REMOTE_ROOT"] = remote
    subprocess.run([sys.executable, "-c", code, root, str(n)], check=True, env=env)


def big(a):
    """Drives the --big run with units=None; prints one table row."""
    tag = "restored" if a.big_restore else "local"
    src = os.path.join(a.big_root, "made-" + tag)
    made_remote = os.path.join(a.big_root, "remote-made")
    if not os.path.isdir(os.path.join(src, "runs", "big")):
        t = time.perf_counter()
        make_big(src, a.big, pathlib.Path(made_remote).as_uri() if a.big_restore else None)
        print("made a run of %d pending units in %.0f s" % (a.big, time.perf_counter() - t))
    # Every measurement drives the run as made: a copy of it, or (a new
    # host) an empty runs root and a copy of the remote it restores from.
    work = os.path.join(a.big_root, "work")
    shutil.rmtree(work, ignore_errors=True)
    if a.big_restore:
        remote = os.path.join(a.big_root, "remote-work")
        shutil.rmtree(remote, ignore_errors=True)
        shutil.copytree(made_remote, remote)
        os.environ["RUNLOG_REMOTE_ROOT"] = pathlib.Path(remote).as_uri()
    else:
        shutil.copytree(src, work)
    k = a.units_per_task[0]
    w = a.workers[0]
    pool = cf.ProcessPoolExecutor(w, mp_context=multiprocessing.get_context("spawn"))
    list(pool.map(tiny, ["w"] * w))
    ex = Watched(pool, k, a.stop_after)
    t, c = time.perf_counter(), cpu()
    try:
        runlog.drive(work, "big", tiny, None, executor=ex, units_per_task=k,
                     max_in_flight=a.max_in_flight, print_summary=False)
    except _Stop:
        pass
    dt, dc = time.perf_counter() - t, cpu() - c
    pool.shutdown(cancel_futures=True)
    units = runlog.Runs(work).get("big").counts().done
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("| %d | %s | %d | %d | %.2f | %.0f | %.1f | %.0f |"
          % (a.big, tag, w, k, ex.first - t,
             units / (dt - (ex.first - t)), dc / max(units, 1) * 1e6, rss), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--resume", type=int, nargs="*",
                    help="measure time to first submit with this many units done instead")
    ap.add_argument("--remote", help="ship every run to this remote root (with --resume: drive from another root)")
    ap.add_argument("--units", type=int, nargs="+", default=[2000])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--executors", nargs="+", default=["pool", "dask"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-in-flight", type=int, default=None)
    ap.add_argument("--units-per-task", type=int, nargs="+", default=[1])
    ap.add_argument("--pin", action="store_true",
                    help="the coordinator on CPU 0, pool workers on the others: a core of its own")
    ap.add_argument("--big", type=int, help="drive a run of this many pending units (units=None)")
    ap.add_argument("--big-root", help="where --big makes its run (once) and copies it to drive")
    ap.add_argument("--big-restore", action="store_true",
                    help="with --big: make the run shipped to a file:// remote, and drive it "
                    "from an empty runs root (a new host restoring it)")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="with --big: stop once this many units were submitted (0: drive them all)")
    a = ap.parse_args()
    if a.pin:
        os.sched_setaffinity(0, {0})
    if a.big:
        print("| units | run | workers | units a task | seconds to first submit | units/s "
              "| coordinator CPU µs a unit | coordinator peak RSS MiB |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        big(a)
        return
    if a.resume:
        print("| units done | remote | seconds to make | seconds to first submit | seconds to finish |")
        print("|---:|---|---:|---:|---:|")
        for n in a.resume:
            resume(n, a.remote)
        return
    if a.remote:  # every run driven ships to the remote (policy from RUNLOG_REMOTE_POLICY)
        os.environ["RUNLOG_REMOTE_ROOT"] = a.remote.rstrip("/") + "/%d" % os.getpid()
    print("| executor | workers | units | units a task | bare units/s | drive units/s | drive/bare "
          "| bare CPU µs a unit | drive CPU µs a unit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in a.executors:
        for w in a.workers:
            for n in a.units:
                for k in a.units_per_task:
                    row(a, kind, w, n, k)


def row(a, kind, w, n, k):
    units = ["u%07d" % i for i in range(n)]
    b, d, ratios, bc, dc = [], [], [], [], []
    for r in range(a.rounds):
        ex, close = executors(kind, w, a.pin)
        try:
            list(ex.map(tiny, ["w"] * w))  # warm every worker
            with tempfile.TemporaryDirectory() as root:
                rid = "b%d" % r
                if r % 2:
                    dv = driven(ex, units, root, rid, a.max_in_flight, k)
                    bv = bare(ex, units, k)
                else:
                    bv = bare(ex, units, k)
                    dv = driven(ex, units, root, rid, a.max_in_flight, k)
        finally:
            close()
        b.append(bv[0])
        d.append(dv[0])
        bc.append(bv[1])
        dc.append(dv[1])
        ratios.append(dv[0] / bv[0])
    print("| %s | %d | %d | %d | %.0f | %.0f | %.2f× (%.2f–%.2f) | %.0f | %.0f |"
          % (kind, w, n, k, statistics.median(b), statistics.median(d),
             statistics.median(ratios), min(ratios), max(ratios), statistics.median(bc),
             statistics.median(dc)), flush=True)


if __name__ == "__main__":
    main()
