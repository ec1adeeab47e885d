//! The command's output, passed through to hmn's own and read on the way (`hmn run`): each
//! byte reaches hmn's stdout or stderr as the command wrote it, in the order it wrote it, as
//! soon as it wrote it, and the lines an engine prints about its memory are heard
//! ([`crate::engine`]).
//!
//! Where hmn's stdout (or stderr) is a terminal, the command writes to a pseudo-terminal of its
//! own (Unix): it sees a terminal, so it keeps its colours and progress bars, and the terminal
//! gets exactly its bytes (the pseudo-terminal does no output processing: no `\n` made
//! `\r\n`). When both are the same terminal, one pseudo-terminal serves both, so their
//! interleaving is the command's own. Otherwise (a file, a pipe, Windows) it writes to a pipe.
//! The command's stdin, and its controlling terminal (Ctrl-C, Ctrl-Z), are left as they are.
//!
//! A pump thread per channel reads and writes at once (no line buffering). Once hmn's own
//! output is closed, the pump closes its end too, so the command sees a closed output as it
//! would without hmn. After the command ends, what it left in the channels is drained, for a
//! bounded time (a process it left behind may hold them open).

use std::fs::File;
use std::io::{self, Read, Write};
use std::process::{ChildStderr, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::Heard;
use crate::engine::scan::Scanner;

/// Bytes read at once: a pipe's worth (see [`PIPE`]).
const CHUNK: usize = 1024 * 1024;

/// The capacity asked of the command's pipes (Linux; the default is 64 KiB): a command that
/// writes fast fills it in fewer turns, and hmn reads it in fewer calls.
#[cfg(target_os = "linux")]
const PIPE: usize = 1024 * 1024;

/// The command's end of a pseudo-terminal.
#[cfg(unix)]
type Slave = std::os::fd::OwnedFd;
#[cfg(not(unix))]
type Slave = std::convert::Infallible;

/// Where a channel's bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Stdout,
    Stderr,
}

impl Target {
    /// A writer to hmn's stdout or stderr of its own: a duplicate of the descriptor, so it
    /// neither waits for the lock hmn's main thread holds on `io::stdout()` nor buffers.
    fn open(self) -> io::Result<File> {
        #[cfg(unix)]
        use std::os::fd::AsFd as AsOwnable;
        #[cfg(windows)]
        use std::os::windows::io::AsHandle as AsOwnable;
        #[cfg(unix)]
        let own = |s: &dyn AsOwnable| s.as_fd().try_clone_to_owned();
        #[cfg(windows)]
        let own = |s: &dyn AsOwnable| s.as_handle().try_clone_to_owned();
        Ok(File::from(match self {
            Self::Stdout => own(&io::stdout())?,
            Self::Stderr => own(&io::stderr())?,
        }))
    }
}

/// The command's output as it is being passed through.
#[derive(Debug)]
pub struct Passing {
    pumps: Vec<JoinHandle<()>>,
    /// Pseudo-terminals' command ends, kept until the command started.
    #[cfg(unix)]
    slaves: Vec<Slave>,
    /// Pseudo-terminals' masters (a copy) with the stream whose size they follow.
    #[cfg(unix)]
    masters: Vec<(std::os::fd::OwnedFd, Target)>,
}

/// How the command's stdout and stderr are set up before it starts.
pub struct Plan {
    stdout: Route,
    stderr: Route,
}

enum Route {
    Pipe,
    /// A pseudo-terminal: its master (read by the pump) and its slave (the command's).
    #[cfg(unix)]
    Terminal(File, Slave),
    /// The same pseudo-terminal as stdout's.
    #[cfg(unix)]
    SameAsStdout,
}

impl Plan {
    /// Sets `command`'s stdout and stderr as the plan says. Pseudo-terminals that cannot be
    /// opened are pipes instead (said on `err`).
    #[cfg_attr(not(unix), allow(clippy::unnecessary_wraps))]
    pub fn new(err: &mut impl Write) -> io::Result<Self> {
        #[cfg(unix)]
        {
            terminal::plan(err)
        }
        #[cfg(not(unix))]
        {
            let _ = err;
            Ok(Self {
                stdout: Route::Pipe,
                stderr: Route::Pipe,
            })
        }
    }

    /// Sets `command`'s stdout and stderr.
    pub fn apply(&mut self, command: &mut Command) -> io::Result<()> {
        command.stdout(stdio(&self.stdout, None)?);
        let stdout_slave = match &self.stdout {
            #[cfg(unix)]
            Route::Terminal(_, slave) => Some(slave),
            _ => None,
        };
        command.stderr(stdio(&self.stderr, stdout_slave)?);
        Ok(())
    }

