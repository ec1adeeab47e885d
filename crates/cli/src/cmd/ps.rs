//! `hmn ps`: the processes holding GPU memory.

use std::io::{self, Write};

use clap::Args;
use hypomnesis::sampling::{Identities, IdentityParts};
use hypomnesis::{GpuContextKind, GpuDeviceInfo, GpuProcessEntry, HypomnesisError, ProcessContext};

use crate::args::{self, DeadlineArg, JsonArg, RootArgs};
use crate::collect::contexts;
use crate::outcome::Outcome;
use crate::view::ghosts::Why;
use crate::view::groups::{self, GroupBy};
use crate::view::ps::{self as render, Asked, Hidden, PsRow, RowSpill, SortKey};
use crate::view::unseen::{self, Causes};

/// Options of `hmn ps`.
#[derive(Debug, Clone, Args)]
pub struct PsArgs {
    /// Only this process id; repeat it for several (a process matching any is listed).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<u32>,
    /// Only this GPU (index as in `hmn`); all GPUs by default.
    #[arg(long, value_name = "N")]
    pub device: Option<u32>,
    /// Order of the rows: dedicated (VRAM, the default; also `vram`), shared, total (VRAM +
    /// shared; also `committed`), pid, name, user, command, rss (host memory).
    #[arg(long, value_enum, default_value_t = SortKey::Dedicated, value_name = "KEY")]
    pub sort: SortKey,
    /// Only the processes of this user (a name, or a uid).
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Only processes whose name contains PATTERN, ignoring case; repeat it for several (any
    /// matches). A process whose name cannot be read cannot match: the summary counts those.
    #[arg(long, value_name = "PATTERN")]
    pub filter: Vec<String>,
    /// Hide processes whose footprint (VRAM + shared) is below SIZE (12GiB, 512MiB, bytes).
    #[arg(long, value_parser = args::size, value_name = "SIZE")]
    pub min: Option<u64>,
    /// Exit 1 when nothing is listed and 0 when something is, as pgrep does; 2 when the answer
    /// cannot be trusted (a GPU that could not be listed, a process the filters could match
    /// that could not be read).
    #[arg(long)]
    pub exit_status: bool,
    /// Add each GPU's memory up by owner, container, pod, Kubernetes namespace or DRA resource
    /// claim, instead of listing the processes.
    #[arg(long, value_enum, value_name = "KEY")]
    pub group_by: Option<GroupBy>,
    /// With --group-by claim: the kubelet's pod-resources socket, which names each container's
    /// claims (default: `var/lib/kubelet/pod-resources/kubelet.sock` under the rootfs).
    #[arg(long, value_name = "PATH")]
    pub pod_resources_socket: Option<std::path::PathBuf>,
    /// Say why memory is held that should not be: a WHY column with each row's ghost class
    /// (`exited`, `zombie`, `stuck`, `orphan`, `gone_pod`, `idle`, `unaccounted`; `-` for
    /// none), and a footer that sums the bytes by class (`hmn ghosts` gives the evidence).
    #[arg(long)]
    pub why: bool,
    /// With --why: a process holding memory is idle when the driver's activity samples show no
    /// engine at work for it for this long.
    #[arg(long, requires = "why", default_value = "10m", value_parser = args::duration, value_name = "DURATION")]
    pub idle_after: std::time::Duration,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub deadline: DeadlineArg,
}

impl PsArgs {
    /// Whether any option narrows the rows (the memory no row accounts for is then not shown:
    /// it is no process, and matches nothing).
    fn narrows(&self) -> bool {
        !self.pid.is_empty()
            || self.user.is_some()
            || !self.filter.is_empty()
            || self.min.is_some_and(|m| m > 0)
    }

