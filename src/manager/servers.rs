//! The servers every replica runs beside the controller: the webhooks (unless disabled),
//! the probes and the metrics, with what the webhooks' certificate needs (the API server's
//! trust, the certificate Secrets followed, the self-signed certificate's keeper); started
//! together, and stopped in order (the webhooks drain first).

use std::sync::Arc;

use kube::Client;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use super::metrics::auth::{Gate, ReviewCounter, Ttls};
use super::metrics::reviews::ApiServerReviews;
use super::metrics::{self, Audience, MetricsArgs};
use super::probes::{self, Check, ProbeArgs, Readiness};
use crate::listener::ServerError;
use crate::tls::profile::cluster::SettingsWatch;
use crate::tls::self_signed::{self, Rotation};
use crate::webhook::{self, server};

/// Flags of `memcached-operator webhooks`, and the listeners of `run`.
#[derive(clap::Args, Clone, Debug)]
pub struct WebhooksArgs {
    #[command(flatten)]
    pub probes: ProbeArgs,

    #[command(flatten)]
    pub metrics: MetricsArgs,

    #[command(flatten)]
    pub server: server::ServerArgs,
}

/// Completes when `stop` turns true (or its sender is gone).
pub(super) async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// The servers every replica runs: webhooks (unless disabled), probes and metrics.
pub(super) struct Servers {
    readiness: Arc<Readiness>,
    stop_webhooks: watch::Sender<bool>,
    webhooks: Option<tokio::task::JoinHandle<Result<(), ServerError>>>,
    stop_probes: watch::Sender<bool>,
    probes: tokio::task::JoinHandle<Result<(), ServerError>>,
    metrics: tokio::task::JoinHandle<Result<(), ServerError>>,
    /// The self-signed certificate's keeper (`--self-signed-cert-secret`), stopped when the
    /// servers are dropped.
    _rotation: Option<self_signed::Keeper>,
}

/// Who may read the metrics: anyone with `--metrics-secure=false`, else callers the API
/// server `client` talks to authenticates and authorizes.
fn metrics_audience(
    args: &WebhooksArgs,
    client: Option<Client>,
    registry: &mut Registry,
) -> Audience<ApiServerReviews> {
    match client {
        Some(client) if args.metrics.metrics_secure => {
            let namespace = std::env::var(crate::operator::POD_NAMESPACE_ENV).ok();
            Audience::Admitted {
                gate: Arc::new(Gate::new(
                    ApiServerReviews::new(client),
                    Ttls::default(),
                    ReviewCounter::register(registry),
                )),
                names: metrics::cert::names(namespace.as_deref()),
                cert_poll_interval: args.server.cert_poll_interval,
            }
        }
        _ => Audience::Anyone,
    }
}

