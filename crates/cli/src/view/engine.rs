//! `hmn run`'s engine part (text): the ledger at each of the engine's lines, the gap named,
//! what the neighbours did in each phase and while it sized its KV cache, and, when it failed
//! for want of memory, one paragraph on who held the memory then and what would have fitted.

use std::fmt::Write as _;

use super::format_size as size;
use super::printable::printable;
use crate::engine::ledger::{Change, EngineReport, Failure, Holder, LedgerRow, Who};
use crate::engine::{Engine, Kind};

/// `+2.3 GiB`, `-512 MiB`.
fn signed(b: i64) -> String {
    let sign = if b < 0 { "-" } else { "+" };
    format!("{sign}{}", size(b.unsigned_abs()))
}

/// `pid 4242 `vllm serve` (pod serve-b)`.
fn named(pid: u32, who: &Who) -> String {
    let mut s = format!("pid {pid}");
    if let Some(c) = &who.command {
        let c: String = printable(c).chars().take(60).collect();
        let _ = write!(s, " `{c}`");
    }
    if let Some(p) = &who.pod {
        let _ = write!(s, " (pod {})", printable(p));
    }
    s
}

/// What a ledger row's line said, in a few words.
fn said(r: &LedgerRow) -> String {
    let or_unknown = |b: Option<u64>| b.map_or_else(|| "?".to_string(), size);
    match r.kind {
        Kind::LoadingWeights => "loading weights".to_string(),
        Kind::WeightsLoaded => format!("weights {}", or_unknown(r.weights_bytes)),
        Kind::Profiled => match r.non_torch_bytes {
            Some(n) => format!("profiled: non-torch {}", size(n)),
            None => "profiled".to_string(),
        },
        Kind::KvCacheSized => format!("KV cache sized {}", or_unknown(r.kv_cache_bytes)),
        Kind::KvCacheAllocated => format!("KV cache allocated {}", or_unknown(r.kv_cache_bytes)),
        Kind::CapturingGraphs => "capturing CUDA graphs".to_string(),
        Kind::GraphsCaptured => format!("CUDA graphs {}", or_unknown(r.cuda_graphs_bytes)),
        Kind::Ready => "ready".to_string(),
        Kind::OutOfMemory => "out of memory".to_string(),
    }
}

/// The engine part of the summary.
pub fn lines(out: &mut String, r: &EngineReport) {
    let engine = r.engine.name();
    let on = r.gpu.map_or_else(
        || "no GPU of its own seen".to_string(),
        |g| format!("GPU {g}"),
    );
    if r.engine != Engine::Torch && r.ledger.iter().any(|row| row.kind != Kind::OutOfMemory) {
        table(out, r, &on);
    }
    for p in &r.phases {
        for c in &p.largest {
            let _ = writeln!(
                out,
                "  while {engine} was {} ({:.1}–{:.1} s), {} {} on GPU {}",
                p.doing,
                p.from_s,
                p.to_s,
                named(c.pid, &c.who),
                moved(c),
                r.gpu.unwrap_or(0)
            );
        }
    }
    if let Some(s) = &r.sizing {
        let others = s
            .largest
            .iter()
            .map(|c| format!("{} {}", named(c.pid, &c.who), moved(c)))
            .collect::<Vec<_>>()
            .join("; ");
        let effect = if s.others_change_bytes > 0 {
            let grown = size(s.others_change_bytes.unsigned_abs());
            if s.in_its_non_torch_bytes.is_some() {
                format!(
                    "it counted their {grown} as its own non-torch memory, and its KV cache is \
                     that much smaller"
                )
            } else {
                format!("its KV cache is {grown} smaller than it would have been")
            }
        } else {
            format!(
                "it may count the {} they freed as its own (vLLM's 'Error in memory profiling')",
                size(s.others_change_bytes.unsigned_abs())
            )
        };
        let _ = writeln!(
            out,
            "  {engine} sizes its KV cache from the GPU's free memory, and the other processes' \
             memory changed by {} while it did ({:.1}–{:.1} s{}{}): {effect}. Start engines \
             once the GPU's free memory holds steady: hmn run --wait-for SIZE --settle N",
            signed(s.others_change_bytes),
            s.from_s,
            s.to_s,
            if others.is_empty() { "" } else { "; " },
            others
        );
    }
    if let Some(f) = &r.failure {
        failure(out, engine, r.gpu, f);
    }
    if r.events_dropped > 0 || r.lines_too_long > 0 {
        let _ = writeln!(
            out,
            "  ({} more engine lines not kept; {} lines too long to read)",
            r.events_dropped, r.lines_too_long
        );
    }
}

