//! Text for a terminal, whatever its sources put in it: any local user can name a process
//! `\x1b[2J…`, and nvidia-smi's and the drivers' words reach the messages. As `ps` does, control
//! characters are shown as `?`: in a name every one of them (a tab or a newline would break a
//! table's rows), in the streams hmn writes every one but tab and newline (ESC, the other C0
//! controls, DEL, and the C1 controls, which some terminals obey too). So are the invisible
//! marks that reorder text written right to left (U+202A–U+202E, U+2066–U+2069, U+200E,
//! U+200F, U+061C): a RIGHT-TO-LEFT OVERRIDE in a user or process name would show the rest of
//! the row reversed, another pid or figure than the real one.

use std::borrow::Cow;
use std::io::{self, Write};

/// Whether `c` is one of the marks that change the order text is shown in (embeddings,
/// overrides, isolates and the direction marks).
pub const fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// Whether `c` is shown as `?` in a name.
fn hidden(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `s` with every control character, and every bidirectional mark, as `?`.
pub fn printable(s: &str) -> Cow<'_, str> {
    if s.chars().any(hidden) {
        Cow::Owned(s.chars().map(|c| if hidden(c) { '?' } else { c }).collect())
    } else {
        Cow::Borrowed(s)
    }
}

/// How many bytes at the start of `bytes` are one character the stream shows as `?` (a C1
/// control or a bidirectional mark in UTF-8); `Err(())` when `bytes` is too short to tell;
/// `Ok(0)` when it is none.
fn hidden_sequence(bytes: &[u8]) -> Result<usize, ()> {
    match bytes {
        [0xC2, 0x80..=0x9F, ..] | [0xD8, 0x9C, ..] => Ok(2),
        [0xE2, 0x80, 0x8E | 0x8F | 0xAA..=0xAE, ..] | [0xE2, 0x81, 0xA6..=0xA9, ..] => Ok(3),
        [0xC2 | 0xD8 | 0xE2] | [0xE2, 0x80 | 0x81] => Err(()),
        _ => Ok(0),
    }
}

/// A JSON formatter (`F`: pretty or compact) that also escapes DEL, the C1 controls (U+007F to
/// U+009F) and the bidirectional marks as `\uXXXX`, which `serde_json` writes raw: JSON keeps every name exact, and
/// the stream [`Printable`] passes on holds no control character to show as `?`.
pub struct JsonEscapes<F>(pub F);

/// Forwards a formatter method to the wrapped one.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $name<W: ?Sized + Write>(&mut self, writer: &mut W $(, $arg: $ty)*) -> io::Result<()> {
                self.0.$name(writer $(, $arg)*)
            }
        )*
    };
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for JsonEscapes<F> {
    forward! {
        begin_array();
        end_array();
        begin_array_value(first: bool);
        end_array_value();
        begin_object();
        end_object();
        begin_object_key(first: bool);
        end_object_key();
        begin_object_value();
        end_object_value();
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest
            .char_indices()
            .find(|(_, c)| ('\u{7f}'..='\u{9f}').contains(c) || is_bidi_control(*c))
        {
            let (before, after) = rest.split_at(at);
            writer.write_all(before.as_bytes())?;
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = after.get(c.len_utf8()..).unwrap_or_default();
        }
        writer.write_all(rest.as_bytes())
    }
}

/// A writer that shows control characters other than tab and newline, and bidirectional
/// marks, as `?`.
#[derive(Debug)]
pub struct Printable<W: Write> {
    inner: W,
    /// The start of a character the last write ended in (it may be one to hide).
    held: Vec<u8>,
}

impl<W: Write> Printable<W> {
    pub const fn new(inner: W) -> Self {
        Self {
            inner,
            held: Vec::new(),
        }
    }
}

