//! Owns the operator process's lifetime, as controller-runtime's Manager does: the probe and
//! metrics servers (`probes`, `metrics`) and the webhook server on every replica, started and
//! stopped together (`servers`), the cluster's TLS profile they follow (`tls::profile`), and the
//! controller on the one replica that holds the leader Lease (`leader`).
//!
//! Losing the lease stops reconciling at once; SIGTERM stops the controller first and only
//! then releases the lease, so two replicas never reconcile at the same time. The webhook
//! server keeps serving throughout, because the API server calls every replica; it drains its
//! requests after the controller stopped, and the probes stop last. Every module registers its
//! own metrics in the one registry the metrics server encodes.

pub mod leader;
pub mod metrics;
pub mod probes;
pub mod proxy;
pub mod rate;
mod servers;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clap::ArgAction;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use thiserror::Error;
use tokio::sync::watch;
use tracing::info;

use crate::controller::{self, context::Context};
use crate::listener::ServerError;
use crate::tls::profile::cluster;
use leader::{Elector, Timing};
use rate::RateLayer;
pub use servers::WebhooksArgs;
use servers::{Servers, stopped};

/// The prefix of every metric name.
pub const METRICS_PREFIX: &str = "memcached_operator";

/// The Lease the replicas compete for.
pub const DEFAULT_LEASE_NAME: &str = "memcached-operator-leader";

/// Flags of `memcached-operator run`.
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub serving: WebhooksArgs,

    /// Serve the admission and conversion webhooks; with `--webhooks=false` only the
    /// controller, probes and metrics run, and the controller still defaults and validates.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub webhooks: bool,

    /// Elect a leader among replicas, so that exactly one reconciles.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub leader_elect: bool,

    /// Namespace of the leader Lease: the operator's own.
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// Name of the leader Lease.
    #[arg(long, default_value = DEFAULT_LEASE_NAME)]
    pub lease_name: String,

    /// How long other replicas wait before taking over an unrenewed lease.
    #[arg(long, default_value = "15s", value_parser = crate::flag_bounds::lease_duration)]
    pub lease_duration: Duration,

    /// How long the leader keeps trying to renew before it stops reconciling.
    #[arg(long, default_value = "10s", value_parser = crate::flag_bounds::duration)]
    pub renew_deadline: Duration,

    /// How often to try to acquire or renew the lease.
    #[arg(long, default_value = "2s", value_parser = crate::flag_bounds::duration)]
    pub retry_period: Duration,

    /// Time reconciliations in flight get to finish after SIGTERM or SIGINT before they are
    /// abandoned; the webhooks then get `--shutdown-timeout` for their requests.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub reconcile_shutdown_timeout: Duration,

    /// Memcacheds reconciled at once (0: no bound). A reconcile that finds nothing to change
    /// reads only caches; one that writes waits for its turn under `--max-requests-in-flight`.
    #[arg(long, default_value_t = 16)]
    pub max_concurrent_reconciles: u16,

    /// API requests the controller has in flight at once, Events included (0: no bound); the
    /// others wait their turn, in order. A watch holds its place only until the API server
    /// starts answering it. Leader election, the webhooks and the metrics use another client.
    /// Fairness between the API server's clients is its API Priority and Fairness
    /// (docs/operating.md).
    #[arg(long, default_value_t = 8)]
    pub max_requests_in_flight: u16,

    /// API requests a second the controller sends on average (client-go's QPS: a token
    /// bucket; 0, the default: no bound, as controller-runtime's clients), watches and Events
    /// included. Leader election, the webhooks and the metrics use another client.
    #[arg(long, default_value_t = DEFAULT_KUBE_API_QPS, value_parser = crate::flag_bounds::rate)]
    pub kube_api_qps: f64,

    /// API requests the controller may send at once beyond `--kube-api-qps` after a quiet
    /// while (client-go's burst: the bucket's size).
    #[arg(long, default_value_t = DEFAULT_KUBE_API_BURST)]
    pub kube_api_burst: u32,
}

/// The controller's requests a second by default: no bound, as controller-runtime's clients
/// since it relies on API Priority and Fairness instead. Measured at 1,000 objects
/// (docs/performance.md), a bound of 100 a second spread the first pass's 5,000 requests over
/// at least 50 s and did not leave `kubectl create` beside it faster; client-go's own default,
/// 5 a second, would take 1,000 s for them.
pub const DEFAULT_KUBE_API_QPS: f64 = 0.0;
/// The controller's burst of requests by default (client-go's default burst is 10); used once
/// `--kube-api-qps` sets a rate.
pub const DEFAULT_KUBE_API_BURST: u32 = 100;

