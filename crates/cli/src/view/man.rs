//! `hmn man`: one man page for `hmn` and all its subcommands, in roff, made from the clap
//! definition so it cannot drift from `--help`.
//!
//! Prose paragraphs are left for man to fill; lines indented in the help text (examples,
//! tables) are kept verbatim. Hyphenation is off, so no word is broken across lines.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command};
use roff::{Inline, Roff, bold, italic, roman};

use crate::help::{ENVIRONMENT, EXIT_STATUS};

/// A piece of help text: prose to fill, or lines to keep as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    Prose(String),
    Verbatim(Vec<String>),
}

/// Help text cut into blocks: blank lines separate paragraphs; in a paragraph, runs of lines
/// that start with a space are verbatim and other runs are prose (joined with spaces).
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    for para in text.split("\n\n") {
        for line in para.lines() {
            let verbatim = line.starts_with(' ');
            match (out.last_mut(), verbatim) {
                (Some(Block::Verbatim(v)), true) if !v.is_empty() && !para_start(para, line) => {
                    v.push(line.to_string());
                }
                (Some(Block::Prose(p)), false) if !para_start(para, line) => {
                    p.push(' ');
                    p.push_str(line.trim());
                }
                (_, true) => out.push(Block::Verbatim(vec![line.to_string()])),
                (_, false) if line.trim().is_empty() => {}
                (_, false) => out.push(Block::Prose(line.trim().to_string())),
            }
        }
    }
    out
}

/// Whether `line` is the first line of `para` (the same slice, not just equal text).
fn para_start(para: &str, line: &str) -> bool {
    std::ptr::eq(para.as_ptr(), line.as_ptr())
}

fn add_blocks(page: &mut Roff, text: &str) {
    for b in blocks(text) {
        match b {
            Block::Prose(p) => {
                page.control("PP", []).text([roman(p)]);
            }
            Block::Verbatim(lines) => {
                page.control("PP", [])
                    .control("RS", ["4"])
                    .control("nf", []);
                for l in lines {
                    let l = l.strip_prefix("  ").unwrap_or(&l);
                    page.text([roman(l.to_string())]);
                }
                page.control("fi", []).control("RE", []);
            }
        }
    }
}

/// The arguments of `cmd` that a reader sets (not `--help`/`--version`).
fn arguments(cmd: &Command) -> impl Iterator<Item = &Arg> {
    cmd.get_arguments().filter(|a| {
        !a.is_hide_set()
            && !matches!(
                a.get_action(),
                ArgAction::Help | ArgAction::HelpLong | ArgAction::Version
            )
    })
}

fn value_name(a: &Arg) -> String {
    a.get_value_names()
        .and_then(|v| v.first())
        .map_or_else(|| a.get_id().as_str().to_uppercase(), ToString::to_string)
}

fn takes_value(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Set | ArgAction::Append)
}

/// Keeps an option and its value on one line.
const NBSP: &str = "\u{a0}";

/// How an argument is written: `--pid PID`, `--json`, `-- CMD...`, `PIDS...`.
fn usage(a: &Arg) -> Vec<Inline> {
    let many = matches!(a.get_action(), ArgAction::Append)
        || a.get_num_args().is_some_and(|n| n.max_values() > 1);
    let dots = if many { "..." } else { "" };
    if a.is_positional() {
        let mut v = Vec::new();
        if a.is_last_set() {
            v.push(bold("--"));
            v.push(roman(NBSP));
        }
        v.push(italic(format!("{}{dots}", value_name(a))));
        return v;
    }
    let mut v = vec![match (a.get_long(), a.get_short()) {
        (Some(l), _) => bold(format!("--{l}")),
        (None, Some(s)) => bold(format!("-{s}")),
        (None, None) => bold(a.get_id().as_str().to_string()),
    }];
    if takes_value(a) {
        v.push(roman(NBSP));
        v.push(italic(format!("{}{dots}", value_name(a))));
    }
    v
}

/// `hmn ps [--pid PID] … ` as inline text.
fn synopsis(path: &str, cmd: &Command) -> Vec<Inline> {
    let mut line = vec![bold(path.to_string())];
    for a in arguments(cmd) {
        line.push(roman(" "));
        let required = a.is_required_set();
        if !required {
            line.push(roman("["));
        }
        line.extend(usage(a));
        if !required {
            line.push(roman("]"));
        }
    }
    line
}

