//! How deep a YAML text's flow collections (`[`, `{`) nest, told before the text is parsed.
//! The YAML parser in use (`yaml_serde`'s, a port of libyaml) spends time in proportion to the
//! flow depth on every token: `[` repeated 100,000 times takes it seconds, `{a: ` repeated
//! 40,000 times half a minute, and more in proportion to the square of the size. This scan is
//! linear and refuses such a text first.
//!
//! Where a token starts in YAML's block context depends on indentation, which the scan does not
//! track: a line after a plain scalar may go on with it or start a new token, a line of a block
//! scalar (`|`, `>`) may be its content or not. So the scan follows every such reading at once,
//! as a small set of states (each one a place the tokenizer may be at), and refuses the text
//! when any reading nests deeper than the limit. The parser's own reading is always among
//! them: a text that passes does not nest deeper for the parser. A text refused may be one that
//! only another reading nests that deep (a block scalar whose lines start with brackets); a
//! real CDI spec is not. Quoted scalars, comments, tags and anchors are told apart where the
//! parser tells them apart (a quote starts a scalar only where a token starts), so brackets
//! within them count for nothing.
//!
//! Block nesting (indentation, `- - -`) is not bounded here: the parser takes it in linear time,
//! and the deserializer refuses more than 128 levels of nesting of any kind.

/// The deepest flow nesting a CDI spec may have (real ones: 2 or 3).
pub const MAX_FLOW_DEPTH: u32 = 64;

/// The most readings followed at once (a real spec keeps two or three).
const MAX_READINGS: usize = 64;

/// Where in the text one reading is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum At {
    /// Between tokens.
    Token,
    /// In a plain scalar.
    Plain,
    /// In blanks or breaks within a plain scalar: what follows may go on with it.
    PlainSpace,
    /// In a single-quoted scalar; the next `'` ends it, unless doubled.
    Single,
    /// On the second `'` of a doubled one.
    SingleQuote,
    /// In a double-quoted scalar.
    Double,
    /// After a backslash in one.
    DoubleEscape,
    /// In a comment (or a directive), to the end of the line.
    Comment,
    /// After the `!` of a tag.
    TagStart,
    /// In a tag's handle or suffix.
    Tag,
    /// In a verbatim tag (`!<…>`).
    Verbatim,
    /// After a tag: what follows must end it.
    TagEnd,
    /// After `&` or `*`, before the anchor's first character.
    AnchorStart,
    /// In an anchor or alias.
    Anchor,
    /// In a block scalar's header (`|-`, `>2`), to the end of the line.
    Header,
    /// In a block scalar's content.
    Literal,
    /// In a document marker (`---`, `...`): the characters still to pass.
    Marker(u8),
}

/// One reading: its flow depth (0: block context) and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Reading {
    depth: u32,
    at: At,
}

/// What to do with the current character in a reading.
enum Next {
    /// Consumed: the reading goes on in these states.
    To(Reading),
    /// Consumed, and the reading splits in two.
    Either(Reading, Reading),
    /// Not consumed: read it again in this state.
    Again(Reading),
    /// The parser stops here with an error: this reading ends.
    Stop,
}

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// A blank, a break or the end (`None`, or NUL, which ends the parser's input).
fn blankz(c: Option<char>) -> bool {
    c.is_none_or(|c| is_blank(c) || is_break(c) || c == '\0')
}

fn flow_indicator(c: char) -> bool {
    matches!(c, ',' | '[' | ']' | '{' | '}')
}

/// A character of an anchor, or of a tag's handle.
fn alpha(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A character of a tag's URI (`,`, `[` and `]` only in a verbatim tag).
fn uri(c: char) -> bool {
    alpha(c) || ";/?:@&=+$.%!~*'()".contains(c)
}

/// The text as characters, with the line each starts and whether it is first on its line.
struct Text {
    chars: Vec<char>,
}

impl Text {
    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).copied()
    }

    /// Whether a document marker (`---`, `...`, then a blank or the end) starts at `i`.
    fn marker(&self, i: usize) -> bool {
        let three = |m: char| (i..i + 3).all(|k| self.at(k) == Some(m));
        (three('-') || three('.')) && blankz(self.at(i + 3))
    }
}

