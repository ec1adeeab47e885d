//! `hypomnesis._native`: the Rust side of the `hypomnesis` Python package.
//!
//! Every function measures with the GIL released and answers plain Python values (dicts, lists,
//! ints, `None` for an unknown figure); the package's Python modules make them into typed
//! objects. Errors become the exceptions of `hypomnesis._errors`, chosen by the error's
//! [`ErrorKind`], with the library's message unchanged.

use std::sync::Mutex;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hypomnesis::{
    Container, ErrorKind, GpuContextKind, GpuDeviceInfo, GpuProcessEntry, HypomnesisError,
    MigGpuInstance, MigInstance, MigState, ProcessContext, ProcessGpuInfo,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The snake-case name of an error kind, as `HypomnesisError.kind` carries it in Python.
fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::DriverNotLoaded => "driver_not_loaded",
        ErrorKind::DriverVersionMismatch => "driver_version_mismatch",
        ErrorKind::NoPermission => "no_permission",
        ErrorKind::GpuLost => "gpu_lost",
        ErrorKind::NotSupported => "not_supported",
        ErrorKind::TimedOut => "timed_out",
        ErrorKind::Paused => "paused",
        ErrorKind::BadSetting => "bad_setting",
        ErrorKind::NotInstalled => "not_installed",
        ErrorKind::NotBuiltIn => "not_built_in",
        ErrorKind::NoSuchDevice => "no_such_device",
        ErrorKind::BadAnswer => "bad_answer",
        _ => "other",
    }
}

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
        HypomnesisError::Io(_) => "io",
        _ => "other",
    }
}

/// The Python exception for `kind`, `source` and `message`, made by `hypomnesis._errors`
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
        .import("hypomnesis._errors")
        .and_then(|m| m.call_method1("_from_native", (kind, source, message, index, count)))
    {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

/// A library error as its Python exception.
fn to_py(py: Python<'_>, e: &HypomnesisError) -> PyErr {
    let index_count = match e {
        HypomnesisError::DeviceIndexOutOfRange { index, count } => Some((*index, *count)),
        _ => None,
    };
    py_error(
        py,
        kind_name(e.kind()),
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
fn measure<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> hypomnesis::Result<T> + Send,
) -> PyResult<T> {
    py.detach(f).map_err(|e| to_py(py, &e))
}

fn context_kind_name(kind: GpuContextKind) -> &'static str {
    match kind {
        GpuContextKind::Compute => "compute",
        GpuContextKind::Graphics => "graphics",
        GpuContextKind::ComputeAndGraphics => "compute+graphics",
        _ => "other",
    }
}

fn device_dict<'py>(py: Python<'py>, d: &GpuDeviceInfo) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("index", d.index)?;
    o.set_item("name", d.name.as_deref())?;
    o.set_item("total_bytes", d.total_bytes)?;
    o.set_item("free_bytes", d.free_bytes)?;
    o.set_item("used_bytes", d.used_bytes)?;
    o.set_item("reserved_bytes", d.reserved_bytes)?;
    o.set_item("allocated_bytes", d.allocated_bytes())?;
    o.set_item("allocatable_bytes", d.allocatable_bytes())?;
    o.set_item("driver_version", d.driver_version.as_deref())?;
    o.set_item("uuid", d.uuid.as_deref())?;
    o.set_item("pci_bus_id", d.pci_bus_id.as_deref())?;
    o.set_item("vendor", d.vendor.map(hypomnesis::GpuVendor::as_str))?;
    o.set_item("source", d.source.as_str())?;
    o.set_item("gtt_total_bytes", d.gtt_total_bytes)?;
    o.set_item("gtt_used_bytes", d.gtt_used_bytes)?;
    o.set_item("visible_vram_total_bytes", d.visible_vram_total_bytes)?;
    o.set_item("visible_vram_used_bytes", d.visible_vram_used_bytes)?;
    o.set_item("mig_enabled", d.mig_enabled)?;
    Ok(o)
}

