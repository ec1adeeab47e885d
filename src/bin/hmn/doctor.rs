//! `hmn doctor`: each source, whether it answered, and why not.

use std::io::{self, Write};

use crate::cli::Outcome;
use crate::render;

pub fn run(json: bool, out: &mut impl Write) -> io::Result<Outcome> {
    let rss = hypomnesis::process_rss().map_err(|e| e.to_string());
    let reports = hypomnesis::sources();
    if json {
        render::doctor_json(out, &rss, &reports)?;
    } else {
        render::doctor(out, &rss, &reports)?;
    }
    Ok(Outcome::Success)
}
