//! Follows the serving certificate's Secret through the API, for the moment between the Secret
//! changing and the kubelet delivering its new files (up to the kubelet's sync period): OLM
//! v0's rotation and upgrade, and cert-manager with cainjector, write the Secret first and the
//! CA bundles right after, so the API server trusts the new CA before the files arrive.
//!
//! Each pair read here goes to the certificate reloader like a pair read from the files: held
//! until a CA bundle of the API server accepts it, then served. The pair is in memory when the
//! bundles change, so the switch takes no API call.
//!
//! Only the Secrets named by `--cert-secret`, in the operator's namespace, watched one by one
//! with a `metadata.name` field selector: the Role grants `get`, `list` and `watch` on exactly
//! those names and nothing else of Secrets. A Secret that is missing, refused or holds no
//! usable pair changes nothing; a refusal is logged once per change of reason.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use rustls::crypto::CryptoProvider;
use tokio::sync::watch;

use super::certs::{CertPaths, SecretPairs, ServingCert, load_pair};

/// Starts following the Secrets `names` in `namespace`.
pub fn follow(
    client: Client,
    namespace: &str,
    names: Vec<String>,
    provider: Arc<CryptoProvider>,
) -> SecretPairs {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(run(client, namespace.to_string(), names, provider, sender));
    receiver
}

/// The pair a Secret holds, named after it.
fn pair(
    namespace: &str,
    secret: &Secret,
    provider: &CryptoProvider,
) -> Result<ServingCert, String> {
    let name = secret.metadata.name.as_deref().unwrap_or_default();
    let paths = CertPaths {
        cert: PathBuf::from(format!("secret {namespace}/{name} tls.crt")),
        key: PathBuf::from(format!("secret {namespace}/{name} tls.key")),
    };
    let data = secret.data.clone().unwrap_or_default();
    let cert = data
        .get("tls.crt")
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    let key = data
        .get("tls.key")
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    load_pair(&paths, cert, key, provider).map_err(|error| error.to_string())
}

async fn run(
    client: Client,
    namespace: String,
    names: Vec<String>,
    provider: Arc<CryptoProvider>,
    sender: watch::Sender<Option<ServingCert>>,
) {
    let api: Api<Secret> = Api::namespaced(client, &namespace);
    let streams = names.iter().map(|name| {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        watcher::watcher(api.clone(), config)
            .default_backoff()
            .boxed()
    });
    let mut events = stream::select_all(streams);
    let mut last_failure: Option<String> = None;
    while let Some(event) = events.next().await {
        let secret = match event {
            Ok(Event::Apply(secret) | Event::InitApply(secret)) => secret,
            Ok(_) => continue,
            Err(error) => {
                let failure = error.to_string();
                if last_failure.as_ref() != Some(&failure) {
                    tracing::warn!(
                        %namespace, error = %failure,
                        "cannot watch the certificate Secrets; new certificates come from the files only"
                    );
                    last_failure = Some(failure);
                }
                continue;
            }
        };
        match pair(&namespace, &secret, &provider) {
            Ok(serving) => {
                let fresh = sender
                    .borrow()
                    .as_ref()
                    .is_none_or(|last| last.key.cert != serving.key.cert);
                if fresh {
                    sender.send_replace(Some(serving));
                }
            }
            Err(failure) => {
                if last_failure.as_ref() != Some(&failure) {
                    tracing::warn!(%failure, "a certificate Secret holds no usable pair");
                    last_failure = Some(failure);
                }
            }
        }
    }
}
