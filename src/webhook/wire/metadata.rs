//! Decodes the metadata of the objects of an admission request: every field of `ObjectMeta`
//! but `managedFields`, which is checked and dropped.
//!
//! No admission rule reads `managedFields`, and its `fieldsV1` tries, read into
//! `serde_json::Value` trees, were most of the cost of decoding a request. [`WireMeta`]
//! refuses everything k8s-openapi's `ObjectMeta` refuses (`managedFields` included), so the
//! fast decoder in `admission` still hands whatever it cannot read to kube's types (the strict
//! decoder) and a malformed request is answered with their message.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::value::MapAccessDeserializer;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// `ObjectMeta` as k8s-openapi decodes it, except that `managedFields` is only checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaFields {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    #[allow(dead_code)] // Decoded only to refuse what `ObjectMeta` refuses.
    managed_fields: Option<Vec<ManagedFieldsShape>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

/// The metadata of an object in an admission request: `ObjectMeta` without `managedFields`.
#[derive(Default)]
pub struct WireMeta(pub ObjectMeta);

/// Decodes an object's `metadata` as [`WireMeta`]: for `#[serde(deserialize_with)]`.
pub fn without_managed_fields<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    WireMeta::deserialize(deserializer).map(|meta| meta.0)
}

impl<'de> Deserialize<'de> for WireMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields: MetaFields = object_only(deserializer)?;
        Ok(WireMeta(ObjectMeta {
            annotations: fields.annotations,
            creation_timestamp: fields.creation_timestamp,
            deletion_grace_period_seconds: fields.deletion_grace_period_seconds,
            deletion_timestamp: fields.deletion_timestamp,
            finalizers: fields.finalizers,
            generate_name: fields.generate_name,
            generation: fields.generation,
            labels: fields.labels,
            managed_fields: None,
            name: fields.name,
            namespace: fields.namespace,
            owner_references: fields.owner_references,
            resource_version: fields.resource_version,
            self_link: fields.self_link,
            uid: fields.uid,
        }))
    }
}

/// One entry of `managedFields`, checked as k8s-openapi's `ManagedFieldsEntry` checks it and
/// dropped: `fieldsV1` may be any JSON, and is skipped without being built.
struct ManagedFieldsShape;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Decoded only to refuse what `ManagedFieldsEntry` refuses.
struct ManagedFieldsEntryFields {
    api_version: Option<String>,
    fields_type: Option<String>,
    #[serde(rename = "fieldsV1")]
    fields_v1: Option<IgnoredAny>,
    manager: Option<String>,
    operation: Option<String>,
    subresource: Option<String>,
    time: Option<Time>,
}

impl<'de> Deserialize<'de> for ManagedFieldsShape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        object_only::<_, ManagedFieldsEntryFields>(deserializer).map(|_| ManagedFieldsShape)
    }
}

/// Decodes `T` from a JSON object only. A derived decoder also reads a struct from an array
/// of its fields in order, which k8s-openapi's decoders refuse.
fn object_only<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    struct ObjectOnly<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(MapAccessDeserializer::new(map))
        }
    }

    deserializer.deserialize_map(ObjectOnly(PhantomData))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn metadata() -> Value {
        json!({
            "name": "sessions", "namespace": "shop", "generateName": "sessions-",
            "uid": "8b0f5f9e", "resourceVersion": "1712", "generation": 3,
            "selfLink": "/apis/x", "creationTimestamp": "2026-11-20T09:14:02Z",
            "deletionTimestamp": "2026-11-21T09:14:02Z", "deletionGracePeriodSeconds": 30,
            "labels": {"app": "memcached"}, "annotations": {"team": "storefront"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}],
            "managedFields": [{"apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}}}, "manager": "kubectl", "operation": "Update",
                "subresource": "status", "time": "2026-11-20T09:14:02Z"}],
            "somethingNew": {"x": 1}
        })
    }

    #[test]
    fn every_field_but_managed_fields_is_decoded_as_object_meta_decodes_it() {
        let wire: WireMeta = serde_json::from_value(metadata()).expect("decodes");
        let mut expected: ObjectMeta = serde_json::from_value(metadata()).expect("decodes");
        assert!(expected.managed_fields.take().is_some());
        assert_eq!(wire.0, expected);
    }

    #[test]
    fn what_object_meta_refuses_is_refused() {
        let edits: [(&str, Value); 9] = [
            ("ownerReferences", json!([{"kind": 7}])),
            ("managedFields", json!({})),
            ("managedFields", json!([["v1"]])),
            ("managedFields", json!([{"time": "yesterday"}])),
            ("managedFields", json!([{"manager": 7}])),
            ("creationTimestamp", json!("now")),
            ("generation", json!("1")),
            ("annotations", json!({"a": 1})),
            ("name", json!(["sessions"])),
        ];
        for (field, value) in edits {
            let mut body = metadata();
            body[field] = value;
            let text = body.to_string();
            assert!(serde_json::from_str::<ObjectMeta>(&text).is_err(), "{text}");
            assert!(serde_json::from_str::<WireMeta>(&text).is_err(), "{text}");
        }
        for refused in ["[]", "null", "\"sessions\"", r#"[{"name":"sessions"}]"#] {
            assert!(
                serde_json::from_str::<ObjectMeta>(refused).is_err(),
                "{refused}"
            );
            assert!(
                serde_json::from_str::<WireMeta>(refused).is_err(),
                "{refused}"
            );
        }
    }

    #[test]
    fn what_object_meta_accepts_is_accepted() {
        for field in ["managedFields", "ownerReferences", "annotations", "name"] {
            let mut body = metadata();
            body[field] = Value::Null;
            let text = body.to_string();
            assert!(serde_json::from_str::<ObjectMeta>(&text).is_ok(), "{text}");
            assert!(serde_json::from_str::<WireMeta>(&text).is_ok(), "{text}");
        }
        let anything = json!({"managedFields": [{"fieldsV1": [1, "two", null]}, {}]});
        assert!(serde_json::from_value::<ObjectMeta>(anything.clone()).is_ok());
        assert!(serde_json::from_value::<WireMeta>(anything).is_ok());
    }
}
