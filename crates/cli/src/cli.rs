//! Command-line definition, dispatch, and the mapping of outcomes to exit codes.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};

use crate::args::{DeadlineArg, JsonArg, RootArgs};
#[cfg(feature = "serve")]
use crate::cmd::serve;
use crate::cmd::{devices, doctor, fits, ghosts, ps, run, spill, watch};
use crate::help::{LONG_ABOUT, after_help};
use crate::outcome::Outcome;
use crate::view;
use crate::view::printable::Printable;

/// The `hmn` command line.
#[derive(Debug, Parser)]
#[command(
    name = "hmn",
    version,
    about = "GPU and RAM memory: total, free, reserved, and who holds it",
    long_about = LONG_ABOUT,
    after_help = after_help(),
    subcommand_value_name = "COMMAND",
    subcommand_help_heading = "Commands"
)]
pub struct Cli {
    #[command(flatten)]
    pub output: JsonArg,

    #[command(flatten)]
    pub roots: RootArgs,

    #[command(flatten)]
    pub deadline: DeadlineArg,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the processes holding GPU memory, largest first.
    ///
    /// NVML lists compute and graphics contexts (a process in both is counted once); the
    /// nvidia-smi fallback lists compute processes only. Processes in another PID namespace are
    /// listed with their memory and `?` as their name.
    Ps(ps::PsArgs),
    /// Say, for each GPU source, whether it answered and why not.
    Doctor(doctor::DoctorArgs),
    /// Whether SIZE fits in a GPU's free memory now: exit 0 it fits, 1 it does not, 2 the
    /// question cannot be answered (no GPU, a bad device); one line on stderr either way.
    ///
    /// For a script that checks before it starts a job: `hmn fits 12GiB || exit 1`.
    Fits(fits::FitsArgs),
    /// Only the GPU memory held that should not be: a pid the driver charges that has exited
    /// (and who holds its device file now), a zombie, a process stuck in the driver, an orphan,
    /// memory no listed process accounts for; each with its evidence and what would free it.
    /// Exit 0 when there is none, 1 when there is some, 2 when the GPUs cannot be read.
    Ghosts(ghosts::GhostsArgs),
    /// Run a command and report the peak RAM and GPU memory of its whole process tree.
    ///
    /// The command keeps this terminal's stdin and its Ctrl-C; its output passes through hmn
    /// unchanged (a terminal of hmn's where hmn's output is one, so colours stay) and is read
    /// for a serving engine's memory lines (vLLM, SGLang, TensorRT-LLM), set beside what the
    /// driver charged its processes. The summary goes to stderr (or one JSON object to stdout
    /// with --json). Its exit status is passed through (a signal n as 128+n); Ctrl-C reaches
    /// the command and the summary still prints.
    Run(run::RunArgs),
    /// Follow running processes (or the top GPU holders): one row per process per interval,
    /// with changes, and a summary of baseline and peak at the end.
    Watch(watch::WatchArgs),
    /// A live, full-screen view: each GPU's memory (reserved, held, not visible, free) with
    /// its history, the host's RAM, and the processes holding GPU memory. Keys: ? for help.
    #[cfg(feature = "top")]
    Top(crate::top::TopArgs),
    /// Run a command and report whether the GPU spilled into shared system memory (Windows WDDM).
    Spill(spill::SpillArgs),
    /// Serve Prometheus/OpenMetrics metrics on /metrics.
    #[cfg(feature = "serve")]
    Serve(serve::ServeArgs),
    /// Print a completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout: `hmn man > hmn.1`.
    Man,
}

