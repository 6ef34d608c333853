//! Answers ConversionReviews: converts every object of a review to the desired version, or
//! none, and writes the response straight into one buffer.
//!
//! Each object is read lazily (`wire::conversion`): only `apiVersion`, `spec`, `status` and the
//! stash annotation are decoded, converted with the typed `api::convert` functions and written
//! anew; every other byte of the object, metadata included, is copied from the review as it
//! came. One object that cannot be converted fails the whole review with a message naming it,
//! and no object is returned half converted.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::response::{ConversionResponse, Reply};
use super::wire::conversion::{self, ConversionObject, Request};
use super::wire::{CONVERSION_API_VERSION, CONVERSION_KIND, Lazy, Members, ReviewError, expected};
use crate::api::convert::{ConversionError, STASH_ANNOTATION, desired_version, down_owned, up};
use crate::api::{DEPRECATED_VERSION, GROUP, KIND, api_version, v1alpha1, v1beta1};

/// Answers one ConversionReview body.
pub fn answer(webhook: &'static str, body: &[u8]) -> Result<Reply, ReviewError> {
    match conversion::decode_fast(body) {
        Some(request) => answer_request(webhook, request, body.len()),
        None => answer_strictly(webhook, body),
    }
}

/// Decodes a ConversionReview with kube's types, converts every object or none, and
/// serialises the response: the answer to what the one-pass decoder does not read.
pub(crate) fn answer_strictly(webhook: &'static str, body: &[u8]) -> Result<Reply, ReviewError> {
    let request = conversion::decode_strictly(body)?;
    // Kube's types read the objects into trees; write them out again to read them lazily.
    let texts: Vec<String> = request.objects.iter().map(Value::to_string).collect();
    let objects = texts
        .iter()
        .map(|text| serde_json::from_str(text))
        .collect::<Result<_, _>>()
        .map_err(|source| ReviewError::Malformed {
            expected: expected(CONVERSION_API_VERSION, CONVERSION_KIND),
            source,
        })?;
    let request = Request {
        uid: request.uid,
        desired_api_version: request.desired_api_version,
        objects,
    };
    answer_request(webhook, request, body.len())
}

/// Converts every object of a decoded ConversionReview, or none, and writes the response
/// (about `size` bytes) in one buffer: each object is written straight into it as it is
/// converted.
fn answer_request(
    webhook: &'static str,
    request: Request<'_>,
    size: usize,
) -> Result<Reply, ReviewError> {
    let span = tracing::info_span!(
        "review",
        webhook,
        uid = %request.uid,
        desired_api_version = %request.desired_api_version,
        objects = request.objects.len(),
    );
    let _entered = span.enter();
    let desired = request.desired_api_version;
    let mut response = ConversionResponse::start(&request.uid, size)?;
    let converted = desired_version(&desired).and_then(|_| {
        request
            .objects
            .into_iter()
            .enumerate()
            .try_for_each(|(position, object)| {
                write_converted(object, &desired, position, response.next_object())
            })
    });
    match converted {
        Ok(()) => {
            tracing::debug!("converted");
            response.succeeded()
        }
        Err(error) => {
            let message = error.to_string();
            tracing::info!(reason = %message, "conversion failed");
            response.failed(&message)
        }
    }
}

/// Converts one object of a ConversionReview to `desired_api_version`.
///
/// Only `apiVersion`, `spec`, `status` and the stash annotation change; every other byte of
/// the object, metadata included, is passed through as received.
pub fn convert_object(object: Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    convert_nth(object, desired_api_version, 0)
}

/// [`convert_object`] for the object at `position` in a review, named by it when it has no
/// name.
fn convert_nth(
    object: Value,
    desired_api_version: &str,
    position: usize,
) -> Result<Value, ConversionError> {
    let unreadable = |error: serde_json::Error| ConversionError::NotAMemcached {
        object: format!("#{position} (unnamed)"),
        reason: format!("is not JSON: {error}"),
    };
    let text = object.to_string();
    let object: ConversionObject<'_> = serde_json::from_str(&text).map_err(unreadable)?;
    let mut out = Vec::with_capacity(text.len() + 512);
    write_converted(object, desired_api_version, position, &mut out)?;
    serde_json::from_slice(&out).map_err(unreadable)
}