fn process_gpu_dict<'py>(py: Python<'py>, p: &ProcessGpuInfo) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("used_bytes", p.used_bytes)?;
    o.set_item("is_per_process", p.is_per_process)?;
    o.set_item("source", p.source.as_str())?;
    Ok(o)
}

fn container_dict<'py>(py: Python<'py>, c: &Container) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("id", &c.id)?;
    o.set_item("runtime", c.runtime.as_deref())?;
    o.set_item("pod_uid", c.pod_uid.as_deref())?;
    Ok(o)
}

fn context_dict<'py>(py: Python<'py>, c: &ProcessContext) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("uid", c.uid)?;
    o.set_item("user", c.user.as_deref())?;
    o.set_item("command", c.command.as_deref())?;
    o.set_item("rss_bytes", c.rss_bytes)?;
    o.set_item(
        "container",
        c.container
            .as_ref()
            .map(|k| container_dict(py, k))
            .transpose()?,
    )?;
    o.set_item("cpu_seconds", c.cpu_time.map(|d| d.as_secs_f64()))?;
    Ok(o)
}

fn process_entry_dict<'py>(
    py: Python<'py>,
    p: &GpuProcessEntry,
    context: Option<&ProcessContext>,
) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("pid", p.pid)?;
    o.set_item("name", p.name.as_deref())?;
    o.set_item("used_bytes", p.used_bytes)?;
    o.set_item("source", p.source.as_str())?;
    o.set_item("device_index", p.device_index)?;
    o.set_item("shared_used_bytes", p.shared_used_bytes)?;
    o.set_item("context", p.context.map(context_kind_name))?;
    o.set_item("host_pid", p.host_pid)?;
    o.set_item("outside_pid_namespace", p.outside_pid_namespace)?;
    o.set_item("gpu_instance_id", p.gpu_instance_id)?;
    o.set_item("compute_instance_id", p.compute_instance_id)?;
    o.set_item(
        "process_context",
        context.map(|c| context_dict(py, c)).transpose()?,
    )?;
    Ok(o)
}

fn mig_instance_dict<'py>(py: Python<'py>, m: &MigInstance) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("parent_index", m.parent_index)?;
    o.set_item("slot", m.slot)?;
    o.set_item("uuid", m.uuid.as_deref())?;
    o.set_item("name", m.name.as_deref())?;
    o.set_item("profile", m.profile.as_deref())?;
    o.set_item("gpu_instance_profile", m.gpu_instance_profile())?;
    o.set_item("gpu_instance_id", m.gpu_instance_id)?;
    o.set_item("compute_instance_id", m.compute_instance_id)?;
    o.set_item("total_bytes", m.total_bytes)?;
    o.set_item("free_bytes", m.free_bytes)?;
    o.set_item("used_bytes", m.used_bytes)?;
    o.set_item("reserved_bytes", m.reserved_bytes)?;
    o.set_item("memory_error", m.memory_error.as_deref())?;
    o.set_item("memory_error_kind", m.memory_error_kind().map(kind_name))?;
    o.set_item("source", m.source.as_str())?;
    Ok(o)
}

fn mig_state_dict<'py>(py: Python<'py>, s: &MigState) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("index", s.index)?;
    o.set_item("name", s.name.as_deref())?;
    o.set_item("uuid", s.uuid.as_deref())?;
    o.set_item("enabled", s.enabled)?;
    o.set_item("pending", s.pending)?;
    let instances = s
        .instances
        .iter()
        .map(|m| mig_instance_dict(py, m))
        .collect::<PyResult<Vec<_>>>()?;
    o.set_item("instances", instances)?;
    o.set_item("device_memory_error", s.device_memory_error.as_deref())?;
    o.set_item(
        "device_memory_error_kind",
        s.device_memory_error_kind().map(kind_name),
    )?;
    o.set_item("source", s.source.as_str())?;
    Ok(o)
}

