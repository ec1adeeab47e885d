//! `hmn ps`: its table, JSON, filters and summary against the fake NVML, and memory that no
//! visible process accounts for. The fake NVML hides, as the real driver does, the processes
//! of other PID namespaces (pids with no `/proc/<pid>` here); `hmn ps` must then show what
//! they hold as a row of its own and say why, and `hmn --json` must give the `allocated_bytes`
//! and `unattributed_bytes` figures. The driver's own small overhead is not shown as hidden
//! processes. (`ps` in a given setting is tested with that setting: `kubelet`, `hidepid`,
//! `pid_namespace`, `hostile_names`, `compat`, the `drm` and `mig` backends.)
#![cfg(target_os = "linux")]

use std::process::{Child, Command, Output};

use super::basics::two_gpus;
use crate::util::hmn::{run, with_fake};

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TOTAL: u64 = 143_771 * MIB;
const RESERVED: u64 = 616 * MIB;
/// A pid above the default `pid_max`: no such process here, as one of another namespace.
const FOREIGN: u32 = 4_194_300;

/// A real process of this namespace, for the driver to list.
fn local_process() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

/// An H200 on which `local` holds 1 GiB, a process of another namespace `foreign` bytes, and the
/// driver `overhead` bytes of its own.
fn scenario(local: u32, foreign: u64, overhead: u64, hide: bool) -> String {
    let allocated = GIB + foreign + overhead;
    format!(
        r#"{{"hide_other_namespaces": {hide}, "process_names": {{"{local}": "trainer"}},
            "devices": [{{"name": "NVIDIA H200", "total": {TOTAL}, "reserved": {RESERVED},
            "free": {free}, "compute_processes": [{{"pid": {local}, "used": {GIB}}},
            {{"pid": {FOREIGN}, "used": {foreign}}}]}}]}}"#,
        free = TOTAL - RESERVED - allocated
    )
}

fn hmn(scenario: &str, args: &[&str]) -> Output {
    crate::util::hmn::hmn()
        .args(args)
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .env("HYPOMNESIS_SYSFS", empty_dir())
        .env("PATH", empty_dir())
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn memory_of_hidden_processes_is_a_row_of_its_own_with_the_reason() {
    let mut child = local_process();
    let pid = child.id();
    let sc = scenario(pid, 18 * GIB, 20 * MIB, true);
    let o = hmn(&sc, &["ps"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&pid.to_string()) && l.contains("1.0 GiB")),
        "{out}"
    );
    assert!(
        !out.contains(&FOREIGN.to_string()),
        "the driver hid it: {out}"
    );
    let hidden: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("(not visible from here)"))
        .collect();
    assert_eq!(hidden.len(), 1, "{out}");
    assert!(hidden[0].starts_with("- "), "{out}");
    // 18 GiB of the hidden process and 20 MiB of the driver's own: 18.0 GiB.
    assert!(
        hidden[0].contains("18.0 GiB") && hidden[0].contains("  0  NVIDIA H200"),
        "{out}"
    );
    assert!(err.contains("hmn: 1 GPU process found"), "{err}");
    assert!(
        err.contains("18.0 GiB on GPU 0 is held by processes not visible from here")
            && err.contains("PID namespace"),
        "{err}"
    );
    // In the host's PID namespace, no process is in another: then it never sends the reader
    // there ("run with hostPID"), elsewhere it does.
    let initial =
        std::fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.as_os_str() == "pid:[4026531836]");
    assert_eq!(err.contains("--procfs /host/proc"), !initial, "{err}");
    assert_eq!(
        err.contains("`hmn ghosts` looks for who holds"),
        initial,
        "{err}"
    );

    let o = hmn(&sc, &["--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["allocated_bytes"], GIB + 18 * GIB + 20 * MIB);
    assert_eq!(v[0]["unattributed_bytes"], 18 * GIB + 20 * MIB);
    assert_eq!(v[0]["used_bytes"], GIB + 18 * GIB + 20 * MIB + RESERVED);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn with_every_process_hidden_the_memory_does_not_vanish() {
    // The container case measured on the H200: 0 processes listed, 17.8 GiB allocated.
    let sc = format!(
        r#"{{"hide_other_namespaces": true, "devices": [{{"name": "NVIDIA H200",
            "total": {TOTAL}, "reserved": {RESERVED}, "free": {free},
            "compute_processes": [{{"pid": {FOREIGN}, "used": {used}}}]}}]}}"#,
        used = 19_112_604_467_u64,
        free = TOTAL - RESERVED - 19_112_604_467
    );
    let o = hmn(&sc, &["ps"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("(not visible from here)") && out.contains("17.8 GiB"),
        "{out}"
    );
    assert!(err.contains("hmn: 0 GPU processes found"), "{err}");
    assert!(
        err.contains("17.8 GiB on GPU 0 is held by processes not visible"),
        "{err}"
    );
}

