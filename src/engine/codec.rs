//! Payload encoding for each codec: postcard for binary, JSON for JSONL.

use super::format::Codec;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encodes `value` into `out` (cleared first).
pub fn encode_payload<T: Serialize>(
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
pub fn decode_payload<T: DeserializeOwned>(codec: Codec, bytes: &[u8]) -> Result<T, String> {
    match codec {
        Codec::Binary => match postcard::take_from_bytes(bytes) {
            Ok((v, [])) => Ok(v),
            Ok((_, rest)) => Err(format!("postcard: {} trailing bytes", rest.len())),
            Err(e) => Err(format!("postcard: {e}")),
        },
        Codec::Jsonl => serde_json::from_slice(bytes).map_err(|e| format!("json: {e}")),
    }
}