/// Converts the object at `position` of a review to `desired_api_version` and appends it to
/// `out` as JSON. On an error nothing is appended.
///
/// Only `apiVersion`, `spec`, `status` and the stash annotation are written anew; every other
/// value is copied from the review's text. Metadata that is missing becomes `{}`; metadata or
/// annotations that are `null` become an object when the stash must be written, and any other
/// value there that cannot hold the stash is an error rather than a stash silently dropped.
pub fn write_converted(
    object: ConversionObject<'_>,
    desired_api_version: &str,
    position: usize,
    out: &mut Vec<u8>,
) -> Result<(), ConversionError> {
    let desired = desired_version(desired_api_version)?;
    let Lazy::Object(mut fields) = object.0 else {
        return Err(ConversionError::NotAMemcached {
            object: format!("#{position} (unnamed)"),
            reason: "is not a JSON object".into(),
        });
    };
    let name = describe(&fields, position);
    let text = |field: &str| fields.get(field).and_then(Lazy::as_str).unwrap_or_default();
    let kind = text("kind");
    if kind != KIND {
        return Err(ConversionError::NotAMemcached {
            object: name,
            reason: format!("kind is {kind:?}, expected {KIND:?}"),
        });
    }
    let current_api_version = text("apiVersion");
    let current =
        desired_version(&current_api_version).map_err(|_| ConversionError::NotAMemcached {
            object: name.clone(),
            reason: format!("apiVersion {current_api_version:?} is not served by {GROUP}"),
        })?;
    if current != desired {
        if desired == DEPRECATED_VERSION {
            let spec: v1beta1::MemcachedSpec = read(&fields, "spec", &name, current)?;
            let status: Option<v1beta1::MemcachedStatus> = read(&fields, "status", &name, current)?;
            let converted = down_owned(spec, status);
            write(&mut fields, "spec", Some(&converted.spec), &name)?;
            write(&mut fields, "status", converted.status.as_ref(), &name)?;
            set_stash_member(&mut fields, converted.stash, &name)?;
        } else {
            let spec: v1alpha1::MemcachedSpec = read(&fields, "spec", &name, current)?;
            let status: Option<v1alpha1::MemcachedStatus> =
                read(&fields, "status", &name, current)?;
            let stash = fields
                .get("metadata")
                .and_then(|m| m.member("annotations"))
                .and_then(|a| a.member(STASH_ANNOTATION));
            let stash = match stash {
                None => None,
                Some(value) => match value.as_str() {
                    Some(text) => Some(text),
                    None => {
                        let found = value
                            .to_value()
                            .map_or_else(|e| e.to_string(), |v| v.to_string());
                        return Err(ConversionError::BadStash {
                            object: name,
                            reason: format!("expected a string, found {found}"),
                        });
                    }
                },
            };
            let (spec, status) = up(&spec, status.as_ref(), stash.as_deref()).map_err(|e| {
                ConversionError::BadStash {
                    object: name.clone(),
                    reason: e.to_string(),
                }
            })?;
            write(&mut fields, "spec", Some(&spec), &name)?;
            write(&mut fields, "status", status.as_ref(), &name)?;
            set_stash_member(&mut fields, None, &name)?;
        }
        fields.insert(
            "apiVersion",
            Lazy::Value(Value::String(api_version(desired))),
        );
    }
    let start = out.len();
    Lazy::Object(fields).write(out).map_err(|e| {
        out.truncate(start);
        ConversionError::Unwritable {
            object: name,
            reason: e.to_string(),
        }
    })
}

fn read<T: DeserializeOwned + Default>(
    fields: &Members<'_>,
    field: &'static str,
    object: &str,
    version: &str,
) -> Result<T, ConversionError> {
    match fields.get(field) {
        None => Ok(T::default()),
        Some(value) if value.is_null() => Ok(T::default()),
        Some(value) => value.decode().map_err(|e| ConversionError::Malformed {
            object: object.to_string(),
            field,
            version: version.to_string(),
            reason: e.to_string(),
        }),
    }
}

/// Sets `field` to `value`, or removes it when there is no value.
fn write<T: Serialize>(
    fields: &mut Members<'_>,
    field: &'static str,
    value: Option<&T>,
    object: &str,
) -> Result<(), ConversionError> {
    match value {
        Some(value) => {
            let value = Lazy::serialized(value).map_err(|e| ConversionError::Unwritable {
                object: object.to_string(),
                reason: format!("{field}: {e}"),
            })?;
            fields.insert(field, value);
        }
        None => {
            fields.remove(field);
        }
    }
    Ok(())
}

/// Writes the stash annotation, or removes it (and annotations it leaves empty).
fn set_stash_member(
    fields: &mut Members<'_>,
    stash: Option<String>,
    object: &str,
) -> Result<(), ConversionError> {
    let cannot_hold = |field: &str| ConversionError::NotAMemcached {
        object: object.to_string(),
        reason: format!(
            "{field} is not a JSON object, so it cannot hold annotation {STASH_ANNOTATION}"
        ),
    };
    let metadata = fields.get_or_insert_with("metadata", Lazy::object);
    let Some(stash) = stash else {
        if let Lazy::Object(metadata) = metadata {
            let emptied = match metadata.get_mut("annotations") {
                Some(Lazy::Object(annotations)) => {
                    annotations.remove(STASH_ANNOTATION).is_some() && annotations.is_empty()
                }
                _ => false,
            };
            if emptied {
                metadata.remove("annotations");
            }
        }
        return Ok(());
    };
    if metadata.is_null() {
        *metadata = Lazy::object();
    }
    let Lazy::Object(metadata) = metadata else {
        return Err(cannot_hold("metadata"));
    };
    let annotations = metadata.get_or_insert_with("annotations", Lazy::object);
    if annotations.is_null() {
        *annotations = Lazy::object();
    }
    let Lazy::Object(annotations) = annotations else {
        return Err(cannot_hold("metadata.annotations"));
    };
    annotations.insert(STASH_ANNOTATION, Lazy::Value(Value::String(stash)));
    Ok(())
}

/// Names an object for messages: `namespace/name`, or its position in the review.
fn describe(fields: &Members<'_>, position: usize) -> String {
    let metadata = fields.get("metadata");
    let text = |field| {
        metadata
            .and_then(|m| m.member(field))
            .and_then(Lazy::as_str)
    };
    match (text("namespace"), text("name")) {
        (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
        (None, Some(name)) => name.into_owned(),
        _ => format!("#{position} (unnamed)"),
    }
}

#[cfg(test)]
mod tests;
