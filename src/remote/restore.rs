//! Restore: the newest manifest, its snapshot, then its chunks in seq order
//! (fetched with several GETs in flight, checked in order: `read_ahead`)
//! into a temp directory beside the target; every frame and checksum checked
//! on the way, the finished store verified with the engine's own verifier
//! (tags included; with the key, each chunk's tags are checked as it
//! arrives, naming the chunk), fsynced, then renamed into place. A gap in the
//! chain is an error naming the missing seqs; nothing is skipped.

use super::chain::latest_manifest;
use super::chunk::{ChunkView, check_frames, decode_chunk};
use super::client::Remote;
use super::config::nonce;
use super::error::{RemoteError, Result};
use super::layout::{MAX_CHUNK_LEN, Manifest};
use super::read_ahead::Want;
use crate::engine::wire::{Frame, decode_record, encode_segment_header_tagged};
use crate::engine::wire::{MAX_SNAPSHOT_LEN, segment_name, snapshot_name};
use crate::engine::{Codec, Error as EngineError, Integrity, Key, Vfs};
use std::path::{Path, PathBuf};

/// Restored segments are cut past this size, as the writer cuts its own.
const RESTORED_SEGMENT_BYTES: usize = 64 << 20;

/// What a restore (or a remote verify) read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The manifest it followed.
    pub manifest: u64,
    /// That manifest's writer epoch.
    pub epoch: u64,
    /// The snapshot's seq, if the chain has one.
    pub snapshot: Option<u64>,
    /// Chunks read.
    pub chunks: usize,
    /// Inline entries of the manifest read (version 2).
    pub inline: usize,
    /// The last seq restored.
    pub last_seq: u64,
    /// Bytes downloaded.
    pub bytes: u64,
}

fn io(op: &'static str, path: &Path, e: std::io::Error) -> RemoteError {
    RemoteError::Local(EngineError::io(op, path, e))
}

fn write_file(vfs: &dyn Vfs, path: &Path, bytes: &[u8]) -> Result<()> {
    let f = vfs
        .create_new(path)
        .map_err(|e| io("create restored file", path, e))?;
    let mut at = 0usize;
    while at < bytes.len() {
        let n = f
            .write_at(&bytes[at..], at as u64)
            .map_err(|e| io("write restored file", path, e))?;
        if n == 0 {
            return Err(io(
                "write restored file",
                path,
                std::io::Error::new(std::io::ErrorKind::WriteZero, "wrote 0 bytes"),
            ));
        }
        at += n;
    }
    f.sync_all().map_err(|e| io("fsync restored file", path, e))
}

/// What a restore fetches, in the order it checks them: the snapshot, its
/// delta tables, then the chunks.
fn wants(m: &Manifest) -> Vec<Want> {
    m.snapshot
        .iter()
        .chain(&m.deltas)
        .map(|s| Want {
            op: "read snapshot",
            rel: s.object.clone(),
            max_len: s.len.min(MAX_SNAPSHOT_LEN),
        })
        .chain(m.chunks.iter().map(|c| Want {
            op: "read chunk",
            rel: c.object.clone(),
            max_len: c.len.min(MAX_CHUNK_LEN),
        }))
        .collect()
}

/// The tagged store id the manifest names (`None`: untagged).
fn manifest_store_id(m: &Manifest) -> Result<Option<[u8; crate::engine::wire::STORE_ID_LEN]>> {
    if m.store_id.is_empty() {
        return Ok(None);
    }
    crate::engine::wire::from_hex::<{ crate::engine::wire::STORE_ID_LEN }>(m.store_id.as_bytes())
        .map(Some)
        .ok_or_else(|| {
            RemoteError::corrupt(
                super::layout::manifest_name(m.number),
                None,
                format!("store id {:?} is not 32 hex digits", m.store_id),
            )
        })
}

