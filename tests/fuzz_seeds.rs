//! Replays every committed seed (fuzz/corpus/TARGET/) and past crash (fuzz/regressions/TARGET/)
//! of each fuzz target through the check that target applies (fuzz/checks/), in an ordinary
//! test build: a regression fails `cargo test` without libFuzzer's build. `make fuzz` and
//! `make fuzz-smoke` fuzz the same checks.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

#[path = "../fuzz/checks/admission_review.rs"]
mod admission_review;
#[path = "../fuzz/checks/bundle_manifests.rs"]
mod bundle_manifests;
#[path = "../fuzz/checks/cert_pair.rs"]
mod cert_pair;
#[path = "../fuzz/checks/conversion_review.rs"]
mod conversion_review;

/// Runs `check` on every file of `target`'s seeds and past crashes; returns how many seeds
/// it ran. A failing input is named.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut seeds = 0;
    for (dir, required) in [("corpus", true), ("regressions", false)] {
        let dir = fuzz.join(dir).join(target);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(_) if !required => continue,
            Err(error) => panic!("cannot read {}: {error}", dir.display()),
        };
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path();
            let input = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            if catch_unwind(AssertUnwindSafe(|| check(&input))).is_err() {
                panic!("fuzz target {target} fails on {}", path.display());
            }
            if required {
                seeds += 1;
            }
        }
    }
    seeds
}

#[test]
fn admission_review_seeds_and_crashes_pass() {
    assert!(replay("admission_review", admission_review::check) > 0);
}

#[test]
fn bundle_manifests_seeds_and_crashes_pass() {
    assert!(replay("bundle_manifests", bundle_manifests::check) > 0);
}

#[test]
fn cert_pair_seeds_and_crashes_pass() {
    assert!(replay("cert_pair", cert_pair::check) > 0);
}

#[test]
fn conversion_review_seeds_and_crashes_pass() {
    assert!(replay("conversion_review", conversion_review::check) > 0);
}
