//! Reads the two size notations the API accepts: memcached's item sizes (`512k`, `1m`) and
//! Kubernetes quantities (`256Mi`, `1G`, `1.5e9`).
//!
//! Both parsers are exact integer arithmetic; neither allocates nor panics on any input.

/// One mebibyte, the unit of `memoryLimitMB` (memcached's `-m` counts megabytes of 2^20 bytes).
pub const MIB: u64 = 1024 * 1024;

/// Reads a memcached item size as `-I` does: digits, then optionally `k`/`K` (KiB) or `m`/`M`
/// (MiB). Returns the size in bytes, or `None` when the text is not such a size.
pub fn parse_item_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.as_bytes().last()? {
        b'k' | b'K' => (&text[..text.len() - 1], 1024),
        b'm' | b'M' => (&text[..text.len() - 1], MIB),
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// Reads a Kubernetes quantity and returns its value rounded up to a whole number, as the
/// kubelet does for memory. `None` when the text is not a quantity or the value is negative
/// or too large.
pub fn parse_quantity(text: &str) -> Option<u128> {
    parse_quantity_millis(text).map(|millis| millis.div_ceil(1000))
}

/// Reads a Kubernetes quantity and returns its value in thousandths, rounded up (CPU is
/// compared this way: `100m` is 100).
pub fn parse_quantity_millis(text: &str) -> Option<u128> {
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let number = number.strip_prefix('+').unwrap_or(number);
    if number.starts_with('-') {
        return None;
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // value = mantissa * 10^-(fraction digits) * base^exponent
    let mantissa: u128 = format!("{whole}{fraction}").parse().ok()?;
    let mut scale_down = u32::try_from(fraction.len()).ok()?;
    let (multiplier, divisor_exp): (u128, u32) = match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "n" => (1, 9),
        "u" => (1, 6),
        "m" => (1, 3),
        "k" => (10u128.pow(3), 0),
        "M" => (10u128.pow(6), 0),
        "G" => (10u128.pow(9), 0),
        "T" => (10u128.pow(12), 0),
        "P" => (10u128.pow(15), 0),
        "E" => (10u128.pow(18), 0),
        exponent if exponent.starts_with(['e', 'E']) => {
            let power: i32 = exponent[1..].parse().ok()?;
            if !(-30..=30).contains(&power) {
                return None;
            }
            if power >= 0 {
                (10u128.pow(power.unsigned_abs()), 0)
            } else {
                (1, power.unsigned_abs())
            }
        }
        _ => return None,
    };
    scale_down += divisor_exp;
    let numerator = mantissa.checked_mul(multiplier)?.checked_mul(1000)?;
    let divisor = 10u128.checked_pow(scale_down)?;
    Some(numerator.div_ceil(divisor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_sizes_read_as_memcached_reads_them() {
        assert_eq!(parse_item_size("1m"), Some(MIB));
        assert_eq!(parse_item_size("1M"), Some(MIB));
        assert_eq!(parse_item_size("512k"), Some(512 * 1024));
        assert_eq!(parse_item_size("2048"), Some(2048));
        for bad in [
            "",
            "m",
            "1g",
            "1.5m",
            "-1m",
            " 1m",
            "1mb",
            "99999999999999999999m",
        ] {
            assert_eq!(parse_item_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn quantities_read_as_kubernetes_reads_them() {
        assert_eq!(parse_quantity("128Mi"), Some(128 << 20));
        assert_eq!(parse_quantity("1Gi"), Some(1 << 30));
        assert_eq!(parse_quantity("1G"), Some(1_000_000_000));
        assert_eq!(parse_quantity("1.5Gi"), Some(3 << 29));
        assert_eq!(parse_quantity("1e9"), Some(1_000_000_000));
        assert_eq!(parse_quantity("1E3"), Some(1000));
        assert_eq!(parse_quantity("100"), Some(100));
        assert_eq!(parse_quantity("500m"), Some(1));
        assert_eq!(parse_quantity(".5Ki"), Some(512));
        assert_eq!(parse_quantity("+1k"), Some(1000));
        assert_eq!(parse_quantity_millis("100m"), Some(100));
        assert_eq!(parse_quantity_millis("0.25"), Some(250));
        assert_eq!(parse_quantity_millis("2"), Some(2000));
        assert_eq!(parse_quantity_millis("1n"), Some(1));
        for bad in ["", "Mi", "-1Gi", "1Gb", "1 Gi", "1..2", "1e99", "x"] {
            assert_eq!(parse_quantity(bad), None, "{bad:?}");
        }
    }
}
