//! Constants and fixed layouts of a table snapshot (FORMAT.md §11). Every name
//! here appears in the document; offsets are derived from field sizes, never
//! typed by hand. Pure helpers over bytes, no I/O.

use crate::engine::format::{le_u16, le_u32, le_u64, masked_crc};
use crate::engine::tag::{STORE_ID_LEN, StoreId, TAG_LEN, Tag};

/// Magic at offset 0 of a table snapshot.
pub const TABLE_MAGIC: [u8; 8] = *b"RUNLOGtb";
/// Magic at the start of a table snapshot's footer.
pub const TABLE_FOOTER_MAGIC: [u8; 8] = *b"RUNLOGtf";
/// The format version of a full table snapshot (format v2).
pub const TABLE_FORMAT_VERSION: u16 = 2;
/// The format version of a delta table (format v3, FORMAT.md §14): a table that
/// holds only what changed since its parent snapshot.
pub const TABLE_DELTA_VERSION: u16 = 3;
/// The format version of a full table with a paged index (FORMAT.md §11.8).
pub const TABLE_PAGED_VERSION: u16 = 4;
/// The format version of a delta table with a paged index (FORMAT.md §11.8, §14).
pub const TABLE_PAGED_DELTA_VERSION: u16 = 5;
/// File header flag: the table is tagged (block tags in the index, a table tag in the footer).
pub const TABLE_FLAG_TAGGED: u8 = 1;
/// File header flag: the table is a delta (version 3 only); bytes 20..28 hold
/// its parent's seq.
pub const TABLE_FLAG_DELTA: u8 = 2;

/// Default target size of a data block body.
pub const TABLE_BLOCK_BYTES: usize = 4096;
/// Largest block target a writer accepts.
pub const MAX_TABLE_BLOCK_BYTES: usize = 64 << 10;
/// Largest key.
pub const MAX_TABLE_KEY_LEN: usize = 1024;
/// Largest value.
pub const MAX_TABLE_VALUE_LEN: usize = 1 << 20;
/// Largest caller header (the header block's body).
pub const MAX_TABLE_HEADER_LEN: usize = 16 << 20;
/// Largest index body (a paged index: its pages and directory together).
pub const MAX_TABLE_INDEX_LEN: usize = 1 << 30;
/// Default index entries per index page of a paged table (FORMAT.md §11.8).
pub const TABLE_PAGE_ENTRIES: usize = 64;
/// Most index entries in one index page, on write and on read.
pub const MAX_TABLE_PAGE_ENTRIES: usize = 1024;

// ---- file header (32 bytes at offset 0) ---------------------------------------
// magic | version u16 | codec u8 | flags u8 | seq u64 | reserved [8] (a delta's
// parent seq) | header_crc u32
pub(crate) const TH_VERSION_AT: usize = TABLE_MAGIC.len();
pub(crate) const TH_CODEC_AT: usize = TH_VERSION_AT + size_of::<u16>();
pub(crate) const TH_FLAGS_AT: usize = TH_CODEC_AT + size_of::<u8>();
pub(crate) const TH_SEQ_AT: usize = TH_FLAGS_AT + size_of::<u8>();
pub(crate) const TH_RESERVED_AT: usize = TH_SEQ_AT + size_of::<u64>();
pub(crate) const TH_CRC_AT: usize = 28;
/// Length of a table's file header.
pub const TABLE_HEADER_LEN: usize = TH_CRC_AT + size_of::<u32>();

// ---- data block entries --------------------------------------------------------
// key_len u16 | value_len u32 | key | value
/// Bytes before an entry's key.
pub const TABLE_ENTRY_HEADER_LEN: usize = size_of::<u16>() + size_of::<u32>();
/// Bytes after a block body, an index body or a header body: its masked CRC.
pub const TABLE_CRC_LEN: usize = size_of::<u32>();
/// Largest data block on disk (body and checksum): the largest target plus one
/// largest entry.
pub const MAX_TABLE_BLOCK_LEN: usize = MAX_TABLE_BLOCK_BYTES
    + TABLE_ENTRY_HEADER_LEN
    + MAX_TABLE_KEY_LEN
    + MAX_TABLE_VALUE_LEN
    + TABLE_CRC_LEN;
