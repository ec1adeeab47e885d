//! `hmn fits SIZE --prometheus URL`: every GPU and MIG instance a Prometheus server knows
//! (recent samples only), ranked by free memory, with the reason each one that does not fit
//! does not; `--count N` for N GPUs on one node; `--wait`/`--settle` as on one host.

use std::io::{self, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use hypomnesis_fleet::{Client, Fleet, Read, Selector, Verdict};

use super::FitsArgs;
use crate::args;
use crate::collect::settle::{Settle, Steady};
use crate::collect::stop::Stop;
use crate::outcome::Outcome;
use crate::prometheus::PrometheusArgs;
use crate::view::fleet::{self as render, Asked, gpu_name};
use crate::view::format_size;

/// Options of `hmn fits` across a fleet.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// Ask the Prometheus server at this URL (http:// or https://) about every node it
    /// scrapes, instead of this host's GPU: hypomnesis's series (`hmn serve`), else
    /// dcgm-exporter's.
    #[arg(long, value_name = "URL", conflicts_with = "device")]
    pub prometheus: Option<String>,
    /// N GPUs on one node (a tensor-parallel job), SIZE on each.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "prometheus",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub count: u32,
    /// PromQL label matchers a GPU must hold: its target's labels (node, a pool), `model`,
    /// and `namespace`/`pod` of the pods on it (`model=~"NVIDIA H.*",pool="train"`).
    #[arg(long, value_name = "MATCHERS", requires = "prometheus")]
    pub selector: Option<String>,
    /// A target whose newest sample is older than this is not counted (it is named).
    #[arg(long, value_parser = args::duration, value_name = "DURATION", default_value = "2m",
          requires = "prometheus")]
    pub stale_after: Duration,
    /// How many GPUs (or lines of a list) the text shows; --json shows all.
    #[arg(long, value_name = "N", default_value_t = 20, requires = "prometheus")]
    pub top: usize,
    #[command(flatten)]
    pub client: PrometheusArgs,
}

/// Unix seconds now.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The client and the selector `args` ask for, or why not.
fn setup(f: &FleetArgs, url: &str) -> Result<(Client, Selector), String> {
    let selector = Selector::parse(f.selector.as_deref().unwrap_or_default())
        .map_err(|e| format!("--selector: {e}"))?;
    let client = f.client.client(url)?;
    Ok((client, selector))
}

/// The answer, once or as a gate (`--wait`, `--settle`): exit 0 when it fits (in figures that
/// held, with `--settle`), 1 when it does not (at the deadline, on Ctrl-C, once the samples are
/// in), 2 when Prometheus cannot answer or knows no GPU.
pub fn run(
    args: &FitsArgs,
    url: &str,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<Outcome> {
    let f = &args.fleet;
    let (client, selector) = match setup(f, url) {
        Ok(x) => x,
        Err(e) => {
            writeln!(err, "hmn fits: {e}")?;
            return Ok(Outcome::Code(2));
        }
    };
    let gate = args.wait.is_some() || args.settle.is_some();
    let samples = usize::from(args.settle.unwrap_or(1));
    let mut settle = Settle::new(samples, args.tolerance);
    let every = args.every(Duration::from_secs(15));
    let stop = Stop::on_signals();
    let started = Instant::now();
    let until = args.wait.map(|w| started + w);
    let mut taken = 0_usize;
    loop {
        let how = Read {
            stale_after: f.stale_after,
            selector: selector.clone(),
            at: now(),
        };
        let mut fleet = match hypomnesis_fleet::read(&client, &how) {
            Ok(fleet) => fleet,
            Err(e) => {
                writeln!(err, "hmn fits: {e}")?;
                return Ok(Outcome::Code(2));
            }
        };
        taken += 1;
        let moving = if gate {
            settled(&mut fleet, &mut settle)
        } else {
            Vec::new()
        };
        let placement = hypomnesis_fleet::place(&fleet, args.size, f.count);
        let verdict = placement.verdict();
        let last = stop.requested()
            || verdict == Verdict::Fits
            || !gate
            || until.map_or(taken >= samples, |u| Instant::now() + every > u);
        if last {
            if fleet.gpus.is_empty() && moving.is_empty() {
                let kept = if selector.matchers.is_empty() {
                    ""
                } else {
                    " that the selector keeps"
                };
                writeln!(
                    err,
                    "hmn fits: {url} knows no GPU with recent samples{kept} (is `hmn serve` or \
                     dcgm-exporter scraped there?)",
                )?;
                if fleet.stale.is_empty() {
                    return Ok(Outcome::Code(2));
                }
            }
            let asked = Asked {
                prometheus: client.base(),
                top: f.top,
                settling: gate.then_some((samples, moving.as_slice())),
            };
            answer(args, &fleet, &placement, &asked, out, err)?;
            if gate && verdict != Verdict::Fits {
                not_yet(args, stop.requested(), started, err)?;
            }
            return Ok(if verdict == Verdict::Fits {
                Outcome::Success
            } else {
                Outcome::Code(1)
            });
        }
        super::pause(every, &stop);
    }
}

/// The gate's last line when it ends without a fit.
fn not_yet(
    args: &FitsArgs,
    stopped: bool,
    started: Instant,
    err: &mut impl Write,
) -> io::Result<()> {
    let why = args.why_ended(stopped);
    let waited = crate::view::human(started.elapsed());
    let size = format_size(args.size);
    writeln!(
        err,
        "hmn fits: {size} does not fit yet ({why} after {waited})"
    )
}

/// Writes the answer, as text or JSON.
fn answer(
    args: &FitsArgs,
    fleet: &Fleet,
    placement: &hypomnesis_fleet::Placement,
    asked: &Asked<'_>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<()> {
    if args.output.json {
        match render::json(fleet, placement, asked) {
            Ok(j) => writeln!(out, "{j}"),
            Err(e) => writeln!(err, "hmn fits: {e}"),
        }
    } else {
        write!(out, "{}", render::text(fleet, placement, asked))
    }
}

/// Keeps in `fleet` the GPUs whose free figure held over the samples `settle` asks (each at
/// the least of them), and says the others.
fn settled(fleet: &mut Fleet, settle: &mut Settle) -> Vec<String> {
    let key = |g: &hypomnesis_fleet::Gpu| {
        format!(
            "{}\u{0}{}\u{0}{}",
            g.node,
            g.index,
            g.mig.as_ref().map_or("", |m| m.id.as_str())
        )
    };
    let keys: std::collections::BTreeSet<String> = fleet.gpus.iter().map(key).collect();
    settle.retain(|k| keys.contains(k));
    let samples = settle.samples();
    let mut moving = Vec::new();
    fleet
        .gpus
        .retain_mut(|g| match settle.record(&key(g), g.free) {
            Steady::Held(least) => {
                g.free = least;
                true
            }
            Steady::Moving { samples: n, spread } => {
                moving.push(if n < samples {
                    format!("{}: {n} of {samples} samples so far", gpu_name(g))
                } else {
                    format!(
                        "{}: free memory moved by {} over the last {samples} samples",
                        gpu_name(g),
                        format_size(spread)
                    )
                });
                false
            }
        });
    moving
}
