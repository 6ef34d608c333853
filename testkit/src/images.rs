//! The images `hack/images.sh` builds and pushes to the local registry, from a test: their
//! references, and builds of them, also from another release's packaging output (the next
//! release of an upgrade, a catalog of bundle variants), as `memcached-packager generate`
//! writes it: `bundle/`, `catalog/`, `bundle.Dockerfile` and `catalog.Dockerfile` in one
//! directory.

use std::path::Path;
use std::process::Command;

use crate::repository;

/// Another release's packaging output, and the version its images are tagged with.
#[derive(Clone, Copy, Debug)]
pub struct Release<'a> {
    /// Where its `bundle/`, `catalog/` and Dockerfiles are.
    pub dir: &'a Path,
    /// Its version, without the `v` of the tags.
    pub version: &'a str,
}

/// Runs `hack/images.sh` with `args`, for `release` when given; returns what it printed, or
/// what it said when it failed.
fn images_sh(release: Option<Release<'_>>, args: &[&str]) -> Result<String, String> {
    let mut command = Command::new(repository::hack("images.sh"));
    command.args(args);
    if let Some(release) = release {
        command
            .env("RELEASE_DIR", release.dir)
            .env("VERSION", release.version);
    }
    run(command)
}

/// Runs `command`, one of the repository's scripts; returns what it printed, trimmed, or what
/// it said when it failed.
fn run(mut command: Command) -> Result<String, String> {
    let script = command.get_program().to_string_lossy().into_owned();
    let args: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let output = command
        .output()
        .map_err(|error| format!("cannot run {script}: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(format!(
            "{script} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The reference a pod spec names image `name` by (`hack/images.sh reference`).
pub fn reference(name: &str) -> Result<String, String> {
    images_sh(None, &["reference", name])
}

/// The reference of image `name` of `release`.
pub fn release_reference(release: Release<'_>, name: &str) -> Result<String, String> {
    images_sh(Some(release), &["reference", name])
}

/// The digest the local registry gives image `name` (`hack/images.sh digest`), `sha256:...`.
pub fn digest(name: &str) -> Result<String, String> {
    images_sh(None, &["digest", name])
}

/// The digest the local registry gives image `name` of `release`.
pub fn release_digest(release: Release<'_>, name: &str) -> Result<String, String> {
    images_sh(Some(release), &["digest", name])
}

/// Builds and pushes this repository's images `names` (`hack/images.sh build`). Blocks for as
/// long as the build takes.
pub fn build(names: &[&str]) -> Result<(), String> {
    build_for(None, names)
}

/// Builds and pushes the images `names` of `release` (`operator`, `bundle`, `catalog`), as
/// `hack/images.sh build` does for this repository's. Blocks for as long as the build takes.
pub fn build_release(release: Release<'_>, names: &[&str]) -> Result<(), String> {
    build_for(Some(release), names)
}

/// `hack/images.sh build NAMES...`, for `release` when given.
fn build_for(release: Option<Release<'_>>, names: &[&str]) -> Result<(), String> {
    let mut args = vec!["build"];
    args.extend_from_slice(names);
    images_sh(release, &args).map(|_| ())
}

/// This checkout's registry, `ADDRESS:PORT` (`hack/registry.sh address`).
pub fn registry_address() -> Result<String, String> {
    let mut command = Command::new(repository::hack("registry.sh"));
    command.arg("address");
    run(command)
}

/// Every image `hack/images.sh` builds: `(name, reference)` (`hack/images.sh list`).
pub fn list() -> Result<Vec<(String, String)>, String> {
    let listed = images_sh(None, &["list"])?;
    listed
        .lines()
        .map(|line| {
            line.split_once(' ')
                .map(|(name, reference)| (name.to_string(), reference.trim().to_string()))
                .ok_or_else(|| format!("hack/images.sh list printed {line:?}, not NAME REFERENCE"))
        })
        .collect()
}

/// Every repository the local registry stores (`hack/images.sh catalogue`, its
/// `/v2/_catalog`): a mirrored host's image `HOST/NAME:TAG` is stored as `HOST/NAME`.
pub fn catalogue() -> Result<Vec<String>, String> {
    Ok(images_sh(None, &["catalogue"])?
        .lines()
        .map(str::to_string)
        .collect())
}
