//! `hmn ps`: the processes holding GPU memory.

use std::io::{self, Write};

use clap::Args;
use hypomnesis::{
    ContextParts, GpuContextKind, GpuDeviceInfo, GpuProcessEntry, HypomnesisError, ProcessContext,
};

use crate::args::{DeadlineArg, JsonArg, RootArgs};
use crate::collect::contexts;
use crate::outcome::Outcome;
use crate::view::devices::no_gpu_sentence;
use crate::view::groups::{self, GroupBy};
use crate::view::ps::{self as render, Hidden, PsRow, SortKey};
use crate::view::unseen::{self, Causes};

/// Options of `hmn ps`.
#[derive(Debug, Clone, Args)]
pub struct PsArgs {
    /// Only this process id.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Only this GPU (index as in `hmn`); all GPUs by default.
    #[arg(long, value_name = "N")]
    pub device: Option<u32>,
    /// Order of the rows: dedicated (VRAM, the default), shared, total (VRAM + shared), pid,
    /// name, user, command, rss (host memory).
    #[arg(long, value_enum, default_value_t = SortKey::Dedicated, value_name = "KEY")]
    pub sort: SortKey,
    /// Only the processes of this user (a name, or a uid).
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Add each GPU's memory up by owner, container, pod or Kubernetes namespace, instead of
    /// listing the processes.
    #[arg(long, value_enum, value_name = "KEY")]
    pub group_by: Option<GroupBy>,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub deadline: DeadlineArg,
}

pub fn run(args: &PsArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let devices: Vec<u32> = match (args.device, hypomnesis::device_count()) {
        (_, Err(HypomnesisError::NoGpuSource)) => {
            writeln!(err, "{}", no_gpu_sentence())?;
            Vec::new()
        }
        (_, Err(e)) => {
            writeln!(err, "hmn: could not count GPUs: {e}")?;
            return Ok(Outcome::MeasurementFailed);
        }
        (Some(d), Ok(n)) if d >= n => {
            writeln!(
                err,
                "hmn: {}",
                HypomnesisError::DeviceIndexOutOfRange { index: d, count: n }
            )?;
            return Ok(Outcome::MeasurementFailed);
        }
        (Some(d), Ok(_)) => vec![d],
        (None, Ok(n)) => (0..n).collect(),
    };
    let causes = Causes::here();
    let mut rows = Vec::new();
    let mut hidden = Vec::new();
    let mut failures = 0;
    for &i in &devices {
        match hypomnesis::gpu_processes(i) {
            Ok(list) => {
                let info = hypomnesis::device_info(i).ok();
                let device_name = info.as_ref().and_then(|d| d.name.clone());
                let device_vendor = info.as_ref().and_then(|d| d.vendor);
                if args.pid.is_none()
                    && args.user.is_none()
                    && let Some(h) = info.as_ref().and_then(|d| hidden_of(d, &list, &causes))
                {
                    hidden.push(h);
                }
                rows.extend(
                    list.into_iter()
                        .filter(|e| args.pid.is_none_or(|p| e.pid == p))
                        .map(|entry| PsRow {
                            entry,
                            ctx: ProcessContext::default(),
                            device_name: device_name.clone(),
                            device_vendor,
                        }),
                );
            }
            Err(e) => {
                failures += 1;
                writeln!(err, "hmn: GPU {i}: {e}")?;
            }
        }
    }
    with_context(&mut rows);
    if let Some(user) = &args.user {
        rows.retain(|r| owned_by(&r.ctx, user));
    }
    render::sort_rows(&mut rows, args.sort);
    print(args, &rows, &hidden, out)?;
    writeln!(
        err,
        "{}",
        render::ps_summary(&rows, args.pid, args.device, args.user.as_deref())
    )?;
    for line in unseen::rows_line(rows.iter().map(|r| &r.entry), &causes) {
        writeln!(err, "{line}")?;
    }
    if !hidden.is_empty() {
        writeln!(err, "{}", unseen::hidden_line(&hidden, &causes))?;
    }
    let dropped = hypomnesis::dropped_process_rows();
    if dropped > 0 {
        writeln!(err, "{}", render::dropped_rows_line(dropped))?;
    }
    // A GPU whose process list could not be read is a failed measurement, even when the
    // others' rows are shown.
    if failures > 0 {
        return Ok(Outcome::MeasurementFailed);
    }
    Ok(Outcome::Success)
}

/// The rows (or their groups) as a table or JSON.
fn print(args: &PsArgs, rows: &[PsRow], hidden: &[Hidden], out: &mut impl Write) -> io::Result<()> {
    if let Some(by) = args.group_by {
        let g = groups::groups(rows, hidden, by);
        return if args.output.json {
            groups::groups_json(out, &g, by)
        } else {
            groups::groups_table(out, &g, by)
        };
    }
    if args.output.json {
        render::ps_json(out, rows)
    } else {
        let width = terminal_size::terminal_size().map(|(w, _)| usize::from(w.0));
        render::ps_table(out, rows, hidden, width)
    }
}

/// The memory of `device` its process rows do not account for, when it is more than the
/// driver's own overhead for that many processes.
fn hidden_of(device: &GpuDeviceInfo, list: &[GpuProcessEntry], causes: &Causes) -> Option<Hidden> {
    let bytes = device.unattributed_bytes(list)?;
    (bytes > hypomnesis::driver_overhead_allowance(list.len())).then(|| Hidden {
        device_index: device.index,
        device_name: device.name.clone(),
        device_vendor: device.vendor,
        bytes,
        mps: list
            .iter()
            .any(|p| p.mps_server || p.context.is_some_and(GpuContextKind::mps)),
        hidepid: causes.hidepid_option.clone(),
    })
}

/// Each row's process context, read from the files of the GPU-holding processes only. A
/// process outside this PID namespace has none to read; one mapped from the host's pid is read
/// under that pid (the procfs root in use is the host's).
fn with_context(rows: &mut [PsRow]) {
    // Only what the output shows: no CPU time. The container is read for the text too: it
    // names a row's Kubernetes namespace and pod, and the groups of --group-by.
    let mut parts = ContextParts::ALL;
    parts.cpu_time = false;
    let read = contexts::read(contexts::readable(rows.iter().map(|r| &r.entry)), parts);
    for row in rows.iter_mut() {
        if let Some(ctx) = read.get(&row.entry.pid) {
            row.ctx.clone_from(ctx);
        }
    }
}

/// Whether `user` (a name or a uid) owns the process.
fn owned_by(ctx: &ProcessContext, user: &str) -> bool {
    ctx.user.as_deref() == Some(user) || ctx.uid.is_some_and(|u| u.to_string() == user)
}
