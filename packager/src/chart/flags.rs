//! Reads the operator's own command line (`memcached-operator run`, its clap declaration) for
//! what the chart passes to it: each flag's default, so that a value left as it is means what
//! the operator means, and whether the arguments the chart renders are ones it accepts.

use clap::{Args, Command};
use memcached_operator::manager::RunArgs;
use memcached_operator::telemetry::LogArgs;

/// A flag the operator does not declare, or declares without a default.
#[derive(Debug, thiserror::Error)]
#[error("memcached-operator run has no flag --{0} with a default")]
pub struct UnknownFlag(pub String);

/// `memcached-operator run`, as its flags are declared.
pub fn run_command() -> Command {
    LogArgs::augment_args(RunArgs::augment_args(Command::new("run")))
}

/// The default of `--long`, as the operator spells it.
pub fn default_of(long: &str) -> Result<String, UnknownFlag> {
    run_command()
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long))
        .and_then(|arg| arg.get_default_values().first().cloned())
        .map(|value| value.to_string_lossy().into_owned())
        .ok_or_else(|| UnknownFlag(long.to_string()))
}

/// The values `--long` accepts, when it names them (an enumeration).
pub fn possible_values(long: &str) -> Vec<String> {
    run_command()
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long))
        .map(|arg| {
            arg.get_possible_values()
                .iter()
                .map(|value| value.get_name().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The default of `--long` as a number.
pub fn number_default(long: &str) -> Result<serde_json::Value, UnknownFlag> {
    let text = default_of(long)?;
    if let Ok(integer) = text.parse::<u64>() {
        return Ok(integer.into());
    }
    text.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(serde_json::Value::Number)
        .ok_or(UnknownFlag(long.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_operators() {
        assert_eq!(default_of("lease-duration").expect("declared"), "15s");
        assert_eq!(default_of("leader-elect").expect("declared"), "true");
        assert!(default_of("no-such-flag").is_err());
        assert!(possible_values("log-format").contains(&"json".to_string()));
    }
}
