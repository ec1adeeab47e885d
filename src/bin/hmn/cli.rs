//! Command-line definition, dispatch, and the mapping of outcomes to exit codes.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[cfg(feature = "serve")]
use crate::serve;
use crate::{device, doctor, ps, run, spill, watch};

const LONG_ABOUT: &str = "\
Measure GPU and RAM memory from outside any framework.

With no subcommand, hmn prints one line per GPU:

  GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01

What the figures mean (NVIDIA):
  total     what the driver reports, the same as nvidia-smi's Total.
  reserved  the driver/firmware carve-out. It is PART of total, not extra: allocations can use at
            most total - reserved, and free already accounts for it. Shown only when the driver
            reports it (R510 and later); never guessed.
  free      what new allocations can still get.
  used      (in --json) total - free, so it includes reserved.
MiB are 1,048,576 bytes, rounded down.

A GPU split with MIG (A100, H100, H200) is followed by one line per MIG device:

  GPU 0 [NVIDIA H200]: free 126198 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01
    MIG 1c.3g.71gb GI 2 CI 0: free 54499 MiB / 71424 MiB
    MIG 2c.3g.71gb GI 2 CI 1: free 54499 MiB / 71424 MiB
    MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB

Memory belongs to the GPU instance (GI): its compute instances (CI) show the same figures. When
the whole GPU's figures are refused (unprivileged users), its line says so and the MIG lines
still follow. `hmn ps` adds GI and CI columns when a process runs in a MIG instance.

Where the figures come from: NVIDIA GPUs through NVML (libnvidia-ml, loaded once), or nvidia-smi
when NVML cannot be loaded; on Linux, AMD and Intel GPUs through sysfs and DRM fdinfo (listed after
the NVIDIA ones); on Windows DXGI and PDH; on macOS Metal. `hmn doctor` says which answered and
why the others did not.";

const AFTER_HELP: &str = "\
Exit status: 0 success (also when there is no GPU), 1 a measurement failed, 2 usage error.

Environment:
  HYPOMNESIS_NVML_LIBRARY        absolute path of libnvidia-ml; when set, nothing else is tried
  HYPOMNESIS_NVIDIA_SMI          path of nvidia-smi (else PATH)
  HYPOMNESIS_NVIDIA_SMI_TIMEOUT  limit of one nvidia-smi run, e.g. 2s or 500ms (default 10s)
  HYPOMNESIS_PROCFS              where /proc is (a host's procfs mounted in a container)
  HYPOMNESIS_SYSFS               where /sys is (a host's sysfs mounted in a container)";

/// The `hmn` command line.
#[derive(Debug, Parser)]
#[command(name = "hmn", version, about = "GPU and RAM memory: total, free, reserved, and who holds it", long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Print JSON on stdout instead of text (null for unknown values).
    #[arg(long, global = true)]
    pub json: bool,

    /// Read processes from this procfs instead of /proc (e.g. the host's, mounted at /host/proc).
    #[arg(long, global = true, value_name = "DIR")]
    pub procfs: Option<std::path::PathBuf>,

    /// Read devices from this sysfs instead of /sys (e.g. the host's, mounted at /host/sys).
    #[arg(long, global = true, value_name = "DIR")]
    pub sysfs: Option<std::path::PathBuf>,

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
    Doctor,
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

/// How a command ended, when it did not fail on I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    MeasurementFailed,
    /// Exit with this status (a command's, passed through).
    Code(u8),
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Err(e) = hypomnesis::set_roots(cli.procfs.as_deref(), cli.sysfs.as_deref()) {
        eprintln!("hmn: {e}");
        return ExitCode::from(2);
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    // Unlocked: `hmn serve` and library diagnostics write to stderr from other threads too.
    let mut err = io::stderr();
    let result = match &cli.command {
        None => device::run(cli.json, &mut out, &mut err),
        Some(Command::Ps(args)) => ps::run(args, cli.json, &mut out, &mut err),
        Some(Command::Doctor) => doctor::run(cli.json, &mut out),
        Some(Command::Run(args)) => run::run(args, cli.json, &mut out, &mut err),
        Some(Command::Watch(args)) => watch::run(args, cli.json, &mut out, &mut err),
        Some(Command::Spill(args)) => spill::run(args, cli.json, &mut out, &mut err),
        #[cfg(feature = "serve")]
        Some(Command::Serve(args)) => serve::run(args, &mut err),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(*shell, &mut Cli::command(), "hmn", &mut out);
            Ok(Outcome::Success)
        }
        Some(Command::Man) => clap_mangen::Man::new(Cli::command())
            .render(&mut out)
            .map(|()| Outcome::Success),
    };
    let result = result.and_then(|o| out.flush().map(|()| o));
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

    #[test]
    fn parses_the_documented_forms() {
        let c = Cli::try_parse_from(["hmn", "--json"]).unwrap();
        assert!(c.json && c.command.is_none());
        let c = Cli::try_parse_from([
            "hmn", "ps", "--pid", "7", "--device", "1", "--sort", "name", "--json",
        ])
        .unwrap();
        assert!(c.json);
        assert!(
            matches!(c.command, Some(Command::Ps(ref a)) if a.pid == Some(7) && a.device == Some(1))
        );
        assert!(Cli::try_parse_from(["hmn", "ps", "--sort", "size"]).is_err());
        assert!(Cli::try_parse_from(["hmn", "frobnicate"]).is_err());
    }
}
