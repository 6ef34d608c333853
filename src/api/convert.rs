//! Converts Memcached objects between v1alpha1 and v1beta1 without losing anything.
//!
//! v1beta1 is the hub. Going down, `replicas` becomes `size`, `service.port` becomes
//! `containerPort`, conditions are copied, and everything v1alpha1 cannot hold is stashed as
//! JSON in the [`STASH_ANNOTATION`]. Going up, the stash is restored and removed, and the
//! fields v1alpha1 can hold are taken from the v1alpha1 object, so a value edited there wins
//! over anything stashed earlier (the stash never holds those fields). Metadata other than
//! that one annotation is never touched: the wire-level [`convert_object`] edits the JSON in
//! place rather than re-serialising it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

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
    let mut rest = spec.clone();
    rest.replicas = None;
    if let Some(service) = &mut rest.service
        && service.port.take().is_some()
        && *service == v1beta1::ServiceSpec::default()
    {
        // `up` recreates the service from containerPort; stash it only if it holds more.
        rest.service = None;
    }
    let rest_status = status.map(|s| v1beta1::MemcachedStatus {
        conditions: None,
        ..s.clone()
    });
    let stash = Stash {
        spec: (rest != v1beta1::MemcachedSpec::default()).then_some(rest),
        status: rest_status.filter(|s| *s != v1beta1::MemcachedStatus::default()),
    };
    let stash = (stash != Stash::default())
        .then(|| serde_json::to_string(&stash).ok())
        .flatten();
    Down {
        spec: v1alpha1::MemcachedSpec {
            size: spec.replicas,
            container_port: spec.service.as_ref().and_then(|s| s.port),
        },
        status: status.map(|s| v1alpha1::MemcachedStatus {
            conditions: s.conditions.clone(),
        }),
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
    mut object: Value,
    desired_api_version: &str,
    position: usize,
) -> Result<Value, ConversionError> {
    let desired = desired_version(desired_api_version)?;
    let name = describe(&object, position);
    let Some(fields) = object.as_object_mut() else {
        return Err(ConversionError::NotAMemcached {
            object: name,
            reason: "is not a JSON object".into(),
        });
    };
    let kind = fields
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind != KIND {
        return Err(ConversionError::NotAMemcached {
            object: name,
            reason: format!("kind is {kind:?}, expected {KIND:?}"),
        });
    }
    let current_api_version = fields
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let current =
        desired_version(&current_api_version).map_err(|_| ConversionError::NotAMemcached {
            object: name.clone(),
            reason: format!("apiVersion {current_api_version:?} is not served by {GROUP}"),
        })?;
    if current == desired {
        return Ok(object);
    }
    if desired == DEPRECATED_VERSION {
        let spec: v1beta1::MemcachedSpec = read(fields, "spec", &name, current)?;
        let status: Option<v1beta1::MemcachedStatus> = read(fields, "status", &name, current)?;
        let converted = down(&spec, status.as_ref());
        write(fields, "spec", Some(&converted.spec), &name)?;
        write(fields, "status", converted.status.as_ref(), &name)?;
        set_stash_json(fields, converted.stash);
    } else {
        let spec: v1alpha1::MemcachedSpec = read(fields, "spec", &name, current)?;
        let status: Option<v1alpha1::MemcachedStatus> = read(fields, "status", &name, current)?;
        let stash = fields
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(STASH_ANNOTATION));
        let stash = match stash {
            None => None,
            Some(Value::String(text)) => Some(text.as_str()),
            Some(other) => {
                return Err(ConversionError::BadStash {
                    object: name,
                    reason: format!("expected a string, found {other}"),
                });
            }
        };
        let (spec, status) =
            up(&spec, status.as_ref(), stash).map_err(|e| ConversionError::BadStash {
                object: name.clone(),
                reason: e.to_string(),
            })?;
        write(fields, "spec", Some(&spec), &name)?;
        write(fields, "status", status.as_ref(), &name)?;
        set_stash_json(fields, None);
    }
    fields.insert("apiVersion".into(), Value::String(api_version(desired)));
    Ok(object)
}

fn read<T: for<'de> Deserialize<'de> + Default>(
    fields: &mut Map<String, Value>,
    field: &'static str,
    object: &str,
    version: &str,
) -> Result<T, ConversionError> {
    match fields.remove(field) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => serde_json::from_value(value).map_err(|e| ConversionError::Malformed {
            object: object.to_string(),
            field,
            version: version.to_string(),
            reason: e.to_string(),
        }),
    }
}

fn write<T: Serialize>(
    fields: &mut Map<String, Value>,
    field: &'static str,
    value: Option<&T>,
    object: &str,
) -> Result<(), ConversionError> {
    if let Some(value) = value {
        let value = serde_json::to_value(value).map_err(|e| ConversionError::Malformed {
            object: object.to_string(),
            field,
            version: String::new(),
            reason: e.to_string(),
        })?;
        fields.insert(field.into(), value);
    }
    Ok(())
}

fn set_stash_json(fields: &mut Map<String, Value>, stash: Option<String>) {
    let Some(metadata) = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
    else {
        return;
    };
    match stash {
        Some(stash) => {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert(STASH_ANNOTATION.into(), Value::String(stash));
            }
        }
        None => {
            let emptied = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
                .is_some_and(|annotations| {
                    annotations.remove(STASH_ANNOTATION).is_some() && annotations.is_empty()
                });
            if emptied {
                metadata.remove("annotations");
            }
        }
    }
}

/// Names an object for messages: `namespace/name`, or its position in the review.
fn describe(object: &Value, position: usize) -> String {
    let metadata = object.get("metadata");
    let name = metadata.and_then(|m| m.get("name")).and_then(Value::as_str);
    let namespace = metadata
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str);
    match (namespace, name) {
        (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
        (None, Some(name)) => name.to_string(),
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn down_never_panics_on_any_spec(spec in beta_spec(), status in proptest::option::of(beta_status())) {
            let converted = down(&spec, status.as_ref());
            prop_assert_eq!(converted.spec.size, spec.replicas);
        }
    }
}
