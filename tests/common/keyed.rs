//! A keyed test machine (format v2: its state lives in a table snapshot) and a
//! plain in-memory model of it.
//!
//! `Tab` takes the same transitions as [`Ledger`](super::Ledger) (an [`Entry`]
//! of a value and a pad; multiples of 1000 are refused), so every workload of
//! the crash and fault harnesses runs on it unchanged. A transition of value
//! `v` sets key [`key_of`]`(v)` to `(v, pad)`, and counts itself in the header:
//! keys are both inserted and overwritten, and pads of up to 64 KiB give
//! entries larger than a table block.
#![allow(dead_code)]

use super::{Entry, Rejected};
use runlog::engine::{ApplyError, KeyedMachine, KeyedState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many distinct keys the transitions fall on.
pub const KEYS: u64 = 37;

/// The keyed test machine: `Store<Keyed<Tab>>`.
pub struct Tab;

/// The header: counters over every transition applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabHeader {
    /// Transitions applied.
    pub applied: u64,
    /// Pad bytes applied.
    pub bytes: u64,
}

/// One entry's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabValue {
    pub value: u64,
    pub pad: String,
}

/// The key a transition of value `v` sets.
pub fn key_of(v: u64) -> String {
    format!("k{:03}", v % KEYS)
}

impl KeyedMachine for Tab {
    type Header = TabHeader;
    type Value = TabValue;
    type Transition = Entry;
    type Error = Rejected;

    fn apply(state: &mut KeyedState<Self>, t: &Entry) -> Result<(), ApplyError<Rejected>> {
        if t.value.is_multiple_of(1000) {
            return Err(ApplyError::Refused(Rejected(t.value)));
        }
        state
            .put(
                &key_of(t.value),
                TabValue {
                    value: t.value,
                    pad: t.pad.clone(),
                },
            )
            .map_err(ApplyError::Damaged)?;
        let h = state.header_mut();
        h.applied += 1;
        h.bytes += t.pad.len() as u64;
        Ok(())
    }
}

/// A keyed state as plain data: what a recovered `KeyedState<Tab>` holds and
/// what the model computes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TabModel {
    pub header: TabHeader,
    pub map: BTreeMap<String, TabValue>,
}

impl TabModel {
    /// Applies one accepted transition the plain way.
    pub fn apply(&mut self, value: u64, pad: usize) {
        self.map.insert(
            key_of(value),
            TabValue {
                value,
                pad: "x".repeat(pad),
            },
        );
        self.header.applied += 1;
        self.header.bytes += pad as u64;
    }
}

/// The model after the accepted transitions `h` (value, pad).
pub fn tab_model(h: &[(u64, usize)]) -> TabModel {
    let mut m = TabModel::default();
    for (v, pad) in h {
        m.apply(*v, *pad);
    }
    m
}

/// Reads every entry of a keyed state (the table's blocks are checked).
pub fn tab_observe(s: &KeyedState<Tab>) -> Result<TabModel, String> {
    let mut map = BTreeMap::new();
    for e in s.iter() {
        let (k, v) = e.map_err(|e| e.to_string())?;
        map.insert(k.into_owned(), v);
    }
    if map.len() as u64 != s.len() {
        return Err(format!(
            "iteration gave {} entries, the state counts {}",
            map.len(),
            s.len()
        ));
    }
    Ok(TabModel {
        header: s.header().clone(),
        map,
    })
}
