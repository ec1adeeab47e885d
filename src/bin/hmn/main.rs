//! `hmn`: GPU and RAM memory from the shell. See `hmn --help`.

mod cli;
mod device;
mod doctor;
mod man;
mod plot;
mod ps;
mod render;
mod run;
mod sample;
#[cfg(feature = "serve")]
mod serve;
mod spill;
mod sys;
mod watch;

fn main() -> std::process::ExitCode {
    cli::main()
}
