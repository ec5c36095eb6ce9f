//! The native module of the `runlog` Python package (`runlog._runlog`): a thin
//! layer over `runlog::run`. Every call that waits on the disk or a lock runs
//! with the GIL released; the rules, the storage and the resume logic are all
//! the Rust crate's. Exceptions, status enums and timestamps are defined in
//! the package's Python modules and built from here.
#![forbid(unsafe_code)]

mod convert;
mod errors;
mod iter;
mod objects;
mod outputs;
mod run;
mod runs;
mod server;
mod view;

use pyo3::prelude::*;

#[pymodule]
fn _runlog(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<runs::Runs>()?;
    m.add_class::<view::RunView>()?;
    m.add_class::<run::Run>()?;
    m.add_class::<objects::Unit>()?;
    m.add_class::<objects::Counts>()?;
    m.add_class::<objects::Status>()?;
    m.add_class::<objects::RunSummary>()?;
    m.add_class::<objects::StartWarning>()?;
    m.add_class::<iter::ResumeSet>()?;
    m.add_class::<iter::UnitNames>()?;
    m.add_class::<iter::Names>()?;
    m.add_class::<iter::NamesIter>()?;
    m.add_class::<iter::UnitIter>()?;
    m.add_class::<outputs::OutputStore>()?;
    m.add_class::<server::Server>()?;
    m.add(
        "CHECKPOINT_DISCARDED",
        runlog::run::Warning::CHECKPOINT_DISCARDED,
    )?;
    m.add(
        "RUN_FINISHED_STARTED_FRESH",
        runlog::run::Warning::RUN_FINISHED_STARTED_FRESH,
    )?;
    m.add(
        "START_ARGS_IGNORED",
        runlog::run::Warning::START_ARGS_IGNORED,
    )?;
    Ok(())
}