fn mig_gpu_instance_dict<'py>(py: Python<'py>, g: &MigGpuInstance) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("parent_index", g.parent_index)?;
    o.set_item("gpu_instance_id", g.gpu_instance_id)?;
    o.set_item("profile", g.profile.as_deref())?;
    o.set_item("slots", &g.slots)?;
    o.set_item("compute_instance_ids", &g.compute_instance_ids)?;
    o.set_item("total_bytes", g.total_bytes)?;
    o.set_item("free_bytes", g.free_bytes)?;
    o.set_item("used_bytes", g.used_bytes)?;
    o.set_item("reserved_bytes", g.reserved_bytes)?;
    Ok(o)
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

/// What each GPU source of this build says about itself (what `hmn doctor` prints), as dicts:
/// `source`, `state` (`answered`, `failed`, `absent`), `reason` (`None` when answered),
/// `details` (label, value pairs) and `dropped_process_rows`.
#[pyfunction]
fn sources(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let reports = py.detach(hypomnesis::sources);
    reports
        .iter()
        .map(|r| {
            let (state, reason) = match &r.state {
                hypomnesis::SourceState::Answered => ("answered", None),
                hypomnesis::SourceState::Failed(why) => ("failed", Some(why.as_str())),
                hypomnesis::SourceState::Absent(why) => ("absent", Some(why.as_str())),
                _ => ("other", None),
            };
            let o = PyDict::new(py);
            o.set_item("source", r.source.as_str())?;
            o.set_item("state", state)?;
            o.set_item("reason", reason)?;
            o.set_item("details", r.details.clone())?;
            o.set_item("dropped_process_rows", r.dropped_process_rows)?;
            Ok(o)
        })
        .collect()
}

/// Number of GPUs this host can measure.
#[pyfunction]
fn device_count(py: Python<'_>) -> PyResult<u32> {
    measure(py, hypomnesis::device_count)
}

