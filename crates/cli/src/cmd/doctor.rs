//! `hmn doctor`: the roots in use (and the procfs mount's `hidepid`), whether the kubelet's logs can be read under the rootfs,
//! each source, whether it answered, and why not.

use std::io::{self, Write};

use clap::Args;

use crate::args::{DeadlineArg, JsonArg, RootArgs};
use crate::outcome::Outcome;
use crate::view::doctor as render;

/// Options of `hmn doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub deadline: DeadlineArg,
}

pub fn run(args: &DoctorArgs, out: &mut impl Write) -> io::Result<Outcome> {
    let json = args.output.json;
    let rss = hypomnesis::process_rss().map_err(|e| e.to_string());
    let roots = hypomnesis::roots().map_err(|e| e.to_string());
    let mount = hypomnesis::procfs_mount();
    let kubelet = hypomnesis::kubelet_logs().map_err(|e| e.to_string());
    let reports = hypomnesis::sources();
    if json {
        render::doctor_json(out, &rss, &roots, mount.as_ref(), &kubelet, &reports)?;
    } else {
        render::doctor(out, &rss, &roots, mount.as_ref(), &kubelet, &reports)?;
    }
    Ok(Outcome::Success)
}
