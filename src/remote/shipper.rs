//! The shipper: takes an epoch over a run's manifest chain (fencing) and ships
//! the local log to it round by round (FORMAT.md, "Remote layout", protocol).
//! It reads the local store's files only: the engine knows nothing of remotes.
//!
//! One round: upload the objects (a snapshot when the local store has a newer
//! one, a chunk of the records after the chain's `shipped`), each create-only
//! under a name carrying this writer's epoch and the manifest number it is for,
//! then write the manifest of the next slot create-only. Up to
//! [`Remote::with_rounds_in_flight`] manifests are in flight at once: the
//! shipper plans them under its caller's lock ([`Shipper::step`]), the caller
//! sends each outside it ([`send`]) and records the outcome
//! ([`Shipper::record`]); they are acknowledged in slot order (`flight.rs`).

use super::chain::{read_chain, read_manifest};
use super::chunk::{encode_chunk, take_records};
use super::client::{Put, Remote};
use super::config::{RemoteConfig, nonce};
use super::error::{RemoteError, Result};
use super::flight::{Flight, Outcome};
use super::layout::*;
use crate::engine::wire::{parse_segment_name, parse_snapshot_name};
use crate::engine::{Codec, Vfs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How often a claim retries when an older writer's manifest landed first.
const CLAIM_ATTEMPTS: usize = 8;

/// What the shipper has done (part of [`super::RemoteStatus`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShipState {
    /// This writer's epoch.
    pub epoch: u64,
    /// The chain head's number (the last manifest this writer wrote or adopted).
    pub manifest: u64,
    /// The highest seq the remote chain holds.
    pub shipped: u64,
    /// Rounds that landed a manifest.
    pub rounds: u64,
    /// Bytes of chunks, snapshots and inline records uploaded.
    pub bytes: u64,
    /// Rounds whose new records rode inline in the manifest (one PUT).
    pub inline_rounds: u64,
    /// Set once fenced: the newer epoch.
    pub fenced_by: Option<u64>,
    /// Rounds it keeps in flight at most.
    pub rounds_in_flight: u64,
}

/// A writer of one run's manifest chain.
pub(crate) struct Shipper {
    remote: Remote,
    dir: PathBuf,
    vfs: Arc<dyn Vfs>,
    /// This process (host, pid) and this directory (`REMOTE`'s holder).
    writer: (String, String),
    /// The newest manifest acknowledged: landed, every slot before it settled.
    head: Manifest,
    /// The newest manifest planned: the next one is built on it (cumulative).
    base: Manifest,
    /// The slots sent and not yet settled.
    flight: Flight,
    state: ShipState,
}

/// What a caller of [`Shipper::step`] does next.
pub(crate) enum Step {
    /// The remote holds the seq asked for.
    Done,
    /// Another caller's PUT will settle it: wait for a recorded outcome.
    Wait,
    /// Send these bytes as manifest slot `.0` ([`send`]), then record the outcome.
    Send(u64, Arc<Vec<u8>>),
}

/// Sends manifest slot `number` (`bytes`, of a writer of `epoch`) create-only
/// and learns its fate: made outside the shipper's lock, so several are in
/// flight at once. An error leaves the outcome [`Outcome::Unknown`].
pub(crate) fn send(
    remote: &Remote,
    number: u64,
    bytes: &[u8],
    epoch: u64,
) -> (Outcome, Result<()>) {
    let name = manifest_name(number);
    match remote.put_create("put manifest", &name, bytes.to_vec()) {
        Ok(Put::Created) => return (Outcome::Landed, Ok(())),
        Ok(Put::Exists) => {}
        Err(e) => return (Outcome::Unknown, Err(e)),
    }
    let found = match read_manifest(remote, number) {
        Ok(f) => f,
        Err(e) => return (Outcome::Unknown, Err(e)),
    };
    match found {
        Some(f) if f.encode() == bytes => (Outcome::Landed, Ok(())),
        // An equal epoch is another claimer's that won this slot (a
        // writer's own manifests are byte-equal).
        Some(f) if f.epoch >= epoch => (
            Outcome::Fenced(f.epoch),
            Err(RemoteError::Fenced {
                epoch,
                newer: f.epoch,
                manifest: f.number,
            }),
        ),
        Some(_) => (Outcome::Superseded, Ok(())),
        None => (
            Outcome::Unknown,
            Err(RemoteError::Diverged {
                reason: format!("manifest {number} exists yet cannot be read"),
            }),
        ),
    }
}

