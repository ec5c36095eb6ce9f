//! The tail cache (`TAIL`, FORMAT.md §15): the state a writer's replay built
//! over the newest snapshot, left beside the log (never fsynced) so that the
//! next open decodes and applies only the records after it. It is trusted
//! only for the records it names by content: an open still frames and
//! checksums every record, folds each into a digest, and uses the cache only
//! when the digest of the records up to the cache's last seq is the cache's.
//! Pure bytes here, and the two file operations at the edge.

use crate::engine::error::{Error, Result};
use crate::engine::format::masked_crc;
use crate::engine::io::vfs::{Vfs, open_or_create, write_all_at};
use std::io;
use std::path::Path;

/// The cache's file name in a store directory.
pub const TAIL_FILE: &str = "TAIL";
/// Its magic.
pub const TAIL_MAGIC: &[u8; 8] = b"RUNLOGtc";
/// The version of its layout.
pub const TAIL_VERSION: u16 = 1;
/// Bytes before the payload: magic, version, reserved, base seq, last seq,
/// digest, payload length.
pub const TAIL_HEAD_LEN: usize = 8 + 2 + 2 + 8 + 8 + 8 + 4;
/// The longest payload a cache may hold (a limit on a length read from disk):
/// a one-shot writer's tail is at most a delta step of log, some KiB.
pub const MAX_TAIL_PAYLOAD: usize = 16 << 20;
/// Records an open must have decoded and applied from the log (beyond any
/// cache it used) before its writer leaves a new cache: fewer are cheaper to
/// replay than the cache is to write.
pub const TAIL_CACHE_MIN_RECORDS: u64 = 8;

/// CRC-64 (XZ) by slice-by-16 tables: the digest's step.
static CRC64: crc::Crc<u64, crc::Table<16>> = crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_XZ);

/// The digest of the records from the one after the base snapshot on, one
/// record at a time: `d' = crc64(d ‖ seq ‖ payload)` (little-endian), from 0.
pub fn fold(digest: u64, seq: u64, payload: &[u8]) -> u64 {
    let mut d = CRC64.digest();
    d.update(&digest.to_le_bytes());
    d.update(&seq.to_le_bytes());
    d.update(payload);
    d.finalize()
}

/// A cache as its file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailCache {
    /// The seq of the snapshot the state stands on (0: none).
    pub base_seq: u64,
    /// The last record the state includes.
    pub last_seq: u64,
    /// [`fold`] over the records `base_seq + 1 ..= last_seq`.
    pub digest: u64,
    /// The state, as the machine encodes it.
    pub payload: Vec<u8>,
}