/// Writes the chain's store into `dir` (an empty directory that exists).
/// With `key`, every record's tag is checked as its chunk arrives, so a
/// tampered chunk is named as it is downloaded.
fn materialize(
    vfs: &dyn Vfs,
    remote: &Remote,
    m: &Manifest,
    dir: &Path,
    key: Option<&Key>,
) -> Result<RestoreReport> {
    let codec: Codec = m.codec.parse().map_err(|_| {
        RemoteError::corrupt(
            super::layout::manifest_name(m.number),
            None,
            format!("unknown codec {:?}", m.codec),
        )
    })?;
    let mut report = RestoreReport {
        manifest: m.number,
        epoch: m.epoch,
        snapshot: None,
        chunks: 0,
        inline: 0,
        last_seq: 0,
        bytes: 0,
    };
    // The snapshot and the chunks, fetched ahead (several GETs in flight,
    // bounded) and handed out in this order: each is checked below exactly
    // as when they were fetched one after the other, and the first failure
    // in seq order is the one reported (what is in flight then is dropped).
    let mut fetched = remote.read_ahead(wants(m));
    let mut expect = 1;
    for s in m.snapshot.iter().chain(&m.deltas) {
        let got = fetched.next().transpose()?.flatten();
        let bytes = got.ok_or(RemoteError::Gap {
            from: expect,
            to: s.seq,
        })?;
        if bytes.len() as u64 != s.len {
            return Err(RemoteError::corrupt(
                &s.object,
                None,
                format!("{} bytes, the manifest says {}", bytes.len(), s.len),
            ));
        }
        report.bytes += s.len;
        write_file(vfs, &dir.join(snapshot_name(s.seq)), &bytes)?;
        report.snapshot = Some(s.seq);
        expect = s.seq + 1;
    }
    let mut store_id = manifest_store_id(m)?;
    let flush = |seg: &mut Vec<u8>, first: u64| -> Result<()> {
        if !seg.is_empty() {
            write_file(vfs, &dir.join(segment_name(first)), seg)?;
            seg.clear();
        }
        Ok(())
    };
    let mut out = Out {
        seg: Vec::new(),
        seg_first: 0,
        expect,
        codec,
        flush: &flush,
    };
    for (c, got) in m.chunks.iter().zip(&mut fetched) {
        if c.first > out.expect {
            return Err(RemoteError::Gap {
                from: out.expect,
                to: c.first - 1,
            });
        }
        let bytes = got?.ok_or(RemoteError::Gap {
            from: out.expect.max(c.first),
            to: c.last,
        })?;
        if bytes.len() as u64 != c.len {
            return Err(RemoteError::corrupt(
                &c.object,
                None,
                format!("{} bytes, the manifest says {}", bytes.len(), c.len),
            ));
        }
        report.bytes += c.len;
        report.chunks += 1;
        let view = decode_chunk(&c.object, &bytes, codec, c.first, c.last)?;
        if let Some(key) = key {
            check_chunk_tags(key, store_id.as_ref(), &c.object, &bytes, &view)?;
        }
        store_id = view.header.store_id;
        out.append(c.first, view.frames, &view.starts, store_id.as_ref())?;
    }
    // Version 2: the records the manifest carries itself, checked exactly as
    // a chunk's (frames, checksums, contiguous seqs, tags), an error
    // naming the manifest and the offset in the entry's frames.
    let manifest_object = super::layout::manifest_name(m.number);
    for (i, r) in m.inline.iter().enumerate() {
        if r.first > out.expect {
            return Err(RemoteError::Gap {
                from: out.expect,
                to: r.first - 1,
            });
        }
        let what = format!("inline entry {i}");
        let bytes = r.bytes().ok_or_else(|| {
            RemoteError::corrupt(
                &manifest_object,
                None,
                format!("{what}: frames are not base64"),
            )
        })?;
        let starts = check_frames(&manifest_object, &bytes, 0, codec, r.first, r.last, &what)?;
        if let Some(key) = key
            && let Some(id) = store_id.as_ref()
        {
            check_tags(key, id, &manifest_object, &bytes, 0, codec, &starts, &what)?;
        }
        report.inline += 1;
        out.append(r.first, &bytes, &starts, store_id.as_ref())?;
    }
    let expect = out.expect;
    let (mut seg, mut seg_first) = (out.seg, out.seg_first);
    if expect - 1 != m.shipped {
        return Err(RemoteError::Gap {
            from: expect,
            to: m.shipped,
        });
    }
    if seg.is_empty() {
        // No record after the snapshot: the writer's next segment, empty.
        seg_first = expect;
        seg = encode_segment_header_tagged(codec, expect, store_id.as_ref());
    }
    flush(&mut seg, seg_first)?;
    vfs.sync_dir(dir)
        .map_err(|e| io("fsync restore directory", dir, e))?;
    report.last_seq = m.shipped;
    Ok(report)
}

