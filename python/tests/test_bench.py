"""runlog.bench runs end to end at a small size and prints every row and ratio
(the apply row too when $RUNLOG_BIN names the CLI)."""

import os

from runlog import bench


def test_bench_small(tmp_path, capsys):
    assert bench.main(["--commits", "40", "--rounds", "1", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for row in ("run.unit, 1 thread", "run.unit, 8 threads", "batches of 100", "sqlite3"):
        assert row in out, row
    assert "8 threads / 1 thread" in out and "1 thread / sqlite3" in out
    if os.environ.get("RUNLOG_BIN"):
        assert "apply pipe" in out
