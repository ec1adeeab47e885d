//! `hypomnesis._native`: the Rust side of the `hypomnesis` Python package.
//!
//! Every function measures with the GIL released and answers plain Python values (dicts, lists,
//! ints, `None` for an unknown figure), made from the library's types through serde (the shapes
//! are in `shapes.rs`); the package's Python modules make them into typed objects. Errors
//! become the exceptions of `hypomnesis.errors`, chosen by the error's [`hypomnesis::ErrorKind`], with the
//! library's message unchanged.

use std::collections::BTreeMap;

use hypomnesis::HypomnesisError;
use hypomnesis::sampling::{Identities, IdentityParts};
use pyo3::prelude::*;
use pythonize::pythonize;
use serde::Serialize;

mod exit;
mod hub;
mod sampler;
mod shapes;
mod timeline;
mod worker;

use exit::outside;
use shapes::{Device, GhostReportView, Mig, MigView, ProcessContext, ProcessRow, SnapshotView};

/// Which part failed (the `HypomnesisError` variant), as `HypomnesisError.source` carries it.
fn variant_name(e: &HypomnesisError) -> &'static str {
    match e {
        HypomnesisError::Ram(_) => "ram",
        HypomnesisError::Nvml(_) => "nvml",
        HypomnesisError::Dxgi(_) => "dxgi",
        HypomnesisError::Pdh(_) => "pdh",
        HypomnesisError::Drm(_) => "drm",
        HypomnesisError::NvidiaSmi(_) => "nvidia-smi",
        HypomnesisError::Metal(_) => "metal",
        HypomnesisError::Unsupported(_) => "unsupported",
        HypomnesisError::DeviceIndexOutOfRange { .. } => "device_index",
        HypomnesisError::NoGpuSource => "no_gpu_source",
        HypomnesisError::ProcessListDenied { .. } => "process_list_denied",
        HypomnesisError::Io(_) => "io",
        _ => "other",
    }
}

/// The Python exception for `kind`, `source` and `message`, made by `hypomnesis.errors`
/// (an exception of that module's own failure when it cannot be imported).
fn py_error(
    py: Python<'_>,
    kind: &str,
    source: &str,
    message: &str,
    index_count: Option<(u32, u32)>,
) -> PyErr {
    let (index, count) = index_count.unzip();
    match py
        .import("hypomnesis.errors")
        .and_then(|m| m.call_method1("_from_native", (kind, source, message, index, count)))
    {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

/// A library error as its Python exception.
pub(crate) fn to_py(py: Python<'_>, e: &HypomnesisError) -> PyErr {
    let index_count = match e {
        HypomnesisError::DeviceIndexOutOfRange { index, count } => Some((*index, *count)),
        _ => None,
    };
    py_error(
        py,
        e.kind().as_str(),
        variant_name(e),
        &e.to_string(),
        index_count,
    )
}

/// A Python device index as the library's; a negative one is no device.
fn index_arg(py: Python<'_>, index: i64) -> PyResult<u32> {
    u32::try_from(index).map_err(|_| {
        py_error(
            py,
            "no_such_device",
            "device_index",
            &format!("GPU index {index} is out of range: indices are 0 to 4294967295"),
            None,
        )
    })
}

/// Runs `f` with the GIL released and makes its error a Python exception.
pub(crate) fn measure<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> hypomnesis::Result<T> + Send,
) -> PyResult<T> {
    outside(py, f).map_err(|e| to_py(py, &e))
}

/// A value as the plain Python value its serde form makes (a dict for a struct, a list, an
/// int, `None`…): the one conversion of every figure the module answers.
fn to_python<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize(py, value)?)
}

/// Resident set size of this process, bytes.
#[pyfunction]
fn process_rss(py: Python<'_>) -> PyResult<u64> {
    measure(py, hypomnesis::process_rss)
}

/// Resident set size of process `pid`, bytes.
#[pyfunction]
fn process_rss_of(py: Python<'_>, pid: u32) -> PyResult<u64> {
    measure(py, || hypomnesis::process_rss_of(pid))
}

/// Where the pages of process `pid` lie: its resident bytes on each NUMA node (a dict node →
/// bytes), from its `numa_maps` (Linux).
#[pyfunction]
fn process_numa_bytes(py: Python<'_>, pid: u32) -> PyResult<std::collections::BTreeMap<u32, u64>> {
    measure(py, || hypomnesis::process_numa_bytes(pid))
}

/// What each GPU source of this build says about itself (what `hmn doctor` prints): each a
/// `SourceReport` dict (`state` a dict of `state`, and `reason` unless it answered).
#[pyfunction]
fn sources(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let reports = outside(py, hypomnesis::sources);
    to_python(py, &reports)
}

/// Number of GPUs this host can measure.
#[pyfunction]
fn device_count(py: Python<'_>) -> PyResult<u32> {
    measure(py, hypomnesis::device_count)
}

