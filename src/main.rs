//! Runs memcached-operator: parses the command line, sets up logging and the TLS crypto
//! provider once for the whole process, runs the chosen subcommand and maps its outcome to an
//! exit code.
//!
//! Each subcommand's flags live in the module that implements it; this file only wires them.

mod allocator;

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use memcached_operator::sidecar::{install, refresher, relay, supervisor, termination};
use memcached_operator::{manager, telemetry};

/// Exit code of a subcommand that failed.
const EXIT_FAILURE: u8 = 1;
/// Exit code when logging cannot be set up (clap uses 2 for usage errors too).
const EXIT_USAGE: u8 = 2;

/// Runs memcached on Kubernetes, with admission and conversion webhooks, packaged for OLM.
#[derive(Parser, Debug)]
#[command(name = "memcached-operator", version, about)]
struct Cli {
    #[command(flatten)]
    log: telemetry::LogArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs the operator: the webhooks on every replica, the controller on the leader.
    Run(manager::RunArgs),
    /// Serves the admission and conversion webhooks over TLS, with probes and metrics.
    Webhooks(manager::WebhooksArgs),
    /// Runs beside memcached in its pod: brings a renewed certificate into the running server
    /// (`refresh_certs`) without restarting it.
    RefreshCerts(refresher::RefreshArgs),
    /// Runs beside memcached in its pod: lets memcached_exporter read the statistics of a
    /// server that requires authentication, and nothing else.
    RelayStats(relay::RelayArgs),
    /// Runs in memcached's container as its first process: starts memcached, passes signals
    /// on to it, has it reread a changed auth file (SIGHUP) that it accepts, and exits as it
    /// did.
    Supervise(supervisor::SuperviseArgs),
    /// Runs as an init container of memcached's pod: copies this binary where memcached's
    /// container runs it as the supervisor.
    InstallSupervisor(install::InstallArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = telemetry::init_logging(&cli.log) {
        eprintln!("memcached-operator: {error}");
        return ExitCode::from(EXIT_USAGE);
    }
    let served = match cli.command {
        Command::Run(args) => until_signalled(|shutdown| async move {
            manager::run(args, shutdown).await.context("operator")
        }),
        Command::Webhooks(args) => until_signalled(|shutdown| async move {
            manager::serve_webhooks(args, shutdown)
                .await
                .context("webhook server")
        }),
        Command::RefreshCerts(args) => until_signalled(|shutdown| async move {
            refresher::run(args, shutdown)
                .await
                .context("certificate refresher")
        })
        .inspect_err(say_why_stopped),
        Command::RelayStats(args) => until_signalled(|shutdown| async move {
            relay::run(args, shutdown).await.context("stats relay")
        })
        .inspect_err(say_why_stopped),
        Command::Supervise(args) => return supervise(args),
        Command::InstallSupervisor(args) => install::run(&args)
            .map(|_| ())
            .context("supervisor installer"),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = telemetry::describe(error.as_ref()), "exiting");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Puts a sidecar's error into its termination message, where the pod's status shows it.
fn say_why_stopped(error: &anyhow::Error) {
    let message = telemetry::describe(error.as_ref());
    termination::say_why(std::path::Path::new(termination::TERMINATION_LOG), &message);
}

/// Runs memcached under the supervisor, on a runtime of one thread; exits as memcached did.
fn supervise(args: supervisor::SuperviseArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    match runtime.block_on(supervisor::run(args)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            tracing::error!(error = telemetry::describe(&error), "exiting");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Runs `serve` on a multi-threaded runtime until it returns; its argument completes on the
/// first SIGTERM or SIGINT.
fn until_signalled<F, Fut>(serve: F) -> anyhow::Result<()>
where
    F: FnOnce(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    // kube and the webhook server both use rustls with ring: install it once, for everyone.
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        tracing::debug!("a rustls crypto provider was already installed");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let shutdown = shutdown_signal().context("cannot listen for SIGTERM")?;
        serve(Box::pin(shutdown)).await
    })
}

/// Completes on the first SIGTERM or SIGINT.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        let name = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "received a shutdown signal");
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn webhooks_args(cli: Cli) -> manager::WebhooksArgs {
        match cli.command {
            Command::Webhooks(args) => args,
            #[allow(unreachable_patterns)]
            other => panic!("expected the webhooks subcommand, got {other:?}"),
        }
    }

    #[test]
    fn the_refresher_refuses_a_zero_interval_and_port_zero_naming_the_flag() {
        for (flag, name) in [("--interval=0s", "--interval"), ("--port=0", "--port")] {
            let error = Cli::try_parse_from(["memcached-operator", "refresh-certs", flag])
                .expect_err("refused");
            assert!(error.to_string().contains(name), "{flag}: {error}");
        }
        let parsed = Cli::try_parse_from(["memcached-operator", "refresh-certs"]).expect("parses");
        match parsed.command {
            Command::RefreshCerts(args) => {
                assert_eq!(args.port, 11211);
                assert_eq!(args.interval, std::time::Duration::from_secs(5));
                assert_eq!(args.auth_file, None);
            }
            other => panic!("expected refresh-certs, got {other:?}"),
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_operator_binary_has_only_the_subcommands_that_run_in_a_cluster() {
        let command = Cli::command();
        let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
        // The others run in memcached's pods: beside its servers (refresh-certs,
        // relay-stats), as their first process (supervise) or before them
        // (install-supervisor).
        assert_eq!(
            names,
            [
                "run",
                "webhooks",
                "refresh-certs",
                "relay-stats",
                "supervise",
                "install-supervisor"
            ]
        );
        assert!(command.get_version().is_some(), "--version is offered");
    }

    #[test]
    fn the_delay_fault_exists_in_debug_builds_only() {
        let parsed = Cli::try_parse_from([
            "memcached-operator",
            "webhooks",
            "--debug-delay-webhooks",
            "1s",
        ]);
        if cfg!(debug_assertions) {
            assert!(parsed.is_ok(), "{parsed:?}");
        } else {
            let error = parsed.expect_err("release builds have no fault flags");
            assert_eq!(error.kind(), clap::error::ErrorKind::UnknownArgument);
        }
    }

    #[test]
    fn webhooks_defaults_to_controller_runtimes_ports_and_olms_root() {
        let cli = Cli::try_parse_from(["memcached-operator", "webhooks"]).expect("parses");
        let args = webhooks_args(cli);
        assert_eq!(args.server.webhook_port, 9443);
        assert_eq!(args.probes.probe_port, 8081);
        assert_eq!(args.metrics.metrics_port, 8443);
        assert!(args.metrics.metrics_secure, "metrics are secure by default");
        assert_eq!(args.server.cert_root, std::path::PathBuf::from("/"));
        assert!(!args.server.enable_http2);
    }

    #[test]
    fn the_controllers_request_rate_has_defaults_and_can_be_lifted() {
        let run = |extra: &[&str]| {
            let args = ["memcached-operator", "run"].iter().chain(extra);
            match Cli::try_parse_from(args).expect("parses").command {
                Command::Run(args) => (args.kube_api_qps, args.kube_api_burst),
                other => panic!("expected run, got {other:?}"),
            }
        };
        assert_eq!(
            run(&[]),
            (
                manager::DEFAULT_KUBE_API_QPS,
                manager::DEFAULT_KUBE_API_BURST
            )
        );
        assert_eq!(
            run(&["--kube-api-qps", "0", "--kube-api-burst", "5"]),
            (0.0, 5)
        );
    }

    #[test]
    fn allowed_issuers_are_parsed_and_a_malformed_list_is_refused_naming_the_flag() {
        let cli = Cli::try_parse_from([
            "memcached-operator",
            "run",
            "--allowed-issuers",
            "ClusterIssuer.cert-manager.io/internal-ca",
        ])
        .expect("parses");
        let Command::Run(args) = cli.command else {
            panic!("expected run");
        };
        let allowed = args.serving.server.defaults().allowed_issuers;
        assert_eq!(
            allowed.to_string(),
            "ClusterIssuer.cert-manager.io/internal-ca"
        );
        let refused = Cli::try_parse_from([
            "memcached-operator",
            "webhooks",
            "--allowed-issuers=ClusterIssuer",
        ])
        .map(|_| ())
        .expect_err("refused")
        .to_string();
        assert!(
            refused.contains("--allowed-issuers") && refused.contains("names no API group"),
            "{refused}"
        );
    }

    #[test]
    fn metrics_secure_false_turns_plain_http_on() {
        let cli = Cli::try_parse_from(["memcached-operator", "webhooks", "--metrics-secure=false"])
            .expect("parses");
        assert!(!webhooks_args(cli).metrics.metrics_secure);
    }

    #[test]
    fn logging_flags_are_accepted_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "memcached-operator",
            "webhooks",
            "--log-format",
            "text",
            "--request-timeout",
            "250ms",
        ])
        .expect("parses");
        assert_eq!(cli.log.log_format, telemetry::LogFormat::Text);
        let args = webhooks_args(cli);
        assert_eq!(
            args.server.request_timeout,
            std::time::Duration::from_millis(250)
        );
    }