/// What reading `r` does with the character at `i` (`first`: the first of its line).
#[allow(clippy::too_many_lines)] // one match over the tokenizer's states, as it reads them
fn step(text: &Text, i: usize, first: bool, r: Reading) -> Next {
    let Some(c) = text.at(i) else {
        return Next::Stop;
    };
    let next = text.at(i + 1);
    let flow = r.depth > 0;
    let to = |at| Next::To(Reading { at, ..r });
    let again = |at| Next::Again(Reading { at, ..r });
    match r.at {
        At::Token => {
            if is_blank(c) || is_break(c) || (first && c == '\u{feff}') {
                to(At::Token)
            } else if c == '#' || (first && c == '%') {
                to(At::Comment)
            } else if first && text.marker(i) {
                to(At::Marker(2))
            } else if c == '[' || c == '{' {
                Next::To(Reading {
                    depth: r.depth.saturating_add(1),
                    at: At::Token,
                })
            } else if c == ']' || c == '}' {
                Next::To(Reading {
                    depth: r.depth.saturating_sub(1),
                    at: At::Token,
                })
            } else if c == ','
                || (c == '-' && blankz(next))
                || ((c == '?' || c == ':') && (flow || blankz(next)))
            {
                to(At::Token)
            } else if c == '*' || c == '&' {
                to(At::AnchorStart)
            } else if c == '!' {
                to(At::TagStart)
            } else if (c == '|' || c == '>') && !flow {
                to(At::Header)
            } else if c == '\'' {
                to(At::Single)
            } else if c == '"' {
                to(At::Double)
            } else if !(blankz(Some(c)) || "-?:,[]{}#&*!|>'\"%@`".contains(c))
                || (c == '-' && !next.is_some_and(is_blank))
                || (!flow && (c == '?' || c == ':') && !blankz(next))
            {
                to(At::Plain)
            } else {
                Next::Stop
            }
        }
        At::Plain => {
            if is_break(c) && !flow {
                // Its next line may go on with it, or, less indented, start a token.
                Next::Either(
                    Reading {
                        at: At::PlainSpace,
                        ..r
                    },
                    Reading { at: At::Token, ..r },
                )
            } else if is_blank(c) || is_break(c) {
                to(At::PlainSpace)
            } else if flow && c == ':' && next.is_some_and(|n| ",?[]{}".contains(n)) {
                Next::Stop
            } else if (c == ':' && blankz(next)) || (flow && flow_indicator(c)) {
                again(At::Token)
            } else {
                to(At::Plain)
            }
        }
        At::PlainSpace => {
            if is_blank(c) || (is_break(c) && flow) {
                to(At::PlainSpace)
            } else if is_break(c) {
                again(At::Plain)
            } else if first && text.marker(i) {
                again(At::Token)
            } else if c == '#' {
                to(At::Comment)
            } else {
                again(At::Plain)
            }
        }
        At::Single => match (c, next) {
            ('\'', Some('\'')) => to(At::SingleQuote),
            ('\'', _) => to(At::Token),
            _ => to(At::Single),
        },
        At::SingleQuote => to(At::Single),
        At::Double => match c {
            '\\' => to(At::DoubleEscape),
            '"' => to(At::Token),
            _ => to(At::Double),
        },
        At::DoubleEscape => to(At::Double),
        At::Comment if is_break(c) => to(At::Token),
        At::Comment => to(At::Comment),
        At::TagStart if c == '<' => to(At::Verbatim),
        At::TagStart => again(At::Tag),
        At::Tag if uri(c) => to(At::Tag),
        At::Tag => again(At::TagEnd),
        At::Verbatim if uri(c) || ",[]".contains(c) => to(At::Verbatim),
        At::Verbatim if c == '>' => to(At::TagEnd),
        At::TagEnd if blankz(Some(c)) || (flow && c == ',') => again(At::Token),
        At::AnchorStart | At::Anchor if alpha(c) => to(At::Anchor),
        At::Anchor if blankz(Some(c)) || "?:,]}%@`".contains(c) => again(At::Token),
        // What the parser refuses: no character may follow there.
        At::Verbatim | At::TagEnd | At::AnchorStart | At::Anchor => Next::Stop,
        // Each line of a block scalar may be its content, or, less indented, a token.
        At::Header | At::Literal if is_break(c) => Next::Either(
            Reading {
                at: At::Literal,
                ..r
            },
            Reading { at: At::Token, ..r },
        ),
        At::Header => to(At::Header),
        // Its content is indented by one space at least: a line that is not ends it (the
        // reading that took the line for a token goes on).
        At::Literal if first && c != ' ' => Next::Stop,
        At::Literal => to(At::Literal),
        At::Marker(left) if left > 1 => to(At::Marker(left - 1)),
        At::Marker(_) => to(At::Token),
    }
}

