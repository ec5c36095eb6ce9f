//! Opening a table ([`Table::from_bytes`]): its steps in order, each a
//! function here: the file header and the key, the footer and the layout it
//! states, what the index checksum covers, the checksums, a tagged table's
//! tag, and the walk of the index (an unpaged table's every entry; a paged
//! table's page directory, FORMAT.md §11.8). No data block is read.

use super::read::{Bits, Index, Table};
use super::format::*;
use crate::engine::error::{Error, Result};
use crate::engine::format::{Codec, le_u32, masked_crc};
use crate::engine::io::vfs::FileBytes;
use crate::engine::tag::{Key, STORE_ID_LEN, StoreId, TAG_LEN, table_tag, tags_equal};
use super::blocks::check_index_entry;
use std::path::{Path, PathBuf};

impl Table {
    /// Validates the file header, footer, index and header block (checksums,
    /// limits, layout, and the table tag when tagged); reads no data block.
    /// A paged table (versions 4 and 5, FORMAT.md §11.8): the page directory
    /// in place of the index, so no index page is read either. Memory: one
    /// bit per block, and one `u32` per block for an unpaged table (versions
    /// 2 and 3, whose index is walked here) or one bit per page for a paged one.
    pub fn from_bytes(path: PathBuf, bytes: FileBytes, key: Option<&Key>) -> Result<Table> {
        let b: &[u8] = (*bytes).as_ref();
        let (fh, codec) = file_header(&path, b, key)?;
        let at = Opening {
            path: &path,
            seq: fh.seq,
        };
        let l = layout(&at, b, fh.paged)?;
        let tagged = fh.flags & TABLE_FLAG_TAGGED != 0;
        let c = covered(&at, b, &l, fh.paged, tagged)?;
        check_sums(&at, b, &l, &c)?;
        let tagging = check_tag(&at, b, &l, &c, key)?;
        let (index, nblocks) = walk(&at, b, &l, &c, tagged)?;
        let checked = Bits::new(nblocks);
        let (index_at, index_end, header_at, header_end) =
            (l.index_at, c.index_end, l.header_at, l.header_end);
        Ok(Table {
            path,
            bytes,
            seq: fh.seq,
            parent: fh.parent,
            codec,
            tagging,
            entries: l.f.entries,
            index_at,
            index_end,
            index,
            nblocks,
            checked,
            header_at,
            header_end,
        })
    }
}

/// The table being opened, as its errors name it: its path and seq.
struct Opening<'a> {
    path: &'a Path,
    seq: u64,
}

impl Opening<'_> {
    /// Damage at `offset` of the file.
    fn corrupt(&self, offset: usize, reason: String) -> Error {
        corrupt(self.path, offset, Some(self.seq), reason)
    }
}

fn corrupt(path: &Path, offset: usize, seq: Option<u64>, reason: String) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        offset: Some(offset as u64),
        seq,
        reason,
    }
}

/// Open step 1: the file header, the key agreeing with it (a tagged table is
/// opened with the store's key, an untagged one without), and its codec.
fn file_header(path: &Path, b: &[u8], key: Option<&Key>) -> Result<(FileHeader, Codec)> {
    let fh =
        decode_file_header(b).map_err(|r| corrupt(path, 0, None, format!("table file header: {r}")))?;
    let seq = Some(fh.seq);
    let tagged = fh.flags & TABLE_FLAG_TAGGED != 0;
    match (tagged, key) {
        (true, None) => {
            return Err(Error::Key {
                path: path.to_path_buf(),
                reason: "table snapshot is tagged; open it with the store's key".into(),
            });
        }
        (false, Some(_)) => {
            return Err(Error::Key {
                path: path.to_path_buf(),
                reason: "table snapshot is not tagged, but a key was given".into(),
            });
        }
        _ => {}
    }
    let codec = Codec::from_id(fh.codec).ok_or_else(|| {
        corrupt(
            path,
            0,
            seq,
            format!("table file header: unknown codec byte {}", fh.codec),
        )
    })?;
    Ok((fh, codec))
}

/// Where the footer places the index and the header block, checked against
/// the file's length: blocks | index | header | footer, nothing between or
/// after.
struct Layout {
    footer_at: usize,
    f: Footer,
    index_at: usize,
    index_len: usize,
    header_at: usize,
    header_len: usize,
    /// Where the index's CRC is (its last bytes).
    crc_at: usize,
    /// Where the header body ends (its CRC follows).
    header_end: usize,
}

