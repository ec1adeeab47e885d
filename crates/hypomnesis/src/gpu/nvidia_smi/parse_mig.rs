//! Pure parsers of what `nvidia-smi` says about MIG: the `mig.mode.*` query, the `MIG Device`
//! and `Processes` blocks of `-q`, and the MIG device lines of `-L`.
#![allow(missing_docs)] // exposed only through the doc(hidden) `__parsers` test surface

use super::parse::{Field, mib_field, split_row, text_field};
use crate::error::clip;

/// Fields of the MIG-mode query (`--query-gpu=<MIG_FIELDS> --format=csv,noheader,nounits`).
pub(crate) const MIG_FIELDS: &str = "index,mig.mode.current,mig.mode.pending";

/// One row of the MIG-mode query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmiMigMode {
    pub index: u32,
    /// `Some(true)` for `Enabled`, `Some(false)` for `Disabled`, `None` for `[N/A]` (a GPU that
    /// cannot be split) or anything else.
    pub current: Option<bool>,
    pub pending: Option<bool>,
}

/// `Enabled` / `Disabled` (any case); anything else is unknown.
fn mode_field(v: &str) -> Option<bool> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("enabled") {
        Some(true)
    } else if v.eq_ignore_ascii_case("disabled") {
        Some(false)
    } else {
        None
    }
}

/// Rows of `--query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader,nounits`.
pub fn parse_mig_modes(text: &str) -> Result<Vec<SmiMigMode>, String> {
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = |why: String| format!("line {}: {why}", i + 1);
        let f = split_row(line, 3).map_err(at)?;
        let get = |k: usize| f.get(k).copied().unwrap_or("");
        let index = get(0)
            .parse::<u32>()
            .map_err(|_| at(format!("GPU index is not a number: {:?}", clip(get(0)))))?;
        out.push(SmiMigMode {
            index,
            current: mode_field(get(1)),
            pending: mode_field(get(2)),
        });
    }
    Ok(out)
}

/// The memory lines of one `Shared FB Memory Usage` (or `FB Memory Usage`) block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QMemoryLines {
    pub total_mib: Option<Field>,
    pub reserved_mib: Option<Field>,
    pub used_mib: Option<Field>,
    pub free_mib: Option<Field>,
}

/// One `MIG Device` block of `nvidia-smi -q`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QMigDevice {
    /// `Index`: the MIG device index (`Device N` in `nvidia-smi -L`).
    pub index: Option<u32>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// `None` when the block has no memory section.
    pub memory: Option<QMemoryLines>,
}

/// One entry of the `Processes` block of `nvidia-smi -q`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QProcess {
    pub pid: Option<u32>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// `C`, `G`, `C+G`, …
    pub kind: Option<String>,
    pub name: Option<String>,
    pub used_mib: Option<Field>,
}

/// The MIG parts of one GPU in `nvidia-smi -q`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QGpuMig {
    pub pci_bus_id: String,
    /// `MIG Mode` / `Current`: `Some(true)` for `Enabled`, `None` for `N/A` or no block.
    pub mig_current: Option<bool>,
    pub mig_pending: Option<bool>,
    pub devices: Vec<QMigDevice>,
    pub processes: Vec<QProcess>,
}

/// An id such as `2`; `N/A` and anything else is unknown.
fn id_field(v: Option<&str>) -> Option<u32> {
    v?.trim().parse().ok()
}

fn set_memory(m: &mut QMemoryLines, key: &str, v: &str) {
    let v = Some(mib_field(v));
    match key {
        "Total" => m.total_mib = v,
        "Reserved" => m.reserved_mib = v,
        "Used" => m.used_mib = v,
        "Free" => m.free_mib = v,
        _ => {}
    }
}

/// One `key : value` line of a GPU's `Processes` block: a GPU instance id (or, without one, a
/// compute instance id or a process id after a finished row) starts a new process.
fn process_line(gpu: &mut QGpuMig, key: &str, v: &str) {
    let k = key.to_ascii_lowercase();
    let starts = match k.as_str() {
        "gpu instance id" => true,
        "compute instance id" => gpu
            .processes
            .last()
            .is_none_or(|p| p.compute_instance_id.is_some() || p.pid.is_some()),
        "process id" => gpu.processes.last().is_none_or(|p| p.pid.is_some()),
        _ => false,
    };
    if starts {
        gpu.processes.push(QProcess::default());
    }
    let Some(p) = gpu.processes.last_mut() else {
        return;
    };
    match k.as_str() {
        "gpu instance id" => p.gpu_instance_id = id_field(Some(v)),
        "compute instance id" => p.compute_instance_id = id_field(Some(v)),
        "process id" => p.pid = id_field(Some(v)),
        "type" => p.kind = text_field(v),
        "name" => p.name = text_field(v),
        "used gpu memory" => p.used_mib = Some(mib_field(v)),
        _ => {}
    }
}

