//! Converts Memcached objects between v1alpha1 and v1beta1 without losing anything.
//!
//! v1beta1 is the hub. Going down, `replicas` becomes `size`, `service.port` becomes
//! `containerPort`, conditions are copied, and everything v1alpha1 cannot hold is stashed as
//! JSON in the [`STASH_ANNOTATION`]. Going up, the stash is restored and removed, and the
//! fields v1alpha1 can hold are taken from the v1alpha1 object, so a value edited there wins
//! over anything stashed earlier (the stash never holds those fields). Metadata other than
//! that one annotation is never touched: the wire-level [`write_converted`] copies the JSON
//! of everything else from the review as it came (see `shallow`), rather than reading it into
//! a tree and serialising it again.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use super::shallow::{Expand, Members, Shallow};
use super::{DEPRECATED_VERSION, GROUP, KIND, STORAGE_VERSION, api_version, v1alpha1, v1beta1};

/// Holds, on a v1alpha1 object, the v1beta1 fields v1alpha1 has no place for.
pub const STASH_ANNOTATION: &str = "cache.f2367556.dev/v1beta1-fields";

/// Why an object could not be converted. Every message names the object.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConversionError {
    /// The desired version is not one this API serves.
    #[error("unsupported desired apiVersion {desired:?}: {GROUP} serves v1alpha1 and v1beta1")]
    UnknownDesiredVersion {
        /// The version asked for.
        desired: String,
    },
    /// The object is not a Memcached of a version this API serves.
    #[error("object {object}: {reason}")]
    NotAMemcached {
        /// `namespace/name` of the object, or its position when it has no name.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The object's spec or status does not fit its version's schema.
    #[error("object {object}: {field} does not match {version}: {reason}")]
    Malformed {
        /// `namespace/name` of the object.
        object: String,
        /// The field that failed to read.
        field: &'static str,
        /// The version it was read as.
        version: String,
        /// The decoder's message.
        reason: String,
    },
    /// The converted object could not be written out.
    #[error("object {object}: cannot write the converted object: {reason}")]
    Unwritable {
        /// `namespace/name` of the object.
        object: String,
        /// The encoder's message.
        reason: String,
    },
    /// The stash annotation on a v1alpha1 object is not what conversion wrote.
    #[error("object {object}: annotation {STASH_ANNOTATION} is not valid: {reason}")]
    BadStash {
        /// `namespace/name` of the object.
        object: String,
        /// The decoder's message.
        reason: String,
    },
}

/// The v1beta1 fields v1alpha1 cannot hold, as stored in the annotation.
#[derive(Serialize, Deserialize, Default, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Stash {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<v1beta1::MemcachedSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<v1beta1::MemcachedStatus>,
}

/// A v1alpha1 spec and status, and what they could not hold.
#[derive(Debug, PartialEq)]
pub struct Down {
    /// The v1alpha1 spec.
    pub spec: v1alpha1::MemcachedSpec,
    /// The v1alpha1 status.
    pub status: Option<v1alpha1::MemcachedStatus>,
    /// The stash annotation's value, when anything needed stashing.
    pub stash: Option<String>,
}

/// Converts a v1beta1 spec and status down to v1alpha1.
pub fn down(spec: &v1beta1::MemcachedSpec, status: Option<&v1beta1::MemcachedStatus>) -> Down {
    down_owned(spec.clone(), status.cloned())
}

/// [`down`], taking the spec and status by value so that nothing is copied.
pub fn down_owned(
    mut spec: v1beta1::MemcachedSpec,
    status: Option<v1beta1::MemcachedStatus>,
) -> Down {
    let converted_spec = v1alpha1::MemcachedSpec {
        size: spec.replicas.take(),
        container_port: spec.service.as_ref().and_then(|s| s.port),
    };
    if let Some(service) = &mut spec.service
        && service.port.take().is_some()
        && *service == v1beta1::ServiceSpec::default()
    {
        // `up` recreates the service from containerPort; stash it only if it holds more.
        spec.service = None;
    }
    let (converted_status, rest_status) = match status {
        Some(mut status) => {
            let conditions = status.conditions.take();
            (Some(v1alpha1::MemcachedStatus { conditions }), Some(status))
        }
        None => (None, None),
    };
    let stash = Stash {
        spec: (spec != v1beta1::MemcachedSpec::default()).then_some(spec),
        status: rest_status.filter(|s| *s != v1beta1::MemcachedStatus::default()),
    };
    let stash = (stash != Stash::default())
        .then(|| serde_json::to_string(&stash).ok())
        .flatten();
    Down {
        spec: converted_spec,
        status: converted_status,
        stash,
    }
}

