//! The table reader: opening validates the file header, footer, index and
//! header block (never a data block); a lookup is a binary search of the index
//! and one block, checked before its first use. Everything here is pure over
//! the file's bytes except [`Table::open`].

use super::format::*;
use crate::engine::error::{Error, Result};
use crate::engine::format::{Codec, le_u16, le_u32, masked_crc};
use crate::engine::tag::{Key, STORE_ID_LEN, StoreId, TAG_LEN, block_tag, table_tag, tags_equal};
use crate::engine::vfs::{FileBytes, Vfs};
use std::cmp::Ordering;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// An open table snapshot. Holds the file's bytes (a memory map on `RealFs`)
/// and, per data block, the position of its index entry.
pub struct Table {
    path: PathBuf,
    bytes: FileBytes,
    seq: u64,
    /// A delta's parent seq.
    parent: Option<u64>,
    codec: Codec,
    /// A tagged table's key and store id.
    tagging: Option<(Key, StoreId)>,
    entries: u64,
    /// The index body's byte range in the file.
    index_at: usize,
    index_end: usize,
    /// Per block, its index entry's offset within the index body.
    blocks: Vec<u32>,
    /// One bit per block: set once the block passed its check (see
    /// [`Table::block`]), so later lookups into it skip the CRC and the walk.
    checked: Box<[AtomicU64]>,
    /// The header body's byte range in the file.
    header_at: usize,
    header_end: usize,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("seq", &self.seq)
            .field("codec", &self.codec)
            .field("tagged", &self.tagging.is_some())
            .field("entries", &self.entries)
            .field("blocks", &self.blocks.len())
            .field("size", &self.size())
            .finish()
    }
}

/// A data block checked against its checksum, tag and index entry.
#[derive(Clone, Copy)]
struct Block<'a> {
    body: &'a [u8],
}

impl<'a> Block<'a> {
    /// The entry at `pos`; the block was checked whole, so `None` is unreachable.
    fn entry(&self, pos: usize) -> Option<Entry<'a>> {
        decode_entry(self.body.get(pos..)?).ok()
    }

    /// The value of `key`: a walk in key order that stops at the first key
    /// past it. The block was checked whole (every entry within the limits
    /// and the block), so the walk reads only the two lengths and the key of
    /// each entry; a length past the block (unreachable) ends it with `None`.
    fn find(&self, key: &[u8]) -> Option<&'a [u8]> {
        let b = self.body;
        let mut pos = 0;
        while let Some(head) = b.get(pos..pos + TABLE_ENTRY_HEADER_LEN) {
            let key_at = pos + TABLE_ENTRY_HEADER_LEN;
            let value_at = key_at + usize::from(le_u16(head, 0));
            let end = value_at + le_u32(head, size_of::<u16>()) as usize;
            match cmp_key(b.get(key_at..value_at)?, key) {
                Ordering::Less => pos = end,
                Ordering::Equal => return b.get(value_at..end),
                Ordering::Greater => return None,
            }
        }
        None
    }
}

/// `a.cmp(b)` for keys, as `<[u8]>::cmp` orders them: eight bytes at a time
/// (as big-endian integers, which order as their bytes do), then byte by byte.
/// Table keys are short and neighbours share long prefixes (`u0000001000`,
/// `u0000001099`); this costs less than a byte loop or a call to the C
/// library's `memcmp` per entry, and an open compares every index entry's key
/// with the one before it (§11.6).
pub(crate) fn cmp_key(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut ca, mut cb) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        let (x, y) = (be_u64(x), be_u64(y));
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// An eight-byte chunk as a big-endian integer.
fn be_u64(c: &[u8]) -> u64 {
    u64::from_be_bytes(c.try_into().unwrap_or([0; 8]))
}

