//! The libFuzzer target of fuzz/checks/cert_pair.rs.
#![no_main]

#[path = "../checks/cert_pair.rs"]
mod cert_pair;

libfuzzer_sys::fuzz_target!(|input: &[u8]| cert_pair::check(input));
