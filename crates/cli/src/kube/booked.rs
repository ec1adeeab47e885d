//! The GPU memory a DRA claim books (consumable capacity, KEP-5075): read on the node, without
//! the API server, from the NVIDIA DRA driver's checkpoint
//! (`<rootfs>/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json`), which keeps each
//! prepared claim's name, namespace and `ResourceClaimStatus` (whose allocation results carry
//! `consumedCapacity`). See `docs/dra.md` for the layout and its sources.
//!
//! Bounded: the file is read up to [`MAX_CHECKPOINT_BYTES`], a regular file only, opened without
//! waiting and kept parsed while unchanged ([`nodefile`]); one that is absent, too large, not a
//! regular file or not understood gives no booking (and why), never a guessed one.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use super::{Claim, nodefile};

/// The checkpoint, under the rootfs.
pub const CHECKPOINT: &str = "var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json";
/// The largest checkpoint read (a node's few hundred prepared claims take well under this).
pub const MAX_CHECKPOINT_BYTES: u64 = 16 << 20;

#[derive(Deserialize)]
struct Checkpoint {
    v2: Option<V2>,
}

#[derive(Deserialize)]
struct V2 {
    #[serde(default, rename = "preparedClaims")]
    prepared: HashMap<String, Prepared>,
}

#[derive(Deserialize)]
struct Prepared {
    #[serde(default, rename = "checkpointState")]
    state: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    status: Status,
}

#[derive(Default, Deserialize)]
struct Status {
    allocation: Option<AllocationResult>,
}

#[derive(Deserialize)]
struct AllocationResult {
    #[serde(default)]
    devices: DeviceResults,
}

#[derive(Default, Deserialize)]
struct DeviceResults {
    #[serde(default)]
    results: Vec<Result_>,
}

#[derive(Deserialize)]
struct Result_ {
    #[serde(default)]
    driver: String,
    #[serde(default)]
    pool: String,
    #[serde(default)]
    device: String,
    #[serde(default, rename = "shareID")]
    share: Option<String>,
    #[serde(default, rename = "consumedCapacity")]
    consumed: BTreeMap<String, String>,
}

/// A device of a claim, as pod-resources names it: driver, pool, device, share.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BookedDevice {
    pub claim: Claim,
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub share: Option<String>,
}

/// The memory each claim's device books, in bytes.
pub type Bookings = BTreeMap<BookedDevice, u64>;

/// The checkpoints read so far, parsed (one per rootfs: the node's).
static CHECKPOINTS: Mutex<nodefile::Cache<Bookings>> = Mutex::new(nodefile::Cache::new());

/// The bookings of the checkpoint under `rootfs`: `Ok` with none where the node has no
/// checkpoint (no NVIDIA DRA driver, or none prepared a claim); `Err` with why when it cannot
/// be read or understood.
pub fn read(rootfs: &Path) -> Result<Arc<Bookings>, String> {
    read_with(rootfs, &CHECKPOINTS)
}

