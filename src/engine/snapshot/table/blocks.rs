//! A table's index entries, index pages and data blocks, as lookups, scans
//! and [`Table::verify`] reach them: an index entry found by its block's
//! number (in the index walked at open, or in its page of a paged index,
//! FORMAT.md §11.8), a page or a block checked whole before its first use by
//! this reader (checksum, tag, every entry, key order) and marked so that
//! later uses skip the check, the checks an index entry must pass, and the
//! binary search a lookup makes ([`cmp_key`] orders keys).

use super::format::*;
use super::read::{Index, Table};
use crate::engine::error::{Error, Result};
use crate::engine::format::{le_u16, le_u32, masked_crc};
use crate::engine::tag::{TAG_LEN, block_tag, page_tag, tags_equal};
use std::cmp::Ordering;

/// A scan's place in a paged index: block `block`'s index entry is at byte
/// `pos` of page `page`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cursor {
    pub(super) block: usize,
    pub(super) page: usize,
    pub(super) pos: usize,
}

/// An index page checked against its CRC, tag and directory entry.
#[derive(Clone, Copy)]
pub(super) struct Page<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) dir: DirEntry<'a>,
}

impl<'a> Page<'a> {
    /// The page's entries in order; the page was checked whole, so each decodes.
    pub(super) fn entries(&self) -> impl Iterator<Item = IndexEntry<'a>> + 'a {
        let (bytes, tagged) = (self.bytes, self.dir.tag.is_some());
        let mut pos = 0;
        std::iter::from_fn(move || {
            let e = decode_index_entry(bytes.get(pos..)?, tagged)?;
            pos += e.size;
            Some(e)
        })
    }

    pub(super) fn last(&self) -> Option<IndexEntry<'a>> {
        decode_index_entry(
            self.bytes.get(self.dir.last_at as usize..)?,
            self.dir.tag.is_some(),
        )
    }
}

/// A data block checked against its checksum, tag and index entry.
#[derive(Clone, Copy)]
pub(super) struct Block<'a> {
    pub(super) body: &'a [u8],
}

