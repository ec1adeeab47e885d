//! Windows' C and COM ABIs for the GPU backends: DXGI adapters, `QueryVideoMemoryInfo`, PDH
//! counters, process image names, and the D3DKMT adapter address. The only `unsafe` of the
//! Windows backends lives here.
#![allow(unsafe_code)]

use crate::error::{ErrorKind, Failure};
use crate::gpu::winparse::hresult_kind;
use std::collections::HashMap;

use windows::Wdk::Graphics::Direct3D::{
    D3DKMT_ADAPTERADDRESS, D3DKMT_CLOSEADAPTER, D3DKMT_OPENADAPTERFROMLUID,
    D3DKMT_QUERYADAPTERINFO, D3DKMTCloseAdapter, D3DKMTOpenAdapterFromLuid, D3DKMTQueryAdapterInfo,
    KMTQAITYPE_ADAPTERADDRESS,
};
use windows::Win32::Foundation::{
    CloseHandle, ERROR_INVALID_PARAMETER, GetLastError, HANDLE, LUID,
};
use windows::Win32::Graphics::Dxgi::{
    CreateDXGIFactory1, DXGI_ERROR_NOT_FOUND, DXGI_MEMORY_SEGMENT_GROUP_LOCAL,
    DXGI_QUERY_VIDEO_MEMORY_INFO, IDXGIAdapter1, IDXGIAdapter3, IDXGIFactory1,
};
use windows::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, PROCESSENTRY32W, Process32FirstW, Process32NextW, TH32CS_SNAPPROCESS,
};
use windows::Win32::System::Performance::{
    PDH_FMT_COUNTERVALUE_ITEM_W, PDH_FMT_LARGE, PDH_HCOUNTER, PDH_HQUERY, PDH_MORE_DATA,
    PdhAddEnglishCounterW, PdhCloseQuery, PdhCollectQueryData, PdhGetFormattedCounterArrayW,
    PdhOpenQueryW,
};
use windows::Win32::System::Threading::{
    OpenProcess, PROCESS_NAME_WIN32, PROCESS_QUERY_LIMITED_INFORMATION, QueryFullProcessImageNameW,
};
use windows::core::{HSTRING, Interface, PWSTR};

use crate::gpu::pci::PciAddress;
use crate::gpu::winparse::{NameLookup, utf16_until_nul};

/// One DXGI adapter's description (plain data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdapterDesc {
    /// Position in DXGI's enumeration.
    pub position: u32,
    pub name: String,
    pub vendor_id: u32,
    pub dedicated: u64,
    pub luid: (u32, u32),
    pub flags: u32,
    /// PCI bus, device, function from D3DKMT, when it answers.
    pub address: Option<PciAddress>,
}

fn luid_parts(l: LUID) -> (u32, u32) {
    (l.HighPart.cast_unsigned(), l.LowPart)
}

/// A failed COM or DXGI call as a failure, its kind decided by its `HRESULT`.
fn com_failure(call: &str, e: &windows::core::Error) -> Failure {
    Failure::new(hresult_kind(e.code().0), format!("{call} failed: {e}"))
}

fn factory() -> Result<IDXGIFactory1, Failure> {
    // SAFETY: CreateDXGIFactory1 has no preconditions; the returned COM pointer is reference
    // counted by the `IDXGIFactory1` wrapper.
    unsafe { CreateDXGIFactory1::<IDXGIFactory1>() }
        .map_err(|e| com_failure("CreateDXGIFactory1", &e))
}

