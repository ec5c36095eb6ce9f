//! On-disk constants and fixed headers. Every name here appears in FORMAT.md;
//! offsets are derived from field sizes, never typed by hand.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Which encoding a store uses for its payloads. Recorded in every file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Binary frames, payloads encoded with `postcard`.
    Binary,
    /// One JSON object per line, payloads as JSON (readable with `jq`).
    Jsonl,
}

impl Codec {
    /// The byte recorded in binary headers.
    pub fn id(self) -> u8 {
        match self {
            Codec::Binary => CODEC_BINARY,
            Codec::Jsonl => CODEC_JSONL,
        }
    }

    /// The codec for a header byte, if known.
    pub fn from_id(id: u8) -> Option<Codec> {
        match id {
            CODEC_BINARY => Some(Codec::Binary),
            CODEC_JSONL => Some(Codec::Jsonl),
            _ => None,
        }
    }

    /// The name used in JSONL headers and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Binary => "binary",
            Codec::Jsonl => "jsonl",
        }
    }
}

impl std::str::FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "binary" => Ok(Codec::Binary),
            "jsonl" => Ok(Codec::Jsonl),
            other => Err(format!(
                "unknown codec {other:?} (expected binary or jsonl)"
            )),
        }
    }
}

/// `FORMAT_VERSION`: bumped whenever a reader of the previous version could misread a file.
pub const FORMAT_VERSION: u16 = 1;
/// The version in every file header of a tagged store (FORMAT.md §10). A reader
/// of version 1 refuses such files instead of misreading them; files of an
/// untagged store still carry [`FORMAT_VERSION`] and are unchanged.
pub const TAGGED_FORMAT_VERSION: u16 = 2;
/// Codec byte for [`Codec::Binary`].
pub const CODEC_BINARY: u8 = 1;
/// Codec byte for [`Codec::Jsonl`].
pub const CODEC_JSONL: u8 = 2;

/// Magic at offset 0 of a binary segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"RUNLOGsg";
/// Magic at offset 0 of a binary snapshot.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"RUNLOGsn";
/// Every JSONL header line starts with these bytes; used to tell codecs apart.
pub const JSONL_HEADER_PREFIX: &[u8] = b"{\"runlog\":";

/// Largest payload a record may carry. Checked before allocating on read and before writing.
pub const MAX_RECORD_LEN: u32 = 16 << 20;
/// Largest snapshot payload.
pub const MAX_SNAPSHOT_LEN: u64 = 4 << 30;
/// Largest JSONL header line accepted.
pub const MAX_JSONL_HEADER_LEN: usize = 256;

/// Added to every checksum after rotation, so an all-zero region never validates.
pub const CRC_MASK_DELTA: u32 = 0xa282_ead8;

/// How many bytes a process checksums by table before it turns to
/// `crc32fast`. Both compute the same CRC-32 (IEEE); the split is cost only.
/// `crc32fast` is SIMD, ≈12× the table's throughput on a 4 KiB block, but its
/// first call in a process detects the CPU's features, and `cpuid` traps in a
/// virtual machine: ≈47 µs here, the time the table takes for ≈110 KiB. A
/// one-shot writer checksums a few KiB in all (docs/PERFORMANCE.md, "What a
/// one-shot call costs beyond the floor"); a process that checksums more
/// pays at most this budget's table time (≈13 µs) once, then the detection,
/// as before.
pub(crate) const CRC_TABLE_BUDGET: usize = 32 << 10;

/// Bytes this process has checksummed by table so far (it stops counting
/// once past [`CRC_TABLE_BUDGET`]: after that a checksum only reads it).
static CRC_BY_TABLE: AtomicUsize = AtomicUsize::new(0);

/// CRC-32 (IEEE) by slice-by-16 tables built at compile time: no detection.
static CRC32_TABLE: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);

/// A checksum as stored on disk: crc32 (IEEE) of the covered bytes, rotated and offset.
pub fn masked_crc(parts: &[&[u8]]) -> u32 {
    let covered: usize = parts.iter().map(|p| p.len()).sum();
    let by_table = CRC_BY_TABLE.load(Ordering::Relaxed) < CRC_TABLE_BUDGET
        && CRC_BY_TABLE.fetch_add(covered, Ordering::Relaxed) + covered <= CRC_TABLE_BUDGET;
    let crc = if by_table {
        let mut d = CRC32_TABLE.digest();
        for p in parts {
            d.update(p);
        }
        d.finalize()
    } else {
        let mut h = crc32fast::Hasher::new();
        for p in parts {
            h.update(p);
        }
        h.finalize()
    };
    crc.rotate_right(15).wrapping_add(CRC_MASK_DELTA)
}