/// Device-wide memory of GPU `index`, as a dict.
#[pyfunction]
fn device_info(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyDict>> {
    let index = index_arg(py, index)?;
    let d = measure(py, || hypomnesis::device_info(index))?;
    device_dict(py, &d)
}

/// This process's GPU memory on device `index`, as a dict.
#[pyfunction]
fn process_gpu_info(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyDict>> {
    let index = index_arg(py, index)?;
    let p = measure(py, || hypomnesis::process_gpu_info(index))?;
    process_gpu_dict(py, &p)
}

/// The processes holding memory on device `index`, each with its context (owner, command line,
/// container…) when its files can be read from here (`None` for a process of another PID
/// namespace).
#[pyfunction]
fn gpu_processes(py: Python<'_>, index: i64) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let index = index_arg(py, index)?;
    let (rows, contexts) = measure(py, || {
        let rows = hypomnesis::gpu_processes(index)?;
        // Read under the pid its files have here: the host's when the source mapped it.
        let readable: Vec<(usize, u32)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.outside_pid_namespace)
            .map(|(i, r)| (i, r.host_pid.unwrap_or(r.pid)))
            .collect();
        let pids: Vec<u32> = readable.iter().map(|&(_, pid)| pid).collect();
        let mut contexts: Vec<Option<ProcessContext>> = vec![None; rows.len()];
        for ((i, _), c) in readable
            .into_iter()
            .zip(hypomnesis::process_contexts(&pids))
        {
            if let Some(slot) = contexts.get_mut(i) {
                *slot = Some(c);
            }
        }
        Ok((rows, contexts))
    })?;
    rows.iter()
        .zip(&contexts)
        .map(|(r, c)| process_entry_dict(py, r, c.as_ref()))
        .collect()
}

/// The context (owner, command line, resident set, container, CPU time) of process `pid`.
#[pyfunction]
fn process_context(py: Python<'_>, pid: u32) -> PyResult<Bound<'_, PyDict>> {
    let c = py.detach(|| hypomnesis::process_context(pid));
    context_dict(py, &c)
}

/// GPU and memory-controller utilization of device `index`, as a dict.
#[pyfunction]
fn device_utilization(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyDict>> {
    let index = index_arg(py, index)?;
    let u = measure(py, || hypomnesis::device_utilization(index))?;
    let o = PyDict::new(py);
    o.set_item("gpu_percent", u.gpu_percent)?;
    o.set_item("memory_percent", u.memory_percent)?;
    o.set_item("source", u.source.as_str())?;
    Ok(o)
}

/// The host's physical memory, as a dict.
#[pyfunction]
fn host_memory(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let h = measure(py, hypomnesis::host_memory)?;
    let o = PyDict::new(py);
    o.set_item("total_bytes", h.total_bytes)?;
    o.set_item("available_bytes", h.available_bytes)?;
    Ok(o)
}

/// RAM of this process, and its GPU memory and the device's figures on device `index` where a
/// GPU source can tell (`None` otherwise).
#[pyfunction]
fn snapshot(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyDict>> {
    let index = index_arg(py, index)?;
    let s = measure(py, || hypomnesis::Snapshot::now(index))?;
    let o = PyDict::new(py);
    o.set_item("ram_bytes", s.ram_bytes)?;
    o.set_item(
        "gpu",
        s.gpu
            .as_ref()
            .map(|g| process_gpu_dict(py, g))
            .transpose()?,
    )?;
    o.set_item(
        "gpu_device",
        s.gpu_device
            .as_ref()
            .map(|d| device_dict(py, d))
            .transpose()?,
    )?;
    Ok(o)
}

/// The MIG view of GPU `index`, as a dict.
#[pyfunction]
fn mig_state(py: Python<'_>, index: i64) -> PyResult<Bound<'_, PyDict>> {
    let index = index_arg(py, index)?;
    let s = measure(py, || hypomnesis::mig_state(index))?;
    mig_state_dict(py, &s)
}

/// The MIG device whose UUID is `uuid`, as a dict.
#[pyfunction]
fn mig_instance<'py>(py: Python<'py>, uuid: &str) -> PyResult<Bound<'py, PyDict>> {
    let uuid = uuid.to_owned();
    let m = measure(py, move || hypomnesis::mig_instance(&uuid))?;
    mig_instance_dict(py, &m)
}

/// The MIG GPU instances of GPU `index`, shared memory counted once, as dicts.
#[pyfunction]
fn mig_gpu_instances(py: Python<'_>, index: i64) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let index = index_arg(py, index)?;
    let groups = measure(py, || {
        hypomnesis::mig_instances(index).map(|m| hypomnesis::mig_gpu_instances(&m))
    })?;
    groups
        .iter()
        .map(|g| mig_gpu_instance_dict(py, g))
        .collect()
}

/// One sample of a [`Sampler`]: seconds since the sampler started, this process's RSS, and per
/// sampled device its own GPU memory (`None` where not attributable to it) and the device's
/// used memory (`None` where unreadable).
type RawSample = (f64, u64, Vec<Option<u64>>, Vec<Option<u64>>);

/// Measures one sample.
fn take_sample(start: Instant, devices: &[u32]) -> hypomnesis::Result<RawSample> {
    let rss = hypomnesis::process_rss()?;
    let own = devices
        .iter()
        .map(|&d| {
            hypomnesis::process_gpu_info(d)
                .ok()
                .filter(|p| p.is_per_process)
                .map(|p| p.used_bytes)
        })
        .collect();
    let device_used = devices
        .iter()
        .map(|&d| hypomnesis::device_info(d).ok().map(|i| i.used_bytes))
        .collect();
    Ok((start.elapsed().as_secs_f64(), rss, own, device_used))
}

/// What the sampling thread hands back: its samples and, when it stopped on one, the error.
type ThreadResult = (Vec<RawSample>, Option<HypomnesisError>);

enum SamplerState {
    Ready,
    Running {
        start: Instant,
        first: RawSample,
        stop: Sender<()>,
        thread: JoinHandle<ThreadResult>,
    },
    Done,
}

/// Samples this process's RSS and GPU memory on a thread of its own, which never takes the
/// GIL: one sample when started, one every `interval` seconds, one when stopped. Runs once.
#[pyclass(module = "hypomnesis._native", frozen)]
struct Sampler {
    interval: Duration,
    devices: Vec<u32>,
    state: Mutex<SamplerState>,
}

#[pymethods]
impl Sampler {
    #[new]
    fn new(interval: f64, devices: Vec<u32>) -> PyResult<Self> {
        if !(interval.is_finite() && interval > 0.0 && interval <= 86_400.0) {
            return Err(PyValueError::new_err(format!(
                "interval must be a number of seconds above 0 and at most 86400, not {interval}"
            )));
        }
        Ok(Self {
            interval: Duration::from_secs_f64(interval),
            devices,
            state: Mutex::new(SamplerState::Ready),
        })
    }

    /// Takes the first sample (before returning) and starts the sampling thread.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the sampler's state is poisoned"))?;
        if !matches!(*state, SamplerState::Ready) {
            return Err(PyRuntimeError::new_err(
                "this Sampler was started already (a Sampler runs once)",
            ));
        }
        let devices = self.devices.clone();
        let interval = self.interval;
        let start = Instant::now();
        let first = measure(py, || take_sample(start, &devices))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("hypomnesis-sampler".into())
            .spawn(move || {
                let mut samples = Vec::new();
                // Stops when told, or when the Sampler is dropped (the sender with it).
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    match take_sample(start, &devices) {
                        Ok(s) => samples.push(s),
                        Err(e) => return (samples, Some(e)),
                    }
                }
                (samples, None)
            })
            .map_err(|e| {
                PyRuntimeError::new_err(format!("cannot start the sampling thread: {e}"))
            })?;
        *state = SamplerState::Running {
            start,
            first,
            stop,
            thread,
        };
        Ok(())
    }

    /// Stops the thread, takes the last sample, and returns every sample in time order as
    /// `(seconds, rss_bytes, [own GPU bytes per device], [device used bytes per device])`.
    fn stop(&self, py: Python<'_>) -> PyResult<Vec<RawSample>> {
        let running = {
            let mut state = self
                .state
                .lock()
                .map_err(|_| PyRuntimeError::new_err("the sampler's state is poisoned"))?;
            if !matches!(*state, SamplerState::Running { .. }) {
                return Err(PyRuntimeError::new_err(
                    "this Sampler is not running (never started, or stopped already)",
                ));
            }
            std::mem::replace(&mut *state, SamplerState::Done)
        };
        let SamplerState::Running {
            start,
            first,
            stop,
            thread,
        } = running
        else {
            return Err(PyRuntimeError::new_err("this Sampler is not running"));
        };
        let devices = &self.devices;
        let (joined, last) = py.detach(move || {
            // A send fails only when the thread has ended already; joining is right either way.
            let _ = stop.send(());
            let joined = thread.join();
            let last = take_sample(start, devices);
            (joined, last)
        });
        let (middle, error) =
            joined.map_err(|_| PyRuntimeError::new_err("the sampling thread panicked"))?;
        if let Some(e) = error {
            return Err(to_py(py, &e));
        }
        let last = last.map_err(|e| to_py(py, &e))?;
        let mut all = Vec::with_capacity(middle.len() + 2);
        all.push(first);
        all.extend(middle);
        all.push(last);
        Ok(all)
    }

    /// Whether the sampling thread is running.
    #[getter]
    fn running(&self) -> bool {
        self.state
            .lock()
            .is_ok_and(|s| matches!(*s, SamplerState::Running { .. }))
    }
}

/// The extension module.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(process_rss, m)?)?;
    m.add_function(wrap_pyfunction!(process_rss_of, m)?)?;
    m.add_function(wrap_pyfunction!(sources, m)?)?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
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
    m.add_class::<Sampler>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
