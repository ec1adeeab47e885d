use super::*;

#[test]
fn vendor_ids() {
    assert_eq!(
        GpuVendor::from_pci_vendor_id(0x10DE),
        Some(GpuVendor::Nvidia)
    );
    assert_eq!(GpuVendor::from_pci_vendor_id(0x1002), Some(GpuVendor::Amd));
    assert_eq!(
        GpuVendor::from_pci_vendor_id(0x8086),
        Some(GpuVendor::Intel)
    );
    assert_eq!(GpuVendor::from_pci_vendor_id(0x1414), None);
}

#[cfg(feature = "test-helpers")]
#[test]
fn builder_round_trip_keeps_reserved_a_subset_of_total() {
    // The RTX 5060 Ti figures of the v0.2.4 validation: total 16311 MiB, reserved 259 MiB.
    let total = 17_103_323_136_u64;
    let reserved = 271_581_184_u64;
    let free = 13_284 * 1024 * 1024;
    let info = GpuDeviceInfo::builder()
        .index(0)
        .name(Some("NVIDIA GeForce RTX 5060 Ti".into()))
        .total_bytes(total)
        .free_bytes(free)
        .used_bytes(total - free)
        .reserved_bytes(Some(reserved))
        .build();
    assert_eq!(info.reserved_bytes, Some(reserved));
    let r = info.reserved_bytes.unwrap_or(u64::MAX);
    assert!(r < info.total_bytes);
    assert!(r <= info.used_bytes);
    assert_eq!(info.allocatable_bytes(), Some(total - reserved));
    assert_eq!(info.name_or_unknown(), "NVIDIA GeForce RTX 5060 Ti");
    let unnamed = GpuDeviceInfo::builder().build();
    assert_eq!(unnamed.name_or_unknown(), "unknown GPU");
    assert_eq!(unnamed.reserved_bytes, None);
    assert_eq!(unnamed.allocatable_bytes(), None);
}

