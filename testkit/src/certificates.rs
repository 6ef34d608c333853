//! cert-manager Certificates as tests drive them: their API in a namespace, and a renewal
//! asked for by hand, as `cmctl renew` asks for it.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

/// cert-manager's Certificates in `namespace`.
pub fn certificates(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// Asks cert-manager to issue `certificate` again now: sets its `Issuing` condition to True
/// with reason `ManuallyTriggered`, the request cert-manager documents for a manual renewal
/// (what `cmctl renew` does); cert-manager writes every other status itself.
///
/// # Errors
/// When the Certificate cannot be read or its status cannot be written; names the
/// Certificate.
pub async fn renew(api: &Api<DynamicObject>, certificate: &str) -> Result<(), String> {
    let object = api
        .get_status(certificate)
        .await
        .map_err(|error| format!("cannot read Certificate {certificate}: {error}"))?;
    let mut conditions: Vec<serde_json::Value> = object.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c["type"] != "Issuing");
    conditions.push(json!({
        "type": "Issuing",
        "status": "True",
        "reason": "ManuallyTriggered",
        "message": "Certificate re-issuance manually triggered",
        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        "observedGeneration": object.metadata.generation,
    }));
    let patch = json!({
        "metadata": {"resourceVersion": object.metadata.resource_version},
        "status": {"conditions": conditions},
    });
    api.patch_status(certificate, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|error| {
            format!("cannot set Certificate {certificate}'s Issuing condition: {error}")
        })?;
    Ok(())
}
