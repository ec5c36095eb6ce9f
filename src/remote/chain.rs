//! Where a run's manifest chain stands (FORMAT.md §13.3): the slot a claim
//! takes and the head a reader takes. With rounds in flight (§13.4) the
//! newest manifest is not the head: a fenced writer's late PUTs may land above
//! a newer claim, and a slot may be empty while the one above it landed. So:
//!
//! * **The lowest empty slot `L`** at or above gc's floor: every slot below it
//!   exists, so nothing can land there any more. A claim goes there.
//! * **The head**: among the slots below `L`, the newest manifest with the
//!   greatest epoch. It lies within the last [`MAX_ROUNDS_IN_FLIGHT`] slots
//!   below `L` (a writer older than the head's claim has its slots below that
//!   claim + `MAX_ROUNDS_IN_FLIGHT`), so a reader reads only those.
//!
//! [`place`] and [`head_of`] are the rule, pure; [`read_chain`] lists and reads.

use super::client::Remote;
use super::error::{RemoteError, Result};
use super::layout::{
    FLOOR_DIR, MANIFEST_DIR, MAX_MANIFEST_LEN, MAX_ROUNDS_IN_FLIGHT, Manifest, manifest_name,
    parse_floor_name, parse_manifest_name,
};
use super::read_ahead::Want;

/// What a reader learns of the chain.
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    /// The head (`None`: no chain yet).
    pub head: Option<Manifest>,
    /// The lowest empty slot at or above the floor: where a claim goes.
    pub lowest_empty: u64,
    /// gc's floor: slots below it are ignored (0: none).
    pub floor: u64,
}

/// The first slot that counts and the lowest empty slot, from the listed
/// slots (any order) and the floor: the count starts at the lowest listed
/// slot at or above the floor (1 when none is listed and there is no floor).
/// `None` when a floor stands and no slot at or above it does (gc never
/// leaves that).
pub(crate) fn place(slots: &[u64], floor: u64) -> Option<(u64, u64)> {
    let mut above: Vec<u64> = slots.iter().copied().filter(|&s| s >= floor).collect();
    above.sort_unstable();
    above.dedup();
    let Some(&start) = above.first() else {
        return (floor == 0).then_some((1, 1));
    };
    let mut lowest = start;
    for &s in &above {
        if s != lowest {
            break;
        }
        lowest += 1;
    }
    Some((start, lowest))
}

/// The slots a reader reads to find the head: the last
/// [`MAX_ROUNDS_IN_FLIGHT`] below `lowest`, from `start`.
pub(crate) fn window(start: u64, lowest: u64) -> std::ops::Range<u64> {
    start.max(lowest.saturating_sub(MAX_ROUNDS_IN_FLIGHT))..lowest
}

/// The head among `window`'s manifests (in slot order): the newest with the
/// greatest epoch.
pub(crate) fn head_of(window: Vec<Manifest>) -> Option<Manifest> {
    let top = window.iter().map(|m| m.epoch).max()?;
    window.into_iter().rev().find(|m| m.epoch == top)
}

/// Lists the chain and reads its head's window: two LISTs (the manifests,
/// then gc's floors, in that order: a manifest the first listing misses
/// because gc deleted it has its floor in the second) and up to
/// [`MAX_ROUNDS_IN_FLIGHT`] GETs in flight together.
pub(crate) fn read_chain(remote: &Remote) -> Result<Chain> {
    // A manifest deleted by a concurrent gc between the listing and the read
    // makes the listing start over.
    for _ in 0..5 {
        let slots: Vec<u64> = remote
            .list("list manifests", MANIFEST_DIR)?
            .iter()
            .filter_map(|n| parse_manifest_name(n))
            .collect();
        let floor = remote
            .list("list gc floors", FLOOR_DIR)?
            .iter()
            .filter_map(|n| parse_floor_name(n))
            .max()
            .unwrap_or(0);
        let Some((start, lowest)) = place(&slots, floor) else {
            return Err(RemoteError::Diverged {
                reason: format!(
                    "{} has gc floor {floor} and no manifest at or above it",
                    remote.url()
                ),
            });
        };
        let wants = window(start, lowest)
            .map(|n| Want {
                op: "read manifest",
                rel: manifest_name(n),
                max_len: MAX_MANIFEST_LEN,
            })
            .collect::<Vec<_>>();
        let mut read = Vec::with_capacity(wants.len());
        for (n, got) in window(start, lowest).zip(remote.read_ahead(wants)) {
            match got? {
                Some(b) => read.push(Manifest::decode(n, &b)?),
                None => break,
            }
        }
        if read.len() as u64 == window(start, lowest).end - window(start, lowest).start {
            return Ok(Chain {
                head: head_of(read),
                lowest_empty: lowest,
                floor,
            });
        }
    }
    Err(RemoteError::Diverged {
        reason: format!(
            "the manifests of {} keep disappearing between listing and reading",
            remote.url()
        ),
    })
}

/// Reads the chain's head (`None`: no chain yet).
pub fn latest_manifest(remote: &Remote) -> Result<Option<Manifest>> {
    read_chain(remote).map(|c| c.head)
}

/// Reads and checks manifest `n` (`None` when absent).
pub fn read_manifest(remote: &Remote, n: u64) -> Result<Option<Manifest>> {
    match remote.get("read manifest", &manifest_name(n), MAX_MANIFEST_LEN)? {
        Some(b) => Manifest::decode(n, &b).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_empty_slot_counts_from_the_lowest_slot_at_or_above_the_floor() {
        assert_eq!(place(&[], 0), Some((1, 1)));
        assert_eq!(place(&[1, 2, 3], 0), Some((1, 4)));
        assert_eq!(
            place(&[1, 2, 4, 5], 0),
            Some((1, 3)),
            "a gap is where a claim goes"
        );
        assert_eq!(place(&[7, 8, 9], 0), Some((7, 10)), "gc'd before floors");
        assert_eq!(
            place(&[2, 7, 8, 10], 7),
            Some((7, 9)),
            "a late PUT below the floor is ignored"
        );
        assert_eq!(place(&[2, 3], 7), None);
        assert_eq!(place(&[], 7), None);
    }

    #[test]
    fn the_window_is_the_last_slots_below_the_lowest_empty() {
        assert_eq!(window(1, 4), 1..4);
        assert_eq!(window(1, 100), 92..100);
        assert_eq!(window(95, 100), 95..100);
        assert_eq!(window(1, 1), 1..1);
    }

    fn m(epoch: u64, number: u64) -> Manifest {
        Manifest::genesis(
            number,
            epoch,
            ("w".into(), "h".into()),
            "binary",
            String::new(),
        )
    }

    #[test]
    fn the_head_is_the_newest_manifest_with_the_greatest_epoch() {
        assert_eq!(head_of(vec![]), None);
        let h = head_of(vec![m(1, 1), m(2, 2), m(2, 3), m(1, 4), m(1, 5)]).unwrap();
        assert_eq!(
            (h.number, h.epoch),
            (3, 2),
            "late PUTs of epoch 1 above a claim"
        );
        let h = head_of(vec![m(3, 1), m(3, 2)]).unwrap();
        assert_eq!(h.number, 2);
    }
}