fn writer_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{host} pid {} {}", std::process::id(), nonce())
}

/// The local store's files: segments and snapshots by seq.
struct Local {
    segments: Vec<(u64, String)>,
    snapshots: Vec<(u64, String)>,
}

fn list_local(vfs: &dyn Vfs, dir: &Path) -> Result<Local> {
    let names = vfs
        .list(dir)
        .map_err(|e| crate::engine::Error::io("list store directory", dir, e))?;
    let mut l = Local {
        segments: vec![],
        snapshots: vec![],
    };
    for n in names {
        if let Some(s) = parse_segment_name(&n) {
            l.segments.push((s, n));
        } else if let Some(s) = parse_snapshot_name(&n) {
            l.snapshots.push((s, n));
        }
    }
    l.segments.sort();
    l.snapshots.sort();
    Ok(l)
}

/// The local store's codec and (tagged) store id, from its first readable segment header.
pub fn local_header(vfs: &dyn Vfs, dir: &Path) -> Result<(Codec, String)> {
    let l = list_local(vfs, dir)?;
    for (_, name) in &l.segments {
        let path = dir.join(name);
        if let Ok(b) = vfs.read_head(&path, crate::engine::wire::MAX_JSONL_HEADER_LEN)
            && let Ok(h) = crate::engine::wire::decode_segment_header(&b)
        {
            let id = h
                .store_id
                .map(|i| crate::engine::wire::to_hex(&i))
                .unwrap_or_default();
            return Ok((h.codec, id));
        }
    }
    Err(RemoteError::Local(crate::engine::Error::NotFound {
        path: dir.to_path_buf(),
    }))
}

impl Shipper {
    /// Takes the run for this process: a manifest at the chain's lowest empty
    /// slot `L`, a copy of the head with the head's epoch + 1 and this
    /// directory's holder, written create-only (FORMAT.md §13.3). Every
    /// process claims an epoch of its own, so a dead predecessor's late
    /// manifests (lower epoch) never pass for this one's.
    ///
    /// Against the head, by `config` (the directory's `REMOTE`): a head this
    /// directory wrote (its holder; before version 3, its epoch) must be
    /// continued by the local log, else [`RemoteError::Diverged`]; another
    /// directory's head over an epoch this directory held is
    /// [`RemoteError::Fenced`]; a directory that never held one claims when
    /// its local log continues the head, and is fenced (`epoch` 0) when it
    /// does not. Losing the race for `L` to an equal or higher epoch is
    /// `Fenced` too. A tagged store claiming another tagged store's chain is
    /// `Diverged`.
    pub fn claim(
        remote: Remote,
        dir: &Path,
        vfs: Arc<dyn Vfs>,
        config: &RemoteConfig,
    ) -> Result<Shipper> {
        let (codec, store_id) = local_header(vfs.as_ref(), dir)?;
        let writer = (writer_name(), config.holder.clone());
        for _ in 0..CLAIM_ATTEMPTS {
            let chain = read_chain(&remote)?;
            let slot = chain.lowest_empty;
            let next = match &chain.head {
                None if config.epoch > 0 => {
                    return Err(RemoteError::NoRemoteRun {
                        url: remote.url().to_string(),
                    });
                }
                None => Manifest::genesis(slot, 1, writer.clone(), codec.name(), store_id.clone()),
                Some(h) => {
                    judge(&remote, vfs.as_ref(), dir, h, config, &store_id)?;
                    let mut m = h.clone();
                    m.version = MANIFEST_VERSION;
                    m.number = slot;
                    m.epoch += 1;
                    (m.writer, m.holder) = writer.clone();
                    m
                }
            };
            let bytes = next.encode();
            match send(&remote, slot, &bytes, next.epoch) {
                (Outcome::Landed, _) => {
                    return Ok(Shipper::new(remote, dir, vfs, writer, next));
                }
                (Outcome::Fenced(_), Err(e)) | (_, Err(e)) => return Err(e),
                // An older writer's manifest landed there first: claim again above it.
                _ => continue,
            }
        }
        Err(RemoteError::Diverged {
            reason: format!(
                "could not claim {}: the chain kept moving over {CLAIM_ATTEMPTS} attempts",
                remote.url()
            ),
        })
    }