/// Walk every adapter. A malformed adapter (its description cannot be read) is skipped with a
/// reason, and the walk continues.
pub(crate) fn adapters() -> Result<(Vec<AdapterDesc>, Vec<String>), Failure> {
    let f = factory()?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for i in 0_u32..64 {
        // SAFETY: EnumAdapters1 takes an index and returns a reference-counted adapter or an error.
        let adapter = match unsafe { f.EnumAdapters1(i) } {
            Ok(a) => a,
            Err(e) if e.code() == DXGI_ERROR_NOT_FOUND => break,
            Err(e) => {
                skipped.push(format!("adapter {i}: EnumAdapters1 failed: {e}"));
                continue;
            }
        };
        // SAFETY: GetDesc1 fills a DXGI_ADAPTER_DESC1 owned by the wrapper's return value.
        match unsafe { adapter.GetDesc1() } {
            Ok(d) => {
                let luid = luid_parts(d.AdapterLuid);
                out.push(AdapterDesc {
                    position: i,
                    name: utf16_until_nul(&d.Description),
                    vendor_id: d.VendorId,
                    dedicated: d.DedicatedVideoMemory as u64,
                    luid,
                    flags: d.Flags,
                    address: adapter_address(d.AdapterLuid),
                });
            }
            Err(e) => skipped.push(format!("adapter {i}: GetDesc1 failed: {e}")),
        }
    }
    Ok((out, skipped))
}

/// The adapter with this LUID, for calls that need the COM object.
fn adapter_by_luid(luid: (u32, u32)) -> Result<IDXGIAdapter1, Failure> {
    let f = factory()?;
    for i in 0_u32..64 {
        // SAFETY: as in `adapters`.
        let adapter = match unsafe { f.EnumAdapters1(i) } {
            Ok(a) => a,
            Err(e) if e.code() == DXGI_ERROR_NOT_FOUND => break,
            Err(_) => continue,
        };
        // SAFETY: as in `adapters`.
        if let Ok(d) = unsafe { adapter.GetDesc1() }
            && luid_parts(d.AdapterLuid) == luid
        {
            return Ok(adapter);
        }
    }
    Err(Failure::new(
        ErrorKind::NoSuchDevice,
        format!(
            "no adapter with LUID 0x{:08X}_0x{:08X} any more",
            luid.0, luid.1
        ),
    ))
}

/// This process's use of the adapter's local (dedicated) segment, bytes.
pub(crate) fn local_usage(luid: (u32, u32)) -> Result<u64, Failure> {
    let adapter = adapter_by_luid(luid)?;
    let a3: IDXGIAdapter3 = adapter.cast().map_err(|e| {
        Failure::new(
            ErrorKind::NotSupported,
            format!("IDXGIAdapter3 is not available (Windows 10 or later is needed): {e}"),
        )
    })?;
    let mut info = DXGI_QUERY_VIDEO_MEMORY_INFO::default();
    // SAFETY: `info` is a writable DXGI_QUERY_VIDEO_MEMORY_INFO for the duration of the call.
    unsafe { a3.QueryVideoMemoryInfo(0, DXGI_MEMORY_SEGMENT_GROUP_LOCAL, &raw mut info) }
        .map_err(|e| com_failure("QueryVideoMemoryInfo", &e))?;
    Ok(info.CurrentUsage)
}

/// The PCI address of an adapter through D3DKMT, `None` when unavailable.
fn adapter_address(luid: LUID) -> Option<PciAddress> {
    let mut open = D3DKMT_OPENADAPTERFROMLUID {
        AdapterLuid: luid,
        hAdapter: 0,
    };
    // SAFETY: `open` is a valid, writable D3DKMT_OPENADAPTERFROMLUID.
    if unsafe { D3DKMTOpenAdapterFromLuid(&raw mut open) }.is_err() {
        return None;
    }
    let mut address = D3DKMT_ADAPTERADDRESS::default();
    let mut query = D3DKMT_QUERYADAPTERINFO {
        hAdapter: open.hAdapter,
        Type: KMTQAITYPE_ADAPTERADDRESS,
        pPrivateDriverData: (&raw mut address).cast(),
        PrivateDriverDataSize: u32::try_from(size_of::<D3DKMT_ADAPTERADDRESS>()).unwrap_or(0),
    };
    // SAFETY: `query` names an open adapter and points at `address`, writable for its size.
    let ok = unsafe { D3DKMTQueryAdapterInfo(&raw mut query) }.is_ok();
    let close = D3DKMT_CLOSEADAPTER {
        hAdapter: open.hAdapter,
    };
    // SAFETY: closes the handle opened above exactly once.
    let _ = unsafe { D3DKMTCloseAdapter(&raw const close) };
    // D3DKMT gives no PCI domain: Windows numbers its devices in domain 0.
    ok.then_some(PciAddress {
        domain: 0,
        bus: address.BusNumber,
        device: address.DeviceNumber,
        function: address.FunctionNumber,
    })
}

