//! What `hmn top` reads from its terminal: keys, mouse reports and resizes, as crossterm's
//! events, without waiting (the terminal thread waits in `wake`).
//!
//! On Unix the view reads the terminal itself and makes the events with `keys`. crossterm's
//! reader (0.28) waits on the terminal with an edge-triggered epoll and, once a read of 1,024
//! bytes has given it an event, reads no more: what is left in the terminal waits for the next
//! input to arrive, and the view, told by its own poll(2) that input waits, woke again and
//! again for it, a core spent. 2,100 Down presses sent at once (tmux) left the selection on
//! row 1,366 of 2,000 (four reads' worth) until another key came, which moved it 341 rows on
//! (one read's worth): presses stranded, and lost for good to a user who sees no reason to
//! type more. Here every
//! byte the terminal has is read (up to 64 KiB at a time, then the rest at the next call), and
//! a sequence cut across two reads is kept until its rest comes.
//!
//! Elsewhere (the Windows console) crossterm's reader is used.

use std::io;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::Event;

#[cfg(unix)]
use super::keys::Keys;
#[cfg(unix)]
use super::wake;

/// The terminal's input, read as it comes.
pub struct Input {
    #[cfg(unix)]
    keys: Keys,
    /// Set by SIGWINCH: the terminal was resized.
    #[cfg(unix)]
    resized: Option<(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        signal_hook::SigId,
    )>,
    /// Whether the last call had an event (another may be queued).
    #[cfg(not(unix))]
    had: bool,
}

/// The most read from the terminal at one call: a flood of input is made into events and
/// done a part at a time, the view painted in between.
#[cfg(unix)]
const READ_AT_ONCE: usize = 64 * 1024;

impl Input {
    /// The terminal's input; on Unix, from now on a resize is caught.
    pub fn new() -> Self {
        #[cfg(unix)]
        {
            let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let resized = signal_hook::flag::register(libc::SIGWINCH, std::sync::Arc::clone(&flag))
                .ok()
                .map(|id| (flag, id));
            Self {
                keys: Keys::default(),
                resized,
            }
        }
        #[cfg(not(unix))]
        {
            Self { had: false }
        }
    }

    /// The next event, in the order they came, read without waiting; `None` when there is none
    /// (yet: an incomplete sequence waits for its rest, see [`Input::wait`]).
    pub fn next(&mut self) -> io::Result<Option<Event>> {
        #[cfg(unix)]
        {
            let now_resized = self
                .resized
                .as_ref()
                .is_some_and(|(f, _)| f.swap(false, std::sync::atomic::Ordering::SeqCst));
            if now_resized && let Ok((columns, rows)) = ratatui::crossterm::terminal::size() {
                return Ok(Some(Event::Resize(columns, rows)));
            }
            if !self.keys.ready() {
                self.read()?;
            }
            Ok(self.keys.next(Instant::now()))
        }
        #[cfg(not(unix))]
        {
            use ratatui::crossterm::event;
            self.had = event::poll(Duration::ZERO)?;
            if self.had {
                event::read().map(Some)
            } else {
                Ok(None)
            }
        }
    }

    /// Whether an event may be there without waiting for more input.
    pub fn ready(&self) -> bool {
        #[cfg(unix)]
        {
            self.keys.ready()
        }
        #[cfg(not(unix))]
        {
            self.had
        }
    }

    /// How long, from `now`, an incomplete sequence waits for its rest before it is decided
    /// (its ESC the Esc key): the terminal thread's wait ends by then. `None`: none waits.
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        #[cfg(unix)]
        {
            self.keys.wait().map(|at| {
                at.saturating_duration_since(now)
                    .max(Duration::from_millis(1))
            })
        }
        #[cfg(not(unix))]
        {
            let _ = now;
            None
        }
    }

    /// Reads what the terminal has, up to [`READ_AT_ONCE`], without waiting.
    #[cfg(unix)]
    fn read(&mut self) -> io::Result<()> {
        let mut buf = [0_u8; 4096];
        let mut read = 0;
        while read < READ_AT_ONCE
            && let Some(fd) = wake::terminal_input()
        {
            let n = unix::read(fd, &mut buf)?;
            // End of file: the terminal hung up, which the loop tells by itself.
            let Some(bytes) = buf.get(..n).filter(|b| !b.is_empty()) else {
                break;
            };
            self.keys.push(bytes, Instant::now());
            read += n;
        }
        Ok(())
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some((_, id)) = self.resized.take() {
            signal_hook::low_level::unregister(id);
        }
    }
}

#[cfg(unix)]
mod unix {
    // read(2) on a descriptor std does not own has no safe wrapper.
    #![allow(unsafe_code)]

    use std::io;
    use std::os::fd::RawFd;

    /// One read(2) of `fd` into `buf` (again when a signal interrupted it): how many bytes, 0
    /// at the end of the input or when nothing was there.
    pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is valid for writes of its length; read(2) writes at most that.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if let Ok(n) = usize::try_from(n) {
                return Ok(n);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                // Nothing there after all (a descriptor set non-blocking by another).
                io::ErrorKind::WouldBlock => return Ok(0),
                _ => return Err(e),
            }
        }
    }
}
