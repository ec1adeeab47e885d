//! The bytes a terminal sends for keys and mouse reports, made into crossterm's events: what
//! `hmn top` reads itself on Unix (see `input`), where crossterm's reader left presses unread.
//!
//! A read may end inside a sequence (the terminal, or tmux, wrote it in two parts): what is
//! incomplete at the end is kept for the next read, and only when nothing completes it for
//! [`ESC_WAIT`] is a lone ESC the Esc key (which quits the view). A Down arrow cut after its
//! ESC is thus a Down, not an Esc, a `[` and a `B`.
//!
//! Understood: printable characters (UTF-8), Enter, Tab, Backspace, the control keys (Ctrl-C,
//! Ctrl-Z), Alt with a key (ESC before it), the arrows, Home, End, Page Up and Down, Insert,
//! Delete, F1 to F12 (CSI and SS3 forms, with modifiers), and mouse reports (SGR, rxvt and
//! X10). Any other complete sequence is skipped whole, so that none of its bytes is taken for
//! a key.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{
    Event, KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

/// How long an incomplete sequence at the end of what was read waits for the rest before its
/// ESC counts as the Esc key: the rest of a sequence cut in two comes at once, a person's next
/// key does not come this soon after Esc.
pub const ESC_WAIT: Duration = Duration::from_millis(100);

/// The longest control sequence taken; a longer one without its final byte is skipped.
const LONGEST: usize = 64;

/// What the bytes at the start of the input are.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// An event, and how many bytes it took.
    Event(Event, usize),
    /// A sequence of this many bytes that the view has no use for.
    Skip(usize),
    /// The start of a sequence whose rest has not come yet.
    Incomplete,
}

/// Bytes read from the terminal and the events made from them, in order.
#[derive(Debug, Default)]
pub struct Keys {
    /// Bytes not made into events yet: an incomplete sequence at the end.
    bytes: Vec<u8>,
    /// When the incomplete sequence at the end was first seen incomplete.
    since: Option<Instant>,
    events: VecDeque<Event>,
}

impl Keys {
    /// Takes in bytes read at `now` and makes every complete event of them.
    pub fn push(&mut self, bytes: &[u8], now: Instant) {
        self.bytes.extend_from_slice(bytes);
        self.parse(now);
    }

    /// The next event, in the order the bytes came; an incomplete sequence that has waited
    /// [`ESC_WAIT`] by `now` is decided first (see [`Keys::wait`]).
    pub fn next(&mut self, now: Instant) -> Option<Event> {
        if self.events.is_empty() {
            self.parse(now);
        }
        self.events.pop_front()
    }

    /// Whether an event is ready without reading more.
    pub fn ready(&self) -> bool {
        !self.events.is_empty()
    }

    /// When an incomplete sequence is decided without its rest: its ESC as the Esc key (or a
    /// cut character dropped), what follows read anew. `None`: nothing waits.
    pub fn wait(&self) -> Option<Instant> {
        self.since.map(|s| s + ESC_WAIT)
    }

    fn parse(&mut self, now: Instant) {
        let mut at = 0;
        while let Some(rest) = self.bytes.get(at..).filter(|r| !r.is_empty()) {
            match parse(rest) {
                Parsed::Event(event, n) => {
                    self.events.push_back(event);
                    at += n;
                    self.since = None;
                }
                Parsed::Skip(n) => {
                    at += n.max(1);
                    self.since = None;
                }
                Parsed::Incomplete => {
                    let since = *self.since.get_or_insert(now);
                    if now < since + ESC_WAIT {
                        break;
                    }
                    // Waited long enough: a lone ESC is the Esc key; a cut character is
                    // dropped. What follows is read anew.
                    if rest.first() == Some(&0x1b) {
                        self.events.push_back(key(KeyCode::Esc, KeyModifiers::NONE));
                    }
                    at += 1;
                    self.since = None;
                }
            }
        }
        self.bytes.drain(..at.min(self.bytes.len()));
        if self.bytes.is_empty() {
            self.since = None;
        }
    }
}

fn key(code: KeyCode, modifiers: KeyModifiers) -> Event {
    Event::Key(KeyEvent::new(code, modifiers))
}