impl Command {
    /// The subcommand's name, for messages.
    fn name(&self) -> &'static str {
        match self {
            Self::Ps(_) => "ps",
            Self::Doctor(_) => "doctor",
            Self::Fits(_) => "fits",
            Self::Ghosts(_) => "ghosts",
            Self::Run(_) => "run",
            Self::Watch(_) => "watch",
            #[cfg(feature = "top")]
            Self::Top(_) => "top",
            Self::Spill(_) => "spill",
            #[cfg(feature = "serve")]
            Self::Serve(_) => "serve",
            Self::Completions { .. } => "completions",
            Self::Man => "man",
        }
    }

    /// The subcommand's `--json`, or `None` when it prints no JSON.
    fn json(&mut self) -> Option<&mut JsonArg> {
        match self {
            Self::Ps(a) => Some(&mut a.output),
            Self::Doctor(a) => Some(&mut a.output),
            Self::Fits(a) => Some(&mut a.output),
            Self::Ghosts(a) => Some(&mut a.output),
            Self::Run(a) => Some(&mut a.output),
            Self::Watch(a) => Some(&mut a.output),
            #[cfg(feature = "top")]
            Self::Top(_) => None,
            Self::Spill(a) => Some(&mut a.output),
            #[cfg(feature = "serve")]
            Self::Serve(_) => None,
            Self::Completions { .. } | Self::Man => None,
        }
    }

    /// The subcommand's `--deadline`, or `None` when it does not measure once.
    fn deadline(&mut self) -> Option<&mut DeadlineArg> {
        match self {
            Self::Ps(a) => Some(&mut a.deadline),
            Self::Doctor(a) => Some(&mut a.deadline),
            Self::Fits(a) => Some(&mut a.deadline),
            Self::Ghosts(a) => Some(&mut a.deadline),
            _ => None,
        }
    }

    /// The subcommand's `--procfs`/`--sysfs`/`--rootfs`, or `None` when it measures nothing.
    fn roots(&mut self) -> Option<&mut RootArgs> {
        match self {
            Self::Ps(a) => Some(&mut a.roots),
            Self::Doctor(a) => Some(&mut a.roots),
            Self::Fits(a) => Some(&mut a.roots),
            Self::Ghosts(a) => Some(&mut a.roots),
            Self::Run(a) => Some(&mut a.roots),
            Self::Watch(a) => Some(&mut a.roots),
            #[cfg(feature = "top")]
            Self::Top(a) => Some(&mut a.roots),
            Self::Spill(a) => Some(&mut a.roots),
            #[cfg(feature = "serve")]
            Self::Serve(a) => Some(&mut a.roots),
            Self::Completions { .. } | Self::Man => None,
        }
    }
}

/// Options given before the subcommand (`hmn --json ps`) moved to the subcommand; an option
/// the subcommand does not take is a usage error (`hmn --json serve`).
fn settle(cli: &mut Cli) -> Result<(), String> {
    let Some(cmd) = cli.command.as_mut() else {
        return Ok(());
    };
    let name = cmd.name();
    if cli.output.json {
        match cmd.json() {
            Some(j) => j.json = true,
            None => return Err(format!("--json does not apply to `hmn {name}`")),
        }
    }
    if let Some(d) = cli.deadline.deadline.take() {
        match cmd.deadline() {
            Some(sub) => {
                sub.deadline.get_or_insert(d);
            }
            None => return Err(format!("--deadline does not apply to `hmn {name}`")),
        }
    }
    if cli.roots.any() {
        let Some(r) = cmd.roots() else {
            return Err(format!(
                "--procfs, --sysfs and --rootfs do not apply to `hmn {name}`"
            ));
        };
        for (top, sub, flag) in [
            (&mut cli.roots.procfs, &mut r.procfs, "--procfs"),
            (&mut cli.roots.sysfs, &mut r.sysfs, "--sysfs"),
            (&mut cli.roots.rootfs, &mut r.rootfs, "--rootfs"),
        ] {
            match (top.take(), sub.as_ref()) {
                (Some(t), Some(s)) if &t != s => {
                    return Err(format!("{flag} is given twice, with different directories"));
                }
                (Some(t), _) => *sub = Some(t),
                (None, _) => {}
            }
        }
    }
    Ok(())
}

/// Apply `--procfs`/`--sysfs`/`--rootfs`, then check the roots in use (the environment's too).
fn use_roots(roots: &RootArgs) -> Result<(), String> {
    hypomnesis::set_roots(roots.procfs.as_deref(), roots.sysfs.as_deref())
        .and_then(|()| {
            roots
                .rootfs
                .as_deref()
                .map_or(Ok(()), hypomnesis::set_rootfs)
        })
        .and_then(|()| hypomnesis::roots().map(drop))
        .map_err(|e| e.to_string())
}

/// Writes what a generator produced: generators that panic on a closed pipe write to memory
/// first, and the copy to stdout fails with `BrokenPipe` like any other write.
fn write_generated(out: &mut impl Write, generate: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
    let mut buf = Vec::new();
    generate(&mut buf);
    out.write_all(&buf)
}

/// Runs a command that measures once on the library's bounded worker, and writes what it
/// wrote; when it has not answered within `deadline` (a driver call that does not return), says
/// so instead. The stuck worker is left behind: the process ends right after.
fn within(
    deadline: Duration,
    out: &mut impl Write,
    err: &mut impl Write,
    job: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> io::Result<Outcome> + Send + 'static,
) -> io::Result<Outcome> {
    let worker = hypomnesis::bounded::Worker::new("command");
    let answer = worker.ask(deadline, move || {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let outcome = job(&mut o, &mut e);
        (outcome, o, e)
    });
    match answer {
        Ok((outcome, o, e)) => {
            out.write_all(&o)?;
            err.write_all(&e)?;
            outcome
        }
        Err(why) => {
            writeln!(err, "{}", no_answer(deadline, why.waiting()))?;
            Ok(Outcome::MeasurementFailed)
        }
    }
}

