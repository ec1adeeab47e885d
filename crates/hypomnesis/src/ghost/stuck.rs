//! Stuck: a process continuously in uninterruptible sleep (`D`) for the threshold, told from
//! one that passes through `D` again and again (a job writing a checkpoint to slow storage,
//! in `D` a second at a time) by its context switches: a task that stays asleep does not
//! switch, so the count of its leader thread's switches (`status`) is the same at two looks
//! only if it has not woken in between. Where it waits decides what frees it: only a wait in
//! the NVIDIA driver (a frame of its modules on the kernel stack, or a `wchan` of theirs) is a
//! GPU's; a `vfork` parent (`kernel_clone`) or a wait on storage is freed by no GPU reset.

use std::path::Path;

use super::rule::Wait;

/// What one look reads of a listed process in `D`: its context switches so far; `None` when
/// it is not in `D` now, or they cannot be read.
pub(crate) fn in_d(procfs: &Path, pid: u32) -> Option<u64> {
    let ids = super::look::ids(procfs, pid)?;
    if ids.state != 'D' {
        return None;
    }
    let path = procfs.join(pid.to_string()).join("status");
    let text = crate::host::file::read_capped(&path, crate::host::file::STATUS).ok()?;
    crate::host::parse::memory::status_context_switches(&text)
}

/// Kernel function names of NVIDIA's modules (`nvidia`, `nvidia_uvm`): the driver's own
/// prefixes, as a `wchan` shows them.
const DRIVER_PREFIXES: [&str; 5] = ["nv_", "nvidia_", "uvm_", "os_", "_nv"];

/// Where `pid` waits: a frame of the NVIDIA driver on its kernel stack (`stack`, readable by
/// root), else its `wchan` by the driver's prefixes, else the first frame or `wchan` as
/// another place.
pub(crate) fn wait(procfs: &Path, pid: u32) -> Wait {
    let dir = procfs.join(pid.to_string());
    let stack = crate::host::file::read_capped(&dir.join("stack"), crate::host::file::STATUS)
        .ok()
        .map(|t| frames(&t));
    if let Some(frames) = &stack
        && let Some((func, module)) = frames.iter().find(|(_, m)| is_driver_module(m))
    {
        return Wait::InDriver(format!("{func} [{module}]"));
    }
    if let Some(w) = super::look::wchan(procfs, pid) {
        return if DRIVER_PREFIXES.iter().any(|p| w.starts_with(p)) {
            Wait::InDriver(w)
        } else {
            Wait::Elsewhere(w)
        };
    }
    match stack.as_deref().and_then(<[_]>::first) {
        Some((func, _)) => Wait::Elsewhere(func.clone()),
        None => Wait::Unknown,
    }
}

fn is_driver_module(module: &str) -> bool {
    module == "nvidia" || module.starts_with("nvidia_") || module.starts_with("nvidia-")
}

/// The frames of a kernel stack (`[<0>] uvm_va_space_destroy+0x1a2/0x3f0 [nvidia_uvm]`, one a
/// line): each function's name and its module (empty for the kernel's own).
pub(crate) fn frames(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().split_once("] ").map_or(l.trim(), |(_, r)| r);
            let mut parts = rest.split_whitespace();
            let func = parts.next()?.split('+').next()?.to_owned();
            let module = parts
                .next()
                .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                .unwrap_or_default()
                .to_owned();
            (!func.is_empty()).then_some((func, module))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_gives_functions_and_modules() {
        let text = "[<0>] uvm_va_space_destroy+0x1a2/0x3f0 [nvidia_uvm]\n[<0>] uvm_release+0x5e/0x90 [nvidia_uvm]\n[<0>] __fput+0xff/0x2b0\n";
        let f = frames(text);
        assert_eq!(f[0], ("uvm_va_space_destroy".into(), "nvidia_uvm".into()));
        assert_eq!(f[2], ("__fput".into(), String::new()));
        assert_eq!(f.len(), 3);
        assert!(frames("").is_empty());
        assert!(is_driver_module("nvidia") && is_driver_module("nvidia_uvm"));
        assert!(!is_driver_module("nfs") && !is_driver_module(""));
    }

    /// Crafted procfs trees: a stack in the driver, a `wchan` of the driver's, a `vfork`
    /// parent's, none readable.
    #[test]
    fn where_a_process_waits() {
        let root = std::env::temp_dir().join(format!("hmn-stuck-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let d = root.join("50");
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(wait(&root, 50), Wait::Unknown);
        std::fs::write(d.join("wchan"), "kernel_clone").unwrap();
        assert_eq!(wait(&root, 50), Wait::Elsewhere("kernel_clone".into()));
        std::fs::write(d.join("wchan"), "os_acquire_mutex").unwrap();
        assert_eq!(wait(&root, 50), Wait::InDriver("os_acquire_mutex".into()));
        std::fs::write(
            d.join("stack"),
            "[<0>] rpc_wait_bit_killable+0x1e/0xa0 [sunrpc]\n[<0>] nfs_wait_on_request+0x2/0x9 [nfs]\n",
        )
        .unwrap();
        std::fs::write(d.join("wchan"), "rpc_wait_bit_killable").unwrap();
        assert_eq!(
            wait(&root, 50),
            Wait::Elsewhere("rpc_wait_bit_killable".into())
        );
        std::fs::write(
            d.join("stack"),
            "[<0>] schedule+0x1/0x2\n[<0>] _nv012345rm+0x1/0x2 [nvidia]\n",
        )
        .unwrap();
        assert_eq!(
            wait(&root, 50),
            Wait::InDriver("_nv012345rm [nvidia]".into())
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