    fn new(
        remote: Remote,
        dir: &Path,
        vfs: Arc<dyn Vfs>,
        writer: (String, String),
        head: Manifest,
    ) -> Shipper {
        let state = ShipState {
            epoch: head.epoch,
            manifest: head.number,
            shipped: head.shipped,
            rounds_in_flight: remote.rounds_in_flight,
            ..Default::default()
        };
        let flight = Flight::new(remote.rounds_in_flight);
        Shipper {
            remote,
            dir: dir.to_path_buf(),
            vfs,
            writer,
            base: head.clone(),
            head,
            flight,
            state,
        }
    }

    /// What it has done.
    pub fn state(&self) -> &ShipState {
        &self.state
    }

    /// The remote it writes, for [`send`].
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// What a caller waiting for `seq` on the remote does next, shipping
    /// local records up to `upto` (records the caller knows durable locally,
    /// `upto ≥ seq`): nothing ([`Step::Done`]), wait for a PUT under way, or
    /// send a manifest: an unanswered one again, else a new one when the
    /// window has room.
    pub fn step(&mut self, seq: u64, upto: u64) -> Result<Step> {
        self.settle()?;
        if self.head.shipped >= seq {
            return Ok(Step::Done);
        }
        if let Some((n, bytes)) = self.flight.resend() {
            return Ok(Step::Send(n, bytes));
        }
        if self.flight.covers(seq) || !self.flight.has_room() {
            return Ok(Step::Wait);
        }
        self.send_next(upto.max(seq))
    }

    /// The next step toward a head whose newest table covers seq `k` (an
    /// explicit compaction's snapshot, which no round ships for want of
    /// records after it): `Done` once it does (or no local snapshot at or
    /// after `k` is left to ship); `Wait` while rounds are in flight, which
    /// settle first, in slot order (FORMAT.md §13.4), and may carry it;
    /// then a round of the records shipped already and the newest snapshot.
    pub fn step_snapshot(&mut self, k: u64) -> Result<Step> {
        self.settle()?;
        let top = self.head.deltas.last().or(self.head.snapshot.as_ref());
        if top.is_some_and(|t| t.seq >= k) {
            return Ok(Step::Done);
        }
        if let Some((n, bytes)) = self.flight.resend() {
            return Ok(Step::Send(n, bytes));
        }
        if !self.flight.is_empty() {
            return Ok(Step::Wait);
        }
        let shipped = self.head.shipped;
        let local = list_local(self.vfs.as_ref(), &self.dir)?;
        if !local.snapshots.iter().any(|&(s, _)| s >= k && s <= shipped) {
            return Ok(Step::Done);
        }
        self.send_next(shipped)
    }

    /// Plans the next slot's manifest over the last one planned (records up
    /// to `upto`), queues it in flight and hands back its bytes to send.
    fn send_next(&mut self, upto: u64) -> Result<Step> {
        let (next, inline) = self.plan(upto)?;
        self.base = next.clone();
        let n = next.number;
        Ok(Step::Send(n, self.flight.push(next, inline)))
    }

    /// Records what became of slot `number`'s PUT.
    pub fn record(&mut self, number: u64, outcome: Outcome) {
        self.flight.record(number, outcome);
        let _ = self.settle();
    }

