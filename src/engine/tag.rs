//! The tags of a tagged store (tamper evidence): the key, the store id,
//! and the tags that bind each record and snapshot to its content, its seq and
//! its store. Pure functions over bytes, no I/O except [`Key::from_file`].
//! FORMAT.md §10 describes the bytes.
//!
//! Checksums make accidental damage loud; a tag makes deliberate change
//! detectable by whoever holds the key. Tags are per record (not chained), so
//! dropping the newest records, or rolling the whole store back to an older
//! valid copy, is not detected without an anchor kept outside the store.

use super::error::Error;
use std::fmt;
use std::path::Path;

/// Bytes of a key.
pub const KEY_LEN: usize = 32;
pub use super::format::{STORE_ID_LEN, TAG_LEN};
/// Prefix of every record tag's input.
pub const RECORD_TAG_CONTEXT: &[u8] = b"runlog record v1";
/// Prefix of every snapshot tag's input.
pub const SNAPSHOT_TAG_CONTEXT: &[u8] = b"runlog snapshot v1";
/// Prefix of every table block tag's input (FORMAT.md §11).
pub const TABLE_BLOCK_TAG_CONTEXT: &[u8] = b"runlog table block v1";
/// Prefix of every whole-table tag's input (FORMAT.md §11).
pub const TABLE_TAG_CONTEXT: &[u8] = b"runlog table v1";
/// Prefix of every table index page tag's input (FORMAT.md §11.8).
pub const TABLE_PAGE_TAG_CONTEXT: &[u8] = b"runlog table page v1";
/// The longest key file accepted: 64 hex digits and a newline (`\n` or `\r\n`).
const MAX_KEY_FILE: usize = 2 * KEY_LEN + 2;

/// A store's random identity, written in every file header of a tagged store.
pub type StoreId = [u8; STORE_ID_LEN];
/// A tag.
pub type Tag = [u8; TAG_LEN];

/// A 32-byte secret key for keyed BLAKE3. Never written into the store; its
/// `Debug` output never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        // Best effort not to leave the key in freed memory: black_box makes the
        // cleared bytes observable, so the stores are not optimized away.
        self.0 = [0; KEY_LEN];
        std::hint::black_box(&self.0);
    }
}

impl Key {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Key {
        Key(bytes)
    }

    /// Parses the content of a key file: exactly 32 raw bytes, or 64 hex digits
    /// optionally followed by one newline. Anything else is refused.
    pub fn parse(content: &[u8]) -> Result<Key, String> {
        if content.len() == KEY_LEN {
            let mut k = [0u8; KEY_LEN];
            k.copy_from_slice(content);
            return Ok(Key(k));
        }
        let hex = content
            .strip_suffix(b"\r\n")
            .or_else(|| content.strip_suffix(b"\n"))
            .unwrap_or(content);
        if hex.len() == 2 * KEY_LEN
            && let Some(k) = from_hex::<KEY_LEN>(hex)
        {
            return Ok(Key(k));
        }
        Err(format!(
            "a key file holds exactly {KEY_LEN} raw bytes, or {} hex digits and an optional newline; this one holds {} bytes{}",
            2 * KEY_LEN,
            content.len(),
            if hex.len() == 2 * KEY_LEN {
                " that are not all hex digits"
            } else {
                ""
            }
        ))
    }

    /// Reads a key file. Refused when it is readable or writable by group or
    /// others (like ssh's private keys: chmod 600 it), when it is not a regular
    /// file, and when its content is not a key (see [`Key::parse`]): those are
    /// [`Error::Key`]; a failure to read it is [`Error::Io`].
    pub fn from_file(path: &Path) -> Result<Key, Error> {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let refused = |reason: String| Error::Key {
            path: path.to_path_buf(),
            reason,
        };
        let f = std::fs::File::open(path).map_err(|e| Error::io("open key file", path, e))?;
        let meta = f
            .metadata()
            .map_err(|e| Error::io("stat key file", path, e))?;
        if !meta.is_file() {
            return Err(refused("key file is not a regular file".into()));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(refused(format!(
                "key file is accessible by group or others (mode {mode:03o}); chmod 600 it"
            )));
        }
        let mut content = Vec::with_capacity(MAX_KEY_FILE + 1);
        f.take(MAX_KEY_FILE as u64 + 1)
            .read_to_end(&mut content)
            .map_err(|e| Error::io("read key file", path, e))?;
        let key = Key::parse(&content).map_err(|e| refused(format!("key file: {e}")));
        content.fill(0);
        std::hint::black_box(&content);
        key
    }

