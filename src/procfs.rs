//! Reading other processes' procfs entries (names, visibility), with an injectable root.
//!
//! `HYPOMNESIS_PROCFS` replaces `/proc` (e.g. a host's procfs mounted in a container).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The procfs root: `HYPOMNESIS_PROCFS` when set and non-empty, else `/proc`.
pub(crate) fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| match std::env::var_os("HYPOMNESIS_PROCFS") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from("/proc"),
    })
}

/// The short name (`comm`) of `pid` under `root`, `None` when the pid is not visible or the
/// file is unreadable.
pub(crate) fn comm(root: &Path, pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(root.join(pid.to_string()).join("comm")).ok()?;
    let name = text.trim_end_matches('\n');
    (!name.is_empty()).then(|| name.to_string())
}

/// Whether `pid` has a directory under `root` (is visible in this PID namespace's view).
pub(crate) fn visible(root: &Path, pid: u32) -> bool {
    root.join(pid.to_string()).is_dir()
}

/// Whether the calling process holds the CUDA unified-memory device open (`/dev/nvidia-uvm`),
/// which every CUDA context does. NVML alone opens only `/dev/nvidiactl` and `/dev/nvidiaN`.
/// `None` when the fd table cannot be read.
pub(crate) fn self_has_cuda_context(root: &Path) -> Option<bool> {
    let dir = std::fs::read_dir(root.join("self").join("fd")).ok()?;
    Some(dir.flatten().any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|t| {
            t.as_os_str()
                .as_encoded_bytes()
                .starts_with(b"/dev/nvidia-uvm")
        })
    }))
}

/// A process name from a path or a name: the final path component (NVML and `nvidia-smi`
/// sometimes give full paths, `/proc/<pid>/comm` gives a short name).
pub(crate) fn short_name(s: &str) -> &str {
    let trimmed = s.trim();
    trimmed
        .rsplit(['/', '\\'])
        .next()
        .filter(|b| !b.is_empty())
        .unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[cfg(unix)]
    #[test]
    fn comm_and_visibility_on_a_fixture_root() {
        let dir = std::env::temp_dir().join(format!("hmn-procfs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("42")).unwrap();
        std::fs::write(dir.join("42/comm"), "python3\n").unwrap();
        std::fs::create_dir_all(dir.join("43")).unwrap();
        std::fs::create_dir_all(dir.join("self/fd")).unwrap();
        assert_eq!(comm(&dir, 42).as_deref(), Some("python3"));
        assert_eq!(comm(&dir, 43), None);
        assert_eq!(comm(&dir, 44), None);
        assert!(visible(&dir, 43));
        assert!(!visible(&dir, 44));
        assert_eq!(self_has_cuda_context(&dir), Some(false));
        std::os::unix::fs::symlink("/dev/nvidia-uvm", dir.join("self/fd/5")).unwrap();
        assert_eq!(self_has_cuda_context(&dir), Some(true));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(self_has_cuda_context(&dir), None);
    }

    #[test]
    fn short_names() {
        assert_eq!(short_name("/usr/bin/kwin_wayland"), "kwin_wayland");
        assert_eq!(short_name(r"C:\Windows\explorer.exe"), "explorer.exe");
        assert_eq!(short_name("ffmpeg"), "ffmpeg");
        assert_eq!(short_name("/"), "/");
    }
}