#[cfg(feature = "test-helpers")]
#[test]
#[allow(clippy::many_single_char_names, clippy::too_many_lines)] // one value per builder
fn every_builder_sets_every_field() {
    // Each setter given a value no other field has, so a setter that wrote the wrong field
    // (or none) shows.
    let p = ProcessGpuInfo::builder()
        .used_bytes(5)
        .is_per_process(true)
        .source(GpuQuerySource::Dxgi)
        .build();
    assert_eq!(
        p,
        ProcessGpuInfo {
            used_bytes: 5,
            is_per_process: true,
            source: GpuQuerySource::Dxgi
        }
    );
    let d = GpuDeviceInfo::builder()
        .index(1)
        .name(Some("n".into()))
        .total_bytes(2)
        .free_bytes(3)
        .used_bytes(4)
        .reserved_bytes(Some(5))
        .driver_version(Some("d".into()))
        .uuid(Some("u".into()))
        .pci_bus_id(Some("b".into()))
        .vendor(Some(GpuVendor::Amd))
        .source(GpuQuerySource::Drm)
        .gtt_total_bytes(Some(6))
        .gtt_used_bytes(Some(7))
        .visible_vram_total_bytes(Some(8))
        .visible_vram_used_bytes(Some(9))
        .mig_enabled(Some(true))
        .memory_model(Some(MemoryModel::Unified))
        .memory_model_evidence(Some("e".into()))
        .numa_node(Some(1))
        .numa_node_total_bytes(Some(10))
        .numa_node_used_bytes(Some(11))
        .build();
    assert_eq!(
        d,
        GpuDeviceInfo {
            index: 1,
            name: Some("n".into()),
            total_bytes: 2,
            free_bytes: 3,
            used_bytes: 4,
            reserved_bytes: Some(5),
            driver_version: Some("d".into()),
            uuid: Some("u".into()),
            pci_bus_id: Some("b".into()),
            vendor: Some(GpuVendor::Amd),
            source: GpuQuerySource::Drm,
            gtt_total_bytes: Some(6),
            gtt_used_bytes: Some(7),
            visible_vram_total_bytes: Some(8),
            visible_vram_used_bytes: Some(9),
            mig_enabled: Some(true),
            memory_model: Some(MemoryModel::Unified),
            memory_model_evidence: Some("e".into()),
            numa_node: Some(1),
            numa_node_total_bytes: Some(10),
            numa_node_used_bytes: Some(11),
        }
    );
    let e = GpuProcessEntry::builder()
        .pid(7)
        .name(Some("python".into()))
        .used_bytes(9)
        .source(GpuQuerySource::Pdh)
        .device_index(1)
        .shared_used_bytes(3)
        .context(Some(GpuContextKind::Graphics))
        .host_pid(Some(70))
        .outside_pid_namespace(true)
        .unreadable(Some(UnreadableReason::OutsidePidNamespace))
        .gpu_instance_id(Some(2))
        .compute_instance_id(Some(4))
        .mps_server(true)
        .build();
    assert_eq!(
        e,
        GpuProcessEntry {
            pid: 7,
            name: Some("python".into()),
            used_bytes: 9,
            source: GpuQuerySource::Pdh,
            device_index: 1,
            shared_used_bytes: 3,
            context: Some(GpuContextKind::Graphics),
            host_pid: Some(70),
            outside_pid_namespace: true,
            unreadable: Some(UnreadableReason::OutsidePidNamespace),
            gpu_instance_id: Some(2),
            compute_instance_id: Some(4),
            mps_server: true,
        }
    );
    let m = MigInstance::builder()
        .parent_index(1)
        .slot(2)
        .uuid(Some("MIG-u".into()))
        .name(Some("n".into()))
        .profile(Some("1g.18gb".into()))
        .gpu_instance_id(Some(3))
        .compute_instance_id(Some(4))
        .total_bytes(Some(5))
        .free_bytes(Some(6))
        .used_bytes(Some(7))
        .reserved_bytes(Some(8))
        .memory_error(Some(crate::error::Failure::new(
            crate::error::ErrorKind::Other,
            "e",
        )))
        .source(GpuQuerySource::NvidiaSmi)
        .build();
    assert_eq!(
        m,
        MigInstance {
            parent_index: 1,
            slot: 2,
            uuid: Some("MIG-u".into()),
            name: Some("n".into()),
            profile: Some("1g.18gb".into()),
            gpu_instance_id: Some(3),
            compute_instance_id: Some(4),
            total_bytes: Some(5),
            free_bytes: Some(6),
            used_bytes: Some(7),
            reserved_bytes: Some(8),
            memory_error: Some(crate::error::Failure::new(
                crate::error::ErrorKind::Other,
                "e"
            )),
            source: GpuQuerySource::NvidiaSmi,
        }
    );
    let st = MigState::builder()
        .index(1)
        .name(Some("n".into()))
        .uuid(Some("u".into()))
        .enabled(Some(true))
        .pending(Some(false))
        .instances(vec![m.clone()])
        .device_memory_error(Some(crate::error::Failure::new(
            crate::error::ErrorKind::Other,
            "e",
        )))
        .source(GpuQuerySource::NvidiaSmi)
        .build();
    assert_eq!(
        st,
        MigState {
            index: 1,
            name: Some("n".into()),
            uuid: Some("u".into()),
            enabled: Some(true),
            pending: Some(false),
            instances: vec![m],
            device_memory_error: Some(crate::error::Failure::new(
                crate::error::ErrorKind::Other,
                "e"
            )),
            source: GpuQuerySource::NvidiaSmi,
        }
    );
    let g = MigGpuInstance::builder()
        .parent_index(1)
        .gpu_instance_id(Some(2))
        .profile(Some("3g.71gb".into()))
        .slots(vec![3])
        .compute_instance_ids(vec![4])
        .total_bytes(Some(5))
        .free_bytes(Some(6))
        .used_bytes(Some(7))
        .reserved_bytes(Some(8))
        .build();
    assert_eq!(
        g,
        MigGpuInstance {
            parent_index: 1,
            gpu_instance_id: Some(2),
            profile: Some("3g.71gb".into()),
            slots: vec![3],
            compute_instance_ids: vec![4],
            total_bytes: Some(5),
            free_bytes: Some(6),
            used_bytes: Some(7),
            reserved_bytes: Some(8),
        }
    );
    let r = SourceReport::builder()
        .source(GpuQuerySource::Metal)
        .state(SourceState::failed(crate::error::ErrorKind::Other, "x"))
        .details(vec![("k".into(), "v".into())])
        .build();
    assert_eq!(
        r,
        SourceReport {
            source: GpuQuerySource::Metal,
            state: SourceState::failed(crate::error::ErrorKind::Other, "x"),
            details: vec![("k".into(), "v".into())],
            dropped_process_rows: 0,
        }
    );
    let root = Root::builder()
        .path("/host/proc".into())
        .origin(RootOrigin::Environment)
        .variable("HYPOMNESIS_PROCFS")
        .build();
    assert_eq!(
        root,
        Root {
            path: "/host/proc".into(),
            origin: RootOrigin::Environment,
            variable: "HYPOMNESIS_PROCFS",
        }
    );
    let sys = Root::builder().path("/host/sys".into()).build();
    let roots = Roots::builder()
        .procfs(root.clone())
        .sysfs(sys.clone())
        .build();
    assert_eq!(
        roots,
        Roots {
            procfs: root,
            sysfs: sys,
            rootfs: Root::builder().build(),
        }
    );
    let layout = KubeletLogs::builder()
        .pods_dir("/host/var/log/pods".into())
        .pods(KubeletDirState::Found {
            entries: 3,
            skipped: 1,
            complete: true,
        })
        .build();
    assert_eq!(
        layout,
        KubeletLogs {
            pods_dir: "/host/var/log/pods".into(),
            pods: KubeletDirState::Found {
                entries: 3,
                skipped: 1,
                complete: true,
            },
            containers_dir: std::path::PathBuf::new(),
            containers: KubeletDirState::Missing,
        }
    );
    // `Snapshot` is defined with what builds it (`crate::snapshot`), its builder too.
    let s = crate::snapshot::Snapshot::builder()
        .ram_bytes(1)
        .gpu(Some(p))
        .gpu_device(Some(d.clone()))
        .build();
    assert_eq!(
        s,
        crate::snapshot::Snapshot {
            ram_bytes: 1,
            gpu: Some(p),
            gpu_device: Some(d)
        }
    );
    // Defaults: zero, `None`, `false`, `Nvml`.
    assert_eq!(
        GpuDeviceInfo::builder().build(),
        GpuDeviceInfo::blank(GpuQuerySource::Nvml)
    );
    assert_eq!(
        GpuProcessEntry::builder().build(),
        GpuProcessEntry::blank(GpuQuerySource::Nvml)
    );
}

