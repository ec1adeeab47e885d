//! Human-readable memory reports (feature `report`). The formats are byte-exact and stable:
//! "MB" means MiB (1,048,576 bytes), printed rounded with `{:.0}`; deltas always carry a sign.

use std::fmt::Write as _;

use crate::snapshot::mb;
use crate::{snapshot::Snapshot, types::GpuDeviceInfo};

impl GpuDeviceInfo {
    fn name_suffix(&self) -> String {
        self.name
            .as_ref()
            .map_or_else(String::new, |n| format!(" [{n}]"))
    }

    /// `  GPU <i>: free <free> MB / <total> MB [<name>]\n`
    #[must_use]
    pub fn format_free(&self) -> String {
        format!(
            "  GPU {}: free {:.0} MB / {:.0} MB{}\n",
            self.index,
            mb(self.free_bytes),
            mb(self.total_bytes),
            self.name_suffix()
        )
    }

    /// `  GPU <i>: total <total> MB [<name>]\n`
    #[must_use]
    pub fn format_total(&self) -> String {
        format!(
            "  GPU {}: total {:.0} MB{}\n",
            self.index,
            mb(self.total_bytes),
            self.name_suffix()
        )
    }

    /// `  GPU <i>: used <used> MB [<name>]\n`
    #[must_use]
    pub fn format_used(&self) -> String {
        format!(
            "  GPU {}: used {:.0} MB{}\n",
            self.index,
            mb(self.used_bytes),
            self.name_suffix()
        )
    }

    /// Print [`format_free`](Self::format_free) to stdout.
    pub fn print_free(&self) {
        print!("{}", self.format_free());
    }
}

/// Two snapshots, before and after some work.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryReport {
    /// The earlier snapshot.
    pub before: Snapshot,
    /// The later snapshot.
    pub after: Snapshot,
}

impl MemoryReport {
    /// A report over `before` and `after`.
    #[must_use]
    pub fn new(before: Snapshot, after: Snapshot) -> Self {
        Self { before, after }
    }

    /// RAM change in MiB (after − before).
    #[must_use]
    pub fn ram_delta_mb(&self) -> f64 {
        self.after.ram_mb() - self.before.ram_mb()
    }

    /// GPU memory change in MiB; `None` unless both snapshots have GPU figures.
    #[must_use]
    pub fn vram_delta_mb(&self) -> Option<f64> {
        Some(self.after.vram_mb()? - self.before.vram_mb()?)
    }

