//! Process lists on NVML: compute, graphics and MPS-client lists (with the layout each driver
//! generation writes), the two-call protocol, merging per pid, and names.

use std::collections::BTreeMap;
use std::path::Path;

use super::abi::{
    NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_NOT_SUPPORTED, NVML_SUCCESS, NVML_VALUE_NOT_AVAILABLE,
    ProcessInfoV1, ProcessInfoV2, ProcessInfoV3Wide,
};
use super::decode::{ProcessLayout, ProcessRecord, text};
use super::ffi::{Device, ProcessFn};
use super::mig::{InstanceIds, instance_id};
use super::session::{CallFailure, Loaded};
use crate::gpu::backend::Dropped;
use crate::host::process::procfs;
use crate::{error::ErrorKind, error::HypomnesisError, types::GpuContextKind};

/// First capacity of a process-list buffer: one call answers most hosts without a sizing call.
const FIRST_CAPACITY: usize = 64;
/// Tries of the two-call protocol before a list that keeps growing is given up on.
const MAX_LIST_ATTEMPTS: usize = 8;
/// A process count above this is garbage, not a host (`pid_max` is 2^22).
const MAX_LIST_ROWS: usize = 1 << 22;

/// A row of a process list, before names are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RawProcess {
    pub(super) pid: u32,
    pub(super) used: u64,
    pub(super) context: GpuContextKind,
    pub(super) gpu_instance: Option<u32>,
    pub(super) compute_instance: Option<u32>,
}

/// A row as one NVML process list gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ListRow {
    pid: u32,
    used: u64,
    gpu_instance: Option<u32>,
    compute_instance: Option<u32>,
}

impl Loaded {
    /// Compute and graphics lists of a device, merged per pid, implausible rows dropped. With
    /// MIG on, the lists of each MIG device are read too: they say which instance a process
    /// runs in, and they answer callers to whom the GPU-wide lists are refused.
    pub(super) fn raw_processes(
        &self,
        index: u32,
    ) -> std::result::Result<Vec<RawProcess>, CallFailure> {
        let dev = self.device(index)?;
        // No bound from a device that reports no memory of its own (0 bytes: a unified GPU,
        // whose processes' memory is the host's).
        let total = self.total(dev, index);
        // This list's rows left out are counted afresh.
        self.dropped_rows.set(index, Dropped::default());
        let parent = self.read_lists(dev, index, total, None);
        if !matches!(self.mig_mode(dev), Some((true, _))) {
            return parent.map(|m| m.into_values().collect());
        }
        let (mut merged, parent_error) = match parent {
            Ok(m) => (m, None),
            Err(e) => (BTreeMap::new(), Some(e)),
        };
        let instances = match self.mig_devices(dev, index) {
            Ok(list) => list,
            Err(e) => return Err(parent_error.unwrap_or(e)),
        };
        if instances.is_empty()
            && let Some(e) = parent_error
        {
            return Err(e);
        }
        let whole_list = parent_error.is_none();
        for (_, h) in instances {
            let ids = self.instance_ids(h);
            let own_total = self
                .nvml
                .memory(h)
                .and_then(std::result::Result::ok)
                .map(|m| m.total);
            match self.read_lists(h, index, own_total.or(total), Some(ids)) {
                Ok(rows) => {
                    for r in rows.into_values() {
                        merge(&mut merged, r);
                    }
                }
                // The GPU-wide lists already hold every process: the instance's only adds ids.
                Err(e) if whole_list => {
                    crate::debug_log!(
                        "NVML: GPU {index}: a MIG device's process list: {}",
                        self.to_error(e)
                    );
                }
                Err(e) => return Err(e),
            }
        }
        Ok(merged.into_values().collect())
    }