    /// Acknowledges what settled in slot order; `Fenced` once fenced.
    fn settle(&mut self) -> Result<()> {
        if self.state.fenced_by.is_none() {
            let s = self.flight.settle();
            if let Some(m) = s.landed {
                self.state.manifest = m.number;
                self.state.shipped = m.shipped;
                self.head = m;
            }
            self.state.rounds += s.rounds;
            self.state.inline_rounds += s.inline_rounds;
            if let Some((newer, _)) = s.fenced {
                self.state.fenced_by = Some(newer);
            }
        }
        match self.state.fenced_by {
            Some(newer) => Err(RemoteError::Fenced {
                epoch: self.state.epoch,
                newer,
                manifest: self.head.number,
            }),
            None => Ok(()),
        }
    }

    /// Uploads the objects of the next round and returns its manifest (not
    /// yet written), built on the last one planned, and whether its new
    /// records ride inline.
    fn plan(&mut self, upto: u64) -> Result<(Manifest, bool)> {
        let local = list_local(self.vfs.as_ref(), &self.dir)?;
        let number = self.base.number + 1;
        let epoch = self.state.epoch;
        let mut next = self.base.clone();
        next.version = MANIFEST_VERSION;
        next.number = number;
        (next.writer, next.holder) = self.writer.clone();

        // A newer local snapshot: upload it; chunks it covers leave the live set.
        self.ship_snapshot(&local, upto, &mut next)?;

        // Re-ship the trailing run of small chunks as one once it is
        // MERGE_AT_CHUNKS long (and the local log still holds it): the live
        // set stays at about one chunk per SMALL_CHUNK_BYTES of log, and no
        // round re-ships more than MERGE_MAX_BYTES.
        let mut from = next.shipped + 1;
        let tail_start = next
            .chunks
            .iter()
            .rposition(|c| c.len >= SMALL_CHUNK_BYTES)
            .map_or(0, |i| i + 1);
        let tail = &next.chunks[tail_start..];
        let tail_bytes: u64 = tail.iter().map(|c| c.len).sum();
        let merge = tail.len() >= MERGE_AT_CHUNKS
            && tail_bytes < MERGE_MAX_BYTES
            && local
                .segments
                .first()
                .is_some_and(|(s, _)| *s <= tail[0].first);
        if merge {
            from = tail[0].first;
        }
        if from > upto {
            // Nothing new (the records rode in a superseded slot): the same
            // content again, at the next slot.
            return Ok((next, false));
        }
        let (header, frames, first, last, before, last_digest) = self.take(&local, from, upto)?;
        if !merge
            && let Some(b) = before
            && !next.tail.is_empty()
            && b != next.tail
        {
            return Err(RemoteError::Diverged {
                reason: format!(
                    "local record {} differs from the one the remote chain holds",
                    from - 1
                ),
            });
        }
        // The common case: few new bytes, and the manifest still has room.
        // They ride in manifest n+1 itself: the round is one PUT.
        let (round_max, total_max) = self.remote.inline_limits();
        let new_bytes = frames.len() as u64;
        if !merge && new_bytes <= round_max && next.inline_bytes() + new_bytes <= total_max {
            next.inline.push(InlineRef::new(first, last, &frames));
            next.shipped = last;
            next.tail = last_digest;
            self.state.bytes += new_bytes;
            return Ok((next, true));
        }
        // Else a chunk first. Not a merge (which re-read them from the local
        // log): the records the manifest carried inline lead the chunk, byte
        // for byte as shipped, and leave the manifest with it.
        let (first, frames) = if merge || next.inline.is_empty() {
            (first, frames)
        } else {
            self.inline_then(&next, first, &frames)?
        };
        next.inline.clear();
        let object = chunk_name(first, last, epoch, number);
        let chunk = encode_chunk(&header, first, &frames);
        let len = chunk.len() as u64;
        self.upload("put chunk", &object, chunk.into())?;
        if merge {
            if last < next.shipped {
                // Never: a merge re-ships under MERGE_MAX_BYTES, far below a chunk's cut.
                return Err(RemoteError::Diverged {
                    reason: format!(
                        "a merged chunk ended at seq {last}, before the chain's {}",
                        next.shipped
                    ),
                });
            }
            next.chunks.truncate(tail_start);
        }
        next.chunks.push(ChunkRef {
            first,
            last,
            object,
            len,
        });
        next.shipped = last;
        next.tail = last_digest;
        Ok((next, false))
    }

