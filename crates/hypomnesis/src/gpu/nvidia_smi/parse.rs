//! Pure parsers for `nvidia-smi` output (compiled and tested on every OS).
#![allow(missing_docs)] // exposed only through the doc(hidden) `__parsers` test surface
//!
//! Unknown values (`[N/A]`, `[Not Supported]`, `[Insufficient Permissions]`, `N/A`, …) are kept
//! as `Err(token)` so callers can say what was printed; they never become 0.

use crate::error::clip;

/// A numeric field: the value, or the token that stood in its place.
pub type Field = Result<u64, String>;

/// Fields asked of `--query-gpu`, in this order. `name` is last so a name containing `", "`
/// cannot shift the other columns; `memory.reserved` is dropped when the driver rejects it.
pub(crate) const GPU_FIELDS_WITH_RESERVED: &str =
    "index,uuid,driver_version,pci.bus_id,memory.total,memory.free,memory.reserved,name";
/// The same without `memory.reserved` (drivers before R510 reject the whole query with it).
pub(crate) const GPU_FIELDS: &str =
    "index,uuid,driver_version,pci.bus_id,memory.total,memory.free,name";
/// Fields asked of `--query-compute-apps`; the process name last for the same reason.
pub(crate) const APP_FIELDS: &str = "gpu_bus_id,pid,used_gpu_memory,process_name";

/// One row of `--query-gpu`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmiGpu {
    pub index: u32,
    pub uuid: Option<String>,
    pub driver_version: Option<String>,
    pub pci_bus_id: Option<String>,
    pub total_mib: Field,
    pub free_mib: Field,
    /// `None` when the field was not asked for.
    pub reserved_mib: Option<Field>,
    pub name: Option<String>,
}

/// One row of `--query-compute-apps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmiApp {
    pub pci_bus_id: Option<String>,
    pub pid: u32,
    pub used_mib: Field,
    pub name: Option<String>,
}

/// Memory lines of one GPU's `FB Memory Usage` block in `nvidia-smi -q`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QMemory {
    pub pci_bus_id: String,
    pub total_mib: Field,
    pub reserved_mib: Option<Field>,
    pub used_mib: Field,
    pub free_mib: Field,
}

/// Whether a value is one of nvidia-smi's "no value" forms.
fn is_unknown(v: &str) -> bool {
    v.is_empty() || v.starts_with('[') || v.eq_ignore_ascii_case("N/A")
}

pub(super) fn text_field(v: &str) -> Option<String> {
    let v = v.trim();
    (!is_unknown(v)).then(|| v.to_string())
}

/// A MiB figure: `46068`, or `46068 MiB` when `nounits` was not honoured.
pub(super) fn mib_field(v: &str) -> Field {
    let v = v.trim();
    if is_unknown(v) {
        return Err(if v.is_empty() {
            "(empty)".to_string()
        } else {
            v.to_string()
        });
    }
    let number = v.strip_suffix("MiB").map_or(v, str::trim_end);
    number.parse::<u64>().map_err(|_| v.to_string())
}

pub(super) fn split_row(line: &str, n: usize) -> Result<Vec<&str>, String> {
    let parts: Vec<&str> = line.splitn(n, ',').map(str::trim).collect();
    if parts.len() == n {
        Ok(parts)
    } else {
        Err(format!(
            "expected {n} comma-separated fields, got {}: {:?}",
            parts.len(),
            clip(line)
        ))
    }
}

/// The rows of a query, and the lines of its output that were not rows, such as nvidia-smi's
/// `Unable to determine the device handle for GPU …` in place of a lost GPU's row, or a
/// warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows<T> {
    pub rows: Vec<T>,
    pub skipped: Vec<Skipped>,
}

/// `s` cut to `n` characters at most.
fn clip_to(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => s.get(..i).unwrap_or(s),
        None => s,
    }
}

/// A line of output that was not a row (or, as line 0, a note on the run as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// 1-based; 0 for a note on the run.
    pub line: usize,
    /// The line, trimmed and clipped.
    pub text: String,
    /// Why it is not a row.
    pub why: String,
}

