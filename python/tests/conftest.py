"""Shared fixtures: a fresh runs root per test, and helpers that read a run's
files byte for byte (to prove a refusal wrote nothing)."""

import os
import pathlib

import pytest

import runlog

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNLOG_DIR", raising=False)
    monkeypatch.delenv("RUNLOG_KEY_FILE", raising=False)
    return tmp_path / "root"


@pytest.fixture
def runs(root):
    return runlog.Runs(root, lock_wait=0)


def files(run_dir):
    """Every file of a run directory but LOCK (whose holder text a writer's open
    rewrites) → its bytes."""
    d = pathlib.Path(run_dir)
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name != "LOCK"}


def segments(run_dir):
    return sorted(pathlib.Path(run_dir).glob("seg-*.log"))
