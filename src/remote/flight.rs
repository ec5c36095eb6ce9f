//! The ship rounds a writer has in flight (FORMAT.md §13.4): its manifests
//! sent to consecutive slots and not yet settled, oldest first. Pure: the
//! PUTs are made by the caller, outside any lock, and their outcomes recorded
//! here. The rules, each a line below:
//!
//! * **Window.** Slot `m` is sent only once every slot of this writer at or
//!   below `m − K` is settled: fewer than `K` unsettled in the queue.
//! * **Acknowledge in slot order.** The queue's front settles when it landed
//!   (its records are acknowledged) or was found taken by a lower epoch
//!   (superseded: a later slot of this writer carries its records, as
//!   manifests are cumulative). A slot taken by an equal or higher epoch
//!   fences the writer once it reaches the front; nothing after it settles.
//! * **Lost answers.** A PUT with no clear answer is sent again, byte for
//!   byte, before its fate is known; the slots after it wait.

use super::layout::Manifest;
use std::collections::VecDeque;
use std::sync::Arc;

/// What became of one slot's PUT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A PUT is under way (a caller is making it).
    Sending,
    /// The last PUT got no clear answer: to be sent again as is.
    Unknown,
    /// Created by this writer (or found there, byte for byte).
    Landed,
    /// Taken by a lower epoch's late manifest.
    Superseded,
    /// Taken by this epoch `newer` (at least this writer's).
    Fenced(u64),
}

/// One slot in flight: the manifest, its bytes, and its outcome so far.
pub(crate) struct Slot {
    pub manifest: Manifest,
    pub bytes: Arc<Vec<u8>>,
    pub outcome: Outcome,
    /// Its new records ride inline (the round is one PUT).
    pub inline: bool,
}

/// What settling the front of the queue found.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    /// The newest manifest acknowledged now, if any.
    pub landed: Option<Manifest>,
    /// Manifests that landed now.
    pub rounds: u64,
    /// Of them, rounds whose new records rode inline.
    pub inline_rounds: u64,
    /// The front was fenced: (newer epoch, slot).
    pub fenced: Option<(u64, u64)>,
}

/// The queue.
pub(crate) struct Flight {
    slots: VecDeque<Slot>,
    rounds: usize,
}

impl Flight {
    /// An empty queue keeping at most `rounds` (at least 1) unsettled.
    pub fn new(rounds: u64) -> Flight {
        Flight {
            slots: VecDeque::new(),
            rounds: rounds.max(1) as usize,
        }
    }

    /// Whether a new slot may be sent: the window has room and no slot of
    /// the queue was found fenced.
    pub fn has_room(&self) -> bool {
        self.slots.len() < self.rounds
            && !self
                .slots
                .iter()
                .any(|s| matches!(s.outcome, Outcome::Fenced(_)))
    }

    /// Whether a slot still to settle (sending, unknown, or landed behind
    /// the front) carries `seq`: its caller waits for it.
    pub fn covers(&self, seq: u64) -> bool {
        self.slots.iter().any(|s| {
            s.manifest.shipped >= seq
                && matches!(
                    s.outcome,
                    Outcome::Sending | Outcome::Unknown | Outcome::Landed
                )
        })
    }

    /// Queues `manifest` as sent (its caller makes the PUT) and returns its
    /// bytes; `inline`: its new records ride in it.
    pub fn push(&mut self, manifest: Manifest, inline: bool) -> Arc<Vec<u8>> {
        let bytes = Arc::new(manifest.encode());
        self.slots.push_back(Slot {
            manifest,
            bytes: bytes.clone(),
            outcome: Outcome::Sending,
            inline,
        });
        bytes
    }

    /// The oldest slot whose PUT got no clear answer, marked as sent again:
    /// its number and bytes, for the caller to send.
    pub fn resend(&mut self) -> Option<(u64, Arc<Vec<u8>>)> {
        let s = self
            .slots
            .iter_mut()
            .find(|s| s.outcome == Outcome::Unknown)?;
        s.outcome = Outcome::Sending;
        Some((s.manifest.number, s.bytes.clone()))
    }

