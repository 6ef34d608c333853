//! Copies the operator's own binary into a directory that memcached's container mounts: the
//! `install-supervisor` subcommand, run as the init container of the same name in memcached
//! pods whose server runs under the supervisor (`super::supervisor`).
//!
//! The operator's binary is static, so it runs in memcached's image as it is. The copy is
//! written beside its final name and renamed over it, readable and executable by all and
//! writable by none: a pod whose init container runs again finds a whole binary either way.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::Args;
use thiserror::Error;
use tracing::info;

use super::supervisor::{INSTALL_DIR, INSTALLED_BINARY};

/// The installed binary's mode: read and run by all, written by none.
pub const INSTALLED_MODE: u32 = 0o555;

/// Flags of `memcached-operator install-supervisor`.
#[derive(Args, Debug, Clone)]
pub struct InstallArgs {
    /// The directory to copy the binary into.
    #[arg(long, default_value = INSTALL_DIR)]
    pub into: PathBuf,
}

/// Why the binary could not be installed.
#[derive(Debug, Error)]
#[error("cannot install {from} as {to}: {error}")]
pub struct InstallError {
    from: PathBuf,
    to: PathBuf,
    error: std::io::Error,
}

/// Copies the running binary into `args.into`; returns where it is.
pub fn run(args: &InstallArgs) -> Result<PathBuf, InstallError> {
    let to = args.into.join(INSTALLED_BINARY);
    let from = std::env::current_exe().map_err(|error| InstallError {
        from: PathBuf::from("/proc/self/exe"),
        to: to.clone(),
        error,
    })?;
    install(&from, &to)?;
    info!(from = %from.display(), to = %to.display(), "installed the supervisor");
    Ok(to)
}

/// Copies `from` to `to` through a temporary file beside it, with [`INSTALLED_MODE`].
fn install(from: &Path, to: &Path) -> Result<(), InstallError> {
    let failed = |error| InstallError {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        error,
    };
    let partial = to.with_extension("partial");
    std::fs::copy(from, &partial).map_err(failed)?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(INSTALLED_MODE))
        .map_err(failed)?;
    std::fs::rename(&partial, to).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_whole_read_only_and_replaces_an_earlier_one() {
        let dir = tempfile::tempdir().expect("a directory");
        let from = dir.path().join("source");
        std::fs::write(&from, b"first").expect("a source");
        let to = dir.path().join(INSTALLED_BINARY);
        install(&from, &to).expect("installed");
        std::fs::write(&from, b"second").expect("a new source");
        install(&from, &to).expect("installed over the read-only first copy");
        assert_eq!(std::fs::read(&to).expect("the copy"), b"second");
        let mode = std::fs::metadata(&to)
            .expect("its metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, INSTALLED_MODE);
        assert!(!to.with_extension("partial").exists());
    }

    #[test]
    fn a_missing_directory_is_named_in_the_error() {
        let args = InstallArgs {
            into: PathBuf::from("/nonexistent/opt/memcached-operator"),
        };
        let error = run(&args).expect_err("refused");
        assert!(
            error
                .to_string()
                .contains("/nonexistent/opt/memcached-operator"),
            "{error}"
        );
    }
}