/// Smallest data block on disk: one entry with an empty key and value.
pub const MIN_TABLE_BLOCK_LEN: usize = TABLE_ENTRY_HEADER_LEN + TABLE_CRC_LEN;

// ---- index entries ---------------------------------------------------------------
// offset u64 | len u32 | entries u32 | last_key_len u16 | last_key | tag [16] (tagged)
pub(crate) const IX_LEN_AT: usize = size_of::<u64>();
pub(crate) const IX_ENTRIES_AT: usize = IX_LEN_AT + size_of::<u32>();
pub(crate) const IX_KEY_LEN_AT: usize = IX_ENTRIES_AT + size_of::<u32>();
/// Bytes of an index entry before its last key.
pub const TABLE_INDEX_ENTRY_FIXED_LEN: usize = IX_KEY_LEN_AT + size_of::<u16>();

// ---- footer (at the end) -----------------------------------------------------------
// magic | entries u64 | blocks u64 | index_offset u64 | index_len u32 | header_offset u64
// | header_len u32 | store_id [16] | tag [16] | footer_crc u32
pub(crate) const TF_ENTRIES_AT: usize = TABLE_FOOTER_MAGIC.len();
pub(crate) const TF_BLOCKS_AT: usize = TF_ENTRIES_AT + size_of::<u64>();
pub(crate) const TF_INDEX_OFFSET_AT: usize = TF_BLOCKS_AT + size_of::<u64>();
pub(crate) const TF_INDEX_LEN_AT: usize = TF_INDEX_OFFSET_AT + size_of::<u64>();
pub(crate) const TF_HEADER_OFFSET_AT: usize = TF_INDEX_LEN_AT + size_of::<u32>();
pub(crate) const TF_HEADER_LEN_AT: usize = TF_HEADER_OFFSET_AT + size_of::<u64>();
pub(crate) const TF_STORE_ID_AT: usize = TF_HEADER_LEN_AT + size_of::<u32>();
pub(crate) const TF_TAG_AT: usize = TF_STORE_ID_AT + STORE_ID_LEN;
pub(crate) const TF_CRC_AT: usize = TF_TAG_AT + TAG_LEN;
/// Length of a table's footer.
pub const TABLE_FOOTER_LEN: usize = TF_CRC_AT + size_of::<u32>();

// ---- page directory (paged index, FORMAT.md §11.8) ------------------------------
// at u32 | last_at u32 | blocks u32 | crc u32 | first_block u64 | first_offset u64
// | entries u64 | tag [16] (tagged)
pub(crate) const PD_LAST_AT: usize = size_of::<u32>();
pub(crate) const PD_BLOCKS_AT: usize = PD_LAST_AT + size_of::<u32>();
pub(crate) const PD_CRC_AT: usize = PD_BLOCKS_AT + size_of::<u32>();
pub(crate) const PD_FIRST_BLOCK_AT: usize = PD_CRC_AT + size_of::<u32>();
pub(crate) const PD_FIRST_OFFSET_AT: usize = PD_FIRST_BLOCK_AT + size_of::<u64>();
pub(crate) const PD_ENTRIES_AT: usize = PD_FIRST_OFFSET_AT + size_of::<u64>();
/// Bytes of a directory entry of an untagged table (a tagged one adds its tag).
pub const TABLE_DIR_ENTRY_LEN: usize = PD_ENTRIES_AT + size_of::<u64>();
/// Bytes after the directory: the page count (`u32`) and the masked CRC of
/// the directory and the count.
pub const TABLE_DIR_TRAILER_LEN: usize = size_of::<u32>() + TABLE_CRC_LEN;

/// Bytes of a directory entry.
pub(crate) fn dir_entry_len(tagged: bool) -> usize {
    TABLE_DIR_ENTRY_LEN + if tagged { TAG_LEN } else { 0 }
}

/// One decoded directory entry (page); `tag` borrows the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirEntry<'a> {
    pub at: u32,
    pub last_at: u32,
    pub blocks: u32,
    pub crc: u32,
    pub first_block: u64,
    pub first_offset: u64,
    pub entries: u64,
    pub tag: Option<&'a [u8]>,
}

