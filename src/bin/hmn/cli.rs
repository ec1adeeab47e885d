//! Command-line definition, dispatch, and the mapping of outcomes to exit codes.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

#[cfg(feature = "serve")]
use crate::serve;
use crate::{device, doctor, ps, run, spill, watch};

/// The text of `hmn --help` (and of the man page's DESCRIPTION). A prose paragraph is one line,
/// wrapped to the terminal by clap and by man; lines that start with spaces are kept as they are.
pub const LONG_ABOUT: &str = "\
Measure GPU and RAM memory from outside any framework.

With no subcommand, hmn prints one line per GPU:

  GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01

What the figures mean (NVIDIA):

  total     what the driver reports, the same as nvidia-smi's Total
  reserved  the driver/firmware carve-out: PART of total, not extra
  free      what new allocations can still get
  used      (in --json) total - free, so it includes reserved

Allocations can use at most total - reserved, and free already accounts for it. The reserved figure is shown only when the driver reports it (R510 and later); it is never guessed. MiB are 1,048,576 bytes, rounded down.

A GPU split with MIG (A100, H100, H200) is followed by one line per MIG device:

  GPU 0 [NVIDIA H200]: free 126198 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01
    MIG 1c.3g.71gb GI 2 CI 0: free 54499 MiB / 71424 MiB
    MIG 2c.3g.71gb GI 2 CI 1: free 54499 MiB / 71424 MiB
    MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB

Memory belongs to the GPU instance (GI): its compute instances (CI) show the same figures. When the whole GPU's figures are refused (unprivileged users), its line says so and the MIG lines still follow. `hmn ps` adds GI and CI columns when a process runs in a MIG instance.

Where the figures come from: NVIDIA GPUs through NVML (libnvidia-ml, loaded once), or nvidia-smi when NVML cannot be loaded; on Linux, AMD and Intel GPUs through sysfs and DRM fdinfo (listed after the NVIDIA ones); on Windows DXGI and PDH; on macOS Metal. `hmn doctor` says which answered and why the others did not.";

/// Exit statuses, for `--help` and the man page.
pub const EXIT_STATUS: &str =
    "0 success (also when there is no GPU), 1 a measurement failed, 2 usage error.";

/// The environment variables `hmn` reads: (name, meaning).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "HYPOMNESIS_NVML_LIBRARY",
        "absolute path of libnvidia-ml; when set, nothing else is tried",
    ),
    ("HYPOMNESIS_NVIDIA_SMI", "path of nvidia-smi (else PATH)"),
    (
        "HYPOMNESIS_NVIDIA_SMI_TIMEOUT",
        "limit of one nvidia-smi run, e.g. 2s or 500ms (default 10s)",
    ),
    (
        "HYPOMNESIS_PROCFS",
        "where /proc is (an absolute path, e.g. a host's procfs mounted in a container)",
    ),
    (
        "HYPOMNESIS_SYSFS",
        "where /sys is (an absolute path, e.g. a host's sysfs mounted in a container)",
    ),
];

/// `--help`'s closing text: exit status and environment.
fn after_help() -> String {
    let width = ENVIRONMENT.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut s = format!("Exit status: {EXIT_STATUS}\n\nEnvironment:\n");
    for (name, meaning) in ENVIRONMENT {
        let _ = writeln!(s, "  {name:<width$}  {meaning}");
    }
    s.trim_end().to_string()
}

/// `--json`, for the commands that can print JSON.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct JsonArg {
    /// Print JSON on stdout instead of text (null for unknown values).
    #[arg(long)]
    pub json: bool,
}

/// `--procfs` and `--sysfs`, for the commands that measure.
#[derive(Debug, Clone, Default, Args)]
pub struct RootArgs {
    /// Read processes from this procfs instead of /proc (e.g. the host's, mounted at /host/proc).
    #[arg(long, value_name = "DIR")]
    pub procfs: Option<PathBuf>,
    /// Read devices from this sysfs instead of /sys (e.g. the host's, mounted at /host/sys).
    #[arg(long, value_name = "DIR")]
    pub sysfs: Option<PathBuf>,
}

