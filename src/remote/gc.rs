//! Retention that respects the chain (FORMAT.md §13.5): keep the head, the
//! `keep − 1` slots below it, every slot above it, and every object those
//! reference; delete the older manifests (after writing a floor that tells
//! readers to ignore the slots below it) and every chunk and snapshot
//! uploaded for a manifest at or below the head that none of the kept ones
//! references. An upload for a manifest not yet landed carries a number above
//! the head, so it is never touched.

use super::chain::{read_chain, read_manifest};
use super::client::Remote;
use super::error::{RemoteError, Result};
use super::layout::{
    CHUNK_DIR, FLOOR_DIR, MANIFEST_DIR, SNAPSHOT_DIR, floor_name, manifest_name,
    object_manifest_number, parse_floor_name, parse_manifest_name,
};
use std::collections::BTreeSet;

/// What [`gc`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteGcReport {
    /// The manifests kept: the head, the `keep − 1` below it, and any above it.
    pub kept_manifests: Vec<u64>,
    /// Older manifests deleted.
    pub deleted_manifests: Vec<u64>,
    /// Chunk and snapshot objects deleted.
    pub deleted_objects: Vec<String>,
}

/// Deletes what neither the chain head nor the `keep − 1` (`keep` at least 1)
/// manifests below it reference.
pub fn gc(remote: &Remote, keep: usize) -> Result<RemoteGcReport> {
    let keep = keep.max(1) as u64;
    let chain = read_chain(remote)?;
    let Some(head) = chain.head else {
        return Err(RemoteError::NoRemoteRun {
            url: remote.url().to_string(),
        });
    };
    let floor = (head.number + 1).saturating_sub(keep).max(chain.floor);
    let mut numbers: Vec<u64> = remote
        .list("list manifests", MANIFEST_DIR)?
        .iter()
        .filter_map(|n| parse_manifest_name(n))
        .collect();
    numbers.sort_unstable();
    let split = numbers.partition_point(|&n| n < floor);
    let (old, kept) = numbers.split_at(split);
    let mut referenced = BTreeSet::new();
    for &n in kept.iter().filter(|&&n| n <= head.number) {
        // An unreadable kept manifest stops gc before anything is deleted.
        if let Some(m) = read_manifest(remote, n)? {
            referenced.extend(m.objects().map(str::to_string));
        }
    }
    let mut report = RemoteGcReport {
        kept_manifests: kept.to_vec(),
        ..Default::default()
    };
    if !old.is_empty() {
        // The floor first: a reader that lists a manifest missing below it
        // then finds the floor, and never takes the hole for an empty slot.
        // (Found there: an earlier gc wrote the same floor.)
        if floor > chain.floor {
            remote.put_create("write gc floor", &floor_name(floor), vec![])?;
        }
        for &n in old {
            remote.delete("delete old manifest", &manifest_name(n))?;
            report.deleted_manifests.push(n);
        }
        for name in remote.list("list gc floors", FLOOR_DIR)? {
            if parse_floor_name(&name).is_some_and(|f| f < floor) {
                remote.delete("delete old gc floor", &name)?;
            }
        }
    }
    for dir in [CHUNK_DIR, SNAPSHOT_DIR] {
        for name in remote.list("list objects", dir)? {
            let Some(for_manifest) = object_manifest_number(&name) else {
                continue; // not ours: never touched
            };
            if for_manifest <= head.number && !referenced.contains(&name) {
                remote.delete("delete unreferenced object", &name)?;
                report.deleted_objects.push(name);
            }
        }
    }
    Ok(report)
}