/// Decodes the directory entry at the start of `b` (`None`: too short).
pub(crate) fn decode_dir_entry(b: &[u8], tagged: bool) -> Option<DirEntry<'_>> {
    let e = b.get(..dir_entry_len(tagged))?;
    Some(DirEntry {
        at: le_u32(e, 0),
        last_at: le_u32(e, PD_LAST_AT),
        blocks: le_u32(e, PD_BLOCKS_AT),
        crc: le_u32(e, PD_CRC_AT),
        first_block: le_u64(e, PD_FIRST_BLOCK_AT),
        first_offset: le_u64(e, PD_FIRST_OFFSET_AT),
        entries: le_u64(e, PD_ENTRIES_AT),
        tag: tagged.then(|| &e[TABLE_DIR_ENTRY_LEN..]),
    })
}

pub(crate) fn encode_dir_entry(out: &mut Vec<u8>, d: &DirEntry<'_>) {
    out.extend_from_slice(&d.at.to_le_bytes());
    out.extend_from_slice(&d.last_at.to_le_bytes());
    out.extend_from_slice(&d.blocks.to_le_bytes());
    out.extend_from_slice(&d.crc.to_le_bytes());
    out.extend_from_slice(&d.first_block.to_le_bytes());
    out.extend_from_slice(&d.first_offset.to_le_bytes());
    out.extend_from_slice(&d.entries.to_le_bytes());
    if let Some(t) = d.tag {
        out.extend_from_slice(t);
    }
}

/// The decoded fixed file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub version: u16,
    pub codec: u8,
    pub flags: u8,
    pub seq: u64,
    /// A delta's parent seq (`None`: a full table).
    pub parent: Option<u64>,
    /// A paged index (versions 4 and 5, FORMAT.md §11.8).
    pub paged: bool,
}

