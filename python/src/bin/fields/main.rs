//! Generates the Python side's field lists from the library's types, so they cannot drift:
//! `hypomnesis/_fields.py` (each object's fields and their Python types) and the `TypedDict`s of
//! `hypomnesis/_native.pyi` (what each native function answers).
//!
//! It serializes a fully populated value of each shape the native module answers (the same
//! `shapes.rs` the module uses) with a serializer that records field names and kinds instead
//! of figures: `Some` and `None` tell an `Option` apart, so every `Option` of a sample must be
//! `Some` and every list hold an element, or the generator stops and says which.
//!
//! ```text
//! cargo run -p hypomnesis-python --features generate --bin hypomnesis-python-fields
//! cargo run -p hypomnesis-python --features generate --bin hypomnesis-python-fields -- --check
//! ```

mod record;
#[path = "../../shapes.rs"]
#[allow(dead_code)]
mod shapes;

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use hypomnesis::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, GpuVendor, HostMemory,
    MigGpuInstance, MigInstance, MigState, ProcessContext, ProcessGpuInfo, Snapshot, SourceReport,
    SourceState, Utilization,
};
use record::{Shape, Unsupported, shape_of};
use shapes::{
    Device, GhostFactView, GhostReportView, GhostView, Mig, MigView, ProcessRow, SnapshotView,
};

const GIB: u64 = 1 << 30;

