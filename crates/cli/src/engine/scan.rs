//! Finding the table's lines in a stream of bytes: one search for the anchors over the
//! complete lines of each chunk (SIMD-fast; bytes of any kind), and a pattern tried only on a
//! line that holds an anchor. A line ends at `\n` or `\r` (a progress bar's redraw is a line).
//! A line longer than [`LINE_MAX`] is not looked at (it is counted); colours (ANSI escape
//! sequences) are taken out before a pattern is tried.

use std::collections::BTreeMap;

use aho_corasick::Input;

use super::patterns::{self, Compiled, Engine, TABLE};
use super::{Event, Figure, Heard};

/// The longest line looked at, in bytes.
pub const LINE_MAX: usize = 16 * 1024;
/// The most characters of a line an event keeps.
pub const LINE_SHOWN: usize = 400;

/// The lines of one channel (stdout or stderr), as its chunks come.
pub struct Scanner {
    table: Option<&'static Compiled>,
    /// The line begun in an earlier chunk and not ended yet.
    carry: Vec<u8>,
    /// The line being carried is past [`LINE_MAX`]: skipped until its end.
    overlong: bool,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    pub fn new() -> Self {
        Self {
            table: patterns::compiled(),
            carry: Vec::new(),
            overlong: false,
        }
    }

    /// The next chunk of the channel's bytes.
    pub fn feed(&mut self, chunk: &[u8], heard: &Heard) {
        let Some(table) = self.table else { return };
        let Some(first) = memchr::memchr2(b'\n', b'\r', chunk) else {
            self.keep(chunk, heard);
            return;
        };
        // The line begun earlier ends here.
        self.keep(chunk.get(..first).unwrap_or_default(), heard);
        if !self.overlong && !self.carry.is_empty() {
            let line = std::mem::take(&mut self.carry);
            look(table, &line, heard);
        }
        self.carry.clear();
        self.overlong = false;
        let last = memchr::memrchr2(b'\n', b'\r', chunk).unwrap_or(first);
        if let Some(whole) = chunk.get(first + 1..last) {
            lines(table, whole, heard);
        }
        self.keep(chunk.get(last + 1..).unwrap_or_default(), heard);
    }

    /// The channel ended: its last line, if it had no end.
    pub fn finish(&mut self, heard: &Heard) {
        if let Some(table) = self.table
            && !self.overlong
            && !self.carry.is_empty()
        {
            look(table, &self.carry, heard);
        }
        self.carry.clear();
    }

    /// Bytes of a line not ended yet.
    fn keep(&mut self, bytes: &[u8], heard: &Heard) {
        if self.overlong || bytes.is_empty() {
            return;
        }
        if self.carry.len() + bytes.len() > LINE_MAX {
            self.overlong = true;
            self.carry.clear();
            heard.overlong();
            return;
        }
        self.carry.extend_from_slice(bytes);
    }
}

/// The lines of `whole` (complete lines, separated by line ends) that hold an anchor.
fn lines(table: &'static Compiled, whole: &[u8], heard: &Heard) {
    let mut from = 0;
    loop {
        let hit = match &table.fast {
            Some(fast) => fast
                .find_in(whole, aho_corasick::Span::from(from..whole.len()))
                .map(|m| (m.start(), m.end())),
            None => table
                .anchors
                .find(Input::new(whole).span(from..whole.len()))
                .map(|m| (m.start(), m.end())),
        };
        let Some((hit_start, hit_end)) = hit else {
            break;
        };
        let (start, end) = line_around(whole, hit_start, hit_end);
        if let Some(line) = whole.get(start..end) {
            if line.len() > LINE_MAX {
                heard.overlong();
            } else {
                look_at(table, line, heard);
            }
        }
        from = end.min(whole.len());
        if from >= whole.len() {
            break;
        }
    }
}

/// The bounds of the line of `bytes` that holds `start..end`.
pub(super) fn line_around(bytes: &[u8], start: usize, end: usize) -> (usize, usize) {
    let head = bytes.get(..start).unwrap_or_default();
    let tail = bytes.get(end..).unwrap_or_default();
    let from = memchr::memrchr2(b'\n', b'\r', head).map_or(0, |i| i + 1);
    let to = memchr::memchr2(b'\n', b'\r', tail).map_or(bytes.len(), |i| end + i);
    (from, to)
}

/// One line: an event for each pattern whose anchor it holds and that it matches whole.
fn look(table: &'static Compiled, line: &[u8], heard: &Heard) {
    if table.anchors.find(line).is_none() {
        return;
    }
    look_at(table, line, heard);
}

