//! Keeps the webhooks' serving certificate where neither OLM nor cert-manager provides one
//! (`--self-signed-cert-secret`, the chart's `certificates.source: operator`): a self-signed
//! CA and a certificate for the webhook Service in one Secret of the operator's namespace,
//! issued when missing and renewed when two thirds of their validity have passed (`issue`),
//! and the CA written into the caBundle of this operator's webhook configurations and CRD
//! (`inject`), as cert-manager's cainjector would.
//!
//! Every replica runs this. Each write of the Secret names the version it read, so two
//! replicas never both issue: the one refused reads the Secret again and finds nothing to do.
//! The bundle is derived from the Secret alone, so every replica writes the same one. The
//! replica's certificate reloader follows the same Secret (`cert_secret`) and serves a new
//! pair once the bundles trust it (`trust_watch`); the kubelet's copy of the files comes later.
//!
//! A look (one read of the Secret and of the three objects, and a write only where something
//! differs) happens at start, when the Secret changes, when a bundle changes (a `helm upgrade`
//! or someone else rewriting it), and at the next renewal or expiry; nothing in between.

pub mod inject;
pub mod issue;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::{info, warn};

use super::trust_watch::TrustWatch;
pub use issue::Settings;

/// The longest wait between looks after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The longest sleep before a look, whatever the next renewal.
const MAX_SLEEP: Duration = Duration::from_secs(86_400);
/// How many times a look reads the Secret again after another replica wrote it first.
const CONFLICT_RETRIES: usize = 3;

/// Why a look failed.
#[derive(Debug, thiserror::Error)]
enum LookError {
    #[error("cannot read or write the Secret {namespace}/{name}: {source}")]
    Secret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the Secret {namespace}/{name} kept changing under this replica's writes")]
    Contended { namespace: String, name: String },
    #[error(transparent)]
    Issue(#[from] issue::IssueError),
    #[error(transparent)]
    Inject(#[from] inject::InjectError),
}

/// The Secret kept, and what to issue into it.
#[derive(Clone, Debug)]
pub struct Rotation {
    /// The Secret's namespace (the operator's).
    pub namespace: String,
    /// The Secret's name.
    pub secret: String,
    /// What to issue.
    pub settings: Settings,
    /// The webhooks whose caBundle is written (entry names).
    pub webhooks: Vec<&'static str>,
}

/// The DNS names of the webhook Service `service` in `namespace`.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// The running keeper of the Secret and the bundles; it stops when dropped.
#[derive(Debug)]
pub struct Keeper(tokio::task::JoinHandle<()>);

impl Drop for Keeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts keeping the Secret and the bundles, woken by `trust` changes too.
pub fn start(client: Client, rotation: Rotation, trust: TrustWatch) -> Keeper {
    info!(
        namespace = %rotation.namespace,
        secret = %rotation.secret,
        ca_validity = %humantime::format_duration(rotation.settings.ca_validity),
        cert_validity = %humantime::format_duration(rotation.settings.cert_validity),
        "keeping the webhooks' self-signed certificate"
    );
    Keeper(tokio::spawn(run(client, rotation, trust)))
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

async fn run(client: Client, rotation: Rotation, mut trust: TrustWatch) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &rotation.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", rotation.secret));
    // Changes of the Secret only: a failing watch backs off inside and wakes nothing.
    let mut changes = watcher::watcher(secrets.clone(), config)
        .default_backoff()
        .touched_objects()
        .filter_map(|event| async move { event.ok().map(|_| ()) })
        .boxed();
    let mut backoff = Duration::from_secs(1);
    let mut trust_open = true;
    loop {
        let wait = match look(&client, &secrets, &rotation).await {
            Ok(next) => {
                backoff = Duration::from_secs(1);
                let seconds = u64::try_from(next - now()).unwrap_or(0);
                Duration::from_secs(seconds).min(MAX_SLEEP)
            }
            Err(error) => {
                warn!(
                    %error, retry_s = backoff.as_secs(),
                    "cannot keep the webhooks' self-signed certificate"
                );
                let wait = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                wait
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            Some(()) = changes.next() => {}
            changed = trust.changed(), if trust_open => {
                trust_open = changed.is_ok();
            }
        }
    }
}

/// Reads the Secret, writes what it needs, then the bundles; returns when to look again.
async fn look(
    client: &Client,
    secrets: &Api<Secret>,
    rotation: &Rotation,
) -> Result<i64, LookError> {
    let secret_error = |source| LookError::Secret {
        namespace: rotation.namespace.clone(),
        name: rotation.secret.clone(),
        source,
    };
    for _ in 0..CONFLICT_RETRIES {
        let current = secrets
            .get_opt(&rotation.secret)
            .await
            .map_err(secret_error)?;
        let data = current.as_ref().and_then(|secret| secret.data.as_ref());
        let plan = issue::plan(data, &rotation.settings, now())?;
        let bundle = match plan.data {
            None => data
                .and_then(|data| data.get(issue::CA_CERT))
                .map(|bundle| bundle.0.clone())
                .unwrap_or_default(),
            Some(new) => {
                let bundle = new
                    .get(issue::CA_CERT)
                    .map(|bundle| bundle.0.clone())
                    .unwrap_or_default();
                match write(secrets, rotation, current, new).await {
                    Ok(()) => info!(
                        secret = %rotation.secret,
                        reasons = ?plan.reasons,
                        "wrote the webhooks' self-signed certificate"
                    ),
                    // Another replica wrote first: read what it wrote.
                    Err(kube::Error::Api(status)) if status.code == 409 => continue,
                    Err(source) => return Err(secret_error(source)),
                }
                bundle
            }
        };
        let written = inject::inject(client, &rotation.webhooks, &bundle).await?;
        if !written.is_empty() {
            info!(?written, "wrote the self-signed CA bundle");
        }
        return Ok(plan.next);
    }
    Err(LookError::Contended {
        namespace: rotation.namespace.clone(),
        name: rotation.secret.clone(),
    })
}

/// Creates the Secret, or replaces the version read (`current`).
async fn write(
    secrets: &Api<Secret>,
    rotation: &Rotation,
    current: Option<Secret>,
    data: BTreeMap<String, k8s_openapi::ByteString>,
) -> Result<(), kube::Error> {
    match current {
        Some(mut secret) => {
            secret.data = Some(data);
            secrets
                .replace(&rotation.secret, &PostParams::default(), &secret)
                .await?;
        }
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(rotation.secret.clone()),
                    namespace: Some(rotation.namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/managed-by".to_string(),
                        crate::operator::NAME.to_string(),
                    )])),
                    ..ObjectMeta::default()
                },
                type_: Some("kubernetes.io/tls".to_string()),
                data: Some(data),
                ..Secret::default()
            };
            secrets.create(&PostParams::default(), &secret).await?;
        }
    }
    Ok(())
}
