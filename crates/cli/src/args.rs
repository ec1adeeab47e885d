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
    /// with a message, exit 1 [default: 30s].
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
    fn durations() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(duration("soon").is_err());
    }
}
