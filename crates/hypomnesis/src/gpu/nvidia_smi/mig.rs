//! MIG through `nvidia-smi`: the modes (`--query-gpu=mig.mode.*`), the MIG devices and their
//! memory (`-q`), their profiles and UUIDs (`-L`), and the doctor line.

use std::sync::atomic::Ordering;

use super::SmiBackend;
use super::parse::{self, Field, SmiGpu};
use super::parse_mig::{
    self, ListGpu, ListMig, MIG_FIELDS, QGpuMig, QMemoryLines, QProcess, SmiMigMode,
};
use super::{MIB, ROUNDING};
use crate::error::Failure;
use crate::gpu::{mig, nvidia};
use crate::{
    error::ErrorKind, error::HypomnesisError, error::Result, types::GpuQuerySource,
    types::MigInstance, types::MigState,
};

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
                HypomnesisError::nvidia_smi(
                    ErrorKind::BadAnswer,
                    format!("unexpected MIG mode query output: {why}"),
                )
            })
    }

    /// `nvidia-smi -q`'s MIG parts of every GPU.
    pub(super) fn q_mig(&self) -> Result<Vec<QGpuMig>> {
        Ok(parse_mig::parse_q_mig(&self.run_ok(&["-q"])?))
    }

    /// The MIG view of every GPU: one `--query-gpu` run and one MIG-mode query, then `-q` and
    /// `-L` only when some GPU has MIG on.
    pub(super) fn mig_states(&self) -> Result<Vec<MigState>> {
        let gpus = self.gpus()?.gpus;
        let modes = self.mig_modes()?.unwrap_or_default();
        let mut states = states_of(&gpus, &modes);
        if !states.iter().any(|s| s.enabled == Some(true)) {
            return Ok(states);
        }
        let q = self.q_mig()?;
        let list = match self.run_ok(&["-L"]) {
            Ok(text) => parse_mig::parse_list(&text),
            Err(e) => {
                crate::debug_log!("nvidia-smi -L: {e}; MIG UUIDs and profiles unknown");
                Vec::new()
            }
        };
        add_instances(&mut states, &gpus, &q, &list);
        Ok(states)
    }
}

/// Whether the mode query says GPU `index` has MIG on.
pub(super) fn mig_on(modes: &[SmiMigMode], index: u32) -> bool {
    modes
        .iter()
        .any(|m| m.index == index && m.current == Some(true))
}

/// The `-q` block of the GPU with PCI bus id `bus`, among the `gpu_count` GPUs of
/// `--query-gpu`: the one with the same bus id, or the only block of a one-GPU host.
pub(super) fn q_of<'a>(
    q: &'a [QGpuMig],
    gpu_count: usize,
    bus: Option<&str>,
) -> Option<&'a QGpuMig> {
    let only = gpu_count == 1 && q.len() == 1;
    q.iter()
        .find(|qg| only || bus.is_some_and(|b| b.eq_ignore_ascii_case(&qg.pci_bus_id)))
}

/// The GPU and compute instance ids `-q` gives process `pid`, unknown when it lists it not.
pub(super) fn instance_ids(procs: &[QProcess], pid: u32) -> (Option<u32>, Option<u32>) {
    procs
        .iter()
        .find(|p| p.pid == Some(pid))
        .map_or((None, None), |p| (p.gpu_instance_id, p.compute_instance_id))
}

/// Each GPU's MIG state from `--query-gpu` and the mode query (instances not yet known).
fn states_of(gpus: &[SmiGpu], modes: &[SmiMigMode]) -> Vec<MigState> {
    gpus.iter()
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
        .collect()
}

/// The instances of every GPU with MIG on, from its `-q` block and its `-L` entry.
fn add_instances(states: &mut [MigState], gpus: &[SmiGpu], q: &[QGpuMig], list: &[ListGpu]) {
    for (s, g) in states.iter_mut().zip(gpus) {
        if s.enabled != Some(true) {
            continue;
        }
        let qg = q_of(q, gpus.len(), g.pci_bus_id.as_deref());
        let lg = list.iter().find(|l| {
            l.index == g.index || (l.uuid.is_some() && l.uuid.as_deref() == g.uuid.as_deref())
        });
        s.instances = instances_of(g.index, qg, lg.map_or(&[][..], |l| l.mig.as_slice()));
    }
}

fn refused_figure(g: &SmiGpu) -> Option<Failure> {
    match (&g.total_mib, &g.free_mib) {
        (Err(t), _) | (_, Err(t)) => Some(token_failure(
            t.trim_start_matches('[').trim_end_matches(']'),
        )),
        _ => None,
    }
}

