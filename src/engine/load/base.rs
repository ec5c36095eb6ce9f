//! Step 1 of a load, the base: the newest snapshot that verifies, decodes,
//! and that the log continues from (FORMAT.md §6; the loop is
//! `recovery::choose_base`), each snapshot tried in either shape (a whole
//! snapshot, or a table with the chain of delta tables under it, FORMAT.md
//! §14) and checked against the store's identity. Damage makes a snapshot
//! skipped, loudly; tampering, or a snapshot a compaction deleted under a
//! reader, fails the load.

use super::find::Listing;
use super::recovery::{BaseChoice, choose_base};
use super::report::RecoveryReport;
use super::verdict::corruption;
use super::{DecodeState, is_vanished, read};
use crate::engine::error::{Error, ErrorChain, Result};
use crate::engine::format::*;
use crate::engine::io::vfs::Vfs;
use crate::engine::snapshot::chain::{Link, MAX_DELTA_CHAIN};
use crate::engine::snapshot::snapfile::decode_snapshot;
use crate::engine::snapshot::table::Table;
use crate::engine::snapshot::table::format::{TABLE_HEADER_LEN, file_header_parent};
use crate::engine::snapshot::{SnapshotData, is_table};
use crate::engine::tag::{Key, StoreId, id_mismatch, snapshot_tag, tags_equal};
use std::path::Path;
use std::sync::Arc;

/// The base a load starts from, as [`choose`] found it: the choice, the
/// state the chosen snapshot decodes to (the empty state when none), and
/// its chain (FORMAT.md §14), oldest first.
pub(super) struct Base<S> {
    pub(super) choice: BaseChoice,
    pub(super) state: S,
    pub(super) chain: Vec<Link>,
}

/// Chooses the base among the snapshots of `store`'s listing, newest first:
/// the first that verifies, decodes (with `decode_state`) and that the log
/// continues from; the empty state when none does. Each newer snapshot
/// skipped is reported as a fallback. A snapshot that vanished (a compaction
/// raced a reader) or was tampered with fails the load, as does corruption
/// that leaves no base.
pub(super) fn choose<S: Default>(
    store: ChainCheck<'_>,
    decode_state: &mut DecodeState<'_, S>,
    report: &mut RecoveryReport,
) -> Result<Base<S>> {
    let (dir, listing) = (store.dir, store.listing);
    let snap_seqs: Vec<u64> = listing.snapshots.iter().map(|s| s.0).collect();
    let log_first = listing.segments.first().map(|s| s.0);
    let mut tried = BaseTry {
        store,
        state: None,
        chain: Vec::new(),
        bytes: 0,
        io_error: None,
        tampered: None,
    };
    let base = choose_base(&snap_seqs, log_first, |i| {
        tried.snapshot(i, &mut *decode_state)
    });
    let BaseTry {
        state: base_state,
        chain,
        bytes: snapshot_bytes,
        io_error,
        tampered,
        ..
    } = tried;
    if let Some(e) = io_error.filter(is_vanished) {
        return Err(e);
    }
    if let Some(e) = tampered {
        return Err(e);
    }
    let base = base.map_err(|c| corruption(dir, listing, c))?;
    for (i, why) in &base.skipped {
        report
            .snapshot_fallbacks
            .push((dir.join(&listing.snapshots[*i].1), why.clone()));
    }
    report.snapshot_seq = base.snapshot.map(|_| base.seq);
    report.snapshot_bytes = snapshot_bytes;
    let state = match base.snapshot {
        Some(_) => base_state.expect("a chosen snapshot was decoded"),
        None => S::default(),
    };
    Ok(Base {
        choice: base,
        state,
        chain,
    })
}

/// The snapshots tried for the base, newest first ([`choose_base`] calls
/// [`BaseTry::snapshot`] for each until one is chosen): what the chosen one
/// holds, and what stopped the others.
struct BaseTry<'a, S> {
    /// The store the snapshots must agree with, and where its files are.
    store: ChainCheck<'a>,
    /// The chosen snapshot's state, its chain and its size.
    state: Option<S>,
    chain: Vec<Link>,
    bytes: u64,
    /// A snapshot that could not be read (one that vanished under a reader
    /// fails the load: a compaction raced it).
    io_error: Option<Error>,
    /// A snapshot whose checksums passed but whose tag or store id did not:
    /// tampering fails the load, never a quiet fallback to an older snapshot.
    tampered: Option<Error>,
}

