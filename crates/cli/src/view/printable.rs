//! Text for a terminal, whatever its sources put in it: any local user can name a process
//! `\x1b[2J…`, and nvidia-smi's and the drivers' words reach the messages. As `ps` does, control
//! characters are shown as `?`: in a name every one of them (a tab or a newline would break a
//! table's rows), in the streams hmn writes every one but tab and newline (ESC, the other C0
//! controls, DEL, and the C1 controls, which some terminals obey too).

use std::borrow::Cow;
use std::io::{self, Write};

/// `s` with every control character as `?`.
pub fn printable(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_control) {
        Cow::Owned(
            s.chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(s)
    }
}

/// A JSON formatter (`F`: pretty or compact) that also escapes DEL and the C1 controls
/// (U+007F to U+009F) as `\u00XX`, which `serde_json` writes raw: JSON keeps every name exact, and
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
            .find(|(_, c)| ('\u{7f}'..='\u{9f}').contains(c))
        {
            let (before, after) = rest.split_at(at);
            writer.write_all(before.as_bytes())?;
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = after.get(c.len_utf8()..).unwrap_or_default();
        }
        writer.write_all(rest.as_bytes())
    }
}

/// A writer that shows control characters other than tab and newline as `?`.
#[derive(Debug)]
pub struct Printable<W: Write> {
    inner: W,
    /// A 0xC2 byte that ended the last write: with the next byte it may be a C1 control.
    held: bool,
}

impl<W: Write> Printable<W> {
    pub const fn new(inner: W) -> Self {
        Self { inner, held: false }
    }
}

impl<W: Write> Write for Printable<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut out = Vec::with_capacity(buf.len() + 1);
        let mut bytes = buf.iter().copied().peekable();
        if self.held {
            self.held = false;
            if bytes.next_if(|b| (0x80..=0x9F).contains(b)).is_some() {
                out.push(b'?');
            } else {
                out.push(0xC2);
            }
        }
        while let Some(b) = bytes.next() {
            match b {
                b'\n' | b'\t' => out.push(b),
                0x00..=0x1F | 0x7F => out.push(b'?'),
                // U+0080 to U+009F, the C1 controls, are 0xC2 0x80 to 0xC2 0x9F in UTF-8.
                0xC2 => match bytes.peek() {
                    Some(0x80..=0x9F) => {
                        bytes.next();
                        out.push(b'?');
                    }
                    Some(_) => out.push(b),
                    None => self.held = true,
                },
                _ => out.push(b),
            }
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.held {
            self.held = false;
            self.inner.write_all(&[0xC2])?;
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
