//! A failed reconciliation: which call to the API server failed, on what.

use kube::ResourceExt;
use thiserror::Error;

use crate::api::v1beta1::Memcached;

/// A failed reconciliation.
#[derive(Debug, Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("{action} {kind} {namespace}/{name}: {source}")]
    Api {
        /// What was being done (`apply`, `get`, `delete`, `apply status of`, ...).
        action: &'static str,
        /// The object's kind.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A short, bounded label for metrics.
    pub fn metric_reason(&self) -> String {
        match self {
            Error::Api { action, kind, .. } => {
                format!("{}_{}", action.replace(' ', "_"), kind.to_lowercase())
            }
        }
    }
}

/// The failure of `action` on a `kind` of the Memcached `object`.
pub fn api_error(
    action: &'static str,
    kind: &'static str,
    object: &Memcached,
    source: kube::Error,
) -> Error {
    Error::Api {
        action,
        kind,
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        source,
    }
}
