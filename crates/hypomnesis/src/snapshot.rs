//! `Snapshot`: RAM (mandatory) and GPU memory (optional) of the calling process at one moment.

use crate::{Result, Snapshot, device_count, device_info, process_gpu_info, process_rss};

impl Snapshot {
    /// RAM of this process, plus its GPU memory and the device's figures on `device_index`
    /// when a GPU source can tell (`None` otherwise: a GPU failure never fails the snapshot).
    ///
    /// # Errors
    ///
    /// Only when the RAM measurement fails (see [`process_rss`]).
    pub fn now(device_index: u32) -> Result<Self> {
        let ram_bytes = process_rss()?;
        Ok(Self {
            ram_bytes,
            gpu: process_gpu_info(device_index).ok(),
            gpu_device: device_info(device_index).ok(),
        })
    }

    /// One snapshot per GPU (in index order); a single RAM-only snapshot when there is no GPU
    /// or the device count cannot be read.
    ///
    /// # Errors
    ///
    /// Only when the RAM measurement fails.
    pub fn all() -> Result<Vec<Self>> {
        let count = device_count().unwrap_or(0);
        if count == 0 {
            return Ok(vec![Self {
                ram_bytes: process_rss()?,
                gpu: None,
                gpu_device: None,
            }]);
        }
        (0..count).map(Self::now).collect()
    }
}
