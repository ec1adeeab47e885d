//! `hmn ghosts`' text and JSON.

use std::collections::BTreeMap;
use std::io::{self, Write};

use hypomnesis::{GhostReport, HolderScan};
use serde::Serialize;

use super::{fit, format_size};

/// What `--why` found of a row of `hmn ps`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Why {
    /// `--why` was not given.
    #[default]
    NotAsked,
    /// Looked at: not a ghost.
    Fine,
    /// A ghost.
    Ghost(Box<hypomnesis::Ghost>),
    /// Not a ghost, with a fact about it that is no proof (an orphan at work).
    Fact(Box<hypomnesis::GhostFact>),
}

impl Why {
    /// The WHY cell: the class, `-` for none, the class in parentheses for a fact that is no
    /// proof (`(orphan)`); `None` when not asked.
    pub fn cell(&self) -> Option<&'static str> {
        use hypomnesis::GhostClass;
        match self {
            Self::NotAsked => None,
            Self::Fine => Some("-"),
            Self::Ghost(g) => Some(g.class.as_str()),
            Self::Fact(f) => Some(match f.class {
                GhostClass::Orphan => "(orphan)",
                GhostClass::Zombie => "(zombie)",
                GhostClass::Stuck => "(stuck)",
                _ => "(fact)",
            }),
        }
    }

    /// The ghost, if the row is one.
    pub fn ghost(&self) -> Option<&hypomnesis::Ghost> {
        match self {
            Self::Ghost(g) => Some(g),
            _ => None,
        }
    }

    /// The fact, if the row has one.
    pub fn fact(&self) -> Option<&hypomnesis::GhostFact> {
        match self {
            Self::Fact(f) => Some(f),
            _ => None,
        }
    }
}

/// The report as JSON: the ghosts, the bytes of each class, what could not be seen, the scan.
pub fn json(out: &mut impl Write, report: &GhostReport) -> io::Result<()> {
    #[derive(Serialize)]
    struct Json<'a> {
        ghosts: &'a [hypomnesis::Ghost],
        bytes_by_class: BTreeMap<&'static str, u64>,
        facts: &'a [hypomnesis::GhostFact],
        complete: bool,
        unseen: Vec<&'a str>,
        holder_scan: Option<&'a HolderScan>,
    }
    let by_class = by_class(report);
    super::json(
        out,
        &Json {
            ghosts: &report.ghosts,
            bytes_by_class: by_class,
            facts: &report.facts,
            complete: report.complete,
            unseen: report.unseen.iter().map(|u| u.message.as_str()).collect(),
            holder_scan: report.holder_scan.as_ref(),
        },
    )
}

/// The bytes of each class found, by the class's name.
pub fn by_class(report: &GhostReport) -> BTreeMap<&'static str, u64> {
    report
        .bytes_by_class()
        .into_iter()
        .map(|(c, b)| (c.as_str(), b))
        .collect()
}

/// The total of `by_class` and its parts, as `("7.8 GiB", "exited 3.0 GiB, unaccounted 4.8 GiB")`.
pub fn held(by_class: &BTreeMap<&'static str, u64>) -> (String, String) {
    let total = by_class.values().fold(0_u64, |a, &b| a.saturating_add(b));
    // In the classes' own order (exited first, unaccounted last), not the names'.
    let parts: Vec<String> = hypomnesis::GhostClass::ALL
        .iter()
        .filter_map(|c| {
            let b = by_class.get(c.as_str())?;
            Some(format!("{c} {}", format_size(*b)))
        })
        .collect();
    (format_size(total), parts.join(", "))
}

/// The line that sums the ghosts' bytes by class: `2 ghosts holding 7.8 GiB: exited 3.0 GiB,
/// unaccounted 4.8 GiB`, or `no ghosts`.
pub fn footer(out: &mut impl Write, report: &GhostReport) -> io::Result<()> {
    let n = report.ghosts.len();
    if n == 0 {
        return writeln!(out, "no ghosts");
    }
    let (total, parts) = held(&by_class(report));
    let s = if n == 1 { "" } else { "s" };
    writeln!(out, "{n} ghost{s} holding {total}: {parts}")
}

/// [`footer`] for the ghosts a table shows (`shown`), and a line counting those it leaves out
/// (a `--pid` or `--user` filter), so a footer never sums memory its rows do not hold.
pub fn footer_of(
    out: &mut impl Write,
    report: &GhostReport,
    shown: impl Fn(&hypomnesis::Ghost) -> bool,
) -> io::Result<()> {
    let mut rows = report.clone();
    rows.ghosts.retain(|g| shown(g));
    let left_out = report.ghosts.len() - rows.ghosts.len();
    if left_out == 0 {
        return footer(out, &rows);
    }
    if rows.ghosts.is_empty() {
        write!(out, "no ghosts in the rows shown")?;
    } else {
        let (total, parts) = held(&by_class(&rows));
        let n = rows.ghosts.len();
        let s = if n == 1 { "" } else { "s" };
        write!(
            out,
            "{n} ghost{s} holding {total} in the rows shown: {parts}"
        )?;
    }
    let s = if left_out == 1 { "" } else { "s" };
    writeln!(
        out,
        "; {left_out} more ghost{s} in rows not shown (`hmn ghosts` lists every one)"
    )
}

/// One row a ghost with its evidence below, a footer that sums bytes by class, the facts that
/// are no ghosts, then what could not be seen. "No ghosts" is said only of a look that saw
/// every listed process; otherwise that none was found among those seen.
pub fn text(out: &mut impl Write, report: &GhostReport) -> io::Result<()> {
    if report.ghosts.is_empty() {
        if report.complete {
            writeln!(
                out,
                "no ghosts: every listed GPU process was looked at, and none is gone, stuck or \
                 idle by what could be read; the listed processes account for each GPU's \
                 allocated memory"
            )?;
        } else {
            writeln!(
                out,
                "no ghost found among the GPU processes seen, but not every one could be looked \
                 at (below): whether there are ghosts is not known"
            )?;
        }
    } else {
        writeln!(out, "GPU  PID      CLASS            HELD  WHAT FREES IT")?;
        for g in &report.ghosts {
            let pid = g.pid.map_or_else(|| "-".to_owned(), |p| p.to_string());
            writeln!(
                out,
                "{}  {}  {}  {}  {}",
                fit(&g.device_index.to_string(), 3, false),
                fit(&pid, 7, false),
                fit(g.class.as_str(), 11, false),
                fit(&format_size(g.bytes), 10, true),
                g.remedy
            )?;
            for e in &g.evidence {
                writeln!(out, "              {e}")?;
            }
        }
        footer(out, report)?;
    }
    for f in &report.facts {
        writeln!(
            out,
            "not a ghost: GPU {} pid {} ({}): {}",
            f.device_index,
            f.pid,
            f.class,
            f.evidence.join("; ")
        )?;
    }
    for u in &report.unseen {
        writeln!(out, "not seen: {u}")?;
    }
    Ok(())
}
