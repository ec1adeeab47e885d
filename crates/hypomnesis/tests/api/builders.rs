//! Downstream tests fabricate the public types through builders named from the crate root
//! (feature `test-helpers`); every builder must be reachable there, not only its type.

#![cfg(feature = "test-helpers")]

use hypomnesis::{
    GpuContextKind, GpuDeviceInfo, GpuDeviceInfoBuilder, GpuProcessEntry, GpuProcessEntryBuilder,
    GpuQuerySource, KubeletDirState, KubeletLogs, KubeletLogsBuilder, MigGpuInstance,
    MigGpuInstanceBuilder, MigInstance, MigInstanceBuilder, MigState, MigStateBuilder,
    ProcessGpuInfo, ProcessGpuInfoBuilder, Residency, ResidencyBuilder, Root, RootBuilder,
    RootOrigin, Roots, RootsBuilder, Snapshot, SnapshotBuilder, SourceReport, SourceReportBuilder,
    SourceState,
};

#[test]
fn a_downstream_crate_builds_every_public_type() {
    let device: GpuDeviceInfoBuilder = GpuDeviceInfo::builder();
    let device = device
        .index(1)
        .total_bytes(8)
        .free_bytes(3)
        .used_bytes(5)
        .build();
    assert_eq!((device.index, device.used_bytes), (1, 5));

    let own: ProcessGpuInfoBuilder = ProcessGpuInfo::builder();
    let own = own.used_bytes(7).is_per_process(true).build();
    assert!(own.is_per_process);

    let row: GpuProcessEntryBuilder = GpuProcessEntry::builder();
    let row = row.pid(42).context(Some(GpuContextKind::Compute)).build();
    assert_eq!(row.pid, 42);

    let instance: MigInstanceBuilder = MigInstance::builder();
    let instance = instance.slot(3).total_bytes(Some(9)).build();
    let state: MigStateBuilder = MigState::builder();
    let state = state
        .enabled(Some(true))
        .instances(vec![instance.clone()])
        .build();
    assert_eq!(state.instances, vec![instance]);

    let gi: MigGpuInstanceBuilder = MigGpuInstance::builder();
    assert_eq!(gi.slots(vec![0, 1]).build().slots, vec![0, 1]);

    let report: SourceReportBuilder = SourceReport::builder();
    let report = report
        .source(GpuQuerySource::NvidiaSmi)
        .state(SourceState::failed(
            hypomnesis::ErrorKind::Other,
            "timed out",
        ))
        .build();
    assert_eq!(report.source, GpuQuerySource::NvidiaSmi);

    let root: RootBuilder = Root::builder();
    let root = root
        .origin(RootOrigin::Environment)
        .variable("HYPOMNESIS_PROCFS")
        .build();
    let roots: RootsBuilder = Roots::builder();
    assert_eq!(roots.procfs(root.clone()).build().procfs, root);
    let roots = Roots::builder().rootfs(root.clone()).build();
    assert_eq!(roots.rootfs, root);

    let logs: KubeletLogsBuilder = KubeletLogs::builder();
    let logs = logs
        .pods_dir("/host/var/log/pods".into())
        .pods(KubeletDirState::PermissionDenied)
        .build();
    assert_eq!(logs.pods, KubeletDirState::PermissionDenied);
    assert_eq!(logs.containers, KubeletDirState::Missing);

    let residency: ResidencyBuilder = Residency::builder();
    assert_eq!(residency.shared_bytes(2).build().shared_bytes, 2);

    let snapshot: SnapshotBuilder = Snapshot::builder();
    let snapshot = snapshot
        .ram_bytes(11)
        .gpu(Some(own))
        .gpu_device(Some(device))
        .build();
    assert_eq!(snapshot.ram_bytes, 11);
}
