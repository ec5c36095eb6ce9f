//! Keyed state: a small header plus a sorted map that lives in a table
//! snapshot (FORMAT.md §11) and is read by lookup, with the log since that
//! snapshot held in memory as an overlay. Opening costs the header, the table's
//! index and the tail, whatever the number of entries; compaction streams the
//! old table and the overlay, merged in key order, into a new table.
//!
//! A [`KeyedMachine`] says how transitions change a [`KeyedState`]; [`Keyed`]
//! adapts it to [`Machine`], so a keyed store is a `Store<Keyed<M>>` with the
//! log, recovery, group commit and compaction of every other store.

use super::merge::{Source, pop_newest};
use super::table::{Table, TableIter};
use super::{SnapshotData, SnapshotSink};
use crate::engine::codec::decode_payload;
use crate::engine::error::{Error, Result};
use crate::engine::format::Codec;
use crate::engine::machine::Machine;
use crate::engine::machine::{ApplyError, SnapshotSizes};
use serde::de::DeserializeOwned;
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

/// A state machine over a keyed state: a header that is always in memory and
/// a sorted map of string keys to values that is looked up.
pub trait KeyedMachine: Sized + Send + Sync + 'static {
    /// Run-level fields and running counters: small, always in memory.
    type Header: Serialize + DeserializeOwned + Default + Clone + Send + Sync + 'static;
    /// One entry's value (stored with `postcard` in tables).
    type Value: Serialize + DeserializeOwned + Clone + Send + Sync + 'static;
    /// One transition.
    type Transition: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// Why `apply` refused a transition.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Applies `t`, or refuses it leaving `state` as it was. A lookup that
    /// fails (a damaged table block) must make `apply` fail with
    /// [`ApplyError::Damaged`] before it changes anything; the store then
    /// reports the damage, not a refusal.
    fn apply(
        state: &mut KeyedState<Self>,
        t: &Self::Transition,
    ) -> std::result::Result<(), ApplyError<Self::Error>>;

    /// Refuses a header this build must not use (see [`Machine::check_state`]).
    fn check_header(header: &Self::Header) -> std::result::Result<(), String> {
        let _ = header;
        Ok(())
    }

    /// Reads a whole-state snapshot written before this machine kept its state
    /// in a table: the header and every entry. The default refuses it.
    #[allow(clippy::type_complexity)]
    fn decode_whole(
        codec: Codec,
        payload: &[u8],
    ) -> std::result::Result<(Self::Header, Vec<(String, Self::Value)>), String> {
        let _ = (codec, payload);
        Err("a whole-state snapshot, but this machine keeps its state in a table".into())
    }
}

/// Most overlay entries a delta flush copies under the writer's lock rather
/// than rebuilding the state from disk: a flush every `delta_bytes` of log
/// copies a few hundred; a first flush after a long log rebuilds instead.
const MAX_TAIL_COPY: usize = 16_384;

/// The [`Machine`] of a keyed store: `Store<Keyed<M>>`.
pub struct Keyed<M>(PhantomData<M>);

/// One value as the overlay holds it: the seq that wrote it, and the value.
#[derive(Clone)]
struct Written<V> {
    seq: u64,
    value: V,
}

/// A header, the tables of the newest snapshot (a full table and the delta
/// tables over it, oldest first: FORMAT.md §14), and the overlay of what
/// changed since.
pub struct KeyedState<M: KeyedMachine> {
    header: M::Header,
    tables: Vec<Arc<Table>>,
    overlay: BTreeMap<String, Written<M::Value>>,
    /// Entries in table and overlay together.
    len: u64,
    /// The seq of the last transition applied.
    seq: u64,
}

impl<M: KeyedMachine> Default for KeyedState<M> {
    fn default() -> Self {
        KeyedState {
            header: M::Header::default(),
            tables: Vec::new(),
            overlay: BTreeMap::new(),
            len: 0,
            seq: 0,
        }
    }
}

impl<M: KeyedMachine> std::fmt::Debug for KeyedState<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedState")
            .field("len", &self.len)
            .field("seq", &self.seq)
            .field(
                "tables",
                &self.tables.iter().map(|t| t.seq()).collect::<Vec<_>>(),
            )
            .field("overlay", &self.overlay.len())
            .finish_non_exhaustive()
    }
}

