//! Locates the repository this crate is built in, and the pinned tools `hack/tools.sh`
//! installs into its `.tools/bin` (kube-apiserver, etcd, kubectl, kustomize and others).
//!
//! A fresh clone has no `.tools`: the tests that need it are ignored with the reason
//! `needs .tools: make test`, and `make test` installs the tools and runs them.

use std::path::{Path, PathBuf};

/// The repository's root: the directory of the operator's `Cargo.toml`, beside this crate.
pub fn root() -> &'static Path {
    let testkit = Path::new(env!("CARGO_MANIFEST_DIR"));
    testkit.parent().unwrap_or(testkit)
}

/// The path of a pinned tool: `.tools/bin/NAME` at the repository's root. It may not exist.
pub fn tool(name: &str) -> PathBuf {
    root().join(".tools/bin").join(name)
}

/// The path of a script under `hack/`.
pub fn hack(script: &str) -> PathBuf {
    root().join("hack").join(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_holds_the_operators_manifest_and_this_crate() {
        assert!(root().join("Cargo.toml").is_file());
        assert!(root().join("testkit/Cargo.toml").is_file());
        assert!(hack("control-plane.sh").is_file());
    }

    #[test]
    fn tools_live_in_dot_tools_bin_at_the_root() {
        assert_eq!(tool("kubectl"), root().join(".tools/bin/kubectl"));
    }
}
