//! Snapshots: the two shapes a snapshot takes, and the seam through which a
//! machine reads and writes its own (here): a whole serialized state
//! (FORMAT.md §4, `snapfile.rs`), or a sorted table read by lookup
//! (FORMAT.md §11, `table/`). The engine chooses neither; the machine's
//! [`Machine::decode_snapshot`](crate::engine::machine::Machine::decode_snapshot) and
//! [`Machine::write_snapshot`](crate::engine::machine::Machine::write_snapshot) do.
//! Beside them, the keyed state that lives in tables (`keyed.rs`), the merge
//! of a chain's tables in key order (`merge.rs`) and the rules of the chain
//! of delta tables (`chain.rs`, FORMAT.md §14). Compaction, which writes
//! snapshots, is the writer's (`store/compact.rs`).

pub(crate) mod chain;
pub(crate) mod keyed;
pub(crate) mod merge;
internal_mods! {
    snapfile;
    table;
}

use self::table::{Table, TableSpec, TableWriter};
use crate::engine::error::{Error, Result};
use crate::engine::format::{Codec, MAX_SNAPSHOT_LEN};
use crate::engine::io::files::write_file_atomic;
use crate::engine::io::vfs::Vfs;
use crate::engine::tag::{Key, StoreId};
use std::path::Path;
use std::sync::Arc;

/// A snapshot as found on disk, checked (checksums, tags) but not decoded.
#[derive(Debug, Clone)]
pub enum SnapshotData<'a> {
    /// A whole-state snapshot's payload.
    Whole(&'a [u8]),
    /// A table snapshot: its header, index and footer are checked; its blocks
    /// are checked when read.
    Table(Arc<Table>),
    /// A full table and the delta tables over it (FORMAT.md §14), oldest
    /// first, each checked as [`SnapshotData::Table`]'s; the newest's seq is
    /// the snapshot's.
    Tables(Vec<Arc<Table>>),
}

/// Where compaction writes a snapshot: the machine picks the shape.
pub struct SnapshotSink<'a> {
    pub(crate) vfs: &'a Arc<dyn Vfs>,
    pub(crate) dir: &'a Path,
    pub(crate) name: String,
    pub(crate) codec: Codec,
    pub(crate) seq: u64,
    pub(crate) tagging: Option<&'a (Key, StoreId)>,
    /// The largest whole-state payload accepted ([`Options::max_snapshot_len`](crate::engine::Options)).
    pub(crate) max_len: u64,
    /// The snapshot a delta may be written over (FORMAT.md §14).
    pub(crate) delta_over: Option<u64>,
}

impl SnapshotSink<'_> {
    /// The largest whole-state payload this store accepts: an encoder should
    /// stop as soon as it passes this (the default `write_snapshot` does).
    pub fn max_len(&self) -> u64 {
        self.max_len
    }

    /// The store's codec.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The seq the snapshot covers.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Installs a whole-state snapshot of `payload` (temp, fsync, rename, fsync
    /// directory). Returns the file's size.
    pub fn whole(self, payload: &[u8]) -> Result<u64> {
        let max = self.max_len.min(MAX_SNAPSHOT_LEN);
        if payload.len() as u64 > max {
            return Err(Error::TooLarge {
                what: "snapshot",
                len: payload.len() as u64,
                max,
            });
        }
        let tagging = self.tagging.map(|(key, id)| {
            let tag = crate::engine::tag::snapshot_tag(key, id, self.seq, payload);
            (*id, tag)
        });
        let bytes = self::snapfile::encode_snapshot_tagged(
            self.codec,
            self.seq,
            payload,
            tagging.as_ref().map(|(id, tag)| (id, tag)),
        );
        write_file_atomic(self.vfs.as_ref(), self.dir, &self.name, &bytes)?;
        Ok(bytes.len() as u64)
    }

    /// The seq of the snapshot the store asks a delta table over (FORMAT.md
    /// §14), when it does: a machine that keeps a keyed state may then write
    /// only what changed since with [`SnapshotSink::delta_table`]; any other
    /// shape is still correct.
    pub fn delta_over(&self) -> Option<u64> {
        self.delta_over
    }

    /// Starts a table snapshot: add entries in key order, then
    /// [`TableWriter::finish`] installs it atomically.
    pub fn table(self) -> Result<TableWriter> {
        TableWriter::create(
            self.vfs.clone(),
            self.dir,
            &self.name,
            TableSpec::new(self.codec, self.seq, self.tagging.cloned()),
        )
    }

    /// Starts a delta table over [`SnapshotSink::delta_over`]: only the
    /// entries written after it, and a header that stands for the whole state.
    pub fn delta_table(self) -> Result<TableWriter> {
        let parent = self.delta_over.ok_or_else(|| Error::Mismatch {
            path: self.dir.join(&self.name),
            reason: "a delta table, but the store asked for a full snapshot".into(),
        })?;
        let mut spec = TableSpec::new(self.codec, self.seq, self.tagging.cloned());
        spec.parent = Some(parent);
        TableWriter::create(self.vfs.clone(), self.dir, &self.name, spec)
    }
}

/// True when `bytes` begin like a table snapshot (FORMAT.md §11) rather than a
/// whole one.
pub(crate) fn is_table(bytes: &[u8]) -> bool {
    bytes.starts_with(&self::table::format::TABLE_MAGIC)
}