/// The file's bytes for `c`.
pub fn encode_tail_cache(c: &TailCache) -> Vec<u8> {
    let mut b = Vec::with_capacity(TAIL_HEAD_LEN + c.payload.len() + 4);
    b.extend_from_slice(TAIL_MAGIC);
    b.extend_from_slice(&TAIL_VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&c.base_seq.to_le_bytes());
    b.extend_from_slice(&c.last_seq.to_le_bytes());
    b.extend_from_slice(&c.digest.to_le_bytes());
    b.extend_from_slice(&(c.payload.len() as u32).to_le_bytes());
    b.extend_from_slice(&c.payload);
    let crc = masked_crc(&[&b]);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Reads a cache file's bytes, or says why they are not one. Never panics.
pub fn decode_tail_cache(b: &[u8]) -> std::result::Result<TailCache, String> {
    if b.len() < TAIL_HEAD_LEN + 4 {
        return Err(format!("{} bytes, shorter than a cache", b.len()));
    }
    if &b[..8] != TAIL_MAGIC {
        return Err("not a tail cache (magic)".into());
    }
    let version = u16::from_le_bytes([b[8], b[9]]);
    if version != TAIL_VERSION {
        return Err(format!("tail cache version {version}, this build reads {TAIL_VERSION}"));
    }
    let len = u32::from_le_bytes([b[36], b[37], b[38], b[39]]) as usize;
    if len > MAX_TAIL_PAYLOAD {
        return Err(format!("payload of {len} bytes, more than {MAX_TAIL_PAYLOAD}"));
    }
    if b.len() != TAIL_HEAD_LEN + len + 4 {
        return Err(format!(
            "{} bytes, but its header says {}",
            b.len(),
            TAIL_HEAD_LEN + len + 4
        ));
    }
    let end = TAIL_HEAD_LEN + len;
    let stored = u32::from_le_bytes([b[end], b[end + 1], b[end + 2], b[end + 3]]);
    if masked_crc(&[&b[..end]]) != stored {
        return Err("checksum mismatch".into());
    }
    if b[10..12] != [0, 0] {
        return Err("reserved bytes not zero".into());
    }
    let (base_seq, last_seq) = (u64_at(b, 12), u64_at(b, 20));
    if last_seq <= base_seq {
        return Err(format!("last seq {last_seq} not after base seq {base_seq}"));
    }
    Ok(TailCache {
        base_seq,
        last_seq,
        digest: u64_at(b, 28),
        payload: b[TAIL_HEAD_LEN..end].to_vec(),
    })
}

/// The cache in `dir`: `Ok(None)` when there is none; `Err(why)` when the
/// file is there but cannot be used (read or decoded): a cache is never
/// needed, so why is only reported.
pub fn read_tail_cache(vfs: &dyn Vfs, dir: &Path) -> std::result::Result<Option<TailCache>, String> {
    match vfs.read(&dir.join(TAIL_FILE)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot be read: {e}")),
        Ok(bytes) => decode_tail_cache((*bytes).as_ref()).map(Some),
    }
}

/// Writes `bytes` over `dir/TAIL`, in place: at offset 0, then cut to their
/// length; nothing fsynced. A reader that reads it meanwhile, or an open
/// after a crash, finds a length or a checksum that does not match, and
/// replays. (A temp file renamed over it cost more: ext4 starts the
/// writeback of a file renamed over another, about 1 ms on a busy disk,
/// under the writer lock.)
pub fn write_tail_cache(vfs: &dyn Vfs, dir: &Path, bytes: &[u8]) -> Result<()> {
    let path = dir.join(TAIL_FILE);
    let f = open_or_create(vfs, &path).map_err(|e| Error::io("open tail cache", &path, e))?;
    write_all_at(f.as_ref(), bytes, 0).map_err(|e| Error::io("write tail cache", &path, e))?;
    f.set_len(bytes.len() as u64)
        .map_err(|e| Error::io("cut tail cache", &path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> TailCache {
        TailCache {
            base_seq: 1001,
            last_seq: 1047,
            digest: 0x0123_4567_89ab_cdef,
            payload: (0..300u32).map(|i| (i * 31 % 251) as u8).collect(),
        }
    }

    #[test]
    fn a_cache_round_trips() {
        let c = cache();
        assert_eq!(decode_tail_cache(&encode_tail_cache(&c)), Ok(c));
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_refused() {
        let b = encode_tail_cache(&cache());
        for i in 0..b.len() * 8 {
            let mut x = b.clone();
            x[i / 8] ^= 1 << (i % 8);
            assert!(decode_tail_cache(&x).is_err(), "bit {i}");
        }
        for n in 0..b.len() {
            assert!(decode_tail_cache(&b[..n]).is_err(), "{n} bytes");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode_tail_cache(&longer).is_err());
    }

    #[test]
    fn a_payload_length_past_the_limit_is_refused_before_it_is_read() {
        let mut b = encode_tail_cache(&cache());
        b[36..40].copy_from_slice(&(MAX_TAIL_PAYLOAD as u32 + 1).to_le_bytes());
        assert!(decode_tail_cache(&b).unwrap_err().contains("more than"));
    }

    #[test]
    fn the_digest_depends_on_every_seq_and_byte_and_on_the_order() {
        let a = fold(fold(0, 5, b"one"), 6, b"two");
        assert_ne!(a, fold(fold(0, 5, b"one"), 7, b"two"));
        assert_ne!(a, fold(fold(0, 5, b"one"), 6, b"twp"));
        assert_ne!(a, fold(fold(0, 6, b"two"), 5, b"one"));
        assert_eq!(a, fold(fold(0, 5, b"one"), 6, b"two"));
    }
}