impl<S> BaseTry<'_, S> {
    /// Tries snapshot `i` of the listing: `Ok` when it verifies and decodes
    /// (kept as the base), else why not.
    fn snapshot(
        &mut self,
        i: usize,
        decode_state: &mut DecodeState<'_, S>,
    ) -> std::result::Result<(), String> {
        if self.tampered.is_some() {
            return Err("not checked: a newer snapshot was tampered with".into());
        }
        let (seq, name) = &self.store.listing.snapshots[i];
        let path = self.store.dir.join(name);
        // Snapshots are immutable once renamed into place (never truncated, only
        // unlinked), so even a lock-free reader may map them.
        let bytes = match read(self.store.vfs, &path, true, "read snapshot") {
            Ok(b) => b,
            Err(e) => {
                let why = ErrorChain(&e).to_string();
                self.io_error.get_or_insert(e);
                return Err(why);
            }
        };
        let bytes_len = (*bytes).as_ref().len() as u64;
        let table_file = is_table((*bytes).as_ref());
        // What the file says of itself, in either shape, and whether a tagged
        // whole snapshot's tag matches (a table checked its own tags on open).
        let mut links = Vec::new();
        let (found_seq, found_codec, found_id, tag_ok, data) = if table_file {
            let t = match Table::from_bytes(path.clone(), bytes, self.store.key) {
                Ok(t) => Arc::new(t),
                Err(e @ (Error::Tampered { .. } | Error::Key { .. })) => {
                    let why = ErrorChain(&e).to_string();
                    self.tampered = Some(e);
                    return Err(why);
                }
                Err(e) => return Err(ErrorChain(&e).to_string()),
            };
            let found = (t.seq(), t.codec(), t.store_id());
            let data = match t.parent() {
                None => {
                    links.push(link_of(&t));
                    SnapshotData::Table(t)
                }
                Some(_) => match self.store.tables(t.clone()) {
                    Ok(tables) => {
                        links = tables.iter().map(|t| link_of(t)).collect();
                        SnapshotData::Tables(tables)
                    }
                    Err(e @ (Error::Tampered { .. } | Error::Key { .. })) => {
                        let why = ErrorChain(&e).to_string();
                        self.tampered = Some(e);
                        return Err(why);
                    }
                    Err(e) if is_vanished(&e) => {
                        let why = ErrorChain(&e).to_string();
                        self.io_error.get_or_insert(e);
                        return Err(why);
                    }
                    Err(e) => return Err(ErrorChain(&e).to_string()),
                },
            };
            (found.0, found.1, found.2, true, data)
        } else {
            let view = decode_snapshot((*bytes).as_ref())?;
            let tag_ok = match (self.store.key.zip(self.store.store_id), view.tagging) {
                (Some((key, id)), Some((_, tag))) => {
                    tags_equal(&snapshot_tag(key, id, view.seq, view.payload), &tag)
                }
                _ => true,
            };
            let id = view.tagging.map(|s| s.0);
            links.push(Link {
                seq: view.seq,
                parent: None,
                bytes: bytes_len,
                table: false,
            });
            (
                view.seq,
                view.codec,
                id,
                tag_ok,
                SnapshotData::Whole(view.payload),
            )
        };
        let (kind, header) = if table_file {
            ("table", "table header")
        } else {
            ("snapshot", "header")
        };
        // Checksums passed: a wrong store id or tag is not damage but tampering,
        // never a reason to fall back quietly to an older snapshot.
        let found = (found_seq, found_codec, found_id.as_ref());
        let what = match misfit(
            kind,
            header,
            found,
            (*seq, self.store.codec, self.store.store_id),
        ) {
            Some(Misfit::Damaged(why)) => return Err(why),
            Some(Misfit::Tampered(what)) => Some(what),
            None if !tag_ok => Some("snapshot tag mismatch".to_string()),
            None => None,
        };
        if let Some(what) = what {
            self.tampered = Some(Error::Tampered {
                path,
                offset: Some(0),
                seq: Some(*seq),
                what: what.clone(),
            });
            return Err(what);
        }
        self.bytes = bytes_len;
        let what = if table_file { "table" } else { "payload" };
        self.state = Some(
            decode_state(self.store.codec, *seq, data)
                .map_err(|e| format!("{what} does not decode: {e}"))?,
        );
        self.chain = links;
        Ok(())
    }
}

