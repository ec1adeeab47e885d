//! Options several commands share, and the value parsers of the command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// `--json`, for the commands that can print JSON.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct JsonArg {
    /// Print JSON on stdout instead of text (null for unknown values).
    #[arg(long)]
    pub json: bool,
}

/// `--deadline`, for the commands that measure once: how long the answer may take.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct DeadlineArg {
    /// Give up when the answer takes longer than this (a GPU driver call that does not return),
    /// with a message, exit 2 [default: 30s].
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub deadline: Option<Duration>,
}

impl DeadlineArg {
    /// What a one-shot command waits for its answer when not told.
    pub const DEFAULT: Duration = Duration::from_secs(30);

    pub fn get(self) -> Duration {
        self.deadline.unwrap_or(Self::DEFAULT)
    }
}

/// `--procfs`, `--sysfs` and `--rootfs`, for the commands that measure.
#[derive(Debug, Clone, Default, Args)]
pub struct RootArgs {
    /// Read processes from this procfs instead of /proc (e.g. the host's, mounted at /host/proc).
    #[arg(long, value_name = "DIR")]
    pub procfs: Option<PathBuf>,
    /// Read devices from this sysfs instead of /sys (e.g. the host's, mounted at /host/sys).
    #[arg(long, value_name = "DIR")]
    pub sysfs: Option<PathBuf>,
    /// The node's root filesystem instead of / (e.g. the host's, mounted at /host): the
    /// kubelet's logs under its var/log name the namespace, pod and container of a process in a
    /// Kubernetes pod.
    #[arg(long, value_name = "DIR")]
    pub rootfs: Option<PathBuf>,
}

impl RootArgs {
    /// Whether any root was given.
    pub fn any(&self) -> bool {
        self.procfs.is_some() || self.sysfs.is_some() || self.rootfs.is_some()
    }
}

/// A duration argument (`100ms`, `2s`, `1.5m`): more than 0, at most a day.
pub fn duration(s: &str) -> Result<Duration, String> {
    hypomnesis::parse_duration(s)
}

/// A size: a bare number of bytes (`1048576`), or a decimal number with `B`, `KiB`, `MiB`,
/// `GiB` or `TiB` (`1.5GiB`, `512 MiB`; the unit in any case), rounded up to a whole byte. The
/// decimal units (`GB`, `MB`) are refused rather than guessed at.
pub fn size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "kib" | "k" => 10,
        "mib" | "m" => 20,
        "gib" | "g" => 30,
        "tib" | "t" => 40,
        "kb" | "mb" | "gb" | "tb" => {
            return Err(format!(
                "{s:?}: {unit} is ambiguous (1000 or 1024?); write KiB, MiB, GiB or TiB"
            ));
        }
        _ => {
            return Err(format!(
                "{s:?} is not a size such as 12GiB, 1.5GiB, 512MiB or 1048576 (bytes)"
            ));
        }
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let not_a_number = || format!("{s:?} does not start with a number such as 12 or 1.5");
    if whole.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 12 {
        return Err(not_a_number());
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| not_a_number())?
    };
    let scale = 10_u128.pow(u32::try_from(frac.len()).unwrap_or(0));
    let frac_value: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| not_a_number())?
    };
    // (whole + frac / scale) << shift, rounded up, in exact integers.
    let bytes = whole
        .checked_mul(scale)
        .and_then(|w| w.checked_add(frac_value))
        .and_then(|v| v.checked_mul(1_u128 << shift))
        .map(|v| v.div_ceil(scale));
    bytes
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// An interval in milliseconds as 0.2.x takes it: a bare whole number of milliseconds, at least
/// 1 (`100`); a duration with its unit (`250ms`, `1s`) is taken too.
pub fn interval_ms(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return match t.parse::<u64>() {
            Ok(ms) if (1..=86_400_000).contains(&ms) => Ok(Duration::from_millis(ms)),
            _ => Err(format!(
                "{s:?}: a bare number is milliseconds, from 1 to 86400000 (a day)"
            )),
        };
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!(
            "{s:?}: a bare number is whole milliseconds (write 1500, or 1.5s)"
        ));
    }
    duration(t).map_err(|e| format!("{e} (a bare number is milliseconds)"))
}

/// A fraction in (0, 1]; NaN, infinities and anything outside are refused.
pub fn fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number such as 0.85"))?;
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{s:?} is not a fraction more than 0 and at most 1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions() {
        assert_eq!(fraction("0.85"), Ok(0.85));
        assert_eq!(fraction("1"), Ok(1.0));
        for bad in ["NaN", "nan", "inf", "1e308", "0", "-0.5", "1.01", "x", ""] {
            assert!(fraction(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(size("1048576"), Ok(1 << 20));
        assert_eq!(size("12GiB"), Ok(12 << 30));
        assert_eq!(size("1.5GiB"), Ok(3 << 29));
        assert_eq!(size("512 MiB"), Ok(512 << 20));
        assert_eq!(size("0.5kib"), Ok(512));
        assert_eq!(size(".5KiB"), Ok(512));
        assert_eq!(size("1.1KiB"), Ok(1127), "1126.4 bytes rounds up");
        assert_eq!(size("2TiB"), Ok(2 << 40));
        assert_eq!(size("0"), Ok(0));
        assert_eq!(size("7B"), Ok(7));
        for bad in [
            "", "GiB", "-1GiB", "1..5GiB", "1.5.1GiB", "12 GB", "12gb", "x", "1e9", "nan",
        ] {
            assert!(size(bad).is_err(), "{bad}");
        }
        assert!(size("12GB").unwrap_err().contains("ambiguous"));
        assert!(size("99999999999TiB").unwrap_err().contains("too large"));
        assert_eq!(
            size("16777215.999999999999TiB").ok(),
            Some(u64::MAX),
            "rounded up to the last byte"
        );
    }

    #[test]
    fn intervals_in_milliseconds() {
        assert_eq!(interval_ms("100"), Ok(Duration::from_millis(100)));
        assert_eq!(interval_ms("1"), Ok(Duration::from_millis(1)));
        assert_eq!(interval_ms("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(interval_ms("2s"), Ok(Duration::from_secs(2)));
        for bad in ["0", "", "-5", "1.5", "soon", "99999999999999999999"] {
            assert!(interval_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(duration("soon").is_err());
    }
}
