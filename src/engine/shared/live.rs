//! The writer's live state: the machine's state and the seq it has reached.
//!
//! Its fields are its own. What it keeps: `state` is every accepted
//! transition applied in order, the last with seq `next_seq - 1`; a seq is
//! taken only by a transition [`Live::accept`] applied, so a refused one
//! leaves both as they were (`M::apply` must leave the state unchanged when it
//! refuses), and seqs are taken one by one, with no gap. Compaction may
//! read the state and hand it an installed snapshot, which changes what it
//! holds in memory, not what it is.

use crate::engine::error::Result;
use crate::engine::machine::Machine;
use crate::engine::snapshot::SnapshotData;

pub(crate) struct Live<M: Machine> {
    state: M::State,
    next_seq: u64,
}

impl<M: Machine> Live<M> {
    /// `state`, the history up to `next_seq - 1` replayed.
    pub(crate) fn new(state: M::State, next_seq: u64) -> Self {
        Live { state, next_seq }
    }

    /// The state: every accepted transition applied.
    pub(crate) fn state(&self) -> &M::State {
        &self.state
    }

    /// The seq the next accepted transition takes.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The seq of the last accepted transition (0 when none).
    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Applies `t` and returns the seq it takes, or `M`'s refusal (nothing
    /// applied, no seq taken). Damage met while reading the state is not the
    /// rules' refusal: `M::failure` keeps the two apart.
    pub(crate) fn accept(&mut self, t: &M::Transition) -> Result<u64> {
        M::apply(&mut self.state, t).map_err(M::failure)?;
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(seq)
    }

    /// The state's copy of what changed since the newest snapshot, when the
    /// machine offers one (`M::tail_copy`).
    pub(crate) fn tail_copy(&self) -> Option<M::State> {
        M::tail_copy(&self.state)
    }

    /// Hands the snapshot installed at `seq` to the state
    /// (`M::snapshot_installed`).
    pub(crate) fn snapshot_installed(&mut self, seq: u64, snapshot: SnapshotData<'_>) {
        M::snapshot_installed(&mut self.state, seq, snapshot);
    }
}