/// The event the bytes at the start of `b` (not empty) make.
fn parse(b: &[u8]) -> Parsed {
    match b {
        [] | [0x1b] => Parsed::Incomplete,
        [0x1b, b'[', rest @ ..] => csi(rest).map_len(2),
        [0x1b, b'O', rest @ ..] => ss3(rest).map_len(2),
        // ESC ESC: the first is the Esc key; the second starts what comes next.
        [0x1b, 0x1b, ..] => Parsed::Event(key(KeyCode::Esc, KeyModifiers::NONE), 1),
        // ESC before a key: Alt with it.
        [0x1b, rest @ ..] => match plain(rest) {
            Parsed::Event(Event::Key(mut k), n) => {
                k.modifiers |= KeyModifiers::ALT;
                Parsed::Event(Event::Key(k), n + 1)
            }
            other => other.map_len(1),
        },
        _ => plain(b),
    }
}

impl Parsed {
    /// The same, counting `n` bytes more before it.
    fn map_len(self, n: usize) -> Self {
        match self {
            Self::Event(e, len) => Self::Event(e, len + n),
            Self::Skip(len) => Self::Skip(len + n),
            Self::Incomplete => Self::Incomplete,
        }
    }
}

/// A byte that is not ESC: a control key or a character (UTF-8).
fn plain(b: &[u8]) -> Parsed {
    let Some(&first) = b.first() else {
        return Parsed::Incomplete;
    };
    let none = KeyModifiers::NONE;
    let control = KeyModifiers::CONTROL;
    let one = |code, modifiers| Parsed::Event(key(code, modifiers), 1);
    match first {
        b'\r' | b'\n' => one(KeyCode::Enter, none),
        b'\t' => one(KeyCode::Tab, none),
        0x7f | 0x08 => one(KeyCode::Backspace, none),
        0x00 => one(KeyCode::Char(' '), control),
        0x01..=0x1a => one(KeyCode::Char(char::from(first - 1 + b'a')), control),
        0x1c..=0x1f => one(KeyCode::Char(char::from(first - 0x1c + b'4')), control),
        0x1b => one(KeyCode::Esc, none),
        _ => character(b),
    }
}

/// A UTF-8 character at the start of `b`; an upper-case letter comes with Shift, as crossterm
/// reports it.
fn character(b: &[u8]) -> Parsed {
    let Some(&first) = b.first() else {
        return Parsed::Incomplete;
    };
    let len = match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return Parsed::Skip(1),
    };
    let Some(bytes) = b.get(..len) else {
        // A cut character, unless what came already is not UTF-8.
        return if b.iter().skip(1).all(|c| c & 0xc0 == 0x80) {
            Parsed::Incomplete
        } else {
            Parsed::Skip(1)
        };
    };
    let Some(c) = std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.chars().next())
    else {
        return Parsed::Skip(1);
    };
    let modifiers = if c.is_uppercase() {
        KeyModifiers::SHIFT
    } else {
        KeyModifiers::NONE
    };
    Parsed::Event(key(KeyCode::Char(c), modifiers), len)
}

/// An SS3 sequence, after `ESC O`: arrows, Home, End and F1 to F4 as some terminals send them
/// (in application cursor mode).
fn ss3(b: &[u8]) -> Parsed {
    let Some(&last) = b.first() else {
        return Parsed::Incomplete;
    };
    match final_key(last) {
        Some(code) => Parsed::Event(key(code, KeyModifiers::NONE), 1),
        None if last == b'M' => Parsed::Event(key(KeyCode::Enter, KeyModifiers::NONE), 1),
        None => Parsed::Skip(1),
    }
}

/// The key a CSI or SS3 sequence ending in `last` (with no number, or 1) names.
fn final_key(last: u8) -> Option<KeyCode> {
    Some(match last {
        b'A' => KeyCode::Up,
        b'B' => KeyCode::Down,
        b'C' => KeyCode::Right,
        b'D' => KeyCode::Left,
        b'H' => KeyCode::Home,
        b'F' => KeyCode::End,
        b'P' => KeyCode::F(1),
        b'Q' => KeyCode::F(2),
        b'R' => KeyCode::F(3),
        b'S' => KeyCode::F(4),
        _ => return None,
    })
}

