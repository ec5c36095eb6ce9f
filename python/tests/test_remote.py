"""A writer whose run was taken by another host is fenced: ``runlog.Fenced``.

The run ships to a ``file://`` remote named by ``RUNLOG_REMOTE_ROOT`` (sync):
host A writes; host B (another runs root) opens the run, which restores it from
the remote, and writes, claiming a newer epoch; A's next write raises
``runlog.Fenced`` naming both epochs, and the remote never gets it."""

import pytest

import runlog


@pytest.fixture
def remote(tmp_path, monkeypatch):
    d = tmp_path / "remote"
    d.mkdir()
    monkeypatch.setenv("RUNLOG_REMOTE_ROOT", d.as_uri())
    monkeypatch.delenv("RUNLOG_REMOTE_POLICY", raising=False)
    monkeypatch.delenv("RUNLOG_DIR", raising=False)
    monkeypatch.delenv("RUNLOG_KEY_FILE", raising=False)
    return d


def test_fenced_is_an_error_with_epochs():
    assert issubclass(runlog.Fenced, runlog.Error)
    assert not issubclass(runlog.Fenced, runlog.Refused)
    e = runlog.Fenced("fenced", 1, 2)
    assert (e.epoch, e.newer) == (1, 2)
    assert runlog.Fenced.__module__ == "runlog"


def test_the_host_that_lost_the_run_is_fenced(tmp_path, remote):
    host_a = runlog.Runs(tmp_path / "a", lock_wait=0)
    run_a = host_a.start("r1", units=["a", "b", "c"])
    run_a.unit("a", "done")  # sync: on the remote once this returns

    # Host B has no copy: opening the run restores it from the remote.
    host_b = runlog.Runs(tmp_path / "b", lock_wait=0)
    run_b = host_b.open("r1")
    assert run_b.unit_status("a").status == "done"
    run_b.unit("b", "done")  # B claims the next epoch

    with pytest.raises(runlog.Fenced) as info:
        run_a.unit("c", "done")
    assert (info.value.epoch, info.value.newer) == (1, 2)
    assert "epoch 2" in str(info.value)
    # It names the remote it could not ship to, not the local run directory.
    assert "ship to remote " + remote.as_uri() in str(info.value), str(info.value)
    assert str(tmp_path / "a" / "runs") not in str(info.value), str(info.value)
    run_a.close()
    run_b.close()

    # The remote holds A's acknowledged "a" and B's "b", never A's fenced "c":
    # a third host's open restores it from there.
    host_c = runlog.Runs(tmp_path / "c", lock_wait=0)
    view = host_c.open("r1")
    assert view.unit_status("a").status == "done"
    assert view.unit_status("b").status == "done"
    assert view.unit_status("c").status != "done"
    view.close()