/// Open step 2: the footer, and the layout it states (its lengths within
/// the limits, each part ending where the next starts).
fn layout(at: &Opening<'_>, b: &[u8], paged: bool) -> Result<Layout> {
    let file_len = b.len();
    let min_len = TABLE_HEADER_LEN + 2 * TABLE_CRC_LEN + TABLE_FOOTER_LEN;
    if file_len < min_len {
        return Err(at.corrupt(
            file_len,
            format!(
                "table footer: file is {file_len} bytes, shorter than the smallest table ({min_len} bytes)"
            ),
        ));
    }
    let footer_at = file_len - TABLE_FOOTER_LEN;
    let f = decode_footer(&b[footer_at..])
        .map_err(|r| at.corrupt(footer_at, format!("table footer: {r}")))?;
    let bad_footer = |r: String| at.corrupt(footer_at, format!("table footer: {r}"));
    let index_len = f.index_len as usize;
    let header_len = f.header_len as usize;
    // What follows an index body: its CRC, or a paged index's page count and CRC.
    let trailer = if paged {
        TABLE_DIR_TRAILER_LEN
    } else {
        TABLE_CRC_LEN
    };
    if !(trailer..=MAX_TABLE_INDEX_LEN + trailer).contains(&index_len) {
        return Err(bad_footer(format!(
            "index length {index_len} outside {trailer}..={}",
            MAX_TABLE_INDEX_LEN + trailer
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
    let crc_at = index_at + index_len - TABLE_CRC_LEN;
    let header_end = header_at + header_len - TABLE_CRC_LEN;
    Ok(Layout {
        footer_at,
        f,
        index_at,
        index_len,
        header_at,
        header_len,
        crc_at,
        header_end,
    })
}

/// The bytes the index CRC and the table tag cover: the index body, or a
/// paged index's directory and page count (§11.8).
struct Covered {
    /// Where they start.
    at: usize,
    /// Where the index body ends: its CRC, or a paged index's directory.
    index_end: usize,
    /// A paged index's page count.
    pages: Option<usize>,
}

/// Open step 3: what the index CRC covers; a paged index's page count
/// checked against the index's length.
fn covered(at: &Opening<'_>, b: &[u8], l: &Layout, paged: bool, tagged: bool) -> Result<Covered> {
    let (index_len, crc_at) = (l.index_len, l.crc_at);
    let (covered_at, index_end, pages) = if paged {
        let dlen = dir_entry_len(tagged);
        let pages = le_u32(b, crc_at - size_of::<u32>()) as usize;
        let room = (index_len - TABLE_DIR_TRAILER_LEN) / dlen;
        if pages > room {
            return Err(at.corrupt(
                crc_at - size_of::<u32>(),
                format!(
                    "table page directory: {pages} pages do not fit the {index_len}-byte index"
                ),
            ));
        }
        let dir_at = crc_at - size_of::<u32>() - pages * dlen;
        (dir_at, dir_at, Some(pages))
    } else {
        (l.index_at, crc_at, None)
    };
    Ok(Covered {
        at: covered_at,
        index_end,
        pages,
    })
}

/// Open step 4: the checksums of the index (or page directory) and of the
/// header block.
fn check_sums(at: &Opening<'_>, b: &[u8], l: &Layout, c: &Covered) -> Result<()> {
    let (index_at, index_len, crc_at) = (l.index_at, l.index_len, l.crc_at);
    let (header_at, header_len, header_end) = (l.header_at, l.header_len, l.header_end);
    let covered = &b[c.at..crc_at];
    if le_u32(b, crc_at) != masked_crc(&[covered]) {
        let what = match c.pages {
            Some(_) => format!(
                "table page directory (offset {}, {} bytes): checksum mismatch",
                c.at,
                covered.len() + TABLE_CRC_LEN
            ),
            None => {
                format!("table index (offset {index_at}, {index_len} bytes): checksum mismatch")
            }
        };
        return Err(at.corrupt(c.at, what));
    }
    let header = &b[header_at..header_end];
    if le_u32(b, header_end) != masked_crc(&[header]) {
        return Err(at.corrupt(
            header_at,
            format!(
                "table header block (offset {header_at}, {header_len} bytes): checksum mismatch"
            ),
        ));
    }
    Ok(())
}

/// Open step 5: every byte outside the data blocks now passes a checksum; a
/// tagged table's tag decides whether they are the writer's. An untagged
/// table's store id and tag are zero. Returns a tagged table's key and id.
fn check_tag(
    at: &Opening<'_>,
    b: &[u8],
    l: &Layout,
    c: &Covered,
    key: Option<&Key>,
) -> Result<Option<(Key, StoreId)>> {
    let (f, footer_at) = (&l.f, l.footer_at);
    match key {
        Some(key) => {
            let covered = &b[c.at..l.crc_at];
            let header = &b[l.header_at..l.header_end];
            let prefix = &b[footer_at..footer_at + TF_TAG_AT];
            let want = table_tag(
                key,
                &f.store_id,
                at.seq,
                &[&b[..TABLE_HEADER_LEN], covered, header, prefix],
            );
            if !tags_equal(&want, &f.tag) {
                return Err(Error::Tampered {
                    path: at.path.to_path_buf(),
                    offset: None,
                    seq: Some(at.seq),
                    what: format!(
                        "table tag mismatch (file header, {}, header block or footer)",
                        if c.pages.is_some() {
                            "page directory"
                        } else {
                            "index"
                        }
                    ),
                });
            }
            Ok(Some((key.clone(), f.store_id)))
        }
        None => {
            if f.store_id != [0; STORE_ID_LEN] || f.tag != [0; TAG_LEN] {
                return Err(at.corrupt(
                    footer_at,
                    "table footer: an untagged table's store id and tag are not zero".into(),
                ));
            }
            Ok(None)
        }
    }
}

/// Open step 6: the index walked (an unpaged table: every entry, FORMAT.md
/// §11.6), or a paged one's page directory (no page is read). Returns how
/// index entries are found, and the number of data blocks.
fn walk(
    at: &Opening<'_>,
    b: &[u8],
    l: &Layout,
    c: &Covered,
    tagged: bool,
) -> Result<(Index, usize)> {
    let (index_at, index_len, index_end) = (l.index_at, l.index_len, c.index_end);
    let f = &l.f;
    Ok(match c.pages {
        None => {
            let body = &b[index_at..index_end];
            let blocks = walk_index(body, tagged, index_at, f).map_err(|(pos, r)| {
                at.corrupt(
                    index_at + pos,
                    format!("table index (offset {index_at}, {index_len} bytes): {r}"),
                )
            })?;
            let n = blocks.len();
            (Index::Flat(blocks), n)
        }
        Some(pages) => {
            let dir = &b[index_end..index_end + pages * dir_entry_len(tagged)];
            let covered_len = l.crc_at - c.at;
            walk_directory(dir, pages, tagged, index_end - index_at, index_at, f).map_err(
                |(pos, r)| {
                    at.corrupt(
                        index_end + pos,
                        format!(
                            "table page directory (offset {index_end}, {} bytes): {r}",
                            covered_len + TABLE_CRC_LEN
                        ),
                    )
                },
            )?;
            let index = Index::Paged {
                dir_at: index_end,
                pages,
                checked: Bits::new(pages),
            };
            // The directory's block counts sum to the footer's (checked).
            (index, f.blocks as usize)
        }
    })
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
        check_index_entry(&e, i as u64, next_block, prev).map_err(|r| (pos, r))?;
        prev = Some(e.last_key);
        next_block += u64::from(e.len);
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

/// Walks a paged index's directory (FORMAT.md §11.8, open step 5): pages in
/// order within `0..pages_len`, their blocks numbered and placed in order
/// from the file header to the index, each page's counts within limits, the
/// sums equal to the footer's counts. Reads no page: what a page's bytes must
/// agree with (its length, its blocks' lengths and where they end) is checked
/// by the page check on first use. One pass over fixed-size entries, about a
/// dozen comparisons each; returns the offset within the directory and what
/// is wrong.
fn walk_directory(
    dir: &[u8],
    pages: usize,
    tagged: bool,
    pages_len: usize,
    index_at: usize,
    f: &Footer,
) -> std::result::Result<(), (usize, String)> {
    let dlen = dir_entry_len(tagged);
    let (mut blocks, mut entries) = (0u64, 0u64);
    // The previous page's position and first block offset: the next page's
    // are strictly greater (every page holds an entry, every block a byte).
    let mut prev: Option<(u32, u64)> = None;
    for (p, e) in dir.chunks_exact(dlen).take(pages).enumerate() {
        let at = p * dlen;
        let d = decode_dir_entry(e, tagged)
            .ok_or_else(|| (at, format!("entry of page {p} runs past the directory")))?;
        if !(1..=MAX_TABLE_PAGE_ENTRIES as u32).contains(&d.blocks) {
            return Err((
                at,
                format!(
                    "page {p} claims {} index entries (1..={MAX_TABLE_PAGE_ENTRIES})",
                    d.blocks
                ),
            ));
        }
        if d.first_block != blocks {
            return Err((
                at,
                format!("page {p} starts at block {}, expected {blocks}", d.first_block),
            ));
        }
        if d.entries < u64::from(d.blocks) {
            return Err((
                at,
                format!("page {p}: {} blocks cannot hold {} entries", d.blocks, d.entries),
            ));
        }
        let in_order = match prev {
            None => d.at == 0 && d.first_offset == TABLE_HEADER_LEN as u64,
            Some((pat, poff)) => d.at > pat && d.first_offset > poff,
        };
        if !in_order || d.at as usize >= pages_len || d.first_offset >= index_at as u64 {
            return Err((
                at,
                format!(
                    "page {p} at index position {} with its first block at offset {}: out of order (page 0 at 0 and {TABLE_HEADER_LEN}, then increasing, within {pages_len} bytes of pages and blocks before {index_at})",
                    d.at, d.first_offset
                ),
            ));
        }
        blocks += u64::from(d.blocks);
        entries = entries.saturating_add(d.entries);
        prev = Some((d.at, d.first_offset));
    }
    if prev.is_none() && (pages_len != 0 || index_at != TABLE_HEADER_LEN) {
        return Err((
            0,
            format!("no page, but {pages_len} bytes of pages and blocks up to offset {index_at}"),
        ));
    }
    if blocks != f.blocks {
        return Err((0, format!("{blocks} blocks, the footer says {}", f.blocks)));
    }
    if entries != f.entries {
        return Err((
            0,
            format!("{entries} entries, the footer says {}", f.entries),
        ));
    }
    Ok(())
}
