//! The libFuzzer target of fuzz/checks/bundle_manifests.rs.
#![no_main]

#[path = "../checks/bundle_manifests.rs"]
mod bundle_manifests;

libfuzzer_sys::fuzz_target!(|input: &[u8]| bundle_manifests::check(input));
