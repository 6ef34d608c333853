//! Converts Memcached objects between v1alpha1 and v1beta1 without losing anything.
//!
//! v1beta1 is the hub. Going down, `replicas` becomes `size`, `service.port` becomes
//! `containerPort`, conditions are copied, and everything v1alpha1 cannot hold is stashed as
//! JSON in the [`STASH_ANNOTATION`]. Going up, the stash is restored and removed, and the
//! fields v1alpha1 can hold are taken from the v1alpha1 object, so a value edited there wins
//! over anything stashed earlier (the stash never holds those fields). Metadata other than
//! that one annotation is never touched. These are typed functions of typed objects; the
//! conversion webhook (`webhook::conversion`) applies them to a review's objects without
//! reading their metadata into trees.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{DEPRECATED_VERSION, GROUP, STORAGE_VERSION, v1alpha1, v1beta1};

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
fn down(spec: &v1beta1::MemcachedSpec, status: Option<&v1beta1::MemcachedStatus>) -> Down {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::fixtures::{alpha_object, beta_object, beta_spec, beta_status};

    const CASES: u32 = 10_000;

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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn down_never_panics_on_any_spec(spec in beta_spec(), status in proptest::option::of(beta_status())) {
            let converted = down(&spec, status.as_ref());
            prop_assert_eq!(converted.spec.size, spec.replicas);
        }
    }
}
