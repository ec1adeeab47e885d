//! Pure parsers and rules of the Windows backends (DXGI, PDH, process names), compiled and
//! tested on every OS.
#![cfg_attr(not(all(windows, feature = "dxgi")), allow(dead_code))]

use std::collections::BTreeMap;

use super::pci::PciAddress;
use crate::error::clip;

/// A PDH "GPU Process Memory" / "GPU Adapter Memory" instance name, e.g.
/// `pid_1234_luid_0x00000000_0x0000D1C2_phys_0` (process) or
/// `luid_0x00000000_0x0000D1C2_phys_0` (adapter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdhInstance {
    /// The process, for process counters.
    pub pid: Option<u32>,
    /// High part of the adapter LUID.
    pub luid_high: u32,
    /// Low part of the adapter LUID.
    pub luid_low: u32,
    /// Physical adapter index within a linked adapter.
    pub phys: u32,
}

fn hex_u32(s: &str) -> Option<u32> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// Parse an instance name; the error says what was wrong.
pub fn parse_pdh_instance(name: &str) -> Result<PdhInstance, String> {
    let bad = |why: &str| format!("PDH instance {:?}: {why}", clip(name));
    let lower = name.trim().to_ascii_lowercase();
    let mut parts = lower.split('_');
    let mut pid = None;
    let mut tag = parts.next().ok_or_else(|| bad("empty"))?;
    if tag == "pid" {
        let p = parts.next().ok_or_else(|| bad("no pid"))?;
        pid = Some(p.parse::<u32>().map_err(|_| bad("pid is not a number"))?);
        tag = parts.next().ok_or_else(|| bad("no luid"))?;
    }
    if tag != "luid" {
        return Err(bad("expected pid_<n>_luid_… or luid_…"));
    }
    let high = parts
        .next()
        .and_then(hex_u32)
        .ok_or_else(|| bad("bad LUID high part"))?;
    let low = parts
        .next()
        .and_then(hex_u32)
        .ok_or_else(|| bad("bad LUID low part"))?;
    if parts.next() != Some("phys") {
        return Err(bad("no phys part"));
    }
    let phys = parts
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .ok_or_else(|| bad("bad phys index"))?;
    // Some Windows builds append `_eng_<n>_engtype_…` for engine counters; memory counters
    // have nothing more.
    if parts.next().is_some() {
        return Err(bad("unexpected trailing parts"));
    }
    Ok(PdhInstance {
        pid,
        luid_high: high,
        luid_low: low,
        phys,
    })
}

/// Per-pid sums of PDH process-memory rows that belong to the adapter `luid` (all of its
/// physical parts). Rows whose name does not parse are counted in the second value.
pub fn sum_by_pid<'a>(
    rows: impl IntoIterator<Item = (&'a str, u64)>,
    luid: (u32, u32),
) -> (BTreeMap<u32, u64>, usize) {
    let mut out: BTreeMap<u32, u64> = BTreeMap::new();
    let mut unparsed = 0;
    for (name, value) in rows {
        match parse_pdh_instance(name) {
            Ok(PdhInstance {
                pid: Some(pid),
                luid_high,
                luid_low,
                ..
            }) if (luid_high, luid_low) == luid => {
                let e = out.entry(pid).or_insert(0);
                *e = e.saturating_add(value);
            }
            Ok(_) => {}
            Err(_) => unparsed += 1,
        }
    }
    (out, unparsed)
}

/// The adapter-wide sum (all physical parts) of PDH adapter-memory rows for `luid`.
pub fn adapter_sum<'a>(
    rows: impl IntoIterator<Item = (&'a str, u64)>,
    luid: (u32, u32),
) -> Option<u64> {
    let mut found = None;
    for (name, value) in rows {
        if let Ok(PdhInstance {
            pid: None,
            luid_high,
            luid_low,
            ..
        }) = parse_pdh_instance(name)
            && (luid_high, luid_low) == luid
        {
            found = Some(found.unwrap_or(0_u64).saturating_add(value));
        }
    }
    found
}

/// A UTF-16 buffer up to its first NUL (all of it when there is none), lossily decoded.
#[must_use]
pub fn utf16_until_nul(buf: &[u16]) -> String {
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    String::from_utf16_lossy(buf.get(..end).unwrap_or_default())
}

