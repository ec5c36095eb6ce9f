"""Every exception, with its attributes, and refusals that write nothing."""

import os
import pathlib
import re
import struct
import zlib

import pytest

import runlog
from conftest import files, segments


def test_hierarchy():
    for cls in (runlog.Refused, runlog.Corrupt, runlog.Locked, runlog.Tampered, runlog.BatchError):
        assert issubclass(cls, runlog.Error)
    assert issubclass(runlog.NotFound, runlog.Refused)
    assert issubclass(runlog.Error, Exception)
    assert not issubclass(runlog.Tampered, runlog.Corrupt)


def test_refused_by_the_rules_writes_nothing(runs):
    run = runs.start("r", units=["a", "b"], deps={"b": ["a"]})
    run.unit("a", "done")
    before = files(run.dir)
    with pytest.raises(runlog.Refused, match="never demoted"):
        run.unit("a", "in_progress")
    with pytest.raises(runlog.Refused):
        run.spend("nobudget", 1.0)
    with pytest.raises(runlog.Refused):
        run.resolve("item-99")
    with pytest.raises(runlog.Refused):
        run.spend("x", float("nan"))
    assert files(run.dir) == before
    run.finalize("aborted")
    after_final = files(run.dir)
    with pytest.raises(runlog.Refused):
        run.unit("b", "done")
    with pytest.raises(runlog.Refused):
        run.finalize("done")
    assert files(run.dir) == after_final
    run.close()


def test_refused_batch_entries_write_nothing(runs):
    with runs.start("r", units=["a"]) as run:
        run.unit("a", "done")
        before = files(run.dir)
        with pytest.raises(runlog.BatchError) as e:
            run.units([("a", "pending"), ("a", "in_progress")])
        assert all(isinstance(r, runlog.Refused) for r in e.value.results)
        assert files(run.dir) == before


def test_invalid_ids_and_missing_runs_are_refused(runs, root):
    for bad in ["../x", "a/b", "", "a b", "x" * 200]:
        with pytest.raises(runlog.Refused):
            runs.start(bad)
    with pytest.raises(runlog.NotFound):
        runs.open("nope")
    with pytest.raises(runlog.NotFound):
        runs.get("nope")
    with pytest.raises(runlog.NotFound):
        runs.resolve("nope")
    assert not (root / "runs" / "nope").exists()
    runs.start("ab1").close()
    runs.start("ab2").close()
    with pytest.raises(runlog.Refused, match="several"):
        runs.resolve("ab")


def test_init_over_a_live_run_is_refused(runs):
    run = runs.init("r", units=["a"])
    run.close()
    before = files(pathlib.Path(runs.root) / "runs" / "r")
    with pytest.raises(runlog.Refused, match="already"):
        runs.init("r", units=["a"])
    assert files(pathlib.Path(runs.root) / "runs" / "r") == before


def test_locked(runs):
    run = runs.start("r", units=["a"])
    with pytest.raises(runlog.Locked) as e:
        runs.open("r")
    assert e.value.path in (run.dir, os.path.join(run.dir, "LOCK"))
    assert e.value.holder == "pid %d" % os.getpid()
    run.close()
    runs.open("r").close()


