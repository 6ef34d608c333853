//! Parses the duration and size flags of `run` with the lower bounds below which the operator
//! would not work: a zero retry period or certificate poll interval busy-loops, a zero request
//! timeout or body limit refuses every review, and a Lease records whole seconds, so a
//! sub-second lease duration would be written as 0 and read by the other replicas as expired
//! (two leaders). clap puts the flag's name in front of each message.

use std::time::Duration;

/// The shortest period, deadline or timeout a flag may set.
pub const MIN_DURATION: Duration = Duration::from_millis(100);

/// The smallest request body limit: an AdmissionReview of a small Memcached is about 2 KiB.
pub const MIN_REQUEST_BYTES: usize = 4096;

/// A duration of at least [`MIN_DURATION`] (`--retry-period`, `--renew-deadline`,
/// `--cert-poll-interval`, `--request-timeout`).
pub fn duration(text: &str) -> Result<Duration, String> {
    at_least(text, MIN_DURATION)
}

/// A duration of at least `min`, or why not.
fn at_least(text: &str, min: Duration) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if duration < min {
        return Err(format!(
            "{text} is shorter than {}",
            humantime::format_duration(min)
        ));
    }
    Ok(duration)
}

/// The shortest validity of a self-signed certificate (`--self-signed-ca-validity`,
/// `--self-signed-cert-validity`): renewed at two thirds of it, so a look every 40 s at most.
pub const MIN_VALIDITY: Duration = Duration::from_secs(60);

/// A certificate validity of at least [`MIN_VALIDITY`].
pub fn validity(text: &str) -> Result<Duration, String> {
    at_least(text, MIN_VALIDITY)
}

/// A whole number of seconds, at least one (`--lease-duration`): what a Lease's
/// `leaseDurationSeconds` can hold.
pub fn lease_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if duration < Duration::from_secs(1) || duration.subsec_nanos() != 0 {
        return Err(format!(
            "{text} is not a whole number of seconds of at least 1s (a Lease records whole \
             seconds)"
        ));
    }
    Ok(duration)
}

/// A rate of requests a second (`--kube-api-qps`): a finite number, not negative; 0 for no
/// bound.
pub fn rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .parse()
        .map_err(|e| format!("{text} is not a number of requests a second: {e}"))?;
    if !rate.is_finite() || rate < 0.0 {
        return Err(format!(
            "{text} is not a rate: a number of requests a second, 0 for no bound"
        ));
    }
    Ok(rate)
}

/// A request body limit of at least [`MIN_REQUEST_BYTES`] (`--max-request-bytes`).
pub fn request_bytes(text: &str) -> Result<usize, String> {
    let bytes: usize = text
        .parse()
        .map_err(|e| format!("{text} is not a number of bytes: {e}"))?;
    if bytes < MIN_REQUEST_BYTES {
        return Err(format!(
            "{bytes} is smaller than {MIN_REQUEST_BYTES} bytes, which a review of a small \
             object already needs"
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_a_finite_number_not_below_zero() {
        assert_eq!(rate("20"), Ok(20.0));
        assert_eq!(rate("0.5"), Ok(0.5));
        assert_eq!(rate("0"), Ok(0.0));
        for bad in ["-1", "inf", "NaN", "fast"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_below_the_floor_are_refused_and_the_floor_is_taken() {
        assert!(duration("0s").is_err());
        assert!(duration("99ms").is_err());
        assert_eq!(duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(duration("2s"), Ok(Duration::from_secs(2)));
        assert!(duration("soon").is_err());
    }

    #[test]
    fn a_lease_is_whole_seconds_of_at_least_one() {
        let refused = lease_duration("900ms").expect_err("sub-second");
        assert!(refused.contains("whole number of seconds"), "{refused}");
        assert!(lease_duration("1500ms").is_err());
        assert!(lease_duration("0s").is_err());
        assert_eq!(lease_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(lease_duration("15s"), Ok(Duration::from_secs(15)));
    }

    #[test]
    fn request_bytes_below_a_small_review_are_refused() {
        assert!(request_bytes("0").is_err());
        assert!(request_bytes("4095").is_err());
        assert!(request_bytes("lots").is_err());
        assert_eq!(request_bytes("4096"), Ok(4096));
    }
}