/// The name of a PDH status code, with what it means, for error messages.
pub fn pdh_status(code: u32) -> String {
    let (name, meaning) = match code {
        0xC000_0BB8 => (
            "PDH_CSTATUS_NO_OBJECT",
            "this system has no such counter object (no GPU performance counters)",
        ),
        0xC000_0BB9 => (
            "PDH_CSTATUS_NO_COUNTER",
            "this system has no such counter (no GPU performance counters)",
        ),
        0xC000_0BBA => (
            "PDH_CSTATUS_INVALID_DATA",
            "the counter returned invalid data",
        ),
        0xC000_0BBB => ("PDH_MEMORY_ALLOCATION_FAILURE", "out of memory"),
        0xC000_0BBC => ("PDH_INVALID_HANDLE", "invalid handle"),
        0xC000_0BBD => ("PDH_INVALID_ARGUMENT", "invalid argument"),
        0xC000_0BBF => ("PDH_CSTATUS_NO_COUNTERNAME", "empty counter name"),
        0xC000_0BC0 => ("PDH_CSTATUS_BAD_COUNTERNAME", "malformed counter name"),
        0xC000_0BC6 => ("PDH_INVALID_DATA", "invalid data"),
        0xC000_0BDB => ("PDH_ACCESS_DENIED", "access denied"),
        0x8000_07D0 => ("PDH_CSTATUS_NO_MACHINE", "the computer is unreachable"),
        0x8000_07D1 => ("PDH_CSTATUS_NO_INSTANCE", "no such instance"),
        0x8000_07D5 => ("PDH_NO_DATA", "no data yet"),
        _ => return format!("PDH status 0x{code:08X}"),
    };
    format!("{name} (0x{code:08X}): {meaning}")
}

/// The kind of failure a PDH status code is, decided by the code (where it is read).
pub fn pdh_kind(code: u32) -> crate::error::ErrorKind {
    use crate::error::ErrorKind;
    match code {
        // No such counter object or counter: this system has no GPU performance counters.
        0xC000_0BB8 | 0xC000_0BB9 | 0x8000_07D1 => ErrorKind::NotSupported,
        0xC000_0BDB => ErrorKind::NoPermission,
        0xC000_0BBA | 0xC000_0BC6 => ErrorKind::BadAnswer,
        _ => ErrorKind::Other,
    }
}

/// The kind of failure an `HRESULT` of DXGI or COM is, decided by the code.
pub fn hresult_kind(code: i32) -> crate::error::ErrorKind {
    use crate::error::ErrorKind;
    // The HRESULT bit patterns, as unsigned words.
    match code.cast_unsigned() {
        // E_ACCESSDENIED
        0x8007_0005 => ErrorKind::NoPermission,
        // DXGI_ERROR_UNSUPPORTED, E_NOINTERFACE, E_NOTIMPL
        0x887A_0004 | 0x8000_4002 | 0x8000_4001 => ErrorKind::NotSupported,
        // DXGI_ERROR_NOT_FOUND
        0x887A_0002 => ErrorKind::NoSuchDevice,
        // DXGI_ERROR_DEVICE_REMOVED, DXGI_ERROR_DEVICE_RESET
        0x887A_0005 | 0x887A_0007 => ErrorKind::GpuLost,
        _ => ErrorKind::Other,
    }
}

/// What an adapter is to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    /// An NVIDIA GPU with its own memory.
    Nvidia,
    /// Another vendor's hardware adapter.
    Other,
    /// Microsoft's Basic Render Driver, a software adapter, or one without memory.
    Skip,
}

/// `DXGI_ADAPTER_FLAG_SOFTWARE`.
pub const ADAPTER_FLAG_SOFTWARE: u32 = 2;

/// Classify an adapter from its DXGI description.
pub fn classify_adapter(vendor_id: u32, dedicated: u64, flags: u32) -> AdapterKind {
    if vendor_id == 0x1414 || flags & ADAPTER_FLAG_SOFTWARE != 0 {
        AdapterKind::Skip
    } else if vendor_id == 0x10DE {
        if dedicated > 0 {
            AdapterKind::Nvidia
        } else {
            AdapterKind::Skip
        }
    } else {
        AdapterKind::Other
    }
}

