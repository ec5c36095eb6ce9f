//! A one-shot writer's catch-up (FORMAT.md §5.8 step 1): its open replays
//! the log without the writer lock, as a reader does; under the lock it then
//! reads only what other writers appended since, from where that replay
//! ended, and applies it. Anything else that changed (a rotation, a torn or
//! damaged frame, a compaction's new segment) sends it back to a full replay
//! under the lock, which decides as any writer's open does.

use super::Machine;
use super::error::Result;
use super::format::*;
use super::frame::{Frame, decode_record};
use super::load::{Loaded, record_payload, replay_one};
use super::recovery::Verdict;
use super::scan::ScanEnd;
use super::tag::Key;
use super::vfs::Vfs;
use std::io;
use std::path::Path;

/// Brings `l`, loaded without the writer lock, up to the log as it is now,
/// under the lock. `Ok(false)`: the log changed in a way only a full load
/// reads, and `l` is to be thrown away (it may be half caught up).
pub(crate) fn catch_up<M: Machine>(
    vfs: &dyn Vfs,
    dir: &Path,
    key: Option<&Key>,
    l: &mut Loaded<M::State>,
) -> Result<bool> {
    if !matches!(l.verdict, Verdict::Clean) {
        return Ok(false);
    }
    let (Some(scan), Some(named)) = (l.scans.last(), l.listing.segments.last()) else {
        return Ok(false);
    };
    if scan.first_seq != Some(named.0) || scan.next_seq != l.next_seq {
        return Ok(false);
    }
    let path = dir.join(&named.1);
    // Under the writer lock: nothing truncates the segment while it is mapped.
    let bytes = match vfs.read_mapped(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(super::error::Error::io("read segment", &path, e)),
    };
    let bytes: &[u8] = (*bytes).as_ref();
    let keying = key.zip(l.store_id.as_ref());
    let mut at = scan.valid_len as usize;
    let mut seq = l.next_seq;
    let mut last_synced = None;
    let end = loop {
        match decode_record(l.codec, bytes, at) {
            Frame::Record {
                seq: s,
                synced,
                payload,
                next,
            } if s == seq => {
                let body = record_payload(keying, l.codec, &path, bytes, at as u64, s, payload)?;
                if replay_one::<M>(&mut l.state, l.codec, body).is_err() {
                    // Damage, or a record this build refuses: the full load says which.
                    return Ok(false);
                }
                last_synced = Some(synced);
                seq += 1;
                at = next;
            }
            Frame::End => break ScanEnd::Clean,
            _ if bytes[at..].iter().all(|b| *b == 0) => {
                break ScanEnd::Preallocated { offset: at as u64 };
            }
            // A torn or damaged frame, or a seq out of order.
            _ => return Ok(false),
        }
    };
    // A rotation since the load: the history goes on in another segment.
    match vfs.read_head(&dir.join(segment_name(seq)), 1) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        _ => return Ok(false),
    }
    // The mark other writers raised since is not taken up here: what the
    // lock-free load proved stays the proof, and the records above it are
    // vouched for or copied by the open as any (FORMAT.md §5.8).
    let caught = seq - l.next_seq;
    let grew = at as u64 - scan.valid_len;
    let scan = l.scans.last_mut().expect("checked above");
    scan.count += caught;
    scan.next_seq = seq;
    scan.valid_len = at as u64;
    scan.file_len = bytes.len() as u64;
    scan.end = end;
    if let (Some(tail), Some(w)) = (l.unsynced.as_mut(), last_synced) {
        tail.watermark = Some(w);
    }
    l.next_seq = seq;
    l.report.records_replayed += caught;
    l.report.bytes_scanned += grew;
    l.report.last_seq = seq - 1;
    l.report.records_caught_up = caught;
    Ok(true)
}