fn link_of(t: &Table) -> Link {
    Link {
        seq: t.seq(),
        parent: t.parent(),
        bytes: t.size(),
        table: true,
    }
}

/// A snapshot file's identity, as its header states it or as the store
/// expects it: its seq, codec and store id.
type Identity<'a> = (u64, Codec, Option<&'a StoreId>);

/// What is wrong with a snapshot whose checksums passed but whose identity
/// differs from the one its name and the store give it.
enum Misfit {
    /// A wrong seq or codec: damage, the snapshot is skipped.
    Damaged(String),
    /// Another store's file: tampering, never a quiet fallback.
    Tampered(String),
}

/// Compares a snapshot's `found` identity with the `want`ed one; `kind` and
/// `header` name the file's shape in the message ("table", "table header").
fn misfit(kind: &str, header: &str, found: Identity, want: Identity) -> Option<Misfit> {
    if found.0 != want.0 {
        Some(Misfit::Damaged(format!(
            "{header} says seq {}, file name says {}",
            found.0, want.0
        )))
    } else if found.1 != want.1 {
        Some(Misfit::Damaged(format!(
            "{kind} codec {} differs from the log's {}",
            found.1.name(),
            want.1.name()
        )))
    } else if found.2 != want.2 {
        Some(Misfit::Tampered(id_mismatch("snapshot", found.2, want.2)))
    } else {
        None
    }
}

/// The store as the load found it, which every snapshot (and every table
/// under a delta) must agree with, and where to find its files.
pub(super) struct ChainCheck<'a> {
    pub(super) vfs: &'a dyn Vfs,
    pub(super) dir: &'a Path,
    pub(super) listing: &'a Listing,
    pub(super) key: Option<&'a Key>,
    pub(super) codec: Codec,
    pub(super) store_id: Option<&'a StoreId>,
}

impl ChainCheck<'_> {
    /// The tables of `newest`'s chain, full table first (FORMAT.md §14.3):
    /// each parent is the listed snapshot of that seq, a table of this store
    /// and codec, until a full table; at most [`MAX_DELTA_CHAIN`] deltas.
    /// Any failure is the error of the table at fault (its path, offset and
    /// what is wrong), which makes the newest snapshot unusable.
    fn tables(&self, newest: Arc<Table>) -> Result<Vec<Arc<Table>>> {
        let mut chain = vec![newest];
        while let Some(p) = chain.last().and_then(|t| t.parent()) {
            let child = chain.last().expect("not empty").path().to_path_buf();
            let corrupt = |reason: String| Error::Corrupt {
                path: child.clone(),
                offset: None,
                seq: Some(p),
                reason,
            };
            if chain.len() > MAX_DELTA_CHAIN {
                return Err(corrupt(format!(
                    "a chain of more than {MAX_DELTA_CHAIN} delta tables"
                )));
            }
            let Some((_, name)) = self.listing.snapshots.iter().find(|s| s.0 == p) else {
                return Err(corrupt(format!(
                    "delta table over {}, which is missing",
                    snapshot_name(p)
                )));
            };
            let path = self.dir.join(name);
            let bytes = read(self.vfs, &path, true, "read snapshot")?;
            if !is_table((*bytes).as_ref()) {
                return Err(corrupt(format!(
                    "delta table over {name}, which is not a table"
                )));
            }
            let t = Table::from_bytes(path.clone(), bytes, self.key)?;
            let found = (t.seq(), t.codec(), t.store_id());
            let want = (p, self.codec, self.store_id);
            match misfit(
                "table",
                "table header",
                (found.0, found.1, found.2.as_ref()),
                want,
            ) {
                None => {}
                Some(Misfit::Damaged(reason)) => {
                    return Err(Error::Corrupt {
                        path,
                        offset: None,
                        seq: Some(p),
                        reason,
                    });
                }
                Some(Misfit::Tampered(what)) => {
                    return Err(Error::Tampered {
                        path,
                        offset: None,
                        seq: Some(p),
                        what,
                    });
                }
            }
            chain.push(Arc::new(t));
        }
        chain.reverse();
        Ok(chain)
    }
}

/// The parent a snapshot file names in its header (FORMAT.md §14), read from
/// its first bytes only: `None` for a full table, a whole snapshot or an
/// unreadable file.
pub(crate) fn snapshot_parent(vfs: &dyn Vfs, path: &Path) -> Option<u64> {
    let head = vfs.read_head(path, TABLE_HEADER_LEN).ok()?;
    file_header_parent(&head)
}