impl Table {
    /// Validates the file header, footer, index and header block (checksums,
    /// limits, layout, and the table tag when tagged); reads no data block.
    /// Memory: one `u32` per block.
    pub fn from_bytes(path: PathBuf, bytes: FileBytes, key: Option<&Key>) -> Result<Table> {
        let b: &[u8] = (*bytes).as_ref();
        let file_len = b.len();
        let corrupt = |offset: usize, seq: Option<u64>, reason: String| Error::Corrupt {
            path: path.clone(),
            offset: Some(offset as u64),
            seq,
            reason,
        };
        let fh = decode_file_header(b)
            .map_err(|r| corrupt(0, None, format!("table file header: {r}")))?;
        let seq = Some(fh.seq);
        let tagged = fh.flags & TABLE_FLAG_TAGGED != 0;
        match (tagged, key) {
            (true, None) => {
                return Err(Error::Key {
                    path,
                    reason: "table snapshot is tagged; open it with the store's key".into(),
                });
            }
            (false, Some(_)) => {
                return Err(Error::Key {
                    path,
                    reason: "table snapshot is not tagged, but a key was given".into(),
                });
            }
            _ => {}
        }
        let codec = Codec::from_id(fh.codec).ok_or_else(|| {
            corrupt(
                0,
                seq,
                format!("table file header: unknown codec byte {}", fh.codec),
            )
        })?;
        let min_len = TABLE_HEADER_LEN + 2 * TABLE_CRC_LEN + TABLE_FOOTER_LEN;
        if file_len < min_len {
            return Err(corrupt(
                file_len,
                seq,
                format!(
                    "table footer: file is {file_len} bytes, shorter than the smallest table ({min_len} bytes)"
                ),
            ));
        }
        let footer_at = file_len - TABLE_FOOTER_LEN;
        let f = decode_footer(&b[footer_at..])
            .map_err(|r| corrupt(footer_at, seq, format!("table footer: {r}")))?;
        let bad_footer = |r: String| corrupt(footer_at, seq, format!("table footer: {r}"));
        // Layout: blocks | index | header | footer, nothing between or after.
        let index_len = f.index_len as usize;
        let header_len = f.header_len as usize;
        if !(TABLE_CRC_LEN..=MAX_TABLE_INDEX_LEN + TABLE_CRC_LEN).contains(&index_len) {
            return Err(bad_footer(format!(
                "index length {index_len} outside {TABLE_CRC_LEN}..={}",
                MAX_TABLE_INDEX_LEN + TABLE_CRC_LEN
            )));
        }
        if !(TABLE_CRC_LEN..=MAX_TABLE_HEADER_LEN + TABLE_CRC_LEN).contains(&header_len) {
            return Err(bad_footer(format!(
                "header length {header_len} outside {TABLE_CRC_LEN}..={}",
                MAX_TABLE_HEADER_LEN + TABLE_CRC_LEN
            )));
        }
        let header_at = footer_at - header_len.min(footer_at);
        if f.header_offset != header_at as u64 || header_at < TABLE_HEADER_LEN + index_len {
            return Err(bad_footer(format!(
                "header block at offset {} of {} bytes does not end where the footer starts ({footer_at})",
                f.header_offset, f.header_len
            )));
        }
        let index_at = header_at - index_len;
        if f.index_offset != index_at as u64 {
            return Err(bad_footer(format!(
                "index at offset {} of {} bytes does not end where the header block starts ({header_at})",
                f.index_offset, f.index_len
            )));
        }
        let index_end = index_at + index_len - TABLE_CRC_LEN;
        let header_end = header_at + header_len - TABLE_CRC_LEN;
        let index = &b[index_at..index_end];
        if le_u32(b, index_end) != masked_crc(&[index]) {
            return Err(corrupt(
                index_at,
                seq,
                format!("table index (offset {index_at}, {index_len} bytes): checksum mismatch"),
            ));
        }
        let header = &b[header_at..header_end];
        if le_u32(b, header_end) != masked_crc(&[header]) {
            return Err(corrupt(
                header_at,
                seq,
                format!(
                    "table header block (offset {header_at}, {header_len} bytes): checksum mismatch"
                ),
            ));
        }
        // Every byte outside the data blocks now passes a checksum: a tagged
        // table's tag decides whether they are the writer's.
        let tagging = match key {
            Some(key) => {
                let prefix = &b[footer_at..footer_at + TF_TAG_AT];
                let want = table_tag(
                    key,
                    &f.store_id,
                    fh.seq,
                    &[&b[..TABLE_HEADER_LEN], index, header, prefix],
                );
                if !tags_equal(&want, &f.tag) {
                    return Err(Error::Tampered {
                        path,
                        offset: None,
                        seq,
                        what: "table tag mismatch (file header, index, header block or footer)"
                            .into(),
                    });
                }
                Some((key.clone(), f.store_id))
            }
            None => {
                if f.store_id != [0; STORE_ID_LEN] || f.tag != [0; TAG_LEN] {
                    return Err(bad_footer(
                        "an untagged table's store id and tag are not zero".into(),
                    ));
                }
                None
            }
        };
        let blocks = walk_index(index, tagged, index_at, &f).map_err(|(at, r)| {
            corrupt(
                index_at + at,
                seq,
                format!("table index (offset {index_at}, {index_len} bytes): {r}"),
            )
        })?;
        let checked = (0..blocks.len().div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect();
        Ok(Table {
            path,
            bytes,
            seq: fh.seq,
            parent: fh.parent,
            codec,
            tagging,
            entries: f.entries,
            index_at,
            index_end,
            blocks,
            checked,
            header_at,
            header_end,
        })
    }

    /// Reads `path` through `vfs.read_mapped` (a memory map on `RealFs`), then
    /// [`Table::from_bytes`]. Table snapshots are immutable and never truncated,
    /// so a map is safe even for readers that hold no lock.
    pub fn open(vfs: &dyn Vfs, path: &Path, key: Option<&Key>) -> Result<Table> {
        let bytes = vfs
            .read_mapped(path)
            .map_err(|e| Error::io("read table snapshot", path, e))?;
        Table::from_bytes(path.to_path_buf(), bytes, key)
    }

    /// The seq the snapshot covers.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// A delta table's parent seq (FORMAT.md §14); `None` for a full table.
    pub fn parent(&self) -> Option<u64> {
        self.parent
    }

    /// The codec byte recorded by the writer.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// A tagged table's store id.
    pub fn store_id(&self) -> Option<StoreId> {
        self.tagging.as_ref().map(|(_, id)| *id)
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        self.entries
    }

    /// True when the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.file().len() as u64
    }

