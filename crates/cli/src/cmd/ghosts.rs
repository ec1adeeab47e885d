//! `hmn ghosts`: only the GPU memory held that should not be, each with its class, evidence
//! and what would free it. Exit 1 when there is some (a gate for scripts and cron); 0 only
//! when there is none and every listed GPU process was looked at; 2 when that cannot be told
//! (a process hidden, outside this PID namespace or unreadable, a GPU whose list failed) or
//! the GPUs cannot be read.

use std::io::{self, Write};
use std::time::Duration;

use clap::Args;
use hypomnesis::{GhostOptions, GhostWatch, HypomnesisError};

use crate::args::{self, DeadlineArg, JsonArg, RootArgs};
use crate::outcome::Outcome;
use crate::view::ghosts::{self as render, Why};
use crate::view::ps::PsRow;
use crate::view::unseen::Hidden;

/// Options of `hmn ghosts`.
#[derive(Debug, Clone, Args)]
pub struct GhostsArgs {
    /// A listed process in uninterruptible sleep (D) is looked at again after this long, and
    /// called stuck when it is still in D.
    #[arg(long, default_value = "2s", value_parser = args::duration, value_name = "DURATION")]
    pub stuck_after: Duration,
    /// A process holding memory is idle when the driver's activity samples show no engine at
    /// work for it for this long (where the samples cover less, that is said, not guessed).
    #[arg(long, default_value = "10m", value_parser = args::duration, value_name = "DURATION")]
    pub idle_after: Duration,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub deadline: DeadlineArg,
}

pub fn run(args: &GhostsArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let options = GhostOptions::default()
        .stuck_after(args.stuck_after)
        .idle_after(args.idle_after);
    let mut watch = GhostWatch::new(options);
    let (pods, note) = live_pods();
    watch.set_live_pods(pods);
    let report = match watch.look_once() {
        Ok(mut r) => {
            r.unseen.extend(note);
            r
        }
        Err(HypomnesisError::NoGpuSource) => {
            writeln!(
                err,
                "hmn ghosts: no GPU found, so there is nothing to explain"
            )?;
            return Ok(Outcome::MeasurementFailed);
        }
        Err(e) => {
            writeln!(err, "hmn ghosts: {e}")?;
            return Ok(Outcome::MeasurementFailed);
        }
    };
    if args.output.json {
        render::json(out, &report)?;
    } else {
        render::text(out, &report)?;
    }
    Ok(outcome(&report))
}

/// The exit status of a look: 1 ghosts, 2 none found but not every process seen, 0 none.
pub fn outcome(report: &hypomnesis::GhostReport) -> Outcome {
    if !report.ghosts.is_empty() {
        Outcome::Code(1)
    } else if report.complete {
        Outcome::Success
    } else {
        Outcome::MeasurementFailed
    }
}

/// `hmn ps --why`: one look for ghosts, each row and each figure no process accounts for marked
/// with the ghost it is; what could not be seen said on `err`. `None` (after saying why on
/// `err`) when the look failed.
pub fn mark(
    rows: &mut [PsRow],
    hidden: &mut [Hidden],
    idle_after: Duration,
    err: &mut impl Write,
) -> io::Result<Option<hypomnesis::GhostReport>> {
    let mut watch = GhostWatch::new(GhostOptions::default().idle_after(idle_after));
    let (pods, note) = live_pods();
    watch.set_live_pods(pods);
    let mut report = match watch.look_once() {
        Ok(r) => r,
        Err(e) => {
            writeln!(err, "hmn: --why: {e}")?;
            return Ok(None);
        }
    };
    report.unseen.extend(note);
    let of = |device: u32, pid: Option<u32>| {
        let ghost = report
            .ghosts
            .iter()
            .find(|g| g.device_index == device && g.pid == pid);
        let fact = report
            .facts
            .iter()
            .find(|f| f.device_index == device && Some(f.pid) == pid);
        match (ghost, fact) {
            (Some(g), _) => Why::Ghost(Box::new(g.clone())),
            (None, Some(f)) => Why::Fact(Box::new(f.clone())),
            (None, None) => Why::Fine,
        }
    };
    for r in rows.iter_mut() {
        r.why = of(r.entry.device_index, Some(r.entry.pid));
    }
    for h in hidden.iter_mut() {
        h.why = of(h.device_index, None);
    }
    for f in &report.facts {
        writeln!(
            err,
            "hmn: --why: pid {} on GPU {} is no ghost ({}): {}",
            f.pid,
            f.device_index,
            f.class,
            f.evidence.join("; ")
        )?;
    }
    for u in &report.unseen {
        writeln!(err, "hmn: --why could not see: {u}")?;
    }
    Ok(Some(report))
}

/// How long the kubelet's pod-resources list may take.
#[cfg(all(unix, feature = "kubernetes"))]
pub const POD_RESOURCES_DEADLINE: Duration = Duration::from_secs(2);

/// The pods the kubelet runs, from its pod-resources socket under the rootfs in use, when the
/// node has one; a note when it has one that did not answer.
#[cfg(all(unix, feature = "kubernetes"))]
pub fn live_pods() -> (
    Option<crate::kube::podresources::Pods>,
    Option<hypomnesis::Failure>,
) {
    let Ok(roots) = hypomnesis::roots() else {
        return (None, None);
    };
    let socket = roots
        .rootfs
        .path
        .join(crate::kube::DEFAULT_SOCKET.trim_start_matches('/'));
    if std::fs::symlink_metadata(&socket).is_err() {
        return (None, None);
    }
    match live_pods_at(&socket) {
        Ok(pods) => (Some(pods), None),
        // The client's errors come as words: no kind is read from them.
        Err(why) => (
            None,
            Some(hypomnesis::Failure::new(hypomnesis::ErrorKind::Other, why)),
        ),
    }
}

/// The pods the kubelet behind `socket` runs, or why it did not say.
#[cfg(all(unix, feature = "kubernetes"))]
pub fn live_pods_at(socket: &std::path::Path) -> Result<crate::kube::podresources::Pods, String> {
    crate::kube::pods_blocking(socket, POD_RESOURCES_DEADLINE).map_err(|e| {
        format!("the kubelet's pod-resources list, for pods that no longer exist: {e}")
    })
}

/// Without the pod-resources client, pods are told by the kubelet's log layout alone.
#[cfg(not(all(unix, feature = "kubernetes")))]
pub fn live_pods() -> (
    Option<std::collections::BTreeSet<(String, String)>>,
    Option<hypomnesis::Failure>,
) {
    (None, None)
}
