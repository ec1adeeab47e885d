//! `hmn fits SIZE`: whether an allocation of SIZE fits in a GPU's free memory now, as the exit
//! status (0 it fits, 1 it does not, 2 the question cannot be answered), with one line on stderr;
//! with `--wait` and `--settle`, once it fits and the free figure has held steady (the launch
//! gate of an engine that sizes itself from free memory); with `--prometheus`, across every
//! node a Prometheus server knows.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::{GpuDeviceInfo, HypomnesisError};

use crate::args::{self, DeadlineArg, JsonArg, RootArgs};
use crate::collect::settle::{Settle, Steady};
use crate::collect::stop::Stop;
use crate::outcome::Outcome;
use crate::view::fits::{Verdict, verdict_line};
use crate::view::format_size;

#[cfg(feature = "fleet")]
mod fleet;

/// Options of `hmn fits`.
#[derive(Debug, Clone, Args)]
pub struct FitsArgs {
    /// The size: bytes, or a number with KiB, MiB, GiB or TiB (12GiB, 1.5GiB, 512MiB).
    #[arg(value_parser = args::size, value_name = "SIZE")]
    pub size: u64,
    /// The GPU (index as in `hmn`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub device: u32,
    /// Wait until it fits (and, with --settle, the free figure has held steady), for at most
    /// this long: exit 0 once it does, 1 at the deadline or on Ctrl-C.
    #[arg(long, value_parser = args::duration, value_name = "DURATION")]
    pub wait: Option<Duration>,
    /// Count a free figure once it has held steady over its last N samples (within
    /// --tolerance), and then as the least of them: two engines started together no longer
    /// count each other's loading. Without --wait, answers after N samples.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub settle: Option<u16>,
    /// How much a free figure may move over --settle's samples and still be steady.
    #[arg(long, value_parser = args::size, value_name = "SIZE", default_value = "256MiB")]
    pub tolerance: u64,
    /// Time between samples with --wait or --settle [default: 1s; 15s with --prometheus].
    #[arg(long, value_parser = args::duration, value_name = "DURATION")]
    pub every: Option<Duration>,
    #[cfg(feature = "fleet")]
    #[command(flatten)]
    pub fleet: fleet::FleetArgs,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub deadline: DeadlineArg,
}

impl FitsArgs {
    /// Whether it answers at once, from one reading of this host (run within its deadline).
    pub fn once_here(&self) -> bool {
        self.wait.is_none() && self.settle.is_none() && !self.across_fleet()
    }

    #[cfg(feature = "fleet")]
    fn across_fleet(&self) -> bool {
        self.fleet.prometheus.is_some()
    }

    #[cfg(not(feature = "fleet"))]
    #[allow(clippy::unused_self)]
    fn across_fleet(&self) -> bool {
        false
    }

    /// Why a gate that did not see a fit ended: a stop request, its `--wait`, or the samples
    /// `--settle` asked for.
    fn why_ended(&self, stopped: bool) -> &'static str {
        if stopped {
            "stopped"
        } else if self.wait.is_some() {
            "the wait is over"
        } else {
            "the samples are in"
        }
    }

    /// Time between samples.
    fn every(&self, default: Duration) -> Duration {
        self.every.unwrap_or(default)
    }
}

/// `hmn fits` in whichever form its options ask for.
pub fn run(args: &FitsArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    #[cfg(feature = "fleet")]
    if let Some(url) = &args.fleet.prometheus {
        return fleet::run(args, url, out, err);
    }
    if args.once_here() {
        once(args, err)
    } else {
        gate(args, out, err)
    }
}

/// One reading of the GPU: its line on stderr, its exit status. No JSON: its answer is the
/// exit status (as in 0.2.x, where `--json` here is a usage error).
fn once(args: &FitsArgs, err: &mut impl Write) -> io::Result<Outcome> {
    if args.output.json {
        writeln!(
            err,
            "hmn fits: --json applies with --prometheus, --wait or --settle; alone, the answer is \
             the exit status"
        )?;
        return Ok(Outcome::Code(2));
    }
    let device = match device(args.device) {
        Ok(d) => d,
        Err(e) => {
            writeln!(err, "hmn fits: {e}")?;
            return Ok(Outcome::MeasurementFailed);
        }
    };
    let v = Verdict {
        size: args.size,
        index: device.index,
        name: device.name.as_deref(),
        free: device.free_bytes,
    };
    writeln!(err, "{}", verdict_line(&v))?;
    Ok(if v.fits() {
        Outcome::Success
    } else {
        Outcome::Code(1)
    })
}

/// The JSON of a local answer: the size, the GPU, its free figure, whether it fits; with
/// `--settle`, whether the figure held and over how many samples.
fn write_json(
    out: &mut impl Write,
    v: &Verdict<'_>,
    settle: Option<(bool, usize)>,
) -> io::Result<()> {
    let mut j = serde_json::json!({
        "size_bytes": v.size,
        "device": v.index,
        "name": v.name,
        "free_bytes": v.free,
        "fits": v.fits() && settle.is_none_or(|(held, _)| held),
    });
    if let (Some((held, samples)), Some(o)) = (settle, j.as_object_mut()) {
        o.insert("settled".into(), held.into());
        o.insert("samples".into(), samples.into());
    }
    writeln!(out, "{j}")
}

/// What a wait on this host's GPU asks for.
pub struct Wait {
    pub size: u64,
    pub device: u32,
    /// Samples a free figure must hold over (`--settle`; 1 without it).
    pub samples: usize,
    pub tolerance: u64,
    pub every: Duration,
    /// When the wait ends; `None`: once `samples` samples are in.
    pub until: Option<Instant>,
    /// How long one reading may take.
    pub deadline: Duration,
}