impl<W: Write> Write for Printable<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut bytes = std::mem::take(&mut self.held);
        bytes.extend_from_slice(buf);
        let mut out = Vec::with_capacity(bytes.len() + 1);
        let mut rest = bytes.as_slice();
        while let Some((&b, after)) = rest.split_first() {
            match b {
                b'\n' | b'\t' => out.push(b),
                0x00..=0x1F | 0x7F => out.push(b'?'),
                0xC2 | 0xD8 | 0xE2 => match hidden_sequence(rest) {
                    Ok(0) => out.push(b),
                    Ok(n) => {
                        out.push(b'?');
                        rest = rest.get(n..).unwrap_or_default();
                        continue;
                    }
                    Err(()) => {
                        self.held = rest.to_vec();
                        break;
                    }
                },
                _ => out.push(b),
            }
            rest = after;
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    /// A `write!` is one write to the inner writer, not one per piece of its format: stderr is
    /// unbuffered and other threads (`hmn serve`'s pollers, the library's diagnostics) write to
    /// it too, so a line written piecewise could be cut by theirs.
    fn write_fmt(&mut self, args: std::fmt::Arguments<'_>) -> io::Result<()> {
        match args.as_str() {
            Some(text) => self.write_all(text.as_bytes()),
            None => self.write_all(std::fmt::format(args).as_bytes()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.inner.write_all(&held)?;
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(parts: &[&[u8]]) -> Vec<u8> {
        let mut p = Printable::new(Vec::new());
        for part in parts {
            assert_eq!(p.write(part).unwrap(), part.len());
        }
        p.flush().unwrap();
        p.inner
    }

    /// Counts the writes it is given.
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_formatted_line_is_one_write() {
        let mut p = Printable::new(Writes(Vec::new()));
        let addr = "127.0.0.1:9400";
        writeln!(p, "hmn: serving metrics on http://{addr}/metrics").unwrap();
        writeln!(p, "plain").unwrap();
        assert_eq!(
            p.inner.0,
            vec![
                b"hmn: serving metrics on http://127.0.0.1:9400/metrics\n".to_vec(),
                b"plain\n".to_vec()
            ]
        );
    }

    #[test]
    fn escapes_and_other_controls_become_question_marks() {
        let hostile = "\u{1b}[2J\u{1b}[31mE\"\n}\u{7f}\u{9b}31m\tok é€\r";
        assert_eq!(
            String::from_utf8(through(&[hostile.as_bytes()])).unwrap(),
            "?[2J?[31mE\"\n}??31m\tok é€?"
        );
        // A C1 control split between two writes is caught; a plain 0xC2 character is kept.
        assert_eq!(through(&[b"a\xc2", b"\x9bb"]), b"a?b");
        assert_eq!(through(&[b"x\xc2", b"\xa9y"]), "x©y".as_bytes());
        assert_eq!(through(&["©".as_bytes()]), "©".as_bytes());
        assert_eq!(through(&[b"tail\xc2"]), b"tail\xc2", "held until flushed");
    }

    /// A RIGHT-TO-LEFT OVERRIDE (and the other reordering marks) in a name, or split
    /// between two writes of a stream, is `?`; other characters of those first bytes stay.
    #[test]
    fn bidirectional_marks_become_question_marks() {
        assert_eq!(printable("al\u{202e}ecil"), "al?ecil");
        assert_eq!(
            printable("\u{2066}a\u{2069}\u{200f}\u{061c}\u{202a}"),
            "?a????"
        );
        assert_eq!(printable("naïve – ok ؛"), "naïve – ok ؛");
        let rlo = "\u{202e}".as_bytes();
        assert_eq!(
            through(&["user ".as_bytes(), rlo, b" 29 GiB"]),
            b"user ? 29 GiB"
        );
        assert_eq!(through(&[b"a\xe2", b"\x80", b"\xaeb"]), b"a?b");
        assert_eq!(
            through(&[b"a\xe2\x80", b"\x94b"]),
            "a—b".as_bytes(),
            "an em dash stays"
        );
        assert_eq!(through(&[b"x\xe2"]), b"x\xe2", "held until flushed");
    }

    #[test]
    fn names_lose_every_control_character() {
        assert_eq!(printable("python3"), "python3");
        assert!(matches!(printable("python3"), Cow::Borrowed(_)));
        assert_eq!(printable("\u{1b}[2J\u{1b}[31mE\"\n}"), "?[2J?[31mE\"?}");
        assert_eq!(printable("a\tb\u{85}c"), "a?b?c");
    }

    /// `--json` keeps C1 controls and DEL exact, escaped, so the guard on hmn's output has
    /// nothing to replace (they came out as `?` before); text output still shows `?`.
    #[test]
    fn json_keeps_c1_controls_exact_and_escaped() {
        let name = "nvidia\u{85}smi \u{9b}31m del\u{7f} é€ \u{1b}[2J";
        let mut pretty = Vec::new();
        crate::view::json(&mut pretty, &serde_json::json!({ "command": name })).unwrap();
        let mut line = Vec::new();
        crate::view::json_line(&mut line, &[name]).unwrap();
        for bytes in [pretty, line] {
            let text = String::from_utf8(through(&[&bytes])).unwrap();
            assert_eq!(
                text.as_bytes(),
                bytes.as_slice(),
                "nothing for the guard to replace"
            );
            assert!(
                text.contains(r"\u0085") && text.contains(r"\u009b") && text.contains(r"\u007f"),
                "{text}"
            );
            assert!(text.contains(r"\u001b") && text.contains("é€"), "{text}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let back = v
                .get("command")
                .or_else(|| v.get(0))
                .and_then(|c| c.as_str());
            assert_eq!(back, Some(name));
        }
    }
}
