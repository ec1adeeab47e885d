//! The classic Prometheus text format (0.0.4) of an `OpenMetrics` exposition, for the
//! clients that do not take `OpenMetrics`.

use std::fmt::Write as _;

/// The Prometheus text format (0.0.4) of an exposition made by [`super::render`], for clients that do
/// not take `OpenMetrics` (`promtool check metrics`, older agents): no `# UNIT` lines and no
/// `# EOF`, counters described under their `_total` sample name, the `unknown` type as
/// `untyped`.
pub fn classic_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A HELP line waits for its TYPE line, which may rename the family.
    let mut help: Option<&str> = None;
    let flush = |out: &mut String, help: &mut Option<&str>| {
        if let Some(h) = help.take() {
            out.push_str(h);
            out.push('\n');
        }
    };
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with("# HELP ") {
            flush(&mut out, &mut help);
            help = Some(line);
            continue;
        }
        if let Some((name, kind)) = line
            .strip_prefix("# TYPE ")
            .and_then(|t| t.rsplit_once(' '))
        {
            match kind {
                "counter" => {
                    if let Some(text) = help
                        .take()
                        .and_then(|h| h.strip_prefix("# HELP "))
                        .and_then(|h| h.strip_prefix(name))
                    {
                        let _ = writeln!(out, "# HELP {name}_total{text}");
                    }
                    let _ = writeln!(out, "# TYPE {name}_total counter");
                    continue;
                }
                "unknown" => {
                    flush(&mut out, &mut help);
                    let _ = writeln!(out, "# TYPE {name} untyped");
                    continue;
                }
                _ => {}
            }
        }
        flush(&mut out, &mut help);
        out.push_str(line);
        out.push('\n');
    }
    flush(&mut out, &mut help);
    out
}
