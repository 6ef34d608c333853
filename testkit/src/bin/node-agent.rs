//! Runs the test kit's node agent: one Node of the local control plane, playing kubelet and
//! kube-proxy without a container engine, until SIGINT or SIGTERM; then stops every pod's
//! processes and removes their files.
//!
//! `node-agent --kubeconfig .local/kubeconfig --node-name local --state-dir .local/node
//!  --pod-ip-range 127.0.100.0/24 --images images.json --images-dir more-images/`

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use testkit::node_agent::image_table::{ImageTable, LocalImages};
use testkit::node_agent::pod_ips::PodIps;
use testkit::node_agent::{AgentConfig, NodeAgent};

/// Plays kubelet and kube-proxy for one Node, running pods as local processes.
#[derive(Debug, Parser)]
struct Args {
    /// The kubeconfig to reach the API server with.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The Node's name.
    #[arg(long, default_value = "local")]
    node_name: String,
    /// Where pods' volumes and logs live.
    #[arg(long)]
    state_dir: PathBuf,
    /// Loopback range pod IPs come from.
    #[arg(long, default_value = "127.0.100.0/24")]
    pod_ip_range: String,
    /// The node's address.
    #[arg(long, default_value = "127.0.0.1")]
    host_ip: Ipv4Addr,
    /// A JSON image table; without it, the repository's own images (see the flags below).
    #[arg(long)]
    images: Option<PathBuf>,
    /// The operator binary the operator image maps to.
    #[arg(long, default_value = "target/debug/memcached-operator")]
    operator_binary: PathBuf,
    /// The operator image reference [default: the release's, from the packaging tool].
    #[arg(long)]
    operator_image: Option<String>,
    /// memcached image references (repeatable) [default: the operator's default image].
    #[arg(long = "memcached-image")]
    memcached_images: Vec<String>,
    /// The bundle image reference [default: the release's, from the packaging tool].
    #[arg(long)]
    bundle_image: Option<String>,
    /// A directory of more JSON image tables, read whenever a pod names an image the table
    /// above does not list (a test adds a new release's images while the agent runs).
    #[arg(long)]
    images_dir: Option<PathBuf>,
    /// OLM's util image reference (catalog-operator's --util-image).
    #[arg(long, default_value = "quay.io/operator-framework/olm:local")]
    util_image: String,
    /// The opm image reference (catalog-operator's --opmImage) [default: the pinned opm's].
    #[arg(long)]
    opm_image: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", args.kubeconfig.display()))?;
    let apiserver = apiserver_address(&config.cluster_url)?;
    let client = Client::try_from(config).context("making a kube client")?;
    let images = match &args.images {
        Some(path) => ImageTable::from_file(path)?,
        None => {
            let root = std::env::current_dir().context("reading the working directory")?;
            ImageTable::local(
                &root,
                &root.join(&args.operator_binary),
                &local_images(&args),
            )
        }
    };
    let images = match &args.images_dir {
        Some(dir) => images.with_more_in(dir),
        None => images,
    };
    let agent = NodeAgent::start(
        client,
        AgentConfig {
            node_name: args.node_name,
            state_dir: args.state_dir,
            pod_ips: PodIps::parse(&args.pod_ip_range)?,
            host_ip: args.host_ip,
            images,
            apiserver,
        },
    )
    .await?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("stopping every pod's processes");
    agent.stop().await;
    Ok(())
}

/// The image references of the repository's own images: from the flags, else the release's
/// (as the packaging tool writes them into the bundle) and the operator's default memcached.
fn local_images(args: &Args) -> LocalImages {
    let version = memcached_packager::release::VERSION;
    let memcached = if args.memcached_images.is_empty() {
        vec![memcached_operator::operator::DEFAULT_MEMCACHED_IMAGE.to_string()]
    } else {
        args.memcached_images.clone()
    };
    LocalImages {
        operator: args
            .operator_image
            .clone()
            .unwrap_or_else(|| memcached_packager::release::operator_image(version)),
        memcached,
        bundle: args
            .bundle_image
            .clone()
            .unwrap_or_else(|| memcached_packager::release::bundle_image(version)),
        util: args.util_image.clone(),
        opm: args
            .opm_image
            .clone()
            .unwrap_or_else(memcached_packager::release::opm_image),
    }
}

/// The API server's address from the kubeconfig's server URL (the `kubernetes` Service's
/// endpoint).
fn apiserver_address(url: &http::Uri) -> anyhow::Result<SocketAddr> {
    let Some(host) = url.host() else {
        bail!("the kubeconfig's server {url} has no host");
    };
    let port = url.port_u16().unwrap_or(443);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}:{port}"))?
        .next()
        .with_context(|| format!("{host}:{port} resolves to no address"))
}
