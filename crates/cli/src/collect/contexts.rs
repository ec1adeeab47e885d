//! The context (owner, command, RSS, container, CPU time) of listed GPU processes: one read per
//! process, under the pid its files have in the procfs root in use.

use std::collections::BTreeMap;

use hypomnesis::{ContextParts, GpuProcessEntry, ProcessContext};

/// Listed pid → the pid its files are read under (the host's, when the procfs root in use is
/// a host's). A process outside this PID namespace, hidden by the procfs mount's `hidepid` or
/// exited has no files to read and is left out; a pid listed on several GPUs appears once.
pub fn readable<'a>(rows: impl IntoIterator<Item = &'a GpuProcessEntry>) -> BTreeMap<u32, u32> {
    rows.into_iter()
        .filter_map(|r| Some((r.pid, r.readable_pid()?)))
        .collect()
}

/// The `parts` of the context of each of `pids` (listed pid → pid to read), by listed pid.
pub fn read(pids: BTreeMap<u32, u32>, parts: ContextParts) -> BTreeMap<u32, ProcessContext> {
    let under: Vec<u32> = pids.values().copied().collect();
    let read = hypomnesis::process_contexts_with(&under, parts);
    pids.into_keys().zip(read).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::UnreadableReason;

    #[test]
    fn outside_processes_are_left_out_and_host_pids_are_read() {
        let row = |pid: u32, host: Option<u32>, outside: bool| {
            GpuProcessEntry::builder()
                .pid(pid)
                .host_pid(host)
                .outside_pid_namespace(outside)
                .build()
        };
        let hidden = GpuProcessEntry::builder()
            .pid(10)
            .unreadable(Some(UnreadableReason::HiddenByHidepid))
            .build();
        let rows = [
            row(7, None, false),
            row(8, Some(4008), false),
            row(9, None, true),
            row(7, None, false),
            hidden,
        ];
        let want: BTreeMap<u32, u32> = [(7, 7), (8, 4008)].into_iter().collect();
        assert_eq!(readable(&rows), want);
        let me = std::process::id();
        let mut parts = ContextParts::NONE;
        parts.command = true;
        let got = read([(1, me)].into_iter().collect(), parts);
        assert!(got.get(&1).is_some_and(|c| c.command.is_some()), "{got:?}");
        assert_eq!(got.len(), 1);
    }
}
