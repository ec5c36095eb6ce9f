//! Reading a run without loading it: the document's run-level fields and the
//! unit counts at once, one unit by lookup, every unit by iteration in name
//! order. The whole [`RunDoc`] is built only when asked for.

use super::doc::{RunDoc, Unit};
use super::error::{Result, RunError};
use super::machine::RunKeyed;
use super::units::UnitCounts;
use crate::engine::KeyedState;

/// The state of a run as its store holds it.
pub(crate) type RunState = KeyedState<RunKeyed>;

/// A run's state, read by lookup.
#[derive(Clone, Copy)]
pub struct RunView<'a> {
    id: &'a str,
    state: &'a RunState,
}

impl std::fmt::Debug for RunView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunView")
            .field("id", &self.id)
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl<'a> RunView<'a> {
    pub(crate) fn new(id: &'a str, state: &'a RunState) -> RunView<'a> {
        RunView { id, state }
    }

    /// The run document without its units (`units` is empty): id, task,
    /// status, timestamps, phases, items, budgets, fingerprint, checkpoint.
    pub fn header(&self) -> &'a RunDoc {
        &self.state.header().doc
    }

    /// How many units have each status.
    pub fn counts(&self) -> UnitCounts {
        self.state.header().counts
    }

    /// One unit, by name.
    pub fn unit(&self, name: &str) -> Result<Option<Unit>> {
        self.state
            .get(name)
            .map(|r| r.map(|r| r.to_unit()))
            .map_err(|e| RunError::engine(self.id, e))
    }

    /// Every unit from `start` on (all with `None`), in name order, read as the
    /// iteration goes: memory stays flat whatever the run's size.
    pub fn units_from(
        &self,
        start: Option<&str>,
    ) -> impl Iterator<Item = Result<(String, Unit)>> + 'a {
        let id = self.id;
        self.state.iter_from(start).map(move |e| {
            e.map(|(n, r)| (n.into_owned(), r.to_unit()))
                .map_err(|e| RunError::engine(id, e))
        })
    }

    /// Every unit, in name order.
    pub fn units(&self) -> impl Iterator<Item = Result<(String, Unit)>> + 'a {
        self.units_from(None)
    }

    /// The resume set. Reads the units twice, as the iteration goes: once to
    /// work out what is eligible and what is held back (memory in proportion
    /// to the units *not* done), once, when serialized, to list the done ones
    /// (`skip`) one at a time. [`StreamedResume::collect`] builds the whole
    /// [`ResumeSet`](super::resume::ResumeSet).
    pub fn resume_streamed(&self) -> Result<StreamedResume<'a>> {
        let mut rows = Vec::new();
        for u in self.units() {
            let (name, u) = u?;
            if u.status == super::doc::UnitStatus::Done {
                continue;
            }
            // Only not-done dependencies matter; one the run does not have is
            // not done (and, absent from the rows, a root).
            let mut open_deps = Vec::new();
            for d in u.depends_on {
                let done = self
                    .unit(&d)?
                    .is_some_and(|x| x.status == super::doc::UnitStatus::Done);
                if !done {
                    open_deps.push(d);
                }
            }
            rows.push((name, u.status, open_deps));
        }
        let open = super::resume::resume_set_from_rows(rows);
        Ok(StreamedResume {
            view: *self,
            open,
            damage: std::cell::RefCell::new(None),
        })
    }

    /// The resume set, whole.
    pub fn resume_set(&self) -> Result<super::resume::ResumeSet> {
        self.resume_streamed()?.collect()
    }

    /// The whole document for printing: serializes exactly as
    /// [`RunView::to_doc`] would, but reads the units as it writes them, so
    /// printing a run of any size holds one unit at a time.
    pub fn doc_streamed(&self) -> StreamedDoc<'a> {
        StreamedDoc {
            view: *self,
            damage: std::cell::RefCell::new(None),
        }
    }

    /// The whole document, units included: memory in proportion to the run.
    pub fn to_doc(&self) -> Result<RunDoc> {
        let mut doc = self.header().clone();
        for u in self.units() {
            let (n, u) = u?;
            doc.units.insert(n, u);
        }
        Ok(doc)
    }
}

/// A run read lock-free: owns its state (a mapped table and the log's tail).
pub struct RunRead {
    pub(crate) id: String,
    pub(crate) state: RunState,
    /// What the read-only open found (damaged snapshots skipped, a torn tail).
    pub(crate) recovery: crate::engine::RecoveryReport,
}

impl std::fmt::Debug for RunRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view().fmt(f)
    }
}

impl RunRead {
    /// The run's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The state, by lookup.
    pub fn view(&self) -> RunView<'_> {
        RunView::new(&self.id, &self.state)
    }

    /// What the open found on the way: every damaged snapshot it skipped
    /// (`snapshot_fallbacks`, loud by design), the base it used, a torn tail.
    pub fn recovery(&self) -> &crate::engine::RecoveryReport {
        &self.recovery
    }
}

/// A run document serialized with its units read as they are written
/// ([`RunView::doc_streamed`]).
pub struct StreamedDoc<'a> {
    view: RunView<'a>,
    damage: std::cell::RefCell<Option<RunError>>,
}

