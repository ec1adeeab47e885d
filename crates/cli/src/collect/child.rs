//! The command `hmn run` and `hmn spill` start: spawning it (127 when it cannot be), passing a
//! stop on to it (through the library's `send_signal`), and the exit status hmn passes on.

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::time::Duration;

use super::output::{Passing, Plan};
use crate::engine::Heard;

/// The exit status a shell gives a command that cannot be started.
pub const CANNOT_START: u8 = 127;

/// A started command.
#[derive(Debug)]
pub struct Child {
    inner: std::process::Child,
    /// Its output, passed through and read (`hmn run`).
    output: Option<Passing>,
}

impl Child {
    /// Starts `command` (program and arguments) on this terminal; when it cannot be started,
    /// says why on `err` (as `who: cannot start …`) and gives the status to exit with.
    pub fn spawn(
        command: &[OsString],
        who: &str,
        err: &mut impl Write,
    ) -> io::Result<Result<Self, u8>> {
        Self::spawn_reading(command, who, None, err)
    }

    /// [`Self::spawn`], its output passed through to hmn's and read into `heard`
    /// ([`super::output`]) when given.
    pub fn spawn_reading(
        command: &[OsString],
        who: &str,
        heard: Option<&Arc<Heard>>,
        err: &mut impl Write,
    ) -> io::Result<Result<Self, u8>> {
        let Some((program, rest)) = command.split_first() else {
            writeln!(err, "{who}: no command given ({who} -- CMD ARGS…)")?;
            return Ok(Err(2));
        };
        let mut cmd = Command::new(program);
        cmd.args(rest);
        let mut plan = match heard {
            Some(_) => Some(Plan::new(err)?),
            None => None,
        };
        if let Some(plan) = plan.as_mut() {
            plan.apply(&mut cmd)?;
        }
        let spawned = cmd.spawn();
        // Its copies of the command's ends of the output are closed with it.
        drop(cmd);
        match spawned {
            Ok(mut inner) => {
                let output = plan.zip(heard).map(|(plan, heard)| {
                    let mut passing = plan.start(inner.stdout.take(), inner.stderr.take(), heard);
                    passing.started();
                    passing
                });
                Ok(Ok(Self { inner, output }))
            }
            Err(e) => {
                writeln!(
                    err,
                    "{who}: cannot start {}: {e}",
                    program.to_string_lossy()
                )?;
                Ok(Err(CANNOT_START))
            }
        }
    }

    pub fn id(&self) -> u32 {
        self.inner.id()
    }

    /// Its terminal follows the size of hmn's (a resize reaches it, as a `SIGWINCH` from the
    /// kernel).
    pub fn follow_size(&self) {
        if let Some(o) = &self.output {
            o.follow_size();
        }
    }

    /// Once it ended: what it left in its output passed on, waited for at most `bound`;
    /// whether all of it was.
    pub fn drain(&mut self, bound: Duration) -> bool {
        self.output.take().is_none_or(|o| o.drain(bound))
    }

    /// The status, once it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.inner.try_wait()
    }

    /// Passes `signal` on to the command and every process it started (its process tree as
    /// it is now); the number of processes it reached. The command stays in hmn's process group,
    /// so a terminal's Ctrl-C, Ctrl-Z and reads work as without hmn; this is for signals sent
    /// to hmn alone (`kill`, a service manager, a closed terminal).
    pub fn signal_tree(&self, signal: i32) -> usize {
        let pid = self.id();
        let tree = hypomnesis::process_tree(pid).unwrap_or_else(|_| vec![pid]);
        tree.into_iter().filter(|&p| send(p, signal)).count()
    }
}

/// Send `signal` to `pid`; `false` if it could not be delivered (gone already, say).
#[cfg(unix)]
fn send(pid: u32, signal: i32) -> bool {
    hypomnesis::send_signal(pid, signal).is_ok()
}

/// Windows delivers Ctrl-C to every process of the console; nothing to pass on.
#[cfg(not(unix))]
fn send(_pid: u32, _signal: i32) -> bool {
    false
}

/// The exit code and the signal that ended a process (the signal only on Unix).
pub fn status_parts(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        (status.code(), status.signal())
    }
    #[cfg(not(unix))]
    {
        (status.code(), None)
    }
}

/// The exit status hmn passes on: the command's code, or 128 + the signal that killed it.
pub fn passed_on(code: Option<i32>, signal: Option<i32>) -> u8 {
    match (code, signal) {
        (_, Some(sig)) => u8::try_from(128 + sig.clamp(0, 127)).unwrap_or(255),
        (Some(c), None) => u8::try_from(c.rem_euclid(256)).unwrap_or(255),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses() {
        assert_eq!(passed_on(Some(0), None), 0);
        assert_eq!(passed_on(Some(3), None), 3);
        assert_eq!(passed_on(None, Some(15)), 143);
        assert_eq!(passed_on(None, Some(9)), 137);
        assert_eq!(passed_on(Some(-1), None), 255);
        assert_eq!(passed_on(None, None), 1);
    }

    #[test]
    fn a_command_that_cannot_start_is_127() {
        let mut err = Vec::new();
        let r = Child::spawn(&["/nonexistent/program".into()], "hmn run", &mut err).unwrap();
        assert_eq!(r.err(), Some(CANNOT_START));
        let said = String::from_utf8(err).unwrap();
        assert!(
            said.starts_with("hmn run: cannot start /nonexistent/program: "),
            "{said}"
        );
        let mut err = Vec::new();
        assert_eq!(
            Child::spawn(&[], "hmn spill", &mut err).unwrap().err(),
            Some(2)
        );
    }
}
