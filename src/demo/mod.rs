//! `runlog demo`: what runlog is for, in one command. A supervisor process
//! starts a worker process that works through a dependency graph of units with
//! several threads, recording each unit's `in_progress` and `done` durably; the
//! supervisor SIGKILLs the worker at random moments and restarts it, and each
//! restart resumes from the store. At the end the supervisor checks the store
//! against the plan on its own: every unit done exactly once, no acknowledged
//! transition lost.

mod check;
mod plan;
mod protocol;
mod supervisor;
mod worker;

pub use supervisor::{DemoOptions, is_interrupted, render, run_demo};
pub use worker::{WorkerOptions, run_worker};
