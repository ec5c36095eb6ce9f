//! A one-shot writer's catch-up (FORMAT.md §5.8 step 1): its open replays
//! the log without the writer lock, as a reader does; under the lock it then
//! reads only what other writers appended since, from where that replay
//! ended, and applies it. Anything else that changed (a rotation, a torn or
//! damaged frame, a compaction's new segment or new snapshot) sends it back
//! to a full replay under the lock, which decides as any writer's open does.

use super::Loaded;
use super::find::{Listing, list_store};
use super::recovery::Verdict;
use super::replay::{record_payload, replay_one};
use crate::engine::error::{Error, Result};
use crate::engine::io::vfs::{Vfs, VfsFile};
use crate::engine::log::frame::{Frame, decode_record};
use crate::engine::log::scan::ScanEnd;
use crate::engine::machine::Machine;
use crate::engine::tag::Key;
use std::io;
use std::path::Path;

/// The most bytes a catch-up reads; past it the writer replays again (a
/// segment holds at most `Options::segment_bytes`, 64 MiB by default).
const MAX_CATCH_UP: usize = 256 << 20;

/// The last segment, open for writing since the catch-up read it: the
/// append goes through it (one open of the segment under the lock, not two).
pub(crate) struct CaughtUp {
    pub(crate) path: std::path::PathBuf,
    pub(crate) file: Box<dyn VfsFile>,
}

/// Brings `l`, loaded without the writer lock, up to the log as it is now,
/// under the lock. `Ok(None)`: the log changed in a way only a full load
/// reads, and `l` is to be thrown away (it may be half caught up).
pub(crate) fn catch_up<M: Machine>(
    vfs: &dyn Vfs,
    dir: &Path,
    key: Option<&Key>,
    l: &mut Loaded<M::State>,
) -> Result<Option<CaughtUp>> {
    if !matches!(l.verdict, Verdict::Clean) {
        return Ok(None);
    }
    let (Some(scan), Some(named)) = (l.scans.last(), l.listing.segments.last()) else {
        return Ok(None);
    };
    if scan.first_seq != Some(named.0) || scan.next_seq != l.next_seq {
        return Ok(None);
    }
    // A compaction since the load. It rotates the log before it renames its
    // snapshot into place, so the lock-free listing may have held its new
    // segment (the last one, read below) but not its snapshot: the state's
    // chain would be older than the store's, and a compaction by this writer
    // would choose its delta's parent and the files it deletes from that
    // stale chain, deleting a table a newer delta stands on. Under the writer
    // lock no compaction runs, so one listing now settles it (a failed one is
    // left to the full load, which reports it). The same listing shows a
    // rotation since the load: a segment after the one the replay ended in
    // (only a holder of the writer lock creates one, so none appears while
    // this writer holds it).
    let newest = |l: &Listing| l.snapshots.last().map(|s| s.0);
    match list_store(vfs, dir) {
        Ok(now) if newest(&now) == newest(&l.listing) && now.segments.last() == Some(named) => {}
        _ => return Ok(None),
    }
    let path = dir.join(&named.1);
    // From where the replay ended: what other writers appended since, read
    // through the descriptor the append writes through next.
    let base = scan.valid_len;
    let (file, bytes) = match vfs.open_write_read_from(&path, base, MAX_CATCH_UP) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read segment", &path, e)),
    };
    if bytes.len() >= MAX_CATCH_UP {
        return Ok(None);
    }
    let tagging = key.zip(l.store_id.as_ref());
    let mut at = 0usize;
    let mut seq = l.next_seq;
    let mut last_synced = None;
    let end = loop {
        match decode_record(l.codec, &bytes, at) {
            Frame::Record {
                seq: s,
                synced,
                payload,
                next,
            } if s == seq => {
                let body = record_payload(tagging, l.codec, &path, &bytes, at as u64, s, payload)
                    .map_err(|e| match e {
                    Error::Tampered {
                        path,
                        offset,
                        seq,
                        what,
                    } => Error::Tampered {
                        path,
                        offset: offset.map(|o| o + base),
                        seq,
                        what,
                    },
                    e => e,
                })?;
                if replay_one::<M>(&mut l.state, l.codec, body).is_err() {
                    // Damage, or a record this build refuses: the full load says which.
                    return Ok(None);
                }
                if let Some(t) = l.tail.as_mut() {
                    t.push(s, body);
                    t.applied += 1;
                }
                last_synced = Some(synced);
                seq += 1;
                at = next;
            }
            Frame::End => break ScanEnd::Clean,
            _ if bytes[at..].iter().all(|b| *b == 0) => {
                break ScanEnd::Preallocated {
                    offset: base + at as u64,
                };
            }
            // A torn or damaged frame, or a seq out of order.
            _ => return Ok(None),
        }
    };
    let first = named.0;
    // A last segment still without a record whose header the load's mark
    // does not prove: the compaction that made it rotated (and raised the
    // mark) after the load read the mark, before its listing. The open would
    // take the segment for unproven and copy it, which refuses every writer
    // whose fdatasync is still to come, though the rotation's fsync covered
    // their records; the full load under the lock reads the mark as it is.
    if seq == first && l.mark.is_none_or(|m| m.segment < first) {
        return Ok(None);
    }
    // Otherwise the mark other writers raised since is not taken up here: what
    // the lock-free load proved stays the proof, and the records above it are
    // vouched for or copied by the open as any (FORMAT.md §5.8).
    let caught = seq - l.next_seq;
    let grew = at as u64;
    let scan = l.scans.last_mut().expect("checked above");
    scan.count += caught;
    scan.next_seq = seq;
    scan.valid_len = base + at as u64;
    scan.file_len = base + bytes.len() as u64;
    scan.end = end;
    if let (Some(tail), Some(w)) = (l.unsynced.as_mut(), last_synced) {
        tail.watermark = Some(w);
    }
    l.next_seq = seq;
    l.report.records_replayed += caught;
    l.report.bytes_scanned += grew;
    l.report.last_seq = seq - 1;
    l.report.records_caught_up = caught;
    Ok(Some(CaughtUp { path, file }))
}
