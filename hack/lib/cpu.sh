# Reads the CPU-seconds out of bash's `times`, for hack/background.sh (a job's) and
# hack/tools.sh (a tool build's). Sourced, never run.

# times_seconds FILE: the user and system seconds of the second line of `times` written to
# FILE ("1m2.500s 0m3.250s": the processes the shell has waited for), added up and rounded;
# nothing when FILE is empty or missing.
times_seconds() {
  [[ -s "$1" ]] || return 0
  awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%.0f", t }' "$1"
}