/// What a measurement past its deadline says: what it is still waiting on (the longest
/// waiting of the library's operations in flight), and since when.
fn no_answer(deadline: Duration, waiting: &[hypomnesis::InFlight]) -> String {
    format!("hmn: {}", view::no_answer_text(deadline, waiting))
}

pub fn main() -> ExitCode {
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Err(why) = settle(&mut cli) {
        eprintln!("hmn: {why}");
        return ExitCode::from(2);
    }
    let json = cli.output.json;
    let roots = match cli.command.as_mut() {
        None => Some(cli.roots.clone()),
        Some(c) => c.roots().map(|r| r.clone()),
    };
    if let Some(r) = roots
        && let Err(why) = use_roots(&r)
    {
        eprintln!("hmn: {why}");
        return ExitCode::from(2);
    }
    // Unlocked: `hmn serve` and library diagnostics write to stderr from other threads too.
    let mut err = Printable::new(io::stderr());
    // `hmn top` paints from its sampling thread too: standard output is not held locked for it.
    #[cfg(feature = "top")]
    if let Some(Command::Top(args)) = &cli.command {
        return exit_code(crate::top::run(args, &mut err), &mut err);
    }
    let stdout = io::stdout();
    // Text for a terminal: no control character from a process name or a tool's words reaches
    // it raw. (JSON escapes them itself; the generated completions and man page pass through.)
    let mut out = Printable::new(stdout.lock());
    let result = match &cli.command {
        None => within(cli.deadline.get(), &mut out, &mut err, move |o, e| {
            devices::run(json, o, e)
        }),
        Some(Command::Ps(args)) => {
            let args = args.clone();
            within(args.deadline.get(), &mut out, &mut err, move |o, e| {
                ps::run(&args, o, e)
            })
        }
        // Bounds its sources itself, to say the rest all the same.
        Some(Command::Doctor(args)) => doctor::run(args, &mut out, &mut err),
        // A wait, a gate or a fleet's answer bounds its own readings.
        Some(Command::Fits(args)) if !args.once_here() => fits::run(args, &mut out, &mut err),
        Some(Command::Fits(args)) => {
            let args = args.clone();
            within(args.deadline.get(), &mut out, &mut err, move |o, e| {
                fits::run(&args, o, e)
            })
        }
        Some(Command::Ghosts(args)) => {
            let args = args.clone();
            within(args.deadline.get(), &mut out, &mut err, move |o, e| {
                ghosts::run(&args, o, e)
            })
        }
        Some(Command::Run(args)) => run::run(args, &mut out, &mut err),
        Some(Command::Watch(args)) => watch::run(args, &mut out, &mut err),
        // Run above, with standard output unlocked.
        #[cfg(feature = "top")]
        Some(Command::Top(_)) => Ok(Outcome::Success),
        Some(Command::Spill(args)) => spill::run(args, &mut out, &mut err),
        #[cfg(feature = "serve")]
        Some(Command::Serve(args)) => serve::run(args, &mut err),
        Some(Command::Completions { shell }) => write_generated(&mut stdout.lock(), |buf| {
            clap_complete::generate(*shell, &mut Cli::command(), "hmn", buf);
        })
        .map(|()| Outcome::Success),
        Some(Command::Man) => stdout
            .lock()
            .write_all(view::man::render(&Cli::command()).as_bytes())
            .map(|()| Outcome::Success),
    };
    let result = result.and_then(|o| view::unless_closed(out.flush()).map(|()| o));
    exit_code(result, &mut err)
}

