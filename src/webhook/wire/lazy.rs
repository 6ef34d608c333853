//! Holds a JSON value lazily: as the raw text of the review body until someone needs it typed,
//! edited or as a tree, and writes it back byte for byte when nobody edited it.
//!
//! [`Lazy`] is the one form the decoders hand out for what they do not read: the spec and status
//! of an admission request's objects, and every member of a ConversionReview's objects but
//! their metadata's annotations. An object is read into its members, in order; each member's
//! value stays the raw text it had in the input, except on the path given to [`Expand`], whose
//! objects are read into their members too. Values that came as trees (from kube's types, on
//! the strict path) are held as trees. This module knows nothing of Memcached: the webhooks
//! say which path to expand and what to edit.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::value::SeqAccessDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON value, read lazily.
#[derive(Clone, Debug)]
pub enum Lazy<'a> {
    /// An object on the expanded path: its members.
    Object(Members<'a>),
    /// A value as it appeared in the input.
    Raw(&'a RawValue),
    /// A value on the expanded path that is not an object, or a value set by an edit.
    Value(Value),
    /// JSON written by serde_json for an edit.
    Json(String),
}

/// The members of a JSON object, in the order they came. A name given twice keeps its first
/// place and its last value, as `serde_json::Map` keeps the last.
#[derive(Clone, Debug, Default)]
pub struct Members<'a>(Vec<(Cow<'a, str>, Lazy<'a>)>);

impl<'a> Lazy<'a> {
    /// An object without members.
    pub fn object() -> Self {
        Lazy::Object(Members::default())
    }

    /// The JSON serde_json writes for `value`.
    pub fn serialized<T: serde::Serialize>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_string(value).map(Lazy::Json)
    }

    /// Whether this is JSON `null`.
    pub fn is_null(&self) -> bool {
        match self {
            Lazy::Raw(raw) => raw.get() == "null",
            Lazy::Value(value) => value.is_null(),
            Lazy::Json(json) => json == "null",
            Lazy::Object(_) => false,
        }
    }

    /// Whether this is a JSON object.
    pub fn is_object(&self) -> bool {
        match self {
            Lazy::Raw(raw) => raw.get().starts_with('{'),
            Lazy::Value(value) => value.is_object(),
            Lazy::Json(json) => json.starts_with('{'),
            Lazy::Object(_) => true,
        }
    }

    /// The member `name` of an object; `None` for anything but an object, as
    /// `serde_json::Value::get`.
    pub fn member(&self, name: &str) -> Option<&Lazy<'a>> {
        match self {
            Lazy::Object(members) => members.get(name),
            _ => None,
        }
    }

    /// The string this value is, or `None` when it is not a string.
    pub fn as_str(&self) -> Option<Cow<'_, str>> {
        let text = match self {
            Lazy::Raw(raw) => raw.get(),
            Lazy::Json(json) => json.as_str(),
            Lazy::Value(value) => return value.as_str().map(Cow::Borrowed),
            Lazy::Object(_) => return None,
        };
        let inside = text.strip_prefix('"')?.strip_suffix('"')?;
        if !inside.contains('\\') {
            // The text is a JSON string (serde_json checked it), so without escapes its
            // contents are the string itself.
            return Some(Cow::Borrowed(inside));
        }
        // Escapes need unescaping into a string of their own.
        unescape_quotes(inside)
            .or_else(|| serde_json::from_str::<String>(text).ok())
            .map(Cow::Owned)
    }

    /// Decodes this value into `T`. When that fails the value is read as a tree and decoded
    /// again with its path tracked, so `T` gets what `serde_json::from_value` would give it
    /// and the error names the path inside this value (`.` for the value itself, none when
    /// the value is no JSON at all).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, PathError> {
        let tree = match self {
            Lazy::Raw(raw) => match serde_json::from_str(raw.get()) {
                Ok(typed) => return Ok(typed),
                Err(_) => serde_json::from_str::<Value>(raw.get()),
            },
            Lazy::Json(json) => match serde_json::from_str(json) {
                Ok(typed) => return Ok(typed),
                Err(_) => serde_json::from_str::<Value>(json),
            },
            Lazy::Value(value) => Ok(value.clone()),
            Lazy::Object(_) => self.to_value(),
        };
        let tree = tree.map_err(|error| PathError {
            path: None,
            message: error.to_string(),
        })?;
        serde_path_to_error::deserialize(tree).map_err(|error| PathError {
            path: Some(error.path().to_string()),
            message: error.into_inner().to_string(),
        })
    }

    /// This value as a tree.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        match self {
            Lazy::Raw(raw) => serde_json::from_str(raw.get()),
            Lazy::Json(json) => serde_json::from_str(json),
            Lazy::Value(value) => Ok(value.clone()),
            Lazy::Object(_) => {
                let mut text = Vec::new();
                self.write(&mut text)?;
                serde_json::from_slice(&text)
            }
        }
    }

    /// Appends this value as JSON to `out`: raw text as it came, objects member by member.
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        match self {
            Lazy::Raw(raw) => out.extend_from_slice(raw.get().as_bytes()),
            Lazy::Json(json) => out.extend_from_slice(json.as_bytes()),
            Lazy::Value(value) => serde_json::to_writer(&mut *out, value)?,
            Lazy::Object(members) => {
                out.push(b'{');
                for (index, (name, value)) in members.0.iter().enumerate() {
                    if index > 0 {
                        out.push(b',');
                    }
                    write_name(out, name)?;
                    out.push(b':');
                    value.write(out)?;
                }
                out.push(b'}');
            }
        }
        Ok(())
    }
}

