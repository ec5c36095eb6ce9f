"""runlog: an embedded checkpoint store for long runs, in-process.

A run is a set of named units of work (with dependencies), phases, open items
and budgets, kept in an fsync'd transition log under a runs root. Every write
is durable when the call returns; a killed process resumes where it stopped.

    import runlog
    runs = runlog.Runs()                      # $RUNLOG_DIR, else ./.runlog
    with runs.start("nightly", units=["a", "b"], fingerprint={"params": "v1"}) as run:
        for name in run.resume().eligible:
            run.unit(name, "in_progress")
            ...                               # the work
            run.unit(name, "done", note="ok")

The work happens in Rust (the `runlog` crate); calls release the GIL while they
wait on the disk or a lock, so threads writing one run share its fsyncs.
"""

from ._errors import (
    BatchError,
    CheckpointDiscarded,
    Corrupt,
    Error,
    Fenced,
    Locked,
    NotFound,
    Refused,
    Tampered,
)
from ._types import PhaseStatus, RunStatus, UnitStatus
from ._runlog import (
    CHECKPOINT_DISCARDED,
    RUN_FINISHED_STARTED_FRESH,
    START_ARGS_IGNORED,
    Counts,
    Names,
    NamesIter,
    ResumeSet,
    Run,
    Runs,
    RunSummary,
    RunView,
    StartWarning,
    Status,
    Unit,
    UnitIter,
    UnitNames,
    OutputStore,
    Server,
)
from .drive import DriveSummary, drive, gc_outputs, output, output_name
from .ray_executor import RayExecutor

__all__ = [
    "Runs",
    "Server",
    "Run",
    "RunView",
    "Unit",
    "Counts",
    "Status",
    "RunSummary",
    "StartWarning",
    "ResumeSet",
    "UnitNames",
    "Names",
    "NamesIter",
    "UnitIter",
    "UnitStatus",
    "RunStatus",
    "PhaseStatus",
    "Error",
    "Refused",
    "NotFound",
    "Corrupt",
    "Tampered",
    "Locked",
    "Fenced",
    "BatchError",
    "CheckpointDiscarded",
    "CHECKPOINT_DISCARDED",
    "RUN_FINISHED_STARTED_FRESH",
    "START_ARGS_IGNORED",
    "drive",
    "DriveSummary",
    "output",
    "gc_outputs",
    "output_name",
    "RayExecutor",
    "OutputStore",
]