/// A CSI sequence, after `ESC [`: parameters, intermediates and a final byte.
fn csi(b: &[u8]) -> Parsed {
    // X10 mouse reports: `ESC [ M` and three bytes, each 32 more than its number.
    if let [b'M', rest @ ..] = b {
        return match rest {
            [cb, cx, cy, ..] => {
                x10_mouse(*cb, *cx, *cy).map_or(Parsed::Skip(4), |e| Parsed::Event(e, 4))
            }
            _ => Parsed::Incomplete,
        };
    }
    let mut end = None;
    for (i, &c) in b.iter().enumerate() {
        match c {
            0x20..=0x3f => {}
            0x40..=0x7e => {
                end = Some(i);
                break;
            }
            // Not part of a sequence: what came before it is skipped, it is read anew.
            _ => return Parsed::Skip(i),
        }
        if i + 1 >= LONGEST {
            return Parsed::Skip(i + 1);
        }
    }
    let Some((params, &last)) = end.and_then(|end| Some((b.get(..end)?, b.get(end)?))) else {
        return Parsed::Incomplete;
    };
    let len = params.len() + 1;
    if let [b'<', sgr @ ..] = params {
        return sgr_mouse(sgr, last).map_or(Parsed::Skip(len), |e| Parsed::Event(e, len));
    }
    let numbers = numbers(params);
    let number = |i: usize| numbers.get(i).copied().flatten();
    let modifiers = modifiers(number(1));
    let code = match last {
        b'~' => match number(0) {
            Some(1 | 7) => Some(KeyCode::Home),
            Some(2) => Some(KeyCode::Insert),
            Some(3) => Some(KeyCode::Delete),
            Some(4 | 8) => Some(KeyCode::End),
            Some(5) => Some(KeyCode::PageUp),
            Some(6) => Some(KeyCode::PageDown),
            Some(n @ 11..=15) => u8::try_from(n - 10).ok().map(KeyCode::F),
            Some(n @ 17..=21) => u8::try_from(n - 11).ok().map(KeyCode::F),
            Some(n @ 23..=24) => u8::try_from(n - 12).ok().map(KeyCode::F),
            _ => None,
        },
        b'Z' => {
            return Parsed::Event(key(KeyCode::BackTab, KeyModifiers::SHIFT), len);
        }
        // rxvt's mouse reports: `ESC [ b ; x ; y M`, b 32 more than its number.
        b'M' if numbers.len() == 3 => {
            return match (number(0), number(1), number(2)) {
                (Some(cb), Some(x), Some(y)) => cb
                    .checked_sub(32)
                    .and_then(|cb| mouse(cb, x, y, false))
                    .map_or(Parsed::Skip(len), |e| Parsed::Event(e, len)),
                _ => Parsed::Skip(len),
            };
        }
        _ => final_key(last),
    };
    code.map_or(Parsed::Skip(len), |code| {
        Parsed::Event(key(code, modifiers), len)
    })
}

/// The numbers of a CSI sequence's parameters (`1;5`), `None` for one empty or not a number
/// (a sub-parameter after `:` is left out).
fn numbers(params: &[u8]) -> Vec<Option<u16>> {
    if params.is_empty() {
        return Vec::new();
    }
    params
        .split(|&c| c == b';')
        .map(|p| {
            let p = p.split(|&c| c == b':').next().unwrap_or_default();
            std::str::from_utf8(p).ok()?.parse().ok()
        })
        .collect()
}

/// The modifiers a key's second parameter names: 1 plus Shift 1, Alt 2, Ctrl 4.
fn modifiers(n: Option<u16>) -> KeyModifiers {
    let bits = n.map_or(0, |n| n.saturating_sub(1));
    let mut m = KeyModifiers::NONE;
    if bits & 1 != 0 {
        m |= KeyModifiers::SHIFT;
    }
    if bits & 2 != 0 {
        m |= KeyModifiers::ALT;
    }
    if bits & 4 != 0 {
        m |= KeyModifiers::CONTROL;
    }
    m
}

/// An SGR mouse report, after `ESC [ <`: `b;x;y` and `M` (pressed) or `m` (released).
fn sgr_mouse(params: &[u8], last: u8) -> Option<Event> {
    let n = numbers(params);
    let [Some(cb), Some(x), Some(y)] = n.as_slice() else {
        return None;
    };
    match last {
        b'M' => mouse(*cb, *x, *y, false),
        b'm' => mouse(*cb, *x, *y, true),
        _ => None,
    }
}

/// An X10 mouse report's three bytes.
fn x10_mouse(cb: u8, cx: u8, cy: u8) -> Option<Event> {
    let n = |c: u8| c.checked_sub(32).map(u16::from);
    mouse(n(cb)?, n(cx)?, n(cy)?, false)
}