impl<'a> Block<'a> {
    /// The entry at `pos`; the block was checked whole, so `None` is unreachable.
    pub(super) fn entry(&self, pos: usize) -> Option<Entry<'a>> {
        decode_entry(self.body.get(pos..)?).ok()
    }

    /// The value of `key`: a walk in key order that stops at the first key
    /// past it. The block was checked whole (every entry within the limits
    /// and the block), so the walk reads only the two lengths and the key of
    /// each entry; a length past the block (unreachable) ends it with `None`.
    pub(super) fn find(&self, key: &[u8]) -> Option<&'a [u8]> {
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
    /// Checks every index page (a paged table) and every data block:
    /// checksum, tag, entry lengths, key order within and across pages and
    /// blocks, and counts against the index and the footer.
    pub fn verify(&self) -> Result<()> {
        if let Index::Paged { pages, checked, .. } = &self.index {
            let mut prev_last: Option<&[u8]> = None;
            for p in 0..*pages {
                let page = self.check_page(p)?;
                checked.set(p);
                let first = page.entries().next().map(|e| e.last_key);
                if let (Some(prev), Some(first)) = (prev_last, first)
                    && cmp_key(first, prev) != Ordering::Greater
                {
                    return Err(self.page_damaged(
                        p,
                        &page,
                        "its first last key is not after the previous page's last key".into(),
                    ));
                }
                prev_last = page.last().map(|e| e.last_key);
            }
        }
        let mut n = 0u64;
        for i in 0..self.nblocks {
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

    /// The index entry of block `i`: unpaged, checked at open (so an error is
    /// unreachable); paged, from its page, checked first if this reader has
    /// not entered it yet (an error is that page's damage).
    pub(super) fn index_entry(&self, i: usize) -> Result<IndexEntry<'_>> {
        let index = self
            .file()
            .get(self.index_at..self.index_end)
            .unwrap_or_default();
        let unreadable = || {
            self.corrupt(
                self.index_at as u64,
                format!("table index: entry of block {i} unreadable"),
            )
        };
        match &self.index {
            Index::Flat(blocks) => blocks
                .get(i)
                .and_then(|&at| index.get(at as usize..))
                .and_then(|b| decode_index_entry(b, self.tagging.is_some()))
                .ok_or_else(unreadable),
            Index::Paged { .. } => {
                let page = self.page(self.page_of_block(i))?;
                let j = (i as u64).checked_sub(page.dir.first_block);
                j.and_then(|j| page.entries().nth(j as usize))
                    .ok_or_else(unreadable)
            }
        }
    }

    /// Block `i`'s index entry for a reader going block by block: read at
    /// `cur` when it points at block `i` (a paged index's entries are found
    /// by walking their page, so a scan keeps its place rather than walking
    /// from the page's start for every block), else as [`Table::index_entry`];
    /// `cur` then points at block `i + 1`.
    pub(super) fn index_entry_seq(&self, i: usize, cur: &mut Option<Cursor>) -> Result<IndexEntry<'_>> {
        if matches!(self.index, Index::Flat(_)) {
            return self.index_entry(i);
        }
        let unreadable = || {
            self.corrupt(
                self.index_at as u64,
                format!("table index: entry of block {i} unreadable"),
            )
        };
        let (p, page, pos) = match cur.filter(|c| c.block == i) {
            Some(c) => (c.page, self.page(c.page)?, c.pos),
            None => {
                // Walk block i's page to its entry, once for the scan.
                let p = self.page_of_block(i);
                let page = self.page(p)?;
                let j = (i as u64)
                    .checked_sub(page.dir.first_block)
                    .ok_or_else(unreadable)?;
                let pos = page.entries().take(j as usize).map(|e| e.size).sum();
                (p, page, pos)
            }
        };
        let e = page
            .bytes
            .get(pos..)
            .and_then(|b| decode_index_entry(b, self.tagging.is_some()))
            .ok_or_else(unreadable)?;
        let next = pos + e.size;
        *cur = Some(if next >= page.bytes.len() {
            Cursor {
                block: i + 1,
                page: p + 1,
                pos: 0,
            }
        } else {
            Cursor {
                block: i + 1,
                page: p,
                pos: next,
            }
        });
        Ok(e)
    }

    /// The page listing block `i` (a paged index; from the directory).
    pub(super) fn page_of_block(&self, i: usize) -> usize {
        let pages = match &self.index {
            Index::Paged { pages, .. } => *pages,
            Index::Flat(_) => 0,
        };
        partition(pages, |p| {
            self.dir_entry(p)
                .is_some_and(|d| d.first_block + u64::from(d.blocks) <= i as u64)
        })
    }

    /// Directory entry `p` (checked at open).
    pub(super) fn dir_entry(&self, p: usize) -> Option<DirEntry<'_>> {
        let Index::Paged { dir_at, pages, .. } = &self.index else {
            return None;
        };
        if p >= *pages {
            return None;
        }
        let tagged = self.tagging.is_some();
        let len = dir_entry_len(tagged);
        decode_dir_entry(self.file().get(dir_at + p * len..)?, tagged)
    }

    /// Page `p`'s bytes and the file offset where its blocks end (the next
    /// page's first block, or the index for the last page).
    pub(super) fn page_bytes(&self, p: usize, d: &DirEntry<'_>) -> Option<(&[u8], u64)> {
        let (end, blocks_end) = match self.dir_entry(p + 1) {
            Some(n) => (n.at as usize, n.first_offset),
            None => (self.index_end - self.index_at, self.index_at as u64),
        };
        let pages = self.file().get(self.index_at..self.index_end)?;
        Some((pages.get(d.at as usize..end)?, blocks_end))
    }

    /// Page `p`, checked before its first use by this reader (its bit), as
    /// [`Table::check_page`] does.
    pub(super) fn page(&self, p: usize) -> Result<Page<'_>> {
        if let Index::Paged { checked, .. } = &self.index
            && checked.get(p)
            && let Some(dir) = self.dir_entry(p)
            && let Some((bytes, _)) = self.page_bytes(p, &dir)
        {
            return Ok(Page { bytes, dir });
        }
        let page = self.check_page(p)?;
        if let Index::Paged { checked, .. } = &self.index {
            checked.set(p);
        }
        Ok(page)
    }

    pub(super) fn page_damaged(&self, p: usize, page: &Page<'_>, reason: String) -> Error {
        let at = self.index_at as u64 + u64::from(page.dir.at);
        self.corrupt(
            at,
            format!(
                "table index page {p} (offset {at}, {} bytes): {reason}",
                page.bytes.len()
            ),
        )
    }

    /// Page `p`, checked whole (FORMAT.md §11.8): CRC, tag, then every entry
    /// as the open of an unpaged table checks them, against the directory.
    pub(super) fn check_page(&self, p: usize) -> Result<Page<'_>> {
        let (dir, (bytes, blocks_end)) = self
            .dir_entry(p)
            .and_then(|d| Some((d, self.page_bytes(p, &d)?)))
            .ok_or_else(|| {
                self.corrupt(
                    self.index_end as u64,
                    format!("table page directory: no page {p}"),
                )
            })?;
        let page = Page { bytes, dir };
        let damaged = |reason: String| self.page_damaged(p, &page, reason);
        let tagged = self.tagging.is_some();
        // Bounds the work of this check before the CRC reads the page.
        let most = dir.blocks as usize
            * (TABLE_INDEX_ENTRY_FIXED_LEN + MAX_TABLE_KEY_LEN + if tagged { TAG_LEN } else { 0 });
        if bytes.len() > most {
            return Err(damaged(format!(
                "{} bytes cannot be {} index entries (at most {most} bytes)",
                bytes.len(),
                dir.blocks
            )));
        }
        if masked_crc(&[bytes]) != dir.crc {
            return Err(damaged("checksum mismatch".into()));
        }
        if let (Some((key, id)), Some(tag)) = (&self.tagging, dir.tag) {
            let want = page_tag(key, id, self.seq, p as u64, bytes);
            if !tags_equal(&want, tag.try_into().unwrap_or(&[0; TAG_LEN])) {
                let at = self.index_at as u64 + u64::from(dir.at);
                return Err(Error::Tampered {
                    path: self.path.clone(),
                    offset: Some(at),
                    seq: Some(self.seq),
                    what: format!(
                        "table index page {p} (offset {at}, {} bytes): page tag mismatch",
                        bytes.len()
                    ),
                });
            }
        }
        let first = dir.first_block;
        let (mut pos, mut n, mut entries) = (0usize, 0u32, 0u64);
        let mut next_block = dir.first_offset;
        let mut prev: Option<&[u8]> = None;
        let mut last_at = None;
        while pos < bytes.len() && n < dir.blocks {
            let i = first + u64::from(n);
            let e = decode_index_entry(&bytes[pos..], tagged).ok_or_else(|| {
                damaged(format!(
                    "entry of block {i} at page offset {pos} runs past the page end or its key is over {MAX_TABLE_KEY_LEN} bytes"
                ))
            })?;
            check_index_entry(&e, i, next_block, prev)
                .map_err(|r| damaged(format!("at page offset {pos}: {r}")))?;
            prev = Some(e.last_key);
            next_block += u64::from(e.len);
            entries += u64::from(e.entries);
            last_at = Some(pos);
            n += 1;
            pos += e.size;
        }
        if n != dir.blocks || pos != bytes.len() || last_at != Some(dir.last_at as usize) {
            return Err(damaged(format!(
                "{n} entries end at page offset {pos} of {}, the last at {last_at:?}; the directory says {} entries, the last at {}",
                bytes.len(),
                dir.blocks,
                dir.last_at
            )));
        }
        if next_block != blocks_end {
            return Err(damaged(format!(
                "its blocks end at offset {next_block}, the next ones start at {blocks_end}"
            )));
        }
        if entries != dir.entries {
            return Err(damaged(format!(
                "its blocks hold {entries} entries, the directory says {}",
                dir.entries
            )));
        }
        Ok(page)
    }

    /// The first block whose last key is `key` or after (`nblocks` if none).
    pub(super) fn block_for(&self, key: &[u8]) -> Result<usize> {
        Ok(self.locate(key)?.map_or(self.nblocks, |(i, _)| i))
    }

    /// The first block whose last key is `key` or after, with its index
    /// entry (`None` if every key is before `key`): the entry the search
    /// ends on, so a lookup does not find it a second time.
    pub(super) fn locate(&self, key: &[u8]) -> Result<Option<(usize, IndexEntry<'_>)>> {
        let pages = match &self.index {
            Index::Flat(blocks) => {
                // Every entry was checked at open: `index_entry` cannot fail here.
                let last_key = |i| self.index_entry(i).map(|e| e.last_key).unwrap_or_default();
                let i = partition(blocks.len(), |i| {
                    cmp_key(last_key(i), key) == Ordering::Less
                });
                if i == blocks.len() {
                    return Ok(None);
                }
                return Ok(Some((i, self.index_entry(i)?)));
            }
            Index::Paged { pages, .. } => *pages,
        };
        // A binary search over the pages' last keys, each read from a checked
        // page. When it ends at `p`, page `p - 1` was probed and its last key
        // is below `key`, and page `p` was probed and its last key is `key`
        // or after (when they exist): the answer is confirmed by checked
        // neighbours even though key order across pages is checked only by
        // `verify` (FORMAT.md §11.8).
        let (mut lo, mut hi) = (0, pages);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let page = self.page(mid)?;
            let last = page.last().map(|e| e.last_key).unwrap_or_default();
            if cmp_key(last, key) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == pages {
            return Ok(None);
        }
        let page = self.page(lo)?;
        let (j, e) = page
            .entries()
            .enumerate()
            .find(|(_, e)| cmp_key(e.last_key, key) != Ordering::Less)
            .ok_or_else(|| self.page_damaged(lo, &page, "no entry for its last key".into()))?;
        Ok(Some(((page.dir.first_block + j as u64) as usize, e)))
    }

    /// Block `i`, given its index entry `ix` and, when the caller has it (a
    /// scan), the previous block's last key: checked before its first use by
    /// this reader (its bit in `checked`), as [`Table::check_block`] does; a
    /// block already checked is sliced without checking again. The file never
    /// changes once renamed into place (FORMAT.md §11.6), so one check per
    /// open table holds for every later lookup, as a block cache's decoded
    /// blocks do.
    pub(super) fn block_with<'t>(
        &'t self,
        i: usize,
        ix: IndexEntry<'t>,
        prev_last: Option<&'t [u8]>,
    ) -> Result<Block<'t>> {
        if self.checked.get(i) {
            let (at, len) = (ix.offset as usize, ix.len as usize);
            // Within the file: checked at open, and again by the first check.
            if let Some(bytes) = self.file().get(at..at + len - TABLE_CRC_LEN) {
                return Ok(Block { body: bytes });
            }
        }
        let b = self.check_block_with(i, ix, prev_last)?;
        self.checked.set(i);
        Ok(b)
    }

    /// Block `i`, checked whole: checksum, tag, every entry within the limits
    /// and the block, keys strictly increasing and after the previous block's
    /// last key, the entry count and last key as the index says.
    pub(super) fn check_block(&self, i: usize) -> Result<Block<'_>> {
        self.check_block_with(i, self.index_entry(i)?, None)
    }

    /// [`Table::check_block`] given block `i`'s index entry and, when the
    /// caller has it (a scan), the previous block's last key; otherwise that
    /// key is read from the index (none for block 0).
    pub(super) fn check_block_with<'t>(
        &'t self,
        i: usize,
        ix: IndexEntry<'t>,
        prev_last: Option<&'t [u8]>,
    ) -> Result<Block<'t>> {
        let mut prev = match (i, prev_last) {
            (0, _) => None,
            (_, Some(k)) => Some(k),
            (_, None) => Some(self.index_entry(i - 1)?.last_key),
        };
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