/// A PDH query, closed when dropped.
struct Query(PDH_HQUERY);

impl Drop for Query {
    fn drop(&mut self) {
        // SAFETY: the handle came from PdhOpenQueryW and is closed once, here.
        let _ = unsafe { PdhCloseQuery(self.0) };
    }
}

/// A PDH call's status as a failure, its kind decided by the status code.
fn pdh(call: &str, status: u32) -> Result<(), Failure> {
    if status == 0 {
        Ok(())
    } else {
        Err(Failure::new(
            crate::gpu::winparse::pdh_kind(status),
            format!(
                "{call} failed: {}",
                crate::gpu::winparse::pdh_status(status)
            ),
        ))
    }
}

/// Whether PDH knows the English counter path `path` (its counter set is registered on this
/// system): a query can add it. Nothing is collected.
#[cfg(feature = "pdh")]
pub(crate) fn counter_registered(path: &str) -> bool {
    let mut handle = PDH_HQUERY::default();
    // SAFETY: `handle` is writable; a null data source means live data.
    if pdh("PdhOpenQueryW", unsafe {
        PdhOpenQueryW(None, 0, &raw mut handle)
    })
    .is_err()
    {
        return false;
    }
    let query = Query(handle);
    let mut c = PDH_HCOUNTER::default();
    let wide = HSTRING::from(path);
    // SAFETY: the query is open, `wide` outlives the call, `c` is writable.
    pdh("PdhAddEnglishCounterW", unsafe {
        PdhAddEnglishCounterW(query.0, &wide, 0, &raw mut c)
    })
    .is_ok()
}

/// One sample of each English counter path (wildcard instances): per path, the
/// (instance name, value) pairs.
pub(crate) fn sample(paths: &[&str]) -> Result<Vec<Vec<(String, u64)>>, Failure> {
    let mut handle = PDH_HQUERY::default();
    // SAFETY: `handle` is writable; a null data source means live data.
    pdh("PdhOpenQueryW", unsafe {
        PdhOpenQueryW(None, 0, &raw mut handle)
    })?;
    let query = Query(handle);
    let mut counters = Vec::new();
    for p in paths {
        let mut c = PDH_HCOUNTER::default();
        let wide = HSTRING::from(*p);
        // SAFETY: the query is open, `wide` outlives the call, `c` is writable.
        pdh(&format!("PdhAddEnglishCounterW({p})"), unsafe {
            PdhAddEnglishCounterW(query.0, &wide, 0, &raw mut c)
        })?;
        counters.push(c);
    }
    // SAFETY: the query is open and has counters.
    pdh("PdhCollectQueryData", unsafe {
        PdhCollectQueryData(query.0)
    })?;
    counters.into_iter().map(read_array).collect()
}