/// Why the operator could not run.
#[derive(Debug, Error)]
pub enum RunError {
    /// No Kubernetes client could be configured.
    #[error("cannot configure a Kubernetes client (in-cluster or KUBECONFIG): {0}")]
    Client(#[source] kube::Error),
    /// The environment names a proxy the client cannot use.
    #[error("cannot configure a Kubernetes client: {0}")]
    Proxy(#[from] proxy::ProxyError),
    /// Secure metrics need a client to review callers, and none could be configured.
    #[error(
        "--metrics-secure needs a Kubernetes client (in-cluster or KUBECONFIG) to review \
         metrics callers; pass --metrics-secure=false to serve metrics over plain HTTP"
    )]
    MetricsClient(#[source] kube::Error),
    /// Leader election has no namespace to put its Lease in.
    #[error(
        "leader election needs the operator's namespace: set POD_NAMESPACE or --lease-namespace, \
         or pass --leader-elect=false"
    )]
    NoLeaseNamespace,
    /// The self-signed certificate has no namespace to keep its Secret in.
    #[error(
        "--self-signed-cert-secret needs the operator's namespace, which holds the Secret and \
         the webhook Service: set POD_NAMESPACE"
    )]
    NoCertNamespace,
    /// The self-signed certificate needs a Kubernetes client, and none could be configured.
    #[error(
        "--self-signed-cert-secret needs a Kubernetes client (in-cluster or KUBECONFIG) to keep \
         its Secret and the CA bundles: {0}"
    )]
    CertClient(#[source] kube::Error),
    /// The leader election's timing cannot work.
    #[error(transparent)]
    BadTiming(#[from] leader::TimingError),
    /// The webhook, probe or metrics server failed.
    #[error(transparent)]
    Server(#[from] ServerError),
}

/// Refuses `--self-signed-cert-secret` without the operator's namespace.
fn check_self_signed(args: &WebhooksArgs) -> Result<(), RunError> {
    let namespace = std::env::var(crate::operator::POD_NAMESPACE_ENV).unwrap_or_default();
    if args.server.self_signed_cert_secret.is_some() && namespace.is_empty() {
        return Err(RunError::NoCertNamespace);
    }
    Ok(())
}

/// Serves the webhooks, probes and metrics until `shutdown` completes, without a controller:
/// `memcached-operator webhooks`.
pub async fn serve_webhooks(
    args: WebhooksArgs,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunError> {
    check_self_signed(&args)?;
    let client = if args.server.self_signed_cert_secret.is_some() {
        let config = api_config(RunError::CertClient).await?;
        Some(Client::try_from(config).map_err(RunError::CertClient)?)
    } else if args.metrics.metrics_secure {
        let config = api_config(RunError::MetricsClient).await?;
        Some(Client::try_from(config).map_err(RunError::MetricsClient)?)
    } else {
        None
    };
    let tls_settings = cluster::follow(client.clone(), tls_suites()).await;
    let mut servers = Servers::start(
        &args,
        true,
        Registry::with_prefix(METRICS_PREFIX),
        client,
        tls_settings,
    );
    let failure = tokio::select! {
        () = shutdown => None,
        failed = servers.failed() => Some(failed),
    };
    servers.stop(failure).await?;
    info!("stopped");
    Ok(())
}

/// Runs the webhook server and, while leading, the controller, until `shutdown` completes.
pub async fn run(args: RunArgs, shutdown: impl Future<Output = ()> + Send) -> Result<(), RunError> {
    let timing = Timing {
        lease_duration: args.lease_duration,
        renew_deadline: args.renew_deadline,
        retry_period: args.retry_period,
    };
    if args.leader_elect {
        timing.check()?;
    }
    check_self_signed(&args.serving)?;
    let lease_namespace = match (&args.lease_namespace, args.leader_elect) {
        (Some(namespace), _) => Some(namespace.clone()),
        (None, true) => return Err(RunError::NoLeaseNamespace),
        (None, false) => None,
    };
    let config = api_config(RunError::Client).await?;
    let client = Client::try_from(config.clone()).map_err(RunError::Client)?;
    let rate =
        (args.kube_api_qps > 0.0).then(|| RateLayer::new(args.kube_api_qps, args.kube_api_burst));
    let controller_client =
        bounded_client(config, args.max_requests_in_flight, rate).map_err(RunError::Client)?;
    let mut registry = Registry::with_prefix(METRICS_PREFIX);
    let controller_metrics = controller::metrics::Metrics::register(&mut registry);
    let platform = controller::discover(&client).await;
    info!(
        ?platform,
        webhooks = args.webhooks,
        leader_elect = args.leader_elect,
        "starting"
    );
    let mut context = Context::new(
        controller_client,
        args.serving.server.defaults(),
        platform,
        controller_metrics,
    );
    context.concurrency = args.max_concurrent_reconciles;
    let context = Arc::new(context);

    let tls_settings = cluster::follow(Some(client.clone()), tls_suites()).await;
    let mut servers = Servers::start(
        &args.serving,
        args.webhooks,
        registry,
        Some(client.clone()),
        tls_settings,
    );
    let (stop_controller, controller_stopped) = watch::channel(false);
    let leading = match lease_namespace {
        None => tokio::spawn(reconcile_unelected(
            context,
            controller_stopped,
            args.reconcile_shutdown_timeout,
        )),
        Some(namespace) => {
            let elector = Elector::new(
                Api::<Lease>::namespaced(client, &namespace),
                &args.lease_name,
                &identity(),
                timing,
            );
            tokio::spawn(reconcile_while_leading(
                context,
                elector,
                controller_stopped,
                args.reconcile_shutdown_timeout,
            ))
        }
    };

    let failure = tokio::select! {
        () = shutdown => None,
        failed = servers.failed() => Some(failed),
    };
    // The webhooks begin draining at once, while the controller stops.
    servers.begin_stop();
    let _ = stop_controller.send(true);
    let _ = leading.await;
    servers.stop(failure).await?;
    info!("stopped");
    Ok(())
}

/// How to reach the API server, configured from the cluster or `KUBECONFIG` as kube infers it,
/// through the proxy the environment names where client-go would use it ([`proxy`]), naming
/// the operator in the User-Agent (kube sends none). `failed` says which client could not be
/// configured.
async fn api_config(failed: fn(kube::Error) -> RunError) -> Result<kube::Config, RunError> {
    let mut config = kube::Config::infer()
        .await
        .map_err(|error| failed(kube::Error::InferConfig(error)))?;
    match proxy::route(&mut config, &proxy::ProxyVariables::from_env())? {
        proxy::Route::Proxy(through, named_by) => info!(
            proxy = %proxy::shown(&through),
            named_by,
            "the API server is reached through a proxy"
        ),
        proxy::Route::Direct(why) => info!(why, "the API server is reached directly"),
    }
    if let Ok(agent) = http::HeaderValue::from_str(&crate::operator::user_agent()) {
        config.headers.push((http::header::USER_AGENT, agent));
    }
    Ok(config)
}

/// The controller's client: requests spaced by `rate` (client-go's QPS and burst, [`rate`]),
/// then at most `in_flight` at once (0: no bound), the others waiting their turn in order
/// (tower's `ConcurrencyLimitLayer`). A request holds its place until the API server's
/// response begins: a watch's, once it is established, not while its events stream. The client
/// of leader election, the webhooks and the metrics is another, so the controller's queue never
/// delays a lease renewal.
fn bounded_client(
    config: kube::Config,
    in_flight: u16,
    rate: Option<RateLayer>,
) -> Result<Client, kube::Error> {
    let in_flight =
        (in_flight > 0).then(|| tower::limit::ConcurrencyLimitLayer::new(usize::from(in_flight)));
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::util::option_layer(in_flight))
        .with_layer(&tower::util::option_layer(rate))
        .build())
}

/// The cipher suites the TLS profile is settled against: the process's crypto provider's.
fn tls_suites() -> Vec<rustls::SupportedCipherSuite> {
    crate::tls::certs::crypto_provider().cipher_suites.clone()
}

async fn reconcile_unelected(context: Arc<Context>, stop: watch::Receiver<bool>, grace: Duration) {
    context.metrics.leader.set(1);
    controller::run_controller(context.clone(), stopped(stop), grace).await;
    context.metrics.leader.set(0);
}

async fn reconcile_while_leading(
    context: Arc<Context>,
    elector: Elector,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) {
    let (leading_sender, mut leading) = watch::channel(false);
    let (stop_election, election_stopped) = watch::channel(false);
    let election = tokio::spawn(elector.run(leading_sender, election_stopped));
    loop {
        tokio::select! {
            became = leading.wait_for(|leading| *leading) => if became.is_err() { break },
            _ = stop.wait_for(|stop| *stop) => break,
        }
        context.metrics.leader.set(1);
        let (stop_reconciling, reconciling_stopped) = watch::channel(false);
        let mut reconciling = tokio::spawn(controller::run_controller(
            context.clone(),
            stopped(reconciling_stopped),
            grace,
        ));
        let shutting_down = tokio::select! {
            _ = leading.wait_for(|leading| !*leading) => false,
            _ = stop.wait_for(|stop| *stop) => true,
            _ = &mut reconciling => false,
        };
        if shutting_down {
            // Let reconciliations in flight finish, then give up the lease.
            let _ = stop_reconciling.send(true);
            let _ = reconciling.await;
        } else {
            // The lease is gone: another replica may already reconcile. Stop at once.
            reconciling.abort();
            let _ = reconciling.await;
            info!("stopped reconciling: no longer the leader");
        }
        context.metrics.leader.set(0);
        if shutting_down {
            break;
        }
    }
    let _ = stop_election.send(true);
    let _ = election.await;
}

/// A name for this replica in the Lease: the pod's name and a per-process suffix.
fn identity() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| crate::operator::NAME.to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{host}_{}_{nanos:x}", std::process::id())
}
