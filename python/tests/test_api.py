"""Every method of Runs, Run and RunView, with the types it returns."""

import datetime
import os
import warnings

import pytest

import runlog
from runlog import PhaseStatus, RunStatus, UnitStatus


def test_root_is_found_as_the_cli_finds_it(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNLOG_DIR", raising=False)
    (tmp_path / "proj" / ".runlog").mkdir(parents=True)
    (tmp_path / "proj" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "proj" / "sub")
    assert runlog.Runs().root == str(tmp_path / "proj" / ".runlog")
    monkeypatch.setenv("RUNLOG_DIR", str(tmp_path / "env"))
    assert runlog.Runs().root == str(tmp_path / "env")
    assert runlog.Runs(tmp_path / "explicit").root == str(tmp_path / "explicit")
    monkeypatch.delenv("RUNLOG_DIR")
    monkeypatch.chdir(tmp_path)
    assert runlog.Runs().root == str(tmp_path / ".runlog")


def test_bad_arguments_are_value_errors(root):
    with pytest.raises(ValueError):
        runlog.Runs(root, lock_wait=-1)
    with pytest.raises(ValueError):
        runlog.Runs(root, linger=float("nan"))


def test_start_unit_and_read_back(runs):
    with runs.start("r1", task="migrate", units=["a", "b", "c"], deps={"c": ["a", "b"]},
                    fingerprint={"params": "v1", "size": 3}) as run:
        assert isinstance(run, runlog.Run) and isinstance(run, runlog.RunView)
        assert run.id == "r1" and run.resumed is False and run.warnings == []
        assert os.path.isdir(run.dir) and not run.closed
        s1 = run.unit("a", "in_progress")
        s2 = run.unit("a", UnitStatus.DONE, note="ok")
        assert isinstance(s1, int) and s2 == s1 + 1
        u = run.unit_status("a")
        assert u.name == "a" and u.status is UnitStatus.DONE and u.status == "done"
        assert u.note == "ok" and u.attempts == 1 and u.deps == []
        for ts in (u.created_at, u.updated_at, u.started_at, u.finished_at):
            assert isinstance(ts, datetime.datetime) and ts.tzinfo is not None
        assert run.unit_status("c").deps == ["a", "b"]
        assert run.unit_status("c").started_at is None
        assert run.unit_status("nope") is None
        c = run.counts()
        assert (c.pending, c.in_progress, c.done, c.blocked, c.dep_blocked, c.total) == (2, 0, 1, 0, 0, 3)
        assert len(run) == 3
        st = run.status()
        assert st.id == "r1" and st.task == "migrate" and st.status is RunStatus.RUNNING
        assert st.fingerprint == {"params": "v1", "size": "3"}
        assert st.finished_at is None and st.result is None and not st.closed
        assert st.created_at <= st.updated_at
        assert st.counts == c
        assert st.to_dict()["task"] == "migrate"
        # A unit can be added with deps by a transition.
        run.unit("d", "pending", deps=["c"])
        assert run.unit_status("d").deps == ["c"]
    assert run.closed


def test_units_batch_and_batch_error(runs):
    with runs.start("b", units=["a", "b", "c"]) as run:
        seqs = run.units([("a", "in_progress"), ("a", "done", "n1"),
                          {"name": "b", "status": "done", "note": "n2"}])
        assert len(seqs) == 3 and seqs == sorted(seqs)
        assert run.unit_status("a").note == "n1" and run.unit_status("b").note == "n2"
        with pytest.raises(runlog.BatchError) as e:
            run.units([("c", "in_progress"), ("a", "in_progress"), ("c", "done")])
        res = e.value.results
        assert isinstance(res[0], int) and isinstance(res[2], int)
        assert isinstance(res[1], runlog.Refused) and e.value.errors == [res[1]]
        assert run.unit_status("c").status is UnitStatus.DONE
        assert run.unit_status("a").status is UnitStatus.DONE  # refused: unchanged
        with pytest.raises(ValueError):
            run.units([("x",)])
        with pytest.raises(ValueError):
            run.units([("x", "nonsense")])
        # A generator works: the batch is read once.
        assert len(run.units((n, "pending") for n in ["e", "f"])) == 2


def test_phase_item_resolve_budget_spend_checkpoint_finalize(runs):
    run = runs.init("p", task="t", units=["a"])
    run.phase("load", "running")
    run.phase("load", PhaseStatus.DONE)
    assert run.status().phases == {"load": PhaseStatus.DONE}
    run.item({"warn": "disk"}, "second")
    items = run.status().open_items
    assert [i["item"] for i in items] == [{"warn": "disk"}, "second"]
    run.resolve(items[0]["id"], note="fixed")
    st = run.status()
    assert [i["id"] for i in st.open_items] == [items[1]["id"]]
    assert st.resolved_items[0]["note"] == "fixed"
    run.budget("gpu", 10.0, owner="ops")
    run.spend("gpu", 4.0)
    run.spend("gpu", 2.5)
    assert st.budgets == {} and run.status().budgets["gpu"]["spent"] == 6.5
    run.checkpoint({"cursor": 17})
    assert run.to_dict()["checkpoint"]["state"] == {"cursor": 17}
    run.compact()
    run.unit("a", "done")
    run.finalize(RunStatus.DONE, result="all good")
    st = run.status()
    assert st.status is RunStatus.DONE and st.closed and st.result == "all good"
    assert isinstance(st.finished_at, datetime.datetime)
    run.close()
    run.close()  # twice is fine


def test_resume_set_and_lazy_skip(runs):
    with runs.start("r", units=["a", "b", "c", "d"], deps={"c": ["a"], "d": ["c"]}) as run:
        run.unit("a", "in_progress")  # interrupted: eligible again
        run.unit("b", "done")
        rs = run.resume()
        assert isinstance(rs, runlog.ResumeSet)
        assert rs.eligible == ["a"]
        assert isinstance(rs.eligible, runlog.Names) and len(rs.eligible) == 1
        assert rs.eligible[0] == rs.eligible[-1] == "a" and "a" in rs.eligible
        assert list(rs.eligible) == ["a"] and rs.eligible != ["b"] and rs.eligible != "a"
        with pytest.raises(IndexError):
            rs.eligible[1]
        assert rs.dep_blocked == {"c": ["a"], "d": ["a"]}
        assert isinstance(rs.skip, runlog.UnitNames)
        assert len(rs.skip) == 1 and list(rs.skip) == ["b"]
        assert "b" in rs.skip and "a" not in rs.skip and "zz" not in rs.skip


def test_eligible_names_packed_in_rust_read_back_each_whole(runs):
    # Names of other lengths and multi-byte UTF-8, one a prefix of the next,
    # kept back to back in one buffer: each reads back whole, by index from
    # either end, by iteration, by `in` and by `==`.
    names = sorted(["a", "ab", "abc", "é", "éé", "z" * 200, "日本", "x"])
    with runs.start("packed", units=names) as run:
        el = run.resume().eligible
        assert len(el) == len(names) and el == names and list(el) == names
        assert [el[i] for i in range(len(names))] == names
        assert [el[-i - 1] for i in range(len(names))] == names[::-1]
        assert all(n in el for n in names) and "abcd" not in el and "" not in el
        assert el != names[:-1] and el != names + ["zz"]
        with pytest.raises(IndexError):
            el[len(names)]
        with pytest.raises(IndexError):
            el[-len(names) - 1]


def test_iterators_stream_in_name_order(runs):
    names = ["u%05d" % i for i in range(5000)]
    with runs.start("big", units=names) as run:
        run.units([(n, "done") for n in names[::7]])
        it = run.iter_units()
        assert isinstance(it, runlog.UnitIter) and iter(it) is it
        first = next(it)
        assert isinstance(first, runlog.Unit) and first.name == "u00000"
        assert [u.name for u in run.iter_units()] == names
        assert [u.name for u in run] == names
        assert [u.name for u in run.iter_units(start="u04990")] == names[4990:]
        assert [u.name for u in run.iter_units(start="u04990x")] == names[4991:]
        assert [u.name for u in run.iter_units(start="zzz")] == []
        done = [u.name for u in run.iter_units(status="done")]
        assert done == names[::7]
        assert list(run.resume().skip) == names[::7]
        assert [u.name for u in run.iter_units(status=UnitStatus.PENDING)][:2] == ["u00001", "u00002"]


def test_filtered_iteration_reads_past_long_stretches_without_a_match(runs):
    names = ["v%06d" % i for i in range(40000)]
    with runs.start("sparse", units=names) as run:
        run.unit(names[-1], "done")
        run.unit(names[20000], "done")
        assert [u.name for u in run.iter_units(status="done")] == [names[20000], names[-1]]
        assert list(run.resume().skip) == [names[20000], names[-1]]


def test_iterator_of_a_closed_run_raises(runs):
    run = runs.start("c", units=["a", "b"])
    it = run.iter_units()
    skip = run.resume().skip
    run.close()
    with pytest.raises(runlog.Error, match="closed"):
        next(it)
    with pytest.raises(runlog.Error, match="closed"):
        list(skip)
    for call in (lambda: run.unit("a", "done"), run.status, run.counts, run.resume,
                 lambda: run.dir):
        with pytest.raises(runlog.Error, match="closed"):
            call()
    # The lock is free again.
    runs.open("c").close()


def test_get_is_a_lock_free_read_as_of_the_call(runs):
    run = runs.start("g", units=["a"])
    view = runs.get("g")  # while the writer holds the lock
    assert type(view) is runlog.RunView and view.id == "g"
    run.unit("a", "done")
    assert view.unit_status("a").status is UnitStatus.PENDING
    assert runs.get("g").unit_status("a").status is UnitStatus.DONE
    assert view.to_dict()["units"]["a"]["status"] == "pending"
    assert [u.name for u in view] == ["a"] and len(view) == 1
    assert view.resume().eligible == ["a"]
    assert "read" in repr(view)
    run.close()


def test_open_list_resolve_gc(runs):
    runs.start("alpha-1", units=["a"]).close()
    runs.start("beta-2", units=["a", "b"]).close()
    with runs.open("alpha-1") as run:
        assert run.resumed is True
        run.unit("a", "done")
        run.finalize("done")
    listed = {s.id: s for s in runs.list()}
    assert set(listed) == {"alpha-1", "beta-2"}
    a = listed["alpha-1"]
    assert a.status is RunStatus.DONE and a.units_done == 1 and a.units_total == 1
    assert isinstance(a.created_at, datetime.datetime) and a.task == ""
    assert runs.resolve("alp") == "alpha-1" and runs.resolve("beta-2") == "beta-2"
    assert runs.gc(365) == []
    assert runs.gc(0) == ["alpha-1"]
    assert [s.id for s in runs.list()] == ["beta-2"]


def test_start_restores_same_fingerprint_and_warns_on_change(runs):
    with runs.start("s", units=["a"], fingerprint={"v": "1"}) as run:
        run.unit("a", "done")
    with runs.start("s", units=["a"], fingerprint={"v": "1"}) as run:
        assert run.resumed and run.unit_status("a").status is UnitStatus.DONE
    with pytest.warns(runlog.CheckpointDiscarded, match="fingerprint changed"):
        run = runs.start("s", units=["a"], fingerprint={"v": "2"})
    assert not run.resumed
    (w,) = run.warnings
    assert w.code == runlog.CHECKPOINT_DISCARDED == "CHECKPOINT_DISCARDED"
    assert w.changed == ["v"] and os.path.isdir(w.archived_to)
    assert run.unit_status("a").status is UnitStatus.PENDING
    run.close()


def test_a_finished_run_started_again_warns_with_its_code_as_the_cli_does(runs):
    """The warning carries the library's code (RUN_FINISHED_STARTED_FRESH), in
    its message and as ``.code``, and the command that brings the old run back,
    as `runlog start` prints it; with -W error it is raised, code and all."""
    with runs.start("f", units=["a"]) as run:
        run.unit("a", "done")
        run.finalize("done")
    with pytest.warns(runlog.CheckpointDiscarded) as caught:
        run = runs.start("f", units=["a"])
    (w,) = [c.message for c in caught]
    (sw,) = run.warnings
    run.close()
    assert w.code == sw.code == runlog.RUN_FINISHED_STARTED_FRESH == "RUN_FINISHED_STARTED_FRESH"
    assert str(w).startswith("RUN_FINISHED_STARTED_FRESH: run f had finished (done); "), str(w)
    name = os.path.basename(sw.archived_to)
    assert str(w).endswith("; `runlog archive restore %s` brings it back" % name), str(w)
    assert w.archived_to == sw.archived_to and os.path.isdir(w.archived_to)
    assert w.changed == []

    with runs.start("f", units=["a"]) as run:
        run.unit("a", "done")
        run.finalize("done")
    with warnings.catch_warnings():
        warnings.simplefilter("error", runlog.CheckpointDiscarded)
        with pytest.raises(runlog.CheckpointDiscarded) as raised:
            runs.start("f", units=["a"])
    assert raised.value.code == "RUN_FINISHED_STARTED_FRESH"
    assert str(raised.value).startswith("RUN_FINISHED_STARTED_FRESH: ")


def test_launch_descriptor(runs):
    with runs.start("l", launch={"scriptPath": "job.py", "args": {"n": 1}}) as run:
        assert run.to_dict()["launch"] == {"scriptPath": "job.py", "args": {"n": 1}}
    with pytest.raises(runlog.Refused, match="scriptPath"):
        runs.start("l2", launch={"args": {}})


def test_docstrings_show_in_help():
    for obj in (runlog.Runs, runlog.Run.unit, runlog.Run.units, runlog.RunView.resume,
                runlog.Runs.start, runlog.Refused, runlog.UnitStatus):
        assert obj.__doc__ and len(obj.__doc__) > 20, obj


def test_verify_reports_clean_then_names_the_damaged_file_and_changes_nothing(runs, root):
    from conftest import files

    run = runs.start("v", units=["a", "b", "c"])
    for u in ["a", "b", "c"]:
        run.unit(u, "done")
    run.close()
    report = runs.verify("v")
    assert report["integrity"] == "clean", report
    assert report["last_seq"] >= 4 and report["torn_tail"] is None
    assert report["snapshot_fallbacks"] == [] and report["quarantined"] == []

    run_dir = root / "runs" / "v"
    seg = next(p for p in sorted(run_dir.glob("seg-*.log")) if b'"unit":"b"' in p.read_bytes())
    data = bytearray(seg.read_bytes())
    # A byte of an acknowledged record that is not the last: corruption, never a torn tail.
    at = data.find(b'"unit":"b"')
    assert at > 0, "b's record is in the segment"
    data[at + 8] ^= 0x01
    seg.write_bytes(bytes(data))
    before = files(run_dir)
    report = runs.verify("v")
    assert report["integrity"] == "corrupt", report
    assert report["path"] == str(seg) and isinstance(report["offset"], int), report
    assert files(run_dir) == before, "verify changed a file"
    with pytest.raises(runlog.NotFound):
        runs.verify("nope")