/// One index entry against the layout: block `i` starts at `next_block`, its
/// length within the limits, its entry count between 1 and what fits, its last
/// key after `prev` (the previous entry's).
pub(super) fn check_index_entry(
    e: &IndexEntry<'_>,
    i: u64,
    next_block: u64,
    prev: Option<&[u8]>,
) -> std::result::Result<(), String> {
    let len = e.len as usize;
    if e.offset != next_block {
        return Err(format!(
            "block {i} at offset {}, expected {next_block} (blocks are back to back)",
            e.offset
        ));
    }
    if !(MIN_TABLE_BLOCK_LEN..=MAX_TABLE_BLOCK_LEN).contains(&len) {
        return Err(format!(
            "block {i} length {len} outside {MIN_TABLE_BLOCK_LEN}..={MAX_TABLE_BLOCK_LEN}"
        ));
    }
    let most = (len - TABLE_CRC_LEN) / TABLE_ENTRY_HEADER_LEN;
    if e.entries == 0 || e.entries as usize > most {
        return Err(format!(
            "block {i} of {len} bytes claims {} entries (1..={most} fit)",
            e.entries
        ));
    }
    if let Some(p) = prev
        && cmp_key(e.last_key, p) != Ordering::Greater
    {
        return Err(format!("block {i}: last key out of order"));
    }
    Ok(())
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