/// A full table's file header (version 2, or 4 when `paged`), or with
/// `parent` a delta's (version 3 or 5, the delta flag set, the parent's seq in
/// bytes 20..28).
pub(crate) fn encode_file_header(
    codec: u8,
    flags: u8,
    seq: u64,
    parent: Option<u64>,
    paged: bool,
) -> [u8; TABLE_HEADER_LEN] {
    let mut h = [0u8; TABLE_HEADER_LEN];
    let (version, flags) = match (parent, paged) {
        (None, false) => (TABLE_FORMAT_VERSION, flags),
        (None, true) => (TABLE_PAGED_VERSION, flags),
        (Some(_), false) => (TABLE_DELTA_VERSION, flags | TABLE_FLAG_DELTA),
        (Some(_), true) => (TABLE_PAGED_DELTA_VERSION, flags | TABLE_FLAG_DELTA),
    };
    h[..TH_VERSION_AT].copy_from_slice(&TABLE_MAGIC);
    h[TH_VERSION_AT..TH_CODEC_AT].copy_from_slice(&version.to_le_bytes());
    h[TH_CODEC_AT] = codec;
    h[TH_FLAGS_AT] = flags;
    h[TH_SEQ_AT..TH_RESERVED_AT].copy_from_slice(&seq.to_le_bytes());
    if let Some(p) = parent {
        h[TH_RESERVED_AT..TH_CRC_AT].copy_from_slice(&p.to_le_bytes());
    }
    let crc = masked_crc(&[&h[..TH_CRC_AT]]);
    h[TH_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Decodes the file header; the error names what is wrong.
pub(crate) fn decode_file_header(b: &[u8]) -> Result<FileHeader, String> {
    let h = b
        .get(..TABLE_HEADER_LEN)
        .ok_or_else(|| format!("file shorter than the {TABLE_HEADER_LEN}-byte file header"))?;
    if h[..TH_VERSION_AT] != TABLE_MAGIC {
        return Err("bad magic".into());
    }
    if le_u32(h, TH_CRC_AT) != masked_crc(&[&h[..TH_CRC_AT]]) {
        return Err("checksum mismatch".into());
    }
    let mut v = FileHeader {
        version: le_u16(h, TH_VERSION_AT),
        codec: h[TH_CODEC_AT],
        flags: h[TH_FLAGS_AT],
        seq: le_u64(h, TH_SEQ_AT),
        parent: None,
        paged: is_paged(le_u16(h, TH_VERSION_AT)),
    };
    match v.version {
        TABLE_FORMAT_VERSION | TABLE_PAGED_VERSION => {
            if v.flags & !TABLE_FLAG_TAGGED != 0 {
                return Err(format!("unknown flags {:#04x}", v.flags));
            }
            if h[TH_RESERVED_AT..TH_CRC_AT].iter().any(|&x| x != 0) {
                return Err("reserved bytes are not zero".into());
            }
        }
        TABLE_DELTA_VERSION | TABLE_PAGED_DELTA_VERSION => {
            if v.flags & !(TABLE_FLAG_TAGGED | TABLE_FLAG_DELTA) != 0 {
                return Err(format!("unknown flags {:#04x}", v.flags));
            }
            if v.flags & TABLE_FLAG_DELTA == 0 {
                return Err(format!(
                    "a version {} table without the delta flag",
                    v.version
                ));
            }
            let parent = le_u64(h, TH_RESERVED_AT);
            if parent >= v.seq {
                return Err(format!(
                    "a delta at seq {} names parent seq {parent}, not an earlier one",
                    v.seq
                ));
            }
            v.parent = Some(parent);
        }
        other => {
            return Err(format!(
                "format version {other} is not supported (this build reads table versions {TABLE_FORMAT_VERSION} to {TABLE_PAGED_DELTA_VERSION})"
            ));
        }
    }
    Ok(v)
}

/// Whether a table version has a paged index (an unknown one is refused by
/// `decode_file_header` whatever this says).
fn is_paged(version: u16) -> bool {
    matches!(version, TABLE_PAGED_VERSION | TABLE_PAGED_DELTA_VERSION)
}

/// The parent a table's file header names, if it decodes as a delta's.
pub(crate) fn file_header_parent(b: &[u8]) -> Option<u64> {
    decode_file_header(b).ok()?.parent
}

/// The decoded footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub entries: u64,
    pub blocks: u64,
    pub index_offset: u64,
    pub index_len: u32,
    pub header_offset: u64,
    pub header_len: u32,
    pub store_id: StoreId,
    pub tag: Tag,
}

/// The footer's bytes before the tag (the last part of the table tag's input)
/// followed by the tag and the checksum.
pub(crate) fn encode_footer(f: &Footer) -> [u8; TABLE_FOOTER_LEN] {
    let mut b = footer_prefix(f);
    b[TF_TAG_AT..TF_CRC_AT].copy_from_slice(&f.tag);
    let crc = masked_crc(&[&b[..TF_CRC_AT]]);
    b[TF_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The footer with everything from the tag on left zero.
pub(crate) fn footer_prefix(f: &Footer) -> [u8; TABLE_FOOTER_LEN] {
    let mut b = [0u8; TABLE_FOOTER_LEN];
    b[..TF_ENTRIES_AT].copy_from_slice(&TABLE_FOOTER_MAGIC);
    b[TF_ENTRIES_AT..TF_BLOCKS_AT].copy_from_slice(&f.entries.to_le_bytes());
    b[TF_BLOCKS_AT..TF_INDEX_OFFSET_AT].copy_from_slice(&f.blocks.to_le_bytes());
    b[TF_INDEX_OFFSET_AT..TF_INDEX_LEN_AT].copy_from_slice(&f.index_offset.to_le_bytes());
    b[TF_INDEX_LEN_AT..TF_HEADER_OFFSET_AT].copy_from_slice(&f.index_len.to_le_bytes());
    b[TF_HEADER_OFFSET_AT..TF_HEADER_LEN_AT].copy_from_slice(&f.header_offset.to_le_bytes());
    b[TF_HEADER_LEN_AT..TF_STORE_ID_AT].copy_from_slice(&f.header_len.to_le_bytes());
    b[TF_STORE_ID_AT..TF_TAG_AT].copy_from_slice(&f.store_id);
    b
}

/// Decodes a footer of exactly [`TABLE_FOOTER_LEN`] bytes (magic and checksum).
pub(crate) fn decode_footer(b: &[u8]) -> Result<Footer, String> {
    if b.len() != TABLE_FOOTER_LEN {
        return Err(format!(
            "footer is {} bytes, not {TABLE_FOOTER_LEN}",
            b.len()
        ));
    }
    if b[..TF_ENTRIES_AT] != TABLE_FOOTER_MAGIC {
        return Err("bad magic".into());
    }
    if le_u32(b, TF_CRC_AT) != masked_crc(&[&b[..TF_CRC_AT]]) {
        return Err("checksum mismatch".into());
    }
    let mut store_id = [0u8; STORE_ID_LEN];
    store_id.copy_from_slice(&b[TF_STORE_ID_AT..TF_TAG_AT]);
    let mut tag = [0u8; TAG_LEN];
    tag.copy_from_slice(&b[TF_TAG_AT..TF_CRC_AT]);
    Ok(Footer {
        entries: le_u64(b, TF_ENTRIES_AT),
        blocks: le_u64(b, TF_BLOCKS_AT),
        index_offset: le_u64(b, TF_INDEX_OFFSET_AT),
        index_len: le_u32(b, TF_INDEX_LEN_AT),
        header_offset: le_u64(b, TF_HEADER_OFFSET_AT),
        header_len: le_u32(b, TF_HEADER_LEN_AT),
        store_id,
        tag,
    })
}

/// One decoded index entry; `last_key` and `tag` borrow the index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexEntry<'a> {
    pub offset: u64,
    pub len: u32,
    pub entries: u32,
    pub last_key: &'a [u8],
    pub tag: Option<&'a [u8]>,
    /// Bytes of this index entry.
    pub size: usize,
}

/// Decodes the index entry at the start of `b`; `None` when it does not fit or
/// its key is over the limit.
pub(crate) fn decode_index_entry(b: &[u8], tagged: bool) -> Option<IndexEntry<'_>> {
    let fixed = b.get(..TABLE_INDEX_ENTRY_FIXED_LEN)?;
    let key_len = usize::from(le_u16(fixed, IX_KEY_LEN_AT));
    if key_len > MAX_TABLE_KEY_LEN {
        return None;
    }
    let key_end = TABLE_INDEX_ENTRY_FIXED_LEN + key_len;
    let end = key_end + if tagged { TAG_LEN } else { 0 };
    let whole = b.get(..end)?;
    Some(IndexEntry {
        offset: le_u64(fixed, 0),
        len: le_u32(fixed, IX_LEN_AT),
        entries: le_u32(fixed, IX_ENTRIES_AT),
        last_key: &whole[TABLE_INDEX_ENTRY_FIXED_LEN..key_end],
        tag: tagged.then(|| &whole[key_end..end]),
        size: end,
    })
}

pub(crate) fn encode_index_entry(
    out: &mut Vec<u8>,
    offset: u64,
    len: u32,
    entries: u32,
    last_key: &[u8],
    tag: Option<&Tag>,
) {
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&entries.to_le_bytes());
    // The writer refuses keys over MAX_TABLE_KEY_LEN, which fits a u16.
    out.extend_from_slice(&(last_key.len() as u16).to_le_bytes());
    out.extend_from_slice(last_key);
    if let Some(t) = tag {
        out.extend_from_slice(t);
    }
}