    /// A bad duration or size flag is refused at parsing, with the flag's name: a Lease
    /// records whole seconds (900ms would be written as 0, which the other replica reads as
    /// expired), and zero periods, timeouts or body limits would stop the operator working.
    #[test]
    fn bad_duration_and_size_flags_are_refused_naming_the_flag() {
        for (flag, value, says) in [
            ("--lease-duration", "900ms", "whole number of seconds"),
            ("--retry-period", "0s", "shorter than"),
            ("--renew-deadline", "0s", "shorter than"),
            ("--cert-poll-interval", "0s", "shorter than"),
            ("--request-timeout", "0s", "shorter than"),
            ("--max-request-bytes", "0", "smaller than"),
            ("--kube-api-qps", "inf", "not a rate"),
            ("--kube-api-qps", "fast", "not a number"),
        ] {
            let refused = Cli::try_parse_from(["memcached-operator", "run", flag, value])
                .map(|_| ())
                .expect_err(flag)
                .to_string();
            assert!(
                refused.contains(flag) && refused.contains(says),
                "{flag} {value}: {refused}"
            );
        }
        let accepted = Cli::try_parse_from([
            "memcached-operator",
            "run",
            "--lease-duration",
            "2s",
            "--renew-deadline",
            "1s",
            "--retry-period",
            "100ms",
        ]);
        assert!(accepted.is_ok(), "{:?}", accepted.err());
    }
}