/// The exit code of a command's `result`; a failure to write is said on `err`.
fn exit_code(result: io::Result<Outcome>, err: &mut impl Write) -> ExitCode {
    match result {
        Ok(o) => o.exit_code(),
        // `hmn ps | head -1`: the reader is gone; nothing more to say.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(err, "hmn: cannot write output: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, String> {
        let mut cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        settle(&mut cli)?;
        Ok(cli)
    }

    #[test]
    fn parses_the_documented_forms() {
        let c = parse(&["hmn", "--json"]).unwrap();
        assert!(c.output.json && c.command.is_none());
        for args in [
            &[
                "hmn", "ps", "--pid", "7", "--device", "1", "--sort", "name", "--json",
            ][..],
            &[
                "hmn", "--json", "ps", "--pid", "7", "--device", "1", "--sort", "name",
            ],
        ] {
            let c = parse(args).unwrap();
            assert!(
                matches!(c.command, Some(Command::Ps(ref a)) if a.pid == [7] && a.device == Some(1) && a.output.json),
                "{args:?}"
            );
        }
        assert!(parse(&["hmn", "ps", "--sort", "size"]).is_err());
        // 0.2.x's forms: --pid repeated, the sort aliases, --min, --filter, --exit-status.
        let c = parse(&[
            "hmn",
            "ps",
            "--pid",
            "7",
            "--pid",
            "9",
            "--sort",
            "vram",
            "--min",
            "1.5GiB",
            "--filter",
            "py",
            "--filter",
            "torch",
            "--exit-status",
        ])
        .unwrap();
        assert!(
            matches!(c.command, Some(Command::Ps(ref a)) if a.pid == [7, 9]
                && a.sort == view::ps::SortKey::Dedicated && a.min == Some(3 << 29)
                && a.filter == ["py", "torch"] && a.exit_status),
            "{c:?}"
        );
        let c = parse(&["hmn", "ps", "--sort", "committed"]).unwrap();
        assert!(
            matches!(c.command, Some(Command::Ps(ref a)) if a.sort == view::ps::SortKey::Total)
        );
        let c = parse(&["hmn", "fits", "12GiB", "--device", "1"]).unwrap();
        assert!(
            matches!(c.command, Some(Command::Fits(ref a)) if a.size == 12 << 30 && a.device == 1)
        );
        assert!(parse(&["hmn", "fits", "12GB"]).is_err(), "GB is ambiguous");
        assert!(parse(&["hmn", "fits"]).is_err());
        assert!(
            matches!(parse(&["hmn", "--json", "fits", "1GiB"]).unwrap().command,
                Some(Command::Fits(ref a)) if a.output.json),
            "fits prints JSON too"
        );
        assert!(
            parse(&["hmn", "fits", "1GiB", "--count", "2"]).is_err(),
            "--count asks about a fleet"
        );
        assert!(
            parse(&[
                "hmn",
                "fits",
                "1GiB",
                "--prometheus",
                "http://p",
                "--device",
                "1"
            ])
            .is_err(),
            "a device is this host's"
        );
        assert!(parse(&["hmn", "frobnicate"]).is_err());
    }

    #[test]
    fn options_only_where_they_apply() {
        for args in [
            &["hmn", "--json", "man"][..],
            &["hmn", "man", "--json"],
            &["hmn", "--json", "completions", "bash"],
            &["hmn", "--procfs", "/proc", "man"],
            &["hmn", "completions", "bash", "--sysfs", "/sys"],
            &["hmn", "--rootfs", "/", "man"],
        ] {
            assert!(parse(args).is_err(), "{args:?} accepted");
        }
        #[cfg(feature = "serve")]
        {
            let e = parse(&["hmn", "--json", "serve"]).unwrap_err();
            assert_eq!(e, "--json does not apply to `hmn serve`");
            assert!(parse(&["hmn", "serve", "--json"]).is_err());
            let c = parse(&["hmn", "--procfs", "/host/proc", "serve"]).unwrap();
            assert!(
                matches!(c.command, Some(Command::Serve(ref a)) if a.roots.procfs.as_deref() == Some(std::path::Path::new("/host/proc")))
            );
        }
        let e = parse(&["hmn", "--procfs", "/a", "ps", "--procfs", "/b"]).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        assert!(parse(&["hmn", "--procfs", "/a", "ps", "--procfs", "/a"]).is_ok());
        let e = parse(&["hmn", "--rootfs", "/a", "ps", "--rootfs", "/b"]).unwrap_err();
        assert_eq!(e, "--rootfs is given twice, with different directories");
        let c = parse(&["hmn", "--rootfs", "/host", "ps"]).unwrap();
        assert!(
            matches!(c.command, Some(Command::Ps(ref a)) if a.roots.rootfs.as_deref() == Some(std::path::Path::new("/host")))
        );
        let c = parse(&["hmn", "doctor", "--sysfs", "/host/sys", "--json"]).unwrap();
        assert!(
            matches!(c.command, Some(Command::Doctor(ref a)) if a.output.json && a.roots.sysfs.is_some())
        );
    }

    #[test]
    fn generated_output_goes_through_the_writer() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = write_generated(&mut Closed, |buf| {
            clap_complete::generate(clap_complete::Shell::Bash, &mut Cli::command(), "hmn", buf);
        })
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