/// The Python name of each shape, and samples of it (two where a field is there in one variant
/// only: that field is then not required).
type Samples = Vec<(&'static str, Vec<Shape>)>;

fn device() -> GpuDeviceInfo {
    GpuDeviceInfo::builder()
        .name(Some("NVIDIA H200".into()))
        .total_bytes(140 * GIB)
        .free_bytes(100 * GIB)
        .used_bytes(40 * GIB)
        .reserved_bytes(Some(GIB))
        .driver_version(Some("590.48.01".into()))
        .uuid(Some("GPU-1".into()))
        .pci_bus_id(Some("00000000:18:00.0".into()))
        .vendor(Some(GpuVendor::Nvidia))
        .gtt_total_bytes(Some(GIB))
        .gtt_used_bytes(Some(GIB))
        .visible_vram_total_bytes(Some(GIB))
        .visible_vram_used_bytes(Some(GIB))
        .mig_enabled(Some(true))
        .memory_model(Some(hypomnesis::MemoryModel::Discrete))
        .memory_model_evidence(Some("device memory of its own".into()))
        .numa_node(Some(1))
        .numa_node_total_bytes(Some(GIB))
        .numa_node_used_bytes(Some(GIB))
        .build()
}

fn own_gpu() -> ProcessGpuInfo {
    ProcessGpuInfo::builder()
        .used_bytes(GIB)
        .is_per_process(true)
        .build()
}

fn context() -> Result<ProcessContext, Unsupported> {
    let container = hypomnesis::parse_cgroup(&format!(
        "0::/kubepods.slice/kubepods-pod6a2b5c3d_1e2f_4a5b_8c9d_0e1f2a3b4c5d.slice/\
         cri-containerd-{}.scope",
        "a".repeat(64)
    ))
    .ok_or_else(|| Unsupported("the sample cgroup names no container".into()))?;
    // The names the kubelet's logs give a container in a pod (`parse_cgroup` leaves them out).
    let mut container = container;
    container.namespace = Some("ml-team".into());
    container.pod = Some("trainer-0".into());
    container.name = Some("worker".into());
    let mut c = ProcessContext::default();
    c.uid = Some(1000);
    c.user = Some("someone".into());
    c.command = Some("python train.py".into());
    c.rss_bytes = Some(GIB);
    c.container = Some(container);
    c.cpu_time = Some(Duration::from_secs(3));
    Ok(c)
}

fn process() -> GpuProcessEntry {
    GpuProcessEntry::builder()
        .pid(42)
        .name(Some("python".into()))
        .used_bytes(GIB)
        .context(Some(GpuContextKind::ComputeAndGraphics))
        .host_pid(Some(4242))
        .unreadable(Some(hypomnesis::UnreadableReason::HiddenByHidepid))
        .gpu_instance_id(Some(2))
        .compute_instance_id(Some(0))
        .build()
}

fn mig_instance() -> MigInstance {
    MigInstance::builder()
        .uuid(Some("MIG-1".into()))
        .name(Some("NVIDIA H200 MIG 1c.3g.71gb".into()))
        .profile(Some("1c.3g.71gb".into()))
        .gpu_instance_id(Some(2))
        .compute_instance_id(Some(0))
        .total_bytes(Some(GIB))
        .free_bytes(Some(GIB))
        .used_bytes(Some(0))
        .reserved_bytes(Some(0))
        .memory_error(Some(hypomnesis::Failure::new(
            hypomnesis::ErrorKind::Other,
            "NVML_ERROR_UNKNOWN",
        )))
        .build()
}

fn mig_state() -> MigState {
    MigState::builder()
        .name(Some("NVIDIA H200".into()))
        .uuid(Some("GPU-1".into()))
        .enabled(Some(true))
        .pending(Some(true))
        .instances(vec![mig_instance()])
        .device_memory_error(Some(hypomnesis::Failure::new(
            hypomnesis::ErrorKind::NoPermission,
            "NVML_ERROR_NO_PERMISSION",
        )))
        .build()
}

fn ghost() -> hypomnesis::Ghost {
    let mut g = hypomnesis::Ghost::new(hypomnesis::GhostClass::Zombie, 0, Some(4242), GIB);
    g.name = Some("python".into());
    g.holders = vec![4243];
    g.evidence = vec!["state Z (zombie), not reaped by its parent 1".into()];
    g.remedy = hypomnesis::Remedy::Reap { parent: 1 };
    g
}

fn ghost_fact() -> hypomnesis::GhostFact {
    hypomnesis::GhostFact::new(
        hypomnesis::GhostClass::Orphan,
        0,
        4244,
        vec!["the leader 4240 of its session is gone".into()],
    )
}

fn ghost_report() -> hypomnesis::GhostReport {
    let mut r = hypomnesis::GhostReport::default();
    r.ghosts = vec![ghost()];
    r.unseen = vec![hypomnesis::Failure::new(
        hypomnesis::ErrorKind::Other,
        "why",
    )];
    r.holder_scan = Some(hypomnesis::HolderScan::default());
    r.facts = vec![ghost_fact()];
    r.complete = true;
    r
}

fn samples() -> Result<Samples, Unsupported> {
    let device = device();
    let context = context()?;
    let container = context.container.clone();
    let process = process();
    let instance = mig_instance();
    let state = mig_state();
    let ghost = ghost();
    let ghosts = ghost_report();
    let failed = SourceState::failed(hypomnesis::ErrorKind::Other, "why");
    let snapshot = Snapshot::builder()
        .ram_bytes(GIB)
        .gpu(Some(own_gpu()))
        .gpu_device(Some(device.clone()))
        .build();
    let report = SourceReport::builder()
        .state(failed.clone())
        .details(vec![("label".into(), "value".into())])
        .build();
    let group = MigGpuInstance::builder()
        .gpu_instance_id(Some(2))
        .profile(Some("3g.71gb".into()))
        .slots(vec![0])
        .compute_instance_ids(vec![0])
        .total_bytes(Some(GIB))
        .free_bytes(Some(GIB))
        .used_bytes(Some(0))
        .reserved_bytes(Some(0))
        .build();
    Ok(vec![
        ("DeviceInfo", vec![shape_of(&Device::new(&device))?]),
        ("ProcessGpuInfo", vec![shape_of(&own_gpu())?]),
        ("Container", vec![shape_of(&container)?.unwrap_optional()]),
        ("ProcessContext", vec![shape_of(&context)?]),
        (
            "GpuProcess",
            vec![shape_of(&ProcessRow::new(&process, Some(&context)))?],
        ),
        (
            "Utilization",
            vec![shape_of(&Utilization::new(
                Some(50),
                Some(20),
                GpuQuerySource::Nvml,
            ))?],
        ),
        (
            "HostMemory",
            vec![shape_of(&HostMemory::new(GIB, Some(GIB)))?],
        ),
        ("MigInstance", vec![shape_of(&Mig::new(&instance))?]),
        ("MigState", vec![shape_of(&MigView::new(&state))?]),
        ("MigGpuInstance", vec![shape_of(&group)?]),
        (
            "SourceState",
            vec![shape_of(&failed)?, shape_of(&SourceState::Answered)?],
        ),
        ("SourceReport", vec![shape_of(&report)?]),
        ("Snapshot", vec![shape_of(&SnapshotView::new(&snapshot))?]),
        ("Ghost", vec![shape_of(&GhostView::new(&ghost).filled())?]),
        (
            "GhostFact",
            vec![shape_of(&GhostFactView::new(&ghost_fact()))?],
        ),
        (
            "GhostReport",
            vec![shape_of(&GhostReportView::new(&ghosts).filled())?],
        ),
    ])
}

impl Shape {
    /// The shape inside an `Option`.
    fn unwrap_optional(self) -> Shape {
        match self {
            Shape::Optional(inner) => *inner,
            other => other,
        }
    }
}

/// One field of a type: its name, its shape, and whether every variant has it.
struct Field {
    name: String,
    shape: Shape,
    required: bool,
}

/// A named type: its fields, merged over its samples.
struct Type {
    name: &'static str,
    fields: Vec<Field>,
}

fn merge(name: &'static str, samples: Vec<Shape>) -> Result<Type, Unsupported> {
    let count = samples.len();
    let mut fields: Vec<(Field, usize)> = Vec::new();
    for sample in samples {
        let Shape::Record(record) = sample else {
            return Err(Unsupported(format!("a sample of {name} is not a struct")));
        };
        for (key, shape) in record {
            if let Some((f, seen)) = fields.iter_mut().find(|(f, _)| f.name == key) {
                if f.shape != shape {
                    return Err(Unsupported(format!(
                        "{name}.{key} has different shapes in different samples"
                    )));
                }
                *seen += 1;
            } else {
                fields.push((
                    Field {
                        name: key,
                        shape,
                        required: true,
                    },
                    1,
                ));
            }
        }
    }
    let fields = fields
        .into_iter()
        .map(|(mut f, seen)| {
            f.required = seen == count;
            f
        })
        .collect();
    Ok(Type { name, fields })
}

/// How a type is written: in the package's dataclasses, or in the stub's `TypedDict`s.
#[derive(Clone, Copy, PartialEq)]
enum Syntax {
    Dataclass,
    Stub,
}

struct Types(Vec<Type>);

impl Types {
    /// The name of the type whose fields `record` has.
    fn name_of(&self, record: &[(String, Shape)]) -> Result<&'static str, Unsupported> {
        let fits = |t: &&Type| {
            record
                .iter()
                .all(|(k, s)| t.fields.iter().any(|f| f.name == *k && f.shape == *s))
                && t.fields
                    .iter()
                    .all(|f| !f.required || record.iter().any(|(k, _)| *k == f.name))
        };
        let mut found = self.0.iter().filter(fits);
        match (found.next(), found.next()) {
            (Some(t), None) => Ok(t.name),
            _ => Err(Unsupported(format!(
                "a nested struct with fields {:?} is no one sample's type: add a sample",
                record.iter().map(|(k, _)| k).collect::<Vec<_>>()
            ))),
        }
    }

    fn annotation(&self, shape: &Shape, syntax: Syntax) -> Result<String, Unsupported> {
        let stub = syntax == Syntax::Stub;
        Ok(match shape {
            Shape::Int => "int".into(),
            Shape::Float => "float".into(),
            Shape::Bool => "bool".into(),
            Shape::Str | Shape::Text(_) => "str".into(),
            Shape::Null => {
                return Err(Unsupported(
                    "None: an Option of a sample is unset, so its type is unknown".into(),
                ));
            }
            Shape::Optional(inner) => {
                let inner = self.annotation(inner, syntax)?;
                if stub {
                    format!("{inner} | None")
                } else {
                    format!("Optional[{inner}]")
                }
            }
            Shape::List(inner) => {
                let inner = self.annotation(inner, syntax)?;
                if stub {
                    format!("list[{inner}]")
                } else {
                    format!("Tuple[{inner}, ...]")
                }
            }
            Shape::Tuple(items) => {
                let items = items
                    .iter()
                    .map(|s| self.annotation(s, syntax))
                    .collect::<Result<Vec<_>, _>>()?
                    .join(", ");
                if stub {
                    format!("tuple[{items}]")
                } else {
                    format!("Tuple[{items}]")
                }
            }
            Shape::Record(record) => {
                let name = self.name_of(record)?;
                if stub {
                    format!("_{name}")
                } else {
                    name.into()
                }
            }
        })
    }

    /// A field's annotation: a field only some variants have is `Optional` in a dataclass and
    /// `NotRequired` in a `TypedDict`.
    fn field_annotation(&self, t: &Type, f: &Field, syntax: Syntax) -> Result<String, Unsupported> {
        let a = self
            .annotation(&f.shape, syntax)
            .map_err(|e| Unsupported(format!("{}.{}: {e}", t.name, f.name)))?;
        Ok(match (f.required, syntax) {
            (true, _) => a,
            (false, Syntax::Stub) => format!("NotRequired[{a}]"),
            (false, Syntax::Dataclass) if matches!(f.shape, Shape::Optional(_)) => a,
            (false, Syntax::Dataclass) => format!("Optional[{a}]"),
        })
    }

    fn fields_py(&self) -> Result<String, Unsupported> {
        let mut out = String::from(FIELDS_HEAD);
        for t in &self.0 {
            writeln!(out, "    \"{}\": (", t.name)?;
            for f in &t.fields {
                let a = self.field_annotation(t, f, Syntax::Dataclass)?;
                writeln!(out, "        (\"{}\", \"{a}\"),", f.name)?;
            }
            out.push_str("    ),\n");
        }
        out.push_str("}\n");
        Ok(out)
    }

    fn typed_dicts(&self) -> Result<String, Unsupported> {
        let mut out = String::from(STUB_START);
        out.push('\n');
        for t in &self.0 {
            write!(out, "\nclass _{}(TypedDict):\n", t.name)?;
            for f in &t.fields {
                let a = self.field_annotation(t, f, Syntax::Stub)?;
                writeln!(out, "    {}: {a}", f.name)?;
            }
        }
        out.push('\n');
        out.push_str(STUB_END);
        Ok(out)
    }
}