/// [`read`], keeping what the checkpoint gives in `cache`.
pub fn read_with(
    rootfs: &Path,
    cache: &Mutex<nodefile::Cache<Bookings>>,
) -> Result<Arc<Bookings>, String> {
    let path = rootfs.join(CHECKPOINT);
    match nodefile::read(cache, &path, MAX_CHECKPOINT_BYTES, parse) {
        Ok(bookings) => Ok(bookings),
        Err(nodefile::ReadError::Open(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(Arc::default())
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The bookings of a checkpoint's text: the `memory` each prepared claim's allocation results
/// consume. A version-1 checkpoint names no claim, so it gives none.
pub fn parse(text: &str) -> Result<Bookings, String> {
    let c: Checkpoint = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Bookings::new();
    for p in c.v2.map(|v| v.prepared).unwrap_or_default().into_values() {
        if p.state != "PrepareCompleted" || p.name.is_empty() || p.namespace.is_empty() {
            continue;
        }
        let claim = Claim {
            namespace: p.namespace,
            name: p.name,
        };
        for r in p
            .status
            .allocation
            .map(|a| a.devices.results)
            .unwrap_or_default()
        {
            let Some(bytes) = r.consumed.get("memory").and_then(|q| quantity_bytes(q)) else {
                continue;
            };
            out.insert(
                BookedDevice {
                    claim: claim.clone(),
                    driver: r.driver,
                    pool: r.pool,
                    device: r.device,
                    share: r.share,
                },
                bytes,
            );
        }
    }
    Ok(out)
}

/// A Kubernetes quantity (`20Gi`, `512M`, `1.5Gi`, `4e9`, `100`) as a whole number of bytes,
/// rounded up as Kubernetes rounds a quantity's value; `None` for anything else (a negative
/// one, an unknown suffix, one past `u64`).
pub fn quantity_bytes(q: &str) -> Option<u64> {
    let q = q.trim();
    let q = q.strip_prefix('+').unwrap_or(q);
    let end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = (q.get(..end)?, q.get(end..)?);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && frac.is_empty()) || whole.len() + frac.len() > 30 {
        return None;
    }
    let digits = format!("{whole}{frac}");
    let mut num: u128 = digits.parse().ok()?;
    let mut den: u128 = 10_u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let binary = |k: u32| 1024_u128.checked_pow(k);
    let (times, over) = match suffix {
        "" => (1, 1),
        "Ki" => (binary(1)?, 1),
        "Mi" => (binary(2)?, 1),
        "Gi" => (binary(3)?, 1),
        "Ti" => (binary(4)?, 1),
        "Pi" => (binary(5)?, 1),
        "Ei" => (binary(6)?, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        e => {
            let exp: i32 = e.strip_prefix(['e', 'E'])?.parse().ok()?;
            let p = 10_u128.checked_pow(exp.unsigned_abs())?;
            if exp >= 0 { (p, 1) } else { (1, p) }
        }
    };
    num = num.checked_mul(times)?;
    den = den.checked_mul(over)?;
    u64::try_from(num.div_ceil(den)).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn quantities_as_kubernetes_reads_them() {
        for (q, want) in [
            ("20Gi", Some(20 << 30)),
            ("1Mi", Some(1 << 20)),
            ("1.5Gi", Some(3 << 29)),
            ("512M", Some(512_000_000)),
            ("4e9", Some(4_000_000_000)),
            ("4E3", Some(4_000)),
            ("100", Some(100)),
            ("+7k", Some(7_000)),
            ("1500m", Some(2)),
            ("1e-3", Some(1)),
            ("0", Some(0)),
            ("16Ei", None),
            ("-1Gi", None),
            ("1Gb", None),
            ("", None),
            (".", None),
            ("Gi", None),
            ("1.2.3", None),
            ("99999999999999999999999999999999Gi", None),
        ] {
            assert_eq!(quantity_bytes(q), want, "{q:?}");
        }
    }

    /// A checkpoint as the driver writes one (version 2 beside version 1): the completed
    /// claim's memory bookings, a claim still being prepared and a result booking no memory
    /// left out.
    #[test]
    fn a_checkpoints_memory_bookings_are_read() {
        let text = r#"{"checksum": 1, "v1": {"preparedClaims": {}},
          "v2": {"checksum": 2, "nodeBootID": "b", "preparedClaims": {
            "uid-1": {"checkpointState": "PrepareCompleted", "name": "shared", "namespace": "ml",
              "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-1",
                 "shareID": "s-1", "consumedCapacity": {"memory": "20Gi"}},
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-2",
                 "consumedCapacity": {"shares": "1"}}]}}},
              "preparedDevices": [], "future": true},
            "uid-2": {"checkpointState": "PrepareStarted", "name": "later", "namespace": "ml",
              "status": {"allocation": {"devices": {"results": [
                {"driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-3",
                 "consumedCapacity": {"memory": "1Gi"}}]}}}}}}}"#;
        let got = parse(text).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        let (d, bytes) = got.iter().next().unwrap();
        assert_eq!(*bytes, 20 << 30);
        assert_eq!(d.claim.name, "shared");
        assert_eq!(d.device, "gpu-1");
        assert_eq!(d.share.as_deref(), Some("s-1"));
        assert!(parse("{").unwrap_err().contains("EOF"));
        assert!(
            parse(r#"{"v1": {"preparedClaims": {}}}"#)
                .unwrap()
                .is_empty()
        );
    }

    /// No checkpoint: no bookings, and nothing wrong; one not understood, or too large: why,
    /// naming the file.
    #[test]
    fn a_missing_checkpoint_is_none_and_a_bad_one_is_named() {
        let root = std::env::temp_dir().join(format!("hmn-booked-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(read(&root), Ok(Arc::new(Bookings::new())));
        let file = root.join(CHECKPOINT);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "{\"v2\": 7}").unwrap();
        let why = read(&root).unwrap_err();
        assert!(
            why.contains("checkpoint.json") && why.contains("invalid type"),
            "{why}"
        );
        let big = vec![b' '; usize::try_from(MAX_CHECKPOINT_BYTES).unwrap() + 1];
        std::fs::write(&file, big).unwrap();
        assert!(read(&root).unwrap_err().contains("larger than"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