/// Converts a v1alpha1 spec and status up to v1beta1, restoring what `down` stashed.
///
/// `stash` is the annotation's value; an annotation that does not parse is an error, never
/// silently dropped.
pub fn up(
    spec: &v1alpha1::MemcachedSpec,
    status: Option<&v1alpha1::MemcachedStatus>,
    stash: Option<&str>,
) -> Result<(v1beta1::MemcachedSpec, Option<v1beta1::MemcachedStatus>), serde_json::Error> {
    let stash: Stash = stash
        .map(serde_json::from_str)
        .transpose()?
        .unwrap_or_default();
    let mut hub = stash.spec.unwrap_or_default();
    hub.replicas = spec.size;
    match spec.container_port {
        Some(port) => hub.service.get_or_insert_with(Default::default).port = Some(port),
        None => {
            if let Some(service) = &mut hub.service {
                service.port = None;
            }
        }
    }
    let hub_status = match (status, stash.status) {
        (Some(status), stashed) => Some(v1beta1::MemcachedStatus {
            conditions: status.conditions.clone(),
            ..stashed.unwrap_or_default()
        }),
        (None, stashed) => stashed,
    };
    Ok((hub, hub_status))
}

/// Converts a whole v1beta1 object to v1alpha1, keeping its metadata.
pub fn to_v1alpha1(hub: &v1beta1::Memcached) -> v1alpha1::Memcached {
    let converted = down(&hub.spec, hub.status.as_ref());
    let mut metadata = hub.metadata.clone();
    set_stash(&mut metadata.annotations, converted.stash);
    v1alpha1::Memcached {
        metadata,
        spec: converted.spec,
        status: converted.status,
    }
}

/// Converts a whole v1alpha1 object to v1beta1, keeping its metadata.
pub fn to_v1beta1(spoke: &v1alpha1::Memcached) -> Result<v1beta1::Memcached, ConversionError> {
    let stash = spoke
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STASH_ANNOTATION));
    let (spec, status) = up(
        &spoke.spec,
        spoke.status.as_ref(),
        stash.map(String::as_str),
    )
    .map_err(|e| ConversionError::BadStash {
        object: format!(
            "{}/{}",
            spoke.metadata.namespace.as_deref().unwrap_or_default(),
            spoke.metadata.name.as_deref().unwrap_or_default()
        ),
        reason: e.to_string(),
    })?;
    let mut metadata = spoke.metadata.clone();
    set_stash(&mut metadata.annotations, None);
    Ok(v1beta1::Memcached {
        metadata,
        spec,
        status,
    })
}

fn set_stash(annotations: &mut Option<BTreeMap<String, String>>, stash: Option<String>) {
    match stash {
        Some(stash) => {
            annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(STASH_ANNOTATION.to_string(), stash);
        }
        None => {
            let emptied = annotations
                .as_mut()
                .is_some_and(|map| map.remove(STASH_ANNOTATION).is_some() && map.is_empty());
            if emptied {
                *annotations = None;
            }
        }
    }
}

/// Checks that a desired `apiVersion` is one this API serves, and returns its version.
pub fn desired_version(desired_api_version: &str) -> Result<&str, ConversionError> {
    desired_api_version
        .strip_prefix(GROUP)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|version| [DEPRECATED_VERSION, STORAGE_VERSION].contains(version))
        .ok_or_else(|| ConversionError::UnknownDesiredVersion {
            desired: desired_api_version.to_string(),
        })
}

/// The path of an object that conversion reads member by member: the metadata and its
/// annotations, where the stash lives. Everything else is kept as raw text.
const EDITED_PATH: &[&str] = &["metadata", "annotations"];