    /// The number of data blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// The path the table was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The caller's header given to [`TableWriter::finish`](super::TableWriter::finish).
    pub fn header(&self) -> &[u8] {
        self.file()
            .get(self.header_at..self.header_end)
            .unwrap_or_default()
    }

    /// The value of `key`: a binary search of the index, then one block, whose
    /// checksum (and tag) is checked before its first use by this reader.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>> {
        let i = self.block_for(key);
        if i == self.blocks.len() {
            return Ok(None);
        }
        Ok(self.block(i)?.find(key))
    }

    /// All entries in key order; each block is checked when first entered. An
    /// error is yielded once, then the iterator ends.
    pub fn iter(&self) -> TableIter<'_> {
        TableIter {
            table: self,
            released: 0,
            next_block: 0,
            block: None,
            pos: 0,
            start: None,
            done: false,
        }
    }

    /// The entries whose key is `start` or after, in key order.
    pub fn iter_from(&self, start: &[u8]) -> TableIter<'_> {
        TableIter {
            table: self,
            released: 0,
            next_block: self.block_for(start),
            block: None,
            pos: 0,
            start: Some(start.to_vec()),
            done: false,
        }
    }

    /// Checks every data block: checksum, tag, entry lengths, key order within
    /// and across blocks, and counts against the index and the footer.
    pub fn verify(&self) -> Result<()> {
        let mut n = 0u64;
        for i in 0..self.blocks.len() {
            self.check_block(i)?;
            n += u64::from(self.index_entry(i)?.entries);
        }
        if n != self.entries {
            return Err(self.corrupt(
                self.size().saturating_sub(TABLE_FOOTER_LEN as u64),
                format!(
                    "table footer: {} entries, the blocks hold {n}",
                    self.entries
                ),
            ));
        }
        Ok(())
    }

    fn file(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }

    fn corrupt(&self, offset: u64, reason: String) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            offset: Some(offset),
            seq: Some(self.seq),
            reason,
        }
    }

    /// The index entry of block `i` (checked at open, so an error is unreachable).
    fn index_entry(&self, i: usize) -> Result<IndexEntry<'_>> {
        let index = self
            .file()
            .get(self.index_at..self.index_end)
            .unwrap_or_default();
        self.blocks
            .get(i)
            .and_then(|&at| index.get(at as usize..))
            .and_then(|b| decode_index_entry(b, self.tagging.is_some()))
            .ok_or_else(|| {
                self.corrupt(
                    self.index_at as u64,
                    format!("table index: entry of block {i} unreadable"),
                )
            })
    }

    fn last_key(&self, i: usize) -> &[u8] {
        self.index_entry(i).map(|e| e.last_key).unwrap_or_default()
    }

    /// The first block whose last key is `key` or after (`blocks.len()` if none).
    fn block_for(&self, key: &[u8]) -> usize {
        partition(self.blocks.len(), |i| {
            cmp_key(self.last_key(i), key) == Ordering::Less
        })
    }

    /// Block `i`, checked before its first use by this reader (its bit in
    /// `checked`), as [`Table::check_block`] does; a block already checked is
    /// sliced without checking again. The file never changes once renamed
    /// into place (FORMAT.md §11.6), so one check per open table holds for
    /// every later lookup, as a block cache's decoded blocks do.
    fn block(&self, i: usize) -> Result<Block<'_>> {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let done = self
            .checked
            .get(word)
            .is_some_and(|w| w.load(AtomicOrdering::Relaxed) & bit != 0);
        if done {
            let ix = self.index_entry(i)?;
            let (at, len) = (ix.offset as usize, ix.len as usize);
            // Within the file: checked at open, and again by the first check.
            if let Some(bytes) = self.file().get(at..at + len - TABLE_CRC_LEN) {
                return Ok(Block { body: bytes });
            }
        }
        let b = self.check_block(i)?;
        if let Some(w) = self.checked.get(word) {
            w.fetch_or(bit, AtomicOrdering::Relaxed);
        }
        Ok(b)
    }

    /// Block `i`, checked whole: checksum, tag, every entry within the limits
    /// and the block, keys strictly increasing and after the previous block's
    /// last key, the entry count and last key as the index says.
    fn check_block(&self, i: usize) -> Result<Block<'_>> {
        let ix = self.index_entry(i)?;
        let (at, len) = (ix.offset as usize, ix.len as usize);
        let damaged = |reason: String| {
            self.corrupt(
                ix.offset,
                format!("table block {i} (offset {at}, {len} bytes): {reason}"),
            )
        };
        // Offsets and lengths were checked against the file at open.
        let bytes = self
            .file()
            .get(at..at + len)
            .ok_or_else(|| damaged("outside the file".into()))?;
        let body_len = len - TABLE_CRC_LEN;
        let body = &bytes[..body_len];
        if le_u32(bytes, body_len) != masked_crc(&[body]) {
            return Err(damaged("checksum mismatch".into()));
        }
        if let (Some((key, id)), Some(tag)) = (&self.tagging, ix.tag) {
            let want = block_tag(key, id, self.seq, i as u64, body);
            if !tags_equal(&want, tag.try_into().unwrap_or(&[0; TAG_LEN])) {
                return Err(Error::Tampered {
                    path: self.path.clone(),
                    offset: Some(ix.offset),
                    seq: Some(self.seq),
                    what: format!("table block {i} (offset {at}, {len} bytes): block tag mismatch"),
                });
            }
        }
        let mut prev: Option<&[u8]> = match i {
            0 => None,
            _ => Some(self.index_entry(i - 1)?.last_key),
        };
        let (mut pos, mut n) = (0usize, 0u32);
        while pos < body.len() {
            let e = decode_entry(&body[pos..])
                .map_err(|r| damaged(format!("entry {n} at block offset {pos}: {r}")))?;
            if let Some(p) = prev
                && cmp_key(e.key, p) != Ordering::Greater
            {
                return Err(damaged(format!(
                    "entry {n} at block offset {pos}: key out of order"
                )));
            }
            prev = Some(e.key);
            pos += e.size;
            n += 1;
        }
        if n != ix.entries {
            return Err(damaged(format!(
                "holds {n} entries, the index says {}",
                ix.entries
            )));
        }
        if prev != Some(ix.last_key) {
            return Err(damaged("last key differs from the index's last key".into()));
        }
        Ok(Block { body })
    }
}

