//! `hmn watch`'s rows (text and JSON Lines) and its closing summary.

use super::printable::printable;
use serde::Serialize;

use super::{format_size, size};

/// A row of output (also the JSON Lines object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub t_ms: u128,
    pub pid: u32,
    pub name: Option<String>,
    /// The owner (a name, or the uid), `None` when it cannot be read.
    pub user: Option<String>,
    /// The full command line (JSON only; the text row shows the short name).
    pub command: Option<String>,
    pub rss_bytes: Option<u64>,
    pub rss_delta_bytes: Option<i64>,
    pub gpu_bytes: Option<u64>,
    pub gpu_delta_bytes: Option<i64>,
    /// `exited` or `pid reused` on the last row of a process.
    pub event: Option<String>,
    /// Windows (WDDM): whether a GPU is spilling into shared memory now (the SPILL column);
    /// `None` where spill is not measurable.
    pub spill: Option<bool>,
}

/// `now - before`, when both are known (and the difference fits).
pub fn delta(now: Option<u64>, before: Option<u64>) -> Option<i64> {
    let (n, b) = (i128::from(now?), i128::from(before?));
    i64::try_from(n - b).ok()
}

fn signed(d: Option<i64>) -> String {
    match d {
        None => String::new(),
        Some(d) => {
            let mag = format_size(d.unsigned_abs());
            format!(" ({}{mag})", if d < 0 { "-" } else { "+" })
        }
    }
}

/// A text row.
pub fn row(r: &Row) -> String {
    let event = r
        .event
        .as_ref()
        .map_or(String::new(), |e| format!("  [{e}]"));
    let spill = match r.spill {
        Some(true) => "  SPILL",
        Some(false) => "  no spill",
        None => "",
    };
    #[allow(clippy::cast_precision_loss)] // display only
    let t = r.t_ms as f64 / 1000.0;
    format!(
        "{t:>7.1}s  {:>7}  {:<8}  {:<16}  RSS {}{}  GPU {}{}{spill}{event}",
        r.pid,
        printable(r.user.as_deref().unwrap_or("?")),
        printable(r.name.as_deref().unwrap_or("?")),
        size(r.rss_bytes),
        signed(r.rss_delta_bytes),
        size(r.gpu_bytes),
        signed(r.gpu_delta_bytes),
    )
}

/// The closing line of one followed process.
pub struct Followed<'a> {
    pub pid: u32,
    pub name: Option<&'a str>,
    /// The command line, shown after the figures when known.
    pub command: Option<&'a str>,
    pub baseline: (Option<u64>, Option<u64>),
    pub peak: (Option<u64>, Option<u64>),
    pub ended: Option<&'a str>,
}

/// `  42 python3: RSS baseline 100 MiB, peak 300 MiB; GPU baseline 0 MiB, peak 1.0 GiB (exited)`.
pub fn closing(f: &Followed<'_>) -> String {
    format!(
        "  {} {}: RSS baseline {}, peak {}; GPU baseline {}, peak {}{}{}",
        f.pid,
        printable(f.name.unwrap_or("?")),
        size(f.baseline.0),
        size(f.peak.0),
        size(f.baseline.1),
        size(f.peak.1),
        f.ended.map_or(String::new(), |e| format!(" ({e})")),
        f.command
            .map_or(String::new(), |c| format!(" — {}", printable(c)))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::view::MIB;

    #[test]
    fn rows() {
        let r = Row {
            t_ms: 1500,
            pid: 42,
            name: Some("python3".into()),
            user: Some("alice".into()),
            command: Some("python3 train.py".into()),
            rss_bytes: Some(300 * MIB),
            rss_delta_bytes: delta(Some(300 * MIB), Some(100 * MIB)),
            gpu_bytes: Some(0),
            gpu_delta_bytes: delta(Some(0), Some(64 * MIB)),
            event: None,
            spill: None,
        };
        let spilling = Row {
            spill: Some(true),
            ..r.clone()
        };
        assert!(
            row(&spilling).ends_with("(-64 MiB)  SPILL"),
            "{}",
            row(&spilling)
        );
        assert_eq!(
            row(&r),
            "    1.5s       42  alice     python3           RSS 300 MiB (+200 MiB)  GPU 0 MiB (-64 MiB)"
        );
        let gone = Row {
            event: Some("exited".into()),
            rss_bytes: None,
            rss_delta_bytes: None,
            gpu_bytes: None,
            gpu_delta_bytes: None,
            user: None,
            ..r
        };
        assert_eq!(
            row(&gone),
            "    1.5s       42  ?         python3           RSS unknown  GPU unknown  [exited]"
        );
        assert_eq!(delta(None, Some(1)), None);
        assert_eq!(
            closing(&Followed {
                pid: 42,
                name: Some("sleep"),
                command: None,
                baseline: (Some(MIB), None),
                peak: (Some(2 * MIB), None),
                ended: Some("exited"),
            }),
            "  42 sleep: RSS baseline 1 MiB, peak 2 MiB; GPU baseline unknown, peak unknown (exited)"
        );
        assert_eq!(
            closing(&Followed {
                pid: 42,
                name: Some("python3"),
                command: Some("python3 train.py\x1b[2J"),
                baseline: (Some(MIB), Some(0)),
                peak: (Some(2 * MIB), Some(MIB)),
                ended: None,
            }),
            "  42 python3: RSS baseline 1 MiB, peak 2 MiB; GPU baseline 0 MiB, peak 1 MiB — python3 train.py?[2J"
        );
    }
}
