//! Validates Memcached objects on create, update and delete (placeholder, replaced by main).

use std::fmt;

use crate::api::{self, v1beta1};

/// Why an object is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// What is wrong, naming the field and value.
    pub message: String,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Messages for the client about an admitted object.
pub type Warnings = Vec<String>;

/// Validates a new object.
pub fn validate_create(new: &v1beta1::Memcached) -> Result<Warnings, Denial> {
    validate_spec(&new.spec)
}

/// Validates an update; never blocks an object that is being deleted.
pub fn validate_update(
    _old: &v1beta1::Memcached,
    new: &v1beta1::Memcached,
) -> Result<Warnings, Denial> {
    if new.metadata.deletion_timestamp.is_some() {
        return Ok(Vec::new());
    }
    validate_spec(&new.spec)
}

/// Validates a deletion: refused while deletion protection is on.
pub fn validate_delete(old: &v1beta1::Memcached) -> Result<Warnings, Denial> {
    let protected = old
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(api::DELETION_PROTECTION_ANNOTATION))
        .is_some_and(|v| v == "true");
    if protected {
        return Err(Denial {
            message: format!(
                "metadata.annotations[{}]: deletion protection is on",
                api::DELETION_PROTECTION_ANNOTATION
            ),
        });
    }
    Ok(Vec::new())
}

fn validate_spec(spec: &v1beta1::MemcachedSpec) -> Result<Warnings, Denial> {
    if let Some(replicas) = spec.replicas
        && replicas > v1beta1::MAX_REPLICAS
    {
        return Err(Denial {
            message: format!(
                "spec.replicas: {replicas} exceeds {}",
                v1beta1::MAX_REPLICAS
            ),
        });
    }
    let mut warnings = Vec::new();
    if spec.replicas == Some(1) {
        warnings.push("spec.replicas: 1 server has no redundancy".to_string());
    }
    Ok(warnings)
}