/// The ledger's rows, and the gap named.
fn table(out: &mut String, r: &EngineReport, on: &str) {
    let engine = r.engine.name();
    let _ = writeln!(
        out,
        "  {engine}, as it started ({on}): its own figures beside what the driver charged its \
         processes"
    );
    let _ = writeln!(
        out,
        "    {:>8}  {:<36} {:>10} {:>10} {:>10}",
        "at", "its line", "it counts", "driver", "gap"
    );
    // A run of lines of one kind is one row: the last of them.
    // The failure has its own paragraph.
    let rows: Vec<&LedgerRow> = r
        .ledger
        .iter()
        .filter(|row| row.kind != Kind::OutOfMemory)
        .collect();
    let last_of_kind = rows
        .iter()
        .enumerate()
        .filter(|(i, row)| rows.get(i + 1).is_none_or(|next| next.kind != row.kind));
    for (_, row) in last_of_kind {
        let driver = row.driver_bytes.map_or_else(|| "?".to_string(), size);
        let gap = row.gap_bytes.map_or_else(|| "?".to_string(), signed);
        let _ = writeln!(
            out,
            "    {:>7.1}s  {:<36} {:>10} {:>10} {:>10}",
            row.at,
            said(row),
            size(row.engine_accounts_bytes),
            driver,
            gap
        );
    }
    gap_line(out, r);
}

fn moved(c: &Change) -> String {
    if c.bytes >= 0 {
        format!("grew by {}", size(c.bytes.unsigned_abs()))
    } else {
        format!("shrank by {}", size(c.bytes.unsigned_abs()))
    }
}

/// The gap at the last row that has the driver's figure, named: the others' growth the engine
/// counted as its own non-torch memory, then what is left.
fn gap_line(out: &mut String, r: &EngineReport) {
    let Some(row) = r
        .ledger
        .iter()
        .rev()
        .find(|row| row.gap_bytes.is_some() && row.kind != Kind::OutOfMemory)
    else {
        let _ = writeln!(
            out,
            "  (the driver charged its processes nothing that could be read)"
        );
        return;
    };
    let engine = r.engine.name();
    let mut gap = row.gap_bytes.unwrap_or(0);
    let mut said = format!("  at {:.1} s", row.at);
    if let Some((s, counted)) = r
        .sizing
        .as_ref()
        .and_then(|s| Some((s, s.in_its_non_torch_bytes.filter(|&c| c > 0)?)))
    {
        let _ = write!(
            said,
            " {engine}'s non-torch figure holds {} that other processes took in the same window \
             ({:.1}–{:.1} s): memory it counts and the driver charges to them;",
            size(counted),
            s.from_s,
            s.to_s
        );
        gap = gap.saturating_add(i64::try_from(counted).unwrap_or(i64::MAX));
    }
    if gap >= 0 {
        // The words of `hypomnesis.explain()`, which splits this gap from inside the engine.
        let what = if row.non_torch_bytes.is_some() {
            "allocator slack and the CUDA context (memory outside the frameworks)"
        } else {
            "allocator slack and memory outside the frameworks (the CUDA context, libraries) \
             it did not print"
        };
        let _ = write!(
            said,
            " the driver charges {} more than {engine} accounts for{}: {what}",
            size(gap.unsigned_abs()),
            if said.ends_with(';') {
                " otherwise"
            } else {
                ""
            }
        );
    } else {
        let _ = write!(
            said,
            " {engine} accounts for {} more than the driver charges its processes (not \
             allocated yet, or charged to another process)",
            size(gap.unsigned_abs())
        );
    }
    let _ = writeln!(out, "{said}");
}

