//! What the fleet's reads share: asking several queries at once, PromQL strings, and how long
//! a target that stopped answering is still named.

use std::fmt::Write as _;

use super::gpu::Fleet;
use crate::answer::Series;
use crate::client::Client;
use crate::error::Error;

/// How far back a target that stopped answering is still named.
pub const NAMED_FOR: &str = "15m";
/// The step of the subquery that finds when such a target last answered: it is asked of those
/// targets alone, so a fine step costs little (a coarse one misses a target that lived less than
/// a step).
pub const NAMED_STEP: &str = "1s";

/// The answers to `queries`, asked at once: Prometheus answers them side by side, and the wait
/// is the slowest one's. Their warnings go to `fleet`.
pub(super) fn ask_all(
    client: &Client,
    at: f64,
    queries: &[String],
    fleet: &mut Fleet,
) -> Result<Vec<Vec<Series>>, Error> {
    let answers: Vec<Result<crate::answer::Answer, Error>> = std::thread::scope(|scope| {
        let asked: Vec<_> = queries
            .iter()
            .map(|q| scope.spawn(move || client.query(q, at)))
            .collect();
        asked
            .into_iter()
            .zip(queries)
            .map(|(h, q)| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Transport {
                        query: q.clone(),
                        why: "the thread asking it panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut series = Vec::with_capacity(answers.len());
    for a in answers {
        let a = a?;
        fleet.warnings.extend(a.warnings);
        series.push(a.series);
    }
    Ok(series)
}

/// `text` as a PromQL string: in double quotes, `\`, `"` and control characters escaped.
pub(super) fn promql_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promql_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(promql_string("node\\-a"), r#""node\\-a""#);
        assert_eq!(promql_string("a\"b"), r#""a\"b""#);
        assert_eq!(
            promql_string("x\u{1}\u{1f} \u{7f}~"),
            r#""x\x01\x1f \x7f~""#
        );
    }
}
