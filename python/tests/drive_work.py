"""Work functions for the drive tests: importable by executor workers (spawned
processes and Dask workers import them by name), bound to a directory with
``functools.partial``. Each execution leaves a file ``<dir>/exec/<unit>.<pid>.<n>``,
so a test can count how often a unit ran."""

import hashlib
import os
import signal
import time


def expected(unit):
    """The bytes a unit's output must hold (64 KiB, different per unit)."""
    return hashlib.sha256(unit.encode()).digest() * 2048


def _mark(d, unit):
    e = os.path.join(d, "exec")
    os.makedirs(e, exist_ok=True)
    path = os.path.join(e, "%s.%d.%d" % (unit, os.getpid(), time.monotonic_ns()))
    with open(path, "w"):
        pass


def executions(d, unit=None):
    """How many times each unit ran (or `unit` ran)."""
    e = os.path.join(d, "exec")
    counts = {}
    for n in os.listdir(e) if os.path.isdir(e) else ():
        u = n.split(".")[0]
        counts[u] = counts.get(u, 0) + 1
    return counts if unit is None else counts.get(unit, 0)


def _first_time(d, what, unit):
    """True the first time (across processes) this is asked for (what, unit)."""
    os.makedirs(os.path.join(d, what), exist_ok=True)
    try:
        fd = os.open(os.path.join(d, what, unit), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def square(d, sleep, unit):
    """An inline result: the unit number squared."""
    _mark(d, unit)
    if sleep:
        time.sleep(sleep)
    return int(unit[1:]) ** 2


def blob(d, sleep, unit):
    """A 64 KiB output."""
    _mark(d, unit)
    if sleep:
        time.sleep(sleep)
    return expected(unit)


def picky(d, bad, flaky, unit):
    """Fails always for the units in `bad`, the first time for those in `flaky`."""
    _mark(d, unit)
    if unit in bad:
        raise ValueError("unit %s cannot be done" % unit)
    if unit in flaky and _first_time(d, "flaked", unit):
        raise RuntimeError("unit %s failed its first try" % unit)
    return unit.upper()


def killer(d, victims, unit):
    """SIGKILLs its own worker process the first time it runs a unit in `victims`."""
    _mark(d, unit)
    if unit in victims and _first_time(d, "killed", unit):
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)
    return expected(unit)


def require_dask():
    """Imports and returns `distributed`; skips the test (saying why) when it
    is missing, fails instead under RUNLOG_REQUIRE_PYTHON=1 (CI)."""
    import pytest
    try:
        import distributed
    except ImportError as e:
        if os.environ.get("RUNLOG_REQUIRE_PYTHON") == "1":
            pytest.fail("RUNLOG_REQUIRE_PYTHON=1 but dask[distributed] is not installed "
                        "(pip install -r python/requirements-test.txt): %s" % e)
        pytest.skip("dask[distributed] is not installed (pip install 'dask[distributed]'): %s" % e)
    return distributed


def require_ray():
    """Imports and returns `ray`; skips the test (saying why) when it is
    missing, fails instead under RUNLOG_REQUIRE_PYTHON=1 (CI)."""
    import pytest
    try:
        import ray
    except ImportError as e:
        if os.environ.get("RUNLOG_REQUIRE_PYTHON") == "1":
            pytest.fail("RUNLOG_REQUIRE_PYTHON=1 but ray is not installed "
                        "(pip install -r python/requirements-test.txt): %s" % e)
        pytest.skip("ray is not installed (pip install ray): %s" % e)
    return ray


def s3_outputs(test):
    """An `s3://` outputs prefix on the gateway named by AWS_ENDPOINT_URL and
    RUNLOG_S3_BUCKET (`. $CEPH_DIR/env` after `.ci/ceph.sh start`), unique to
    `test`; skips loudly without them, fails under RUNLOG_REQUIRE_S3=1."""
    import uuid
    import pytest
    bucket = os.environ.get("RUNLOG_S3_BUCKET")
    if not bucket or not os.environ.get("AWS_ENDPOINT_URL"):
        msg = ("%s: no S3 gateway: AWS_ENDPOINT_URL / RUNLOG_S3_BUCKET are unset "
               "(run .ci/ceph.sh start and source $CEPH_DIR/env)" % test)
        if os.environ.get("RUNLOG_REQUIRE_S3") == "1":
            pytest.fail("RUNLOG_REQUIRE_S3=1 but " + msg)
        pytest.skip(msg)
    return "s3://%s/drive-tests/%s-%s" % (bucket, test, uuid.uuid4().hex[:12])