/// One entry of a data block body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// Bytes of this entry.
    pub size: usize,
}

/// Decodes the entry at the start of `b`, checking the lengths against the limits
/// and against the bytes present. The error names what is wrong.
pub(crate) fn decode_entry(b: &[u8]) -> Result<Entry<'_>, String> {
    let head = b
        .get(..TABLE_ENTRY_HEADER_LEN)
        .ok_or("entry header runs past the block end")?;
    let key_len = usize::from(le_u16(head, 0));
    let value_len = le_u32(head, size_of::<u16>()) as usize;
    if key_len > MAX_TABLE_KEY_LEN {
        return Err(format!(
            "key length {key_len} exceeds the limit of {MAX_TABLE_KEY_LEN}"
        ));
    }
    if value_len > MAX_TABLE_VALUE_LEN {
        return Err(format!(
            "value length {value_len} exceeds the limit of {MAX_TABLE_VALUE_LEN}"
        ));
    }
    let key_end = TABLE_ENTRY_HEADER_LEN + key_len;
    let end = key_end + value_len;
    let whole = b.get(..end).ok_or("entry runs past the block end")?;
    Ok(Entry {
        key: &whole[TABLE_ENTRY_HEADER_LEN..key_end],
        value: &whole[key_end..end],
        size: end,
    })
}

