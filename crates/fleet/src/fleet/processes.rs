//! The processes holding memory on a node's GPUs, from hypomnesis's per-process series
//! (`hypomnesis_gpu_process_memory_bytes`): dcgm-exporter has none.

use super::series::bytes;
use crate::answer::{Series, shown};

/// A process holding memory on a GPU, as its node's exporter saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// The GPU's index on the node.
    pub gpu: String,
    /// Its pid on the node.
    pub pid: String,
    /// Its name.
    pub name: String,
    /// Its user, where the exporter could read it.
    pub user: Option<String>,
    /// Its pod's namespace and name, where it runs in one.
    pub pod: Option<(String, String)>,
    /// Its contexts as nvidia-smi prints them (`C`, `M+C`), where known.
    pub kind: Option<String>,
    /// What it holds there.
    pub bytes: u64,
}

/// The processes of `series`, largest first; a series whose figure is not a byte count (NaN,
/// negative) is left out.
pub(super) fn of(series: &[Series]) -> Vec<Process> {
    let text = |s: &Series, name: &str| {
        s.label(name)
            .filter(|v| !v.is_empty())
            .map(|v| shown(v).into_owned())
    };
    let mut out: Vec<Process> = series
        .iter()
        .filter_map(|s| {
            Some(Process {
                gpu: text(s, "gpu").unwrap_or_default(),
                pid: text(s, "pid").unwrap_or_default(),
                name: text(s, "process").unwrap_or_default(),
                user: text(s, "user"),
                pod: text(s, "pod").map(|p| (text(s, "namespace").unwrap_or_default(), p)),
                kind: text(s, "type"),
                bytes: bytes(s.value)?,
            })
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.pid.cmp(&b.pid)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(labels: &[(&str, &str)], value: f64) -> Series {
        Series {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            value,
        }
    }

    #[test]
    fn processes_are_read_largest_first_and_bad_figures_left_out() {
        let got = of(&[
            series(
                &[("gpu", "0"), ("pid", "7"), ("process", "python3")],
                1024.0,
            ),
            series(
                &[
                    ("gpu", "1"),
                    ("pid", "9"),
                    ("process", "vllm\u{1b}[2J"),
                    ("user", "svc"),
                    ("namespace", "serve"),
                    ("pod", "vllm-0"),
                    ("type", "C"),
                ],
                4096.0,
            ),
            series(&[("gpu", "0"), ("pid", "8")], f64::NAN),
            series(&[("gpu", "0"), ("pid", "10")], -1.0),
        ]);
        assert_eq!(got.len(), 2);
        let (first, second) = (&got[0], &got[1]);
        assert_eq!(first.pid, "9");
        assert_eq!(first.bytes, 4096);
        assert!(!first.name.contains('\u{1b}'), "{:?}", first.name);
        assert_eq!(first.pod, Some(("serve".into(), "vllm-0".into())));
        assert_eq!(first.kind.as_deref(), Some("C"));
        assert_eq!(second.user, None);
        assert_eq!(second.pod, None);
    }
}
