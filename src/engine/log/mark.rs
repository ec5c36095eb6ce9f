//! The durability mark (FORMAT.md §5.7): a small file, `DURABLE`, that says
//! "every record up to seq N was fsynced", written after an fsync returned and
//! never fsynced itself. A mark that survives proves its records durable, so
//! damage to them is corruption rather than a torn tail; a mark that is lost or
//! torn (it fails its checksum) proves nothing and only widens the window back
//! to the records' own `synced` watermarks. Pure encoding and decoding here,
//! plus the reader and the writer's handle.

use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::io::vfs::{SharedFile, Vfs, VfsFile, open_or_create, write_all_at, write_all_with};
use std::io;
use std::path::Path;

/// What a durability mark says: every record with seq ≤ `seq` was fsynced, and
/// record `seq` is the one whose frame ends at byte `end` of the segment whose
/// first seq is `segment`; or, when `segment` is `seq + 1`, that segment was
/// created durably (header and name) and holds no record yet, its header
/// ending at `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The highest seq proven durable.
    pub seq: u64,
    /// The first seq (the name) of the segment holding record `seq`.
    pub segment: u64,
    /// Where record `seq`'s frame ends in that segment.
    pub end: u64,
}

const SEQ_AT: usize = 12;
const SEGMENT_AT: usize = 20;
const END_AT: usize = 28;
const CRC_AT: usize = 36;

