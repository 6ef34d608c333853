//! Sets up logging, says an error the way the logs do, and answers a scrape of metrics.
//!
//! Logs go to stdout through `tracing`: JSON when stdout is not a terminal (in a cluster),
//! human-readable text on a terminal. The filter comes from `--log-level`, else `RUST_LOG`,
//! else `info`. Metrics are registered by the modules that record them, and served by the
//! manager's metrics listener and by the sidecars' probe listeners, both through
//! [`openmetrics`].

use std::io::IsTerminal;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tracing_subscriber::EnvFilter;

/// The `Content-Type` of a scrape's answer.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The answer to a scrape of `registry`: its metrics in the OpenMetrics text format.
pub fn openmetrics(registry: &Registry) -> Response {
    let mut text = String::with_capacity(4096);
    match encode(&mut text, registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
            )],
            text,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics\n",
        )
            .into_response(),
    }
}

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

/// An error and its causes, outermost first, joined by ": ". A cause whose text its outer
/// error already shows (many libraries put their source in their own message) is not repeated.
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    for cause in std::iter::successors(Some(error), |e| e.source()) {
        let message = cause.to_string();
        if !text.contains(&message) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&message);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Repeats(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Chains(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[test]
    fn a_cause_already_in_its_outer_message_is_said_once() {
        assert_eq!(describe(&Repeats(Inner)), "outer: inner");
    }

    #[test]
    fn a_cause_the_outer_message_leaves_out_is_appended() {
        assert_eq!(describe(&Chains(Inner)), "outer: inner");
        assert_eq!(describe(&Inner), "inner");
    }
}