impl<M: KeyedMachine> KeyedState<M> {
    /// The header.
    pub fn header(&self) -> &M::Header {
        &self.header
    }

    /// The header, to change in `apply`.
    pub fn header_mut(&mut self) -> &mut M::Header {
        &mut self.header
    }

    /// How many entries there are.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The seq of the last transition applied (the snapshot's when none since).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Entries changed since the newest snapshot (held in memory).
    pub fn overlay_len(&self) -> usize {
        self.overlay.len()
    }

    /// Delta tables over the full one (FORMAT.md §14) a lookup may read.
    pub fn deltas(&self) -> usize {
        self.tables.len().saturating_sub(1)
    }

    /// Looks `key` up: the overlay, then the delta tables newest first, then
    /// the full table (each block read is checked).
    pub fn get(&self, key: &str) -> Result<Option<M::Value>> {
        if let Some(w) = self.overlay.get(key) {
            return Ok(Some(w.value.clone()));
        }
        for t in self.tables.iter().rev() {
            if let Some(bytes) = t.get(key.as_bytes())? {
                return decode_value::<M>(t, key, bytes).map(Some);
            }
        }
        Ok(None)
    }

    /// Whether `key` is in one of the tables (newest first, stopping at the first).
    fn in_tables(&self, key: &str) -> Result<bool> {
        for t in self.tables.iter().rev() {
            if t.get(key.as_bytes())?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Sets `key` to `value`. In `apply`, call it only once every check passed.
    pub fn put(&mut self, key: &str, value: M::Value) -> Result<()> {
        if self.overlay.contains_key(key) {
            self.write(key, value, true);
            return Ok(());
        }
        let existed = self.in_tables(key)?;
        self.write(key, value, existed);
        Ok(())
    }

    /// Sets `key` to `value`, as [`put`](Self::put) does, when this `apply`'s
    /// own [`get`](Self::get) of `key` has just said whether it exists
    /// (`existed`: it returned `Some`). `put` looks the key up in the tables
    /// again to count it; a transition that reads before it writes (most do)
    /// saves that second lookup. Nothing can fail: the tables are not read.
    pub fn put_after_get(&mut self, key: &str, value: M::Value, existed: bool) {
        debug_assert_eq!(
            existed,
            self.overlay.contains_key(key) || self.in_tables(key).unwrap_or(existed),
            "put_after_get: `existed` is not what get said of {key:?}"
        );
        self.write(key, value, existed);
    }

    fn write(&mut self, key: &str, value: M::Value, existed: bool) {
        let seq = self.seq + 1;
        if let Some(w) = self.overlay.get_mut(key) {
            *w = Written { seq, value };
            return;
        }
        if !existed {
            self.len += 1;
        }
        self.overlay.insert(key.to_string(), Written { seq, value });
    }

    /// Every entry from `start` on (all with `None`), in key order: the tables
    /// and the overlay merged, the newest winning. Damage is yielded once.
    pub fn iter_from(
        &self,
        start: Option<&str>,
    ) -> impl Iterator<Item = Result<(Cow<'_, str>, M::Value)>> + '_ {
        self.entries_from(start)
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> impl Iterator<Item = Result<(Cow<'_, str>, M::Value)>> + '_ {
        self.entries_from(None)
    }

    /// [`KeyedState::iter_from`], as its own type.
    fn entries_from(&self, start: Option<&str>) -> Entries<'_, M> {
        let lower = match start {
            Some(s) => Bound::Included(s.to_string()),
            None => Bound::Unbounded,
        };
        let mut sources: Sources<'_, M::Value> = self
            .tables
            .iter()
            .map(|t| {
                let it = match start {
                    Some(s) => t.scan_from(s.as_bytes()),
                    None => t.scan(),
                };
                Box::new(Mapped(it.peekable(), t.as_ref(), PhantomData)) as _
            })
            .collect();
        let overlay = self.overlay.range::<String, _>((lower, Bound::Unbounded));
        sources.push(Box::new(Overlaid(overlay.peekable(), PhantomData)));
        Entries {
            sources,
            done: false,
        }
    }

    /// The state of a full table and the deltas over it (oldest first): the
    /// header (and, for a delta, the entry count) from the newest.
    fn from_tables(tables: Vec<Arc<Table>>, seq: u64) -> std::result::Result<Self, String> {
        let newest = tables.last().ok_or("no table")?;
        let (len, header) = match newest.parent() {
            None => {
                let h: M::Header = decode_payload(Codec::Binary, newest.header())
                    .map_err(|e| format!("table header does not decode: {e}"))?;
                (newest.len(), h)
            }
            Some(_) => decode_payload::<(u64, M::Header)>(Codec::Binary, newest.header())
                .map_err(|e| format!("delta table header does not decode: {e}"))?,
        };
        Ok(KeyedState {
            header,
            len,
            tables,
            overlay: BTreeMap::new(),
            seq,
        })
    }

    /// A copy for a delta flush (`Machine::tail_copy`): the tables shared, the
    /// overlay copied; `None` when the overlay is too large to copy under the
    /// writer's lock.
    fn tail_copy(&self) -> Option<Self> {
        (self.overlay.len() <= MAX_TAIL_COPY).then(|| KeyedState {
            header: self.header.clone(),
            tables: self.tables.clone(),
            overlay: self.overlay.clone(),
            len: self.len,
            seq: self.seq,
        })
    }

    fn from_parts(header: M::Header, entries: Vec<(String, M::Value)>, seq: u64) -> Self {
        let overlay: BTreeMap<String, Written<M::Value>> = entries
            .into_iter()
            .map(|(k, value)| (k, Written { seq, value }))
            .collect();
        KeyedState {
            header,
            tables: Vec::new(),
            len: overlay.len() as u64,
            overlay,
            seq,
        }
    }
}

fn decode_value<M: KeyedMachine>(t: &Table, key: &str, bytes: &[u8]) -> Result<M::Value> {
    decode_payload(Codec::Binary, bytes).map_err(|reason| Error::Corrupt {
        path: t.path().to_path_buf(),
        offset: None,
        seq: Some(t.seq()),
        reason: format!("table entry {key:?} does not decode: {reason}"),
    })
}

/// Encodes a table's header or value (postcard in both codecs, FORMAT.md §12).
fn encode_binary<T: Serialize>(v: &T, seq: u64, out: &mut Vec<u8>) -> Result<()> {
    crate::engine::codec::encode_payload(Codec::Binary, v, out).map_err(|reason| Error::Codec {
        path: None,
        seq: Some(seq),
        reason,
    })
}

/// An entry a merge source yields (`merge.rs`).
enum Got<'a, V> {
    /// A table's key and encoded value, borrowed from its map.
    Mapped(&'a [u8], &'a [u8], &'a Table),
    /// A table's key and encoded value, copied out of one chunk of it.
    Copied(Vec<u8>, Vec<u8>),
    /// An entry the overlay holds.
    Overlay(&'a str, &'a Written<V>),
}

/// The sources of a merge, oldest first: the tables, then the overlay.
type Sources<'a, V> = Vec<Box<dyn Source<Entry = Got<'a, V>> + 'a>>;

/// A table read through its map.
struct Mapped<'a, V>(
    std::iter::Peekable<TableIter<'a>>,
    &'a Table,
    PhantomData<fn() -> V>,
);

impl<'a, V: 'a> Source for Mapped<'a, V> {
    type Entry = Got<'a, V>;
    fn peek_key(&mut self) -> Result<Option<&[u8]>> {
        if let Some(Err(_)) = self.0.peek() {
            return match self.0.next() {
                Some(Err(e)) => Err(e),
                _ => Ok(None),
            };
        }
        Ok(self.0.peek().and_then(|r| r.as_ref().ok()).map(|(k, _)| *k))
    }
    fn pop(&mut self) -> Option<Got<'a, V>> {
        match self.0.next() {
            Some(Ok((k, v))) => Some(Got::Mapped(k, v, self.1)),
            _ => None,
        }
    }
}

/// A table read a chunk at a time (a merge that writes a table).
struct Chunked<'a, V>(TableChunks<'a>, PhantomData<fn() -> V>);