    /// Whether `name` matches `--filter` (anything does without it).
    fn name_matches(&self, name: Option<&str>) -> bool {
        self.filter.is_empty()
            || name.is_some_and(|n| {
                let n = n.to_lowercase();
                self.filter.iter().any(|f| n.contains(&f.to_lowercase()))
            })
    }
}

/// What the rows left out say about an empty answer.
#[derive(Debug, Default)]
struct Undecided {
    /// Rows whose name could not be read while `--filter` asked for one.
    unnamed: usize,
    /// Rows whose owner could not be read while `--user` asked for one.
    unowned: usize,
}

pub fn run(args: &PsArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let devices: Vec<u32> = match (args.device, hypomnesis::device_count()) {
        (_, Err(HypomnesisError::NoGpuSource)) => Vec::new(),
        (_, Err(e)) => {
            writeln!(err, "hmn: failed to count devices: {e}")?;
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
    let Listed {
        mut rows,
        mut hidden,
        failures,
    } = list(args, &devices, &causes, err)?;
    with_context(&mut rows);
    on_gpu_nodes(&mut rows);
    let undecided = keep_asked(args, &mut rows);
    render::sort_rows(&mut rows, args.sort);
    let report = if args.why && !devices.is_empty() {
        super::ghosts::mark(&mut rows, &mut hidden, args.idle_after, err)?
    } else {
        None
    };
    let claims = if args.group_by == Some(GroupBy::Claim) {
        claims(args, &devices, err)?
    } else {
        None
    };
    print(args, &rows, &hidden, claims.as_ref(), out)?;
    if let Some(report) = &report
        && !args.output.json
        && args.group_by.is_none()
    {
        crate::view::ghosts::footer_of(out, report, |g| match g.pid {
            Some(pid) => rows
                .iter()
                .any(|r| r.entry.device_index == g.device_index && r.entry.pid == pid),
            None => hidden.iter().any(|h| h.device_index == g.device_index),
        })?;
    }
    let asked = Asked {
        pids: &args.pid,
        device: args.device,
        user: args.user.as_deref(),
        filters: &args.filter,
        min: args.min,
    };
    writeln!(
        err,
        "{}",
        render::ps_summary(&rows, &asked, undecided.unnamed, devices.is_empty())
    )?;
    notes(&rows, &hidden, &causes, err)?;
    Ok(outcome(
        args,
        &devices,
        failures,
        rows.is_empty(),
        &undecided,
    ))
}

/// What the GPUs listed: the rows `--pid` and `--min` keep, the memory no row accounts for,
/// and how many GPUs could not be listed (said on `err`).
struct Listed {
    rows: Vec<PsRow>,
    hidden: Vec<Hidden>,
    failures: usize,
}

fn list(
    args: &PsArgs,
    devices: &[u32],
    causes: &Causes,
    err: &mut impl Write,
) -> io::Result<Listed> {
    let measurable = hypomnesis::is_spill_measurable();
    let mut rows = Vec::new();
    let mut hidden = Vec::new();
    let mut failures = 0;
    for &i in devices {
        match hypomnesis::gpu_processes(i) {
            Ok(list) => {
                let info = hypomnesis::device_info(i).ok();
                let device_name = info.as_ref().and_then(|d| d.name.clone());
                let device_vendor = info.as_ref().and_then(|d| d.vendor);
                let gpu_node = info.as_ref().and_then(|d| d.numa_node);
                if !args.narrows()
                    && let Some(h) = info.as_ref().and_then(|d| hidden_of(d, &list, causes))
                {
                    hidden.push(h);
                }
                let spill = if measurable { device_spill(i) } else { None };
                rows.extend(
                    list.into_iter()
                        .filter(|e| args.pid.is_empty() || args.pid.contains(&e.pid))
                        .filter(|e| {
                            args.min.is_none_or(|m| {
                                e.used_bytes.saturating_add(e.shared_used_bytes) >= m
                            })
                        })
                        .map(|entry| PsRow {
                            spill: spill.map(|(spilling, shared)| {
                                RowSpill::of(spilling, shared, entry.shared_used_bytes)
                            }),
                            entry,
                            ctx: ProcessContext::default(),
                            device_name: device_name.clone(),
                            device_vendor,
                            why: Why::NotAsked,
                            gpu_node: gpu_node.map(|n| (n, None)),
                        }),
                );
            }
            Err(e) => {
                failures += 1;
                writeln!(
                    err,
                    "hmn: failed to list GPU {i}'s processes: {e} (skipped)"
                )?;
            }
        }
    }
    Ok(Listed {
        rows,
        hidden,
        failures,
    })
}

/// Keeps the rows `--user` and `--filter` ask for; counts those that cannot be told.
fn keep_asked(args: &PsArgs, rows: &mut Vec<PsRow>) -> Undecided {
    let mut undecided = Undecided::default();
    rows.retain(|r| {
        // `None`: the owner asked for cannot be read.
        let owner = args
            .user
            .as_ref()
            .map_or(Some(true), |u| owned_by(&r.ctx, u));
        let name = args.name_matches(r.entry.name.as_deref());
        // A row that cannot be read could be one of those asked for: counted, not dropped
        // silently.
        if r.entry.name.is_none() && !args.filter.is_empty() && owner != Some(false) {
            undecided.unnamed += 1;
        } else if owner.is_none() && name {
            undecided.unowned += 1;
        }
        owner == Some(true) && name
    });
    undecided
}

/// The lines after the summary: rows that could not be read, memory no row accounts for,
/// rows the sources left out.
fn notes(
    rows: &[PsRow],
    hidden: &[Hidden],
    causes: &Causes,
    err: &mut impl Write,
) -> io::Result<()> {
    for line in unseen::rows_line(rows.iter().map(|r| &r.entry), causes) {
        writeln!(err, "{line}")?;
    }
    if !hidden.is_empty() {
        writeln!(err, "{}", unseen::hidden_line(hidden, causes))?;
    }
    let dropped = hypomnesis::dropped_process_rows();
    if dropped > 0 {
        writeln!(err, "{}", render::dropped_rows_line(dropped))?;
    }
    Ok(())
}

/// The exit status: 2 when the GPU asked for or every GPU could not be listed; with
/// `--exit-status`, 1 for an empty answer, unless a GPU was skipped or a row the filters could
/// match could not be read (2: the empty answer cannot be trusted).
fn outcome(
    args: &PsArgs,
    devices: &[u32],
    failures: usize,
    empty: bool,
    undecided: &Undecided,
) -> Outcome {
    let all_failed = !devices.is_empty() && failures == devices.len();
    if all_failed {
        return Outcome::MeasurementFailed;
    }
    if !args.exit_status {
        return Outcome::Success;
    }
    match (
        empty,
        failures > 0 || undecided.unnamed + undecided.unowned > 0,
    ) {
        (false, _) => Outcome::Success,
        (true, true) => Outcome::MeasurementFailed,
        (true, false) => Outcome::Code(1),
    }
}

/// Whether GPU `i` spills now, and its shared bytes (one sample of its counters); `None` when
/// they cannot be read.
fn device_spill(i: u32) -> Option<(bool, u64)> {
    let r = hypomnesis::adapter_residency(i).ok()?;
    Some((
        hypomnesis::spill::is_spilling_now(r.dedicated_bytes, r.shared_bytes, r.capacity_bytes),
        r.shared_bytes,
    ))
}

/// The rows (or their groups) as a table or JSON.
fn print(
    args: &PsArgs,
    rows: &[PsRow],
    hidden: &[Hidden],
    claims: Option<&groups::Claims>,
    out: &mut impl Write,
) -> io::Result<()> {
    if let Some(by) = args.group_by {
        let g = groups::groups(rows, hidden, by, claims);
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

/// Each container's DRA claims on each GPU, from the kubelet's pod-resources socket
/// (`--pod-resources-socket`, else the one under the rootfs) laid onto the `devices`; `None`,
/// said on `err`, when it cannot be asked.
#[cfg(all(unix, feature = "kubernetes"))]
fn claims(
    args: &PsArgs,
    devices: &[u32],
    err: &mut impl Write,
) -> io::Result<Option<groups::Claims>> {
    let socket = args.pod_resources_socket.clone().unwrap_or_else(|| {
        crate::kube::place::NodeFiles::in_use()
            .rootfs
            .join(crate::kube::DEFAULT_SOCKET.trim_start_matches('/'))
    });
    let allocations =
        match crate::kube::list_blocking(&socket, super::ghosts::POD_RESOURCES_DEADLINE) {
            Ok(a) => a,
            Err(e) => {
                writeln!(
                    err,
                    "hmn: pod-resources: {}; claims are not known (?)",
                    crate::view::printable::printable(&e.to_string())
                )?;
                return Ok(None);
            }
        };
    let infos: Vec<GpuDeviceInfo> = devices
        .iter()
        .filter_map(|&i| hypomnesis::device_info(i).ok())
        .collect();
    let a = crate::kube::place::place(&allocations, &infos);
    if let Some(why) = &a.specs_error {
        writeln!(
            err,
            "hmn: the DRA claims' CDI specs: not all read, so their devices are not placed: {}",
            crate::view::printable::printable(why)
        )?;
    }
    let names = crate::kube::place::claims_of_containers(&a)
        .into_iter()
        .map(|((gpu, ns, pod, container), claims)| {
            let names: Vec<String> = claims
                .iter()
                .map(|c| format!("{}/{}", c.namespace, c.name))
                .collect();
            (
                (gpu, ns.to_owned(), pod.to_owned(), container.to_owned()),
                names.join(","),
            )
        })
        .collect();
    Ok(Some(names))
}

/// Without the pod-resources client, claims are not known.
#[cfg(not(all(unix, feature = "kubernetes")))]
fn claims(
    _args: &PsArgs,
    _devices: &[u32],
    err: &mut impl Write,
) -> io::Result<Option<groups::Claims>> {
    writeln!(
        err,
        "hmn: claims are not known: this hmn was built without the kubelet's pod-resources client"
    )?;
    Ok(None)
}

/// The memory of `device` its process rows do not account for, when it is more than the
/// driver's own overhead for that many processes.
fn hidden_of(device: &GpuDeviceInfo, list: &[GpuProcessEntry], causes: &Causes) -> Option<Hidden> {
    let bytes = device.unaccounted_bytes(list)?;
    (bytes > 0).then(|| Hidden {
        device_index: device.index,
        device_name: device.name.clone(),
        device_vendor: device.vendor,
        bytes,
        mps: list
            .iter()
            .any(|p| p.mps_server || p.context.is_some_and(GpuContextKind::mps)),
        hidepid: causes.hidepid_option.clone(),
        why: Why::NotAsked,
    })
}

/// Each row's process context, read from the files of the GPU-holding processes only, by the
/// library's one reader of who a process is ([`Identities`]; a one-off command keeps nothing
/// after). A process outside this PID namespace has none to read; one mapped from the host's
/// pid is read under that pid (the procfs root in use is the host's).
fn with_context(rows: &mut [PsRow]) {
    // The container is read for the text too: it names a row's Kubernetes namespace and pod,
    // and the groups of --group-by. The CPU time is not shown.
    let mut parts = IdentityParts::NONE;
    (parts.container, parts.changing) = (true, true);
    let wanted = contexts::readable(rows.iter().map(|r| &r.entry));
    let read = Identities::new().read(&wanted, parts, |_| true);
    for row in rows.iter_mut() {
        if let Some(identity) = read.get(&row.entry.pid) {
            row.ctx = identity.context();
            row.ctx.cpu_time = None;
        }
    }
}

/// Each row's bytes on its GPU's NUMA node, where its GPU's memory is one (a coherent machine
/// in NUMA mode), from the process's `numa_maps`: read once per process, and only there.
fn on_gpu_nodes(rows: &mut [PsRow]) {
    let mut read: std::collections::BTreeMap<u32, Option<std::collections::BTreeMap<u32, u64>>> =
        std::collections::BTreeMap::new();
    for row in rows.iter_mut() {
        let Some((node, _)) = row.gpu_node else {
            continue;
        };
        let Some(pid) = row.entry.readable_pid() else {
            continue;
        };
        let placed = read
            .entry(pid)
            .or_insert_with(|| hypomnesis::process_numa_bytes(pid).ok());
        // A process with no page there has 0 bytes there: its numa_maps was read.
        row.gpu_node = Some((
            node,
            placed.as_ref().map(|p| p.get(&node).copied().unwrap_or(0)),
        ));
    }
}

/// Whether `user` (a name or a uid) owns the process; `None` when its owner cannot be read.
fn owned_by(ctx: &ProcessContext, user: &str) -> Option<bool> {
    if ctx.user.is_none() && ctx.uid.is_none() {
        return None;
    }
    Some(ctx.user.as_deref() == Some(user) || ctx.uid.is_some_and(|u| u.to_string() == user))
}