/// The failure, in one paragraph.
fn failure(out: &mut String, engine: &str, gpu: Option<u32>, f: &Failure) {
    let mut line: String = printable(&f.line).chars().take(200).collect();
    if line.len() < f.line.len() {
        line.push('…');
    }
    let mut p = format!("{engine} ran out of memory at {:.1} s (\"{line}\").", f.at);
    let gpu = gpu.map_or_else(|| "its GPU".to_string(), |g| format!("GPU {g}"));
    match (f.free_bytes, f.total_bytes) {
        (Some(free), Some(total)) => {
            let _ = write!(
                p,
                " At that moment {gpu} had {} free of {}",
                size(free),
                size(total)
            );
        }
        (Some(free), None) => {
            let _ = write!(p, " At that moment {gpu} had {} free", size(free));
        }
        _ => {
            let _ = write!(p, " At that moment {gpu}");
        }
    }
    if let Some(own) = f.own_bytes {
        let _ = write!(p, "; this command held {}", size(own));
    }
    match f.others_bytes {
        Some(o) if o > 0 => {
            let _ = write!(
                p,
                "; other processes held {}: {}",
                size(o),
                holders(&f.holders)
            );
        }
        Some(_) => p.push_str("; no other process held memory there"),
        None => p.push_str("; the other processes could not be listed"),
    }
    for g in &f.ghosts {
        let who = g.pid.map_or_else(
            || "no listed process".to_string(),
            |pid| format!("pid {pid}"),
        );
        let _ = write!(p, "; a ghost ({}, {who}) held {}", g.class, size(g.bytes));
    }
    if let Some(r) = f.reserved_bytes.filter(|&r| r > 0) {
        let _ = write!(p, "; the driver reserves {}", size(r));
    }
    p.push('.');
    p.push_str(&fits(f));
    let _ = writeln!(out, "  {p}");
}

/// What would have fitted, as far as the engine's figures and the driver's say.
fn fits(f: &Failure) -> String {
    let mut p = String::new();
    if let (Some(u), Some(short)) = (f.fits.utilization, f.fits.short_bytes) {
        let _ = write!(
            p,
            " --gpu-memory-utilization {u:.2} would have fitted what was free (it wanted {} more \
             than was free).",
            size(short)
        );
    } else if let Some(short) = f.fits.short_bytes {
        let _ = write!(p, " It needed {} more than was free.", size(short));
    }
    if let Some(above) = f.fits.mem_fraction_static_above {
        let _ = write!(
            p,
            " --mem-fraction-static above {above:.2} would have left room for a KV cache in what \
             was free (SGLang's KV cache is what is free less (1 - fraction) x total)."
        );
    }
    let said_a_size = f.fits.utilization.is_some()
        || f.fits.short_bytes.is_some()
        || f.fits.mem_fraction_static_above.is_some();
    if !said_a_size
        && let Some(o) = f
            .others_bytes
            .filter(|&o| o >= crate::engine::ledger::NOTICED)
    {
        let _ = write!(
            p,
            " Without the other processes it would have had {} more.",
            size(o)
        );
    }
    if let Some(freed) = f.fits.freed_while_profiling_bytes {
        let _ = write!(
            p,
            " Free memory rose by {} while it profiled: another process released memory in that \
             window; start it once the GPU's free memory holds steady (hmn run --wait-for SIZE \
             --settle N).",
            size(freed)
        );
    }
    if !f.ghosts.is_empty() {
        p.push_str(" `hmn ghosts` says whether the ghosts' memory can be freed.");
    }
    p
}

fn holders(list: &[Holder]) -> String {
    list.iter()
        .map(|h| format!("{} {}", named(h.pid, &h.who), size(h.bytes)))
        .collect::<Vec<_>>()
        .join(", ")
}