impl<'a, V: 'a> Source for Chunked<'a, V> {
    type Entry = Got<'a, V>;
    fn peek_key(&mut self) -> Result<Option<&[u8]>> {
        self.0.peek()
    }
    fn pop(&mut self) -> Option<Got<'a, V>> {
        self.0.pop().map(|(k, v)| Got::Copied(k, v))
    }
}

/// The overlay, or a range of it.
/// (`'a` in the type: its keys outlive every borrow of it.)
struct Overlaid<'a, V, I: Iterator>(std::iter::Peekable<I>, PhantomData<&'a Written<V>>);

impl<'a, V: 'a, I: Iterator<Item = (&'a String, &'a Written<V>)>> Source for Overlaid<'a, V, I> {
    type Entry = Got<'a, V>;
    fn peek_key(&mut self) -> Result<Option<&[u8]>> {
        Ok(self.0.peek().map(|(k, _)| k.as_bytes()))
    }
    fn pop(&mut self) -> Option<Got<'a, V>> {
        self.0.next().map(|(k, w)| Got::Overlay(k.as_str(), w))
    }
}

/// The merged entries of a [`KeyedState`], in key order.
pub(crate) struct Entries<'a, M: KeyedMachine> {
    sources: Sources<'a, M::Value>,
    done: bool,
}

