//! Declares the Memcached API once: its group, kind and versions, the CRD built from them, and
//! the hub version every other version converts through.
//!
//! The types here are plain data. Rules about them live in `admission` (defaulting and
//! validation) and in `convert` (version conversion); this module only says what the API is.

pub mod auth_file;
pub mod cel;
pub mod convert;
pub mod memcached_flags;
pub mod memcached_suboptions;
pub mod sizes;
pub mod v1alpha1;
pub mod v1beta1;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::{MergeError, merge_crds};

/// The API group of every version.
pub const GROUP: &str = "cache.f2367556.dev";
/// The kind, the same in every version.
pub const KIND: &str = "Memcached";
/// The resource name (plural).
pub const PLURAL: &str = "memcacheds";
/// The storage version, and the hub of conversion.
pub const STORAGE_VERSION: &str = "v1beta1";
/// The older, deprecated version.
pub const DEPRECATED_VERSION: &str = "v1alpha1";
/// Every served version, oldest first.
pub const SERVED_VERSIONS: [&str; 2] = [DEPRECATED_VERSION, STORAGE_VERSION];
/// The CRD's name, `<plural>.<group>`.
pub const CRD_NAME: &str = "memcacheds.cache.f2367556.dev";

/// The hub of conversion: every version converts to and from this one.
pub type Hub = v1beta1::Memcached;

/// Annotation that, when `"true"`, makes the validating webhook refuse deletion.
pub const DELETION_PROTECTION_ANNOTATION: &str = "cache.f2367556.dev/deletion-protection";

/// Returns the `apiVersion` string (`group/version`) of a version of this API.
pub fn api_version(version: &str) -> String {
    format!("{GROUP}/{version}")
}

/// Builds the CustomResourceDefinition with every served version, v1beta1 stored.
///
/// `preserveUnknownFields` is set to `false` explicitly: OLM refuses a conversion webhook on a
/// CRD that preserves unknown fields.
pub fn crd() -> Result<CustomResourceDefinition, MergeError> {
    let mut crd = merge_crds(
        vec![v1alpha1::Memcached::crd(), v1beta1::Memcached::crd()],
        STORAGE_VERSION,
    )?;
    crd.spec.preserve_unknown_fields = Some(false);
    crd.spec
        .versions
        .sort_by_key(|v| SERVED_VERSIONS.iter().position(|name| *name == v.name));
    Ok(crd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_serves_both_versions_and_stores_v1beta1() {
        let crd = crd().expect("the two versions merge");
        assert_eq!(crd.metadata.name.as_deref(), Some(CRD_NAME));
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(
            versions,
            vec![("v1alpha1", true, false), ("v1beta1", true, true)]
        );
        assert_eq!(crd.spec.preserve_unknown_fields, Some(false));
        assert_eq!(crd.spec.names.short_names, Some(vec!["mc".to_string()]));
        assert_eq!(crd.spec.scope, "Namespaced");
    }

    #[test]
    fn v1alpha1_is_deprecated_with_a_warning_naming_its_successor() {
        let crd = crd().expect("the two versions merge");
        let alpha = &crd.spec.versions[0];
        assert_eq!(alpha.deprecated, Some(true));
        let warning = alpha.deprecation_warning.as_deref().unwrap_or_default();
        assert!(warning.contains("v1beta1"), "{warning}");
        assert_eq!(crd.spec.versions[1].deprecated, None);
    }

    #[test]
    fn both_versions_have_the_status_subresource_and_v1beta1_scales() {
        let crd = crd().expect("the two versions merge");
        for v in &crd.spec.versions {
            let sub = v.subresources.as_ref().expect("subresources");
            assert!(sub.status.is_some(), "{} has status", v.name);
        }
        let scale = crd.spec.versions[1]
            .subresources
            .as_ref()
            .and_then(|s| s.scale.as_ref())
            .expect("v1beta1 scales");
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.selector")
        );
    }

    #[test]
    fn v1beta1_prints_replicas_ready_memory_and_age() {
        let crd = crd().expect("the two versions merge");
        let columns: Vec<_> = crd.spec.versions[1]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, vec!["Replicas", "Ready", "Memory", "Age"]);
    }
}
