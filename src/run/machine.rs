//! The run's two state machines over the same rules (`transition.rs`): the
//! store's header plus a table of units ([`RunKeyed`]) and, under the `sim`
//! test feature, the whole document (`RunMachine`, the reference model).

use super::doc::RunDoc;
use super::record::UnitRecord;
use super::rule_error::RuleError;
use super::transition::{Transition, rules};
use super::units::{RunHeader, TableUnits, UnitCounts};
use crate::engine::{ApplyError, Codec, KeyedMachine, KeyedState};

/// The run state machine over a whole [`RunDoc`]: the reference model of the
/// rules (property tests and fuzzing compare against it). Stores use
/// `RunKeyed`, the same rules over a table of units. Test support under the
/// `sim` feature, not part of the API.
#[cfg(feature = "sim")]
#[derive(Debug, Clone, Copy)]
pub struct RunMachine;

#[cfg(feature = "sim")]
impl crate::engine::Machine for RunMachine {
    type State = RunDoc;
    type Transition = Transition;
    type Error = ApplyError<RuleError>;

    fn apply(doc: &mut RunDoc, t: &Transition) -> Result<(), ApplyError<RuleError>> {
        let mut units = std::mem::take(&mut doc.units);
        let r = rules(doc, &mut super::units::MapUnits(&mut units), t);
        doc.units = units;
        r
    }

    fn failure(e: ApplyError<RuleError>) -> crate::engine::Error {
        e.into_store_error()
    }
}

/// The run state machine of a run's store: the header (the document without
/// units, and the unit counts) in memory, the units in a table by name.
#[derive(Debug, Clone, Copy)]
pub struct RunKeyed;

impl KeyedMachine for RunKeyed {
    type Header = RunHeader;
    type Value = UnitRecord;
    type Transition = Transition;
    type Error = RuleError;

    fn apply(
        state: &mut KeyedState<RunKeyed>,
        t: &Transition,
    ) -> Result<(), ApplyError<RuleError>> {
        // The header is moved out for the duration (no copy), and back whatever
        // the outcome: the rules change nothing before every check has passed.
        let mut h = std::mem::take(state.header_mut());
        let r = rules(
            &mut h.doc,
            &mut TableUnits {
                state,
                counts: &mut h.counts,
            },
            t,
        );
        *state.header_mut() = h;
        r
    }

    fn check_header(h: &RunHeader) -> Result<(), String> {
        super::doc::check_schema(h.doc.schema_version)
    }

    fn decode_whole(
        codec: Codec,
        payload: &[u8],
    ) -> Result<(RunHeader, Vec<(String, UnitRecord)>), String> {
        // A run written before format 2: its snapshot is the whole document.
        let mut doc: RunDoc = codec.decode(payload)?;
        let units = std::mem::take(&mut doc.units);
        let counts = UnitCounts::of(units.values());
        let mut entries = Vec::with_capacity(units.len());
        for (name, u) in units {
            let rec = UnitRecord::from_unit(&u).map_err(|e| format!("unit {name:?}: {e}"))?;
            entries.push((name, rec));
        }
        Ok((RunHeader { doc, counts }, entries))
    }
}
