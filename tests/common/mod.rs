//! Shared test fixtures: a small state machine and helpers.
#![allow(dead_code)]

use runlog::engine::{Codec, CompactionPolicy, Machine, Options, SyncPolicy};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A log of values: the state is every value appended, in order.
pub struct Ledger;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerState {
    pub values: Vec<u64>,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub value: u64,
    pub pad: String,
}

#[derive(Debug)]
pub struct Rejected(pub u64);
impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "value {} is refused (multiples of 1000 are)", self.0)
    }
}
impl std::error::Error for Rejected {}

impl Machine for Ledger {
    type State = LedgerState;
    type Transition = Entry;
    type Error = Rejected;
    fn apply(s: &mut LedgerState, t: &Entry) -> Result<(), Rejected> {
        if t.value.is_multiple_of(1000) {
            return Err(Rejected(t.value));
        }
        s.values.push(t.value);
        s.bytes += t.pad.len() as u64;
        Ok(())
    }
}

pub fn entry(value: u64, pad: usize) -> Entry {
    Entry {
        value,
        pad: "x".repeat(pad),
    }
}

/// The state a plain in-memory model reaches after `values`.
pub fn model(values: &[u64], pad: usize) -> LedgerState {
    let mut s = LedgerState::default();
    for v in values {
        Ledger::apply(&mut s, &entry(*v, pad)).unwrap();
    }
    s
}

pub fn opts(codec: Codec) -> Options {
    Options {
        create: true,
        codec,
        sync: SyncPolicy::Always,
        compaction: CompactionPolicy::Manual,
        ..Options::default()
    }
}

pub fn codecs() -> [Codec; 2] {
    [Codec::Binary, Codec::Jsonl]
}

/// Every file in a directory with its bytes, for "nothing was modified" checks.
pub fn dir_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}
pub mod crash;