impl<'a, M: KeyedMachine> Iterator for Entries<'a, M> {
    type Item = Result<(Cow<'a, str>, M::Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = match pop_newest(&mut self.sources) {
            Ok(None) => return None,
            Ok(Some((_, Got::Overlay(k, w)))) => Ok((Cow::Borrowed(k), w.value.clone())),
            Ok(Some((_, Got::Mapped(k, v, table)))) => std::str::from_utf8(k)
                .map_err(|_| Error::Corrupt {
                    path: table.path().to_path_buf(),
                    offset: None,
                    seq: Some(table.seq()),
                    reason: "table key is not UTF-8".into(),
                })
                .and_then(|key| Ok((Cow::Borrowed(key), decode_value::<M>(table, key, v)?))),
            Ok(Some((_, Got::Copied(..)))) => return None, // iteration reads maps only
            Err(e) => Err(e),
        };
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}

impl<M: KeyedMachine> Machine for Keyed<M> {
    type State = KeyedState<M>;
    type Transition = M::Transition;
    type Error = ApplyError<M::Error>;

    fn apply(
        state: &mut KeyedState<M>,
        t: &M::Transition,
    ) -> std::result::Result<(), ApplyError<M::Error>> {
        M::apply(state, t)?;
        state.seq += 1;
        Ok(())
    }

    fn failure(e: ApplyError<M::Error>) -> Error {
        e.into_store_error()
    }

    fn check_state(state: &KeyedState<M>) -> std::result::Result<(), String> {
        M::check_header(&state.header)
    }

    fn decode_snapshot(
        codec: Codec,
        seq: u64,
        snapshot: SnapshotData<'_>,
    ) -> std::result::Result<KeyedState<M>, String> {
        match snapshot {
            SnapshotData::Whole(payload) => {
                let (header, entries) = M::decode_whole(codec, payload)?;
                Ok(KeyedState::from_parts(header, entries, seq))
            }
            SnapshotData::Table(t) => KeyedState::from_tables(vec![t], seq),
            SnapshotData::Tables(chain) => KeyedState::from_tables(chain, seq),
        }
    }

    fn write_snapshot(state: &KeyedState<M>, sink: SnapshotSink<'_>) -> Result<u64> {
        let vfs = sink.vfs.clone();
        let key = sink.tagging.map(|s| s.0.clone());
        // A delta holds what the tables after its parent and the overlay hold
        // (FORMAT.md §14); it needs its parent among this state's tables.
        let parent_at = sink
            .delta_over()
            .and_then(|p| state.tables.iter().position(|t| t.seq() == p));
        let (mut w, merged) = match parent_at {
            Some(i) => (sink.delta_table()?, &state.tables[i + 1..]),
            None => (sink.table()?, &state.tables[..]),
        };
        let mut sources: Sources<'_, M::Value> = merged
            .iter()
            .map(|t| {
                let c = TableChunks::new(vfs.as_ref(), t.path(), key.as_ref());
                Box::new(Chunked(c, PhantomData)) as _
            })
            .collect();
        sources.push(Box::new(Overlaid(
            state.overlay.iter().peekable(),
            PhantomData,
        )));
        let mut value = Vec::new();
        // A merge in key order: the tables' entries are copied as they are
        // (never decoded), the overlay's encoded; on an equal key the newest
        // source wins (the overlay, then the later table).
        while let Some((_, got)) = pop_newest(&mut sources)? {
            match got {
                Got::Overlay(k, wr) => {
                    encode_binary(&wr.value, state.seq, &mut value)?;
                    w.add(k.as_bytes(), &value)?;
                }
                Got::Copied(k, v) => w.add(&k, &v)?,
                Got::Mapped(k, v, _) => w.add(k, v)?,
            }
        }
        let mut header = Vec::new();
        if parent_at.is_some() {
            // A delta's header also carries the state's entry count (§14.2).
            encode_binary(&(state.len, &state.header), state.seq, &mut header)?;
        } else {
            encode_binary(&state.header, state.seq, &mut header)?;
        }
        w.finish(&header)
    }

