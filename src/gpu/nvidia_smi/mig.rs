//! MIG through `nvidia-smi`: the modes (`--query-gpu=mig.mode.*`), the MIG devices and their
//! memory (`-q`), their profiles and UUIDs (`-L`), and the doctor line.

use std::sync::atomic::Ordering;

use super::SmiBackend;
use super::parse::{self, Field, SmiGpu};
use super::parse_mig::{self, ListMig, MIG_FIELDS, QGpuMig, QMemoryLines, SmiMigMode};
use super::{MIB, ROUNDING};
use crate::gpu::{mig, nvidia};
use crate::{GpuQuerySource, HypomnesisError, MigInstance, MigState, Result};

impl SmiBackend {
    /// The MIG mode of every GPU; `None` when the driver does not know the fields (pre-R450).
    pub(super) fn mig_modes(&self) -> Result<Option<Vec<SmiMigMode>>> {
        if self.mig_rejected.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let query = format!("--query-gpu={MIG_FIELDS}");
        let args = [query.as_str(), "--format=csv,noheader,nounits"];
        let ran = self.run(&args)?;
        if !ran.status.success() {
            if parse::is_field_rejection(&ran.stdout, &ran.stderr) {
                self.mig_rejected.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            return Err(Self::failed_run(&args, &self.exe_path(), &ran));
        }
        parse_mig::parse_mig_modes(&ran.stdout)
            .map(Some)
            .map_err(|why| {
                HypomnesisError::NvidiaSmi(format!("unexpected MIG mode query output: {why}"))
            })
    }

    /// `nvidia-smi -q`'s MIG parts of every GPU.
    pub(super) fn q_mig(&self) -> Result<Vec<QGpuMig>> {
        Ok(parse_mig::parse_q_mig(&self.run_ok(&["-q"])?))
    }

    /// The MIG view of every GPU: one `--query-gpu` run and one MIG-mode query, then `-q` and
    /// `-L` only when some GPU has MIG on.
    pub(super) fn mig_states(&self) -> Result<Vec<MigState>> {
        let gpus = self.gpus()?;
        let modes = self.mig_modes()?.unwrap_or_default();
        let mut out: Vec<MigState> = gpus
            .iter()
            .map(|g| {
                let mut s = MigState::unknown(g.index, GpuQuerySource::NvidiaSmi);
                s.name.clone_from(&g.name);
                s.uuid.clone_from(&g.uuid);
                if let Some(m) = modes.iter().find(|m| m.index == g.index) {
                    s.enabled = m.current;
                    s.pending = m.pending;
                }
                if s.enabled == Some(true) {
                    s.device_memory_error = refused_figure(g);
                }
                s
            })
            .collect();
        if !out.iter().any(|s| s.enabled == Some(true)) {
            return Ok(out);
        }
        let q = self.q_mig()?;
        let list = match self.run_ok(&["-L"]) {
            Ok(text) => parse_mig::parse_list(&text),
            Err(e) => {
                crate::debug_log!("nvidia-smi -L: {e}; MIG UUIDs and profiles unknown");
                Vec::new()
            }
        };
        let only = gpus.len() == 1 && q.len() == 1;
        for (s, g) in out.iter_mut().zip(&gpus) {
            if s.enabled != Some(true) {
                continue;
            }
            let qg = q.iter().find(|qg| {
                only || g
                    .pci_bus_id
                    .as_deref()
                    .is_some_and(|b| b.eq_ignore_ascii_case(&qg.pci_bus_id))
            });
            let lg = list.iter().find(|l| {
                l.index == g.index || (l.uuid.is_some() && l.uuid.as_deref() == g.uuid.as_deref())
            });
            s.instances = instances_of(g.index, qg, lg.map_or(&[][..], |l| l.mig.as_slice()));
        }
        Ok(out)
    }
}

fn refused_figure(g: &SmiGpu) -> Option<String> {
    match (&g.total_mib, &g.free_mib) {
        (Err(t), _) | (_, Err(t)) => {
            Some(t.trim_start_matches('[').trim_end_matches(']').to_string())
        }
        _ => None,
    }
}

fn instances_of(index: u32, q: Option<&QGpuMig>, list: &[ListMig]) -> Vec<MigInstance> {
    let mut out: Vec<MigInstance> = Vec::new();
    let devices = q.map_or(&[][..], |q| q.devices.as_slice());
    for (k, d) in devices.iter().enumerate() {
        let slot = d
            .index
            .unwrap_or_else(|| u32::try_from(k).unwrap_or(u32::MAX));
        let mut m = MigInstance::blank(index, slot, GpuQuerySource::NvidiaSmi);
        m.gpu_instance_id = d.gpu_instance_id;
        m.compute_instance_id = d.compute_instance_id;
        match d.memory.as_ref().map(mig_memory) {
            Some(Ok((total, free, reserved))) => {
                m.total_bytes = Some(total);
                m.free_bytes = Some(free);
                m.used_bytes = Some(total - free);
                m.reserved_bytes = reserved;
            }
            Some(Err(why)) => m.memory_error = Some(why),
            None => {
                m.memory_error = Some("no Shared FB Memory Usage block in nvidia-smi -q".into());
            }
        }
        out.push(m);
    }
    for l in list {
        let at = out
            .iter()
            .position(|m| m.slot == l.index)
            .unwrap_or_else(|| {
                // Listed by -L but without a -q block: known to exist, memory unknown.
                let mut m = MigInstance::blank(index, l.index, GpuQuerySource::NvidiaSmi);
                m.memory_error = Some("no MIG Device block in nvidia-smi -q".into());
                out.push(m);
                out.len() - 1
            });
        let Some(m) = out.get_mut(at) else { continue };
        m.profile.clone_from(&l.profile);
        m.uuid.clone_from(&l.uuid);
    }
    mig::sort_instances(&mut out);
    out
}

fn mig_memory(m: &QMemoryLines) -> std::result::Result<(u64, u64, Option<u64>), String> {
    let get = |f: &Option<Field>, k: &str| match f {
        Some(Ok(mib)) => mib
            .checked_mul(MIB)
            .ok_or_else(|| format!("Shared FB Memory Usage {k} {mib} MiB overflows")),
        Some(Err(token)) => Err(format!("Shared FB Memory Usage {k} is {token}")),
        None => Err(format!("Shared FB Memory Usage has no {k} line")),
    };
    let total = get(&m.total_mib, "Total")?;
    let free = get(&m.free_mib, "Free")?;
    let used = total
        .checked_sub(free)
        .ok_or_else(|| "Shared FB Memory Usage Free is larger than Total".to_string())?;
    let reserved = m
        .reserved_mib
        .clone()
        .and_then(std::result::Result::ok)
        .and_then(|r| r.checked_mul(MIB))
        .and_then(|r| nvidia::consistent_reservation(r, used, ROUNDING));
    Ok((total, free, reserved))
}

/// One line for `hmn doctor` on a GPU's MIG mode.
pub(super) fn mig_summary(s: &MigState, fields_rejected: bool) -> String {
    match s.enabled {
        Some(current) => {
            nvidia::mig_mode_line(current, s.pending.unwrap_or(current), Ok(s.instances.len()))
        }
        None if fields_rejected => {
            "unknown (this nvidia-smi does not know mig.mode.current)".to_string()
        }
        None => "not supported by this GPU".to_string(),
    }
}