/// The first `i` in `0..n` for which `before(i)` is false (`before` is true on a prefix).
fn partition(n: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Walks the index body, checking every entry against the limits, the layout
/// (blocks back to back from the file header to the index) and the footer's
/// counts. Returns each entry's offset within the index, or the offset within
/// the index and what is wrong.
fn walk_index(
    index: &[u8],
    tagged: bool,
    index_at: usize,
    f: &Footer,
) -> std::result::Result<Vec<u32>, (usize, String)> {
    // Bounded by the index length, which is bounded by the file.
    let cap = (index.len() / TABLE_INDEX_ENTRY_FIXED_LEN).min(f.blocks as usize);
    let mut out = Vec::with_capacity(cap);
    let mut next_block = TABLE_HEADER_LEN as u64;
    let mut entries = 0u64;
    let mut prev: Option<&[u8]> = None;
    let mut pos = 0usize;
    while pos < index.len() {
        let i = out.len();
        let e = decode_index_entry(&index[pos..], tagged).ok_or_else(|| {
            (
                pos,
                format!("entry of block {i} runs past the index end or its key is over {MAX_TABLE_KEY_LEN} bytes"),
            )
        })?;
        let len = e.len as usize;
        if e.offset != next_block {
            return Err((
                pos,
                format!(
                    "block {i} at offset {}, expected {next_block} (blocks are back to back)",
                    e.offset
                ),
            ));
        }
        if !(MIN_TABLE_BLOCK_LEN..=MAX_TABLE_BLOCK_LEN).contains(&len) {
            return Err((
                pos,
                format!(
                    "block {i} length {len} outside {MIN_TABLE_BLOCK_LEN}..={MAX_TABLE_BLOCK_LEN}"
                ),
            ));
        }
        let most = (len - TABLE_CRC_LEN) / TABLE_ENTRY_HEADER_LEN;
        if e.entries == 0 || e.entries as usize > most {
            return Err((
                pos,
                format!(
                    "block {i} of {len} bytes claims {} entries (1..={most} fit)",
                    e.entries
                ),
            ));
        }
        if let Some(p) = prev
            && cmp_key(e.last_key, p) != Ordering::Greater
        {
            return Err((pos, format!("block {i}: last key out of order")));
        }
        prev = Some(e.last_key);
        next_block += len as u64;
        entries += u64::from(e.entries);
        out.push(pos as u32);
        pos += e.size;
    }
    if next_block != index_at as u64 {
        return Err((
            0,
            format!("the blocks end at offset {next_block}, the index starts at {index_at}"),
        ));
    }
    if out.len() as u64 != f.blocks {
        return Err((
            0,
            format!("{} blocks, the footer says {}", out.len(), f.blocks),
        ));
    }
    if entries != f.entries {
        return Err((
            0,
            format!("{entries} entries, the footer says {}", f.entries),
        ));
    }
    Ok(out)
}

/// Entries of a [`Table`] in key order (see [`Table::iter`]).
pub struct TableIter<'a> {
    table: &'a Table,
    /// Where the bytes not yet released start (see [`RELEASE_EVERY`]).
    released: usize,
    next_block: usize,
    block: Option<Block<'a>>,
    pos: usize,
    start: Option<Vec<u8>>,
    done: bool,
}