    fn tail_copy(state: &KeyedState<M>) -> Option<KeyedState<M>> {
        state.tail_copy()
    }

    fn backlog(state: &KeyedState<M>) -> u64 {
        state.overlay.len() as u64
    }

    /// The entries (all of them, and the overlay's) times the bytes per
    /// entry of the chain's full table, blocks, index and footer included.
    /// No table yet, or an empty one: not known.
    fn snapshot_sizes(state: &KeyedState<M>) -> Option<SnapshotSizes> {
        let full = state.tables.first().filter(|t| !t.is_empty())?;
        let per = full.size().div_ceil(full.len());
        Some(SnapshotSizes {
            full: per.saturating_mul(state.len.max(1)),
            delta: per.saturating_mul(state.overlay.len() as u64),
        })
    }

    const KEEPS_TAIL_CACHE: bool = true;

    fn encode_tail(state: &KeyedState<M>) -> Option<Vec<u8>> {
        if state.overlay.len() > MAX_TAIL_COPY {
            return None;
        }
        // FORMAT.md §15: the entry count, the seq, the header, then the
        // overlay in key order (each key, the seq that wrote it, its value).
        let overlay: Vec<(&str, u64, &M::Value)> = state
            .overlay
            .iter()
            .map(|(k, w)| (k.as_str(), w.seq, &w.value))
            .collect();
        let mut out = Vec::new();
        let tail = (state.len, state.seq, &state.header, overlay);
        encode_binary(&tail, state.seq, &mut out).ok()?;
        Some(out)
    }

    fn decode_tail(state: &mut KeyedState<M>, bytes: &[u8]) -> std::result::Result<(), String> {
        type Tail<M> = (
            u64,
            u64,
            <M as KeyedMachine>::Header,
            Vec<(String, u64, <M as KeyedMachine>::Value)>,
        );
        let (len, seq, header, entries): Tail<M> = decode_payload(Codec::Binary, bytes)?;
        if seq <= state.seq {
            return Err(format!(
                "cache at seq {seq}, not after the snapshot's {}",
                state.seq
            ));
        }
        let mut overlay = BTreeMap::new();
        for (k, wseq, value) in entries {
            if wseq <= state.seq || wseq > seq {
                return Err(format!(
                    "entry {k:?} written at seq {wseq}, outside the cache's records"
                ));
            }
            overlay.insert(k, Written { seq: wseq, value });
        }
        state.header = header;
        state.overlay = overlay;
        state.len = len;
        state.seq = seq;
        Ok(())
    }

    fn snapshot_installed(state: &mut KeyedState<M>, seq: u64, snapshot: SnapshotData<'_>) {
        if let SnapshotData::Table(t) = snapshot {
            // The table (with the tables under it, for a delta) holds every
            // entry as of `seq`; what the overlay wrote since stays, the rest
            // is now read from the tables.
            match t.parent() {
                None => state.tables = vec![t],
                Some(p) => {
                    let Some(i) = state.tables.iter().position(|x| x.seq() == p) else {
                        // Not over this state's tables: keep the overlay.
                        return;
                    };
                    state.tables.truncate(i + 1);
                    state.tables.push(t);
                }
            }
            state.overlay.retain(|_, w| w.seq > seq);
        }
    }
}

