//! Checks arbitrary bytes as the one file of a bundle's `manifests/`, through the function
//! `check-bundle` calls once it has read the directory.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use memcached_packager::check::check_manifests;

fuzz_target!(|bytes: &[u8]| {
    let files = [(PathBuf::from("manifests/bundle.yaml"), bytes.to_vec())];
    match check_manifests(Path::new("manifests"), &files) {
        Ok(report) => assert_eq!(report.files, 1),
        Err(error) => assert!(!error.to_string().is_empty()),
    }
});