    /// Uploads the newest local snapshot when it is newer than the remote's
    /// and within `upto` (or what is shipped already), with the delta tables
    /// and the full one under it (FORMAT.md §14) that the chain does not
    /// hold yet, into `next`: chunks and inline records it covers leave the
    /// live set.
    fn ship_snapshot(&mut self, local: &Local, upto: u64, next: &mut Manifest) -> Result<()> {
        let (epoch, number) = (self.state.epoch, next.number);
        let held: Vec<SnapshotRef> = self
            .base
            .snapshot
            .iter()
            .chain(&self.base.deltas)
            .cloned()
            .collect();
        let remote_top = held.last().map_or(0, |s| s.seq);
        let limit = upto.max(self.base.shipped);
        let Some(&(k, _)) = local.snapshots.iter().rev().find(|(s, _)| *s <= limit) else {
            return Ok(());
        };
        if k <= remote_top {
            return Ok(());
        }
        let Some(chain) = self.table_chain(local, k) else {
            return Ok(()); // compacted away since the listing: the next round sees its successor
        };
        let mut refs: Vec<SnapshotRef> = Vec::with_capacity(chain.len());
        for (i, (seq, name)) in chain.into_iter().enumerate() {
            // The chain already holds it when it holds every table under it
            // at the same places (a table names its parent by seq).
            let same_below = refs.iter().zip(&held).all(|(a, b)| a == b);
            if let Some(r) = held.get(i).filter(|r| r.seq == seq && same_below) {
                refs.push(r.clone());
                continue;
            }
            let path = self.dir.join(&name);
            // A snapshot is never written after its rename: mapped, it is
            // sent from the page cache, not from a copy in this process.
            let bytes = match self.vfs.read_mapped(&path) {
                Ok(b) => bytes::Bytes::from_owner(Mapped(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(crate::engine::Error::io("read snapshot", &path, e).into()),
            };
            let object = snapshot_object_name(seq, epoch, number);
            let len = bytes.len() as u64;
            self.upload("put snapshot", &object, bytes)?;
            refs.push(SnapshotRef { seq, object, len });
        }
        let mut refs = refs.into_iter();
        next.snapshot = refs.next();
        next.deltas = refs.collect();
        next.chunks.retain(|c| c.last > k);
        next.inline.retain(|r| r.last > k);
        if next.shipped < k {
            next.shipped = k;
            next.tail = self.digest_of(local, k).unwrap_or_default();
        }
        Ok(())
    }

    /// The local snapshot at `k` and the ones under it, full first: a delta
    /// table names its parent (FORMAT.md §14). `None` when one of them is
    /// gone (a compaction since the listing).
    fn table_chain(&self, local: &Local, k: u64) -> Option<Vec<(u64, String)>> {
        let mut chain = Vec::new();
        let mut at = Some(k);
        while let Some(seq) = at {
            let (_, name) = local.snapshots.iter().find(|(s, _)| *s == seq)?;
            at = crate::engine::snapshot_parent(self.vfs.as_ref(), &self.dir.join(name))
                .filter(|&p| p < seq);
            chain.push((seq, name.clone()));
        }
        chain.reverse();
        Some(chain)
    }

    /// The records `next` carries inline, byte for byte as shipped, then
    /// `frames` (from seq `first`): a chunk's first seq and bytes. The
    /// inline records must run without a gap up to `first`.
    fn inline_then(&self, next: &Manifest, first: u64, frames: &[u8]) -> Result<(u64, Vec<u8>)> {
        let mut all = Vec::with_capacity(next.inline_bytes() as usize + frames.len());
        let mut expect = next.inline[0].first;
        for r in &next.inline {
            let bytes = r.bytes().filter(|_| r.first == expect);
            let Some(bytes) = bytes else {
                return Err(RemoteError::Diverged {
                    reason: format!(
                        "manifest {} carries inline records {}..={} where seq {expect} was due",
                        self.base.number, r.first, r.last
                    ),
                });
            };
            all.extend_from_slice(&bytes);
            expect = r.last + 1;
        }
        if expect != first {
            return Err(RemoteError::Diverged {
                reason: format!(
                    "manifest {}'s inline records end before seq {}, the next to ship is {first}",
                    self.base.number, expect
                ),
            });
        }
        all.extend_from_slice(frames);
        Ok((next.inline[0].first, all))
    }

    /// Create-only upload of an object only this writer names; a lost answer
    /// retried finds its own bytes there.
    fn upload(&mut self, op: &'static str, object: &str, bytes: bytes::Bytes) -> Result<()> {
        let len = bytes.len() as u64;
        match self.remote.put_create_shared(op, object, bytes.clone())? {
            Put::Created => {}
            Put::Exists => {
                let found = self.remote.get(op, object, len)?;
                if found.as_deref() != Some(&bytes[..]) {
                    return Err(RemoteError::Diverged {
                        reason: format!("object {object} exists with other bytes"),
                    });
                }
            }
        }
        self.state.bytes += len;
        Ok(())
    }

    /// The frames of local records `from..=upto` (up to about a chunk's worth).
    #[allow(clippy::type_complexity)]
    fn take(
        &self,
        local: &Local,
        from: u64,
        upto: u64,
    ) -> Result<(
        crate::engine::wire::SegmentHeader,
        Vec<u8>,
        u64,
        u64,
        Option<String>,
        String,
    )> {
        let start = local.segments.iter().rposition(|(s, _)| *s <= from);
        let Some(start) = start else {
            return Err(RemoteError::Diverged {
                reason: format!(
                    "the local log no longer holds seq {from} (its first segment starts at {:?}) and no local snapshot covers it",
                    local.segments.first().map(|s| s.0)
                ),
            });
        };
        let mut frames = Vec::new();
        let mut header = None;
        let mut range: Option<(u64, u64)> = None;
        let mut before = None;
        let mut last_digest = String::new();
        for (_, name) in &local.segments[start..] {
            let want = range.map_or(from, |r| r.1 + 1);
            if want > upto || frames.len() as u64 >= CHUNK_TARGET_BYTES {
                break;
            }
            let path = self.dir.join(name);
            let bytes = self
                .vfs
                .read(&path)
                .map_err(|e| crate::engine::Error::io("read segment", &path, e))?;
            let (h, t) = take_records(
                (*bytes).as_ref(),
                want,
                upto,
                CHUNK_TARGET_BYTES,
                &mut frames,
            )
            .map_err(|reason| crate::engine::Error::Corrupt {
                path: path.clone(),
                offset: None,
                seq: None,
                reason,
            })?;
            if range.is_none() {
                before = t.before.clone();
            }
            header.get_or_insert(h);
            match (t.range, &mut range) {
                (Some((a, b)), None) if a == from => range = Some((a, b)),
                (Some((a, b)), Some(r)) if a == r.1 + 1 => r.1 = b,
                (None, _) => {}
                (Some((a, _)), _) => {
                    return Err(crate::engine::Error::Corrupt {
                        path,
                        offset: None,
                        seq: Some(a),
                        reason: format!("expected seq {want} here, found {a}"),
                    }
                    .into());
                }
            }
            if let Some(d) = t.last_digest {
                last_digest = d;
            }
        }
        match (header, range) {
            (Some(h), Some((a, b))) => Ok((h, frames, a, b, before, last_digest)),
            _ => Err(RemoteError::Diverged {
                reason: format!(
                    "the local log in {} holds no record {from}, yet {upto} is durable",
                    self.dir.display()
                ),
            }),
        }
    }

    fn digest_of(&self, local: &Local, seq: u64) -> Option<String> {
        let i = local.segments.iter().rposition(|(s, _)| *s <= seq)?;
        let bytes = self.vfs.read(&self.dir.join(&local.segments[i].1)).ok()?;
        let mut sink = Vec::new();
        let (_, t) = take_records((*bytes).as_ref(), seq, seq, u64::MAX, &mut sink).ok()?;
        t.last_digest
    }
}

/// Whether this directory (`config`) may claim over head `h`: see
/// [`Shipper::claim`] and FORMAT.md §13.3.1.
fn judge(
    remote: &Remote,
    vfs: &dyn Vfs,
    dir: &Path,
    h: &Manifest,
    config: &RemoteConfig,
    store_id: &str,
) -> Result<()> {
    if !h.store_id.is_empty() && !store_id.is_empty() && h.store_id != store_id {
        return Err(RemoteError::Diverged {
            reason: format!(
                "the chain at {} belongs to tagged store {}, and the local store in {} is {store_id}",
                remote.url(),
                h.store_id,
                dir.display(),
            ),
        });
    }
    let fenced = |epoch| RemoteError::Fenced {
        epoch,
        newer: h.epoch,
        manifest: h.number,
    };
    if h.held_by(&config.holder, config.epoch) {
        // This directory wrote the head: its local log holds every record
        // shipped (only locally durable records are), so it must continue it.
        return check_continues(vfs, dir, h);
    }
    if config.epoch > 0 {
        if h.epoch > config.epoch {
            return Err(fenced(config.epoch));
        }
        return Err(RemoteError::Diverged {
            reason: format!(
                "this directory held epoch {} but the chain head (manifest {}) carries epoch {} from another directory: its claim is missing",
                config.epoch, h.number, h.epoch
            ),
        });
    }
    // This directory never held an epoch: every manifest of the chain was
    // written by another. A local log that does not continue the head
    // (behind it, or different at its last seq) is a copy that writer has
    // moved past: fenced.
    match check_continues(vfs, dir, h) {
        Err(RemoteError::Diverged { .. }) => Err(fenced(0)),
        r => r,
    }
}

/// The local log must hold the chain's last record, byte for byte (when it
/// still has it), and must not end before it.
fn check_continues(vfs: &dyn Vfs, dir: &Path, head: &Manifest) -> Result<()> {
    if head.shipped == 0 {
        return Ok(());
    }
    let local = list_local(vfs, dir)?;
    let Some(i) = local.segments.iter().rposition(|(s, _)| *s <= head.shipped) else {
        // Compacted into a snapshot, or the log starts after it: judge by the snapshot.
        let snap = local.snapshots.last().map_or(0, |s| s.0);
        if snap >= head.shipped {
            return Ok(());
        }
        return Err(RemoteError::Diverged {
            reason: format!(
                "the remote holds seqs up to {} but the local log in {} does not reach it: restore first",
                head.shipped,
                dir.display()
            ),
        });
    };
    let path = dir.join(&local.segments[i].1);
    let bytes = vfs
        .read(&path)
        .map_err(|e| crate::engine::Error::io("read segment", &path, e))?;
    let mut sink = Vec::new();
    let (_, t) = take_records(
        (*bytes).as_ref(),
        head.shipped,
        head.shipped,
        u64::MAX,
        &mut sink,
    )
    .map_err(|reason| crate::engine::Error::Corrupt {
        path: path.clone(),
        offset: None,
        seq: None,
        reason,
    })?;
    match t.last_digest {
        Some(d) if head.tail.is_empty() || d == head.tail => Ok(()),
        Some(_) => Err(RemoteError::Diverged {
            reason: format!(
                "local record {} in {} differs from the remote chain's (manifest {}): the run was written from two places",
                head.shipped,
                path.display(),
                head.number
            ),
        }),
        None => Err(RemoteError::Diverged {
            reason: format!(
                "the remote holds seqs up to {} but the local log in {} ends before it: restore first",
                head.shipped,
                dir.display()
            ),
        }),
    }
}

/// A snapshot file's bytes as `object_store` sends them: the map (or the
/// read) the engine's filesystem gave, held until the request is done.
struct Mapped(Box<dyn crate::engine::FileData>);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}