impl fmt::Debug for TableIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableIter")
            .field("path", &self.table.path)
            .field("next_block", &self.next_block)
            .field("pos", &self.pos)
            .field("done", &self.done)
            .finish()
    }
}

/// A scan lets go of the blocks behind it every this many bytes, so that a
/// mapped table read end to end (a streamed document, a resume set, a view's
/// lists) keeps about this much of it resident, not the whole file.
pub const RELEASE_EVERY: usize = 8 << 20;

impl TableIter<'_> {
    /// Releases the bytes from `released` to the start of the next block
    /// once they reach [`RELEASE_EVERY`].
    fn release_behind(&mut self) {
        let Ok(ix) = self.table.index_entry(self.next_block) else {
            return;
        };
        let at = ix.offset as usize;
        if at >= self.released + RELEASE_EVERY {
            self.table.bytes.release(self.released..at);
            self.released = at;
        }
    }
}

impl<'a> Iterator for TableIter<'a> {
    type Item = Result<(&'a [u8], &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if let Some(b) = self.block {
                if let Some(e) = b.entry(self.pos) {
                    self.pos += e.size;
                    if let Some(s) = &self.start {
                        if e.key < s.as_slice() {
                            continue;
                        }
                        self.start = None;
                    }
                    return Some(Ok((e.key, e.value)));
                }
                self.block = None;
            }
            if self.next_block >= self.table.blocks.len() {
                self.done = true;
                return None;
            }
            self.release_behind();
            match self.table.block(self.next_block) {
                Ok(b) => {
                    self.block = Some(b);
                    self.pos = 0;
                    self.next_block += 1;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cmp_key;

    /// Every pair of keys up to 19 bytes over a small alphabet (so that long
    /// shared prefixes, every chunk boundary and every length difference
    /// occur): the chunked compare orders as `<[u8]>::cmp`.
    #[test]
    fn the_chunked_key_compare_orders_as_the_byte_compare() {
        let mut keys: Vec<Vec<u8>> = vec![vec![]];
        for len in 1..=19usize {
            for diff_at in 0..len {
                for (x, y) in [(b'0', b'1'), (0u8, 255u8), (b'a', b'a')] {
                    let mut k = vec![b'u'; len];
                    k[diff_at] = x;
                    keys.push(k.clone());
                    k[diff_at] = y;
                    keys.push(k);
                }
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(cmp_key(a, b), a.as_slice().cmp(b.as_slice()), "{a:?} {b:?}");
            }
        }
    }
}