/// The restored segments being written: records are appended in seq order,
/// those at or below the snapshot skipped, a segment cut past
/// `RESTORED_SEGMENT_BYTES`.
struct Out<'f> {
    seg: Vec<u8>,
    seg_first: u64,
    /// The next seq needed.
    expect: u64,
    codec: Codec,
    flush: &'f dyn Fn(&mut Vec<u8>, u64) -> Result<()>,
}

impl Out<'_> {
    /// Appends the records of `frames` (checked; record `first + i` at `starts[i]`).
    fn append(
        &mut self,
        first: u64,
        frames: &[u8],
        starts: &[usize],
        store_id: Option<&crate::engine::wire::StoreId>,
    ) -> Result<()> {
        for (i, &start) in starts.iter().enumerate() {
            let seq = first + i as u64;
            if seq < self.expect {
                continue;
            }
            let end = starts.get(i + 1).copied().unwrap_or(frames.len());
            if self.seg.len() >= RESTORED_SEGMENT_BYTES {
                (self.flush)(&mut self.seg, self.seg_first)?;
            }
            if self.seg.is_empty() {
                self.seg_first = seq;
                self.seg = encode_segment_header_tagged(self.codec, seq, store_id);
            }
            self.seg.extend_from_slice(&frames[start..end]);
            self.expect = seq + 1;
        }
        Ok(())
    }
}

/// Checks the tag of every record of chunk `object` (already decoded as
/// `view`): the chunk must carry the chain's store id, and each record's tag
/// must be the one `key` gives. An untagged chain has no tags to check.
fn check_chunk_tags(
    key: &Key,
    chain_id: Option<&crate::engine::wire::StoreId>,
    object: &str,
    bytes: &[u8],
    view: &ChunkView<'_>,
) -> Result<()> {
    let found = view.header.store_id.as_ref();
    let Some(id) = found else {
        return match chain_id {
            None => Ok(()),
            Some(_) => Err(RemoteError::corrupt(
                object,
                Some(0),
                crate::engine::wire::id_mismatch("the chunk", found, chain_id),
            )),
        };
    };
    if chain_id.is_some_and(|c| c != id) {
        return Err(RemoteError::corrupt(
            object,
            Some(0),
            crate::engine::wire::id_mismatch("the chunk", found, chain_id),
        ));
    }
    check_tags(
        key,
        id,
        object,
        bytes,
        view.header.len,
        view.header.codec,
        &view.starts,
        "the chunk",
    )
}

/// Checks the tag of each record of `bytes` at `from + starts[i]`
/// against store `id` and `key`; a mismatch is `Corrupt` naming `object`,
/// the offset in `bytes` and `what` holds the record.
#[allow(clippy::too_many_arguments)]
fn check_tags(
    key: &Key,
    id: &crate::engine::wire::StoreId,
    object: &str,
    bytes: &[u8],
    from: usize,
    codec: Codec,
    starts: &[usize],
    what: &str,
) -> Result<()> {
    for &start in starts {
        let at = from + start;
        if let Frame::Record { seq, payload, .. } = decode_record(codec, bytes, at) {
            crate::engine::wire::open_record(key, id, codec, bytes, at as u64, seq, payload)
                .map_err(|why| {
                    RemoteError::corrupt(
                        object,
                        Some(at as u64),
                        format!(
                            "record seq {seq}: {why}: {what} was changed after it was shipped, or the key is not the run's"
                        ),
                    )
                })?;
        }
    }
    Ok(())
}