/// The order of the NVIDIA adapters that matches NVML's: adapter positions sorted by where
/// their PCI address appears among NVML's bus ids; adapters whose address is unknown or not
/// among NVML's keep their enumeration order, after the matched ones.
pub fn order_by_nvml(addresses: &[Option<PciAddress>], nvml: &[PciAddress]) -> Vec<usize> {
    let mut keyed: Vec<(usize, usize)> = addresses
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let rank = a
                .and_then(|a| nvml.iter().position(|n| *n == a))
                .unwrap_or(usize::MAX);
            (rank, i)
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// How a process's image name lookup went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameLookup {
    /// The full image path.
    Found(String),
    /// The process no longer exists.
    Gone,
    /// It exists but cannot be opened (another user, a protected process).
    Denied,
}

/// The name shown for `pid`: `[kernel]` for the System process (pid 4), `[exited]` for one that
/// vanished, the image's file name, else the snapshot's name, else `None`.
pub fn display_name(pid: u32, lookup: NameLookup, from_snapshot: Option<&str>) -> Option<String> {
    if pid == 4 {
        return Some("[kernel]".into());
    }
    match lookup {
        NameLookup::Found(path) => Some(basename(&path).to_string()).filter(|s| !s.is_empty()),
        NameLookup::Gone => Some("[exited]".into()),
        NameLookup::Denied => from_snapshot
            .map(|s| basename(s).to_string())
            .filter(|s| !s.is_empty()),
    }
}