/// Appends a member name as a JSON string, copying it when nothing in it needs escaping.
fn write_name(out: &mut Vec<u8>, name: &str) -> Result<(), serde_json::Error> {
    if name.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        return serde_json::to_writer(out, name);
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.push(b'"');
    Ok(())
}

/// Unescapes the contents of a JSON string whose only escapes are `\"`, `\\` and `\/`, as in
/// JSON held in a string (an annotation such as the conversion stash); `None`
/// when it holds any other escape.
fn unescape_quotes(inside: &str) -> Option<String> {
    let mut unescaped = Vec::with_capacity(inside.len());
    let mut rest = inside.as_bytes();
    while let Some(at) = memchr::memchr(b'\\', rest) {
        unescaped.extend_from_slice(&rest[..at]);
        match rest.get(at + 1)? {
            byte @ (b'"' | b'\\' | b'/') => unescaped.push(*byte),
            _ => return None,
        }
        rest = &rest[at + 2..];
    }
    unescaped.extend_from_slice(rest);
    // Only ASCII was taken out, so what is left is as much UTF-8 as `inside` was.
    String::from_utf8(unescaped).ok()
}

/// Why a value did not decode: where inside it, and what the decoder said.
#[derive(Debug, PartialEq, Eq)]
pub struct PathError {
    /// The path inside the value, as `serde_path_to_error` writes it (`.` for the value);
    /// `None` when the value is not JSON.
    pub path: Option<String>,
    /// The decoder's message.
    pub message: String,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.as_deref() {
            None | Some(".") => f.write_str(&self.message),
            Some(path) => write!(f, "{path}: {}", self.message),
        }
    }
}

/// Reads a value as the raw text it is, to be typed later.
impl<'de: 'a, 'a> Deserialize<'de> for Lazy<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(deserializer).map(Lazy::Raw)
    }
}

/// `raw`, unless it holds a number no double can hold (`1E400`): kept raw it would be copied
/// into the answer as it came, where the API server (and serde_json, the strict decoders)
/// refuse it, so it is refused here as the strict decoders refuse it.
fn checked_raw<E: serde::de::Error>(raw: &RawValue) -> Result<&RawValue, E> {
    if !may_hold_an_exponent(raw.get().as_bytes()) {
        return Ok(raw);
    }
    match out_of_range_number(raw.get()) {
        None => Ok(raw),
        Some(number) => Err(E::custom(format_args!("number out of range: {number}"))),
    }
}

/// Whether `json` has an `e` or `E` right after a digit or a point anywhere, strings
/// included: the only way a number in it can overflow a double (short of 309 digits, which
/// no API server writes). Found with a vectorised search, so that the exact scan below runs
/// only on the few values that need it.
fn may_hold_an_exponent(json: &[u8]) -> bool {
    memchr::memchr2_iter(b'e', b'E', json).any(|at| {
        // A digit or point before, then an optional sign and three digits: an exponent of at
        // least 100, the least that can take a double out of range with the digits before.
        let before = at > 0 && matches!(json[at - 1], b'0'..=b'9' | b'.');
        let mut rest = json.get(at + 1..).unwrap_or_default();
        if let [b'+' | b'-', tail @ ..] = rest {
            rest = tail;
        }
        before && rest.len() >= 3 && rest[..3].iter().all(u8::is_ascii_digit)
    })
}

/// The first number in the JSON text `json` (outside strings) whose value overflows a
/// double, if any. Strings are skipped a run at a time; only a number with an exponent or
/// hundreds of digits can overflow, and only those are parsed.
fn out_of_range_number(json: &str) -> Option<&str> {
    let bytes = json.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                // To the closing quote: past every escaped character.
                at += 1;
                loop {
                    let next = at + memchr::memchr2(b'"', b'\\', &bytes[at..])?;
                    if bytes[next] == b'\\' {
                        at = next + 2;
                    } else {
                        at = next + 1;
                        break;
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = at;
                while at < bytes.len()
                    && matches!(bytes[at], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    at += 1;
                }
                let number = &json[start..at];
                let may_overflow =
                    number.len() > 300 || number.bytes().any(|b| b == b'e' || b == b'E');
                if may_overflow && number.parse::<f64>().is_ok_and(|value| !value.is_finite()) {
                    return Some(number);
                }
            }
            _ => at += 1,
        }
    }
    None
}