/// `Ok` when no reading of `text` nests flow collections deeper than `limit`; else why, with
/// the line where it does.
pub fn check(text: &str, limit: u32) -> Result<(), String> {
    let text = Text {
        chars: text.chars().collect(),
    };
    let mut readings = vec![Reading {
        depth: 0,
        at: At::Token,
    }];
    let mut next = Vec::new();
    let (mut line, mut first) = (1_usize, true);
    for (i, &c) in text.chars.iter().enumerate() {
        for &r in &readings {
            let mut r = r;
            // A state reads a character again at most twice (Plain after PlainSpace, Token).
            loop {
                match step(&text, i, first, r) {
                    Next::To(a) => next.push(a),
                    Next::Either(a, b) => next.extend([a, b]),
                    Next::Again(a) => {
                        r = a;
                        continue;
                    }
                    Next::Stop => {}
                }
                break;
            }
        }
        next.sort_unstable();
        next.dedup();
        if next.iter().any(|r| r.depth > limit) {
            return Err(format!(
                "YAML flow collections ([ or {{) nested more than {limit} deep (line {line}): \
                 not parsed, as the parser's time grows with the square of the depth"
            ));
        }
        if next.len() > MAX_READINGS {
            return Err(format!(
                "YAML whose nesting cannot be bounded: more than {MAX_READINGS} ways to read it \
                 at line {line}"
            ));
        }
        std::mem::swap(&mut readings, &mut next);
        next.clear();
        if readings.is_empty() {
            // Every reading has met an error the parser stops at: it reads no further.
            return Ok(());
        }
        let crlf = c == '\r' && text.at(i + 1) == Some('\n');
        first = is_break(c);
        if first && !crlf {
            line += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn deep(text: &str) -> bool {
        check(text, MAX_FLOW_DEPTH).is_err()
    }

    /// 100,000 `[`, and `{a: ` 100,000 times: refused at once, naming the depth and the line
    /// (`yaml_serde` takes 4.5 s for the first on a debug build, and minutes for the second).
    #[test]
    fn a_hundred_thousand_levels_are_refused_at_once() {
        for text in ["[".repeat(100_000), "{a: ".repeat(100_000)] {
            let t = std::time::Instant::now();
            let why = check(&text, MAX_FLOW_DEPTH).unwrap_err();
            assert!(
                t.elapsed() < std::time::Duration::from_millis(500),
                "{:?}",
                t.elapsed()
            );
            assert!(why.contains("nested more than 64 deep (line 1)"), "{why}");
        }
    }

    #[test]
    fn the_limit_is_the_deepest_nesting_passed() {
        let nested = |n: usize| format!("k: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(!deep(&nested(64)));
        assert!(deep(&nested(65)));
        // Siblings do not add up; a mapping nests as a sequence does.
        assert!(!deep(&"- [[[[]]]]\n".repeat(10_000)));
        let why = check(&format!("a: 1\nb:\n  {}", "{x: ".repeat(65)), 64).unwrap_err();
        assert!(why.contains("(line 3)"), "{why}");
    }

    /// Brackets in quoted scalars, comments, plain scalars and tags count for nothing; a quote
    /// within a plain scalar starts nothing.
    #[test]
    fn brackets_in_scalars_and_comments_do_not_count() {
        let many = "[".repeat(100);
        for text in [
            format!("a: \"{many}\"\nb: '{many}'\n"),
            format!("a: 1 # {many}\n# {many}\n"),
            format!("a: x{many}\n"),
            format!("a: \"it\\\"s {many}\"\n"),
            format!("a: 'it''s {many}'\n"),
            format!("a: !<tag:x,{many}> v\n"),
            format!("a: [b, \"{many}\", '{many}']\n"),
            format!("cmd: |\n  echo {many}\n"),
        ] {
            assert!(!deep(&text), "{text}");
        }
    }

    /// What the parser reads as structure is counted, whatever would hide it from a scan
    /// that takes every quote for a scalar: a quote within a plain scalar (block or flow),
    /// closing brackets within quoted scalars, a line after a plain scalar that the parser may
    /// read as a new token.
    #[test]
    fn nesting_cannot_hide_behind_quotes_or_lines() {
        let open = "[".repeat(65);
        for text in [
            format!("a: x['\nb: {open}\nc: '\n"),
            format!("[a'b, {open}"),
            format!("[a 'b, {open}"),
            format!("[\"]]]]\", {}", "[\"]]]]\", ".repeat(64)),
            format!("a: b\n{open}\n"),
            format!("a: |\n  x\n{open}\n"),
            format!("a: &anchor {open}"),
            format!("a: !t {open}"),
            format!("[!t,{open}"),
        ] {
            assert!(deep(&text), "{text}");
        }
    }

    /// The CDI specs of the DRA fixture node, and a spec as the NVIDIA tools write one.
    #[test]
    fn real_specs_pass() {
        let spec = "---\ncdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\ndevices:\n\
                    - name: 6f1c2b3a-gpu-0\n  containerEdits:\n    env:\n    - NVIDIA_VISIBLE_DEVICES=void\n\
                    \x20   deviceNodes:\n    - path: /dev/nvidia0\n    hooks:\n    - hookName: createContainer\n\
                    \x20     path: /usr/bin/nvidia-cdi-hook\n      args: [nvidia-cdi-hook, create-symlinks, --link, \"a::b\"]\n\
                    containerEdits: {}\n";
        assert_eq!(check(spec, MAX_FLOW_DEPTH), Ok(()));
        let rootfs = hypomnesis_testkit::fixtures("dra").join("rootfs");
        for dir in ["etc/cdi", "var/run/cdi"] {
            for f in std::fs::read_dir(rootfs.join(dir)).unwrap() {
                let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
                assert_eq!(check(&text, MAX_FLOW_DEPTH), Ok(()), "{text}");
            }
        }
    }
}
