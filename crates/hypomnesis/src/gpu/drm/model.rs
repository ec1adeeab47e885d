//! Whether an amdgpu device has memory of its own or shares the host's, from its sysfs files
//! (facts and sources: `docs/memory-models.md`).
//!
//! - `mem_info_vram_total` of 0 beside a GTT: no memory of its own (as MI300A's VRAM reads).
//! - `gpu_metrics`, the power firmware's table: its header's format revision is 2 or 3 for an
//!   APU's table (`gpu_metrics_v2_x`, `v3_0`: CPU core temperatures and activity in it), 1 for
//!   a discrete board's (`v1_x`). The kernel offers no other APU flag in sysfs: KFD's
//!   `cpu_cores_count` reads 0 on recent APUs and `local_mem_size` 0 on every device.
//! - Neither: not known (an older kernel without `gpu_metrics`).
//!
//! A unified device's figures are its pool's: the VRAM carve-out plus GTT, GTT counted no
//! larger than the host's `MemTotal` (a GTT limit set above the RAM would count memory twice).

use std::io::Read as _;
use std::path::Path;

use crate::types::MemoryModel;

/// `gpu_metrics`' header: `structure_size` (u16), `format_revision` (u8), `content_revision`.
const HEADER: usize = 4;

/// The model of the amdgpu device at `dev` (its sysfs `device` directory) with `vram_total`
/// bytes of VRAM and `gtt_total` of GTT, and the sentence that says why.
pub(super) fn amdgpu(
    dev: &Path,
    vram_total: u64,
    gtt_total: Option<u64>,
) -> (Option<MemoryModel>, Option<String>) {
    if vram_total == 0
        && let Some(gtt) = gtt_total.filter(|&g| g > 0)
    {
        return (
            Some(MemoryModel::Unified),
            Some(format!(
                "mem_info_vram_total reads 0 beside a GTT of {} MiB: no memory of its own, \
                 its memory is the host's",
                gtt >> 20
            )),
        );
    }
    let Some((format, content)) = metrics_revision(&dev.join("gpu_metrics")) else {
        return (None, None);
    };
    match format {
        2 | 3 => (
            Some(MemoryModel::Unified),
            Some(format!(
                "gpu_metrics is an APU's table (format {format}.{content}): the VRAM is a \
                 carve-out of the host's RAM, and the pool is it plus GTT"
            )),
        ),
        1 => (
            Some(MemoryModel::Discrete),
            Some(format!(
                "gpu_metrics is a discrete board's table (format {format}.{content})"
            )),
        ),
        _ => (None, None),
    }
}

/// The format and content revision of a `gpu_metrics` table, when the file reads.
fn metrics_revision(path: &Path) -> Option<(u8, u8)> {
    let _waiting = crate::inflight::reading(path);
    let mut header = [0_u8; HEADER];
    std::fs::File::open(path)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    let [_, _, format, content] = header;
    Some((format, content))
}

/// A unified device's pool: its VRAM carve-out plus its GTT, the GTT counted no larger than
/// the host's RAM (`host_total`, when known). `(total, used)`.
pub(super) fn pool(
    (vram_total, vram_used): (u64, u64),
    (gtt_total, gtt_used): (u64, u64),
    host_total: Option<u64>,
) -> (u64, u64) {
    let gtt = host_total.map_or(gtt_total, |h| gtt_total.min(h));
    (
        vram_total.saturating_add(gtt),
        vram_used.saturating_add(gtt_used.min(gtt)),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const GIB: u64 = 1 << 30;

    fn dev_with(metrics: Option<&[u8]>) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "hmn-amd-model-{}-{}",
            std::process::id(),
            metrics.map_or(0, |m| m.first().copied().unwrap_or(0) as usize * 256
                + m.len())
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(dir.join("gpu_metrics"));
        if let Some(m) = metrics {
            std::fs::write(dir.join("gpu_metrics"), m).unwrap();
        }
        dir
    }

    #[test]
    fn the_tables_format_says_apu_or_board() {
        let apu = dev_with(Some(&[0x9c, 0x01, 3, 0, 1, 2, 3]));
        let (m, why) = amdgpu(&apu, 512 << 20, Some(30 * GIB));
        assert_eq!(m, Some(MemoryModel::Unified));
        assert!(why.unwrap().contains("APU's table (format 3.0)"));
        let board = dev_with(Some(&[0x78, 0x00, 1, 4]));
        assert_eq!(
            amdgpu(&board, 24 * GIB, Some(30 * GIB)).0,
            Some(MemoryModel::Discrete)
        );
        let unknown = dev_with(Some(&[0, 0, 9, 9]));
        assert_eq!(amdgpu(&unknown, 24 * GIB, None), (None, None));
        let short = dev_with(Some(&[0x78, 0x00]));
        assert_eq!(amdgpu(&short, 24 * GIB, None), (None, None), "a short read");
        let none = dev_with(None);
        assert_eq!(amdgpu(&none, 24 * GIB, None), (None, None));
        // No VRAM beside a GTT: unified whatever the table.
        let (m, why) = amdgpu(&board, 0, Some(128 * GIB));
        assert_eq!(m, Some(MemoryModel::Unified));
        assert!(why.unwrap().contains("reads 0"));
        assert_eq!(amdgpu(&none, 0, None), (None, None), "nothing at all");
    }

    #[test]
    fn the_pool_counts_gtt_no_larger_than_the_ram() {
        assert_eq!(
            pool((512 << 20, 100 << 20), (30 * GIB, GIB), Some(64 * GIB)),
            ((512 << 20) + 30 * GIB, (100 << 20) + GIB)
        );
        assert_eq!(
            pool((96 * GIB, 0), (40 * GIB, 38 * GIB), Some(31 * GIB)),
            (127 * GIB, 31 * GIB),
            "a GTT limit above the RAM"
        );
        assert_eq!(pool((0, 0), (128 * GIB, GIB), None), (128 * GIB, GIB));
    }
}
