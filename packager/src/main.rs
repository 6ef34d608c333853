//! Runs memcached-packager: parses the command line, runs the chosen subcommand and maps its
//! outcome to an exit code (0 done or clean, 1 OLM rules broken, 2 input that
//! could not be read or output that could not be written; clap uses 2 for usage errors too).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use memcached_packager::cli;

/// Writes memcached-operator's OLM bundle, catalog and config/, and checks registry+v1
/// bundles against OLM's webhook rules.
#[derive(Parser, Debug)]
#[command(name = "memcached-packager", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write bundle/, catalog/, config/ and the bundle and catalog Dockerfiles.
    Generate(cli::GenerateArgs),
    /// Check a registry+v1 bundle directory against OLM's webhook rules.
    CheckBundle(cli::CheckBundleArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Generate(args) => cli::generate(&args),
        Command::CheckBundle(args) => cli::check(&args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
