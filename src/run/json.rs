//! Arbitrary JSON inside a run document that both codecs can carry.
//!
//! postcard cannot encode `serde_json::Value` (it needs self-describing
//! deserialization), so in a binary encoding the value travels as its JSON text;
//! in a human-readable one (serde_json) it is the plain value, so `get --json`
//! shows objects.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Deepest nesting of arrays and objects accepted from users.
pub(crate) const MAX_JSON_DEPTH: usize = 64;

/// A JSON value that round-trips through both codecs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Json(pub serde_json::Value);

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            self.0.serialize(s)
        } else {
            s.serialize_str(&self.0.to_string())
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        if d.is_human_readable() {
            serde_json::Value::deserialize(d).map(Json)
        } else {
            let text = String::deserialize(d)?;
            serde_json::from_str(&text)
                .map(Json)
                .map_err(|e| D::Error::custom(format!("embedded JSON: {e}")))
        }
    }
}

/// Walks JSON text without parsing it: calls `visit(i, byte, depth)` for
/// every byte outside a string (the `"` that opens one included), `depth`
/// being the nesting of `[`/`{` around that byte; stops when `visit` returns
/// `Some`, with that value.
pub(crate) fn walk_structure<T>(
    text: &[u8],
    mut visit: impl FnMut(usize, u8, usize) -> Option<T>,
) -> Option<T> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for (i, &c) in text.iter().enumerate() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        if let Some(v) = visit(i, c, depth) {
            return Some(v);
        }
        match c {
            b'"' => in_str = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The deepest nesting of `[`/`{` in JSON text (strings skipped), without parsing
/// it: checked before handing untrusted text to a recursive parser.
pub(crate) fn json_depth(text: &[u8]) -> usize {
    let mut max = 0;
    walk_structure::<()>(text, |_, c, depth| {
        if matches!(c, b'[' | b'{') {
            max = max.max(depth + 1);
        }
        None
    });
    max
}

impl Json {
    /// Items for an `item` change from a JSON value: an object is one item,
    /// an array each of its elements (which must be objects, and at least
    /// one); anything else is refused, with why.
    pub fn items(v: serde_json::Value) -> Result<Vec<Json>, String> {
        use serde_json::Value;
        match v {
            Value::Object(_) => Ok(vec![Json(v)]),
            Value::Array(a) if !a.is_empty() => a
                .into_iter()
                .map(|e| match e {
                    Value::Object(_) => Ok(Json(e)),
                    _ => Err("every element of an item array must be a JSON object".to_string()),
                })
                .collect(),
            Value::Array(_) => Err("an item array must not be empty".into()),
            _ => Err("an item must be a JSON object or an array of objects".into()),
        }
    }

    /// Parses user-supplied JSON text with a nesting limit (64 deep).
    pub fn parse_limited(text: &str) -> Result<serde_json::Value, String> {
        let depth = json_depth(text.as_bytes());
        if depth > MAX_JSON_DEPTH {
            return Err(format!(
                "JSON nested {depth} deep; the limit is {MAX_JSON_DEPTH}"
            ));
        }
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_skips_brackets_in_strings() {
        assert_eq!(json_depth(br#"{"a":[1,{"b":"[[[\"]]"}]}"#), 3);
        assert_eq!(json_depth(b"1"), 0);
    }

    #[test]
    fn both_codecs_round_trip() {
        let v = Json(serde_json::json!({"a": [1, 2.5, null, {"b": "x"}]}));
        let bin = postcard::to_stdvec(&v).unwrap();
        assert_eq!(postcard::from_bytes::<Json>(&bin).unwrap(), v);
        let txt = serde_json::to_string(&v).unwrap();
        assert_eq!(txt, r#"{"a":[1,2.5,null,{"b":"x"}]}"#);
        assert_eq!(serde_json::from_str::<Json>(&txt).unwrap(), v);
    }
}