/// Serialized whole (header, then every entry in key order) for tools that
/// want the state as one document; a store writes tables, never this.
impl<M: KeyedMachine> Serialize for KeyedState<M> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        struct All<'a, M: KeyedMachine>(&'a KeyedState<M>);
        impl<M: KeyedMachine> Serialize for All<'_, M> {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(Some(self.0.len as usize))?;
                for e in self.0.iter() {
                    let (k, v) =
                        e.map_err(|e| serde::ser::Error::custom(crate::engine::ErrorChain(&e)))?;
                    seq.serialize_element(&(k.as_ref(), &v))?;
                }
                seq.end()
            }
        }
        let mut st = s.serialize_struct("KeyedState", 2)?;
        st.serialize_field("header", &self.header)?;
        st.serialize_field("entries", &All(self))?;
        st.end()
    }
}

impl<'de, M: KeyedMachine> Deserialize<'de> for KeyedState<M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(bound = "H: DeserializeOwned, V: DeserializeOwned")]
        struct Whole<H, V> {
            header: H,
            entries: Vec<(String, V)>,
        }
        let w = Whole::<M::Header, M::Value>::deserialize(d)?;
        let mut entries = w.entries;
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        Ok(KeyedState::from_parts(w.header, entries, 0))
    }
}

/// Bytes of table entries copied per chunk of a merge.
const MERGE_CHUNK_BYTES: usize = 8 << 20;

/// A table's entries in key order, read a chunk at a time through a fresh map
/// of the (immutable) file that is dropped before the next chunk: a merge of a
/// table of any size keeps only one chunk's pages, not the whole file's.
struct TableChunks<'a> {
    vfs: &'a dyn crate::engine::io::vfs::Vfs,
    path: std::path::PathBuf,
    key: Option<&'a crate::engine::tag::Key>,
    /// The last key copied: the next chunk starts after it.
    after: Option<Vec<u8>>,
    buf: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    exhausted: bool,
    chunk: usize,
}

impl<'a> TableChunks<'a> {
    fn new(
        vfs: &'a dyn crate::engine::io::vfs::Vfs,
        path: &std::path::Path,
        key: Option<&'a crate::engine::tag::Key>,
    ) -> Self {
        TableChunks {
            vfs,
            path: path.to_path_buf(),
            key,
            after: None,
            buf: Default::default(),
            exhausted: false,
            chunk: MERGE_CHUNK_BYTES,
        }
    }

    fn fill(&mut self) -> Result<()> {
        let t = Table::open(self.vfs, &self.path, self.key)?;
        let it = match &self.after {
            None => t.scan(),
            Some(k) => t.scan_from(k),
        };
        let mut bytes = 0;
        let mut more = false;
        for e in it {
            let (k, v) = e?;
            if self.after.as_deref() == Some(k) {
                continue;
            }
            if bytes >= self.chunk && !self.buf.is_empty() {
                more = true;
                break;
            }
            bytes += k.len() + v.len();
            self.buf.push_back((k.to_vec(), v.to_vec()));
        }
        self.exhausted = !more;
        if let Some((k, _)) = self.buf.back() {
            self.after = Some(k.clone());
        }
        Ok(())
    }

    fn peek(&mut self) -> Result<Option<&[u8]>> {
        if self.buf.is_empty() && !self.exhausted {
            self.fill()?;
        }
        Ok(self.buf.front().map(|(k, _)| k.as_slice()))
    }

    fn pop(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        self.buf.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::snapshot::table::{TableSpec, TableWriter};
    use crate::engine::{RealFs, Vfs};

    #[test]
    fn chunked_reads_of_a_table_yield_every_entry_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
        let mut w = TableWriter::create(
            vfs.clone(),
            dir.path(),
            "t",
            TableSpec::new(Codec::Binary, 1, None),
        )
        .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = (0..1000u32)
            .map(|i| {
                (
                    format!("k{i:05}").into_bytes(),
                    vec![i as u8; (i % 13) as usize],
                )
            })
            .collect();
        for (k, v) in &want {
            w.add(k, v).unwrap();
        }
        w.finish(b"h").unwrap();
        for chunk in [0, 1, 7, 100, 5000, 1 << 20] {
            let mut c = TableChunks::new(vfs.as_ref(), &dir.path().join("t"), None);
            c.chunk = chunk;
            let mut got = vec![];
            while c.peek().unwrap().is_some() {
                got.push(c.pop().unwrap());
            }
            assert_eq!(got, want, "chunk {chunk}");
        }
    }
}