/// The last component of a Windows or POSIX path.
pub fn basename(path: &str) -> &str {
    path.trim().rsplit(['\\', '/']).next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances() {
        assert_eq!(
            parse_pdh_instance("pid_12444_luid_0x00000000_0x0000D1C2_phys_0"),
            Ok(PdhInstance {
                pid: Some(12444),
                luid_high: 0,
                luid_low: 0xD1C2,
                phys: 0
            })
        );
        assert_eq!(
            parse_pdh_instance("luid_0x00000001_0x0001A2B3_phys_1"),
            Ok(PdhInstance {
                pid: None,
                luid_high: 1,
                luid_low: 0x1A2B3,
                phys: 1
            })
        );
        for bad in [
            "",
            "pid_x_luid_0x0_0x1_phys_0",
            "pid_1_luid_0x0_phys_0",
            "pid_1_luid_0x0_0xZZ_phys_0",
            "pid_1_luid_0x0_0x1",
            "pid_1_luid_0x0_0x1_phys_",
            "pid_1_luid_0x123456789_0x1_phys_0",
            "pid_1_luid_0x0_0x1_phys_0_eng_3_engtype_3D",
            "_Total",
        ] {
            let e = parse_pdh_instance(bad).unwrap_err();
            assert!(e.starts_with("PDH instance"), "{bad}: {e}");
        }
    }

    #[test]
    fn sums_filter_by_luid_and_add_phys_parts() {
        let rows = [
            ("pid_10_luid_0x00000000_0x0000D1C2_phys_0", 100),
            ("pid_10_luid_0x00000000_0x0000D1C2_phys_1", 50),
            ("pid_11_luid_0x00000000_0x0000D1C2_phys_0", 7),
            ("pid_10_luid_0x00000000_0x0000AAAA_phys_0", 999),
            ("garbage", 1),
        ];
        let (sums, unparsed) = sum_by_pid(rows, (0, 0xD1C2));
        assert_eq!(
            sums.into_iter().collect::<Vec<_>>(),
            vec![(10, 150), (11, 7)]
        );
        assert_eq!(unparsed, 1);
        let adapters = [
            ("luid_0x00000000_0x0000D1C2_phys_0", 1000),
            ("luid_0x00000000_0x0000D1C2_phys_1", 24),
            ("luid_0x00000000_0x0000AAAA_phys_0", 5),
        ];
        assert_eq!(adapter_sum(adapters, (0, 0xD1C2)), Some(1024));
        assert_eq!(adapter_sum(adapters, (0, 0xBBBB)), None);
    }

    #[test]
    fn strings() {
        let w: Vec<u16> = "NVIDIA GeForce RTX 2080 SUPER\0junk"
            .encode_utf16()
            .collect();
        assert_eq!(utf16_until_nul(&w), "NVIDIA GeForce RTX 2080 SUPER");
        let no_nul: Vec<u16> = "abc".encode_utf16().collect();
        assert_eq!(utf16_until_nul(&no_nul), "abc");
        assert_eq!(utf16_until_nul(&[0xD800, 0]), "\u{FFFD}");
    }

    #[test]
    fn adapters_and_order() {
        assert_eq!(classify_adapter(0x10DE, 8 << 30, 0), AdapterKind::Nvidia);
        assert_eq!(classify_adapter(0x10DE, 0, 0), AdapterKind::Skip);
        assert_eq!(classify_adapter(0x1414, 0, 2), AdapterKind::Skip);
        assert_eq!(classify_adapter(0x1002, 16 << 30, 0), AdapterKind::Other);
        assert_eq!(classify_adapter(0x8086, 0, 0), AdapterKind::Other);
        assert_eq!(classify_adapter(0x8086, 0, 2), AdapterKind::Skip);
        let at = |s: &str| PciAddress::parse(s);
        let nvml: Vec<PciAddress> = ["00000000:01:00.0", "00000000:41:00.0"]
            .iter()
            .filter_map(|s| at(s))
            .collect();
        // DXGI enumerated the display GPU (bus 0x41) first; D3DKMT gives no domain.
        assert_eq!(
            order_by_nvml(&[at("41:00.0"), at("01:00.0")], &nvml),
            vec![1, 0]
        );
        assert_eq!(
            order_by_nvml(&[None, at("41:00.0"), None], &nvml),
            vec![1, 0, 2]
        );
        assert_eq!(order_by_nvml(&[], &nvml), Vec::<usize>::new());
    }

    #[test]
    fn pdh_statuses() {
        assert_eq!(
            pdh_status(0xC000_0BB9),
            "PDH_CSTATUS_NO_COUNTER (0xC0000BB9): this system has no such counter (no GPU performance counters)"
        );
        assert_eq!(pdh_status(0x1234), "PDH status 0x00001234");
    }

    #[test]
    fn codes_decide_kinds() {
        use crate::error::ErrorKind;
        assert_eq!(pdh_kind(0xC000_0BB8), ErrorKind::NotSupported);
        assert_eq!(pdh_kind(0xC000_0BB9), ErrorKind::NotSupported);
        assert_eq!(pdh_kind(0xC000_0BDB), ErrorKind::NoPermission);
        assert_eq!(pdh_kind(0x1234), ErrorKind::Other);
        let h = |u: u32| hresult_kind(u.cast_signed());
        assert_eq!(h(0x8007_0005), ErrorKind::NoPermission);
        assert_eq!(h(0x887A_0004), ErrorKind::NotSupported);
        assert_eq!(h(0x8000_4002), ErrorKind::NotSupported);
        assert_eq!(h(0x887A_0002), ErrorKind::NoSuchDevice);
        assert_eq!(h(0x887A_0005), ErrorKind::GpuLost);
        assert_eq!(h(0x8000_4005), ErrorKind::Other);
    }

    #[test]
    fn names() {
        assert_eq!(
            display_name(4, NameLookup::Denied, None).as_deref(),
            Some("[kernel]")
        );
        assert_eq!(
            display_name(9, NameLookup::Gone, None).as_deref(),
            Some("[exited]")
        );
        assert_eq!(
            display_name(
                9,
                NameLookup::Found(r"C:\Windows\System32\dwm.exe".into()),
                None
            )
            .as_deref(),
            Some("dwm.exe")
        );
        assert_eq!(
            display_name(9, NameLookup::Denied, Some("csrss.exe")).as_deref(),
            Some("csrss.exe")
        );
        assert_eq!(display_name(9, NameLookup::Denied, None), None);
        assert_eq!(
            basename(r"C:\Program Files\NZXT CAM\NZXT CAM.exe"),
            "NZXT CAM.exe"
        );
    }
}