impl RootArgs {
    fn any(&self) -> bool {
        self.procfs.is_some() || self.sysfs.is_some()
    }
}

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
    /// Run a command and report the peak RAM and GPU memory of its whole process tree.
    ///
    /// The command keeps this terminal (stdin, stdout, stderr); the summary goes to stderr (or one
    /// JSON object to stdout with --json). Its exit status is passed through (a signal n as
    /// 128+n); Ctrl-C reaches the command and the summary still prints.
    Run(run::RunArgs),
    /// Follow running processes (or the top GPU holders): one row per process per interval,
    /// with changes, and a summary of baseline and peak at the end.
    Watch(watch::WatchArgs),
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
            Self::Run(_) => "run",
            Self::Watch(_) => "watch",
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
            Self::Run(a) => Some(&mut a.output),
            Self::Watch(a) => Some(&mut a.output),
            Self::Spill(a) => Some(&mut a.output),
            #[cfg(feature = "serve")]
            Self::Serve(_) => None,
            Self::Completions { .. } | Self::Man => None,
        }
    }

    /// The subcommand's `--procfs`/`--sysfs`, or `None` when it measures nothing.
    fn roots(&mut self) -> Option<&mut RootArgs> {
        match self {
            Self::Ps(a) => Some(&mut a.roots),
            Self::Doctor(a) => Some(&mut a.roots),
            Self::Run(a) => Some(&mut a.roots),
            Self::Watch(a) => Some(&mut a.roots),
            Self::Spill(a) => Some(&mut a.roots),
            #[cfg(feature = "serve")]
            Self::Serve(a) => Some(&mut a.roots),
            Self::Completions { .. } | Self::Man => None,
        }
    }
}

/// How a command ended, when it did not fail on I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    MeasurementFailed,
    /// Exit with this status (a command's, passed through).
    Code(u8),
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
    if cli.roots.any() {
        let Some(r) = cmd.roots() else {
            return Err(format!("--procfs and --sysfs do not apply to `hmn {name}`"));
        };
        for (top, sub, flag) in [
            (&mut cli.roots.procfs, &mut r.procfs, "--procfs"),
            (&mut cli.roots.sysfs, &mut r.sysfs, "--sysfs"),
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

/// Apply `--procfs`/`--sysfs`, then check the roots in use (the environment's too).
fn use_roots(roots: &RootArgs) -> Result<(), String> {
    hypomnesis::set_roots(roots.procfs.as_deref(), roots.sysfs.as_deref())
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
    let stdout = io::stdout();
    let mut out = stdout.lock();
    // Unlocked: `hmn serve` and library diagnostics write to stderr from other threads too.
    let mut err = io::stderr();
    let result = match &cli.command {
        None => device::run(json, &mut out, &mut err),
        Some(Command::Ps(args)) => ps::run(args, &mut out, &mut err),
        Some(Command::Doctor(args)) => doctor::run(args, &mut out),
        Some(Command::Run(args)) => run::run(args, &mut out, &mut err),
        Some(Command::Watch(args)) => watch::run(args, &mut out, &mut err),
        Some(Command::Spill(args)) => spill::run(args, &mut out, &mut err),
        #[cfg(feature = "serve")]
        Some(Command::Serve(args)) => serve::run(args, &mut err),
        Some(Command::Completions { shell }) => write_generated(&mut out, |buf| {
            clap_complete::generate(*shell, &mut Cli::command(), "hmn", buf);
        })
        .map(|()| Outcome::Success),
        Some(Command::Man) => out
            .write_all(crate::man::render(&Cli::command()).as_bytes())
            .map(|()| Outcome::Success),
    };
    let result = result.and_then(|o| crate::render::unless_closed(out.flush()).map(|()| o));
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::MeasurementFailed) => ExitCode::from(1),
        Ok(Outcome::Code(c)) => ExitCode::from(c),
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
                matches!(c.command, Some(Command::Ps(ref a)) if a.pid == Some(7) && a.device == Some(1) && a.output.json),
                "{args:?}"
            );
        }
        assert!(parse(&["hmn", "ps", "--sort", "size"]).is_err());
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
