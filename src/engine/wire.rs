//! The engine's seam to the remote tier: what it needs of the log's bytes
//! to ship a segment's frames byte for byte and to write them back on a new
//! host (FORMAT.md §13). Crate-private: the names, framing and tags are the
//! engine's, documented in FORMAT.md, and not part of the API; this module
//! is the one place another layer may take them from (the house test
//! `tests/cli/house_layers.rs` holds every other private module to its layer).

pub(crate) use super::format::{
    MAX_JSONL_HEADER_LEN, MAX_SNAPSHOT_LEN, parse_segment_name, parse_snapshot_name, segment_name,
    snapshot_name,
};
pub(crate) use super::log::frame::{
    Frame, SegmentHeader, decode_record, decode_segment_header, encode_segment_header_tagged,
    open_record,
};
/// What the remote tier's own tests frame records with.
#[cfg(test)]
pub(crate) use super::log::frame::{encode_record, encode_segment_header};
pub(crate) use super::tag::{STORE_ID_LEN, StoreId, from_hex, id_mismatch, to_hex};