    /// Starts the pumps of the started command's channels; each line heard goes to `heard`.
    pub fn start(
        self,
        stdout: Option<ChildStdout>,
        stderr: Option<ChildStderr>,
        heard: &Arc<Heard>,
    ) -> Passing {
        let mut pumps = Vec::new();
        #[cfg(unix)]
        let mut slaves = Vec::new();
        #[cfg(unix)]
        let mut masters = Vec::new();
        #[cfg(target_os = "linux")]
        for fd in [
            stdout.as_ref().map(std::os::fd::AsFd::as_fd),
            stderr.as_ref().map(std::os::fd::AsFd::as_fd),
        ]
        .into_iter()
        .flatten()
        {
            // Past the limit of /proc/sys/fs/pipe-max-size (unprivileged), the default stays.
            let _ = rustix::pipe::fcntl_setpipe_size(fd, PIPE);
        }
        for (route, pipe, target) in [
            (self.stdout, stdout.map(boxed), Target::Stdout),
            (self.stderr, stderr.map(boxed), Target::Stderr),
        ] {
            let source: Option<Box<dyn Read + Send>> = match route {
                Route::Pipe => pipe,
                #[cfg(unix)]
                Route::Terminal(master, slave) => {
                    slaves.push(slave);
                    if let Ok(copy) = master.try_clone() {
                        masters.push((copy.into(), target));
                    }
                    Some(Box::new(master))
                }
                #[cfg(unix)]
                Route::SameAsStdout => None,
            };
            if let Some(source) = source {
                let heard = Arc::clone(heard);
                let name = format!("hmn-output-{target:?}").to_lowercase();
                if let Ok(h) = std::thread::Builder::new()
                    .name(name)
                    .spawn(move || pump(source, target, &heard))
                {
                    pumps.push(h);
                }
            }
        }
        Passing {
            pumps,
            #[cfg(unix)]
            slaves,
            #[cfg(unix)]
            masters,
        }
    }
}

fn boxed<R: Read + Send + 'static>(r: R) -> Box<dyn Read + Send> {
    Box::new(r)
}

#[cfg_attr(not(unix), allow(unused_variables, clippy::unnecessary_wraps))]
fn stdio(route: &Route, stdout_slave: Option<&Slave>) -> io::Result<Stdio> {
    Ok(match route {
        Route::Pipe => Stdio::piped(),
        #[cfg(unix)]
        Route::Terminal(_, slave) => Stdio::from(slave.try_clone()?),
        #[cfg(unix)]
        Route::SameAsStdout => match stdout_slave {
            Some(slave) => Stdio::from(slave.try_clone()?),
            None => Stdio::piped(),
        },
    })
}

impl Passing {
    /// Once the command has started: hmn's copies of the pseudo-terminals' command ends are
    /// closed, so a pump sees the end once the command's processes closed theirs.
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    pub fn started(&mut self) {
        #[cfg(unix)]
        self.slaves.clear();
    }

    /// Gives the command's pseudo-terminals the size of hmn's terminal now (it may have been
    /// resized since): cheap, called at every sample.
    #[cfg_attr(not(unix), allow(clippy::unused_self))]
    pub fn follow_size(&self) {
        #[cfg(unix)]
        for (master, like) in &self.masters {
            let now = match like {
                Target::Stdout => rustix::termios::tcgetwinsize(io::stdout()),
                Target::Stderr => rustix::termios::tcgetwinsize(io::stderr()),
            };
            if let (Ok(now), Ok(was)) = (now, rustix::termios::tcgetwinsize(master))
                && (now.ws_row, now.ws_col) != (was.ws_row, was.ws_col)
            {
                let _ = rustix::termios::tcsetwinsize(master, now);
            }
        }
    }

    /// After the command ended: waits for the pumps to pass on what it left, at most `bound`;
    /// whether they all did.
    pub fn drain(self, bound: Duration) -> bool {
        let until = Instant::now() + bound;
        let mut all = true;
        for pump in self.pumps {
            while !pump.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            if pump.is_finished() {
                let _ = pump.join();
            } else {
                all = false;
            }
        }
        all
    }
}

