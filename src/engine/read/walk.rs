//! The record walk: every valid record of every segment, oldest first, read
//! without a lock (`runlog dump` and tests use it), or only those after a
//! given seq (a reader following the log, such as `runlog ui`).

use super::Reader;
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::io::dir::check_dir;
use crate::engine::load::find::{check_key, check_key_check, list_store};
use crate::engine::load::replay::record_payload;
use crate::engine::log::frame::decode_segment_header;
use crate::engine::log::scan::scan_segment;
use crate::engine::tag::{StoreId, id_mismatch};

impl Reader<'_> {
    /// Calls `f(seq, payload)` for every valid record in every segment, oldest
    /// first, up to the first damage. Returns the store's codec. In a tagged
    /// store each record's tag is checked before `f` sees its payload, and a
    /// mismatch stops the walk with [`Error::Tampered`].
    pub fn records(&self, mut f: impl FnMut(u64, &[u8])) -> Result<Option<Codec>> {
        self.records_after(0, |seq, _, payload| f(seq, payload))
    }

    /// [`Reader::records`] of the records with a seq above `after` only, each
    /// given with its segment's codec (`f(seq, codec, payload)`, the payload to
    /// decode with [`Codec::decode`]): segments that hold none of them are not
    /// read, records at or below `after` in the first segment read are skipped.
    /// Read-only and lock-free, as every reader. A record it does not call `f`
    /// for is compacted away (the first seq `f` sees is then above `after + 1`)
    /// or past the first damage; the caller that needs every record checks the
    /// seqs it saw.
    pub fn records_after(
        &self,
        after: u64,
        mut f: impl FnMut(u64, Codec, &[u8]),
    ) -> Result<Option<Codec>> {
        let (vfs, dir, key) = (self.vfs, self.dir, self.key);
        check_dir(vfs, dir)?;
        let listing = list_store(vfs, dir)?;
        let mut codec = None;
        // The first readable header names the store (`Some(None)`: untagged).
        let mut store: Option<Option<StoreId>> = None;
        let segs = &listing.segments;
        for (i, (_, name)) in segs.iter().enumerate() {
            // Every record of this segment is below the next one's first seq.
            if segs
                .get(i + 1)
                .is_some_and(|(next, _)| *next <= after.saturating_add(1))
            {
                continue;
            }
            let path = dir.join(name);
            let bytes = match vfs.read(&path) {
                Ok(b) => b,
                // Compacted away since the listing: its records are in a snapshot now.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("read segment", &path, e)),
            };
            let bytes: &[u8] = (*bytes).as_ref();
            let header = decode_segment_header(bytes).ok();
            if let Some(h) = &header {
                check_key_check(&path, key, h)?;
                match store {
                    None => {
                        check_key(dir, key, h.store_id.as_ref())?;
                        store = Some(h.store_id);
                    }
                    Some(s) if s != h.store_id => {
                        return Err(Error::Tampered {
                            path,
                            offset: Some(0),
                            seq: Some(h.first_seq),
                            what: id_mismatch("segment", h.store_id.as_ref(), s.as_ref()),
                        });
                    }
                    Some(_) => {}
                }
            }
            // No record is read past an unreadable header, so `None` reads nothing.
            let seg_codec = header.as_ref().map(|h| h.codec);
            let tagging = header.and_then(|h| Some((key?, h.store_id?, h.codec)));
            let scan = scan_segment::<Error>(bytes, |seq, body, offset| {
                let Some(c) = seg_codec.filter(|_| seq > after) else {
                    return Ok(());
                };
                let payload = match &tagging {
                    Some((key, id, c)) => {
                        record_payload(Some((key, id)), *c, &path, bytes, offset, seq, body)?
                    }
                    None => body,
                };
                f(seq, c, payload);
                Ok(())
            })?;
            codec = codec.or(scan.codec);
        }
        Ok(codec)
    }
}