/// The MIG mode, `MIG Device` blocks (with their `Shared FB Memory Usage`) and `Processes`
/// (with GPU/compute instance ids) of every GPU in `nvidia-smi -q` output. Keys are matched by
/// their place in the indentation tree, so the varying padding before `:` does not matter.
pub fn parse_q_mig(text: &str) -> Vec<QGpuMig> {
    let mut out: Vec<QGpuMig> = Vec::new();
    // Section headers (lines without a value) enclosing the current line: (indent, key).
    let mut stack: Vec<(usize, String)> = Vec::new();
    for line in text.lines() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let body = body.trim_end();
        if body.is_empty() {
            continue;
        }
        if indent == 0 {
            stack.clear();
            if let Some(bus) = body.strip_prefix("GPU ") {
                out.push(QGpuMig {
                    pci_bus_id: bus.trim().to_string(),
                    ..QGpuMig::default()
                });
            }
            continue;
        }
        let Some(gpu) = out.last_mut() else { continue };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let (key, value) = match body.split_once(':') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (body, None),
        };
        let path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
        match (path.as_slice(), value) {
            ([], None) if key == "MIG Device" => gpu.devices.push(QMigDevice::default()),
            (["MIG Mode"], Some(v)) => match key {
                "Current" => gpu.mig_current = mode_field(v),
                "Pending" => gpu.mig_pending = mode_field(v),
                _ => {}
            },
            (["MIG Device"], Some(v)) => {
                if let Some(d) = gpu.devices.last_mut() {
                    match key.to_ascii_lowercase().as_str() {
                        "index" => d.index = id_field(Some(v)),
                        "gpu instance id" => d.gpu_instance_id = id_field(Some(v)),
                        "compute instance id" => d.compute_instance_id = id_field(Some(v)),
                        _ => {}
                    }
                }
            }
            (["MIG Device", "Shared FB Memory Usage" | "FB Memory Usage"], Some(v)) => {
                if let Some(d) = gpu.devices.last_mut() {
                    set_memory(d.memory.get_or_insert_with(QMemoryLines::default), key, v);
                }
            }
            (["Processes"], Some(v)) => process_line(gpu, key, v),
            _ => {}
        }
        if value.is_none() {
            stack.push((indent, key.to_string()));
        }
    }
    out
}

/// One MIG line of `nvidia-smi -L`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListMig {
    /// `Device N`.
    pub index: u32,
    /// `3g.40gb`, `1c.3g.71gb`, …
    pub profile: Option<String>,
    pub uuid: Option<String>,
}

/// One GPU of `nvidia-smi -L`, with its MIG devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListGpu {
    pub index: u32,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub mig: Vec<ListMig>,
}

/// Splits `<head> (UUID: <uuid>)` into the head and the UUID.
fn split_uuid(text: &str) -> (&str, Option<String>) {
    match text.rsplit_once("(UUID:") {
        Some((head, tail)) => (head.trim(), text_field(tail.trim().trim_end_matches(')'))),
        None => (text.trim(), None),
    }
}