#[test]
fn the_drivers_own_overhead_is_not_a_hidden_process() {
    let mut child = local_process();
    // What the H200 showed with its processes all listed: 20 MiB beyond the rows.
    let sc = scenario(child.id(), 0, 20 * MIB, false);
    let o = hmn(&sc, &["ps"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(!out.contains("not visible"), "{out}");
    assert!(!err.contains("not visible"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&text(&hmn(&sc, &["--json"])).0).unwrap();
    assert_eq!(
        v[0]["unattributed_bytes"],
        20 * MIB,
        "the figure itself is exact"
    );
    // Without the hiding the foreign row is listed (0 bytes here) and nothing is hidden either.
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_pid_filter_shows_no_hidden_row() {
    let mut child = local_process();
    let sc = scenario(child.id(), 18 * GIB, 0, true);
    let o = hmn(&sc, &["ps", "--pid", &child.id().to_string()]);
    let (out, err) = text(&o);
    assert!(
        !out.contains("not visible") && !err.contains("not visible"),
        "{out}{err}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// An MPS node: the server in the compute list, one client in the MPS list only (`M`), one in
/// both (`M+C`), and memory no listed process holds. `hmn ps` lists every client once with its
/// type, marks the server, and blames MPS, not the PID namespace, for the rest; `--json` says
/// the same.
#[test]
fn mps_clients_are_rows_of_their_own_and_the_rest_is_put_on_mps() {
    let dir = std::env::temp_dir().join(format!("hmn-cli-mps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("nvidia-cuda-mps-server");
    std::fs::copy("/bin/sleep", &exe).unwrap();
    let mut server = Command::new(&exe).arg("60").spawn().unwrap();
    let (mut client_a, mut client_b) = (local_process(), local_process());
    let (server_pid, a_pid, b_pid) = (server.id(), client_a.id(), client_b.id());
    let allocated = 30 * MIB + 3 * GIB + 2 * GIB + 5 * GIB;
    let sc = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {TOTAL}, "reserved": {RESERVED},
            "free": {free},
            "compute_processes": [{{"pid": {server_pid}, "used": {server_used}}}, {{"pid": {a_pid}, "used": {a_used}}}],
            "mps_processes": [{{"pid": {a_pid}, "used": {a_used}}}, {{"pid": {b_pid}, "used": {b_used}}}]}}]}}"#,
        free = TOTAL - RESERVED - allocated,
        server_used = 30 * MIB,
        a_used = 3 * GIB,
        b_used = 2 * GIB,
    );
    let o = hmn(&sc, &["ps"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let row = |pid: u32| {
        out.lines()
            .find(|l| l.starts_with(&format!("{pid} ")))
            .unwrap_or_else(|| panic!("{pid} in\n{out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(row(a_pid)[2], "M+C", "{out}");
    assert_eq!(row(b_pid)[2], "M", "{out}");
    assert_eq!(row(server_pid)[2], "C", "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&server_pid.to_string()) && l.ends_with("(MPS server)")),
        "{out}"
    );
    assert_eq!(
        out.matches(&format!("{a_pid} ")).count(),
        1,
        "one row for a client in two lists: {out}"
    );
    assert!(out.contains("(not visible from here)"), "{out}");
    assert!(err.contains("MPS runs there"), "{err}");
    assert!(!err.contains("PID namespace (docker"), "{err}");
    let o = hmn(&sc, &["ps", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let json_row = |pid: u32| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["pid"] == pid)
            .unwrap_or_else(|| panic!("{pid} in {v}"))
            .clone()
    };
    assert_eq!(json_row(a_pid)["context"], "mps_and_compute");
    assert_eq!(json_row(a_pid)["used_bytes"], 3 * GIB, "counted once");
    assert_eq!(json_row(b_pid)["context"], "mps");
    assert_eq!(json_row(server_pid)["mps_server"], true);
    assert_eq!(json_row(b_pid)["mps_server"], false);
    for c in [&mut server, &mut client_a, &mut client_b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn ps_lists_every_device_with_stderr_summary() {
    let (code, out, err) = run(with_fake(&two_gpus()), &["ps"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "\
PID                    USER  TYPE      VRAM  SHARED  SPILL  RSS  GPU  DEVICE       COMMAND
4194400 (no such pid)  ?     C     16.0 GiB   0 MiB  n/a      ?    0  NVIDIA H200  ?
4194402 (no such pid)  ?     C      650 MiB   0 MiB  n/a      ?    1  NVIDIA H200  ?
4194401 (no such pid)  ?     C      512 MiB   0 MiB  n/a      ?    0  NVIDIA H200  ?
-                      -     -     15.1 GiB       -  -        -    0  NVIDIA H200  (not visible from here)
"
    );
    // GPU 0 has 32361 MiB allocated (total - reserved - free) and rows for 16.5 GiB of it;
    // GPU 1 (reserved 0): its 650 MiB row leaves 69 MiB, within the driver overhead allowance.
    assert!(
        err.starts_with(
            "hmn: 3 GPU processes found (17.1 GiB committed total).\n\
             hmn: 3 processes are listed with a pid no process here can have (above pid_max, and this is the initial PID namespace): memory counted, the process unknown.\n\
             hmn: 15.1 GiB on GPU 0 is held by processes not visible from here: "
        ),
        "{err}"
    );
    let (_, out, err) = run(with_fake(&two_gpus()), &["ps", "--device", "1", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["pid"], 4_194_402);
    assert!(v[0]["name"].is_null());
    assert_eq!(v[0]["device_index"], 1);
    assert_eq!(v[0]["device_name"], "NVIDIA H200");
    assert_eq!(v[0]["shared_used_bytes"], 0);
    assert!(
        err.starts_with("hmn: 1 GPU process found matching device=1 (650 MiB committed total).\n"),
        "{err}"
    );
    assert_eq!(
        err.lines().count(),
        2,
        "the summary and why the row is unknown: {err}"
    );
    let (_, out, err) = run(
        with_fake(&two_gpus()),
        &["ps", "--pid", "4194401", "--sort", "pid"],
    );
    assert_eq!(out.lines().count(), 2);
    assert!(
        err.starts_with(
            "hmn: 1 GPU process found matching pid=4194401 (512 MiB committed total).\n"
        ),
        "{err}"
    );
    let (code, _, err) = run(with_fake(&two_gpus()), &["ps", "--device", "7"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("GPU index 7 is out of range: 2 device(s) present"),
        "{err}"
    );
}