    fn hasher(&self, context: &[u8], id: &StoreId, seq: u64) -> blake3::Hasher {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(context);
        h.update(id);
        h.update(&seq.to_le_bytes());
        h
    }
}

fn truncate(h: &blake3::Hasher) -> Tag {
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&h.finalize().as_bytes()[..TAG_LEN]);
    t
}

/// Context of a tagged store's key check (FORMAT.md §10.6).
pub const KEY_CHECK_CONTEXT: &[u8] = b"runlog key check";
/// Bytes of a key check.
pub const KEY_CHECK_LEN: usize = 8;
/// A key check: which key a tagged store was written with, without the key.
pub type KeyCheck = [u8; KEY_CHECK_LEN];

/// The key check of store `id` under `key`: the first 8 bytes of keyed BLAKE3
/// over `"runlog key check" ‖ store id ‖ 0 (u64 LE)`. Written in every segment
/// header of a tagged store so that a wrong key is refused at once, as the
/// wrong key, rather than found later as a tag mismatch that looks like
/// tampering. (All zeros would read as "no check"; the chance is 2^-64.)
pub fn key_check(key: &Key, id: &StoreId) -> KeyCheck {
    let h = key.hasher(KEY_CHECK_CONTEXT, id, 0);
    let mut c = [0u8; KEY_CHECK_LEN];
    c.copy_from_slice(&h.finalize().as_bytes()[..KEY_CHECK_LEN]);
    c
}

/// The tag of a record: the first 16 bytes of keyed BLAKE3 over
/// `"runlog record v1" ‖ store id ‖ seq (u64 LE) ‖ payload`.
pub fn record_tag(key: &Key, id: &StoreId, seq: u64, payload: &[u8]) -> Tag {
    let mut h = key.hasher(RECORD_TAG_CONTEXT, id, seq);
    h.update(payload);
    truncate(&h)
}

/// The tag of a snapshot: the first 16 bytes of keyed BLAKE3 over
/// `"runlog snapshot v1" ‖ store id ‖ seq (u64 LE) ‖ payload`.
pub fn snapshot_tag(key: &Key, id: &StoreId, seq: u64, payload: &[u8]) -> Tag {
    let mut h = key.hasher(SNAPSHOT_TAG_CONTEXT, id, seq);
    h.update(payload);
    truncate(&h)
}

/// The tag of data block `block_no` of a table snapshot: the first 16 bytes of
/// keyed BLAKE3 over `"runlog table block v1" ‖ store id ‖ seq (u64 LE) ‖
/// block_no (u64 LE) ‖ body` (the block's entries, without its checksum).
pub fn block_tag(key: &Key, id: &StoreId, seq: u64, block_no: u64, body: &[u8]) -> Tag {
    let mut h = key.hasher(TABLE_BLOCK_TAG_CONTEXT, id, seq);
    h.update(&block_no.to_le_bytes());
    h.update(body);
    truncate(&h)
}

/// The tag of index page `page_no` of a paged table (FORMAT.md §11.8): the
/// first 16 bytes of keyed BLAKE3 over `"runlog table page v1" ‖ store id ‖
/// seq (u64 LE) ‖ page_no (u64 LE) ‖ the page's bytes`.
pub fn page_tag(key: &Key, id: &StoreId, seq: u64, page_no: u64, page: &[u8]) -> Tag {
    let mut h = key.hasher(TABLE_PAGE_TAG_CONTEXT, id, seq);
    h.update(&page_no.to_le_bytes());
    h.update(page);
    truncate(&h)
}

/// The tag of a whole table snapshot: the first 16 bytes of keyed BLAKE3 over
/// `"runlog table v1" ‖ store id ‖ seq (u64 LE) ‖ parts…` where the parts are,
/// in order, the file header, the index body (a paged table's: its directory
/// and page count, FORMAT.md §11.8), the header body and the footer fields
/// before the tag.
pub fn table_tag(key: &Key, id: &StoreId, seq: u64, parts: &[&[u8]]) -> Tag {
    let mut h = key.hasher(TABLE_TAG_CONTEXT, id, seq);
    for p in parts {
        h.update(p);
    }
    truncate(&h)
}

/// Compares two tags in time independent of where they differ.
pub fn tags_equal(a: &Tag, b: &Tag) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}


/// Describes a file whose store id is not the store's.
pub fn id_mismatch(what: &str, found: Option<&StoreId>, store: Option<&StoreId>) -> String {
    let show = |i: Option<&StoreId>| i.map_or("none (untagged)".to_string(), |i| to_hex(i));
    format!(
        "{what} belongs to another store: its store id is {}, the store's is {}",
        show(found),
        show(store)
    )
}