/// What nvidia-smi printed in place of a figure, as a failure: its `Insufficient Permissions`
/// token is a refusal (decided here, where the token is read); anything else is said as it is.
fn token_failure(token: &str) -> Failure {
    Failure::new(token_kind(token), token)
}

/// The kind of nvidia-smi's token in place of a figure (`[Insufficient Permissions]`, with or
/// without its brackets).
fn token_kind(token: &str) -> ErrorKind {
    if token.trim_start_matches('[').trim_end_matches(']') == "Insufficient Permissions" {
        ErrorKind::NoPermission
    } else {
        ErrorKind::Other
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
            Some(Ok(memory)) => {
                m.total_bytes = Some(memory.total);
                m.free_bytes = Some(memory.free);
                m.used_bytes = Some(memory.used);
                m.reserved_bytes = memory.reserved;
            }
            Some(Err(why)) => m.memory_error = Some(why),
            None => {
                m.memory_error = Some(Failure::new(
                    ErrorKind::BadAnswer,
                    "no Shared FB Memory Usage block in nvidia-smi -q",
                ));
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
                m.memory_error = Some(Failure::new(
                    ErrorKind::BadAnswer,
                    "no MIG Device block in nvidia-smi -q",
                ));
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

/// One MIG device's memory, bytes.
struct Memory {
    total: u64,
    free: u64,
    used: u64,
    reserved: Option<u64>,
}

fn mig_memory(m: &QMemoryLines) -> std::result::Result<Memory, Failure> {
    let bad = |text: String| Failure::new(ErrorKind::BadAnswer, text);
    let get = |f: &Option<Field>, k: &str| match f {
        Some(Ok(mib)) => mib
            .checked_mul(MIB)
            .ok_or_else(|| bad(format!("Shared FB Memory Usage {k} {mib} MiB overflows"))),
        Some(Err(token)) => Err(Failure::new(
            token_kind(token),
            format!("Shared FB Memory Usage {k} is {token}"),
        )),
        None => Err(bad(format!("Shared FB Memory Usage has no {k} line"))),
    };
    let total = get(&m.total_mib, "Total")?;
    let free = get(&m.free_mib, "Free")?;
    let used = total
        .checked_sub(free)
        .ok_or_else(|| bad("Shared FB Memory Usage Free is larger than Total".to_string()))?;
    let reserved = m
        .reserved_mib
        .clone()
        .and_then(std::result::Result::ok)
        .and_then(|r| r.checked_mul(MIB))
        .and_then(|r| nvidia::consistent_reservation(r, used, ROUNDING));
    Ok(Memory {
        total,
        free,
        used,
        reserved,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::nvidia_smi::parse_mig::QMigDevice;

    fn gpu(index: u32, bus: &str, uuid: &str) -> SmiGpu {
        SmiGpu {
            index,
            uuid: Some(uuid.into()),
            driver_version: None,
            pci_bus_id: Some(bus.into()),
            total_mib: Ok(81_559),
            free_mib: Ok(69_956),
            reserved_mib: None,
            name: Some(format!("GPU{index}")),
        }
    }

    fn mode(index: u32, current: Option<bool>, pending: Option<bool>) -> SmiMigMode {
        SmiMigMode {
            index,
            current,
            pending,
        }
    }

    fn memory(total: u64, free: u64, reserved: u64) -> QMemoryLines {
        QMemoryLines {
            total_mib: Some(Ok(total)),
            reserved_mib: Some(Ok(reserved)),
            used_mib: Some(Ok(total - free)),
            free_mib: Some(Ok(free)),
        }
    }

    fn device(index: Option<u32>, gi: u32, ci: u32, m: Option<QMemoryLines>) -> QMigDevice {
        QMigDevice {
            index,
            gpu_instance_id: Some(gi),
            compute_instance_id: Some(ci),
            memory: m,
        }
    }

    fn q(bus: &str, devices: Vec<QMigDevice>, pids: &[u32]) -> QGpuMig {
        QGpuMig {
            pci_bus_id: bus.into(),
            mig_current: Some(true),
            mig_pending: Some(true),
            devices,
            processes: pids
                .iter()
                .map(|&pid| QProcess {
                    pid: Some(pid),
                    gpu_instance_id: Some(2),
                    compute_instance_id: Some(0),
                    ..QProcess::default()
                })
                .collect(),
        }
    }

    fn listed(index: u32, uuid: &str, mig: &[(u32, &str)]) -> ListGpu {
        ListGpu {
            index,
            name: None,
            uuid: Some(uuid.into()),
            mig: mig
                .iter()
                .map(|&(index, profile)| ListMig {
                    index,
                    profile: Some(profile.into()),
                    uuid: Some(format!("MIG-{uuid}-{index}")),
                })
                .collect(),
        }
    }

    const BUS0: &str = "00000000:18:00.0";
    const BUS1: &str = "00000000:2A:00.0";

    #[test]
    fn mig_is_on_only_for_the_gpu_whose_current_mode_says_so() {
        let modes = [
            mode(0, Some(false), Some(true)),
            mode(1, Some(true), Some(true)),
        ];
        assert!(!mig_on(&modes, 0), "pending is not current");
        assert!(mig_on(&modes, 1));
        assert!(!mig_on(&modes, 2));
        assert!(!mig_on(&[mode(0, None, None)], 0));
    }

    #[test]
    fn the_q_block_is_found_by_bus_id_or_as_the_only_one() {
        let blocks = [q(BUS0, vec![], &[1]), q(BUS1, vec![], &[2])];
        assert_eq!(
            q_of(&blocks, 2, Some(BUS1)).map(|b| b.processes[0].pid),
            Some(Some(2))
        );
        assert_eq!(
            q_of(&blocks, 2, Some(&BUS1.to_lowercase())).map(|b| b.processes[0].pid),
            Some(Some(2)),
            "bus ids compared without regard to case"
        );
        assert!(q_of(&blocks, 2, None).is_none());
        assert!(q_of(&blocks, 2, Some("00000000:99:00.0")).is_none());
        let one = [q(BUS0, vec![], &[1])];
        assert!(q_of(&one, 1, None).is_some(), "one GPU, one block");
        assert!(q_of(&one, 1, Some("00000000:99:00.0")).is_some());
        assert!(
            q_of(&one, 2, None).is_none(),
            "two GPUs: the bus id decides"
        );
        assert!(q_of(&[], 1, Some(BUS0)).is_none());
    }

    #[test]
    fn each_process_gets_its_own_instance_ids() {
        let procs = [
            QProcess {
                pid: Some(10),
                gpu_instance_id: Some(2),
                compute_instance_id: Some(0),
                ..QProcess::default()
            },
            QProcess {
                pid: Some(11),
                gpu_instance_id: Some(9),
                compute_instance_id: Some(1),
                ..QProcess::default()
            },
        ];
        assert_eq!(instance_ids(&procs, 11), (Some(9), Some(1)));
        assert_eq!(instance_ids(&procs, 10), (Some(2), Some(0)));
        assert_eq!(instance_ids(&procs, 12), (None, None));
    }

    #[test]
    fn states_carry_modes_names_and_refused_figures() {
        let mut refused = gpu(1, BUS1, "GPU-b");
        refused.total_mib = Err("[Insufficient Permissions]".into());
        let gpus = [gpu(0, BUS0, "GPU-a"), refused, gpu(2, BUS1, "GPU-c")];
        let modes = [
            mode(0, Some(false), Some(true)),
            mode(1, Some(true), Some(true)),
        ];
        let states = states_of(&gpus, &modes);
        assert_eq!(states.len(), 3);
        let s = &states[0];
        assert_eq!(
            (s.index, s.enabled, s.pending),
            (0, Some(false), Some(true))
        );
        assert_eq!(
            (s.name.as_deref(), s.uuid.as_deref()),
            (Some("GPU0"), Some("GPU-a"))
        );
        assert_eq!(
            s.device_memory_error, None,
            "MIG off: the GPU's figures stand"
        );
        let refused = states[1].device_memory_error.as_ref().unwrap();
        assert_eq!(refused.message, "Insufficient Permissions");
        assert_eq!(refused.kind, ErrorKind::NoPermission);
        assert_eq!(
            (states[2].enabled, states[2].pending),
            (None, None),
            "no mode: unknown"
        );
        assert_eq!(states[2].source, GpuQuerySource::NvidiaSmi);
    }

    #[test]
    fn instances_come_from_their_own_gpu_blocks() {
        let gpus = [gpu(0, BUS0, "GPU-a"), gpu(1, BUS1, "GPU-b")];
        let modes = [
            mode(0, Some(false), Some(false)),
            mode(1, Some(true), Some(true)),
        ];
        let mut states = states_of(&gpus, &modes);
        let blocks = [
            q(
                BUS0,
                vec![device(Some(0), 7, 7, Some(memory(10, 5, 0)))],
                &[],
            ),
            q(
                BUS1,
                vec![
                    device(None, 2, 0, Some(memory(71_424, 54_499, 0))),
                    device(Some(1), 3, 0, Some(memory(33_280, 33_264, 0))),
                ],
                &[],
            ),
        ];
        // -L lists GPU 1 (found by index) with a device that -q has no block for.
        let list = [
            listed(0, "GPU-a", &[(0, "7g.80gb")]),
            listed(
                1,
                "GPU-b",
                &[(0, "3g.71gb"), (1, "2g.35gb"), (5, "1g.18gb")],
            ),
        ];
        add_instances(&mut states, &gpus, &blocks, &list);
        assert!(states[0].instances.is_empty(), "MIG off: no instances");
        let got: Vec<_> = states[1]
            .instances
            .iter()
            .map(|m| {
                (
                    m.parent_index,
                    m.slot,
                    m.gpu_instance_id,
                    m.profile.as_deref(),
                    m.total_bytes.map(|b| b / MIB),
                    m.used_bytes.map(|b| b / MIB),
                    m.memory_error.is_some(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    1,
                    0,
                    Some(2),
                    Some("3g.71gb"),
                    Some(71_424),
                    Some(16_925),
                    false
                ),
                (
                    1,
                    1,
                    Some(3),
                    Some("2g.35gb"),
                    Some(33_280),
                    Some(16),
                    false
                ),
                (1, 5, None, Some("1g.18gb"), None, None, true),
            ],
            "a -q device without an Index takes its position; a device only -L lists is known, \
             its memory not"
        );
        assert_eq!(states[1].instances[0].uuid.as_deref(), Some("MIG-GPU-b-0"));
    }

    #[test]
    fn the_list_entry_is_found_by_uuid_when_the_index_differs() {
        let gpus = [gpu(4, BUS0, "GPU-x")];
        let mut states = states_of(&gpus, &[mode(4, Some(true), Some(true))]);
        let blocks = [q(
            BUS0,
            vec![device(Some(0), 1, 0, Some(memory(10, 4, 0)))],
            &[],
        )];
        add_instances(
            &mut states,
            &gpus,
            &blocks,
            &[
                listed(9, "GPU-y", &[(0, "no")]),
                listed(8, "GPU-x", &[(0, "1g.10gb")]),
            ],
        );
        assert_eq!(states[0].instances[0].profile.as_deref(), Some("1g.10gb"));
        // A -L entry without a UUID does not match a GPU by its missing one.
        let mut states = states_of(&gpus, &[mode(4, Some(true), Some(true))]);
        let mut anonymous = listed(9, "GPU-x", &[(0, "no")]);
        anonymous.uuid = None;
        let mut nameless = gpu(4, BUS0, "GPU-x");
        nameless.uuid = None;
        add_instances(&mut states, &[nameless], &blocks, &[anonymous]);
        assert_eq!(states[0].instances[0].profile, None);
    }

    #[test]
    fn memory_lines_that_do_not_add_up_are_named() {
        let used = |m: QMemoryLines| mig_memory(&m).map(|m| (m.total, m.free, m.used, m.reserved));
        assert_eq!(
            used(memory(10, 4, 0)),
            Ok((10 * MIB, 4 * MIB, 6 * MIB, Some(0)))
        );
        let mut m = memory(10, 4, 0);
        m.free_mib = Some(Ok(11));
        assert_eq!(
            used(m),
            Err(Failure::new(
                ErrorKind::BadAnswer,
                "Shared FB Memory Usage Free is larger than Total"
            ))
        );
        let mut m = memory(10, 4, 0);
        m.total_mib = None;
        assert_eq!(
            used(m),
            Err(Failure::new(
                ErrorKind::BadAnswer,
                "Shared FB Memory Usage has no Total line"
            ))
        );
        let mut m = memory(10, 4, 0);
        m.free_mib = Some(Err("[N/A]".into()));
        assert_eq!(
            used(m),
            Err(Failure::new(
                ErrorKind::Other,
                "Shared FB Memory Usage Free is [N/A]"
            ))
        );
        let mut m = memory(10, 4, 0);
        m.total_mib = Some(Err("[Insufficient Permissions]".into()));
        assert_eq!(
            mig_memory(&m).map(|_| ()).unwrap_err().kind,
            ErrorKind::NoPermission
        );
        let mut m = memory(10, 4, 0);
        m.reserved_mib = Some(Ok(9));
        assert_eq!(
            used(m).map(|m| m.3),
            Ok(None),
            "a reservation above used is not believed"
        );
    }

    #[test]
    fn doctor_lines() {
        let mut s = MigState::unknown(0, GpuQuerySource::NvidiaSmi);
        assert_eq!(mig_summary(&s, false), "not supported by this GPU");
        assert_eq!(
            mig_summary(&s, true),
            "unknown (this nvidia-smi does not know mig.mode.current)"
        );
        s.enabled = Some(false);
        assert!(
            mig_summary(&s, true).starts_with("off"),
            "{}",
            mig_summary(&s, true)
        );
    }
}
