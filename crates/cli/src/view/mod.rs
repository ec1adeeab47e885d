//! Views: pure functions from data to text, JSON, CSV, SVG or roff, written to any `Write` and
//! tested byte for byte. They know nothing of how the data was collected.

pub mod devices;
pub mod doctor;
pub mod engine;
pub mod fits;
#[cfg(feature = "fleet")]
pub mod fleet;
pub mod ghosts;
pub mod groups;
pub mod man;
pub mod plot;
pub mod printable;
pub mod ps;
pub mod run;
pub mod spill;
pub mod unseen;
pub mod watch;

use std::io::{self, Write};
use std::time::Duration;

use serde::Serialize;

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// The widest a table column other than the last may grow: a longer cell (a user or device name
/// anyone can choose) is cut with `…`, and a width stays far below the 65,535 that Rust's
/// formatting takes. `--json` keeps every value whole.
pub const MAX_COLUMN: usize = 48;

/// `s` cut to `width` characters (the last one `…` when cut) and padded to it, right-aligned
/// when `right`: every padded table cell (`hmn ps`, `hmn top`).
pub fn fit(s: &str, width: usize, right: bool) -> String {
    // One allocation a cell: the cut text is borrowed where nothing is cut (`hmn top` fits
    // every cell of its table at each refresh).
    let text = cut(s, width);
    if right {
        format!("{text:>width$}")
    } else {
        format!("{text:<width$}")
    }
}

/// `s` cut to `max` characters, the last one `…` when cut (every table's cells and `hmn top`'s);
/// `s` itself when it fits.
pub fn cut(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.chars().count() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    std::borrow::Cow::Owned(out)
}

/// A write whose reader may be gone: a closed pipe is not an error (for commands that still
/// have a status of their own to pass on, such as `hmn run`'s command's).
pub fn unless_closed(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// `value` as pretty JSON and a newline. A write error keeps its kind (a closed pipe stays
/// `BrokenPipe`, which `hmn` exits quietly on).
/// DEL and the C1 controls are escaped (`\u0085`), so names stay exact in JSON.
pub fn json<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    let formatter = printable::JsonEscapes(serde_json::ser::PrettyFormatter::new());
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, formatter);
    value.serialize(&mut ser).map_err(io::Error::from)?;
    writeln!(out)
}

/// `value` as one line of JSON (no newline), escaped as [`json`] does.
pub fn json_line<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    let formatter = printable::JsonEscapes(serde_json::ser::CompactFormatter);
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, formatter);
    value.serialize(&mut ser).map_err(io::Error::from)
}

/// `1.2 GiB` / `340 MiB` / `unknown`.
pub fn size(b: Option<u64>) -> String {
    b.map_or_else(|| "unknown".to_string(), format_size)
}

/// `<n> MiB` below 1 GiB, else `<x.y> GiB`.
pub fn format_size(bytes: u64) -> String {
    if bytes < GIB {
        format!("{} MiB", bytes / MIB)
    } else {
        #[allow(clippy::cast_precision_loss)] // display only
        let gib = bytes as f64 / GIB as f64;
        format!("{gib:.1} GiB")
    }
}

/// `250ms`, `1s`, `1.5s`, `4m`, `2m30s`, `1h5m`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        return if ms.is_multiple_of(1000) {
            format!("{}s", ms / 1000)
        } else {
            format!("{:.1}s", d.as_secs_f64())
        };
    }
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// What a measurement past its deadline says (after `hmn: `): what it is still waiting on
/// (the longest waiting of the library's operations in flight), and since when.
pub fn no_answer_text(deadline: Duration, waiting: &[hypomnesis::InFlight]) -> String {
    let within = hypomnesis::format_duration(deadline);
    let on = match waiting.first() {
        Some(op) => format!(
            "still waiting for {} after {}",
            printable::printable(&op.to_string()),
            human(op.age())
        ),
        None => "the measurement did not return".to_string(),
    };
    format!("no answer within {within}: {on}; giving up (--deadline sets the limit)")
}

/// What a renderer writes, as text: the view tests' one way to run one.
#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed write is a failed test
pub(crate) fn text(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut v = Vec::new();
    f(&mut v).unwrap();
    String::from_utf8(v).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_sizes() {
        assert_eq!(size(None), "unknown");
        assert_eq!(size(Some(GIB)), "1.0 GiB");
    }

    #[test]
    fn sizes() {
        assert_eq!(format_size(0), "0 MiB");
        assert_eq!(format_size(538 * MIB + 12), "538 MiB");
        assert_eq!(format_size(GIB - 1), "1023 MiB");
        assert_eq!(format_size(GIB), "1.0 GiB");
        assert_eq!(format_size(7484 * MIB), "7.3 GiB");
    }
}