/// An object of a ConversionReview, read in one pass: its members, its metadata's members and
/// its annotations, every other value (spec, status, labels, managedFields...) as the raw text
/// of the review.
#[derive(Clone, Debug)]
pub struct ShallowObject<'a>(Shallow<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ShallowObject<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Expand(EDITED_PATH)
            .deserialize(deserializer)
            .map(ShallowObject)
    }
}

impl ShallowObject<'_> {
    /// The object as a tree.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        self.0.to_value()
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
pub fn convert_nth(
    object: Value,
    desired_api_version: &str,
    position: usize,
) -> Result<Value, ConversionError> {
    let unreadable = |error: serde_json::Error| ConversionError::NotAMemcached {
        object: format!("#{position} (unnamed)"),
        reason: format!("is not JSON: {error}"),
    };
    let text = object.to_string();
    let object: ShallowObject<'_> = serde_json::from_str(&text).map_err(unreadable)?;
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
    object: ShallowObject<'_>,
    desired_api_version: &str,
    position: usize,
    out: &mut Vec<u8>,
) -> Result<(), ConversionError> {
    let desired = desired_version(desired_api_version)?;
    let Shallow::Object(mut fields) = object.0 else {
        return Err(ConversionError::NotAMemcached {
            object: format!("#{position} (unnamed)"),
            reason: "is not a JSON object".into(),
        });
    };
    let name = describe(&fields, position);
    let text = |field: &str| {
        fields
            .get(field)
            .and_then(Shallow::as_str)
            .unwrap_or_default()
    };
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
            Shallow::Value(Value::String(api_version(desired))),
        );
    }
    let start = out.len();
    Shallow::Object(fields).write(out).map_err(|e| {
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
            let value = Shallow::serialized(value).map_err(|e| ConversionError::Unwritable {
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
    let metadata = fields.get_or_insert_with("metadata", Shallow::object);
    let Some(stash) = stash else {
        if let Shallow::Object(metadata) = metadata {
            let emptied = match metadata.get_mut("annotations") {
                Some(Shallow::Object(annotations)) => {
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
        *metadata = Shallow::object();
    }
    let Shallow::Object(metadata) = metadata else {
        return Err(cannot_hold("metadata"));
    };
    let annotations = metadata.get_or_insert_with("annotations", Shallow::object);
    if annotations.is_null() {
        *annotations = Shallow::object();
    }
    let Shallow::Object(annotations) = annotations else {
        return Err(cannot_hold("metadata.annotations"));
    };
    annotations.insert(STASH_ANNOTATION, Shallow::Value(Value::String(stash)));
    Ok(())
}

/// Names an object for messages: `namespace/name`, or its position in the review.
fn describe(fields: &Members<'_>, position: usize) -> String {
    let metadata = fields.get("metadata");
    let text = |field| {
        metadata
            .and_then(|m| m.member(field))
            .and_then(Shallow::as_str)
    };
    match (text("namespace"), text("name")) {
        (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
        (None, Some(name)) => name.into_owned(),
        _ => format!("#{position} (unnamed)"),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::fixtures::{alpha_object, beta_object, beta_spec, beta_status};

    const CASES: u32 = 10_000;

    fn wire<T: Serialize>(object: &T) -> Value {
        serde_json::to_value(object).expect("test objects serialise")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(CASES))]

        #[test]
        fn v1beta1_down_and_up_again_loses_nothing(hub in beta_object()) {
            let spoke = to_v1alpha1(&hub);
            let back = to_v1beta1(&spoke).expect("a stash written by down reads back");
            prop_assert_eq!(back, hub);
        }

        #[test]
        fn v1alpha1_up_and_down_again_loses_nothing(spoke in alpha_object()) {
            let hub = to_v1beta1(&spoke).expect("no stash to read");
            prop_assert_eq!(to_v1alpha1(&hub), spoke);
        }

        #[test]
        fn fields_edited_in_v1alpha1_win_over_the_stash(
            hub in beta_object(),
            size in proptest::option::of(0i32..=64),
            port in proptest::option::of(1i32..=65535),
            edited_status in proptest::option::of(beta_status()),
        ) {
            let mut spoke = to_v1alpha1(&hub);
            spoke.spec.size = size;
            spoke.spec.container_port = port;
            let conditions = edited_status.and_then(|s| s.conditions);
            if let Some(status) = &mut spoke.status {
                status.conditions = conditions.clone();
            }
            let back = to_v1beta1(&spoke).expect("stash reads back");
            prop_assert_eq!(back.spec.replicas, size);
            prop_assert_eq!(back.spec.service.as_ref().and_then(|s| s.port), port);
            if hub.status.is_some() {
                prop_assert_eq!(back.status.as_ref().and_then(|s| s.conditions.clone()), conditions);
            }
            // Everything v1alpha1 cannot hold comes back from the stash unchanged.
            let mut expected = hub.spec.clone();
            expected.replicas = size;
            let mut got = back.spec.clone();
            got.service = got.service.filter(|s| s.port.is_some() || *s != v1beta1::ServiceSpec::default());
            expected.service = match (expected.service, port) {
                (Some(mut service), port) => { service.port = port; Some(service) }
                (None, Some(port)) => Some(v1beta1::ServiceSpec { port: Some(port) }),
                (None, None) => None,
            };
            expected.service = expected.service.filter(|s| s.port.is_some() || *s != v1beta1::ServiceSpec::default());
            prop_assert_eq!(got, expected);
            prop_assert_eq!(back.metadata, hub.metadata);
        }

        #[test]
        fn the_wire_conversion_matches_the_typed_one_and_keeps_metadata(hub in beta_object()) {
            let down_wire = convert_object(wire(&hub), "cache.f2367556.dev/v1alpha1").expect("converts");
            prop_assert_eq!(&down_wire, &wire(&to_v1alpha1(&hub)));
            let up_wire = convert_object(down_wire, "cache.f2367556.dev/v1beta1").expect("converts");
            prop_assert_eq!(up_wire, wire(&hub));
        }
    }

    #[test]
    fn a_defaulted_object_stashes_everything_but_replicas_port_and_conditions() {
        let spec =
            crate::admission::default_spec(&v1beta1::MemcachedSpec::default(), &Default::default());
        let converted = down(&spec, None);
        assert_eq!(converted.spec.size, Some(1));
        assert_eq!(converted.spec.container_port, Some(11211));
        let stash: Value =
            serde_json::from_str(converted.stash.as_deref().expect("a stash")).expect("JSON");
        assert!(stash["spec"].get("replicas").is_none(), "{stash}");
        assert!(stash["spec"].get("service").is_none(), "{stash}");
        assert_eq!(stash["spec"]["memcached"]["memoryLimitMB"], json!(64));
    }

    #[test]
    fn a_minimal_object_needs_no_stash() {
        let spec = v1beta1::MemcachedSpec {
            replicas: Some(3),
            service: Some(v1beta1::ServiceSpec { port: Some(11211) }),
            ..Default::default()
        };
        assert_eq!(down(&spec, None).stash, None);
    }

    #[test]
    fn metadata_bytes_pass_through_untouched() {
        let object = json!({
            "apiVersion": "cache.f2367556.dev/v1alpha1",
            "kind": "Memcached",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "creationTimestamp": "2024-05-06T07:08:09Z",
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:size": {}}}}],
                "finalizers": ["example.com/keep"],
                "annotations": {"keep": "me"},
                "somethingNew": {"x": 1}
            },
            "spec": {"size": 2, "containerPort": 11311},
            "status": {"conditions": []}
        });
        let up = convert_object(object.clone(), "cache.f2367556.dev/v1beta1").expect("converts");
        assert_eq!(up["metadata"], object["metadata"]);
        assert_eq!(up["apiVersion"], json!("cache.f2367556.dev/v1beta1"));
        assert_eq!(
            up["spec"],
            json!({"replicas": 2, "service": {"port": 11311}})
        );
        let down = convert_object(up, "cache.f2367556.dev/v1alpha1").expect("converts");
        assert_eq!(down, object);
    }

    #[test]
    fn an_unknown_desired_version_is_refused_by_name() {
        let object = wire(&to_v1alpha1(&v1beta1::Memcached::new(
            "a",
            Default::default(),
        )));
        let error = convert_object(object, "cache.f2367556.dev/v2").expect_err("v2 is not served");
        assert_eq!(
            error.to_string(),
            "unsupported desired apiVersion \"cache.f2367556.dev/v2\": cache.f2367556.dev serves v1alpha1 and v1beta1"
        );
    }

    #[test]
    fn objects_of_another_kind_or_group_are_refused_by_name() {
        let pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}});
        let error = convert_object(pod, "cache.f2367556.dev/v1beta1").expect_err("not a Memcached");
        assert!(
            error.to_string().starts_with("object n/p: kind is \"Pod\""),
            "{error}"
        );
        let other_group =
            json!({"apiVersion": "other.dev/v1", "kind": "Memcached", "metadata": {"name": "m"}});
        let error =
            convert_object(other_group, "cache.f2367556.dev/v1beta1").expect_err("wrong group");
        assert!(error.to_string().contains("other.dev/v1"), "{error}");
        let error =
            convert_nth(json!("text"), "cache.f2367556.dev/v1beta1", 3).expect_err("not an object");
        assert!(
            error.to_string().starts_with("object #3 (unnamed)"),
            "{error}"
        );
    }

    #[test]
    fn a_malformed_spec_is_refused_naming_the_field() {
        let object = json!({"apiVersion": "cache.f2367556.dev/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "m", "namespace": "n"}, "spec": {"size": "three"}});
        let error =
            convert_object(object, "cache.f2367556.dev/v1beta1").expect_err("size is a string");
        assert!(
            error
                .to_string()
                .starts_with("object n/m: spec does not match v1alpha1"),
            "{error}"
        );
    }

    #[test]
    fn a_tampered_stash_is_refused_not_dropped() {
        let object = json!({"apiVersion": "cache.f2367556.dev/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "m", "namespace": "n", "annotations": {STASH_ANNOTATION: "{not json"}},
            "spec": {"size": 1}});
        let error = convert_object(object, "cache.f2367556.dev/v1beta1").expect_err("bad stash");
        assert!(matches!(error, ConversionError::BadStash { .. }), "{error}");
        assert!(error.to_string().contains("n/m"), "{error}");
    }

    #[test]
    fn the_same_version_passes_through() {
        let object = wire(&v1beta1::Memcached::new("a", Default::default()));
        assert_eq!(
            convert_object(object.clone(), "cache.f2367556.dev/v1beta1"),
            Ok(object)
        );
    }

    /// Converts the JSON text of an object at `position` of a review, as the webhook does.
    fn converted_text(
        text: &str,
        desired: &str,
        position: usize,
    ) -> Result<String, ConversionError> {
        let object: ShallowObject<'_> = serde_json::from_str(text).expect("valid JSON");
        let mut out = b"[".to_vec();
        write_converted(object, desired, position, &mut out)?;
        out.push(b']');
        Ok(String::from_utf8(out).expect("UTF-8"))
    }

    #[test]
    fn metadata_and_unknown_members_are_copied_as_they_came() {
        let managed_fields = r#"[{"apiVersion":"cache.f2367556.dev/v1beta1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:replicas":{}}},"manager":"kubectl","operation":"Update","time":"2026-11-20T09:14:02Z"}]"#;
        let owner_references =
            r#"[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"1b2c"}]"#;
        let labels = r#"{"app.kubernetes.io/name":"memcached","\u00e9t\u00e9":"caf\u00e9"}"#;
        let text = format!(
            r#"{{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","extra":{{"kept": [1, 2.50]}},"metadata":{{"name":"a","namespace":"ns","labels":{labels},"managedFields":{managed_fields},"ownerReferences":{owner_references},"annotations":{{"keep":"me","tab\there":"\u00e9"}},"somethingNew":{{"x":1}}}},"spec":{{"replicas":2,"memcached":{{"threads":8}}}},"status":{{"replicas":2,"conditions":[]}}}}"#
        );
        let down = converted_text(&text, "cache.f2367556.dev/v1alpha1", 0).expect("converts");
        for verbatim in [
            managed_fields,
            owner_references,
            labels,
            r#""extra":{"kept": [1, 2.50]}"#,
        ] {
            assert!(down.contains(verbatim), "{verbatim} not in {down}");
        }
        let down_value: Value = serde_json::from_str(&down).expect("JSON");
        let original: Value = serde_json::from_str(&text).expect("JSON");
        let mut metadata = down_value[0]["metadata"].clone();
        let stash = metadata["annotations"]
            .as_object_mut()
            .and_then(|a| a.remove(STASH_ANNOTATION))
            .expect("a stash");
        assert!(
            stash.as_str().is_some_and(|s| s.contains("\"threads\":8")),
            "{stash}"
        );
        assert_eq!(metadata, original["metadata"]);
        assert_eq!(down_value[0]["extra"], original["extra"]);

        let up_text = serde_json::to_string(&down_value[0]).expect("serialises");
        let up = converted_text(&up_text, "cache.f2367556.dev/v1beta1", 0).expect("converts");
        let up: Value = serde_json::from_str(&up).expect("JSON");
        assert_eq!(up[0], original);
    }

    #[test]
    fn an_object_that_does_not_fit_is_refused_naming_it_and_the_field() {
        let text = r#"{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{"name":"big","namespace":"ns"},"spec":{"replicas":1e40}}"#;
        let error = converted_text(text, "cache.f2367556.dev/v1alpha1", 4).expect_err("1e40");
        let message = error.to_string();
        assert!(
            message.starts_with("object ns/big: spec does not match v1beta1: replicas: "),
            "{message}"
        );
        let unnamed = r#"{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","spec":{"memcached":{"threads":"eight"}}}"#;
        let error =
            converted_text(unnamed, "cache.f2367556.dev/v1alpha1", 4).expect_err("a string");
        let message = error.to_string();
        assert!(
            message.starts_with(
                "object #4 (unnamed): spec does not match v1beta1: memcached.threads: invalid type"
            ),
            "{message}"
        );
    }

    #[test]
    fn a_large_object_converts_with_its_annotations_intact() {
        let large = "x\\\"y".repeat(256 * 1024);
        let text = format!(
            r#"{{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{{"name":"a","annotations":{{"large":"{large}"}}}},"spec":{{"replicas":1,"image":"memcached:1.6"}}}}"#
        );
        let down = converted_text(&text, "cache.f2367556.dev/v1alpha1", 0).expect("converts");
        assert!(down.contains(&format!(r#""large":"{large}""#)));
        let down: Value = serde_json::from_str(&down).expect("JSON");
        assert_eq!(down[0]["spec"], json!({"size": 1}));
    }

    #[test]
    fn metadata_that_cannot_hold_the_stash_is_an_error_not_a_loss() {
        let with = |metadata: &str| {
            format!(
                r#"{{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{metadata},"spec":{{"image":"memcached:1.6"}}}}"#
            )
        };
        for (metadata, problem) in [
            (r#""text""#, "metadata is not a JSON object"),
            (
                r#"{"name":"m","annotations":[1]}"#,
                "metadata.annotations is not a JSON object",
            ),
        ] {
            let error = converted_text(&with(metadata), "cache.f2367556.dev/v1alpha1", 2)
                .expect_err("nowhere to stash");
            assert!(error.to_string().contains(problem), "{error}");
        }
        for metadata in ["null", r#"{"annotations":null}"#] {
            let down = converted_text(&with(metadata), "cache.f2367556.dev/v1alpha1", 0)
                .expect("converts");
            let down: Value = serde_json::from_str(&down).expect("JSON");
            assert!(
                down[0]["metadata"]["annotations"][STASH_ANNOTATION].is_string(),
                "{down}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn down_never_panics_on_any_spec(spec in beta_spec(), status in proptest::option::of(beta_status())) {
            let converted = down(&spec, status.as_ref());
            prop_assert_eq!(converted.spec.size, spec.replicas);
        }
    }
}