/// Passes `source`'s bytes to `target` as they come, and on to `heard`, until the end (or an
/// error reading; a pseudo-terminal whose every command end is closed reads as an error). Once
/// `target` is closed, it stops reading: `source` is closed, as the command's output would be.
fn pump(mut source: Box<dyn Read + Send>, target: Target, heard: &Heard) {
    // Without a writer of its own, the command's output is still read, so it never blocks.
    let mut sink = target.open().ok();
    let mut buf = vec![0_u8; CHUNK];
    let mut scanner = Scanner::new();
    loop {
        let n = match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let Some(chunk) = buf.get(..n) else { break };
        if let Some(s) = sink.as_mut()
            && s.write_all(chunk).is_err()
        {
            break;
        }
        scanner.feed(chunk, heard);
    }
    scanner.finish(heard);
    heard.end();
}

#[cfg(unix)]
mod terminal {
    //! Pseudo-terminals for the command's output (rustix's `openpt`).

    use std::fs::File;
    use std::io::{self, IsTerminal, Write};
    use std::os::fd::OwnedFd;

    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{self, OpenptFlags};
    use rustix::termios::{self, OptionalActions, OutputModes};

    use super::{Plan, Route};

    /// The plan: a pseudo-terminal for each of hmn's stdout and stderr that is a terminal,
    /// one for both when they are the same terminal.
    pub fn plan(err: &mut impl Write) -> io::Result<Plan> {
        let out_tty = io::stdout().is_terminal();
        let err_tty = io::stderr().is_terminal();
        let same = out_tty && err_tty && same_device();
        let stdout = route(out_tty, Like::Stdout, err)?;
        let stderr = if same && matches!(stdout, Route::Terminal(..)) {
            Route::SameAsStdout
        } else {
            route(err_tty, Like::Stderr, err)?
        };
        Ok(Plan { stdout, stderr })
    }

    #[derive(Clone, Copy)]
    enum Like {
        Stdout,
        Stderr,
    }

    fn route(tty: bool, like: Like, err: &mut impl Write) -> io::Result<Route> {
        if !tty {
            return Ok(Route::Pipe);
        }
        match open(like) {
            Ok((master, slave)) => Ok(Route::Terminal(master, slave)),
            Err(e) => {
                writeln!(
                    err,
                    "hmn run: no pseudo-terminal for the command ({e}); its output goes \
                     through a pipe"
                )?;
                Ok(Route::Pipe)
            }
        }
    }

    fn same_device() -> bool {
        let rdev = |st: rustix::io::Result<rustix::fs::Stat>| st.ok().map(|s| s.st_rdev);
        let out = rdev(rustix::fs::fstat(io::stdout()));
        let err = rdev(rustix::fs::fstat(io::stderr()));
        matches!((out, err), (Some(a), Some(b)) if a == b)
    }

    fn said(what: &str) -> impl Fn(rustix::io::Errno) -> io::Error + '_ {
        move |e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("{what}: {e}"))
        }
    }

    /// A pseudo-terminal the size of hmn's terminal `like` that does no output processing:
    /// its master (close-on-exec) and its slave.
    fn open(like: Like) -> io::Result<(File, OwnedFd)> {
        #[cfg(target_os = "linux")]
        let master = pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
            .map_err(said("openpt"))?;
        // Elsewhere (macOS) `openpt` takes no close-on-exec flag: set at once after (hmn starts
        // no other process meanwhile).
        #[cfg(not(target_os = "linux"))]
        let master = {
            let m = pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).map_err(said("openpt"))?;
            rustix::io::fcntl_setfd(&m, rustix::io::FdFlags::CLOEXEC).map_err(said("fcntl"))?;
            m
        };
        pty::grantpt(&master).map_err(said("grantpt"))?;
        pty::unlockpt(&master).map_err(said("unlockpt"))?;
        let name = pty::ptsname(&master, Vec::new()).map_err(said("ptsname"))?;
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(said("open the slave"))?;
        let mut t = termios::tcgetattr(&slave).map_err(said("tcgetattr"))?;
        // Bytes as written: no `\n` made `\r\n`.
        t.output_modes.remove(OutputModes::OPOST);
        termios::tcsetattr(&slave, OptionalActions::Now, &t).map_err(said("tcsetattr"))?;
        let size = match like {
            Like::Stdout => termios::tcgetwinsize(io::stdout()),
            Like::Stderr => termios::tcgetwinsize(io::stderr()),
        };
        if let Ok(size) = size {
            let _ = termios::tcsetwinsize(&master, size);
        }
        Ok((File::from(master), slave))
    }
}
