//! Device ids as a kubelet device plugin reports them, read into what they name.
//!
//! The NVIDIA device plugin names a whole GPU by its UUID (`GPU-` and a UUID), a MIG instance by
//! its UUID (`MIG-` and a UUID; older drivers: `MIG-GPU-<uuid>/<gi>/<ci>`), and under
//! `deviceIDStrategy=index` by its index (`0`; a MIG instance `<gpu>:<mig>`). With time-slicing
//! each GPU is offered several times, the replicas named by the id and a suffix: `::N`, or
//! `-N` after a UUID. The suffix is taken off and its number kept. An id of no such form is
//! kept whole as [`DeviceRef::Other`], never dropped.

/// What a device id names, its replica suffix taken off.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceRef {
    /// A whole GPU, by its UUID (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as written).
    Gpu {
        /// The GPU's UUID, `GPU-` included.
        uuid: String,
    },
    /// A MIG instance, by its UUID (`MIG-` and a UUID, or `MIG-GPU-<uuid>/<gi>/<ci>`).
    Mig {
        /// The instance's UUID, `MIG-` included.
        uuid: String,
    },
    /// A whole GPU by its index (`deviceIDStrategy=index`).
    Index(u32),
    /// A MIG instance by the index of its GPU and its own (`deviceIDStrategy=index`: `0:1`).
    MigIndex {
        /// The index of the GPU the instance is on.
        gpu: u32,
        /// The instance's index on that GPU.
        mig: u32,
    },
    /// An id of none of the forms above, kept as the plugin wrote it (suffix included).
    Other(String),
    /// A device allocated by dynamic resource allocation (a claim's), as the kubelet names it:
    /// the driver, its pool and the device's name there, and the CDI devices
    /// (`kind=name`) that give a container access to it. Which GPU it is takes the node's CDI
    /// specs; until read, it is placed on no GPU.
    Dra {
        /// The DRA driver (`gpu.nvidia.com`).
        driver: String,
        /// Its pool (the NVIDIA driver names it after the node).
        pool: String,
        /// The device's name in the pool (`gpu-0`, `gpu-0-mig-…`).
        device: String,
        /// The fully qualified CDI device names (`k8s.gpu.nvidia.com/claim=<uid>-gpu-0`).
        cdi: Vec<String>,
        /// The share of the device a consumable-capacity claim holds, when it holds one.
        share: Option<String>,
    },
}

/// A device id read: what it names and the replica number its suffix carried, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceId {
    /// What the id names.
    pub device: DeviceRef,
    /// The time-slicing replica (`::N` or `-N`), `None` for an id without the suffix.
    pub replica: Option<u32>,
}

/// Reads one device id (see the module's documentation for the forms).
pub fn parse(id: &str) -> DeviceId {
    if let Some(device) = plain(id) {
        return DeviceId {
            device,
            replica: None,
        };
    }
    // `<id>::N`, whatever the id's form.
    if let Some((base, n)) = id.rsplit_once("::")
        && let (Some(device), Some(replica)) = (plain(base), replica(n))
    {
        return DeviceId {
            device,
            replica: Some(replica),
        };
    }
    // `<uuid>-N`: only after a complete UUID, whose own last group is 12 hexadecimal digits.
    if let Some((base, n)) = id.rsplit_once('-')
        && let Some(replica) = replica(n)
        && let Some(device @ (DeviceRef::Gpu { .. } | DeviceRef::Mig { .. })) = plain(base)
    {
        return DeviceId {
            device,
            replica: Some(replica),
        };
    }
    DeviceId {
        device: DeviceRef::Other(id.to_owned()),
        replica: None,
    }
}

