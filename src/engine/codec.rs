//! Payload encoding for each codec: postcard for binary, JSON for JSONL.

use super::format::Codec;
use serde::Serialize;
use serde::de::DeserializeOwned;

impl Codec {
    /// Encodes `value` into `out` (cleared first), as a record's or a
    /// whole snapshot's payload in this codec.
    pub fn encode<T: Serialize>(self, value: &T, out: &mut Vec<u8>) -> Result<(), String> {
        encode_payload(self, value, out)
    }

    /// Decodes a payload in this codec (a record's, as [`Reader::records`]
    /// gives it). JSON nesting is bounded by serde_json's recursion limit (128).
    ///
    /// [`Reader::records`]: super::Reader::records
    pub fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, String> {
        decode_payload(self, bytes)
    }
}

/// Encodes `value` into `out` (cleared first).
pub(crate) fn encode_payload<T: Serialize>(
    codec: Codec,
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    match codec {
        Codec::Binary => {
            let v = std::mem::take(out);
            *out = postcard::to_extend(value, v).map_err(|e| format!("postcard: {e}"))?;
            Ok(())
        }
        Codec::Jsonl => serde_json::to_writer(out, value).map_err(|e| format!("json: {e}")),
    }
}

/// Decodes a payload. JSON nesting is bounded by serde_json's recursion limit (128).
pub(crate) fn decode_payload<T: DeserializeOwned>(codec: Codec, bytes: &[u8]) -> Result<T, String> {
    match codec {
        Codec::Binary => match postcard::take_from_bytes(bytes) {
            Ok((v, [])) => Ok(v),
            Ok((_, rest)) => Err(format!("postcard: {} trailing bytes", rest.len())),
            Err(e) => Err(format!("postcard: {e}")),
        },
        Codec::Jsonl => serde_json::from_slice(bytes).map_err(|e| format!("json: {e}")),
    }
}

/// Why [`encode_payload_within`] stopped.
#[derive(Debug)]
pub(crate) enum EncodeStop {
    /// The encoding passed `max` bytes: stopped there, nothing more encoded.
    TooLarge,
    /// The encoder failed.
    Failed(String),
}

/// A writer that refuses to grow past `max` bytes.
struct Capped<'a> {
    out: &'a mut Vec<u8>,
    max: u64,
    over: bool,
}

impl std::io::Write for Capped<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() as u64 + buf.len() as u64 > self.max {
            self.over = true;
            return Err(std::io::Error::other("snapshot size limit reached"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// [`encode_payload`], checking the size while encoding: a value whose
/// encoding passes `max` bytes stops there (memory and time bounded by the
/// limit, not by the value), as [`EncodeStop::TooLarge`].
pub(crate) fn encode_payload_within<T: Serialize>(
    codec: Codec,
    value: &T,
    out: &mut Vec<u8>,
    max: u64,
) -> Result<(), EncodeStop> {
    out.clear();
    let mut w = Capped {
        out,
        max,
        over: false,
    };
    let r = match codec {
        Codec::Binary => postcard::to_io(value, &mut w)
            .map(|_| ())
            .map_err(|e| format!("postcard: {e}")),
        Codec::Jsonl => serde_json::to_writer(&mut w, value).map_err(|e| format!("json: {e}")),
    };
    match r {
        Ok(()) => Ok(()),
        Err(_) if w.over => Err(EncodeStop::TooLarge),
        Err(e) => Err(EncodeStop::Failed(e)),
    }
}
