//! runlog: an embedded checkpoint store.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod demo;
pub mod engine;
pub mod run;
