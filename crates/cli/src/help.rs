//! The words of `hmn --help` and of the man page, in one place both use.

use std::fmt::Write as _;

/// The text of `hmn --help` (and of the man page's DESCRIPTION). A prose paragraph is one line,
/// wrapped to the terminal by clap and by man; lines that start with spaces are kept as they are.
pub const LONG_ABOUT: &str = "\
Measure GPU and RAM memory from outside any framework.

With no subcommand, hmn prints one line per GPU:

  GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01

What the figures mean (NVIDIA):

  total     what the driver reports, the same as nvidia-smi's Total
  reserved  the driver/firmware carve-out: PART of total, not extra
  free      what new allocations can still get
  used      (in --json) total - free, so it includes reserved
  allocated (in --json) total - reserved - free: the \"used\" of
            nvidia-smi (R510+), DCGM, gpustat and nvitop

Allocations can use at most total - reserved, and free already accounts for it. The reserved figure is shown only when the driver reports it (R510 and later); it is never guessed. MiB are 1,048,576 bytes, rounded down.

A GPU split with MIG (A100, H100, H200) is followed by one line per MIG device:

  GPU 0 [NVIDIA H200]: free 126198 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01
    MIG 1c.3g.71gb GI 2 CI 0: free 54499 MiB / 71424 MiB
    MIG 2c.3g.71gb GI 2 CI 1: free 54499 MiB / 71424 MiB
    MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB

Memory belongs to the GPU instance (GI): its compute instances (CI) show the same figures. When the whole GPU's figures are refused (unprivileged users), its line says so and the MIG lines still follow. `hmn ps` adds GI and CI columns when a process runs in a MIG instance.

Where the figures come from: NVIDIA GPUs through NVML (libnvidia-ml, loaded once), or nvidia-smi when NVML cannot be loaded; on Linux, AMD and Intel GPUs through sysfs and DRM fdinfo (listed after the NVIDIA ones); on Windows DXGI and PDH; on macOS Metal. `hmn doctor` says which answered and why the others did not.";

/// Exit statuses, for `--help` and the man page.
pub const EXIT_STATUS: &str = "0 success (also when there is no GPU); 1 the answer is no (hmn fits: it does not fit; hmn ps --exit-status: nothing listed; hmn watch: a spill was seen); 2 a usage error, or a measurement that failed or did not answer in time; 128 + n ended by signal n (hmn top, hmn serve; hmn top whose terminal hangs up: 129). hmn run and hmn spill pass on the command's status.";

/// The environment variables `hmn` reads: (name, meaning).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "HYPOMNESIS_NVML_LIBRARY",
        "absolute path of libnvidia-ml; when set, nothing else is tried",
    ),
    ("HYPOMNESIS_NVIDIA_SMI", "path of nvidia-smi (else PATH)"),
    (
        "HYPOMNESIS_NVIDIA_SMI_TIMEOUT",
        "limit of one nvidia-smi run, e.g. 2s or 500ms (default 10s)",
    ),
    (
        "HYPOMNESIS_PROCFS",
        "where /proc is (an absolute path, e.g. a host's procfs mounted in a container)",
    ),
    (
        "HYPOMNESIS_SYSFS",
        "where /sys is (an absolute path, e.g. a host's sysfs mounted in a container)",
    ),
    (
        "HYPOMNESIS_ROOTFS",
        "where the node's / is (e.g. a host's, mounted at /host): its kubelet logs name pods",
    ),
];

/// `--help`'s closing text: exit status and environment.
pub fn after_help() -> String {
    let width = ENVIRONMENT.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut s = format!("Exit status: {EXIT_STATUS}\n\nEnvironment:\n");
    for (name, meaning) in ENVIRONMENT {
        let _ = writeln!(s, "  {name:<width$}  {meaning}");
    }
    s.trim_end().to_string()
}
