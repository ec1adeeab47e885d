//! Builders for the non-exhaustive types, so downstream tests can fabricate them (feature
//! `test-helpers`).

#![cfg(feature = "test-helpers")]

use super::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, GpuVendor, Hidepid,
    KubeletDirState, KubeletLogs, MigGpuInstance, MigInstance, MigState, ProcessGpuInfo,
    ProcfsMount, Residency, Root, RootOrigin, Roots, SourceReport, SourceState, UnreadableReason,
};

/// Generates a consuming builder for a non-exhaustive struct (feature `test-helpers`).
macro_rules! builder {
    ($(#[$meta:meta])* $builder:ident => $target:ident { $($field:ident : $ty:ty = $default:expr),* $(,)? }) => {
        $(#[$meta])*
        #[cfg(feature = "test-helpers")]
        #[derive(Debug, Clone)]
        #[must_use]
        pub struct $builder {
            inner: $target,
        }

        #[cfg(feature = "test-helpers")]
        impl $target {
            #[doc = concat!("A builder for [`", stringify!($target), "`], every field at its default (0, `None`, `false`, `Nvml`).")]
            pub fn builder() -> $builder {
                $builder { inner: $target { $($field: $default),* } }
            }
        }

        #[cfg(feature = "test-helpers")]
        impl $builder {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.inner.$field = value;
                    self
                }
            )*

            #[doc = concat!("The finished [`", stringify!($target), "`].")]
            #[must_use]
            pub fn build(self) -> $target {
                self.inner
            }
        }
    };
}
// For the types defined beside what builds them (`Snapshot`).
pub(crate) use builder;

builder! {
    /// Builds a [`GpuDeviceInfo`] for tests.
    GpuDeviceInfoBuilder => GpuDeviceInfo {
        index: u32 = 0,
        name: Option<String> = None,
        total_bytes: u64 = 0,
        free_bytes: u64 = 0,
        used_bytes: u64 = 0,
        reserved_bytes: Option<u64> = None,
        driver_version: Option<String> = None,
        uuid: Option<String> = None,
        pci_bus_id: Option<String> = None,
        vendor: Option<GpuVendor> = None,
        source: GpuQuerySource = GpuQuerySource::Nvml,
        gtt_total_bytes: Option<u64> = None,
        gtt_used_bytes: Option<u64> = None,
        visible_vram_total_bytes: Option<u64> = None,
        visible_vram_used_bytes: Option<u64> = None,
        mig_enabled: Option<bool> = None,
    }
}

builder! {
    /// Builds a [`ProcessGpuInfo`] for tests.
    ProcessGpuInfoBuilder => ProcessGpuInfo {
        used_bytes: u64 = 0,
        is_per_process: bool = false,
        source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`GpuProcessEntry`] for tests.
    GpuProcessEntryBuilder => GpuProcessEntry {
        pid: u32 = 0,
        name: Option<String> = None,
        used_bytes: u64 = 0,
        source: GpuQuerySource = GpuQuerySource::Nvml,
        device_index: u32 = 0,
        shared_used_bytes: u64 = 0,
        context: Option<GpuContextKind> = None,
        host_pid: Option<u32> = None,
        outside_pid_namespace: bool = false,
        unreadable: Option<UnreadableReason> = None,
        gpu_instance_id: Option<u32> = None,
        compute_instance_id: Option<u32> = None,
        mps_server: bool = false,
    }
}

builder! {
    /// Builds a [`MigInstance`] for tests.
    MigInstanceBuilder => MigInstance {
        parent_index: u32 = 0,
        slot: u32 = 0,
        uuid: Option<String> = None,
        name: Option<String> = None,
        profile: Option<String> = None,
        gpu_instance_id: Option<u32> = None,
        compute_instance_id: Option<u32> = None,
        total_bytes: Option<u64> = None,
        free_bytes: Option<u64> = None,
        used_bytes: Option<u64> = None,
        reserved_bytes: Option<u64> = None,
        memory_error: Option<String> = None,
        source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`MigState`] for tests.
    MigStateBuilder => MigState {
        index: u32 = 0,
        name: Option<String> = None,
        uuid: Option<String> = None,
        enabled: Option<bool> = None,
        pending: Option<bool> = None,
        instances: Vec<MigInstance> = Vec::new(),
        device_memory_error: Option<String> = None,
        source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`MigGpuInstance`] for tests.
    MigGpuInstanceBuilder => MigGpuInstance {
        parent_index: u32 = 0,
        gpu_instance_id: Option<u32> = None,
        profile: Option<String> = None,
        slots: Vec<u32> = Vec::new(),
        compute_instance_ids: Vec<u32> = Vec::new(),
        total_bytes: Option<u64> = None,
        free_bytes: Option<u64> = None,
        used_bytes: Option<u64> = None,
        reserved_bytes: Option<u64> = None,
    }
}

builder! {
    /// Builds a [`SourceReport`] for tests.
    SourceReportBuilder => SourceReport {
        source: GpuQuerySource = GpuQuerySource::Nvml,
        state: SourceState = SourceState::Answered,
        details: Vec<(String, String)> = Vec::new(),
        dropped_process_rows: u64 = 0,
    }
}

builder! {
    /// Builds a [`ProcfsMount`] for tests.
    ProcfsMountBuilder => ProcfsMount {
        mount_point: std::path::PathBuf = std::path::PathBuf::from("/proc"),
        fs_type: String = "proc".to_string(),
        options: String = String::new(),
        hidepid: Option<Hidepid> = Some(Hidepid::Off),
        gid: Option<u32> = None,
        subset_pid: bool = false,
        hides_other_users: Option<bool> = None,
    }
}

builder! {
    /// Builds a [`Root`] for tests.
    RootBuilder => Root {
        path: std::path::PathBuf = std::path::PathBuf::new(),
        origin: RootOrigin = RootOrigin::Default,
        variable: &'static str = "",
    }
}

builder! {
    /// Builds a [`Roots`] for tests.
    RootsBuilder => Roots {
        procfs: Root = Root::builder().build(),
        sysfs: Root = Root::builder().build(),
        rootfs: Root = Root::builder().build(),
    }
}

builder! {
    /// Builds a [`KubeletLogs`] for tests (both directories `Missing` until set).
    KubeletLogsBuilder => KubeletLogs {
        pods_dir: std::path::PathBuf = std::path::PathBuf::new(),
        pods: KubeletDirState = KubeletDirState::Missing,
        containers_dir: std::path::PathBuf = std::path::PathBuf::new(),
        containers: KubeletDirState = KubeletDirState::Missing,
    }
}

builder! {
    /// Builds a [`Residency`] for tests.
    ResidencyBuilder => Residency {
        dedicated_bytes: u64 = 0,
        shared_bytes: u64 = 0,
        capacity_bytes: u64 = 0,
    }
}
