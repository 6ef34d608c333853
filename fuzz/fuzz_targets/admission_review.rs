//! The libFuzzer target of fuzz/checks/admission_review.rs.
#![no_main]

#[path = "../checks/admission_review.rs"]
mod admission_review;

libfuzzer_sys::fuzz_target!(|input: &[u8]| admission_review::check(input));
