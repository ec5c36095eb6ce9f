//! Retention that respects the chain: keep every object the last K manifests
//! reference; delete the rest, and the older manifests. An object is deleted
//! only when the chain has passed the manifest it was uploaded for (its name
//! carries that number), so an upload whose manifest has not landed yet is
//! never touched.

use super::client::Remote;
use super::error::{RemoteError, Result};
use super::layout::{
    CHUNK_DIR, MANIFEST_DIR, SNAPSHOT_DIR, manifest_name, object_manifest_number,
    parse_manifest_name,
};
use super::shipper::read_manifest;
use std::collections::BTreeSet;

/// What [`gc`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteGcReport {
    /// The manifests kept (the last K).
    pub kept_manifests: Vec<u64>,
    /// Older manifests deleted.
    pub deleted_manifests: Vec<u64>,
    /// Chunk and snapshot objects deleted.
    pub deleted_objects: Vec<String>,
}

/// Deletes what none of the last `keep` (at least 1) manifests references.
pub fn gc(remote: &Remote, keep: usize) -> Result<RemoteGcReport> {
    let keep = keep.max(1);
    let mut numbers: Vec<u64> = remote
        .list("list manifests", MANIFEST_DIR)?
        .iter()
        .filter_map(|n| parse_manifest_name(n))
        .collect();
    numbers.sort_unstable();
    let Some(&newest) = numbers.last() else {
        return Err(RemoteError::NoRemoteRun {
            url: remote.url().to_string(),
        });
    };
    let split = numbers.len().saturating_sub(keep);
    let (old, kept) = numbers.split_at(split);
    let mut referenced = BTreeSet::new();
    for &n in kept {
        // An unreadable kept manifest stops gc before anything is deleted.
        if let Some(m) = read_manifest(remote, n)? {
            referenced.extend(m.objects().map(str::to_string));
        }
    }
    let mut report = RemoteGcReport {
        kept_manifests: kept.to_vec(),
        ..Default::default()
    };
    for &n in old {
        remote.delete("delete old manifest", &manifest_name(n))?;
        report.deleted_manifests.push(n);
    }
    for dir in [CHUNK_DIR, SNAPSHOT_DIR] {
        for name in remote.list("list objects", dir)? {
            let Some(for_manifest) = object_manifest_number(&name) else {
                continue; // not ours: never touched
            };
            if for_manifest <= newest && !referenced.contains(&name) {
                remote.delete("delete unreferenced object", &name)?;
                report.deleted_objects.push(name);
            }
        }
    }
    Ok(report)
}