pub(crate) fn encode_entry(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    // Lengths were checked against MAX_TABLE_KEY_LEN / MAX_TABLE_VALUE_LEN.
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_format_md() {
        assert_eq!(TABLE_HEADER_LEN, 32);
        assert_eq!(TH_RESERVED_AT, 20);
        assert_eq!(TABLE_ENTRY_HEADER_LEN, 6);
        assert_eq!(TABLE_INDEX_ENTRY_FIXED_LEN, 18);
        assert_eq!(TABLE_FOOTER_LEN, 84);
        assert_eq!((TF_STORE_ID_AT, TF_TAG_AT, TF_CRC_AT), (48, 64, 80));
        assert_eq!(
            (PD_LAST_AT, PD_BLOCKS_AT, PD_CRC_AT, PD_FIRST_BLOCK_AT, PD_FIRST_OFFSET_AT, PD_ENTRIES_AT),
            (4, 8, 12, 16, 24, 32)
        );
        assert_eq!((TABLE_DIR_ENTRY_LEN, dir_entry_len(true), TABLE_DIR_TRAILER_LEN), (40, 56, 8));
        assert!(MAX_TABLE_KEY_LEN <= usize::from(u16::MAX));
        assert!(MAX_TABLE_BLOCK_LEN <= u32::MAX as usize);
    }

    #[test]
    fn header_and_footer_round_trip() {
        for paged in [false, true] {
            let h = encode_file_header(1, TABLE_FLAG_TAGGED, 77, None, paged);
            let d = decode_file_header(&h).unwrap();
            assert_eq!(
                (d.codec, d.flags, d.seq, d.parent, d.paged),
                (1, TABLE_FLAG_TAGGED, 77, None, paged)
            );
            let h = encode_file_header(1, TABLE_FLAG_TAGGED, 77, Some(70), paged);
            let d = decode_file_header(&h).unwrap();
            let version = if paged {
                TABLE_PAGED_DELTA_VERSION
            } else {
                TABLE_DELTA_VERSION
            };
            assert_eq!(
                (d.version, d.flags, d.seq, d.parent, d.paged),
                (version, TABLE_FLAG_TAGGED | TABLE_FLAG_DELTA, 77, Some(70), paged)
            );
        }
        let mut h = encode_file_header(1, 0, 77, None, true);
        h[TH_VERSION_AT..TH_CODEC_AT].copy_from_slice(&6u16.to_le_bytes());
        let crc = masked_crc(&[&h[..TH_CRC_AT]]);
        h[TH_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode_file_header(&h).unwrap_err().contains("version 6 is not supported"));
    }

    #[test]
    fn a_delta_header_must_name_an_earlier_parent_and_carry_its_flag() {
        let mut h = encode_file_header(1, 0, 77, Some(77), false);
        assert!(decode_file_header(&h).unwrap_err().contains("not an earlier one"));
        h = encode_file_header(1, 0, 77, Some(3), true);
        h[TH_FLAGS_AT] = 0;
        let crc = masked_crc(&[&h[..TH_CRC_AT]]);
        h[TH_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode_file_header(&h).unwrap_err().contains("without the delta flag"));
        h = encode_file_header(1, 0, 77, None, false);
        h[TH_FLAGS_AT] = TABLE_FLAG_DELTA;
        let crc = masked_crc(&[&h[..TH_CRC_AT]]);
        h[TH_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode_file_header(&h).unwrap_err().contains("unknown flags"));
        let f = Footer {
            entries: 3,
            blocks: 2,
            index_offset: 100,
            index_len: 40,
            header_offset: 140,
            header_len: 9,
            store_id: [5; STORE_ID_LEN],
            tag: [6; TAG_LEN],
        };
        assert_eq!(decode_footer(&encode_footer(&f)).unwrap(), f);
    }

    #[test]
    fn entries_respect_limits() {
        let mut b = Vec::new();
        encode_entry(&mut b, b"k", b"value");
        let e = decode_entry(&b).unwrap();
        assert_eq!(
            (e.key, e.value, e.size),
            (&b"k"[..], &b"value"[..], b.len())
        );
        assert!(decode_entry(&b[..b.len() - 1]).is_err());
        let mut big = Vec::new();
        big.extend_from_slice(&(MAX_TABLE_KEY_LEN as u16 + 1).to_le_bytes());
        big.extend_from_slice(&0u32.to_le_bytes());
        assert!(decode_entry(&big).unwrap_err().contains("key length"));
    }
}
