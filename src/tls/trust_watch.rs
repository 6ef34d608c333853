//! Keeps [`TrustedCas`] current: watches the Mutating- and ValidatingWebhookConfigurations and
//! this operator's CRD, and publishes the trust points of the webhooks named after every
//! change.
//!
//! Read-only: `get`, `list` and `watch` on the two configuration kinds and on CRDs (the
//! ClusterRole grants them). Without a Kubernetes client, or while a watch is refused, the
//! trust stays unknown and the certificate reloader switches to new files at once, as it does
//! without this watch.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tracing::{info, warn};

use super::trust::{self, TrustedCas};
use crate::api::CRD_NAME;

/// What the reloader reads: the trust in force, updated after every change.
pub type TrustWatch = watch::Receiver<Arc<TrustedCas>>;

/// Starts following, through `client`, the API server's trust in the webhooks named `names`
/// (their `generateName`s, as OLM and `config/` name the entries).
pub fn follow(client: Client, names: Vec<&'static str>) -> TrustWatch {
    let (sender, receiver) = watch::channel(Arc::new(TrustedCas::default()));
    tokio::spawn(run(client, names, sender));
    receiver
}

/// "Something changed", or which kind could not be watched and why.
type Changes = BoxStream<'static, Result<(), (&'static str, watcher::Error)>>;

/// A watch stream that only says "something changed" (or why it could not say).
fn changes<K>(api: Api<K>, config: watcher::Config) -> (Store<K>, Changes)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let kind = std::any::type_name::<K>()
        .rsplit("::")
        .next()
        .unwrap_or("object");
    let events = reflector::reflector(writer, watcher::watcher(api, config))
        .default_backoff()
        .map(move |event| event.map(|_| ()).map_err(|error| (kind, error)))
        .boxed();
    (reader, events)
}

async fn run(client: Client, names: Vec<&'static str>, sender: watch::Sender<Arc<TrustedCas>>) {
    let (mutating, mutating_events) = changes(
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
        watcher::Config::default(),
    );
    let (validating, validating_events) = changes(
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        watcher::Config::default(),
    );
    let (crds, crd_events) = changes(
        Api::<CustomResourceDefinition>::all(client),
        watcher::Config::default().fields(&format!("metadata.name={CRD_NAME}")),
    );
    let mut events = stream::select_all([mutating_events, validating_events, crd_events]);
    let mut refused = false;
    while let Some(event) = events.next().await {
        if let Err((kind, error)) = event {
            if !refused {
                warn!(
                    %error, kind,
                    "cannot watch where the API server reads its CA bundles; a renewed \
                     certificate is served as soon as it is read"
                );
                refused = true;
            }
            continue;
        }
        let mut points = Vec::new();
        for config in mutating.state() {
            points.extend(trust::mutating_points(&config, &names));
        }
        for config in validating.state() {
            points.extend(trust::validating_points(&config, &names));
        }
        for crd in crds.state() {
            points.extend(trust::conversion_point(&crd));
        }
        points.sort_by(|a, b| a.what.cmp(&b.what));
        let changed = {
            let current = sender.borrow();
            current.points.len() != points.len()
                || current.points.iter().zip(&points).any(|(a, b)| {
                    a.what != b.what || a.roots != b.roots || a.server_name != b.server_name
                })
        };
        if changed {
            info!(points = points.len(), "the API server's CA bundles changed");
            sender.send_replace(Arc::new(TrustedCas { points }));
        }
    }
}