impl Skipped {
    /// Whether this is nvidia-smi's sentence for a GPU it cannot reach.
    pub fn is_unreachable_gpu(&self) -> bool {
        self.text.contains(NO_DEVICE_HANDLE)
    }
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.why),
            n => write!(f, "line {n}: {}", self.why),
        }
    }
}

/// What nvidia-smi prints in place of the row of a GPU it cannot reach (fallen off the bus, or
/// in an unknown error state).
pub(crate) const NO_DEVICE_HANDLE: &str = "Unable to determine the device handle";

/// Every non-empty line of `text` through `row`: the rows, and the lines skipped. `Err` (the
/// first line's reason) only when there were lines, not one was a row, and not all of them were
/// nvidia-smi's sentence for a GPU it cannot reach: then the output as a whole is not what was
/// asked for.
fn rows_of<T>(text: &str, row: impl Fn(&str) -> Result<T, String>) -> Result<Rows<T>, String> {
    let mut out = Rows {
        rows: Vec::new(),
        skipped: Vec::new(),
    };
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match row(line) {
            Ok(r) => out.rows.push(r),
            Err(why) => out.skipped.push(Skipped {
                line: i + 1,
                text: clip_to(line.trim(), 200).to_string(),
                why,
            }),
        }
    }
    match out.skipped.iter().find(|l| !l.is_unreachable_gpu()) {
        Some(first) if out.rows.is_empty() => Err(first.to_string()),
        _ => Ok(out),
    }
}

/// Rows of `--query-gpu=<GPU_FIELDS[_WITH_RESERVED]> --format=csv,noheader,nounits`.
pub fn parse_gpus(text: &str, with_reserved: bool) -> Result<Rows<SmiGpu>, String> {
    let n = if with_reserved { 8 } else { 7 };
    rows_of(text, |line| {
        let f = split_row(line, n)?;
        let get = |k: usize| f.get(k).copied().unwrap_or("");
        let index = get(0)
            .parse::<u32>()
            .map_err(|_| format!("GPU index is not a number: {:?}", clip(get(0))))?;
        let (reserved_mib, name) = if with_reserved {
            (Some(mib_field(get(6))), get(7))
        } else {
            (None, get(6))
        };
        Ok(SmiGpu {
            index,
            uuid: text_field(get(1)),
            driver_version: text_field(get(2)),
            pci_bus_id: text_field(get(3)),
            total_mib: mib_field(get(4)),
            free_mib: mib_field(get(5)),
            reserved_mib,
            name: text_field(name),
        })
    })
}

/// Rows of `--query-compute-apps=<APP_FIELDS> --format=csv,noheader,nounits` (may be empty).
pub fn parse_apps(text: &str) -> Result<Rows<SmiApp>, String> {
    rows_of(text, |line| {
        let f = split_row(line, 4)?;
        let get = |k: usize| f.get(k).copied().unwrap_or("");
        let pid = get(1)
            .parse::<u32>()
            .map_err(|_| format!("pid is not a number: {:?}", clip(get(1))))?;
        Ok(SmiApp {
            pci_bus_id: text_field(get(0)),
            pid,
            used_mib: mib_field(get(2)),
            name: text_field(get(3)),
        })
    })
}

/// Whether nvidia-smi refused a query because it does not know a field.
pub(crate) fn is_field_rejection(stdout: &str, stderr: &str) -> bool {
    let needle = "is not a valid field to query";
    stdout.contains(needle) || stderr.contains(needle)
}