/// A fresh random store id. std's `RandomState` keys come from the OS's
/// randomness (as for temp file names); the time and pid are mixed in too.
pub fn new_store_id() -> StoreId {
    use std::hash::{BuildHasher, Hasher};
    let mut h = blake3::Hasher::new();
    for i in 0u32..4 {
        let mut s = std::collections::hash_map::RandomState::new().build_hasher();
        s.write_u32(i);
        h.update(&s.finish().to_le_bytes());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.update(&now.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    let mut id = [0u8; STORE_ID_LEN];
    id.copy_from_slice(&h.finalize().as_bytes()[..STORE_ID_LEN]);
    id
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// Exactly `2 * N` hex digits (either case) as `N` bytes.
pub fn from_hex<const N: usize>(hex: &[u8]) -> Option<[u8; N]> {
    if hex.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (digit(hex[2 * i])? << 4) | digit(hex[2 * i + 1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> Key {
        Key::from_bytes([b; KEY_LEN])
    }

    #[test]
    fn record_tag_is_keyed_blake3_of_the_documented_input() {
        let k = key(7);
        let id = [3u8; STORE_ID_LEN];
        let mut input = b"runlog record v1".to_vec();
        input.extend_from_slice(&id);
        input.extend_from_slice(&42u64.to_le_bytes());
        input.extend_from_slice(b"payload");
        let full = blake3::keyed_hash(&[7; KEY_LEN], &input);
        assert_eq!(
            record_tag(&k, &id, 42, b"payload")[..],
            full.as_bytes()[..16]
        );
    }

    #[test]
    fn tags_bind_key_store_seq_payload_and_kind() {
        let (k, id) = (key(1), [9u8; STORE_ID_LEN]);
        let t = record_tag(&k, &id, 5, b"x");
        assert_ne!(t, record_tag(&key(2), &id, 5, b"x"));
        assert_ne!(t, record_tag(&k, &[8; STORE_ID_LEN], 5, b"x"));
        assert_ne!(t, record_tag(&k, &id, 6, b"x"));
        assert_ne!(t, record_tag(&k, &id, 5, b"y"));
        assert_ne!(t, snapshot_tag(&k, &id, 5, b"x"));
        assert_ne!(t, block_tag(&k, &id, 5, 0, b"x"));
        assert_ne!(t, table_tag(&k, &id, 5, &[b"x"]));
        let b = block_tag(&k, &id, 5, 0, b"x");
        assert_ne!(b, block_tag(&k, &id, 5, 1, b"x"));
        assert_ne!(b, block_tag(&k, &id, 6, 0, b"x"));
        assert_ne!(b, block_tag(&key(2), &id, 5, 0, b"x"));
        assert!(tags_equal(&t, &record_tag(&k, &id, 5, b"x")));
    }

    #[test]
    fn tags_equal_sees_every_byte() {
        let a = [0x5au8; TAG_LEN];
        for i in 0..TAG_LEN {
            for bit in 0..8 {
                let mut b = a;
                b[i] ^= 1 << bit;
                assert!(!tags_equal(&a, &b));
            }
        }
        assert!(tags_equal(&a, &a));
    }

    #[test]
    fn key_file_shapes() {
        let raw = [0xabu8; KEY_LEN];
        assert_eq!(Key::parse(&raw).unwrap(), Key::from_bytes(raw));
        let hex = to_hex(&raw);
        assert_eq!(Key::parse(hex.as_bytes()).unwrap(), Key::from_bytes(raw));
        assert_eq!(
            Key::parse(format!("{hex}\n").as_bytes()).unwrap(),
            Key::from_bytes(raw)
        );
        assert_eq!(
            Key::parse(hex.to_uppercase().as_bytes()).unwrap(),
            Key::from_bytes(raw)
        );
        for bad in [
            &b""[..],
            &[0u8; 31][..],
            &[0u8; 33][..],
            format!("{hex}\n\n").as_bytes(),
            format!("{}zz", &hex[..62]).as_bytes(),
            &hex.as_bytes()[..62],
            format!(" {hex}").as_bytes(),
        ] {
            assert!(Key::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn key_debug_never_shows_bytes() {
        let s = format!("{:?}", Key::from_bytes([0xcd; KEY_LEN]));
        assert!(!s.to_lowercase().contains("cd"), "{s}");
        assert!(!s.contains("205"), "{s}");
    }

    #[test]
    fn hex_round_trip() {
        let id = new_store_id();
        assert_eq!(from_hex::<STORE_ID_LEN>(to_hex(&id).as_bytes()), Some(id));
        assert_ne!(new_store_id(), id);
        assert_eq!(from_hex::<2>(b"0g00"), None);
    }
}