/// How many GPUs there are (0 when no source answers), asked on the library's bounded worker
/// and waited for at most `deadline` seconds: `None` when no answer came by then, or an earlier
/// count has still not returned (it holds the one worker; no thread is started per call). The
/// wait lets Ctrl-C through.
#[pyfunction]
fn device_count_within(py: Python<'_>, deadline: f64) -> PyResult<Option<u32>> {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};
    static WORKER: OnceLock<hypomnesis::bounded::Worker> = OnceLock::new();
    let worker = WORKER.get_or_init(|| hypomnesis::bounded::Worker::new("device-count"));
    let until = Instant::now()
        + Duration::try_from_secs_f64(deadline.max(0.0)).unwrap_or(Duration::MAX / 4);
    let (tx, rx) = std::sync::mpsc::channel();
    let started = worker.start(
        || hypomnesis::device_count().unwrap_or(0),
        move |answer| {
            let _ = tx.send(answer);
        },
    );
    if started.is_err() {
        return Ok(None);
    }
    let mut rx = rx;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let slice = left.min(Duration::from_millis(100));
        let (got, back) = outside(py, move || (rx.recv_timeout(slice), rx));
        rx = back;
        match got {
            Ok(answer) => return Ok(answer.ok()),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
        }
    }
}

/// The median seconds of one round trip to the library's bounded worker (a job that does
/// nothing, asked and answered), over `trips` trips: what the hang guard adds to each edge of
/// a tracked block (`scripts/bench/track_cost.py`).
#[pyfunction]
fn _round_trip_seconds(py: Python<'_>, trips: u32) -> f64 {
    outside(py, || {
        let worker = hypomnesis::bounded::Worker::new("round-trip");
        let _ = worker.ask(std::time::Duration::from_secs(5), || ());
        let mut times: Vec<f64> = (0..trips.max(1))
            .map(|_| {
                let t = std::time::Instant::now();
                let _ = worker.ask(std::time::Duration::from_secs(5), || ());
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times.get(times.len() / 2).copied().unwrap_or(0.0)
    })
}

/// Device-wide memory of GPU `index`, as a dict.
#[pyfunction]
fn device_info(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyAny>> {
    let index = index_arg(py, index)?;
    let d = measure(py, || hypomnesis::device_info(index))?;
    to_python(py, &Device::new(&d))
}

/// This process's GPU memory on device `index`, as a dict.
#[pyfunction]
fn process_gpu_info(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyAny>> {
    let index = index_arg(py, index)?;
    let p = measure(py, || hypomnesis::process_gpu_info(index))?;
    to_python(py, &p)
}

/// The processes holding memory on device `index`, each with its context (owner, command line,
/// container…) when its files can be read from here (`None` for a process of another PID
/// namespace, hidden by the procfs mount's `hidepid`, or exited: its `unreadable` says which).
#[pyfunction]
fn gpu_processes(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyAny>> {
    let index = index_arg(py, index)?;
    let (rows, contexts) = measure(py, || {
        let rows = hypomnesis::gpu_processes(index)?;
        let contexts = contexts_of(index, &rows);
        Ok((rows, contexts))
    })?;
    let rows: Vec<ProcessRow<'_>> = rows
        .iter()
        .zip(&contexts)
        .map(|(r, c)| ProcessRow::new(r, c.as_ref()))
        .collect();
    to_python(py, &rows)
}

/// Who the processes listed on each device are, kept from one call to the next: a loop that
/// lists a device's processes reads each one's owner, command line and container once per
/// lifetime, and its RSS and CPU time through files kept open.
static IDENTITIES: std::sync::Mutex<BTreeMap<u32, Identities>> =
    std::sync::Mutex::new(BTreeMap::new());

/// The context of each of `rows` (listed on device `index`), where its files can be read from
/// here: under the pid they have here, the host's when the source mapped it. Read through the
/// device's kept [`Identities`]; through fresh ones while another thread holds them (or in a
/// child forked while one did).
fn contexts_of(index: u32, rows: &[hypomnesis::GpuProcessEntry]) -> Vec<Option<ProcessContext>> {
    let wanted: BTreeMap<u32, u32> = rows
        .iter()
        .filter_map(|r| Some((r.pid, r.readable_pid()?)))
        .collect();
    let mut parts = IdentityParts::NONE;
    (parts.container, parts.changing) = (true, true);
    let listed = |pid: u32| wanted.contains_key(&pid);
    let read = match IDENTITIES.try_lock() {
        Ok(mut kept) => kept.entry(index).or_default().read(&wanted, parts, listed),
        Err(_) => Identities::new().read(&wanted, parts, listed),
    };
    rows.iter()
        .map(|r| {
            r.readable_pid()?;
            read.get(&r.pid)
                .map(hypomnesis::sampling::Identity::context)
        })
        .collect()
}

/// The context (owner, command line, resident set, container, CPU time) of process `pid`.
#[pyfunction]
fn process_context(py: Python<'_>, pid: u32) -> PyResult<Bound<'_, PyAny>> {
    let c = outside(py, || hypomnesis::process_context(pid));
    to_python(py, &c)
}

/// GPU and memory-controller utilization of device `index`, as a dict.
#[pyfunction]
fn device_utilization(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyAny>> {
    let index = index_arg(py, index)?;
    let u = measure(py, || hypomnesis::device_utilization(index))?;
    to_python(py, &u)
}

/// The host's physical memory, as a dict.
#[pyfunction]
fn host_memory(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let h = measure(py, hypomnesis::host_memory)?;
    to_python(py, &h)
}

/// RAM of this process, and its GPU memory and the device's figures on device `index` where a
/// GPU source can tell (`None` otherwise).
#[pyfunction]
fn snapshot(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyAny>> {
    let index = index_arg(py, index)?;
    let s = measure(py, || hypomnesis::Snapshot::now(index))?;
    to_python(py, &SnapshotView::new(&s))
}

/// The MIG view of GPU `index`, as a dict.
#[pyfunction]
fn mig_state(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyAny>> {
    let index = index_arg(py, index)?;
    let s = measure(py, || hypomnesis::mig_state(index))?;
    to_python(py, &MigView::new(&s))
}

/// The MIG device whose UUID is `uuid`, as a dict.
#[pyfunction]
fn mig_instance<'py>(py: Python<'py>, uuid: &str) -> PyResult<Bound<'py, PyAny>> {
    let uuid = uuid.to_owned();
    let m = measure(py, move || hypomnesis::mig_instance(&uuid))?;
    to_python(py, &Mig::new(&m))
}

/// The MIG GPU instances of GPU `index`, shared memory counted once, as dicts.
#[pyfunction]
fn mig_gpu_instances(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyAny>> {
    let index = index_arg(py, index)?;
    let groups = measure(py, || {
        hypomnesis::mig_instances(index).map(|m| hypomnesis::mig_gpu_instances(&m))
    })?;
    to_python(py, &groups)
}

/// GPU memory held that should not be, on every GPU: one look that waits `stuck_after`
/// seconds for a second look at a process in uninterruptible sleep, idle after `idle_after`
/// seconds without activity; as a dict.
#[pyfunction]
#[pyo3(signature = (stuck_after = 2.0, idle_after = 600.0))]
fn ghosts(py: Python<'_>, stuck_after: f64, idle_after: f64) -> PyResult<Bound<'_, PyAny>> {
    let seconds = |name: &str, v: f64| {
        std::time::Duration::try_from_secs_f64(v).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "{name} must be a number of seconds of at least 0, not {v}"
            ))
        })
    };
    let options = hypomnesis::GhostOptions::default()
        .stuck_after(seconds("stuck_after", stuck_after)?)
        .idle_after(seconds("idle_after", idle_after)?);
    let r = measure(py, || hypomnesis::ghosts_with(options))?;
    to_python(py, &GhostReportView::new(&r))
}

/// The extension module.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(process_rss, m)?)?;
    m.add_function(wrap_pyfunction!(process_rss_of, m)?)?;
    m.add_function(wrap_pyfunction!(process_numa_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(sources, m)?)?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(device_count_within, m)?)?;
    m.add_function(wrap_pyfunction!(_round_trip_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(device_info, m)?)?;
    m.add_function(wrap_pyfunction!(process_gpu_info, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_processes, m)?)?;
    m.add_function(wrap_pyfunction!(process_context, m)?)?;
    m.add_function(wrap_pyfunction!(device_utilization, m)?)?;
    m.add_function(wrap_pyfunction!(host_memory, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(mig_state, m)?)?;
    m.add_function(wrap_pyfunction!(mig_instance, m)?)?;
    m.add_function(wrap_pyfunction!(mig_gpu_instances, m)?)?;
    m.add_function(wrap_pyfunction!(ghosts, m)?)?;
    m.add_class::<sampler::Sampler>()?;
    m.add_class::<worker::PyWorker>()?;
    m.add_function(wrap_pyfunction!(exit::_exiting, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::_before_fork, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::_after_fork_in_parent, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::_after_fork, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The entry sample, the points kept between, the exit sample: the one figure
    // `hypomnesis.tracking.TIMELINE_SAMPLES` is.
    m.add("TIMELINE_SAMPLES", timeline::TIMELINE_POINTS + 2)?;
    // The kinds' names, from the library's one table: `hypomnesis.errors` has a class for each
    // (a test checks it).
    m.add(
        "ERROR_KINDS",
        hypomnesis::ErrorKind::ALL
            .map(hypomnesis::ErrorKind::as_str)
            .to_vec(),
    )?;
    Ok(())
}
