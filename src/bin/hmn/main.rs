//! `hmn`: GPU and RAM memory from the shell. See `hmn --help`.

mod cli;
mod device;
mod doctor;
mod ps;
mod render;

fn main() -> std::process::ExitCode {
    cli::main()
}