fn check_clean(vfs: &dyn Vfs, dir: &Path, key: Option<&Key>) -> Result<()> {
    let v = crate::engine::Reader::new(vfs, dir)
        .with_key(key)
        .verify()?;
    match v.integrity {
        Integrity::Clean => Ok(()),
        Integrity::Damaged(e) => Err(RemoteError::corrupt(
            dir.display().to_string(),
            None,
            format!("the restored store does not verify: {e}"),
        )),
        other => Err(RemoteError::corrupt(
            dir.display().to_string(),
            None,
            format!("the restored store does not verify: {other:?}"),
        )),
    }
}

fn temp_beside(target: &Path) -> Result<PathBuf> {
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = target.file_name().ok_or_else(|| {
        RemoteError::Config(format!("restore target {} has no name", target.display()))
    })?;
    Ok(parent.join(format!(".{}.restore-{}", name.to_string_lossy(), nonce())))
}

/// Restores the run at `remote` into `target`, which must not exist. Its parent
/// is created if missing. The result is a local store a writer opens as usual.
pub fn restore(
    vfs: &dyn Vfs,
    remote: &Remote,
    target: &Path,
    key: Option<&Key>,
) -> Result<RestoreReport> {
    let exists = match vfs.dir_mode(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        // A directory, or a file or symlink at that name.
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => true,
        Err(e) => return Err(io("stat restore target", target, e)),
    };
    if exists {
        return Err(RemoteError::Config(format!(
            "restore target {} exists: restore only into a missing directory",
            target.display()
        )));
    }
    let m = latest_manifest(remote)?.ok_or_else(|| RemoteError::NoRemoteRun {
        url: remote.url().to_string(),
    })?;
    let temp = temp_beside(target)?;
    if let Some(parent) = temp.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::engine::create_dir_all_durable(vfs, parent, "create restore parent")
            .map_err(RemoteError::Local)?;
    }
    vfs.create_dir(&temp)
        .map_err(|e| io("create restore temp dir", &temp, e))?;
    let r = (|| {
        let report = materialize(vfs, remote, &m, &temp, key)?;
        check_clean(vfs, &temp, key)?;
        vfs.rename(&temp, target)
            .map_err(|e| io("rename restored run into place", target, e))?;
        if let Some(parent) = target.parent() {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            vfs.sync_dir(parent)
                .map_err(|e| io("fsync parent after restore", parent, e))?;
        }
        Ok(report)
    })();
    if r.is_err() {
        // Best effort: the temp directory's name is one no run or restore reads.
        let _ = crate::engine::remove_dir_all(vfs, &temp, "remove restore temp dir");
    }
    r
}

/// Checks the remote chain as a restore would (every object, frame, checksum
/// and tag), in a temp directory that is removed afterwards.
pub fn verify_remote(vfs: &dyn Vfs, remote: &Remote, key: Option<&Key>) -> Result<RestoreReport> {
    let m = latest_manifest(remote)?.ok_or_else(|| RemoteError::NoRemoteRun {
        url: remote.url().to_string(),
    })?;
    let temp = std::env::temp_dir().join(format!("runlog-verify-{}", nonce()));
    vfs.create_dir(&temp)
        .map_err(|e| io("create verify temp dir", &temp, e))?;
    let r = materialize(vfs, remote, &m, &temp, key)
        .and_then(|rep| check_clean(vfs, &temp, key).map(|_| rep));
    let _ = crate::engine::remove_dir_all(vfs, &temp, "remove verify temp dir");
    r
}
