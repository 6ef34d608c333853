//! Sets up logging, and nothing else.
//!
//! Logs go to stdout through `tracing`: JSON when stdout is not a terminal (in a cluster),
//! human-readable text on a terminal. The filter comes from `--log-level`, else `RUST_LOG`,
//! else `info`. Metrics are registered by the modules that record them, and served by the
//! manager.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How logs are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// JSON when stdout is not a terminal, text otherwise.
    #[default]
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// Logging flags, shared by every subcommand.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Auto, global = true)]
    pub log_format: LogFormat,

    /// Log filter, in `RUST_LOG` syntax (e.g. `info` or `memcached_operator=debug`). Overrides
    /// `RUST_LOG`; without either, `info`.
    #[arg(long, global = true)]
    pub log_level: Option<String>,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter does not parse.
    #[error("invalid log filter {filter:?}: {source}")]
    Filter {
        /// The filter as given.
        filter: String,
        /// What the parser said.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber was already installed.
    #[error("logging is already initialised")]
    AlreadyInitialised,
}

/// Installs the global `tracing` subscriber.
pub fn init_logging(args: &LogArgs) -> Result<(), TelemetryError> {
    let filter = args
        .log_level
        .clone()
        .or_else(|| std::env::var(EnvFilter::DEFAULT_ENV).ok())
        .filter(|filter| !filter.trim().is_empty())
        .unwrap_or_else(|| "info".to_string());
    let env_filter =
        EnvFilter::builder()
            .parse(&filter)
            .map_err(|source| TelemetryError::Filter {
                filter: filter.clone(),
                source,
            })?;
    let json = match args.log_format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stdout().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stdout);
    let installed = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.try_init()
    };
    installed.map_err(|_| TelemetryError::AlreadyInitialised)
}