/// A mouse report: the button and modifiers in `cb`, the cell (1-based) at `x`, `y`;
/// `released` where the report says so (SGR), else a release is button 3.
fn mouse(cb: u16, x: u16, y: u16, released: bool) -> Option<Event> {
    let button = match cb & 0b11 {
        1 => MouseButton::Middle,
        2 => MouseButton::Right,
        _ => MouseButton::Left,
    };
    let dragged = cb & 32 != 0;
    let kind = if cb & 64 != 0 {
        match cb & 0b11 {
            0 => MouseEventKind::ScrollUp,
            1 => MouseEventKind::ScrollDown,
            2 => MouseEventKind::ScrollLeft,
            _ => MouseEventKind::ScrollRight,
        }
    } else if dragged {
        if cb & 0b11 == 3 {
            MouseEventKind::Moved
        } else {
            MouseEventKind::Drag(button)
        }
    } else if released || cb & 0b11 == 3 {
        MouseEventKind::Up(button)
    } else {
        MouseEventKind::Down(button)
    };
    let mut modifiers = KeyModifiers::NONE;
    if cb & 4 != 0 {
        modifiers |= KeyModifiers::SHIFT;
    }
    if cb & 8 != 0 {
        modifiers |= KeyModifiers::ALT;
    }
    if cb & 16 != 0 {
        modifiers |= KeyModifiers::CONTROL;
    }
    Some(Event::Mouse(MouseEvent {
        kind,
        column: x.checked_sub(1)?,
        row: y.checked_sub(1)?,
        modifiers,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(code: KeyCode) -> Event {
        key(code, KeyModifiers::NONE)
    }

    /// Every event of `chunks`, read one after another at once (no wait in between), then
    /// after the wait for an incomplete end.
    fn events(chunks: &[&[u8]]) -> Vec<Event> {
        let now = Instant::now();
        let mut keys = Keys::default();
        let mut out = Vec::new();
        for c in chunks {
            keys.push(c, now);
            while let Some(e) = keys.next(now) {
                out.push(e);
            }
        }
        while let Some(e) = keys.next(now + ESC_WAIT) {
            out.push(e);
        }
        out
    }

    #[test]
    fn keys_the_view_knows() {
        use KeyCode::{
            BackTab, Backspace, Char, Down, End, Enter, F, Home, Left, PageDown, PageUp, Right,
            Tab, Up,
        };
        let got = events(&[b"\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F\x1b[5~\x1b[6~\x1b[1~\x1b[4~"]);
        let want = [
            Up, Down, Right, Left, Home, End, PageUp, PageDown, Home, End,
        ];
        assert_eq!(got, want.map(k).to_vec());
        let got = events(&[b"\x1bOA\x1bOB\x1bOH\x1bOF\x1b[20~\x1bOP\r\t\x7fq/G\x1b[Z"]);
        let want = vec![
            k(Up),
            k(Down),
            k(Home),
            k(End),
            k(F(9)),
            k(F(1)),
            k(Enter),
            k(Tab),
            k(Backspace),
            k(Char('q')),
            k(Char('/')),
            key(Char('G'), KeyModifiers::SHIFT),
            key(BackTab, KeyModifiers::SHIFT),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn control_alt_and_modified_keys() {
        let got = events(&[b"\x03\x1a\x1bq\x1b[1;5B\x1b[3;2~"]);
        let want = vec![
            key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            key(KeyCode::Char('z'), KeyModifiers::CONTROL),
            key(KeyCode::Char('q'), KeyModifiers::ALT),
            key(KeyCode::Down, KeyModifiers::CONTROL),
            key(KeyCode::Delete, KeyModifiers::SHIFT),
        ];
        assert_eq!(got, want);
    }

    /// A sequence cut anywhere, even right after its ESC, is one key once its rest comes; a
    /// character cut in its UTF-8 bytes is one character.
    #[test]
    fn a_sequence_cut_across_reads_is_one_key() {
        let all = b"\x1b[B\x1b[6~\x1b[<65;5;20M\xc3\xa9\x1bOA";
        let whole = events(&[all]);
        assert_eq!(whole.len(), 5, "{whole:?}");
        for cut in 0..=all.len() {
            let (a, b) = all.split_at(cut);
            assert_eq!(events(&[a, b]), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = all.chunks(1).collect();
        assert_eq!(events(&bytes), whole, "a byte a read");
    }

    /// 2,100 Down arrows in reads of any size make 2,100 Downs, and nothing else.
    #[test]
    fn every_press_of_a_burst_counts() {
        let burst = b"\x1b[B".repeat(2100);
        for size in [1, 2, 5, 1000, 1024, 4095, 10_000] {
            let chunks: Vec<&[u8]> = burst.chunks(size).collect();
            let got = events(&chunks);
            assert_eq!(got.len(), 2100, "reads of {size}");
            assert!(
                got.iter().all(|e| *e == k(KeyCode::Down)),
                "reads of {size}"
            );
        }
    }

    /// A lone ESC is the Esc key only once nothing has followed it for `ESC_WAIT`; ESC ESC is
    /// one Esc and what follows the second.
    #[test]
    fn a_lone_esc_waits_for_what_may_follow() {
        let t = Instant::now();
        let mut keys = Keys::default();
        keys.push(b"\x1b", t);
        assert_eq!(keys.next(t), None);
        assert_eq!(keys.wait(), Some(t + ESC_WAIT));
        assert_eq!(keys.next(t + ESC_WAIT / 2), None);
        assert_eq!(keys.next(t + ESC_WAIT), Some(k(KeyCode::Esc)));
        assert_eq!(keys.wait(), None);
        assert_eq!(keys.next(t + ESC_WAIT), None);
        // The wait counts from when the sequence was first seen incomplete.
        keys.push(b"\x1b[", t);
        keys.push(b"1;5", t + ESC_WAIT / 2);
        assert_eq!(keys.wait(), Some(t + ESC_WAIT));
        keys.push(b"A", t + ESC_WAIT / 2);
        assert_eq!(
            keys.next(t + ESC_WAIT / 2),
            Some(key(KeyCode::Up, KeyModifiers::CONTROL))
        );
        assert_eq!(keys.wait(), None);
        assert_eq!(
            events(&[b"\x1b\x1b[A"]),
            vec![k(KeyCode::Esc), k(KeyCode::Up)]
        );
        // Waited out, a cut sequence is an Esc and the rest read as it is.
        assert_eq!(
            events(&[b"\x1b[1"]),
            vec![
                k(KeyCode::Esc),
                k(KeyCode::Char('[')),
                k(KeyCode::Char('1'))
            ]
        );
    }

    #[test]
    fn mouse_reports() {
        let at = |kind, column, row| {
            Event::Mouse(MouseEvent {
                kind,
                column,
                row,
                modifiers: KeyModifiers::NONE,
            })
        };
        let got = events(&[b"\x1b[<65;5;20M\x1b[<64;1;1M\x1b[<0;3;7M\x1b[<0;3;7m"]);
        let want = vec![
            at(MouseEventKind::ScrollDown, 4, 19),
            at(MouseEventKind::ScrollUp, 0, 0),
            at(MouseEventKind::Down(MouseButton::Left), 2, 6),
            at(MouseEventKind::Up(MouseButton::Left), 2, 6),
        ];
        assert_eq!(got, want);
        // X10 and rxvt forms.
        let got = events(&[b"\x1b[M a(\x1b[96;5;20M"]);
        let want = vec![
            at(MouseEventKind::Down(MouseButton::Left), 64, 7),
            at(MouseEventKind::ScrollUp, 4, 19),
        ];
        assert_eq!(got, want);
    }

    /// Sequences the view has no use for (focus reports, a cursor report, pasted text's
    /// markers, garbage) are skipped whole: none of their bytes becomes a key.
    #[test]
    fn other_sequences_are_skipped_whole() {
        let got = events(&[b"\x1b[I\x1b[O\x1b[200~\x1b[?1;2c\x1b[99~\x1bO9x"]);
        assert_eq!(got, vec![k(KeyCode::Char('x'))]);
        let long = [b"\x1b[".as_slice(), &[b'1'; 100], b"x"].concat();
        let got = events(&[&long]);
        assert!(got.iter().all(|e| *e != k(KeyCode::Esc)), "{got:?}");
        assert_eq!(got.last(), Some(&k(KeyCode::Char('x'))));
        // Not UTF-8: skipped.
        assert_eq!(
            events(&[b"\xff\xc3(q"]),
            vec![k(KeyCode::Char('(')), k(KeyCode::Char('q'))]
        );
    }
}
