//! The operator's leader-election Lease as the tests read it: who holds it (the pod whose
//! replica leads; the identity is `POD_PID_RANDOM`) and how many times it changed hands.

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use memcached_operator::manager::DEFAULT_LEASE_NAME;

/// The operator's Lease in `namespace`, as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The holder's identity, empty when nobody holds it.
    pub identity: String,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

impl Holder {
    /// The name of the pod whose replica holds the lease, when one does.
    pub fn pod(&self) -> Option<&str> {
        self.identity
            .split('_')
            .next()
            .filter(|pod| !pod.is_empty())
    }
}

/// Reads the operator's Lease (`DEFAULT_LEASE_NAME`) in `namespace`.
pub async fn holder(client: &Client, namespace: &str) -> Result<Holder, String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let spec = leases
        .get(DEFAULT_LEASE_NAME)
        .await
        .map_err(|e| format!("Lease {namespace}/{DEFAULT_LEASE_NAME}: {e}"))?
        .spec
        .unwrap_or_default();
    Ok(Holder {
        identity: spec.holder_identity.unwrap_or_default(),
        transitions: spec.lease_transitions.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holders_pod_is_the_identitys_first_part() {
        let held = Holder {
            identity: "operator-7d9-abcde_12_f00d".into(),
            transitions: 1,
        };
        assert_eq!(held.pod(), Some("operator-7d9-abcde"));
        let free = Holder {
            identity: String::new(),
            transitions: 1,
        };
        assert_eq!(free.pod(), None);
    }
}
