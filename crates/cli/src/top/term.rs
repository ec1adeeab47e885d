//! The view's terminal: crossterm on standard output, through a buffer that holds a whole
//! frame so that each paint reaches the terminal in one write.
//!
//! ratatui's `try_init` paints through `Stdout`, whose line buffer is 1 KiB: a paint with no
//! newline in it went out in 1,024-byte writes (ten for a whole frame at 160x45, by `strace`),
//! and a terminal (or tmux, and a test reading tmux's screen) could show half a frame, the new
//! rows above the old. Here the frame is kept until the painter flushes it, then written at
//! once (`Stdout` hands a write longer than its own buffer straight to the terminal).

use std::io::{self, BufWriter, Stdout, Write as _};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, enable_raw_mode};

/// The terminal `hmn top` draws on.
pub type Term = Terminal<CrosstermBackend<BufWriter<Stdout>>>;

/// Room for a whole frame: a changed row is about 400 bytes at 160 columns with its colours,
/// so 64 KiB holds a whole frame of 160x45 several times over; a larger frame goes out in
/// pieces of this size.
const FRAME_BYTES: usize = 64 * 1024;

/// Takes the terminal as ratatui's `try_init` does (raw mode, the alternate screen, a panic
/// hook that gives the terminal back before the message is printed), painting through a
/// buffer of [`FRAME_BYTES`].
pub fn take() -> io::Result<Term> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        give_back();
        hook(info);
    }));
    enable_raw_mode()?;
    execute!(io::stdout(), EnterAlternateScreen)?;
    Terminal::new(CrosstermBackend::new(BufWriter::with_capacity(
        FRAME_BYTES,
        io::stdout(),
    )))
}

/// Gives the terminal back (cooked mode, the main screen), as ratatui's `restore` does, but
/// says a failure with a write that may fail: `restore` prints it with `eprintln!`, which
/// panics when standard error is a terminal that hung up, and the process then aborted (status
/// 134 where 129 was due).
pub fn give_back() {
    if let Err(e) = ratatui::try_restore() {
        let _ = writeln!(
            io::stderr(),
            "hmn top: could not give the terminal back: {e}"
        );
    }
}

/// Puts the terminal back as it was (main screen, cooked mode, cursor shown) when dropped:
/// on return, on error, and when a panic unwinds (the panic hook does it too).
pub struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        mouse(false);
        give_back();
    }
}

/// Mouse reports on or off (the wheel scrolls, a click selects); best effort: a terminal
/// without them still has the keys.
pub fn mouse(on: bool) {
    let _ = if on {
        execute!(io::stdout(), EnableMouseCapture)
    } else {
        execute!(io::stdout(), DisableMouseCapture)
    };
}
