#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ one after another, each for a fixed time, and prints
# how many inputs each executed.
#
# Usage: hack/fuzz.sh SECONDS TARGET...
#        hack/fuzz.sh build         only build the targets
#
# Each target starts from its committed seeds (fuzz/corpus/TARGET) and its past crashes
# (fuzz/regressions/TARGET), which libFuzzer runs first, so a regression fails at once. New
# inputs go to fuzz/.work/corpus/TARGET (kept between runs, not committed); a crash is written
# to fuzz/artifacts/TARGET/ and fails the run.
#
# Environment:
#   CARGO_FUZZ         the cargo-fuzz binary (default .tools/bin/cargo-fuzz, see hack/tools.sh)
#   FUZZ_BUILD_FLAGS   flags for `cargo fuzz build` and `cargo fuzz run` (default
#                      --sanitizer none --codegen-units 16)
#   FUZZ_JOBS          targets fuzzed at once (default 1)
#
# The stable toolchain builds the targets: with --sanitizer none, cargo-fuzz passes rustc only
# stable flags (sanitizer coverage is an LLVM pass). A sanitizer may need -Z flags, which
# RUSTC_BOOTSTRAP=1 lets stable accept; it is set in any case, so the flags may pick one.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
CARGO_FUZZ="${CARGO_FUZZ:-$ROOT/.tools/bin/cargo-fuzz}"
# 16 codegen units rather than cargo-fuzz's 1: a cold build takes about 5 minutes instead of 8
# on two cores, for 15-20% fewer executions a second.
read -r -a BUILD_FLAGS <<<"${FUZZ_BUILD_FLAGS:---sanitizer none --codegen-units 16}"
export RUSTC_BOOTSTRAP=1

if [[ "${1:-}" == build && $# -eq 1 ]]; then
  exec "$CARGO_FUZZ" build "${BUILD_FLAGS[@]}"
fi
(($# >= 2)) || { echo "usage: hack/fuzz.sh SECONDS TARGET... | hack/fuzz.sh build" >&2; exit 2; }
seconds="$1"
shift

"$CARGO_FUZZ" build "${BUILD_FLAGS[@]}"

log_dir="$ROOT/fuzz/.work/logs"
mkdir -p "$log_dir"

fuzz_one() {
  local target="$1" work="$ROOT/fuzz/.work/corpus/$1" dirs status
  mkdir -p "$work" "$ROOT/fuzz/artifacts/$target"
  dirs=("$work" "fuzz/corpus/$target")
  [[ ! -d "fuzz/regressions/$target" ]] || dirs+=("fuzz/regressions/$target")
  status=0
  # -timeout: an input taking ten seconds (a busy CI machine included) is a hang worth
  # knowing of; -rss_limit_mb: the same for memory. Final stats give the executions.
  "$CARGO_FUZZ" run "${BUILD_FLAGS[@]}" "$target" "${dirs[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log_dir/$target.log" 2>&1 || status=$?
  local runs speed
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log_dir/$target.log")"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log_dir/$target.log")"
  if ((status == 0)); then
    printf 'fuzz: %-18s %ss, %s executions (%s/s), corpus %s files\n' \
      "$target" "$seconds" "${runs:-?}" "${speed:-?}" "$(find "$work" -type f | wc -l)"
  else
    echo "fuzz: $target FAILED (exit $status); its log, $log_dir/$target.log, ends with:" >&2
    tail -n 40 "$log_dir/$target.log" >&2
    echo "fuzz: the input is in fuzz/artifacts/$target/; keep it in fuzz/regressions/$target/" >&2
    return 1
  fi
}

failed=0
jobs_at_once="${FUZZ_JOBS:-1}"
pids=()
for target in "$@"; do
  fuzz_one "$target" &
  pids+=($!)
  if ((${#pids[@]} >= jobs_at_once)); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
exit "$failed"
