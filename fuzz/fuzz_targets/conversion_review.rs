//! The libFuzzer target of fuzz/checks/conversion_review.rs.
#![no_main]

#[path = "../checks/conversion_review.rs"]
mod conversion_review;

libfuzzer_sys::fuzz_target!(|input: &[u8]| conversion_review::check(input));