def test_corrupt_carries_file_offset_seq(runs):
    with runs.start("r", units=["u%02d" % i for i in range(20)]) as run:
        for i in range(20):
            run.unit("u%02d" % i, "done")
        d = run.dir
    seg = segments(d)[0]
    b = bytearray(seg.read_bytes())
    b[len(b) // 3] ^= 0x40  # mid-log, valid records after it: not a torn tail
    seg.write_bytes(bytes(b))
    before = files(d)
    for call in (lambda: runs.get("r"), lambda: runs.open("r"), lambda: runs.start("r")):
        with pytest.raises(runlog.Corrupt) as e:
            call()
        assert e.value.file == str(seg)
        assert 0 < e.value.offset < len(b)
        assert isinstance(e.value.seq, int) and e.value.seq > 1
        assert "nothing was modified" in str(e.value)
    assert files(d) == before


def test_another_key_is_refused_as_the_wrong_key(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNLOG_DIR", raising=False)
    keys = []
    for n, hexkey in (("a", "11" * 32), ("b", "22" * 32)):
        p = tmp_path / ("key" + n)
        p.write_text(hexkey)
        os.chmod(p, 0o600)
        keys.append(p)
    root = tmp_path / "root"
    with runlog.Runs(root, key_file=keys[0], lock_wait=0).start("r", units=["a"]) as run:
        run.unit("a", "done")
        d = run.dir
    before = files(d)
    wrong = runlog.Runs(root, key_file=keys[1], lock_wait=0)
    # The store's key check (FORMAT.md 10.6) refuses another key at once;
    # tampering stays Tampered.
    with pytest.raises(runlog.Refused, match="wrong key"):
        wrong.open("r")
    with pytest.raises(runlog.Refused, match="tagged"):
        runlog.Runs(root, lock_wait=0).get("r")
    # The key from the environment, as the CLI reads it.
    monkeypatch.setenv("RUNLOG_KEY_FILE", str(keys[0]))
    assert runlog.Runs(root).get("r").unit_status("a").status == "done"
    assert files(d) == before


def test_bad_key_file_is_refused(tmp_path):
    with pytest.raises(runlog.Refused, match="key file"):
        runlog.Runs(tmp_path, key_file=tmp_path / "missing")


def test_value_errors_for_bad_statuses(runs):
    with runs.start("r", units=["a"]) as run:
        before = files(run.dir)
        for call in (lambda: run.unit("a", "finished"), lambda: run.phase("p", "nope"),
                     lambda: run.finalize("later"), lambda: run.unit("a", 3),
                     lambda: run.iter_units(status="x")):
            with pytest.raises(ValueError):
                call()
        assert files(run.dir) == before



# FORMAT.md §1: the checksum is CRC-32 (IEEE, as zlib's), masked.
CRC_MASK_DELTA = 0xA282EAD8


def masked_crc(data):
    crc = zlib.crc32(data) & 0xFFFFFFFF
    rotated = ((crc >> 15) | (crc << 17)) & 0xFFFFFFFF
    return (rotated + CRC_MASK_DELTA) & 0xFFFFFFFF


# A tagged JSONL record line (FORMAT.md §10.4), its fixed fields exactly as written.
RECORD = re.compile(rb'^\{"seq":(\d+),"synced":(\d+),"len":(\d+),"crc":(\d+),'
                    rb'"mac":"([0-9a-f]{32})","t":(.*)\}$')


def record_crc(seq, synced, t, tag):
    """FORMAT.md §10.4: masked CRC of len (u32 LE) ‖ seq (u64 LE) ‖ synced (u64 LE)
    ‖ the bytes of t ‖ the tag's 16 bytes."""
    return masked_crc(struct.pack("<IQQ", len(t), seq, synced) + t + tag)


def tagged_run(tmp_path, monkeypatch):
    """A tagged run (JSONL, the default codec) with seven committed records, closed:
    its Runs, directory, segment and the segment's lines with their offsets."""
    monkeypatch.delenv("RUNLOG_DIR", raising=False)
    monkeypatch.delenv("RUNLOG_KEY_FILE", raising=False)
    key = tmp_path / "key"
    key.write_text("33" * 32)
    os.chmod(key, 0o600)
    runs = runlog.Runs(tmp_path / "root", key_file=key, lock_wait=0)
    with runs.start("r", units=["u%02d" % i for i in range(6)]) as run:
        for i in range(6):
            run.unit("u%02d" % i, "done")
        d = run.dir
    assert runs.get("r").unit_status("u01").status == "done"  # reads clean with its key
    [seg] = segments(d)
    raw = seg.read_bytes()
    lines, offset = [], 0
    for line in raw.splitlines(keepends=True):
        lines.append((offset, line))
        offset += len(line)
    return runs, d, seg, lines


def find_record(lines, seq):
    for offset, line in lines:
        m = RECORD.match(line.rstrip(b"\n"))
        if m and int(m.group(1)) == seq:
            return offset, line, m
    raise AssertionError("no record with seq %d" % seq)


def test_a_changed_record_with_its_crc_fixed_is_tampered(tmp_path, monkeypatch):
    runs, d, seg, lines = tagged_run(tmp_path, monkeypatch)
    offset, line, m = find_record(lines, 3)
    seq, synced, crc = int(m.group(1)), int(m.group(2)), int(m.group(4))
    tag, t = bytes.fromhex(m.group(5).decode()), m.group(6)
    # The CRC as written is the CRC this test computes: the fix below is exact.
    assert record_crc(seq, synced, t, tag) == crc
    assert b'"status":"done"' in t
    forged = t.replace(b'"status":"done"', b'"status":"failed"')
    new_line = b'{"seq":%d,"synced":%d,"len":%d,"crc":%d,"mac":"%s","t":%s}\n' % (
        seq, synced, len(forged), record_crc(seq, synced, forged, tag), m.group(5), forged)
    raw = seg.read_bytes()
    seg.write_bytes(raw[:offset] + new_line + raw[offset + len(line):])
    before = files(d)
    for call in (lambda: runs.get("r"), lambda: runs.open("r"), lambda: runs.start("r")):
        with pytest.raises(runlog.Tampered) as e:
            call()
        assert not isinstance(e.value, runlog.Corrupt)
        assert e.value.file == str(seg)
        assert e.value.offset == offset
        assert e.value.seq == 3
        assert "tampering detected" in str(e.value)
        assert "nothing was modified" in str(e.value)
        assert files(d) == before


def test_a_changed_record_without_its_crc_fixed_is_corrupt_not_tampered(tmp_path, monkeypatch):
    runs, d, seg, lines = tagged_run(tmp_path, monkeypatch)
    offset, line, m = find_record(lines, 3)
    t = m.group(6)
    forged = t.replace(b'"status":"done"', b'"status":"dona"')  # same length, CRC left stale
    raw = seg.read_bytes()
    start = offset + line.index(t)
    seg.write_bytes(raw[:start] + forged + raw[start + len(t):])
    before = files(d)
    for call in (lambda: runs.get("r"), lambda: runs.open("r"), lambda: runs.start("r")):
        with pytest.raises(runlog.Corrupt) as e:
            call()
        assert not isinstance(e.value, runlog.Tampered)
        assert e.value.file == str(seg)
        assert e.value.offset == offset
        assert e.value.seq == 3
        assert "nothing was modified" in str(e.value)
        assert files(d) == before


def test_unit_lists_of_the_wrong_type_name_the_argument(runs):
    """A str where a list of names goes is a TypeError naming the argument and
    the fix, not PyO3's "Can't extract str to Vec"."""
    with pytest.raises(TypeError) as e:
        runs.start("j", units="a")
    assert "start(units=...)" in str(e.value) and '["a"]' in str(e.value), str(e.value)
    with pytest.raises(TypeError) as e:
        runs.init("j", units=["a", 3])
    assert "init(units=...)" in str(e.value) and "item 1 is int" in str(e.value), str(e.value)
    with pytest.raises(TypeError) as e:
        runs.start("j", units=["a", "b"], deps={"b": "a"})
    assert "deps=" in str(e.value) and '["a"]' in str(e.value), str(e.value)
    with pytest.raises(TypeError) as e:
        runs.start("j", units=5)
    assert "start(units=...) is a list of unit names, not int" in str(e.value), str(e.value)
    assert runs.list() == [], "nothing created"
    with runs.start("j", units=["a"]) as run:
        with pytest.raises(TypeError) as e:
            run.start_units("a")
        assert "start_units(names)" in str(e.value), str(e.value)
