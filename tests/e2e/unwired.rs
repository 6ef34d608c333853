//! Takes the operator's admission webhooks away from the API server and gives them back, as
//! on a cluster where they are not installed, waiting each time for the API server's own view
//! of its webhook configurations: it drops or adds a webhook when its watch of those objects
//! sees the change, which under load comes well after the write, so a create made at once
//! would still reach a removed webhook, or miss a restored one.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use memcached_operator::api::v1beta1::Memcached;
use testkit::cases::DENIED_BY_VALIDATOR;
use testkit::direct_wiring::DESCRIPTION_LABEL;

use crate::cluster::{Env, eventually};

/// How long the API server may take to see its webhook configurations change.
const WAIT: Duration = Duration::from_secs(120);

/// A server-side dry run of creating `probe`: what the API server's admission says now.
async fn dry_run(api: &Api<Memcached>, probe: &Memcached) -> Result<(), kube::Error> {
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&params, probe).await.map(|_| ())
}

/// Deletes the operator's mutating and validating webhook configurations, then waits until
/// the API server admits `probe`, an object the validating webhook refuses.
pub async fn remove_admission_webhooks(env: &Env, api: &Api<Memcached>, probe: &Memcached) {
    let ours = ListParams::default().labels(DESCRIPTION_LABEL);
    Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .delete_collection(&DeleteParams::default(), &ours)
        .await
        .expect("mutating webhook removed");
    Api::<ValidatingWebhookConfiguration>::all(env.client.clone())
        .delete_collection(&DeleteParams::default(), &ours)
        .await
        .expect("validating webhook removed");
    eventually(
        "the API server no longer calls the removed webhooks (a dry run is admitted)",
        WAIT,
        || async { dry_run(api, probe).await.map_err(|error| error.to_string()) },
    )
    .await;
}

/// Waits until the API server sends `probe`, an object the validating webhook refuses, to the
/// restored webhook again: the scenarios after count on the webhooks.
pub async fn until_the_validator_refuses(api: &Api<Memcached>, probe: &Memcached) {
    eventually(
        "the API server calls the restored webhooks (a dry run is refused)",
        WAIT,
        || async {
            match dry_run(api, probe).await {
                Err(kube::Error::Api(status)) if status.message.contains(DENIED_BY_VALIDATOR) => {
                    Ok(())
                }
                other => Err(format!("a dry run: {other:?}")),
            }
        },
    )
    .await;
}