/// The mark's 40 bytes (FORMAT.md §5.7).
pub fn encode_mark(m: &Mark) -> [u8; MARK_LEN] {
    let mut b = [0u8; MARK_LEN];
    b[..8].copy_from_slice(MARK_MAGIC);
    b[8..10].copy_from_slice(&MARK_VERSION.to_le_bytes());
    b[SEQ_AT..SEQ_AT + 8].copy_from_slice(&m.seq.to_le_bytes());
    b[SEGMENT_AT..SEGMENT_AT + 8].copy_from_slice(&m.segment.to_le_bytes());
    b[END_AT..END_AT + 8].copy_from_slice(&m.end.to_le_bytes());
    let crc = masked_crc(&[&b[..CRC_AT]]);
    b[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a mark; `Err` says why the bytes are not one (a torn or lost write
/// leaves such bytes: the mark then proves nothing).
pub fn decode_mark(b: &[u8]) -> std::result::Result<Mark, String> {
    if b.len() != MARK_LEN {
        return Err(format!("{} bytes, a mark has {MARK_LEN}", b.len()));
    }
    if masked_crc(&[&b[..CRC_AT]]) != le_u32(b, CRC_AT) {
        return Err("checksum mismatch".into());
    }
    if &b[..8] != MARK_MAGIC {
        return Err("bad magic".into());
    }
    let version = le_u16(b, 8);
    if version != MARK_VERSION {
        return Err(format!(
            "mark version {version}, this build reads {MARK_VERSION}"
        ));
    }
    if b[10..12] != [0, 0] {
        return Err("reserved bytes not zero".into());
    }
    let m = Mark {
        seq: le_u64(b, SEQ_AT),
        segment: le_u64(b, SEGMENT_AT),
        end: le_u64(b, END_AT),
    };
    if m.segment == 0 || m.segment > m.seq.saturating_add(1) {
        return Err(format!(
            "seq {} in segment {}: not a record of that segment",
            m.seq, m.segment
        ));
    }
    Ok(m)
}

/// What the store's `DURABLE` file held when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkFound {
    /// No such file (a store written before format v3, or no fsync yet).
    Absent,
    /// A file that is not a mark (a torn write): it proves nothing.
    Unreadable(String),
    /// A mark.
    Valid(Mark),
}

impl MarkFound {
    /// The mark, when there is a valid one.
    pub fn mark(&self) -> Option<Mark> {
        match self {
            MarkFound::Valid(m) => Some(*m),
            _ => None,
        }
    }
}

/// Reads `dir/DURABLE`. Only I/O errors other than a missing file are errors.
pub fn read_mark(vfs: &dyn Vfs, dir: &Path) -> Result<MarkFound> {
    let path = dir.join(MARK_FILE);
    match vfs.read(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MarkFound::Absent),
        Err(e) => Err(Error::io("read durability mark", &path, e)),
        Ok(bytes) => Ok(match decode_mark((*bytes).as_ref()) {
            Ok(m) => MarkFound::Valid(m),
            Err(why) => MarkFound::Unreadable(why),
        }),
    }
}

/// The writer's handle on `DURABLE`: writes a mark after each fsync that
/// raised the durable watermark, with one positional write at offset 0, never
/// fsynced. A failure to write it is not a failure of the append (the records
/// are durable; only the proof of it is lost), so it is counted, not returned.
#[derive(Default)]
pub(crate) struct MarkWriter {
    file: Option<Box<dyn VfsFile>>,
    /// The (seq, segment) of the last mark written (or found at open).
    written: (u64, u64),
    /// Marks that could not be written.
    pub(crate) failures: u64,
}

impl MarkWriter {
    /// A writer whose store already holds the mark `found`.
    pub(crate) fn new(found: Option<Mark>) -> Self {
        MarkWriter {
            written: found.map_or((0, 0), |m| (m.seq, m.segment)),
            ..Default::default()
        }
    }

    /// The seq of the last mark written (or found at open).
    pub(crate) fn written_seq(&self) -> u64 {
        self.written.0
    }

    /// Writes `m` unless a mark at or past it was written already, by this
    /// writer or (`on_disk`, read under the sync lock) by another; through
    /// `kept`, the file's kept-open handle that `on_disk` was read through,
    /// when there is one and this writer has not opened the file itself (a
    /// one-shot writer: one open of `DURABLE` instead of two).
    pub(crate) fn write_above(
        &mut self,
        vfs: &dyn Vfs,
        dir: &Path,
        m: Mark,
        on_disk: Option<Mark>,
        kept: Option<&dyn SharedFile>,
    ) {
        if let Some(d) = on_disk {
            self.written = self.written.max((d.seq, d.segment));
        }
        self.write_through(vfs, dir, m, kept);
    }

    /// Writes `m` unless a mark at or past it was written already.
    pub(crate) fn write(&mut self, vfs: &dyn Vfs, dir: &Path, m: Mark) {
        self.write_through(vfs, dir, m, None);
    }

    fn write_through(&mut self, vfs: &dyn Vfs, dir: &Path, m: Mark, kept: Option<&dyn SharedFile>) {
        if (m.seq, m.segment) <= self.written || m.segment > m.seq + 1 || m.segment == 0 {
            return;
        }
        let r = (|| {
            if let (None, Some(h)) = (&self.file, kept) {
                return write_all_with(|b, at| h.write_at(b, at), &encode_mark(&m), 0);
            }
            if self.file.is_none() {
                // The path only for the open: a long-lived writer writes a
                // mark after every fsync, through the handle it keeps.
                self.file = Some(open_or_create(vfs, &dir.join(MARK_FILE))?);
            }
            let f = self.file.as_ref().expect("opened above");
            write_all_at(f.as_ref(), &encode_mark(&m), 0)
        })();
        match r {
            Ok(()) => self.written = (m.seq, m.segment),
            Err(_) => {
                self.file = None;
                self.failures += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_round_trips_and_every_flipped_bit_is_refused() {
        let m = Mark {
            seq: 41,
            segment: 1,
            end: 4096,
        };
        let b = encode_mark(&m);
        assert_eq!(decode_mark(&b), Ok(m));
        for i in 0..b.len() * 8 {
            let mut c = b;
            c[i / 8] ^= 1 << (i % 8);
            assert!(decode_mark(&c).is_err(), "bit {i} flipped still decodes");
        }
        for n in 0..b.len() {
            assert!(decode_mark(&b[..n]).is_err(), "cut at {n} decodes");
        }
        assert!(decode_mark(&[0u8; MARK_LEN]).is_err(), "zeros decode");
        // An empty segment's mark (created durably, no record yet) is one.
        let empty = Mark {
            seq: 41,
            segment: 42,
            end: 32,
        };
        assert_eq!(decode_mark(&encode_mark(&empty)), Ok(empty));
        let past = Mark {
            segment: 43,
            ..empty
        };
        assert!(decode_mark(&encode_mark(&past)).is_err());
    }
}