/// [`look`], for a line known to hold an anchor.
fn look_at(table: &'static Compiled, line: &[u8], heard: &Heard) {
    // Most lines are plain text already: no copy for them.
    let owned;
    let text: &str = match std::str::from_utf8(line) {
        Ok(t) if !t.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) => t,
        _ => {
            owned = plain(line);
            &owned
        }
    };
    let mut tried = [false; TABLE.len()];
    for m in table.anchors.find_overlapping_iter(text.as_bytes()) {
        let i = m.pattern().as_usize();
        if tried.get(i).copied().unwrap_or(true) {
            continue;
        }
        if let Some(t) = tried.get_mut(i) {
            *t = true;
        }
        // A near miss fails the fast test; only a match pays for its groups.
        if let (Some(p), Some(re)) = (TABLE.get(i), table.patterns.get(i))
            && re.is_match(text)
            && let Some(caps) = re.captures(text)
        {
            let mut figures = BTreeMap::new();
            for name in re.capture_names().flatten() {
                if let Some(c) = caps.name(name)
                    && let Some((key, figure)) = figure(p.engine, name, c.as_str())
                {
                    figures.insert(key, figure);
                }
            }
            heard.push(Event {
                at: heard.now(),
                engine: p.engine,
                kind: p.kind,
                pattern: p.name,
                seen_in: p.seen_in,
                figures,
                line: text.trim().chars().take(LINE_SHOWN).collect(),
            });
        }
    }
}

/// The line as text, without ANSI escape sequences (colours, cursor moves) or other control
/// characters but tabs.
pub fn plain(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.next() {
                // CSI: parameters, then one final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ESC \.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            }
        } else if !c.is_control() || c == '\t' {
            out.push(c);
        }
    }
    out
}

/// The figure a group's text gives: bytes for a size (named `<name>_bytes`), a number
/// otherwise; `None` for text that is neither.
fn figure(engine: Engine, name: &'static str, text: &str) -> Option<(&'static str, Figure)> {
    let name = name.strip_suffix("_alt").unwrap_or(name);
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',' || c == '-'))
        .unwrap_or(text.len());
    let number: f64 = text.get(..digits_end)?.replace(',', "").parse().ok()?;
    if !number.is_finite() {
        return None;
    }
    let mut unit = text.get(digits_end..)?.trim();
    let mut name = name;
    if unit.is_empty() {
        // A size whose unit the line gives elsewhere (vLLM's `(70.2/79.1 GiB)`).
        if let Some(size) = name.strip_suffix("_gib") {
            (name, unit) = (size, "GiB");
        } else if let Some(size) = name.strip_suffix("_b") {
            (name, unit) = (size, "B");
        } else {
            return Some((name, Figure::Number(number)));
        }
    }
    let scale: f64 = match (unit, engine) {
        ("B", _) => 1.0,
        ("KiB", _) => 1024.0,
        ("MiB", _) => 1024.0 * 1024.0,
        ("GiB", _) | ("GB", Engine::Sglang | Engine::Vllm) => 1024.0 * 1024.0 * 1024.0,
        ("TiB", _) => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        ("KB", _) => 1e3,
        ("MB", _) => 1e6,
        ("GB", _) => 1e9,
        ("TB", _) => 1e12,
        _ => return None,
    };
    let bytes = (number * scale).round();
    // A negative size (vLLM's graphs can "take" less than nothing) is kept as a number.
    if bytes < 0.0 {
        return Some((name, Figure::Number(bytes)));
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let bytes = bytes.min(u64::MAX as f64) as u64;
    Some((bytes_name(name), Figure::Bytes(bytes)))
}

/// `weights` → `weights_bytes`, for the table's names (static, so events stay cheap).
fn bytes_name(name: &'static str) -> &'static str {
    const NAMES: &[(&str, &str)] = &[
        ("weights", "weights_bytes"),
        ("non_kv", "non_kv_bytes"),
        ("activations", "activations_bytes"),
        ("non_torch", "non_torch_bytes"),
        ("kv_cache", "kv_cache_bytes"),
        ("k_cache", "k_cache_bytes"),
        ("v_cache", "v_cache_bytes"),
        ("cuda_graphs", "cuda_graphs_bytes"),
        ("cuda_graphs_estimate", "cuda_graphs_estimate_bytes"),
        ("wanted", "wanted_bytes"),
        ("free", "free_bytes"),
        ("free_before", "free_before_bytes"),
        ("free_after", "free_after_bytes"),
        ("total", "total_bytes"),
        ("peak", "peak_bytes"),
        ("tried", "tried_bytes"),
        ("in_use", "in_use_bytes"),
        ("allocated", "allocated_bytes"),
    ];
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, b)| b)
}
