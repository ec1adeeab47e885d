//! The ghosts' series: each listed GPU's ghost bytes by class, and how old and how complete
//! the scan of descriptors is that their evidence uses (it runs in the background).

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::{Exposition, PresentLabels, gauge, gauges, single};

impl Exposition {
    /// The bytes of each ghost class on each listed GPU (0 for a class not found), when the
    /// measurement looked for ghosts: 7 series per GPU, whatever the number of processes.
    fn ghosts(&self) -> Vec<(PresentLabels, i64)> {
        let Some(report) = &self.sample.ghosts else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for d in &self.sample.devices {
            if !self.sample.listed.contains(&d.index) {
                continue;
            }
            for class in hypomnesis::GhostClass::ALL {
                let bytes = report
                    .ghosts
                    .iter()
                    .filter(|g| g.device_index == d.index && g.class == class)
                    .fold(0_u64, |a, g| a.saturating_add(g.bytes));
                let mut labels = Self::device_labels(d);
                labels.push(("class", class.as_str().to_owned()));
                out.push((labels, gauge(bytes)));
            }
        }
        out
    }

    /// The ghosts' series (absent where the measurement did not look for them).
    pub(super) fn encode_ghosts(
        &self,
        e: &mut DescriptorEncoder<'_>,
        bytes: Option<&Unit>,
    ) -> fmt::Result {
        gauges(
            e,
            "gpu_ghost",
            "Memory of the GPU held that should not be, by why (class: exited, zombie, stuck, orphan, gone_pod, idle, unaccounted); 0 for a class not found, absent where not looked for (off Linux). `hmn ghosts` on the host names the processes, the evidence and what frees it.",
            bytes,
            &self.ghosts(),
        )?;
        if let Some(scan) = self.sample.ghosts.as_ref().and_then(|r| r.holder_scan) {
            single(
                e,
                "ghost_scan_age",
                "How old the scan of every process's descriptors is that the ghosts' evidence uses (who holds a GPU's device file): it runs in the background, never on a scrape's path; absent while no ghost needs one.",
                Some(&Unit::Seconds),
                scan.age.as_secs_f64(),
            )?;
            single(
                e,
                "ghost_scan_complete",
                "Whether that scan saw every process of the host and each one's descriptors (1) or not (0): only a complete scan may conclude that nothing but the driver holds a ghost's memory.",
                None,
                i64::from(scan.saw_everything()),
            )?;
        }
        Ok(())
    }
}
