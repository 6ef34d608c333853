//! Fills in the defaults of a Memcached spec (placeholder, replaced by main).

use crate::api::v1beta1;
use crate::operator;

/// Values defaulting needs from the environment, read once at start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// The memcached image a spec without one gets.
    pub image: String,
}

impl Defaults {
    /// Reads `RELATED_IMAGE_MEMCACHED`, falling back to the pinned default image.
    pub fn from_env() -> Self {
        let image = std::env::var(operator::RELATED_IMAGE_ENV)
            .ok()
            .filter(|image| !image.is_empty())
            .unwrap_or_else(|| operator::DEFAULT_MEMCACHED_IMAGE.to_string());
        Defaults { image }
    }
}

/// Returns the spec with every unset field defaulted.
pub fn default_spec(spec: &v1beta1::MemcachedSpec, defaults: &Defaults) -> v1beta1::MemcachedSpec {
    let mut spec = spec.clone();
    spec.replicas.get_or_insert(v1beta1::DEFAULT_REPLICAS);
    spec.image.get_or_insert_with(|| defaults.image.clone());
    let memcached = spec.memcached.get_or_insert_with(Default::default);
    memcached
        .memory_limit_mb
        .get_or_insert(v1beta1::DEFAULT_MEMORY_LIMIT_MB);
    memcached
        .max_connections
        .get_or_insert(v1beta1::DEFAULT_MAX_CONNECTIONS);
    memcached.threads.get_or_insert(v1beta1::DEFAULT_THREADS);
    spec
}
