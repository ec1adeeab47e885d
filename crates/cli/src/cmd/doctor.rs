//! `hmn doctor`: the roots in use (and the procfs mount's `hidepid`), whether the kubelet's logs
//! can be read under the rootfs and its pod-resources socket answers, each source, whether it
//! answered, and why not. The sources are asked within the deadline: a driver call that does
//! not return costs their reports (said, with what is waited for), never the rest.

use std::io::{self, Write};
use std::time::Duration;

use clap::Args;
use hypomnesis::bounded::Worker;

use crate::args::{DeadlineArg, JsonArg, RootArgs};
use crate::outcome::Outcome;
use crate::view::doctor::{self as render, DoctorExtra, GhostSummary, PodResourcesCheck};

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

/// How long the pod-resources socket is given.
const POD_RESOURCES_DEADLINE: Duration = Duration::from_secs(2);

/// `f` on a bounded worker of its own, its answer waited for until `deadline` has passed.
fn within<T: Send + 'static>(
    deadline: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    Worker::new("doctor").ask(deadline, f).ok()
}

/// The kubelet's pod-resources socket under the rootfs in use, asked once; `None` where there
/// is none (not a kubelet node).
#[cfg(all(unix, feature = "kubernetes"))]
fn pod_resources() -> Option<PodResourcesCheck> {
    let root = hypomnesis::roots().ok()?.rootfs.path;
    let socket = root.join(crate::kube::DEFAULT_SOCKET.trim_start_matches('/'));
    if std::fs::symlink_metadata(&socket).is_err() {
        return None;
    }
    let shown = crate::view::printable::printable(&socket.display().to_string()).into_owned();
    Some(
        match crate::kube::list_blocking(&socket, POD_RESOURCES_DEADLINE) {
            Ok(list) => PodResourcesCheck {
                socket: shown,
                allocations: Some(list.len()),
                error: None,
            },
            Err(e) => PodResourcesCheck {
                socket: shown,
                allocations: None,
                error: Some(crate::view::printable::printable(&e.to_string()).into_owned()),
            },
        },
    )
}

#[cfg(not(all(unix, feature = "kubernetes")))]
fn pod_resources() -> Option<PodResourcesCheck> {
    None
}

pub fn run(args: &DoctorArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let json = args.output.json;
    let deadline = args.deadline.get();
    let started = std::time::Instant::now();
    // The sources first, on a bounded worker of their own: what else there is to say is
    // gathered meanwhile.
    let (tx, sources) = std::sync::mpsc::channel();
    let worker = Worker::new("doctor-sources");
    let asked = worker
        .start(hypomnesis::sources, move |answer| {
            if let Ok(reports) = answer {
                let _ = tx.send(reports);
            }
        })
        .is_ok();
    let rss = hypomnesis::process_rss().map_err(|e| e.to_string());
    let roots = hypomnesis::roots().map_err(|e| e.to_string());
    let mount = hypomnesis::procfs_mount();
    let kubelet = hypomnesis::kubelet_logs().map_err(|e| e.to_string());
    let pods = within(
        POD_RESOURCES_DEADLINE + Duration::from_millis(500),
        pod_resources,
    )
    .flatten();
    let left = deadline.saturating_sub(started.elapsed());
    let reports = if asked {
        sources.recv_timeout(left).ok()
    } else {
        None
    };
    let extra = DoctorExtra {
        pod_resources: pods,
        sources_error: reports
            .is_none()
            .then(|| crate::view::no_answer_text(deadline, &hypomnesis::in_flight())),
        ghosts: None,
        pids: None,
    };
    let reports = reports.unwrap_or_default();
    // What `hmn ghosts` would say, summed, within what is left of the deadline (a process in D
    // gets a shorter second look than `ghosts` gives it).
    let left = deadline.saturating_sub(started.elapsed());
    let mut extra = extra;
    extra.ghosts = within(left, || {
        let options = hypomnesis::GhostOptions::default().stuck_after(Duration::from_millis(500));
        hypomnesis::ghosts_with(options).ok()
    })
    .flatten()
    .map(|r| GhostSummary::of(&r));
    let left = deadline.saturating_sub(started.elapsed());
    extra.pids = within(left, || hypomnesis::device_info(0).ok())
        .flatten()
        .filter(|d| d.vendor == Some(hypomnesis::GpuVendor::Nvidia))
        .map(|d| {
            let n = hypomnesis::driver_pid_numbering(d.driver_version.as_deref());
            crate::view::doctor::PidsCheck {
                callers_numbering: n.callers,
                why: n.why,
                initial_pid_namespace: hypomnesis::in_initial_pid_namespace(),
            }
        });
    if json {
        render::doctor_json(
            out,
            &rss,
            &roots,
            mount.as_ref(),
            &kubelet,
            &reports,
            &extra,
        )?;
    } else {
        render::doctor(out, &rss, &roots, mount.as_ref(), &kubelet, &reports)?;
        render::extra_lines(out, &extra)?;
    }
    if let Some(e) = &extra.sources_error {
        writeln!(err, "hmn: {e}")?;
        return Ok(Outcome::MeasurementFailed);
    }
    Ok(Outcome::Success)
}