    /// The compute, graphics and MPS-client lists of one handle (a GPU, or a MIG device of GPU
    /// `index` whose instance ids are `ids`), merged per pid: a pid in several lists is one row
    /// whose kind says which (`M+C`), and its memory is counted once.
    pub(super) fn read_lists(
        &self,
        dev: Device,
        index: u32,
        total: Option<u64>,
        ids: Option<InstanceIds>,
    ) -> std::result::Result<BTreeMap<u32, RawProcess>, CallFailure> {
        let lists = [
            (self.nvml.compute, GpuContextKind::Compute),
            (self.nvml.graphics, GpuContextKind::Graphics),
            (self.nvml.mps, GpuContextKind::Mps),
        ];
        if lists.iter().take(2).all(|(f, _)| f.is_none()) {
            return Err(CallFailure::Other(HypomnesisError::nvml(
                ErrorKind::Other,
                "the library exports no process-list function",
            )));
        }
        let mut merged: BTreeMap<u32, RawProcess> = BTreeMap::new();
        let mut dropped = 0_u64;
        let mut no_pid = 0_u64;
        // MPS clients listed without a memory figure (drivers differ): their pids, to mark a
        // process the other lists have; alone, such a row is dropped and counted.
        let mut mps_unknown = Vec::new();
        for (pf, kind) in lists {
            let Some(pf) = pf else { continue };
            let rows = match read_list(pf, dev, index) {
                Ok(rows) => rows,
                // Graphics lists are unsupported on some compute-only boards (and on MIG
                // devices): compute still counts.
                Err(CallFailure::Call {
                    code: NVML_ERROR_NOT_SUPPORTED,
                    ..
                }) if kind == GpuContextKind::Graphics => continue,
                // The MPS list is newer and answers only where MPS can run: without it the
                // compute and graphics lists still count.
                Err(e) if kind == GpuContextKind::Mps => {
                    crate::debug_log!(
                        "NVML: GPU {index}: the MPS client list: {}",
                        self.to_error(e)
                    );
                    continue;
                }
                Err(e) => return Err(e),
            };
            for r in rows {
                if !plausible(r.pid, r.used, total) {
                    if kind == GpuContextKind::Mps && plausible(r.pid, 0, None) {
                        mps_unknown.push(r.pid);
                    } else {
                        dropped += 1;
                        no_pid += u64::from(!plausible(r.pid, 0, None));
                    }
                    continue;
                }
                let (gi, ci) = ids.unwrap_or((None, None));
                merge(
                    &mut merged,
                    RawProcess {
                        pid: r.pid,
                        used: r.used,
                        context: kind,
                        gpu_instance: r.gpu_instance.or(gi),
                        compute_instance: r.compute_instance.or(ci),
                    },
                );
            }
        }
        for pid in mps_unknown {
            match merged.get_mut(&pid) {
                Some(row) => row.context = row.context.union(GpuContextKind::Mps),
                None => dropped += 1,
            }
        }
        if dropped > 0 {
            self.dropped_rows.add(
                index,
                Dropped {
                    rows: dropped,
                    no_pid,
                },
            );
            crate::debug_log!(
                "NVML: GPU {index}: {dropped} process row(s) dropped ({no_pid} with pid 0 or \
                 4294967295)"
            );
        }
        Ok(merged)
    }

    pub(super) fn name_of(&self, root: &Path, pid: u32) -> Option<String> {
        if let Some(n) = procfs::comm(root, pid) {
            return Some(n);
        }
        if !procfs::visible(root, pid) {
            // Another PID namespace: NVML's name lookup reads this namespace's /proc too and
            // could name an unrelated process with the same number.
            return None;
        }
        let bytes = self.nvml.process_name(pid)?.ok()?;
        let s = text(&bytes)?;
        Some(procfs::short_name(&s).to_string())
    }
}

fn read_list(
    pf: ProcessFn,
    dev: Device,
    index: u32,
) -> std::result::Result<Vec<ListRow>, CallFailure> {
    match pf.layout {
        ProcessLayout::V1 => read_typed::<ProcessInfoV1>(pf, dev, index),
        ProcessLayout::V2 => read_typed::<ProcessInfoV2>(pf, dev, index),
        ProcessLayout::V3Wide => read_typed::<ProcessInfoV3Wide>(pf, dev, index),
    }
}

/// The two-call protocol: ask with a buffer, grow it to what NVML says it needs (with room
/// for processes that appear meanwhile), and ask again; no cap on the number of rows.
fn read_typed<T: ProcessRecord>(
    pf: ProcessFn,
    dev: Device,
    index: u32,
) -> std::result::Result<Vec<ListRow>, CallFailure> {
    // The first ask on the stack (a list of up to 64 processes costs no allocation, and a
    // refresh asks for three lists a GPU); a longer one on the heap.
    let mut first = [T::default(); FIRST_CAPACITY];
    let mut grown: Vec<T> = Vec::new();
    for _ in 0..MAX_LIST_ATTEMPTS {
        let buf: &mut [T] = if grown.is_empty() {
            &mut first
        } else {
            &mut grown
        };
        let (rc, count) = pf.call(dev, buf);
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        match rc {
            NVML_SUCCESS => {
                let rows = buf.get(..count).ok_or_else(|| {
                    CallFailure::Other(HypomnesisError::nvml(
                        ErrorKind::Other,
                        format!(
                            "{} for GPU {index} reported {count} entries for a buffer of {}; the list is not trusted",
                            pf.name,
                            buf.len()
                        ),
                    ))
                })?;
                return Ok(rows
                    .iter()
                    .map(|r| ListRow {
                        pid: r.pid(),
                        used: r.used(),
                        gpu_instance: instance_id(r.gpu_instance()),
                        compute_instance: instance_id(r.compute_instance()),
                    })
                    .collect());
            }
            NVML_ERROR_INSUFFICIENT_SIZE => {
                if count > MAX_LIST_ROWS {
                    return Err(CallFailure::Other(HypomnesisError::nvml(
                        ErrorKind::Other,
                        format!(
                            "{} for GPU {index} asked for room for {count} processes, more than any host can run",
                            pf.name
                        ),
                    )));
                }
                let want = count
                    .max(buf.len())
                    .saturating_mul(2)
                    .saturating_add(8)
                    .min(MAX_LIST_ROWS);
                grown = vec![T::default(); want];
            }
            code => {
                return Err(CallFailure::Call {
                    function: pf.name,
                    gpu: Some(index),
                    code,
                });
            }
        }
    }
    Err(CallFailure::Other(HypomnesisError::nvml(
        ErrorKind::Other,
        format!(
            "{} for GPU {index} still answered NVML_ERROR_INSUFFICIENT_SIZE after {MAX_LIST_ATTEMPTS} tries (the list keeps growing)",
            pf.name
        ),
    )))
}

