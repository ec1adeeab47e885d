//! Which of the listed GPU processes have files to read their context from (owner, command,
//! RSS, container, CPU time), and under which pid in the procfs root in use.

use std::collections::BTreeMap;

use hypomnesis::GpuProcessEntry;

/// Listed pid → the pid its files are read under (the host's, when the procfs root in use is
/// a host's). A process outside this PID namespace, hidden by the procfs mount's `hidepid` or
/// exited has no files to read and is left out; a pid listed on several GPUs appears once.
pub fn readable<'a>(rows: impl IntoIterator<Item = &'a GpuProcessEntry>) -> BTreeMap<u32, u32> {
    rows.into_iter()
        .filter_map(|r| Some((r.pid, r.readable_pid()?)))
        .collect()
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
    }
}