/// An `.TP` entry per argument: its usage, then its help, possible values and default.
fn add_options(page: &mut Roff, cmd: &Command) {
    for a in arguments(cmd) {
        let mut head = Vec::new();
        if let (Some(s), Some(_)) = (a.get_short(), a.get_long()) {
            head.push(bold(format!("-{s}")));
            head.push(roman(", "));
        }
        head.extend(usage(a));
        page.control("TP", []).text(head);
        let mut help = a
            .get_long_help()
            .or_else(|| a.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        // clap drops the final period of one-sentence help; sentences follow, so put it back.
        if !help.is_empty() && !help.ends_with(['.', '!', '?', ':']) {
            help.push('.');
        }
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect();
        if !values.is_empty() && takes_value(a) {
            let _ = write!(help, " One of: {}.", values.join(", "));
        }
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() && takes_value(a) {
            let _ = write!(help, " Default: {}.", defaults.join(", "));
        }
        page.text([roman(help.trim().to_string())]);
    }
}

/// The command's long description, ending with a period (clap drops the final period of a
/// one-sentence one).
fn about(cmd: &Command) -> String {
    let mut s = cmd
        .get_long_about()
        .or_else(|| cmd.get_about())
        .map(ToString::to_string)
        .unwrap_or_default();
    if !s.is_empty() && !s.ends_with(['.', '!', '?', ':']) {
        s.push('.');
    }
    s
}

/// The whole page.
pub fn render(cmd: &Command) -> String {
    let name = cmd.get_name().to_string();
    let version = cmd.get_version().unwrap_or("").to_string();
    let mut page = Roff::new();
    page.control(
        "TH",
        [
            name.to_uppercase().as_str(),
            "1",
            "",
            &format!("{name} {version}"),
            "User Commands",
        ],
    )
    // No hyphenation and a ragged right margin: words are never broken across lines.
    .control("nh", [])
    .control("ad", ["l"])
    .control("SH", ["NAME"])
    .text([roman(format!(
        "{name} - {}",
        cmd.get_about().map(ToString::to_string).unwrap_or_default()
    ))])
    .control("SH", ["SYNOPSIS"]);
    let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    page.control("PP", []).text(synopsis(&name, cmd));
    for s in &subs {
        page.control("PP", [])
            .text(synopsis(&format!("{name} {}", s.get_name()), s));
    }
    page.control("SH", ["DESCRIPTION"]);
    add_blocks(&mut page, &about(cmd));
    page.control("SH", ["OPTIONS"]);
    add_options(&mut page, cmd);
    page.control("SH", ["COMMANDS"]);
    for s in &subs {
        page.control("SS", [format!("{name} {}", s.get_name()).as_str()]);
        add_blocks(&mut page, &about(s));
        add_options(&mut page, s);
    }
    page.control("SH", ["EXIT STATUS"])
        .text([roman(EXIT_STATUS)]);
    page.control("SH", ["ENVIRONMENT"]);
    for (var, meaning) in ENVIRONMENT {
        page.control("TP", [])
            .text([bold(*var)])
            .text([roman(*meaning)]);
    }
    page.control("SH", ["SEE ALSO"])
        .text([bold("nvidia-smi"), roman("(1)")]);
    page.render()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn prose_is_joined_and_indented_lines_are_kept() {
        let text = "First line\nof a paragraph.\n\n  verbatim one\n    verbatim two\n\nHeader:\n  row\nAfter.";
        assert_eq!(
            blocks(text),
            vec![
                Block::Prose("First line of a paragraph.".into()),
                Block::Verbatim(vec!["  verbatim one".into(), "    verbatim two".into()]),
                Block::Prose("Header:".into()),
                Block::Verbatim(vec!["  row".into()]),
                Block::Prose("After.".into()),
            ]
        );
    }

    #[test]
    fn the_page_names_values_and_every_command() {
        let page = render(&crate::cli::Cli::command());
        assert!(page.contains(".nh\n"), "hyphenation off");
        assert!(
            page.contains("\\fB\\-\\-procfs\\fR\u{a0}\\fIDIR\\fR"),
            "{page}"
        );
        for sub in [
            "ps",
            "doctor",
            "run",
            "watch",
            "spill",
            "completions",
            "man",
        ] {
            assert!(page.contains(&format!(".SS \"hmn {sub}\"")), "{sub}");
        }
        assert!(
            page.contains("\\fB\\-\\-\\fR\u{a0}\\fICMD...\\fR"),
            "{page}"
        );
        assert!(!page.contains("hmn\\-ps(1)"), "no pages that do not exist");
    }
}