const FIELDS_HEAD: &str = r#"# Generated by `cargo run -p hypomnesis-python --features generate --bin
# hypomnesis-python-fields` from the serde form of the library's types: do not edit
# (python/README.md says how to regenerate it; tests/test_fields.py fails when it is stale).
"""Each object the native module answers: its fields in the order it gives them, and their
Python types as the package's dataclasses declare them (a nested object by its class name)."""

from typing import Dict, Tuple

FIELDS: Dict[str, Tuple[Tuple[str, str], ...]] = {
"#;

const STUB_START: &str =
    "# --- generated by hypomnesis-python-fields (python/README.md): do not edit ---";
const STUB_END: &str = "# --- end of the generated part ---";

/// The stub with its generated part replaced by `typed_dicts`.
fn with_typed_dicts(stub: &str, typed_dicts: &str) -> Result<String, Unsupported> {
    let (Some(start), Some(end)) = (stub.find(STUB_START), stub.find(STUB_END)) else {
        return Err(Unsupported(format!(
            "_native.pyi lacks the markers {STUB_START:?} and {STUB_END:?}"
        )));
    };
    let head = stub.get(..start).unwrap_or_default();
    let tail = stub.get(end + STUB_END.len()..).unwrap_or_default();
    Ok(format!("{head}{typed_dicts}{tail}"))
}

fn run(check: bool) -> Result<bool, Unsupported> {
    let types = Types(
        samples()?
            .into_iter()
            .map(|(name, samples)| merge(name, samples))
            .collect::<Result<_, _>>()?,
    );
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("hypomnesis");
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| Unsupported(format!("{}: {e}", p.display())))
    };
    let fields_path = package.join("_fields.py");
    let stub_path = package.join("_native.pyi");
    let stub = read(&stub_path)?;
    let wanted = [
        (fields_path.clone(), types.fields_py()?),
        (stub_path, with_typed_dicts(&stub, &types.typed_dicts()?)?),
    ];
    let mut fresh = true;
    for (path, text) in wanted {
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now == text {
            continue;
        }
        if check {
            eprintln!(
                "{} is stale: the library's types changed; regenerate it with \
                 `cargo run -p hypomnesis-python --features generate --bin \
                 hypomnesis-python-fields`",
                path.display()
            );
            fresh = false;
        } else {
            std::fs::write(&path, text)
                .map_err(|e| Unsupported(format!("{}: {e}", path.display())))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(fresh)
}

fn main() -> ExitCode {
    let check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--check") => true,
        Some(other) => {
            eprintln!("usage: hypomnesis-python-fields [--check] (not {other:?})");
            return ExitCode::from(2);
        }
    };
    match run(check) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("hypomnesis-python-fields: {e}");
            ExitCode::from(2)
        }
    }
}