    fn qualifier(&self) -> &'static str {
        match self.after.gpu {
            Some(g) if g.is_per_process => " [per-process]",
            Some(_) => " [device-wide]",
            None => "",
        }
    }

    /// `  <label>: RAM <+d> MB  |  VRAM <+d> MB<q>\n`, or `  <label>: RAM <+d> MB\n` without
    /// GPU figures on both sides.
    #[must_use]
    pub fn format_delta(&self, label: &str) -> String {
        match self.vram_delta_mb() {
            Some(v) => format!(
                "  {label}: RAM {:+.0} MB  |  VRAM {v:+.0} MB{}\n",
                self.ram_delta_mb(),
                self.qualifier()
            ),
            None => format!("  {label}: RAM {:+.0} MB\n", self.ram_delta_mb()),
        }
    }

    /// `  <label>: RAM <b> MB → <a> MB (<+d> MB)\n`, then, when both snapshots have GPU figures,
    /// `  <label>: VRAM <b> MB → <a> MB (<+d> MB / <total> MB)<q> [<name>]\n` (` / <total> MB`
    /// and ` [<name>]` only when `after.gpu_device` is present / named).
    #[must_use]
    pub fn format_before_after(&self, label: &str) -> String {
        let mut s = format!(
            "  {label}: RAM {:.0} MB \u{2192} {:.0} MB ({:+.0} MB)\n",
            self.before.ram_mb(),
            self.after.ram_mb(),
            self.ram_delta_mb()
        );
        if let (Some(b), Some(a)) = (self.before.vram_mb(), self.after.vram_mb()) {
            let total = self
                .after
                .gpu_device
                .as_ref()
                .map_or_else(String::new, |d| format!(" / {:.0} MB", mb(d.total_bytes)));
            let name = self
                .after
                .gpu_device
                .as_ref()
                .map_or_else(String::new, GpuDeviceInfo::name_suffix);
            let _ = writeln!(
                s,
                "  {label}: VRAM {b:.0} MB \u{2192} {a:.0} MB ({:+.0} MB{total}){}{name}",
                a - b,
                self.qualifier()
            );
        }
        s
    }

    /// Print [`format_delta`](Self::format_delta) to stdout.
    pub fn print_delta(&self, label: &str) {
        print!("{}", self.format_delta(label));
    }

    /// Print [`format_before_after`](Self::format_before_after) to stdout.
    pub fn print_before_after(&self, label: &str) {
        print!("{}", self.format_before_after(label));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{types::GpuQuerySource, types::ProcessGpuInfo};

    const M: u64 = 1 << 20;

    fn device(name: Option<&str>) -> GpuDeviceInfo {
        GpuDeviceInfo {
            index: 0,
            name: name.map(String::from),
            total_bytes: 16_311 * M,
            free_bytes: 13_284 * M,
            used_bytes: 3_027 * M,
            reserved_bytes: Some(259 * M),
            driver_version: None,
            uuid: None,
            pci_bus_id: None,
            vendor: None,
            ..GpuDeviceInfo::blank(GpuQuerySource::Nvml)
        }
    }

    fn snap(
        ram_mib: u64,
        vram_mib: Option<u64>,
        per_process: bool,
        dev: Option<GpuDeviceInfo>,
    ) -> Snapshot {
        Snapshot {
            ram_bytes: ram_mib * M,
            gpu: vram_mib.map(|v| ProcessGpuInfo {
                used_bytes: v * M,
                is_per_process: per_process,
                source: GpuQuerySource::Nvml,
            }),
            gpu_device: dev,
        }
    }

    #[test]
    fn device_formats() {
        let d = device(Some("NVIDIA GeForce RTX 5060 Ti"));
        assert_eq!(
            d.format_free(),
            "  GPU 0: free 13284 MB / 16311 MB [NVIDIA GeForce RTX 5060 Ti]\n"
        );
        assert_eq!(
            d.format_total(),
            "  GPU 0: total 16311 MB [NVIDIA GeForce RTX 5060 Ti]\n"
        );
        assert_eq!(
            d.format_used(),
            "  GPU 0: used 3027 MB [NVIDIA GeForce RTX 5060 Ti]\n"
        );
        let d = device(None);
        assert_eq!(d.format_free(), "  GPU 0: free 13284 MB / 16311 MB\n");
        assert_eq!(d.format_total(), "  GPU 0: total 16311 MB\n");
        assert_eq!(d.format_used(), "  GPU 0: used 3027 MB\n");
    }

    #[test]
    fn snapshot_mb() {
        let s = Snapshot {
            ram_bytes: 3 * M / 2,
            gpu: None,
            gpu_device: None,
        };
        assert!((s.ram_mb() - 1.5).abs() < f64::EPSILON);
        assert_eq!(s.vram_mb(), None);
    }

    #[test]
    fn delta_formats() {
        let r = MemoryReport::new(
            snap(100, Some(10), true, None),
            snap(356, Some(1034), true, Some(device(Some("NVIDIA H200")))),
        );
        assert_eq!(
            r.format_delta("load"),
            "  load: RAM +256 MB  |  VRAM +1024 MB [per-process]\n"
        );
        assert_eq!(
            r.format_before_after("load"),
            "  load: RAM 100 MB \u{2192} 356 MB (+256 MB)\n  load: VRAM 10 MB \u{2192} 1034 MB (+1024 MB / 16311 MB) [per-process] [NVIDIA H200]\n"
        );
        let r = MemoryReport::new(
            snap(300, Some(50), false, None),
            snap(200, Some(40), false, None),
        );
        assert_eq!(
            r.format_delta("free"),
            "  free: RAM -100 MB  |  VRAM -10 MB [device-wide]\n"
        );
        assert_eq!(
            r.format_before_after("free"),
            "  free: RAM 300 MB \u{2192} 200 MB (-100 MB)\n  free: VRAM 50 MB \u{2192} 40 MB (-10 MB) [device-wide]\n"
        );
        let r = MemoryReport::new(snap(1, None, true, None), snap(1, Some(5), true, None));
        assert_eq!(r.format_delta("x"), "  x: RAM +0 MB\n");
        assert_eq!(r.vram_delta_mb(), None);
        assert_eq!(
            r.format_before_after("x"),
            "  x: RAM 1 MB \u{2192} 1 MB (+0 MB)\n"
        );
        let r = MemoryReport::new(
            snap(1, Some(0), true, None),
            snap(1, Some(0), true, Some(device(None))),
        );
        assert_eq!(
            r.format_before_after("y"),
            "  y: RAM 1 MB \u{2192} 1 MB (+0 MB)\n  y: VRAM 0 MB \u{2192} 0 MB (+0 MB / 16311 MB) [per-process]\n"
        );
    }
}
