//! How a command ended, and the exit status that says so.

use std::process::ExitCode;

/// How a command ended, when it did not fail on I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// A source exists but a GPU (or its process list) could not be read, or the answer did
    /// not come in time: exit 2, as every failure of `hmn`'s own query (1 is the answer "no"
    /// of `fits`, `ps --exit-status` and `watch`).
    MeasurementFailed,
    /// Exit with this status (a usage error's 2, a command's, passed through).
    Code(u8),
}

impl Outcome {
    /// The status of a command that stop signal `signal` ended early: 128 + its number, as a
    /// shell reports a process a signal ended (the one rule of every hmn command).
    pub fn stopped_by(signal: i32) -> Self {
        Self::Code(u8::try_from(128 + signal.clamp(0, 127)).unwrap_or(u8::MAX))
    }

    /// The process exit code.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Self::Success => ExitCode::SUCCESS,
            Self::MeasurementFailed => ExitCode::from(2),
            Self::Code(c) => ExitCode::from(c),
        }
    }
}