/// The `FB Memory Usage` block of every GPU in `nvidia-smi -q` (or `-q -d MEMORY`) output.
/// MIG devices' `Shared FB Memory Usage` blocks are not these and are skipped.
pub fn parse_q_memory(text: &str) -> Result<Vec<QMemory>, String> {
    #[derive(Default)]
    struct Block {
        total: Option<Field>,
        reserved: Option<Field>,
        used: Option<Field>,
        free: Option<Field>,
    }
    let mut out = Vec::new();
    let mut gpu: Option<String> = None;
    let mut block: Option<Block> = None;
    let finish = |gpu: &Option<String>,
                  block: Option<Block>,
                  out: &mut Vec<QMemory>|
     -> Result<(), String> {
        let (Some(bus), Some(b)) = (gpu, block) else {
            return Ok(());
        };
        let need = |f: Option<Field>, k: &str| {
            f.ok_or_else(|| format!("GPU {bus}: FB Memory Usage has no {k} line"))
        };
        out.push(QMemory {
            pci_bus_id: bus.clone(),
            total_mib: need(b.total, "Total")?,
            reserved_mib: b.reserved,
            used_mib: need(b.used, "Used")?,
            free_mib: need(b.free, "Free")?,
        });
        Ok(())
    };
    for line in text.lines() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if body.is_empty() {
            continue;
        }
        if indent == 0 {
            finish(&gpu, block.take(), &mut out)?;
            gpu = body.strip_prefix("GPU ").map(|b| b.trim().to_string());
            continue;
        }
        if indent <= 4 {
            finish(&gpu, block.take(), &mut out)?;
            if indent == 4 && body.trim_end() == "FB Memory Usage" {
                block = Some(Block::default());
            }
            continue;
        }
        if let (Some(b), 8) = (block.as_mut(), indent) {
            let Some((k, v)) = body.split_once(':') else {
                continue;
            };
            let v = mib_field(v);
            match k.trim() {
                "Total" => b.total = Some(v),
                "Reserved" => b.reserved = Some(v),
                "Used" => b.used = Some(v),
                "Free" => b.free = Some(v),
                _ => {}
            }
        }
    }
    finish(&gpu, block.take(), &mut out)?;
    Ok(out)
}

