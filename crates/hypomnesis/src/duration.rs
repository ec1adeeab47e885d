//! Duration arguments and settings (`2s`, `500ms`, `1.5m`).

use std::time::Duration;

use crate::error::clip;

/// A duration as [`parse_duration`] reads it back: whole seconds as `2s`, anything else in
/// milliseconds (`500ms`, `1500ms`). What `hmn` and the library print for a limit or a timeout.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(hypomnesis::format_duration(Duration::from_secs(2)), "2s");
/// assert_eq!(hypomnesis::format_duration(Duration::from_millis(1500)), "1500ms");
/// ```
#[must_use]
pub fn format_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// A duration such as `10s`, `500ms`, `1.5s`, `2m`, `1h`, or a bare number of seconds: more
/// than 0 and at most one day, rounded to whole milliseconds. What `HYPOMNESIS_NVIDIA_SMI_TIMEOUT`
/// and `hmn`'s duration options take.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(hypomnesis::parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert!(hypomnesis::parse_duration("soon").is_err());
/// ```
///
/// # Errors
///
/// A message naming the text when it is not such a duration or is out of range.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "{:?} is not a duration such as 2s, 500ms or 1.5m",
            clip(text)
        )
    };
    let (number, scale_ms) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3_600_000.0)
    } else {
        (t, 1000.0)
    };
    let number = number.trim();
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let v: f64 = number.parse().map_err(|_| bad())?;
    let ms = v * scale_ms;
    if !(ms.is_finite() && (1.0..=86_400_000.0).contains(&ms)) {
        return Err(format!("{:?} is out of range (1ms to 24h)", clip(text)));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked range above
    Ok(Duration::from_millis(ms.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration(" 10 "), Ok(Duration::from_secs(10)));
        for bad in [
            "",
            "s",
            "abc",
            "-1s",
            "0s",
            "1e9s",
            "NaNs",
            "2 parsecs",
            "25h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
