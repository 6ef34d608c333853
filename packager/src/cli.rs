//! Runs the `generate` and `check-bundle` subcommands: parses their arguments, calls the pure
//! core and maps outcomes to output and exit codes.
//!
//! Exit codes: 0 done or clean; 1 OLM rules broken (every violation printed on its own
//! line); 2 input that could not be read or output that could not be written.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::bundle::Options;
use super::check::{CheckError, check_bundle};
use super::generate::{GenerateError, Plan};
use super::pin::{self, Mirror};
use super::release;
use super::rules::ENFORCERS;

/// `generate`: write `bundle/`, `catalog/`, `config/` and the Dockerfiles of bundle and catalog.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// Directory to write into (the repository root).
    #[arg(long, default_value = ".")]
    pub output_dir: PathBuf,
    /// Operator image the CSV and config/ deploy [default: the release's image].
    #[arg(long)]
    pub image: Option<String>,
    /// Bundle image the catalog points at [default: the release's bundle image].
    #[arg(long)]
    pub bundle_image: Option<String>,
    /// memcached image of Memcacheds that name none (RELATED_IMAGE_MEMCACHED) [default: the
    /// release's].
    #[arg(long)]
    pub memcached_image: Option<String>,
    /// memcached_exporter image (RELATED_IMAGE_MEMCACHED_EXPORTER) [default: the release's].
    #[arg(long)]
    pub exporter_image: Option<String>,
    /// Name every image by digest, asked of its registry (or of a mirror, --registry-mirror):
    /// the operator's, memcached's and the exporter's wherever the CSV, config/ and the chart
    /// name them, so the CSV says `disconnected: "true"`. The bundle image is pinned in the
    /// catalog when its registry has it; otherwise the catalog names it by tag and a warning
    /// says so (push the bundle image, then generate again).
    #[arg(long)]
    pub image_digests: bool,
    /// HOST=URL: ask URL for the digests of HOST's images, a mirror holding them below URL's
    /// path (quay.io=http://127.0.0.1:5000/quay.io); the pinned references keep HOST.
    /// Repeatable, one per host.
    #[arg(long = "registry-mirror", requires = "image_digests")]
    pub registry_mirrors: Vec<String>,
    /// The one file to read registry credentials from (a containers-auth.json, as `podman
    /// login` writes, or a docker config.json). Without it, the credentials are looked for
    /// where podman, skopeo and docker keep them: $REGISTRY_AUTH_FILE alone when set, else
    /// $XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json, then
    /// $DOCKER_CONFIG/config.json or ~/.docker/config.json. A registry with no entry is read
    /// anonymously.
    #[arg(long, requires = "image_digests")]
    pub registry_auth_file: Option<PathBuf>,
}

/// How `check-bundle` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// One line per violation.
    #[default]
    Text,
    /// One JSON object.
    Json,
}

/// `check-bundle`: run OLM's webhook rules over a registry+v1 bundle directory.
#[derive(Debug, clap::Args)]
pub struct CheckBundleArgs {
    /// The bundle directory (holding manifests/ and metadata/).
    pub dir: PathBuf,
    /// Report format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// The exit code of violated rules.
const VIOLATIONS: u8 = 1;
/// The exit code of unreadable input or unwritable output.
const UNREADABLE: u8 = 2;

/// Runs `generate`. `createdAt` comes from `SOURCE_DATE_EPOCH` when set, else from the
/// release date in `release::RELEASES`.
pub fn generate(args: &GenerateArgs) -> ExitCode {
    let mut options = Options::for_release();
    if let Some(image) = &args.image {
        options.images.operator = image.clone();
    }
    if let Some(image) = &args.memcached_image {
        options.images.memcached = image.clone();
    }
    if let Some(image) = &args.exporter_image {
        options.images.exporter = image.clone();
    }
    if let Some(image) = &args.bundle_image {
        options.bundle_image = image.clone();
    }
    if args.image_digests {
        let pinned = args
            .registry_mirrors
            .iter()
            .map(|m| m.parse::<Mirror>())
            .collect::<Result<Vec<_>, _>>()
            .and_then(|mirrors| {
                pin::pin_images(&mut options, &mirrors, args.registry_auth_file.clone())
            });
        match pinned {
            Ok(said) => said.iter().for_each(|line| eprintln!("{line}")),
            Err(error) => {
                eprintln!("error: {error}; nothing was written");
                return ExitCode::from(UNREADABLE);
            }
        }
    }
    if let Ok(epoch) = std::env::var("SOURCE_DATE_EPOCH") {
        match release::created_at_from_epoch(&epoch) {
            Ok(created_at) => options.created_at = created_at,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(UNREADABLE);
            }
        }
    }
    let result = Plan::new(options).and_then(|plan| plan.write(&args.output_dir));
    match result {
        Ok(files) => {
            println!(
                "wrote {} files below {}",
                files.paths().count(),
                args.output_dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(GenerateError::Rules(violations)) => {
            for violation in &violations {
                eprintln!("{violation}");
            }
            eprintln!(
                "error: the CSV breaks {} OLM rule(s); nothing was written",
                violations.len()
            );
            ExitCode::from(VIOLATIONS)
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(UNREADABLE)
        }
    }
}

/// Runs `check-bundle`.
pub fn check(args: &CheckBundleArgs) -> ExitCode {
    let dir = args.dir.display().to_string();
    match (check_bundle(&args.dir), args.output) {
        (Ok(report), OutputFormat::Text) => {
            for violation in &report.violations {
                println!("{violation}");
            }
            if report.violations.is_empty() {
                println!(
                    "{dir}: {} ({} manifests, CRDs: {}): no rule of OLM v0, OLM v1{} broken",
                    report.csv,
                    report.files,
                    report.crds.join(", "),
                    if report.ours { " or this operator" } else { "" }
                );
                ExitCode::SUCCESS
            } else {
                let counts: Vec<String> = ENFORCERS
                    .iter()
                    .map(|e| (e, report.count_refused_by(*e)))
                    .filter(|(_, n)| *n > 0)
                    .map(|(e, n)| format!("{n} refused by {e}"))
                    .collect();
                println!(
                    "{dir}: {} breaks {} rule(s): {}",
                    report.csv,
                    report.violations.len(),
                    counts.join(", ")
                );
                ExitCode::from(VIOLATIONS)
            }
        }
        (Ok(report), OutputFormat::Json) => {
            let violations: Vec<_> = report
                .violations
                .iter()
                .map(|v| {
                    let enforcers: Vec<&str> = v.enforcers.iter().map(|e| e.id()).collect();
                    json!({"rule": v.rule.id(), "enforcers": enforcers, "webhook": v.webhook, "message": v.message})
                })
                .collect();
            let refused: serde_json::Map<String, serde_json::Value> = ENFORCERS
                .iter()
                .map(|e| (e.id().to_string(), json!(report.refused_by(*e))))
                .collect();
            let clean = violations.is_empty();
            println!(
                "{}",
                json!({
                    "bundle": dir,
                    "csv": report.csv,
                    "crds": report.crds,
                    "refused": refused,
                    "violations": violations,
                })
            );
            if clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(VIOLATIONS)
            }
        }
        (Err(error), format) => report_unreadable(&error, format),
    }
}

fn report_unreadable(error: &CheckError, format: OutputFormat) -> ExitCode {
    if format == OutputFormat::Json {
        println!("{}", json!({ "error": error.to_string() }));
    }
    eprintln!("error: {error}");
    ExitCode::from(UNREADABLE)
}