/// The version from `nvidia-smi --version` (`NVIDIA-SMI version  : 595.80`), or from the
/// `DRIVER version` line.
#[must_use]
pub fn parse_version(text: &str) -> Option<String> {
    let find = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().to_string())
        })
    };
    find("NVIDIA-SMI version")
        .or_else(|| find("DRIVER version"))
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_rows() {
        let text = "0, GPU-aa, 595.80, 00000000:01:00.0, 46068, 44225, 609, NVIDIA L40S\n\
                    1, [N/A], 595.80, 00000000:02:00.0, [Insufficient Permissions], [N/A], [N/A], Odd, Name, With Commas\n";
        let g = parse_gpus(text, true).unwrap().rows;
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].index, 0);
        assert_eq!(g[0].total_mib, Ok(46068));
        assert_eq!(g[0].free_mib, Ok(44225));
        assert_eq!(g[0].reserved_mib, Some(Ok(609)));
        assert_eq!(g[0].name.as_deref(), Some("NVIDIA L40S"));
        assert_eq!(g[1].uuid, None);
        assert_eq!(g[1].total_mib, Err("[Insufficient Permissions]".into()));
        assert_eq!(g[1].name.as_deref(), Some("Odd, Name, With Commas"));
        let g = parse_gpus(
            "0, GPU-aa, 470.1, 00000000:01:00.0, 8192 MiB, 100 MiB, RTX\n",
            false,
        )
        .unwrap()
        .rows;
        assert_eq!(
            (g[0].total_mib.clone(), g[0].reserved_mib.clone()),
            (Ok(8192), None)
        );
        assert_eq!(
            parse_gpus("\n", true).unwrap(),
            Rows {
                rows: vec![],
                skipped: vec![]
            }
        );
    }

    #[test]
    fn lines_that_are_not_rows_are_skipped_and_named() {
        // GPU 2 fell off the bus: nvidia-smi prints a sentence in place of its row.
        let text = "0, GPU-a, 590.1, 00000000:18:00.0, 100, 50, 1, H200\n\
                    1, GPU-b, 590.1, 00000000:2A:00.0, 100, 50, 1, H200\n\
                    Unable to determine the device handle for GPU 0000:3A:00.0: GPU is lost.  Reboot the system to recover this GPU\n\
                    3, GPU-d, 590.1, 00000000:5D:00.0, 100, 50, 1, H200\n";
        let g = parse_gpus(text, true).unwrap();
        assert_eq!(
            g.rows.iter().map(|r| r.index).collect::<Vec<_>>(),
            vec![0, 1, 3]
        );
        assert_eq!(g.skipped.len(), 1);
        let lost = &g.skipped[0];
        assert!(
            lost.to_string()
                .starts_with("line 3: expected 8 comma-separated fields, got 1")
        );
        assert!(lost.is_unreachable_gpu(), "{lost:?}");
        assert!(
            lost.text
                .starts_with("Unable to determine the device handle for GPU 0000:3A")
        );
        let a = parse_apps(
            "WARNING: infoROM is corrupted at gpu 0000:3A:00.0\n00000000:5D:00.0, 7, 5, x\n",
        )
        .unwrap();
        assert_eq!((a.rows.len(), a.skipped.len()), (1, 1));
    }

    #[test]
    fn gpu_rows_malformed() {
        assert!(
            parse_gpus("0, a, b\n", true)
                .unwrap_err()
                .contains("expected 8")
        );
        assert!(
            parse_gpus("x, a, b, c, 1, 2, 3, n\n", true)
                .unwrap_err()
                .contains("index is not a number")
        );
        let g = parse_gpus("0, a, b, c, -5, 2.5, 3, n\n", true)
            .unwrap()
            .rows;
        assert_eq!(g[0].total_mib, Err("-5".into()));
        assert_eq!(g[0].free_mib, Err("2.5".into()));
    }

    #[test]
    fn app_rows() {
        let a = parse_apps("00000000:0C:00.0, 12444, [N/A], C:\\Windows\\explorer.exe\n00000000:01:00.0, 20037, 538, ffmpeg\n").unwrap().rows;
        assert_eq!(a[0].used_mib, Err("[N/A]".into()));
        assert_eq!(a[0].name.as_deref(), Some("C:\\Windows\\explorer.exe"));
        assert_eq!(
            a[1],
            SmiApp {
                pci_bus_id: Some("00000000:01:00.0".into()),
                pid: 20037,
                used_mib: Ok(538),
                name: Some("ffmpeg".into())
            }
        );
        assert_eq!(parse_apps("").unwrap().rows, vec![]);
        assert!(
            parse_apps("00000000:01:00.0, pid, 5, x\n")
                .unwrap_err()
                .contains("pid is not a number")
        );
        assert!(parse_apps("\u{0}\u{ff} garbage, not csv\n").is_err());
    }

    #[test]
    fn q_memory_with_mig_blocks() {
        let text = "GPU 00000000:00:09.0\n    Product Name   : H100\n    MIG Device\n        Index : 0\n        Shared FB Memory Usage\n            Total : 40448 MiB\n            Reserved : 0 MiB\n            Used : 26 MiB\n            Free : 40423 MiB\n    FB Memory Usage\n        Total                 : 81559 MiB\n        Reserved              : 479 MiB\n        Used                  : 59 MiB\n        Free                  : 81022 MiB\n    BAR1 Memory Usage\n        Total : 131072 MiB\n";
        let q = parse_q_memory(text).unwrap();
        assert_eq!(
            q,
            vec![QMemory {
                pci_bus_id: "00000000:00:09.0".into(),
                total_mib: Ok(81559),
                reserved_mib: Some(Ok(479)),
                used_mib: Ok(59),
                free_mib: Ok(81022)
            }]
        );
        assert!(
            parse_q_memory("GPU 1\n    FB Memory Usage\n        Total : 5 MiB\n")
                .unwrap_err()
                .contains("no Used")
        );
    }

    #[test]
    fn versions_and_rejections() {
        assert_eq!(
            parse_version("NVIDIA-SMI version  : 595.80\nNVML version        : 595.80\n")
                .as_deref(),
            Some("595.80")
        );
        assert_eq!(parse_version("garbage"), None);
        assert!(is_field_rejection(
            "Field \"memory.reserved\" is not a valid field to query.\n",
            ""
        ));
        assert!(!is_field_rejection("ok", "ok"));
    }
}
