//! Writes the self-signed CA bundle where the API server reads it: the `caBundle` of this
//! operator's webhooks in the Mutating- and ValidatingWebhookConfiguration of `config/` and
//! the chart, and of the CRD's conversion webhook, as cert-manager's cainjector does.
//!
//! Each object is read, and patched only where its bundle differs, with a JSON patch that
//! first tests the entry's name at the index it was read at (or the CRD's conversion
//! strategy): a reordered or rewritten object makes the patch fail, and the next look reads it
//! again. Other webhooks of the same configuration are left alone. RBAC: `get` and `patch` on
//! these three objects by name.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::CRD_NAME;
use crate::operator::{MUTATING_CONFIGURATION_NAME, VALIDATING_CONFIGURATION_NAME};

/// The field manager of these patches.
pub const MANAGER: &str = "memcached-operator-ca-injector";

/// A bundle that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the CA bundle into {what}: {source}")]
pub struct InjectError {
    what: String,
    #[source]
    source: kube::Error,
}

/// The patch operations (of a configuration's `/webhooks`, in the order read) that set the
/// bundle of each entry named in `names` whose client config holds another.
fn entry_patches<'a>(
    entries: impl Iterator<Item = (&'a str, &'a WebhookClientConfig)>,
    names: &[&str],
    bundle: &[u8],
) -> Vec<serde_json::Value> {
    let mut operations = Vec::new();
    for (index, (name, client_config)) in entries.enumerate() {
        if !names.contains(&name) {
            continue;
        }
        if client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(bundle) {
            continue;
        }
        operations
            .push(json!({"op": "test", "path": format!("/webhooks/{index}/name"), "value": name}));
        operations.push(json!({
            "op": "add",
            "path": format!("/webhooks/{index}/clientConfig/caBundle"),
            "value": ByteString(bundle.to_vec()),
        }));
    }
    operations
}

async fn apply<K>(
    api: &Api<K>,
    name: &str,
    operations: Vec<serde_json::Value>,
) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if operations.is_empty() {
        return Ok(false);
    }
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(operations))
        .map_err(kube::Error::SerdeError)?;
    api.patch(
        name,
        &PatchParams {
            field_manager: Some(MANAGER.to_string()),
            ..PatchParams::default()
        },
        &Patch::Json::<()>(patch),
    )
    .await?;
    Ok(true)
}

/// A webhook configuration kind: the name and client config of each of its webhooks.
trait Configuration:
    kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug
{
    fn entries(&self) -> Vec<(&str, &WebhookClientConfig)>;
}

impl Configuration for MutatingWebhookConfiguration {
    fn entries(&self) -> Vec<(&str, &WebhookClientConfig)> {
        let webhooks = self.webhooks.iter().flatten();
        webhooks
            .map(|w| (w.name.as_str(), &w.client_config))
            .collect()
    }
}

impl Configuration for ValidatingWebhookConfiguration {
    fn entries(&self) -> Vec<(&str, &WebhookClientConfig)> {
        let webhooks = self.webhooks.iter().flatten();
        webhooks
            .map(|w| (w.name.as_str(), &w.client_config))
            .collect()
    }
}

/// Writes `bundle` into the entries `names` of configuration `name` of kind `K` where it
/// differs; returns what was written, if anything.
async fn configuration<K: Configuration>(
    client: &Client,
    name: &str,
    names: &[&str],
    bundle: &[u8],
) -> Result<Option<String>, InjectError> {
    let api: Api<K> = Api::all(client.clone());
    let what = format!("{} {name}", K::kind(&()));
    let failed = |source| InjectError {
        what: what.clone(),
        source,
    };
    let Some(config) = api.get_opt(name).await.map_err(failed)? else {
        return Ok(None);
    };
    let operations = entry_patches(config.entries().into_iter(), names, bundle);
    let wrote = apply(&api, name, operations).await.map_err(failed)?;
    Ok(wrote.then_some(what))
}

/// Writes `bundle` (PEM) wherever it differs; returns what was written. An object that does
/// not exist is skipped: an install without it (the chart always has all three).
pub async fn inject(
    client: &Client,
    names: &[&str],
    bundle: &[u8],
) -> Result<Vec<String>, InjectError> {
    let mut written = Vec::new();
    let failed = |what: &str| {
        let what = what.to_string();
        move |source| InjectError { what, source }
    };

    written.extend(
        configuration::<MutatingWebhookConfiguration>(
            client,
            MUTATING_CONFIGURATION_NAME,
            names,
            bundle,
        )
        .await?,
    );
    written.extend(
        configuration::<ValidatingWebhookConfiguration>(
            client,
            VALIDATING_CONFIGURATION_NAME,
            names,
            bundle,
        )
        .await?,
    );

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let what = format!("CustomResourceDefinition {CRD_NAME}");
    if let Some(crd) = crds.get_opt(CRD_NAME).await.map_err(failed(&what))? {
        let conversion = crd.spec.conversion.as_ref();
        let by_webhook = conversion.is_some_and(|c| c.strategy == "Webhook");
        let current = conversion
            .and_then(|c| c.webhook.as_ref())
            .and_then(|w| w.client_config.as_ref())
            .and_then(|c| c.ca_bundle.as_ref())
            .map(|b| b.0.as_slice());
        let has_client_config = conversion
            .and_then(|c| c.webhook.as_ref())
            .is_some_and(|w| w.client_config.is_some());
        if by_webhook && has_client_config && current != Some(bundle) {
            let operations = vec![
                json!({"op": "test", "path": "/spec/conversion/strategy", "value": "Webhook"}),
                json!({
                    "op": "add",
                    "path": "/spec/conversion/webhook/clientConfig/caBundle",
                    "value": ByteString(bundle.to_vec()),
                }),
            ];
            apply(&crds, CRD_NAME, operations)
                .await
                .map_err(failed(&what))?;
            written.push(what);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(bundle: Option<&[u8]>) -> WebhookClientConfig {
        WebhookClientConfig {
            ca_bundle: bundle.map(|b| ByteString(b.to_vec())),
            ..WebhookClientConfig::default()
        }
    }

    #[test]
    fn only_the_named_entries_whose_bundle_differs_are_patched() {
        let (stale, current, other) = (config(Some(b"old")), config(Some(b"new")), config(None));
        let entries = [("ours-a", &stale), ("theirs", &other), ("ours-b", &current)];
        let operations = entry_patches(entries.into_iter(), &["ours-a", "ours-b"], b"new");
        assert_eq!(
            operations,
            vec![
                json!({"op": "test", "path": "/webhooks/0/name", "value": "ours-a"}),
                json!({"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "bmV3"}),
            ]
        );
        let none = entry_patches([("ours-b", &current)].into_iter(), &["ours-b"], b"new");
        assert!(none.is_empty(), "nothing to write: {none:?}");
    }
}