/// A row is kept when the pid is plausible and the memory figure is a real one no larger than
/// the device (drivers have returned `NVML_VALUE_NOT_AVAILABLE`, and garbage from wrong strides).
fn plausible(pid: u32, used: u64, total: Option<u64>) -> bool {
    pid != 0
        && pid != u32::MAX
        && used != NVML_VALUE_NOT_AVAILABLE
        && total.is_none_or(|t| used <= t)
}

/// Merge a row into the per-pid map: a pid in several lists (or in a GPU's and a MIG device's)
/// is one process (max of the figures, never their sum) of the kinds of all; instance ids come
/// from whichever row has them.
fn merge(map: &mut BTreeMap<u32, RawProcess>, row: RawProcess) {
    map.entry(row.pid)
        .and_modify(|e| {
            e.used = e.used.max(row.used);
            e.context = e.context.union(row.context);
            e.gpu_instance = e.gpu_instance.or(row.gpu_instance);
            e.compute_instance = e.compute_instance.or(row.compute_instance);
        })
        .or_insert(row);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plausibility() {
        assert!(plausible(10, 5, Some(10)));
        assert!(!plausible(10, 11, Some(10)));
        assert!(!plausible(10, u64::MAX, None));
        assert!(!plausible(0, 5, None));
        assert!(!plausible(u32::MAX, 5, None));
        assert!(plausible(10, 1 << 40, None));
    }

    fn raw(pid: u32, used: u64, context: GpuContextKind, ids: InstanceIds) -> RawProcess {
        RawProcess {
            pid,
            used,
            context,
            gpu_instance: ids.0,
            compute_instance: ids.1,
        }
    }

    #[test]
    fn merge_never_sums() {
        let mut m = BTreeMap::new();
        merge(&mut m, raw(7, 100, GpuContextKind::Compute, (None, None)));
        merge(&mut m, raw(7, 100, GpuContextKind::Graphics, (None, None)));
        merge(&mut m, raw(3, 5, GpuContextKind::Graphics, (None, None)));
        let rows: Vec<_> = m.into_values().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].pid, 3);
        assert_eq!(
            rows[1],
            raw(7, 100, GpuContextKind::ComputeAndGraphics, (None, None))
        );
    }

    /// An MPS client in the compute list too is one `M+C` row, its memory once.
    #[test]
    fn an_mps_client_in_several_lists_is_one_row() {
        let mut m = BTreeMap::new();
        merge(&mut m, raw(9, 500, GpuContextKind::Compute, (None, None)));
        merge(&mut m, raw(9, 500, GpuContextKind::Mps, (None, None)));
        merge(&mut m, raw(10, 300, GpuContextKind::Mps, (None, None)));
        merge(&mut m, raw(10, 300, GpuContextKind::Graphics, (None, None)));
        merge(&mut m, raw(10, 300, GpuContextKind::Compute, (None, None)));
        let rows: Vec<_> = m.into_values().collect();
        assert_eq!(
            rows,
            vec![
                raw(9, 500, GpuContextKind::MpsAndCompute, (None, None)),
                raw(10, 300, GpuContextKind::MpsComputeAndGraphics, (None, None)),
            ]
        );
    }

    #[test]
    fn merge_takes_instance_ids_from_whichever_row_has_them() {
        let mut m = BTreeMap::new();
        // The GPU-wide list (no ids), then the MIG device's list of GI 2 CI 1.
        merge(
            &mut m,
            raw(21180, 2296, GpuContextKind::Compute, (None, None)),
        );
        merge(
            &mut m,
            raw(21180, 2296, GpuContextKind::Compute, (Some(2), Some(1))),
        );
        merge(
            &mut m,
            raw(21180, 2000, GpuContextKind::Compute, (Some(9), Some(0))),
        );
        let rows: Vec<_> = m.into_values().collect();
        assert_eq!(
            rows,
            vec![raw(
                21180,
                2296,
                GpuContextKind::Compute,
                (Some(2), Some(1))
            )]
        );
        assert_eq!(instance_id(u32::MAX), None);
        assert_eq!(instance_id(0), Some(0));
    }
}