// ---- binary segment header -------------------------------------------------
// magic | version u16 | codec u8 | reserved u8 | first_seq u64 | reserved u64 | header_crc u32
pub(crate) const SEG_MAGIC_END: usize = SEGMENT_MAGIC.len();
pub(crate) const SEG_VERSION_END: usize = SEG_MAGIC_END + size_of::<u16>();
pub(crate) const SEG_CODEC_AT: usize = SEG_VERSION_END;
pub(crate) const SEG_FIRST_SEQ_AT: usize = SEG_CODEC_AT + 2;
pub(crate) const SEG_RESERVED_AT: usize = SEG_FIRST_SEQ_AT + size_of::<u64>();
pub(crate) const SEG_CRC_AT: usize = SEG_RESERVED_AT + size_of::<u64>();
/// Length of a binary segment header.
pub const SEGMENT_HEADER_LEN: usize = SEG_CRC_AT + size_of::<u32>();
/// Bytes of a store id (FORMAT.md §10).
pub const STORE_ID_LEN: usize = 16;
/// Bytes of a record, snapshot or table tag (the first 16 bytes of keyed BLAKE3).
pub const TAG_LEN: usize = 16;
// tagged (version 2): the same fields, then store_id [16] | header_crc u32
pub(crate) const SEG_STORE_ID_AT: usize = SEG_CRC_AT;
pub(crate) const SEG_TAGGED_CRC_AT: usize = SEG_STORE_ID_AT + STORE_ID_LEN;
/// Length of a binary segment header of a tagged store.
pub const TAGGED_SEGMENT_HEADER_LEN: usize = SEG_TAGGED_CRC_AT + size_of::<u32>();

// ---- binary record frame -----------------------------------------------------
// len u32 | seq u64 | synced u64 | header_crc u32 | payload [len] | crc u32
pub(crate) const REC_SEQ_AT: usize = size_of::<u32>();
pub(crate) const REC_SYNCED_AT: usize = REC_SEQ_AT + size_of::<u64>();
pub(crate) const REC_HCRC_AT: usize = REC_SYNCED_AT + size_of::<u64>();
/// Bytes before the payload of a binary record.
pub const RECORD_HEADER_LEN: usize = REC_HCRC_AT + size_of::<u32>();
/// Bytes after the payload of a binary record.
pub const RECORD_TRAILER_LEN: usize = size_of::<u32>();

// ---- binary snapshot header --------------------------------------------------
// magic | version u16 | codec u8 | reserved u8 | reserved u32 | seq u64 | len u64 | payload_crc u32 | header_crc u32
pub(crate) const SNAP_CODEC_AT: usize = SNAPSHOT_MAGIC.len() + size_of::<u16>();
pub(crate) const SNAP_SEQ_AT: usize = SNAP_CODEC_AT + 2 + size_of::<u32>();
pub(crate) const SNAP_LEN_AT: usize = SNAP_SEQ_AT + size_of::<u64>();
pub(crate) const SNAP_PCRC_AT: usize = SNAP_LEN_AT + size_of::<u64>();
pub(crate) const SNAP_HCRC_AT: usize = SNAP_PCRC_AT + size_of::<u32>();
/// Length of a binary snapshot header.
pub const SNAPSHOT_HEADER_LEN: usize = SNAP_HCRC_AT + size_of::<u32>();
// tagged (version 2): ... len u64 | store_id [16] | tag [16] | payload_crc u32 | header_crc u32
pub(crate) const SNAP_STORE_ID_AT: usize = SNAP_PCRC_AT;
pub(crate) const SNAP_TAG_AT: usize = SNAP_STORE_ID_AT + STORE_ID_LEN;
pub(crate) const SNAP_TAGGED_PCRC_AT: usize = SNAP_TAG_AT + TAG_LEN;
pub(crate) const SNAP_TAGGED_HCRC_AT: usize = SNAP_TAGGED_PCRC_AT + size_of::<u32>();
/// Length of a binary snapshot header of a tagged store.
pub const TAGGED_SNAPSHOT_HEADER_LEN: usize = SNAP_TAGGED_HCRC_AT + size_of::<u32>();

// ---- file names ----------------------------------------------------------------
/// Prefix of segment file names: `seg-<first seq, 20 digits>.log`.
pub const SEGMENT_PREFIX: &str = "seg-";
/// Suffix of segment file names.
pub const SEGMENT_SUFFIX: &str = ".log";
/// Prefix of snapshot file names: `snap-<seq, 20 digits>.snap`.
pub const SNAPSHOT_PREFIX: &str = "snap-";
/// Suffix of snapshot file names.
pub const SNAPSHOT_SUFFIX: &str = ".snap";
/// Marker inside temp file names: `.tmp-<random>`.
pub const TEMP_MARKER: &str = ".tmp-";
/// Marker of quarantined torn tails: `<segment>.broken-<offset>`.
pub const QUARANTINE_MARKER: &str = ".broken-";
/// The writer's lock file; holds the owner's pid.
pub const LOCK_FILE: &str = "LOCK";
/// The durability mark (FORMAT.md §5.7): "every record up to seq N was fsynced".
pub const MARK_FILE: &str = "DURABLE";
/// Magic of the durability mark.
pub const MARK_MAGIC: &[u8; 8] = b"RUNLOGdm";
/// Version of the durability mark's layout (format v3).
pub const MARK_VERSION: u16 = 3;
/// Length of the durability mark: magic, version, reserved, seq, segment,
/// end offset, masked CRC.
pub const MARK_LEN: usize = 8 + 2 + 2 + 8 + 8 + 8 + 4;

