//! Sampling a set of processes' RAM and GPU memory (for `hmn run` and `hmn watch`).

use std::collections::{HashMap, HashSet};

use hypomnesis::GpuDeviceInfo;

/// The GPUs at the start, and what each sample finds on them.
pub struct Devices {
    pub list: Vec<Option<GpuDeviceInfo>>,
}

impl Devices {
    pub fn discover() -> Self {
        let n = hypomnesis::device_count().unwrap_or(0);
        Self {
            list: (0..n).map(|i| hypomnesis::device_info(i).ok()).collect(),
        }
    }

    pub fn count(&self) -> u32 {
        u32::try_from(self.list.len()).unwrap_or(u32::MAX)
    }

    pub fn name(&self, i: u32) -> Option<&str> {
        self.list
            .get(i as usize)
            .and_then(|d| d.as_ref())
            .and_then(|d| d.name.as_deref())
    }

    pub fn reserved(&self, i: u32) -> Option<u64> {
        self.list
            .get(i as usize)
            .and_then(|d| d.as_ref())
            .and_then(|d| d.reserved_bytes)
    }

    pub fn total(&self, i: u32) -> Option<u64> {
        self.list
            .get(i as usize)
            .and_then(|d| d.as_ref())
            .map(|d| d.total_bytes)
    }
}

/// GPU memory per pid on one device at one moment; `None` when the device could not be read.
pub fn gpu_by_pid(device: u32) -> Option<HashMap<u32, u64>> {
    let rows = hypomnesis::gpu_processes(device).ok()?;
    let mut m = HashMap::new();
    for r in rows {
        let e = m.entry(r.pid).or_insert(0_u64);
        *e = e.saturating_add(r.used_bytes);
    }
    Some(m)
}

/// Sum of the RSS of `pids` (processes that vanished meanwhile count 0); `None` when not one
/// could be read.
pub fn rss_sum(pids: &[u32]) -> Option<u64> {
    let mut any = false;
    let mut sum = 0_u64;
    for &p in pids {
        if let Ok(b) = hypomnesis::process_rss_of(p) {
            any = true;
            sum = sum.saturating_add(b);
        }
    }
    any.then_some(sum)
}

/// GPU memory of `pids` on each device; `None` for a device that could not be read.
pub fn gpu_sums(devices: u32, pids: &HashSet<u32>) -> Vec<Option<u64>> {
    (0..devices)
        .map(|i| {
            gpu_by_pid(i).map(|m| {
                m.iter()
                    .filter(|(p, _)| pids.contains(p))
                    .map(|(_, b)| *b)
                    .fold(0, u64::saturating_add)
            })
        })
        .collect()
}

/// Used memory of each device now.
pub fn device_used(devices: u32) -> Vec<Option<u64>> {
    (0..devices)
        .map(|i| hypomnesis::device_info(i).ok().map(|d| d.used_bytes))
        .collect()
}

/// The larger of two optional figures.
pub fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `1.2 GiB` / `340 MiB` / `unknown`.
pub fn size(b: Option<u64>) -> String {
    b.map_or_else(|| "unknown".to_string(), crate::render::format_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxima() {
        assert_eq!(max_opt(Some(1), Some(3)), Some(3));
        assert_eq!(max_opt(None, Some(3)), Some(3));
        assert_eq!(max_opt(Some(2), None), Some(2));
        assert_eq!(max_opt(None, None), None);
        assert_eq!(size(None), "unknown");
    }
}
