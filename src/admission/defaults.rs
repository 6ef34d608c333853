//! Fills in every field of a Memcached spec the user left out.
//!
//! Defaulting is idempotent: a spec that went through it once comes out of a second pass
//! unchanged, so the mutating webhook then returns no patch at all. It never overrides a
//! value the user gave, including an explicitly empty `resources`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::issuers::AllowedIssuers;
use crate::api::v1beta1::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_ITEM_SIZE, DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_METRICS_PORT, DEFAULT_PORT, DEFAULT_REPLICAS,
    DEFAULT_TERMINATION_GRACE_SECONDS, DEFAULT_THREADS, DEFAULT_VERBOSITY, MemcachedConfig,
    MemcachedSpec, PodDisruptionBudgetSpec, ServiceSpec,
};
use crate::operator::{
    self, DEFAULT_EXPORTER_IMAGE, DEFAULT_MEMCACHED_IMAGE, RELATED_IMAGE_ENV,
    RELATED_IMAGE_EXPORTER_ENV, RELATED_IMAGE_REFRESHER_ENV,
};

/// The smallest headroom, in MiB, added to the item memory for connection buffers, the hash
/// table and the process itself.
pub const MIN_HEADROOM_MB: i64 = 32;
/// The CPU a memcached container requests when resources are derived.
pub const DEFAULT_CPU_REQUEST: &str = "100m";

/// What admission needs from outside the object, read once at start-up: the images
/// defaulting fills in, and the issuers the cluster admin allows beyond an Issuer in a
/// Memcached's own namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// The memcached image for specs that name none.
    pub image: String,
    /// The operator's own image, for its sidecars (the certificate refresher, the stats
    /// relay) where a spec names none.
    pub refresher_image: String,
    /// The memcached_exporter image for monitoring specs that name none.
    pub exporter_image: String,
    /// The issuers `spec.tls.issuerRef` may name beyond an Issuer in the Memcached's own
    /// namespace (`--allowed-issuers`, `ALLOWED_ISSUERS`).
    pub allowed_issuers: AllowedIssuers,
}

impl Defaults {
    /// Reads `RELATED_IMAGE_MEMCACHED`, `RELATED_IMAGE_CERT_REFRESHER` and
    /// `RELATED_IMAGE_MEMCACHED_EXPORTER`; falls back to the pinned memcached 1.6 image, to the
    /// operator's own image and to the pinned exporter when one is unset or blank. The issuers
    /// allowed are the default's until [`Defaults::with_allowed_issuers`] says otherwise.
    pub fn from_env() -> Self {
        let mut defaults = Self::with_related_image(std::env::var(RELATED_IMAGE_ENV).ok());
        if let Some(image) = non_blank(std::env::var(RELATED_IMAGE_REFRESHER_ENV).ok()) {
            defaults.refresher_image = image;
        }
        if let Some(image) = non_blank(std::env::var(RELATED_IMAGE_EXPORTER_ENV).ok()) {
            defaults.exporter_image = image;
        }
        defaults
    }

    /// These defaults with `allowed` as the issuers allowed.
    pub fn with_allowed_issuers(self, allowed: AllowedIssuers) -> Self {
        Self {
            allowed_issuers: allowed,
            ..self
        }
    }

    /// Uses the given related image, or the pinned one when it is absent or blank.
    pub fn with_related_image(related_image: Option<String>) -> Self {
        let image = non_blank(related_image).unwrap_or_else(|| DEFAULT_MEMCACHED_IMAGE.to_string());
        Self {
            image,
            refresher_image: operator::own_image(),
            exporter_image: DEFAULT_EXPORTER_IMAGE.to_string(),
            allowed_issuers: AllowedIssuers::default(),
        }
    }
}