#[cfg(feature = "test-helpers")]
#[test]
fn allocated_leaves_the_reservation_out_and_unattributed_the_listed_rows() {
    const MIB: u64 = 1 << 20;
    let device = |total: u64, reserved: Option<u64>, free: u64| {
        GpuDeviceInfo::builder()
            .index(1)
            .total_bytes(total * MIB)
            .free_bytes(free * MIB)
            .used_bytes((total - free) * MIB)
            .reserved_bytes(reserved.map(|r| r * MIB))
            .build()
    };
    // nvidia-smi on an idle H200: Total 143771, Reserved 616, Used 0.
    let idle = device(143_771, Some(616), 143_155);
    assert_eq!(idle.allocated_bytes(), Some(0));
    assert_eq!(idle.used_bytes, 616 * MIB, "used keeps the reservation");
    let busy = device(143_771, Some(616), 100_000);
    assert_eq!(busy.allocated_bytes(), Some(43_155 * MIB));
    // Whole-MiB rounding may make the parts exceed the total by a MiB or two…
    assert_eq!(device(1000, Some(11), 991).allocated_bytes(), Some(0));
    assert_eq!(device(1000, Some(12), 990).allocated_bytes(), Some(0));
    // …but not by more: then the figures are not believed.
    assert_eq!(device(1000, Some(13), 990).allocated_bytes(), None);
    assert_eq!(device(1000, None, 400).allocated_bytes(), None);
    assert_eq!(device(1000, None, 400).unattributed_bytes(&[]), None);

    let row = |device: u32, mib: u64| {
        GpuProcessEntry::builder()
            .pid(100 + device)
            .device_index(device)
            .used_bytes(mib * MIB)
            .build()
    };
    let rows = [row(1, 40_000), row(0, 90_000), row(1, 3_000)];
    assert_eq!(busy.unattributed_bytes(&rows), Some(155 * MIB));
    assert_eq!(busy.unattributed_bytes(&[]), Some(43_155 * MIB));
    assert_eq!(
        busy.unattributed_bytes(&[row(1, 50_000)]),
        Some(0),
        "rows above the allocated figure leave nothing unattributed"
    );
    assert_eq!(driver_overhead_allowance(0), 64 * MIB);
    assert_eq!(driver_overhead_allowance(3), 88 * MIB);
    // 155 MiB beyond two rows of this device: above their 80 MiB allowance, so unaccounted;
    // 40 MiB beyond one row is within its 72 MiB.
    assert_eq!(busy.unaccounted_bytes(&rows), Some(155 * MIB));
    assert_eq!(
        busy.unaccounted_bytes(&[row(1, 43_115), row(0, 9)]),
        Some(0)
    );
    assert_eq!(device(1000, None, 400).unaccounted_bytes(&[]), None);
    assert_eq!(driver_overhead_allowance(usize::MAX), u64::MAX);
}

#[test]
fn a_rows_files_are_read_under_its_host_pid_unless_it_cannot_be_read_here() {
    let row = |host: Option<u32>, outside: bool, why: Option<UnreadableReason>| {
        let mut r = GpuProcessEntry::blank(GpuQuerySource::Nvml);
        (r.pid, r.host_pid, r.outside_pid_namespace, r.unreadable) = (7, host, outside, why);
        r
    };
    assert_eq!(row(None, false, None).readable_pid(), Some(7));
    assert_eq!(row(Some(4007), false, None).readable_pid(), Some(4007));
    assert_eq!(row(None, true, None).readable_pid(), None);
    for why in [
        UnreadableReason::OutsidePidNamespace,
        UnreadableReason::HiddenByHidepid,
        UnreadableReason::Exited,
    ] {
        assert_eq!(row(None, false, Some(why)).readable_pid(), None, "{why:?}");
    }
    // Refused for another reason (permission): its files are still tried.
    assert_eq!(
        row(None, false, Some(UnreadableReason::NotReadable)).readable_pid(),
        Some(7)
    );
}