impl<'a> Members<'a> {
    /// Members from name-value pairs as read, a name given twice keeping its first place and
    /// its last value.
    fn deduplicated(mut pairs: Vec<(Cow<'a, str>, Lazy<'a>)>) -> Self {
        // Objects on the expanded path are small; a hash map pays only for many members.
        const SCAN_UP_TO: usize = 16;
        if pairs.len() <= SCAN_UP_TO {
            let mut index = 1;
            while index < pairs.len() {
                let name = &pairs[index].0;
                match pairs[..index].iter().position(|(first, _)| first == name) {
                    Some(first) => {
                        let (_, value) = pairs.remove(index);
                        pairs[first].1 = value;
                    }
                    None => index += 1,
                }
            }
            return Members(pairs);
        }
        let mut places: HashMap<Cow<'a, str>, usize> = HashMap::with_capacity(pairs.len());
        let mut kept = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            match places.get(&name) {
                Some(&place) => kept[place] = (name, value),
                None => {
                    places.insert(name.clone(), kept.len());
                    kept.push((name, value));
                }
            }
        }
        Members(kept)
    }

    /// The value of the member `name`.
    pub fn get(&self, name: &str) -> Option<&Lazy<'a>> {
        self.0
            .iter()
            .find(|(member, _)| member == name)
            .map(|(_, value)| value)
    }

    /// The value of the member `name`, to edit.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Lazy<'a>> {
        self.0
            .iter_mut()
            .find(|(member, _)| member == name)
            .map(|(_, value)| value)
    }

    /// The value of the member `name`, added last with `value()` when there is none.
    pub fn get_or_insert_with(
        &mut self,
        name: &'a str,
        value: impl FnOnce() -> Lazy<'a>,
    ) -> &mut Lazy<'a> {
        let index = match self.0.iter().position(|(member, _)| member == name) {
            Some(index) => index,
            None => {
                self.0.push((Cow::Borrowed(name), value()));
                self.0.len() - 1
            }
        };
        &mut self.0[index].1
    }

    /// Sets the member `name` to `value`, in its place when it is there, else last.
    pub fn insert(&mut self, name: impl Into<Cow<'a, str>>, value: Lazy<'a>) {
        let name = name.into();
        match self.get_mut(&name) {
            Some(existing) => *existing = value,
            None => self.0.push((name, value)),
        }
    }

    /// Removes the member `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<Lazy<'a>> {
        let index = self.0.iter().position(|(member, _)| member == name)?;
        Some(self.0.remove(index).1)
    }

    /// Whether there are no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Reads a value shallowly: an object into its members, the member named by the first
/// element of the path read the same way with the rest of the path, every other member kept
/// raw. A value that is not an object is read as a tree, so the path can be anything.
#[derive(Clone, Copy, Debug)]
pub struct Expand<'p>(pub &'p [&'p str]);

impl<'de> DeserializeSeed<'de> for Expand<'_> {
    type Value = Lazy<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Lazy<'de>, D::Error> {
        deserializer.deserialize_any(ExpandVisitor(self.0))
    }
}

struct ExpandVisitor<'p>(&'p [&'p str]);

impl<'de> Visitor<'de> for ExpandVisitor<'_> {
    type Value = Lazy<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Lazy<'de>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(Name(name)) = map.next_key::<Name<'de>>()? {
            let value = match self.0.split_first() {
                Some((expanded, rest)) if *expanded == name => map.next_value_seed(Expand(rest))?,
                _ => Lazy::Raw(checked_raw(map.next_value::<&'de RawValue>()?)?),
            };
            members.push((name, value));
        }
        Ok(Lazy::Object(Members::deduplicated(members)))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Lazy<'de>, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Lazy::Value)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Lazy<'de>, E> {
        Ok(Lazy::Value(Value::Null))
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Lazy<'de>, E> {
        Ok(Lazy::Value(value.into()))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Lazy<'de>, E> {
        Ok(Lazy::Value(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Lazy<'de>, E> {
        Ok(Lazy::Value(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Lazy<'de>, E> {
        Ok(Lazy::Value(value.into()))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Lazy<'de>, E> {
        Ok(Lazy::Value(value.into()))
    }
}

/// A member name: borrowed from the input unless it holds escapes.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;

        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }

            fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(name)))
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(name.to_owned())))
            }
        }

        deserializer.deserialize_str(NameVisitor)
    }
}

#[cfg(test)]
mod tests;
