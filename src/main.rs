//! Runs the memcached-operator command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use memcached_operator::olm;

/// Runs memcached on Kubernetes, and packages itself for OLM.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write bundle/, catalog/, config/ and the bundle and catalog Dockerfiles.
    Generate(olm::cli::GenerateArgs),
    /// Check a registry+v1 bundle directory against OLM's webhook rules.
    CheckBundle(olm::cli::CheckBundleArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Generate(args) => olm::cli::generate(&args),
        Command::CheckBundle(args) => olm::cli::check(&args),
    }
}