/// The sync lock (FORMAT.md §5.8): held around every fsync of the log, by any
/// writer process; its content is the holder, as `LOCK`'s.
pub const SYNC_LOCK_FILE: &str = "SYNC";
/// The writers' shared state (FORMAT.md §5.8): the appended position and the
/// sync state, two checksummed slots, never fsynced, a hint rebuilt by writers.
pub const SHARED_FILE: &str = "SHARED";
/// Magic of the appended-position slot of `SHARED`.
pub const APPENDED_MAGIC: &[u8; 8] = b"RUNLOGap";
/// Magic of the sync-state slot of `SHARED`.
pub const SYNC_STATE_MAGIC: &[u8; 8] = b"RUNLOGss";
/// Version of both `SHARED` slots' layout.
pub const SHARED_VERSION: u16 = 2;
/// Length of one `SHARED` slot; the appended position is at 0, the sync state
/// at `SHARED_SLOT_LEN`, and a reader reads no more than two slots.
pub const SHARED_SLOT_LEN: usize = 64;

/// File name of the segment whose first record has `seq`.
pub fn segment_name(first_seq: u64) -> String {
    format!("{SEGMENT_PREFIX}{first_seq:020}{SEGMENT_SUFFIX}")
}

/// File name of the snapshot covering records up to `seq`.
pub fn snapshot_name(seq: u64) -> String {
    format!("{SNAPSHOT_PREFIX}{seq:020}{SNAPSHOT_SUFFIX}")
}

fn parse_numbered(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The first seq named by a segment file name.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    parse_numbered(name, SEGMENT_PREFIX, SEGMENT_SUFFIX)
}

/// The seq named by a snapshot file name.
pub fn parse_snapshot_name(name: &str) -> Option<u64> {
    parse_numbered(name, SNAPSHOT_PREFIX, SNAPSHOT_SUFFIX)
}

pub(crate) fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table and the SIMD checksum agree on every length, the parts split
    /// anywhere, whichever of them a call takes (the table while the budget
    /// lasts, then the SIMD): which one checksums changes no stored checksum.
    #[test]
    fn the_table_crc_and_the_simd_crc_are_the_same_crc_at_every_length() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..2 * CRC_TABLE_BUDGET + 4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let simd = |b: &[u8]| crc32fast::hash(b);
        let lens = (0..=4200).chain(CRC_TABLE_BUDGET - 40..=CRC_TABLE_BUDGET + 40);
        for n in lens {
            let b = &bytes[..n];
            let table = CRC32_TABLE.checksum(b);
            assert_eq!(table, simd(b), "length {n}");
            let want = simd(b).rotate_right(15).wrapping_add(CRC_MASK_DELTA);
            assert_eq!(masked_crc(&[b]), want, "length {n}, one part");
            for cut in [0, 1, n / 3, n / 2, n.saturating_sub(1), n] {
                let (a, c) = b.split_at(cut.min(n));
                assert_eq!(masked_crc(&[a, c]), want, "length {n}, cut at {cut}");
            }
        }
        // A check value every CRC-32 (IEEE) implementation shares.
        assert_eq!(CRC32_TABLE.checksum(b"123456789"), 0xcbf4_3926);
        assert!(
            CRC_BY_TABLE.load(Ordering::Relaxed) >= CRC_TABLE_BUDGET,
            "the sweep covers more than the budget: masked_crc took the SIMD path too"
        );
    }

    #[test]
    fn layout_matches_format_md() {
        assert_eq!(SEGMENT_HEADER_LEN, 32);
        assert_eq!(RECORD_HEADER_LEN, 24);
        assert_eq!(SNAPSHOT_HEADER_LEN, 40);
        assert_eq!(TAGGED_SEGMENT_HEADER_LEN, 48);
        assert_eq!(TAGGED_SNAPSHOT_HEADER_LEN, 72);
        assert_eq!((SEG_STORE_ID_AT, SEG_TAGGED_CRC_AT), (28, 44));
        assert_eq!(MARK_LEN, 40);
        assert_eq!(
            (SNAP_STORE_ID_AT, SNAP_TAG_AT, SNAP_TAGGED_PCRC_AT),
            (32, 48, 64)
        );
    }

    #[test]
    fn zeros_never_checksum_to_zero() {
        for n in 0..64 {
            assert_ne!(masked_crc(&[&vec![0u8; n]]), 0, "{n} zero bytes");
        }
    }

    #[test]
    fn names_round_trip_and_reject_lookalikes() {
        assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
        assert_eq!(parse_snapshot_name(&snapshot_name(7)), Some(7));
        assert_eq!(parse_segment_name("seg-1.log"), None);
        assert_eq!(parse_segment_name("seg-0000000000000000000x.log"), None);
        assert_eq!(
            parse_segment_name("seg-00000000000000000001.log.broken-3"),
            None
        );
    }
}
