//! Suspending `hmn top` as full-screen tools do. On Ctrl-Z (raw mode turns the terminal's own
//! suspend key into a key press) or SIGTSTP (`kill -TSTP`), the terminal is given back (main
//! screen, cursor shown, cooked mode) before the process stops; when it is continued (`fg`,
//! SIGCONT, also after a SIGSTOP nobody could catch) raw mode and the alternate screen come
//! back and the whole view is drawn again.
//!
//! Where SIGTSTP was ignored when `hmn top` started (a shell without job control), it stays
//! ignored and Ctrl-Z does nothing: nothing could bring the process back.

use std::io;

use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, enable_raw_mode};

use super::term::{self, Term};

/// The stop and continue signals, caught while the view runs.
pub struct JobControl {
    flags: Option<signals::Flags>,
}

impl JobControl {
    /// Catches SIGTSTP and SIGCONT from now on (on Unix, unless SIGTSTP is ignored).
    pub fn install() -> Self {
        Self {
            flags: signals::Flags::install(),
        }
    }

    /// Whether SIGTSTP and SIGCONT are caught (Unix, SIGTSTP not ignored): the signals the
    /// view must wake for.
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    pub fn signals(&self) -> &'static [i32] {
        #[cfg(unix)]
        if self.flags.is_some() {
            return &[libc::SIGTSTP, libc::SIGCONT];
        }
        &[]
    }

    /// Whether a SIGTSTP came since the last call.
    pub fn stop_requested(&self) -> bool {
        self.flags.as_ref().is_some_and(signals::Flags::take_stop)
    }

    /// Whether a SIGCONT came since the last call (the process was stopped and continued).
    pub fn continued(&self) -> bool {
        self.flags.as_ref().is_some_and(signals::Flags::take_cont)
    }

    /// Gives the terminal back, stops this process as the terminal's suspend key would, and
    /// once it is continued takes the terminal again for a full redraw. Does nothing where the
    /// process cannot be stopped (not Unix, SIGTSTP ignored).
    pub fn suspend(&self, terminal: &mut Term) -> io::Result<()> {
        if self.flags.is_none() {
            return Ok(());
        }
        let _ = terminal.show_cursor();
        term::mouse(false);
        term::give_back();
        signals::stop_self();
        self.continued();
        resume(terminal)
    }
}

/// Takes the terminal again after the process was stopped (the shell put it back in cooked
/// mode, on the main screen, and may have written to it): raw mode, the alternate screen, and
/// a cleared buffer so the next draw repaints every cell.
pub fn resume(terminal: &mut Term) -> io::Result<()> {
    enable_raw_mode()?;
    execute!(io::stdout(), EnterAlternateScreen)?;
    term::mouse(true);
    terminal.hide_cursor()?;
    terminal.clear()
}

#[cfg(unix)]
mod signals {
    #![allow(unsafe_code)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use signal_hook::SigId;
    use signal_hook::consts::{SIGCONT, SIGTSTP};

    pub struct Flags {
        stop: Arc<AtomicBool>,
        cont: Arc<AtomicBool>,
        ids: Vec<SigId>,
    }

    impl Flags {
        /// `None` when SIGTSTP is ignored (or its disposition cannot be read).
        pub fn install() -> Option<Self> {
            if ignored(libc::SIGTSTP)? {
                return None;
            }
            let mut flags = Self {
                stop: Arc::new(AtomicBool::new(false)),
                cont: Arc::new(AtomicBool::new(false)),
                ids: Vec::new(),
            };
            // One that fails to register drops `flags`, which unregisters the other.
            for (signal, flag) in [
                (SIGTSTP, Arc::clone(&flags.stop)),
                (SIGCONT, Arc::clone(&flags.cont)),
            ] {
                flags
                    .ids
                    .push(signal_hook::flag::register(signal, flag).ok()?);
            }
            Some(flags)
        }

        pub fn take_stop(&self) -> bool {
            self.stop.swap(false, Ordering::SeqCst)
        }

        pub fn take_cont(&self) -> bool {
            self.cont.swap(false, Ordering::SeqCst)
        }
    }

    impl Drop for Flags {
        fn drop(&mut self) {
            for id in self.ids.drain(..) {
                signal_hook::low_level::unregister(id);
            }
        }
    }

    /// Whether `signal`'s disposition is "ignore"; `None` when it cannot be read.
    fn ignored(signal: libc::c_int) -> Option<bool> {
        // SAFETY: all-zero bytes are a valid sigaction (a plain C struct).
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `now` is a valid out-parameter; a null new action only reads.
        let rc = unsafe { libc::sigaction(signal, std::ptr::null(), &raw mut now) };
        (rc == 0).then_some(now.sa_sigaction == libc::SIG_IGN)
    }

    /// Stops this process with SIGTSTP's default action, as the terminal's suspend key does
    /// (the shell reports "Stopped"), and returns once it is continued. The caught handler is
    /// put aside for that moment and put back after.
    pub fn stop_self() {
        // SAFETY: sigaction reads and writes the structs given, which live across the calls;
        // raise sends a signal to this thread. No Rust state is touched by the default action.
        unsafe {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            let mut caught: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGTSTP, &raw const default, &raw mut caught) != 0 {
                libc::raise(libc::SIGSTOP);
                return;
            }
            libc::raise(libc::SIGTSTP);
            libc::sigaction(libc::SIGTSTP, &raw const caught, std::ptr::null_mut());
        }
    }
}

/// No job control: nothing stops the process from its terminal.
#[cfg(not(unix))]
#[allow(clippy::unused_self, clippy::unnecessary_wraps)]
mod signals {
    pub enum Flags {}

    impl Flags {
        pub fn install() -> Option<Self> {
            None
        }

        pub fn take_stop(&self) -> bool {
            match *self {}
        }

        pub fn take_cont(&self) -> bool {
            match *self {}
        }
    }

    pub fn stop_self() {}
}
