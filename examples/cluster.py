"""A run that outgrows one process: 2,000 units driven through a local Dask
cluster by `runlog.drive`, each unit's 2 KiB output committed exactly once to
an object store. Midway the coordinator is SIGKILLed; a new one, started with
the same call, resumes from the run alone. The summary, then a check: every
unit done, every output read back with its digest, the orphans of the killed
coordinator's last attempts removed by gc.

    pip install ./python 'dask[distributed]'
    python examples/cluster.py [--units 2000] [--dir DIR] [--outputs s3://bucket/prefix]

`--executor pool` uses a ProcessPoolExecutor instead of Dask, `--executor ray` a
local Ray instance through `runlog.RayExecutor` (`pip install ray`): the same
code path, another executor."""

import argparse
import concurrent.futures as cf
import hashlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time

import runlog


def expected(unit):
    """2 KiB of bytes derived from the unit's name."""
    return hashlib.sha256(unit.encode()).digest() * 64


def work(unit):
    """The unit's work."""
    time.sleep(0.002)
    return expected(unit)


def units(n):
    return ["img-%05d" % i for i in range(n)]


def coordinate(a):
    """One coordinator: the whole integration is this call."""
    if a.executor == "pool":
        spawn = multiprocessing.get_context("spawn")
        executor = lambda: cf.ProcessPoolExecutor(2, mp_context=spawn)  # noqa: E731
    elif a.executor == "ray":
        import ray
        ray.init(address=a.scheduler, log_to_driver=False)
        executor = runlog.RayExecutor()
    else:
        import distributed
        executor = distributed.Client(a.scheduler).get_executor()
    summary = runlog.drive(a.dir, "cluster", work, units(a.units), executor=executor,
                           outputs=a.outputs, fingerprint={"units": a.units},
                           task="resize images", retries=2, print_summary=True)
    sys.exit(0 if summary.complete else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=2000)
    ap.add_argument("--dir", help="runs root (default: a temp directory)")
    ap.add_argument("--outputs", help="s3://bucket/prefix or file:///dir (default: DIR/objects)")
    ap.add_argument("--executor", choices=["dask", "pool", "ray"], default="dask")
    ap.add_argument("--scheduler", help=argparse.SUPPRESS)
    ap.add_argument("--coordinate", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.coordinate:
        return coordinate(a)
    a.dir = a.dir or tempfile.mkdtemp(prefix="runlog-cluster-")
    a.outputs = a.outputs or "file://" + os.path.join(os.path.abspath(a.dir), "objects")
    cluster = ray = None
    if a.executor == "ray":  # a local Ray instance; each coordinator connects to it
        import ray
        ctx = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        a.scheduler = ctx.address_info["gcs_address"]
    elif a.executor == "dask":
        import distributed
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                           processes=True, dashboard_address=None)
        a.scheduler = cluster.scheduler_address
    argv = [sys.executable, os.path.abspath(__file__), "--coordinate", "--units", str(a.units),
            "--dir", a.dir, "--outputs", a.outputs, "--executor", a.executor,
            "--scheduler", a.scheduler or ""]
    try:
        first = subprocess.Popen(argv, start_new_session=True)
        while True:  # kill the first coordinator once a third of the units are done
            time.sleep(0.05)
            try:
                done = runlog.Runs(a.dir).get("cluster").counts().done
            except runlog.Error:
                continue
            if done >= a.units // 3 or first.poll() is not None:
                break
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        print("coordinator 1 SIGKILLed once %d/%d units were done; starting coordinator 2"
              % (done, a.units), flush=True)
        second = subprocess.run(argv)
        assert second.returncode == 0, "coordinator 2 failed"
    finally:
        if cluster is not None:
            cluster.close()
        if ray is not None:
            ray.shutdown()
    with runlog.Runs(a.dir).open("cluster") as run:
        for u in units(a.units):
            assert runlog.output(run, u) == expected(u), u  # length and digest checked
        orphans = runlog.gc_outputs(run, a.outputs)
    print("check: %d units done, outputs verified, %d orphans removed by gc (%s)"
          % (a.units, len(orphans), a.dir))


if __name__ == "__main__":
    main()
