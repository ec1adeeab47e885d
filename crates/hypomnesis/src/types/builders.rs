//! Builders for the non-exhaustive types, so downstream tests can fabricate them (feature
//! `test-helpers`).

#![cfg(feature = "test-helpers")]

use super::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuProcessListing, GpuQuerySource, GpuVendor,
    Hidepid, KubeletDirState, KubeletLogs, MemoryModel, MigGpuInstance, MigInstance, MigState,
    ProcessGpuInfo, ProcfsMount, Residency, Root, RootOrigin, Roots, SourceReport, SourceState,
    UnreadableReason,
};

/// Generates a consuming builder for a non-exhaustive struct (feature `test-helpers`).
macro_rules! builder {
    ($(#[$meta:meta])* $builder:ident => $target:ident { $($(@$konst:ident)? $field:ident : $ty:ty = $default:expr),* $(,)? }) => {
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
                $crate::types::builders::setter!($(@$konst)? $field: $ty);
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

/// One setter of a builder: `const fn` for a field marked `@const` (a `Copy` type, whose old
/// value needs no drop), a plain `fn` for the others.
macro_rules! setter {
    (@const $field:ident: $ty:ty) => {
        #[doc = concat!("Sets `", stringify!($field), "`.")]
        pub const fn $field(mut self, value: $ty) -> Self {
            self.inner.$field = value;
            self
        }
    };
    ($field:ident: $ty:ty) => {
        #[doc = concat!("Sets `", stringify!($field), "`.")]
        pub fn $field(mut self, value: $ty) -> Self {
            self.inner.$field = value;
            self
        }
    };
}
pub(crate) use setter;

builder! {
    /// Builds a [`GpuDeviceInfo`] for tests.
    GpuDeviceInfoBuilder => GpuDeviceInfo {
        @const index: u32 = 0,
        name: Option<String> = None,
        @const total_bytes: u64 = 0,
        @const free_bytes: u64 = 0,
        @const used_bytes: u64 = 0,
        @const reserved_bytes: Option<u64> = None,
        driver_version: Option<String> = None,
        uuid: Option<String> = None,
        pci_bus_id: Option<String> = None,
        @const vendor: Option<GpuVendor> = None,
        @const source: GpuQuerySource = GpuQuerySource::Nvml,
        @const gtt_total_bytes: Option<u64> = None,
        @const gtt_used_bytes: Option<u64> = None,
        @const visible_vram_total_bytes: Option<u64> = None,
        @const visible_vram_used_bytes: Option<u64> = None,
        @const mig_enabled: Option<bool> = None,
        @const memory_model: Option<MemoryModel> = None,
        memory_model_evidence: Option<String> = None,
        @const numa_node: Option<u32> = None,
        @const numa_node_total_bytes: Option<u64> = None,
        @const numa_node_used_bytes: Option<u64> = None,
    }
}

builder! {
    /// Builds a [`ProcessGpuInfo`] for tests.
    ProcessGpuInfoBuilder => ProcessGpuInfo {
        @const used_bytes: u64 = 0,
        @const is_per_process: bool = false,
        @const source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`GpuProcessEntry`] for tests.
    GpuProcessEntryBuilder => GpuProcessEntry {
        @const pid: u32 = 0,
        name: Option<String> = None,
        @const used_bytes: u64 = 0,
        @const source: GpuQuerySource = GpuQuerySource::Nvml,
        @const device_index: u32 = 0,
        @const shared_used_bytes: u64 = 0,
        @const context: Option<GpuContextKind> = None,
        @const host_pid: Option<u32> = None,
        @const outside_pid_namespace: bool = false,
        @const unreadable: Option<UnreadableReason> = None,
        @const gpu_instance_id: Option<u32> = None,
        @const compute_instance_id: Option<u32> = None,
        @const mps_server: bool = false,
    }
}

builder! {
    /// Builds a [`MigInstance`] for tests.
    MigInstanceBuilder => MigInstance {
        @const parent_index: u32 = 0,
        @const slot: u32 = 0,
        uuid: Option<String> = None,
        name: Option<String> = None,
        profile: Option<String> = None,
        @const gpu_instance_id: Option<u32> = None,
        @const compute_instance_id: Option<u32> = None,
        @const total_bytes: Option<u64> = None,
        @const free_bytes: Option<u64> = None,
        @const used_bytes: Option<u64> = None,
        @const reserved_bytes: Option<u64> = None,
        memory_error: Option<crate::error::Failure> = None,
        @const source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`MigState`] for tests.
    MigStateBuilder => MigState {
        @const index: u32 = 0,
        name: Option<String> = None,
        uuid: Option<String> = None,
        @const enabled: Option<bool> = None,
        @const pending: Option<bool> = None,
        instances: Vec<MigInstance> = Vec::new(),
        device_memory_error: Option<crate::error::Failure> = None,
        @const source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`MigGpuInstance`] for tests.
    MigGpuInstanceBuilder => MigGpuInstance {
        @const parent_index: u32 = 0,
        @const gpu_instance_id: Option<u32> = None,
        profile: Option<String> = None,
        slots: Vec<u32> = Vec::new(),
        compute_instance_ids: Vec<u32> = Vec::new(),
        @const total_bytes: Option<u64> = None,
        @const free_bytes: Option<u64> = None,
        @const used_bytes: Option<u64> = None,
        @const reserved_bytes: Option<u64> = None,
    }
}

builder! {
    /// Builds a [`SourceReport`] for tests.
    SourceReportBuilder => SourceReport {
        @const source: GpuQuerySource = GpuQuerySource::Nvml,
        state: SourceState = SourceState::Answered,
        details: Vec<(String, String)> = Vec::new(),
        @const dropped_process_rows: u64 = 0,
    }
}

builder! {
    /// Builds a [`ProcfsMount`] for tests.
    ProcfsMountBuilder => ProcfsMount {
        mount_point: std::path::PathBuf = std::path::PathBuf::from("/proc"),
        fs_type: String = "proc".to_string(),
        options: String = String::new(),
        @const hidepid: Option<Hidepid> = Some(Hidepid::Off),
        @const gid: Option<u32> = None,
        @const subset_pid: bool = false,
        @const hides_other_users: Option<bool> = None,
    }
}

builder! {
    /// Builds a [`Root`] for tests.
    RootBuilder => Root {
        path: std::path::PathBuf = std::path::PathBuf::new(),
        @const origin: RootOrigin = RootOrigin::Default,
        @const variable: &'static str = "",
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
        @const dedicated_bytes: u64 = 0,
        @const shared_bytes: u64 = 0,
        @const capacity_bytes: u64 = 0,
    }
}

builder! {
    /// Builds a [`GpuProcessListing`] for tests.
    GpuProcessListingBuilder => GpuProcessListing {
        entries: Vec<GpuProcessEntry> = Vec::new(),
        denied_pids: Vec<u32> = Vec::new(),
    }
}