impl Servers {
    /// Starts the probe and metrics servers, and the webhook server when `webhooks` is true.
    /// Metrics are reviewed through `client` (which secure metrics need).
    pub(super) fn start(
        args: &WebhooksArgs,
        webhooks: bool,
        mut registry: Registry,
        client: Option<Client>,
        tls_settings: SettingsWatch,
    ) -> Servers {
        let webhook_metrics = webhook::metrics::Metrics::register(&mut registry);
        let namespace = std::env::var(crate::operator::POD_NAMESPACE_ENV)
            .ok()
            .filter(|namespace| !namespace.is_empty());
        // The self-signed Secret, when this replica keeps one, is followed like the others.
        let mut cert_secrets = args.server.cert_secrets.clone();
        let self_signed = args.server.self_signed_cert_secret.as_ref();
        if let Some(name) = self_signed
            && !cert_secrets.contains(name)
        {
            cert_secrets.push(name.clone());
        }
        let trust = match &client {
            Some(client) if webhooks && args.server.wait_for_ca_trust => {
                let secrets = match &namespace {
                    Some(namespace) if !cert_secrets.is_empty() => {
                        Some(crate::tls::cert_secret::follow(
                            client.clone(),
                            namespace,
                            cert_secrets,
                            crate::tls::certs::crypto_provider(),
                        ))
                    }
                    _ => None,
                };
                Some((
                    crate::tls::trust_watch::follow(client.clone(), webhook::names()),
                    secrets,
                ))
            }
            _ => None,
        };
        let rotation = match (&client, self_signed, &namespace) {
            (Some(client), Some(secret), Some(namespace)) if webhooks => {
                let trust = match &trust {
                    Some((trust, _)) => trust.clone(),
                    None => crate::tls::trust_watch::follow(client.clone(), webhook::names()),
                };
                let rotation = Rotation {
                    namespace: namespace.clone(),
                    secret: secret.clone(),
                    settings: crate::tls::self_signed::Settings {
                        names: self_signed::service_names(&args.server.webhook_service, namespace),
                        ca_validity: args.server.self_signed_ca_validity,
                        cert_validity: args.server.self_signed_cert_validity,
                    },
                    webhooks: webhook::names(),
                };
                Some(self_signed::start(client.clone(), rotation, trust))
            }
            (_, Some(_), _) if !webhooks => {
                tracing::warn!("--self-signed-cert-secret is ignored: the webhooks are disabled");
                None
            }
            _ => None,
        };
        let audience = metrics_audience(args, client, &mut registry);
        let webhook_readiness = Arc::new(server::Readiness::default());
        let mut checks: Vec<Check> = Vec::new();
        if webhooks {
            let ready = webhook_readiness.clone();
            checks.push(Box::new(move || ready.check()));
        }
        let readiness = Arc::new(Readiness::new(checks));
        let (stop_probes, probes_stopped) = watch::channel(false);
        let probe_args = args.probes.clone();
        let probes = tokio::spawn({
            let readiness = readiness.clone();
            let stop = stopped(probes_stopped.clone());
            async move { probes::serve(&probe_args, readiness, stop).await }
        });
        let metrics_args = args.metrics.clone();
        let bind_address = args.probes.bind_address;
        let metrics_tls = tls_settings.clone();
        let metrics = tokio::spawn(async move {
            metrics::serve(
                &metrics_args,
                bind_address,
                Arc::new(registry),
                audience,
                metrics_tls,
                stopped(probes_stopped),
            )
            .await
        });
        let (stop_webhooks, webhooks_stopped) = watch::channel(false);
        let webhooks = webhooks.then(|| {
            tokio::spawn(server::serve(
                args.server.clone(),
                args.probes.bind_address,
                webhook_metrics,
                webhook_readiness,
                tls_settings,
                trust,
                stopped(webhooks_stopped),
            ))
        });
        if webhooks.is_none() {
            tracing::info!("webhooks are disabled");
        }
        readiness.set_serving(true);
        Servers {
            readiness,
            stop_webhooks,
            webhooks,
            stop_probes,
            probes,
            metrics,
            _rotation: rotation,
        }
    }

    /// Completes when a server stops on its own (which is a failure), or never.
    pub(super) async fn failed(&mut self) -> Result<(), ServerError> {
        let webhooks = async {
            match &mut self.webhooks {
                Some(task) => joined("webhooks", task.await),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = webhooks => result,
            result = &mut self.probes => joined("probes", result),
            result = &mut self.metrics => joined("metrics", result),
        }
    }

    /// Stops reporting ready and tells the webhook server to shut down (it drains in the
    /// background); [`Servers::stop`] waits for it.
    pub(super) fn begin_stop(&self) {
        self.readiness.set_serving(false);
        let _ = self.stop_webhooks.send(true);
    }

    /// Stops reporting ready, drains the webhooks, then stops the probes and metrics.
    pub(super) async fn stop(
        self,
        failure: Option<Result<(), ServerError>>,
    ) -> Result<(), ServerError> {
        self.readiness.set_serving(false);
        let _ = self.stop_webhooks.send(true);
        let webhooks = match self.webhooks {
            Some(task) if failure.is_none() => joined("webhooks", task.await),
            _ => Ok(()),
        };
        let _ = self.stop_probes.send(true);
        let (probes, metrics) = if failure.is_none() {
            (
                joined("probes", self.probes.await),
                joined("metrics", self.metrics.await),
            )
        } else {
            self.probes.abort();
            self.metrics.abort();
            (Ok(()), Ok(()))
        };
        failure
            .unwrap_or(Ok(()))
            .and(webhooks)
            .and(probes)
            .and(metrics)
    }
}

/// A server task's outcome, a panic named as that server's failure.
fn joined(
    server: &'static str,
    result: Result<Result<(), ServerError>, tokio::task::JoinError>,
) -> Result<(), ServerError> {
    result.unwrap_or_else(|join| {
        Err(ServerError::Serve {
            server,
            source: std::io::Error::other(join.to_string()),
        })
    })
}
