//! Writes values as YAML deterministically: keys sorted at every level, two-space indent,
//! block style, one trailing newline.
//!
//! Everything goes through `serde_json::Value` first, so the output depends only on the data,
//! never on a struct's field order or a map's insertion order. Parsing YAML back (for
//! `check-bundle`) lives here too, so both directions use the same library, `serde-saphyr`.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// Why a value could not be written or a document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The value did not convert to JSON (a map with non-string keys, say).
    #[error("cannot represent the value as JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The YAML serializer refused the value.
    #[error("cannot write YAML: {0}")]
    Write(#[from] serde_saphyr::SerializeError),
    /// The text is not YAML, or not the expected shape.
    #[error("{0}")]
    Read(String),
}

/// A JSON value that serializes its object keys in sorted order.
struct Sorted<'a>(&'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = serializer.serialize_map(Some(keys.len()))?;
                for key in keys {
                    if let Some(value) = map.get(key) {
                        out.serialize_entry(key, &Sorted(value))?;
                    }
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Sorted(item))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// Renders a value as one YAML document with sorted keys.
pub fn to_yaml<T: Serialize>(value: &T) -> Result<String, YamlError> {
    let json = serde_json::to_value(value)?;
    let mut text = serde_saphyr::to_string(&Sorted(&json))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// Parses every document of a YAML (or JSON) text into JSON values, skipping empty ones.
pub fn documents(text: &str) -> Result<Vec<Value>, YamlError> {
    let values: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| YamlError::Read(e.to_string()))?;
    Ok(values.into_iter().filter(|v| !v.is_null()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_level() {
        let value = json!({"b": 1, "a": {"z": true, "c": [ {"q": 1, "p": 2} ]}});
        let text = to_yaml(&value).expect("writes");
        let a = text.find("a:").expect("a");
        let b = text.find("b:").expect("b");
        assert!(a < b, "{text}");
        let p = text.find("p:").expect("p");
        let q = text.find("q:").expect("q");
        assert!(p < q, "{text}");
    }

    #[test]
    fn strings_that_look_like_other_types_round_trip_as_strings() {
        let value = json!({
            "t": "true", "f": "false", "n": "1", "v": "0.1.0", "y": "yes", "e": "",
            "long": "a long line of prose that is certainly longer than eighty characters, so it may be folded by the writer",
            "multi": "# Title\n\nA paragraph.\n\n- item one\n- item two\n",
            "quote": "it's \"quoted\": and has a colon",
        });
        let text = to_yaml(&value).expect("writes");
        let back = documents(&text).expect("reads");
        assert_eq!(back, vec![value], "{text}");
    }

    #[test]
    fn empty_documents_are_skipped() {
        let docs = documents("---\na: 1\n---\n---\nb: 2\n").expect("reads");
        assert_eq!(docs, vec![json!({"a": 1}), json!({"b": 2})]);
    }
}
