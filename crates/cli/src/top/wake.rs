//! Waking `hmn top`'s threads when something happens instead of polling for it. Each thread
//! sleeps on its own wake socket (a non-blocking socket pair): the signals it must answer write
//! to it (through signal-hook's pipe action), the sampling thread writes to the terminal
//! thread's when a refresh is ready, and the terminal thread also wakes for input on the
//! terminal. So at a refresh a second, each thread wakes once a second, where sleeping in
//! slices (200 ms, 20 ms while a refresh was due) woke them ten times.
//!
//! Where the socket pair cannot be made (or off Unix), the waits fall back to slices of at
//! most a quarter of a second, the old behaviour.

use std::io;
use std::time::Duration;

#[cfg(not(unix))]
use ratatui::crossterm::event;

/// The longest sleep without a wake socket: how soon a signal or a refresh is seen then.
const SLICE: Duration = Duration::from_millis(250);

/// The signals that end `hmn top` (see `Stop`), which both threads wake for.
#[cfg(unix)]
pub const STOP_SIGNALS: &[i32] = &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
#[cfg(not(unix))]
pub const STOP_SIGNALS: &[i32] = &[];

/// One thread's wake socket and the signals registered to write to it.
pub struct Wake {
    #[cfg(unix)]
    pair: Option<unix::Pair>,
}

/// Wakes the thread whose [`Wake`] made it.
#[derive(Clone)]
pub struct Waker {
    #[cfg(unix)]
    writer: Option<std::sync::Arc<std::os::unix::net::UnixStream>>,
}

