//! The slow sweeps: crash-point enumeration on the simulated filesystem, fault
//! injection, and kill -9 of child processes (this binary re-executed, one
//! child test by its full name). Scaled by `RUNLOG_CRASH_*`, `RUNLOG_FAULT_SEEDS`,
//! `RUNLOG_KILL9_ITERS`/`RUNLOG_KILL9_KEYED_ITERS`/`RUNLOG_KILL9_SEED`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../depth/mod.rs"]
mod depth;
#[path = "../skip_support/mod.rs"]
mod skip_support;

mod archive_gc_crash;
mod crash_enumeration;
mod crash_weak_model_hole_in_unsynced_batch;
mod fault_injection;
mod fsyncgate_across_writers;
mod kill9_engine;
mod kill9_keyed;
mod many_writers_crash;