    /// Records slot `number`'s outcome (a slot not in the queue is ignored).
    pub fn record(&mut self, number: u64, outcome: Outcome) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.manifest.number == number) {
            s.outcome = outcome;
        }
    }

    /// Settles the front: pops every landed or superseded slot in order,
    /// up to the first still unknown, sending, or fenced.
    pub fn settle(&mut self) -> Settled {
        let mut out = Settled::default();
        while let Some(front) = self.slots.front() {
            match front.outcome {
                Outcome::Landed => {
                    out.rounds += 1;
                    out.inline_rounds += u64::from(front.inline);
                    out.landed = self.slots.pop_front().map(|s| s.manifest);
                }
                Outcome::Superseded => {
                    self.slots.pop_front();
                }
                Outcome::Fenced(newer) => {
                    out.fenced = Some((newer, front.manifest.number));
                    break;
                }
                Outcome::Sending | Outcome::Unknown => break,
            }
        }
        out
    }

    /// Slots not yet settled.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when every slot sent has settled.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(number: u64, shipped: u64) -> Manifest {
        let mut m = Manifest::genesis(number, 2, ("w".into(), "h".into()), "binary", String::new());
        m.shipped = shipped;
        m
    }

    #[test]
    fn slots_are_acknowledged_in_order_whatever_order_they_land_in() {
        let mut f = Flight::new(3);
        f.push(m(5, 10), true);
        f.push(m(6, 11), true);
        f.push(m(7, 12), true);
        assert!(!f.has_room(), "three in flight fill a window of three");
        f.record(7, Outcome::Landed);
        f.record(6, Outcome::Landed);
        let s = f.settle();
        assert!(s.landed.is_none(), "slot 5 is still out");
        assert!(f.covers(12) && f.covers(10));
        f.record(5, Outcome::Landed);
        let s = f.settle();
        assert_eq!(s.landed.map(|m| m.number), Some(7));
        assert_eq!((s.rounds, f.len()), (3, 0));
    }

    #[test]
    fn a_superseded_slot_is_carried_by_the_next_and_its_records_wait_for_it() {
        let mut f = Flight::new(2);
        f.push(m(5, 10), true);
        f.push(m(6, 11), true);
        f.record(6, Outcome::Superseded);
        f.record(5, Outcome::Landed);
        let s = f.settle();
        assert_eq!(s.landed.map(|m| m.number), Some(5));
        assert!(!f.covers(11), "record 11 rode only in the superseded slot");
        assert!(f.has_room());
    }

    #[test]
    fn a_fenced_slot_stops_the_queue_after_what_landed_before_it() {
        let mut f = Flight::new(3);
        f.push(m(5, 10), true);
        f.push(m(6, 11), true);
        f.push(m(7, 12), true);
        f.record(6, Outcome::Fenced(9));
        f.record(7, Outcome::Landed);
        assert!(!f.has_room(), "nothing more is sent once fenced");
        f.record(5, Outcome::Landed);
        let s = f.settle();
        assert_eq!(s.landed.map(|m| m.number), Some(5));
        assert_eq!(s.fenced, Some((9, 6)));
        assert_eq!(
            f.len(),
            2,
            "slot 7 landed behind the fence and is never acknowledged"
        );
    }

    #[test]
    fn a_lost_answer_is_sent_again_as_is_before_the_slots_after_it_settle() {
        let mut f = Flight::new(2);
        let first = f.push(m(5, 10), true);
        f.push(m(6, 11), true);
        f.record(5, Outcome::Unknown);
        f.record(6, Outcome::Landed);
        assert!(f.settle().landed.is_none());
        let (n, again) = f.resend().unwrap();
        assert_eq!((n, again), (5, first));
        assert!(f.resend().is_none(), "one resend at a time");
        f.record(5, Outcome::Landed);
        assert_eq!(f.settle().landed.map(|m| m.number), Some(6));
    }
}