impl Wake {
    /// A wake socket that each of `signals` (their numbers) writes to when it comes.
    pub fn new(signals: &[i32]) -> Self {
        #[cfg(unix)]
        {
            Self {
                pair: unix::Pair::new(signals).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = signals;
            Self {}
        }
    }

    /// What another thread calls to wake this one.
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    pub fn waker(&self) -> Waker {
        Waker {
            #[cfg(unix)]
            writer: self.pair.as_ref().map(|p| std::sync::Arc::clone(&p.writer)),
        }
    }

    /// Sleeps until woken, one of the signals, or `timeout`, whichever comes first (at most
    /// [`SLICE`] without a wake socket).
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    pub fn sleep(&self, timeout: Duration) {
        #[cfg(unix)]
        if let Some(pair) = &self.pair {
            pair.wait([None, None], Some(timeout));
            return;
        }
        std::thread::sleep(timeout.min(SLICE));
    }

    /// The terminal thread's wait: until input on the terminal, a wake, one of the signals,
    /// `timer` firing, `timeout` (`None`: no timeout; not used where `timer` works, as the timer
    /// holds the deadline), or `soon` (an incomplete key's wait, see `input`), whichever comes
    /// first. Afterwards [`terminal_gone`] tells whether the terminal hung up, and if not,
    /// reading the input whether a key came (a resize comes as a signal, not as input).
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    #[cfg_attr(unix, allow(clippy::unnecessary_wraps))]
    pub fn wait_terminal(
        &self,
        timeout: Option<Duration>,
        soon: Option<Duration>,
        timer: &LateTimer,
    ) -> io::Result<()> {
        #[cfg(unix)]
        {
            let first = |t: Option<Duration>| match (t, soon) {
                (Some(t), Some(s)) => Some(t.min(s)),
                (t, s) => t.or(s),
            };
            if let Some(pair) = &self.pair {
                let timeout = if timer.works() { None } else { timeout };
                pair.wait([unix::terminal_fd(), timer.fd()], first(timeout));
            } else {
                // No wake socket: input on the terminal, or a slice.
                let slice = first(timeout).map_or(SLICE, |t| t.min(SLICE));
                unix::wait_for_input(unix::terminal_fd(), slice);
            }
            Ok(())
        }
        #[cfg(not(unix))]
        {
            let _ = (timer, soon);
            // crossterm is not asked about a terminal that hung up (see `terminal_gone`).
            if terminal_gone() {
                return Ok(());
            }
            event::poll(timeout.map_or(SLICE, |t| t.min(SLICE))).map(|_| ())
        }
    }
}

/// Whether the terminal the view reads keys from hung up (its window closed, the connection
/// to it dropped, its tmux server killed), asked without waiting. crossterm must not be asked
/// for an event then: on a terminal at its end its reader reads nothing, again and again,
/// and never returns, a core spent and no signal looked at (crossterm's issue 793). Always
/// `false` off Unix.
pub fn terminal_gone() -> bool {
    #[cfg(unix)]
    {
        unix::terminal_fd().is_some_and(|fd| unix::hung_up(unix::poll_now(fd)))
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// The terminal the view reads keys from when input waits on it (asked without waiting):
/// what to read. `None`: no input, no terminal, or one that hung up.
#[cfg(unix)]
pub fn terminal_input() -> Option<std::os::fd::RawFd> {
    let fd = unix::terminal_fd()?;
    let said = unix::poll_now(fd);
    (said & libc::POLLIN != 0 && !unix::hung_up(said)).then_some(fd)
}

impl Waker {
    /// Wakes the thread (a byte on its socket; when the socket is full, it is awake already).
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    pub fn wake(&self) {
        #[cfg(unix)]
        if let Some(w) = &self.writer {
            use std::io::Write as _;
            let _ = (&**w).write(&[1]);
        }
    }
}

/// The deadline of a late refresh, for the terminal thread to sleep on: set by whichever
/// thread drew last (the sampling thread, after each refresh it draws), so that the terminal
/// thread sleeps through refreshes instead of waking at each to move its deadline. A
/// `timerfd` on Linux; elsewhere there is none, and the terminal thread's wait times out.
#[derive(Debug)]
pub struct LateTimer {
    #[cfg(target_os = "linux")]
    fd: Option<std::os::fd::OwnedFd>,
}

impl Default for LateTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl LateTimer {
    /// A timer, not set; one that cannot be made does not work (see [`LateTimer::works`]).
    pub fn new() -> Self {
        Self {
            #[cfg(target_os = "linux")]
            fd: linux::timer(),
        }
    }

    /// Whether the timer works; else a wait must time out by itself.
    #[cfg(unix)]
    #[cfg_attr(not(target_os = "linux"), allow(clippy::unused_self))]
    pub fn works(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.fd.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Fires once, `after` from now (`None`: never). Setting it again also takes back a
    /// firing that no wait has seen yet.
    #[cfg_attr(not(target_os = "linux"), allow(clippy::unused_self))]
    pub fn set(&self, after: Option<Duration>) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            linux::set(fd, after);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = after;
    }

    /// The descriptor a wait polls for the firing.
    #[cfg(unix)]
    #[cfg_attr(not(target_os = "linux"), allow(clippy::unused_self))]
    fn fd(&self) -> Option<std::os::fd::RawFd> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            self.fd.as_ref().map(AsRawFd::as_raw_fd)
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    // timerfd(2) has no wrapper in std.
    #![allow(unsafe_code)]

    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
    use std::time::Duration;

    /// A non-blocking monotonic timerfd, not set; `None` when the kernel refuses one.
    pub fn timer() -> Option<OwnedFd> {
        // SAFETY: timerfd_create takes a clock and flags and returns a new descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        // SAFETY: `fd` is a descriptor just opened here and owned by nobody else.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Sets `fd` to fire once after `after` (at least a nanosecond: zero would disarm it), or
    /// disarms it; either way a firing not yet read is taken back.
    // `c_long` is 32 bits on 32-bit targets, where a nanosecond count may not fit.
    #[allow(clippy::unnecessary_fallible_conversions)]
    pub fn set(fd: &OwnedFd, after: Option<Duration>) {
        let value = after.map_or(
            libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            |d| {
                let d = d.max(Duration::from_nanos(1));
                libc::timespec {
                    tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
                    tv_nsec: libc::c_long::try_from(d.subsec_nanos()).unwrap_or(0),
                }
            },
        );
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
        let _ = unsafe {
            libc::timerfd_settime(fd.as_raw_fd(), 0, &raw const spec, std::ptr::null_mut())
        };
    }
}

#[cfg(unix)]
mod unix {
    // poll(2) has no safe wrapper in std or libc.
    #![allow(unsafe_code)]

    use std::fs::File;
    use std::io::{self, Read as _};
    use std::os::fd::{AsRawFd, RawFd};
    use std::os::unix::net::UnixStream;
    use std::sync::{Arc, OnceLock};
    use std::time::Duration;

    use signal_hook::SigId;

    pub struct Pair {
        reader: UnixStream,
        pub writer: Arc<UnixStream>,
        ids: Vec<SigId>,
    }

    impl Pair {
        pub fn new(signals: &[i32]) -> io::Result<Self> {
            let (reader, writer) = UnixStream::pair()?;
            reader.set_nonblocking(true)?;
            writer.set_nonblocking(true)?;
            let mut pair = Self {
                reader,
                writer: Arc::new(writer),
                ids: Vec::new(),
            };
            for &signal in signals {
                // The action writes with send(2) and MSG_DONTWAIT, from the handler.
                let id = signal_hook::low_level::pipe::register(signal, pair.writer.try_clone()?)?;
                pair.ids.push(id);
            }
            Ok(pair)
        }

        /// Waits for a byte on the socket or input on one of `also`, at most `timeout`; takes
        /// every byte waiting on the socket, so the next wait sleeps again.
        pub fn wait(&self, also: [Option<RawFd>; 2], timeout: Option<Duration>) {
            let polled = |fd: Option<RawFd>| libc::pollfd {
                fd: fd.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            };
            let [a, b] = also;
            let mut fds = [polled(Some(self.reader.as_raw_fd())), polled(a), polled(b)];
            // A negative fd is skipped by poll(2); a timeout too long for an int waits forever,
            // as none does.
            let ms = timeout.map_or(-1, |t| {
                // Rounded up: a wake a little early would find nothing due and sleep 0 ms.
                let ms = t.as_micros().div_ceil(1000);
                libc::c_int::try_from(ms).unwrap_or(-1)
            });
            // SAFETY: `fds` is a valid array of three pollfd for the length given; poll(2)
            // only writes their revents.
            let woke = unsafe { libc::poll(fds.as_mut_ptr(), 3, ms) };
            // A timeout, or input only: nothing to take (a failed poll takes what may be there).
            if woke >= 0 && fds[0].revents == 0 {
                return;
            }
            let mut sink = [0_u8; 64];
            while matches!((&self.reader).read(&mut sink), Ok(n) if n > 0) {}
        }
    }

    /// What poll(2) says of `fd` at once (its `revents`; 0 when nothing happened to it, or
    /// when the poll failed, as they start at 0).
    pub fn poll_now(fd: RawFd) -> libc::c_short {
        let mut one = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `one` is a valid pollfd; poll(2) only writes its revents.
        unsafe { libc::poll(&raw mut one, 1, 0) };
        one.revents
    }

    /// Waits for input on `fd`, at most `timeout` (all of it without a descriptor).
    pub fn wait_for_input(fd: Option<RawFd>, timeout: Duration) {
        let Some(fd) = fd else {
            std::thread::sleep(timeout);
            return;
        };
        let mut one = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(-1);
        // SAFETY: `one` is a valid pollfd; poll(2) only writes its revents.
        unsafe { libc::poll(&raw mut one, 1, ms) };
    }

    /// Whether `revents` says the descriptor hung up or is no longer usable.
    pub fn hung_up(revents: libc::c_short) -> bool {
        revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
    }

    impl Drop for Pair {
        fn drop(&mut self) {
            for id in self.ids.drain(..) {
                signal_hook::low_level::unregister(id);
            }
        }
    }

    /// The descriptor crossterm reads keys from: standard input when it is a terminal, else
    /// the process's terminal (`/dev/tty`, opened once); `None` when there is neither.
    /// Asked once (an `ioctl` each time would cost a system call a wait).
    pub fn terminal_fd() -> Option<RawFd> {
        static FD: OnceLock<Option<RawFd>> = OnceLock::new();
        static TTY: OnceLock<Option<File>> = OnceLock::new();
        *FD.get_or_init(|| {
            // SAFETY: isatty only inspects the descriptor.
            if unsafe { libc::isatty(libc::STDIN_FILENO) } == 1 {
                return Some(libc::STDIN_FILENO);
            }
            TTY.get_or_init(|| File::open("/dev/tty").ok())
                .as_ref()
                .map(AsRawFd::as_raw_fd)
        })
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_wake_ends_the_sleep_and_the_next_sleep_sleeps_again() {
        let wake = Wake::new(&[]);
        let waker = wake.waker();
        let t = Instant::now();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            waker.wake();
        });
        wake.sleep(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        thread.join().unwrap();
        // Two wakes before a sleep: that sleep takes both bytes (a second wake sent while the
        // first sleep ends could land after its read, so they are sent first), and the next
        // waits out its timeout.
        let waker = wake.waker();
        waker.wake();
        waker.wake();
        let t = Instant::now();
        wake.sleep(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let t = Instant::now();
        wake.sleep(Duration::from_millis(100));
        assert!(
            t.elapsed() >= Duration::from_millis(100),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_registered_signal_ends_the_sleep() {
        // SIGURG: ignored by default, so raising it with no handler would do nothing at all;
        // with the pipe action it only writes the byte.
        let wake = Wake::new(&[libc::SIGURG]);
        let t = Instant::now();
        let thread = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: raise(3) sends the signal to this thread; its only action is the pipe's.
            #[allow(unsafe_code)]
            unsafe {
                libc::raise(libc::SIGURG);
            }
        });
        wake.sleep(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        thread.join().unwrap();
    }

    /// The late timer ends a wait with no timeout when it fires; set again before it fires, or
    /// unset, it does not end one.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_late_timer_ends_a_wait_when_it_fires_and_not_once_set_again() {
        let wake = Wake::new(&[]);
        let pair = wake.pair.as_ref().unwrap();
        let timer = LateTimer::new();
        assert!(timer.works());
        timer.set(Some(Duration::from_millis(30)));
        let t = Instant::now();
        pair.wait([None, timer.fd()], None);
        assert!(
            t.elapsed() >= Duration::from_millis(25),
            "{:?}",
            t.elapsed()
        );
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // Fired and not read: setting it takes the firing back, and unset it never fires.
        timer.set(None);
        let waker = wake.waker();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            waker.wake();
        });
        let t = Instant::now();
        pair.wait([None, timer.fd()], None);
        assert!(
            t.elapsed() >= Duration::from_millis(150),
            "{:?}",
            t.elapsed()
        );
        thread.join().unwrap();
    }

    /// A descriptor whose other end closed hangs up, as a terminal does whose window closed;
    /// an open one that has input does not; one in error, or no descriptor at all, is done
    /// with too.
    #[test]
    fn a_closed_other_end_is_a_hang_up_and_input_is_not() {
        use std::io::Write as _;
        use std::os::fd::AsRawFd as _;
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = ours.as_raw_fd();
        assert!(!unix::hung_up(unix::poll_now(fd)));
        theirs.write_all(b"q").unwrap();
        let said = unix::poll_now(fd);
        assert_eq!(said & libc::POLLIN, libc::POLLIN);
        assert!(!unix::hung_up(said));
        drop(theirs);
        let said = unix::poll_now(fd);
        assert!(unix::hung_up(said), "{said:#x}");
        // The other two ways a descriptor is done with: an error (a pipe's write end with no
        // reader left: POLLERR) and no descriptor at all (POLLNVAL).
        let (reader, writer) = std::io::pipe().unwrap();
        assert!(!unix::hung_up(unix::poll_now(writer.as_raw_fd())));
        drop(reader);
        let said = unix::poll_now(writer.as_raw_fd());
        assert_eq!(said & libc::POLLERR, libc::POLLERR, "{said:#x}");
        assert!(unix::hung_up(said));
        let said = unix::poll_now(1 << 30);
        assert_eq!(said, libc::POLLNVAL);
        assert!(unix::hung_up(said));
    }

    #[test]
    fn without_a_wake_the_timeout_ends_it() {
        let wake = Wake::new(&[]);
        let t = Instant::now();
        wake.sleep(Duration::from_millis(30));
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(30), "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
}