fn read_array(counter: PDH_HCOUNTER) -> Result<Vec<(String, u64)>, Failure> {
    let mut bytes = 0_u32;
    let mut items = 0_u32;
    // SAFETY: the sizing call writes only the two counts.
    let status = unsafe {
        PdhGetFormattedCounterArrayW(counter, PDH_FMT_LARGE, &raw mut bytes, &raw mut items, None)
    };
    if status != PDH_MORE_DATA {
        pdh("PdhGetFormattedCounterArrayW (sizing)", status)?;
        return Ok(Vec::new());
    }
    // u64 storage keeps the items 8-byte aligned; names are stored after them in the same buffer.
    let mut buf = vec![0_u64; (bytes as usize).div_ceil(8)];
    let ptr = buf.as_mut_ptr().cast::<PDH_FMT_COUNTERVALUE_ITEM_W>();
    // SAFETY: `buf` holds at least `bytes` writable bytes, aligned for the item type.
    pdh("PdhGetFormattedCounterArrayW", unsafe {
        PdhGetFormattedCounterArrayW(
            counter,
            PDH_FMT_LARGE,
            &raw mut bytes,
            &raw mut items,
            Some(ptr),
        )
    })?;
    let fit = buf.len() * 8 / size_of::<PDH_FMT_COUNTERVALUE_ITEM_W>();
    let n = (items as usize).min(fit);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `i < n <= fit`, so the item lies inside `buf`, which PDH filled.
        let item = unsafe { &*ptr.add(i) };
        if item.FmtValue.CStatus > 1 {
            continue; // neither PDH_CSTATUS_VALID_DATA nor PDH_CSTATUS_NEW_DATA
        }
        let name = if item.szName.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null szName points at a NUL-terminated string inside `buf`.
            unsafe { item.szName.to_string() }.unwrap_or_default()
        };
        // SAFETY: with PDH_FMT_LARGE the union holds `largeValue`.
        let value = unsafe { item.FmtValue.Anonymous.largeValue };
        out.push((name, u64::try_from(value).unwrap_or(0)));
    }
    Ok(out)
}

/// Closes a handle when dropped.
struct Handle(HANDLE);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle was returned open by the call that made it and is closed once.
        let _ = unsafe { CloseHandle(self.0) };
    }
}

/// The full image path of `pid`.
pub(crate) fn image_name(pid: u32) -> NameLookup {
    // SAFETY: OpenProcess takes plain values; the handle is closed by `Handle`.
    let opened = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, false, pid) };
    let Ok(h) = opened else {
        // SAFETY: reads this thread's last-error value.
        let code = unsafe { GetLastError() };
        return if code == ERROR_INVALID_PARAMETER {
            NameLookup::Gone
        } else {
            NameLookup::Denied
        };
    };
    let h = Handle(h);
    let mut buf = vec![0_u16; 32_768];
    let mut len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
    // SAFETY: `buf` is writable for `len` UTF-16 units; `len` receives the length written.
    match unsafe {
        QueryFullProcessImageNameW(
            h.0,
            PROCESS_NAME_WIN32,
            PWSTR(buf.as_mut_ptr()),
            &raw mut len,
        )
    } {
        Ok(()) => NameLookup::Found(String::from_utf16_lossy(
            buf.get(..len as usize).unwrap_or_default(),
        )),
        Err(_) => NameLookup::Denied,
    }
}

/// Every process's executable name from one Toolhelp snapshot.
pub(crate) fn snapshot_names() -> Result<HashMap<u32, String>, Failure> {
    // SAFETY: takes plain flags; the snapshot handle is closed by `Handle`.
    let snap = Handle(
        unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) }
            .map_err(|e| com_failure("CreateToolhelp32Snapshot", &e))?,
    );
    let mut names = HashMap::new();
    let mut entry = PROCESSENTRY32W {
        dwSize: u32::try_from(size_of::<PROCESSENTRY32W>()).unwrap_or(0),
        ..Default::default()
    };
    // SAFETY: `entry` is writable and its dwSize is set, as the API requires.
    let mut more = unsafe { Process32FirstW(snap.0, &raw mut entry) }.is_ok();
    while more {
        names.insert(entry.th32ProcessID, utf16_until_nul(&entry.szExeFile));
        // SAFETY: as above.
        more = unsafe { Process32NextW(snap.0, &raw mut entry) }.is_ok();
    }
    Ok(names)
}