/// `nvidia-smi -L`: `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)` lines, each followed by its
/// `  MIG 3g.40gb     Device  0: (UUID: MIG-…)` lines. Lines of other shapes are skipped.
#[must_use]
pub fn parse_list(text: &str) -> Vec<ListGpu> {
    let mut out: Vec<ListGpu> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("GPU ") {
            let Some((index, rest)) = rest.split_once(':') else {
                continue;
            };
            let Ok(index) = index.trim().parse::<u32>() else {
                continue;
            };
            let (name, uuid) = split_uuid(rest);
            out.push(ListGpu {
                index,
                name: text_field(name),
                uuid,
                mig: Vec::new(),
            });
        } else if let Some(rest) = l.strip_prefix("MIG ") {
            let Some((head, tail)) = rest.split_once(':') else {
                continue;
            };
            let words: Vec<&str> = head.split_whitespace().collect();
            let (profile, index) = match words.as_slice() {
                [profile, "Device", n] => (Some((*profile).to_string()), n.parse::<u32>().ok()),
                ["Device", n] => (None, n.parse::<u32>().ok()),
                _ => (None, None),
            };
            let (Some(index), Some(gpu)) = (index, out.last_mut()) else {
                continue;
            };
            gpu.mig.push(ListMig {
                index,
                profile,
                uuid: split_uuid(tail).1,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse_q_memory;
    use super::*;

    #[test]
    fn mig_mode_rows() {
        let m = parse_mig_modes("0, Enabled, Enabled\n1, [N/A], [N/A]\n2, Disabled, Enabled\n")
            .unwrap();
        assert_eq!(
            m,
            vec![
                SmiMigMode {
                    index: 0,
                    current: Some(true),
                    pending: Some(true)
                },
                SmiMigMode {
                    index: 1,
                    current: None,
                    pending: None
                },
                SmiMigMode {
                    index: 2,
                    current: Some(false),
                    pending: Some(true)
                },
            ]
        );
        assert!(parse_mig_modes("x, Enabled, Enabled\n").is_err());
        assert!(parse_mig_modes("0, Enabled\n").is_err());
        assert_eq!(parse_mig_modes("").unwrap(), vec![]);
    }

    /// An H200 `-q` excerpt: GI 2 split into two compute instances that show the same
    /// Shared FB Memory Usage, a 1g instance, and processes on GI 2 CI 1.
    const H200_Q: &str = "\
==============NVSMI LOG==============

Timestamp                                              : Mon Jul 20 10:11:13 2026
Attached GPUs                                          : 1
GPU 00000000:19:00.0
    Product Name                                       : NVIDIA H200
    MIG Mode
        Current                                        : Enabled
        Pending                                        : Disabled
    MIG Device
        Index                                          : 0
        GPU Instance ID                                : 2
        Compute Instance ID                            : 0
        Device Attributes
            Shared
                Multiprocessor count                   : 16
        Shared FB Memory Usage
            Total                                      : 71424 MiB
            Reserved                                   : 0 MiB
            Used                                       : 16925 MiB
            Free                                       : 54499 MiB
        Shared BAR1 Memory
            Total                                      : 42854 MiB
            Used                                       : 0 MiB
            Free                                       : 42854 MiB
    MIG Device
        Index                                          : 1
        GPU Instance ID                                : 2
        Compute Instance ID                            : 1
        Shared FB Memory Usage
            Total                                      : 71424 MiB
            Reserved                                   : 0 MiB
            Used                                       : 16925 MiB
            Free                                       : 54499 MiB
    MIG Device
        Index                                          : 3
        GPU Instance ID                                : 9
        Compute Instance ID                            : 0
        Shared FB Memory Usage
            Total                                      : 16384 MiB
            Reserved                                   : N/A
            Used                                       : 9 MiB
            Free                                       : 16375 MiB
    FB Memory Usage
        Total                                          : 143771 MiB
        Reserved                                       : 614 MiB
        Used                                           : 16959 MiB
        Free                                           : 126198 MiB
    Processes
        GPU instance ID                   : 2
        Compute instance ID               : 1
        Process ID                        : 31337
            Type                          : C
            Name                          : /usr/bin/python3
            Used GPU Memory               : 12288 MiB
        GPU instance ID                   : 2
        Compute instance ID               : 1
        Process ID                        : 31338
            Type                          : C
            Name                          : /usr/bin/python3
            Used GPU Memory               : 4096 MiB
GPU 00000000:3B:00.0
    Product Name                                       : NVIDIA L40S
    MIG Mode
        Current                                        : N/A
        Pending                                        : N/A
    FB Memory Usage
        Total                                          : 46068 MiB
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 20037
            Type                          : C
            Name                          : ffmpeg
            Used GPU Memory               : 538 MiB
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 20038
            Type                          : G
            Name                          : Xorg
            Used GPU Memory               : [N/A]
";

    #[test]
    fn q_mig_blocks_and_processes() {
        let q = parse_q_mig(H200_Q);
        assert_eq!(q.len(), 2);
        let h = &q[0];
        assert_eq!(h.pci_bus_id, "00000000:19:00.0");
        assert_eq!((h.mig_current, h.mig_pending), (Some(true), Some(false)));
        let ids: Vec<_> = h
            .devices
            .iter()
            .map(|d| (d.index, d.gpu_instance_id, d.compute_instance_id))
            .collect();
        assert_eq!(
            ids,
            vec![
                (Some(0), Some(2), Some(0)),
                (Some(1), Some(2), Some(1)),
                (Some(3), Some(9), Some(0))
            ]
        );
        let mem = |k: usize| h.devices[k].memory.clone().unwrap();
        assert_eq!(
            mem(0),
            mem(1),
            "compute instances of GI 2 show the same memory"
        );
        assert_eq!(
            mem(0),
            QMemoryLines {
                total_mib: Some(Ok(71424)),
                reserved_mib: Some(Ok(0)),
                used_mib: Some(Ok(16925)),
                free_mib: Some(Ok(54499)),
            }
        );
        assert_eq!(mem(2).reserved_mib, Some(Err("N/A".into())));
        assert_eq!(h.processes.len(), 2);
        assert_eq!(
            h.processes[1],
            QProcess {
                pid: Some(31338),
                gpu_instance_id: Some(2),
                compute_instance_id: Some(1),
                kind: Some("C".into()),
                name: Some("/usr/bin/python3".into()),
                used_mib: Some(Ok(4096)),
            }
        );
        let l = &q[1];
        assert_eq!((l.mig_current, l.devices.len()), (None, 0));
        assert_eq!(l.processes.len(), 2);
        assert_eq!(
            (l.processes[0].pid, l.processes[0].gpu_instance_id),
            (Some(20037), None)
        );
        assert_eq!(l.processes[1].used_mib, Some(Err("[N/A]".into())));
        // The GPU-wide block is still what parse_q_memory reads.
        let fb = parse_q_memory(H200_Q).unwrap_err();
        assert!(fb.contains("no Used"), "{fb}");
        // Older drivers list processes without instance ids; `Processes : None` has none.
        let old = parse_q_mig(
            "GPU 0\n    Processes\n        Process ID : 7\n            Used GPU Memory : 5 MiB\n        Process ID : 8\nGPU 1\n    Processes : None\n",
        );
        assert_eq!(
            old[0].processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
            vec![Some(7), Some(8)]
        );
        assert!(old[1].processes.is_empty());
        // An entry may start at its compute instance id (no GPU instance line); a compute
        // instance id after a complete entry starts the next one.
        let ci_first = parse_q_mig(
            "GPU 0\n    Processes\n        Process ID : 10\n        Compute instance ID : 1\n        Process ID : 11\n        Compute instance ID : 2\n        Process ID : 12\n",
        );
        assert_eq!(
            ci_first[0]
                .processes
                .iter()
                .map(|p| (p.pid, p.compute_instance_id))
                .collect::<Vec<_>>(),
            vec![(Some(10), None), (Some(11), Some(1)), (Some(12), Some(2))]
        );
        assert!(parse_q_mig("").is_empty());
        assert!(parse_q_mig("\u{0}\u{ff} garbage\n  MIG Device\n").is_empty());
    }

    #[test]
    fn list_with_mig_devices() {
        let text = "\
GPU 0: NVIDIA H200 (UUID: GPU-5d1c2a7e-0f3b-4c1d-9a8e-6b7c8d9e0f12)
  MIG 1c.3g.71gb  Device  0: (UUID: MIG-2a4c6e80-1b3d-4f70-9a1c-3e5f7a9c1e30)
  MIG 2c.3g.71gb  Device  1: (UUID: MIG-7b9d1f32-5c7e-4a91-8b3d-5f7a9c1e3a52)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa)
  MIG 1g.5gb Device 0: (UUID: MIG-GPU-aaaa/7/0)
  MIG Device 3: (UUID: MIG-odd)
  garbage line
GPU 2: NVIDIA L40S (UUID: GPU-bbbb)
";
        let l = parse_list(text);
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].name.as_deref(), Some("NVIDIA H200"));
        assert_eq!(
            l[0].uuid.as_deref(),
            Some("GPU-5d1c2a7e-0f3b-4c1d-9a8e-6b7c8d9e0f12")
        );
        assert_eq!(
            l[0].mig[1],
            ListMig {
                index: 1,
                profile: Some("2c.3g.71gb".into()),
                uuid: Some("MIG-7b9d1f32-5c7e-4a91-8b3d-5f7a9c1e3a52".into())
            }
        );
        assert_eq!(l[1].mig[0].uuid.as_deref(), Some("MIG-GPU-aaaa/7/0"));
        assert_eq!((l[1].mig[1].index, l[1].mig[1].profile.clone()), (3, None));
        assert!(l[2].mig.is_empty());
        assert!(parse_list("  MIG 1g.5gb Device 0: (UUID: MIG-x)\nGPU x: y\n").is_empty());
    }
}