/// An id without a replica suffix, if it is of a known form.
fn plain(id: &str) -> Option<DeviceRef> {
    if let Some(rest) = id.strip_prefix("GPU-") {
        return is_uuid(rest).then(|| DeviceRef::Gpu {
            uuid: id.to_owned(),
        });
    }
    if let Some(rest) = id.strip_prefix("MIG-") {
        return (is_uuid(rest) || is_legacy_mig(rest)).then(|| DeviceRef::Mig {
            uuid: id.to_owned(),
        });
    }
    if let Some((gpu, mig)) = id.split_once(':') {
        return Some(DeviceRef::MigIndex {
            gpu: index(gpu)?,
            mig: index(mig)?,
        });
    }
    index(id).map(DeviceRef::Index)
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hexadecimal digits of either case.
pub fn is_uuid(s: &str) -> bool {
    let mut groups = s.split('-');
    [8, 4, 4, 4, 12].into_iter().all(|len| {
        groups
            .next()
            .is_some_and(|g| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
    }) && groups.next().is_none()
}

/// The UUID of the GPU a MIG instance of the older form is on: `GPU-<uuid>` out of
/// `GPU-<uuid>/<gi>/<ci>` (the part after `MIG-`).
pub fn legacy_mig_parent(rest: &str) -> Option<&str> {
    let mut parts = rest.split('/');
    let gpu = parts.next()?;
    let gi = parts.next()?;
    let ci = parts.next()?;
    let whole = gpu.strip_prefix("GPU-").is_some_and(is_uuid)
        && index(gi).is_some()
        && index(ci).is_some()
        && parts.next().is_none();
    whole.then_some(gpu)
}

fn is_legacy_mig(rest: &str) -> bool {
    legacy_mig_parent(rest).is_some()
}

/// A decimal index: digits alone, no sign, fitting in a `u32`.
fn index(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A replica number: an index of at most 6 digits (a GPU is not shared a million ways; a
/// longer number is more likely part of something else).
fn replica(s: &str) -> Option<u32> {
    if s.len() > 6 {
        return None;
    }
    index(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GPU: &str = "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912";
    const MIG: &str = "MIG-0b7e2f4c-1a2b-5c3d-8e9f-001122334455";

    fn gpu(uuid: &str, replica: Option<u32>) -> DeviceId {
        DeviceId {
            device: DeviceRef::Gpu {
                uuid: uuid.to_owned(),
            },
            replica,
        }
    }

    fn other(id: &str) -> DeviceId {
        DeviceId {
            device: DeviceRef::Other(id.to_owned()),
            replica: None,
        }
    }

    #[test]
    fn uuids_are_gpus_and_mig_instances() {
        assert_eq!(parse(GPU), gpu(GPU, None));
        let upper = GPU.to_uppercase();
        assert_eq!(parse(&upper), gpu(&upper, None));
        assert_eq!(
            parse(MIG).device,
            DeviceRef::Mig {
                uuid: MIG.to_owned()
            }
        );
        let legacy = format!("MIG-{GPU}/3/0");
        assert_eq!(
            parse(&legacy).device,
            DeviceRef::Mig {
                uuid: legacy.clone()
            }
        );
        assert_eq!(legacy_mig_parent(&legacy["MIG-".len()..]), Some(GPU));
    }

    #[test]
    fn replica_suffixes_are_taken_off_and_kept() {
        assert_eq!(parse(&format!("{GPU}::1")), gpu(GPU, Some(1)));
        assert_eq!(parse(&format!("{GPU}-2")), gpu(GPU, Some(2)));
        assert_eq!(parse(&format!("{GPU}::0")), gpu(GPU, Some(0)));
        assert_eq!(
            parse(&format!("{MIG}::3")),
            DeviceId {
                device: DeviceRef::Mig {
                    uuid: MIG.to_owned()
                },
                replica: Some(3)
            }
        );
        assert_eq!(parse(&format!("{MIG}-4")).replica, Some(4));
        assert_eq!(
            parse("1::5"),
            DeviceId {
                device: DeviceRef::Index(1),
                replica: Some(5)
            }
        );
        assert_eq!(
            parse("0:2::1"),
            DeviceId {
                device: DeviceRef::MigIndex { gpu: 0, mig: 2 },
                replica: Some(1)
            }
        );
    }

    #[test]
    fn a_uuid_is_not_cut_at_its_own_groups() {
        // Its last group is hex digits that may all be decimal: still the UUID, no replica.
        let digits = "GPU-12345678-1234-1234-1234-123456789012";
        assert_eq!(parse(digits), gpu(digits, None));
        // One group short: not a UUID with a replica suffix, not a UUID at all.
        let short = "GPU-12345678-1234-1234-1234";
        assert_eq!(parse(short), other(short));
        let cut = "GPU-12345678-1234-1234-123456789012";
        assert_eq!(parse(cut), other(cut));
    }

    #[test]
    fn indices_are_kept_as_indices() {
        assert_eq!(parse("0").device, DeviceRef::Index(0));
        assert_eq!(parse("13").device, DeviceRef::Index(13));
        assert_eq!(parse("1:0").device, DeviceRef::MigIndex { gpu: 1, mig: 0 });
    }

    #[test]
    fn anything_else_is_kept_whole() {
        for id in [
            "",
            "-1",
            "+1",
            "0x1",
            "4294967296",
            "1-2",
            "GPU-",
            "GPU-1",
            "gpu-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f8091g",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912-",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912-x",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912-1234567",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912::",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912:1",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912::1::2",
            "GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912-1::2",
            "MIG-GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912/1",
            "MIG-GPU-2d1e6b4a-7f3c-4e21-9a0b-c5d6e7f80912/1/2/3",
            "0::1::2",
            "0:",
            ":0",
            "0:1:2",
            " 0",
            "fpga0",
        ] {
            assert_eq!(parse(id), other(id), "{id:?}");
        }
        assert_eq!(legacy_mig_parent(&GPU["GPU-".len()..]), None);
    }

    fn uuid_strategy() -> impl Strategy<Value = String> {
        "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    }

    proptest! {
        #[test]
        fn any_uuid_with_any_suffix_reads_back(
            uuid in uuid_strategy(),
            mig in any::<bool>(),
            suffix in prop_oneof![Just(None), (0u32..1_000_000, any::<bool>()).prop_map(Some)],
        ) {
            let whole = format!("{}{uuid}", if mig { "MIG-" } else { "GPU-" });
            let id = match suffix {
                None => whole.clone(),
                Some((n, true)) => format!("{whole}::{n}"),
                Some((n, false)) => format!("{whole}-{n}"),
            };
            let device = if mig {
                DeviceRef::Mig { uuid: whole }
            } else {
                DeviceRef::Gpu { uuid: whole }
            };
            prop_assert_eq!(parse(&id), DeviceId { device, replica: suffix.map(|(n, _)| n) });
        }

        #[test]
        fn indices_read_back(gpu in any::<u32>(), mig in any::<u32>(), n in 0u32..1_000_000) {
            prop_assert_eq!(parse(&gpu.to_string()).device, DeviceRef::Index(gpu));
            prop_assert_eq!(parse(&format!("{gpu}::{n}")).replica, Some(n));
            prop_assert_eq!(
                parse(&format!("{gpu}:{mig}")).device,
                DeviceRef::MigIndex { gpu, mig }
            );
        }

        #[test]
        fn any_id_reads_without_loss(id in "\\PC{0,60}") {
            // Whatever comes in is either understood or kept as it came.
            let read = parse(&id);
            if let DeviceRef::Other(kept) = &read.device {
                prop_assert_eq!(kept, &id);
                prop_assert_eq!(read.replica, None);
            }
        }
    }
}
