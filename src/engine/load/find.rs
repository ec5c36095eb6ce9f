//! What a load finds first, before it reads a snapshot or a record: the
//! durability mark (read before anything else), the directory's listing
//! ([`Listing`], [`list_store`]), the store's codec and id from its oldest
//! readable header, and the key checked against them ([`check_key`],
//! [`check_key_check`]).

use super::read;
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::io::vfs::Vfs;
use crate::engine::log::frame::{SegmentHeader, decode_segment_header};
use crate::engine::log::mark::{MarkFound, read_mark};
use crate::engine::snapshot::is_table;
use crate::engine::snapshot::snapfile::decode_snapshot;
use crate::engine::snapshot::table::Table;
use crate::engine::tag::{Key, StoreId, key_check};
use std::path::Path;

/// The files of a store directory, sorted by seq.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// (first seq, file name) of each segment.
    pub segments: Vec<(u64, String)>,
    /// (seq, file name) of each snapshot.
    pub snapshots: Vec<(u64, String)>,
    /// Leftover temp files from an interrupted snapshot.
    pub temps: Vec<String>,
}

/// Lists a store directory. `NotFound` if it does not exist.
pub fn list_store(vfs: &dyn Vfs, dir: &Path) -> Result<Listing> {
    let names = vfs
        .list(dir)
        .map_err(|e| Error::io("list store directory", dir, e))?;
    let mut l = Listing::default();
    for name in names {
        if let Some(s) = parse_segment_name(&name) {
            l.segments.push((s, name));
        } else if let Some(s) = parse_snapshot_name(&name) {
            l.snapshots.push((s, name));
        } else if name.contains(TEMP_MARKER) {
            l.temps.push(name);
        }
    }
    l.segments.sort();
    l.snapshots.sort();
    Ok(l)
}

/// Bytes read from the start of a segment to decode its header: the longest
/// header of either codec (FORMAT.md §3, §10.3).
const SEGMENT_HEAD_READ: usize = if MAX_JSONL_HEADER_LEN > TAGGED_SEGMENT_HEADER_LEN {
    MAX_JSONL_HEADER_LEN
} else {
    TAGGED_SEGMENT_HEADER_LEN
};

/// Detects the codec (and a tagged store's id) of a store from its oldest
/// segment with a readable header (reading only the header: the segment may be
/// one the replay does not need), else from its newest readable snapshot.
fn detect_codec(
    vfs: &dyn Vfs,
    dir: &Path,
    l: &Listing,
    key: Option<&Key>,
) -> Result<Option<(Codec, Option<StoreId>)>> {
    for (_, name) in &l.segments {
        let path = dir.join(name);
        let head = vfs
            .read_head(&path, SEGMENT_HEAD_READ)
            .map_err(|e| Error::io("read segment header", &path, e))?;
        if let Ok(h) = decode_segment_header(&head) {
            check_key_check(&path, key, &h)?;
            return Ok(Some((h.codec, h.store_id)));
        }
    }
    for (_, name) in l.snapshots.iter().rev() {
        let path = dir.join(name);
        let bytes = read(vfs, &path, true, "read snapshot")?;
        if is_table((*bytes).as_ref()) {
            if let Ok(t) = Table::from_bytes(path, bytes, key) {
                return Ok(Some((t.codec(), t.store_id())));
            }
            continue;
        }
        if let Ok(v) = decode_snapshot((*bytes).as_ref()) {
            return Ok(Some((v.codec, v.tagging.map(|s| s.0))));
        }
    }
    Ok(None)
}

/// Refuses, at once and as such, a key that is not the one a tagged segment's
/// key check (FORMAT.md §10.6) was made with. A segment without a check (written
/// before key checks) leaves the tags to tell, as before.
pub(crate) fn check_key_check(path: &Path, key: Option<&Key>, h: &SegmentHeader) -> Result<()> {
    if let (Some(key), Some(id), Some(check)) = (key, h.store_id.as_ref(), h.key_check.as_ref())
        && key_check(key, id) != *check
    {
        return Err(Error::Key {
            path: path.to_path_buf(),
            reason: "wrong key: this is not the key the store was created with (its key check does not match); nothing was read or written".into(),
        });
    }
    Ok(())
}

/// Refuses a key for an untagged store and no key for a tagged one.
pub(crate) fn check_key(dir: &Path, key: Option<&Key>, store_id: Option<&StoreId>) -> Result<()> {
    let reason = match (key, store_id) {
        (None, Some(_)) => "store is tagged; pass its key",
        (Some(_), None) => {
            "store is not tagged, but a key was given; refusing to read unauthenticated data as if it were checked (open it without a key)"
        }
        _ => return Ok(()),
    };
    Err(Error::Key {
        path: dir.to_path_buf(),
        reason: reason.into(),
    })
}

/// What a load finds before it reads a snapshot or a record: the durability
/// mark (read before the listing), the listing, the codec and the store id.
pub(super) struct Found {
    pub(super) mark_found: MarkFound,
    pub(super) listing: Listing,
    /// The codec a readable header named (`None`: a store whose creation a
    /// crash cut short, read as binary).
    pub(super) detected: Option<Codec>,
    pub(super) codec: Codec,
    pub(super) store_id: Option<StoreId>,
}

pub(super) fn find(vfs: &dyn Vfs, dir: &Path, key: Option<&Key>) -> Result<Found> {
    // Before the listing: a mark is written only after its records were
    // fsynced, so every record it names is whole in what is read after it,
    // even beside a live writer (FORMAT.md §5.7).
    let mark_found = read_mark(vfs, dir)?;
    let listing = list_store(vfs, dir)?;
    if listing.segments.is_empty() && listing.snapshots.is_empty() {
        return Err(Error::NotFound {
            path: dir.to_path_buf(),
        });
    }
    let detected = detect_codec(vfs, dir, &listing, key)?;
    // The oldest readable header names the store; every file read must carry its id.
    let store_id = detected.and_then(|d| d.1);
    if detected.is_some() {
        check_key(dir, key, store_id.as_ref())?;
    }
    let detected = detected.map(|d| d.0);
    let codec = match detected {
        Some(c) => c,
        // A crash while a store was being created can leave its only segment with
        // its name durable but its header torn or empty: no record was ever
        // acknowledged in it, and classify calls it a whole-file torn tail. The
        // codec is unknown (`report.codec` stays None); the caller picks one.
        None if listing.snapshots.is_empty()
            && listing.segments.len() == 1
            && listing.segments[0].0 == 1 =>
        {
            Codec::Binary
        }
        None => {
            return Err(Error::Corrupt {
                path: dir.join(
                    listing
                        .segments
                        .first()
                        .or(listing.snapshots.last())
                        .map(|x| x.1.as_str())
                        .unwrap_or(""),
                ),
                offset: Some(0),
                seq: None,
                reason: "no segment or snapshot with a readable header".into(),
            });
        }
    };
    Ok(Found {
        mark_found,
        listing,
        detected,
        codec,
        store_id,
    })
}
