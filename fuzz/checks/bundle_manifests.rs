//! Checks one input as the one file of a bundle's `manifests/`, through the function
//! `check-bundle` calls once it has read the directory. Fuzzed by
//! fuzz/fuzz_targets/bundle_manifests.rs; its seeds and past crashes are replayed by
//! tests/fuzz_seeds.rs.

use std::path::{Path, PathBuf};

use memcached_packager::check::check_manifests;

pub fn check(bytes: &[u8]) {
    let files = [(PathBuf::from("manifests/bundle.yaml"), bytes.to_vec())];
    match check_manifests(Path::new("manifests"), &files) {
        Ok(report) => assert_eq!(report.files, 1),
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}