impl StreamedDoc<'_> {
    /// Writes the document to `w` as JSON (`pretty`: indented), one unit read
    /// at a time. Damage met part-way is the error, typed as the read's, with
    /// what was written so far left in `w`; so is a failed write.
    pub fn write_json(&self, w: impl std::io::Write, pretty: bool) -> Result<()> {
        write_streamed(self, &self.damage, w, pretty)
    }
}

/// Serializes a streamed view to `w`; the damage its serializer met (kept in
/// `damage`, since serde's errors carry text only) comes back as itself.
fn write_streamed<T: serde::Serialize>(
    value: &T,
    damage: &std::cell::RefCell<Option<RunError>>,
    w: impl std::io::Write,
    pretty: bool,
) -> Result<()> {
    let r = if pretty {
        serde_json::to_writer_pretty(w, value)
    } else {
        serde_json::to_writer(w, value)
    };
    match (r, damage.borrow_mut().take()) {
        (_, Some(e)) => Err(e),
        (Ok(()), None) => Ok(()),
        (Err(e), None) if e.is_io() => Err(RunError::io("write JSON", "-", e.into())),
        (Err(e), None) => Err(RunError::Invalid(format!("cannot write JSON: {e}"))),
    }
}

impl serde::Serialize for StreamedDoc<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeStruct};
        struct Units<'a, 'b>(&'b StreamedDoc<'a>);
        impl serde::Serialize for Units<'_, '_> {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let view = self.0.view;
                let mut m = s.serialize_map(Some(view.counts().total() as usize))?;
                for u in view.units() {
                    let (n, u) = match u {
                        Ok(x) => x,
                        Err(e) => {
                            let msg = crate::engine::ErrorChain(&e).to_string();
                            *self.0.damage.borrow_mut() = Some(e);
                            return Err(serde::ser::Error::custom(msg));
                        }
                    };
                    m.serialize_entry(&n, &u)?;
                }
                m.end()
            }
        }
        // The fields of `RunDoc`, in its order (a test compares the two).
        let d = self.view.header();
        let mut st = s.serialize_struct("RunDoc", 18)?;
        st.serialize_field("schemaVersion", &d.schema_version)?;
        st.serialize_field("id", &d.id)?;
        st.serialize_field("task", &d.task)?;
        st.serialize_field("status", &d.status)?;
        st.serialize_field("createdAt", &d.created_at)?;
        st.serialize_field("updatedAt", &d.updated_at)?;
        st.serialize_field("finishedAt", &d.finished_at)?;
        st.serialize_field("result", &d.result)?;
        st.serialize_field("units", &Units(self))?;
        st.serialize_field("phases", &d.phases)?;
        st.serialize_field("openItems", &d.open_items)?;
        st.serialize_field("resolvedItems", &d.resolved_items)?;
        st.serialize_field("nextItem", &d.next_item)?;
        st.serialize_field("launch", &d.launch)?;
        st.serialize_field("fingerprint", &d.fingerprint)?;
        st.serialize_field("budgets", &d.budgets)?;
        st.serialize_field("openAtFinish", &d.open_at_finish)?;
        st.serialize_field("checkpoint", &d.checkpoint)?;
        st.end()
    }
}

/// A resume set whose `skip` list is read from the run as it is serialized
/// ([`RunView::resume_streamed`]).
pub struct StreamedResume<'a> {
    view: RunView<'a>,
    /// Computed over the units not done: `skip` is empty here.
    open: super::resume::ResumeSet,
    damage: std::cell::RefCell<Option<RunError>>,
}

impl StreamedResume<'_> {
    /// The whole resume set, `skip` included.
    pub fn collect(self) -> Result<super::resume::ResumeSet> {
        let mut set = self.open;
        for u in self.view.units() {
            let (name, u) = u?;
            if u.status == super::doc::UnitStatus::Done {
                set.skip.push(name);
            }
        }
        Ok(set)
    }

    /// Writes the resume set to `w` as JSON (`pretty`: indented), the done
    /// units read as they are written. Damage met part-way is the error, typed
    /// as the read's; so is a failed write.
    pub fn write_json(&self, w: impl std::io::Write, pretty: bool) -> Result<()> {
        write_streamed(self, &self.damage, w, pretty)
    }

    /// The resume set without its `skip` list (`eligible` and `dep_blocked`
    /// only): memory in proportion to the units not done. For callers that
    /// list the done units themselves, as they go.
    pub fn without_skip(self) -> super::resume::ResumeSet {
        self.open
    }
}

impl serde::Serialize for StreamedResume<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeStruct};
        struct Skip<'a, 'b>(&'b StreamedResume<'a>);
        impl serde::Serialize for Skip<'_, '_> {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(Some(self.0.view.counts().done as usize))?;
                for u in self.0.view.units() {
                    match u {
                        Ok((name, u)) if u.status == super::doc::UnitStatus::Done => {
                            seq.serialize_element(&name)?
                        }
                        Ok(_) => {}
                        Err(e) => {
                            let msg = crate::engine::ErrorChain(&e).to_string();
                            *self.0.damage.borrow_mut() = Some(e);
                            return Err(serde::ser::Error::custom(msg));
                        }
                    }
                }
                seq.end()
            }
        }
        // The fields of `ResumeSet`, in its order (a test compares the two).
        let mut st = s.serialize_struct("ResumeSet", 3)?;
        st.serialize_field("skip", &Skip(self))?;
        st.serialize_field("eligible", &self.open.eligible)?;
        st.serialize_field("dep_blocked", &self.open.dep_blocked)?;
        st.end()
    }
}
