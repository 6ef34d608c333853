//! Converts Memcached objects between versions (placeholder, replaced by main).

use serde_json::Value;

use super::{GROUP, KIND, SERVED_VERSIONS};

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The desired version is not served.
    #[error("desired version {0:?} is not a served version of {KIND}")]
    UnknownVersion(String),
    /// The object is not a Memcached of a served version.
    #[error("object {name:?}: apiVersion {api_version:?} kind {kind:?} is not a served {KIND}")]
    NotMemcached {
        /// The object's name.
        name: String,
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
}

/// Converts one object to the desired `group/version`.
pub fn convert_object(
    mut object: Value,
    desired_api_version: &str,
) -> Result<Value, ConversionError> {
    let desired = desired_api_version
        .strip_prefix(GROUP)
        .and_then(|v| v.strip_prefix('/'))
        .filter(|v| SERVED_VERSIONS.contains(v))
        .ok_or_else(|| ConversionError::UnknownVersion(desired_api_version.to_string()))?;
    let field = |o: &Value, f: &str| {
        o.get(f)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let api_version = field(&object, "apiVersion");
    let kind = field(&object, "kind");
    let current = api_version
        .strip_prefix(GROUP)
        .and_then(|v| v.strip_prefix('/'))
        .filter(|v| SERVED_VERSIONS.contains(v) && kind == KIND)
        .map(str::to_string)
        .ok_or_else(|| ConversionError::NotMemcached {
            name: object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            api_version: api_version.clone(),
            kind: kind.clone(),
        })?;
    if current != desired {
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            if desired == "v1beta1" {
                if let Some(size) = spec.remove("size") {
                    spec.insert("replicas".into(), size);
                }
                if let Some(port) = spec.remove("containerPort") {
                    spec.insert("service".into(), serde_json::json!({ "port": port }));
                }
            } else {
                if let Some(replicas) = spec.remove("replicas") {
                    spec.insert("size".into(), replicas);
                }
                if let Some(port) = spec.remove("service").and_then(|s| s.get("port").cloned()) {
                    spec.insert("containerPort".into(), port);
                }
            }
        }
    }
    object["apiVersion"] = Value::String(desired_api_version.to_string());
    Ok(object)
}