/// How a wait ended.
pub enum Waited {
    /// It fits, in a figure that held (`device.free_bytes` is that figure).
    Fits { device: GpuDeviceInfo, taken: usize },
    /// The wait is over, or a stop was asked: the last reading, whether its figure held (then
    /// `device.free_bytes` is the held figure), the free figure now.
    NotYet {
        device: GpuDeviceInfo,
        held: bool,
        free_now: u64,
        taken: usize,
    },
    /// The GPU could not be read.
    Failed(String),
}

/// Samples GPU `w.device`'s free memory every `w.every`, each reading bounded by
/// `w.deadline`, until `w.size` fits in a figure that held steady, the wait is over, or `stop`
/// is asked.
pub fn wait(w: &Wait, stop: &Stop) -> Waited {
    let mut settle = Settle::new(w.samples, w.tolerance);
    let worker = hypomnesis::bounded::Worker::new("fits");
    let mut taken = 0_usize;
    loop {
        let index = w.device;
        let read = worker
            .ask(w.deadline, move || device(index))
            .map_err(|why| why.to_string())
            .and_then(|r| r);
        let mut device = match read {
            Ok(d) => d,
            Err(e) => return Waited::Failed(e),
        };
        taken += 1;
        let free_now = device.free_bytes;
        let held = match settle.record("gpu", free_now) {
            Steady::Held(least) => {
                device.free_bytes = least;
                true
            }
            Steady::Moving { .. } => false,
        };
        if held && w.size <= device.free_bytes {
            return Waited::Fits { device, taken };
        }
        let over = match w.until {
            Some(u) => Instant::now() + w.every > u,
            None => taken >= w.samples,
        };
        if over || stop.requested() {
            return Waited::NotYet {
                device,
                held,
                free_now,
                taken,
            };
        }
        pause(w.every, stop);
    }
}

/// `--wait`/`--settle` on this host: the [`wait`], then its line on stderr (and its JSON): exit
/// 0 once it fits in a figure that held, 1 at the deadline, on Ctrl-C, or (without `--wait`)
/// once the samples `--settle` asks are in.
fn gate(args: &FitsArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let stop = Stop::on_signals();
    let samples = usize::from(args.settle.unwrap_or(1));
    let started = Instant::now();
    let w = Wait {
        size: args.size,
        device: args.device,
        samples,
        tolerance: args.tolerance,
        every: args.every(Duration::from_secs(1)),
        until: args.wait.map(|d| started + d),
        deadline: args.deadline.get(),
    };
    let size = args.size;
    match wait(&w, &stop) {
        Waited::Failed(e) => {
            writeln!(err, "hmn fits: {e}")?;
            Ok(Outcome::MeasurementFailed)
        }
        Waited::Fits { device, taken } => {
            let v = verdict_of(size, &device);
            writeln!(err, "{}", gate_line(&v, samples, started.elapsed()))?;
            if args.output.json {
                write_json(out, &v, args.settle.map(|_| (true, taken)))?;
            }
            Ok(Outcome::Success)
        }
        Waited::NotYet {
            device,
            held,
            free_now,
            taken,
        } => {
            let v = verdict_of(size, &device);
            let why = args.why_ended(stop.requested());
            writeln!(
                err,
                "{} ({why} after {})",
                not_yet_line(&v, held, samples, args.tolerance, free_now),
                crate::view::human(started.elapsed())
            )?;
            if args.output.json {
                write_json(out, &v, args.settle.map(|_| (held, taken)))?;
            }
            Ok(Outcome::Code(1))
        }
    }
}

/// The verdict on `device`'s free figure for `size`.
pub fn verdict_of(size: u64, device: &GpuDeviceInfo) -> Verdict<'_> {
    Verdict {
        size,
        index: device.index,
        name: device.name.as_deref(),
        free: device.free_bytes,
    }
}

/// Why a wait did not open: the verdict on the figure that held, or that none held.
pub fn not_yet_line(
    v: &Verdict<'_>,
    held: bool,
    samples: usize,
    tolerance: u64,
    free_now: u64,
) -> String {
    if held {
        verdict_line(v)
    } else {
        format!(
            "hmn: GPU {}'s free memory has not held within {} over {samples} samples ({} free now)",
            v.index,
            format_size(tolerance),
            format_size(free_now)
        )
    }
}

/// Sleeps `every`, in steps short enough that a stop request ends it at once.
fn pause(every: Duration, stop: &Stop) {
    let next = Instant::now() + every;
    while Instant::now() < next && !stop.requested() {
        std::thread::sleep(Duration::from_millis(50).min(every));
    }
}

/// The settled line: `hmn: 12.0 GiB fits on GPU 0 [NVIDIA H200]: 139.8 GiB free, held over 3
/// samples (waited 2s)`.
pub fn gate_line(v: &Verdict<'_>, samples: usize, waited: Duration) -> String {
    let held = if samples > 1 {
        format!(", held over {samples} samples")
    } else {
        String::new()
    };
    format!(
        "{}{held} (waited {})",
        verdict_line(v),
        crate::view::human(waited)
    )
}

/// GPU `index`'s figures, or why they cannot be had.
fn device(index: u32) -> Result<GpuDeviceInfo, String> {
    match hypomnesis::device_count() {
        Err(HypomnesisError::NoGpuSource) => {
            return Err("no GPU here to fit anything into (`hmn doctor` says why)".into());
        }
        Err(e) => return Err(format!("failed to count devices: {e}")),
        Ok(n) if index >= n => {
            return Err(HypomnesisError::DeviceIndexOutOfRange { index, count: n }.to_string());
        }
        Ok(_) => {}
    }
    hypomnesis::device_info(index).map_err(|e| format!("failed to query device {index}: {e}"))
}