fn non_blank(value: Option<String>) -> Option<String> {
    value
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

impl Default for Defaults {
    fn default() -> Self {
        Self::with_related_image(None)
    }
}

/// Returns `spec` with every field the user left out filled in.
pub fn default_spec(spec: &MemcachedSpec, defaults: &Defaults) -> MemcachedSpec {
    let mut spec = spec.clone();
    spec.replicas.get_or_insert(DEFAULT_REPLICAS);
    spec.image.get_or_insert_with(|| defaults.image.clone());

    let memcached = spec.memcached.get_or_insert_with(MemcachedConfig::default);
    let memory_mb = *memcached
        .memory_limit_mb
        .get_or_insert(DEFAULT_MEMORY_LIMIT_MB);
    memcached
        .max_connections
        .get_or_insert(DEFAULT_MAX_CONNECTIONS);
    memcached.threads.get_or_insert(DEFAULT_THREADS);
    memcached
        .max_item_size
        .get_or_insert_with(|| DEFAULT_MAX_ITEM_SIZE.to_string());
    memcached.verbosity.get_or_insert(DEFAULT_VERBOSITY);

    spec.resources
        .get_or_insert_with(|| derived_resources(memory_mb));
    spec.service
        .get_or_insert_with(ServiceSpec::default)
        .port
        .get_or_insert(DEFAULT_PORT);
    spec.pod_disruption_budget
        .get_or_insert_with(PodDisruptionBudgetSpec::default)
        .max_unavailable
        .get_or_insert(IntOrString::Int(DEFAULT_MAX_UNAVAILABLE));
    // TLS, authentication, monitoring and the shutdown settings stay off unless asked for; once asked
    // for, their own fields are filled in.
    if let Some(tls) = &mut spec.tls {
        tls.client_auth.get_or_insert_default();
        tls.refresher_image
            .get_or_insert_with(|| defaults.refresher_image.clone());
    }
    if let Some(auth) = &mut spec.auth {
        auth.reloader_image
            .get_or_insert_with(|| defaults.refresher_image.clone());
    }
    if let Some(monitoring) = &mut spec.monitoring {
        monitoring.port.get_or_insert(DEFAULT_METRICS_PORT);
        monitoring
            .exporter_image
            .get_or_insert_with(|| defaults.exporter_image.clone());
        monitoring
            .relay_image
            .get_or_insert_with(|| defaults.refresher_image.clone());
    }
    if let Some(shutdown) = &mut spec.graceful_shutdown {
        shutdown.pre_stop_delay_seconds.get_or_insert(0);
        shutdown
            .termination_grace_period_seconds
            .get_or_insert(DEFAULT_TERMINATION_GRACE_SECONDS);
    }
    spec
}

/// The container memory for an item memory: the item memory plus a quarter, and at least
/// [`MIN_HEADROOM_MB`] more.
pub fn container_memory_mb(memory_limit_mb: i32) -> i64 {
    let memory = i64::from(memory_limit_mb);
    memory + (memory / 4).max(MIN_HEADROOM_MB)
}

/// Resources derived from the item memory: memory requested and limited alike (so the pod is
/// never the first to be evicted for memory), and a small CPU request.
pub fn derived_resources(memory_limit_mb: i32) -> ResourceRequirements {
    memory_bound(
        DEFAULT_CPU_REQUEST,
        &format!("{}Mi", container_memory_mb(memory_limit_mb)),
    )
}

/// A CPU request, and a memory request and limit alike: the memcached container's derived
/// resources, and the sidecars'.
pub fn memory_bound(cpu: &str, memory: &str) -> ResourceRequirements {
    let memory = Quantity(memory.into());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), memory.clone()),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), memory)])),
        ..ResourceRequirements::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Defaults {
        Defaults::with_related_image(Some("registry.example.com/memcached:1.6.39".into()))
    }

    #[test]
    fn an_empty_spec_gets_every_default() {
        let spec = default_spec(&MemcachedSpec::default(), &defaults());
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(
            spec.image.as_deref(),
            Some("registry.example.com/memcached:1.6.39")
        );
        let memcached = spec.memcached.as_ref().expect("memcached settings");
        assert_eq!(memcached.memory_limit_mb, Some(64));
        assert_eq!(memcached.max_connections, Some(1024));
        assert_eq!(memcached.threads, Some(4));
        assert_eq!(memcached.max_item_size.as_deref(), Some("1m"));
        assert_eq!(memcached.verbosity, Some(0));
        assert_eq!(memcached.extra_args, None);
        assert_eq!(spec.service.and_then(|s| s.port), Some(11211));
        assert_eq!(
            spec.pod_disruption_budget.and_then(|p| p.max_unavailable),
            Some(IntOrString::Int(1))
        );
        let resources = spec.resources.expect("resources");
        let limit = resources.limits.and_then(|l| l.get("memory").cloned());
        assert_eq!(limit, Some(Quantity("96Mi".into())));
    }

    #[test]
    fn tls_and_shutdown_are_filled_in_only_when_asked_for() {
        let spec = default_spec(&MemcachedSpec::default(), &defaults());
        assert_eq!(
            (spec.tls, spec.auth, spec.graceful_shutdown),
            (None, None, None)
        );
        let asked = MemcachedSpec {
            tls: Some(crate::api::v1beta1::TlsSpec {
                secret_name: Some("cache-tls".into()),
                ..Default::default()
            }),
            graceful_shutdown: Some(crate::api::v1beta1::GracefulShutdownSpec::default()),
            ..MemcachedSpec::default()
        };
        let spec = default_spec(&asked, &defaults());
        let tls = spec.tls.expect("tls");
        assert_eq!(tls.client_auth, Some(crate::api::v1beta1::ClientAuth::None));
        assert_eq!(tls.plaintext_port, None);
        let shutdown = spec.graceful_shutdown.expect("graceful shutdown");
        assert_eq!(shutdown.pre_stop_delay_seconds, Some(0));
        assert_eq!(shutdown.termination_grace_period_seconds, Some(30));
    }

    #[test]
    fn defaulting_twice_changes_nothing() {
        let once = default_spec(&MemcachedSpec::default(), &defaults());
        assert_eq!(default_spec(&once, &defaults()), once);
    }

    #[test]
    fn given_values_are_kept() {
        let spec = MemcachedSpec {
            replicas: Some(0),
            image: Some("memcached:1.6.30".into()),
            memcached: Some(MemcachedConfig {
                memory_limit_mb: Some(1024),
                verbosity: Some(2),
                ..MemcachedConfig::default()
            }),
            resources: Some(ResourceRequirements::default()),
            service: Some(ServiceSpec { port: Some(12345) }),
            ..MemcachedSpec::default()
        };
        let defaulted = default_spec(&spec, &defaults());
        assert_eq!(defaulted.replicas, Some(0));
        assert_eq!(defaulted.image.as_deref(), Some("memcached:1.6.30"));
        assert_eq!(
            defaulted.memcached.as_ref().and_then(|m| m.memory_limit_mb),
            Some(1024)
        );
        assert_eq!(
            defaulted.memcached.as_ref().and_then(|m| m.verbosity),
            Some(2)
        );
        assert_eq!(defaulted.resources, Some(ResourceRequirements::default()));
        assert_eq!(defaulted.service.and_then(|s| s.port), Some(12345));
    }

    #[test]
    fn derived_memory_grows_with_the_item_memory() {
        assert_eq!(container_memory_mb(64), 96);
        assert_eq!(container_memory_mb(1024), 1280);
        let spec = MemcachedSpec {
            memcached: Some(MemcachedConfig {
                memory_limit_mb: Some(1024),
                ..MemcachedConfig::default()
            }),
            ..MemcachedSpec::default()
        };
        let resources = default_spec(&spec, &defaults())
            .resources
            .expect("resources");
        let request = resources.requests.and_then(|r| r.get("memory").cloned());
        assert_eq!(request, Some(Quantity("1280Mi".into())));
    }

    #[test]
    fn a_blank_related_image_falls_back_to_the_pinned_image() {
        assert_eq!(
            Defaults::with_related_image(Some("  ".into())).image,
            DEFAULT_MEMCACHED_IMAGE
        );
        assert_eq!(
            Defaults::with_related_image(None).image,
            DEFAULT_MEMCACHED_IMAGE
        );
    }

    #[test]
    fn a_defaulted_object_converts_down_stashing_all_but_replicas_and_port() {
        let spec = default_spec(&MemcachedSpec::default(), &Defaults::default());
        let converted = crate::api::convert::down_owned(spec, None);
        assert_eq!(converted.spec.size, Some(1));
        assert_eq!(converted.spec.container_port, Some(11211));
        let stash: serde_json::Value =
            serde_json::from_str(converted.stash.as_deref().expect("a stash")).expect("JSON");
        assert!(stash["spec"].get("replicas").is_none(), "{stash}");
        assert!(stash["spec"].get("service").is_none(), "{stash}");
        assert_eq!(stash["spec"]["memcached"]["memoryLimitMB"], 64);
    }
}
