//! runlog: an embedded checkpoint store.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod engine;
