//! Windows checks that run anywhere Windows binaries run, including under Wine in CI (which has
//! DXGI but no GPU counters): RSS is sane, the DXGI and PDH sources answer or fail with their
//! named errors, and `hmn.exe` exits with the documented codes and a clear sentence.
#![cfg(windows)]

use hypomnesis::{GpuQuerySource, HypomnesisError, SourceState};

const MIB: u64 = 1 << 20;

#[test]
fn this_process_has_an_owner_an_executable_and_a_working_set() {
    let ctx = hypomnesis::process_context(std::process::id());
    println!("{ctx:?}");
    let exe = std::env::current_exe().unwrap();
    let command = ctx.command.as_deref().unwrap();
    assert!(
        command.to_ascii_lowercase().ends_with(".exe")
            && command.contains(exe.file_stem().unwrap().to_str().unwrap()),
        "{command} is not {}",
        exe.display()
    );
    assert!(
        ctx.user.as_deref().is_some_and(|u| !u.is_empty()),
        "{ctx:?}"
    );
    assert!(ctx.rss_bytes.unwrap() > MIB);
    assert_eq!(ctx.uid, None, "Windows has SIDs, not uids");
    assert_eq!(ctx.container, None);
    // CPU time (GetProcessTimes): a test binary that has run has used some.
    assert!(
        ctx.cpu_time.is_some_and(|t| t > std::time::Duration::ZERO),
        "{ctx:?}"
    );
    // The host's RAM (GlobalMemoryStatusEx).
    let ram = hypomnesis::host_memory().unwrap();
    assert!(ram.total_bytes > 64 * MIB, "{ram:?}");
    assert!(
        ram.available_bytes.is_some_and(|a| a <= ram.total_bytes),
        "{ram:?}"
    );
    // A pid that does not exist has no context.
    assert_eq!(
        hypomnesis::process_context(0xFFFF_FFF0),
        hypomnesis::ProcessContext::default()
    );
}

#[test]
fn rss_is_a_sane_positive_number_and_follows_allocations() {
    let before = hypomnesis::process_rss().unwrap();
    assert!(before > MIB && before < 64 << 30, "working set {before}");
    let mut block = vec![0_u8; 256 << 20];
    for i in (0..block.len()).step_by(4096) {
        block[i] = 1;
    }
    let block = std::hint::black_box(block);
    let after = hypomnesis::process_rss().unwrap();
    assert!(
        after >= before + (250 << 20),
        "working set went from {before} to {after}"
    );
    drop(block);
}

/// An error from a Windows source, or "no source": never a panic, never an unnamed failure.
fn named(e: &HypomnesisError) -> bool {
    matches!(
        e,
        HypomnesisError::Dxgi(_)
            | HypomnesisError::Pdh(_)
            | HypomnesisError::Nvml(_)
            | HypomnesisError::NvidiaSmi(_)
            | HypomnesisError::NoGpuSource
    )
}

#[test]
fn dxgi_and_pdh_answer_or_fail_with_named_errors() {
    match hypomnesis::device_count() {
        Ok(n) => {
            println!("{n} device(s)");
            for i in 0..n {
                match hypomnesis::device_info(i) {
                    Ok(d) => {
                        println!("device {i}: {d:?}");
                        assert_eq!(d.free_bytes + d.used_bytes, d.total_bytes);
                        assert_eq!(d.reserved_bytes, None, "DXGI has no reservation figure");
                    }
                    Err(e) => assert!(named(&e), "{e:?}"),
                }
                match hypomnesis::process_gpu_info(i) {
                    Ok(p) => assert_eq!(p.source, GpuQuerySource::Dxgi),
                    Err(e) => assert!(named(&e), "{e:?}"),
                }
                if let Err(e) = hypomnesis::gpu_processes(i) {
                    assert!(named(&e), "{e:?}");
                }
            }
        }
        Err(e) => assert!(named(&e), "{e:?}"),
    }
    let reports = hypomnesis::sources();
    for r in &reports {
        println!("{:?}: {:?} {:?}", r.source, r.state, r.details);
    }
    let nvml = reports
        .iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap();
    if let SourceState::Absent(why) = &nvml.state {
        assert!(
            why.message.contains("nvml.dll"),
            "NVML is looked for by absolute path: {why}"
        );
        assert!(why.message.contains("System32"), "{why}");
    }
    assert!(reports.iter().any(|r| r.source == GpuQuerySource::Dxgi));
    // One snapshot per GPU, none without one (0.2.x); RAM is measured either way.
    match (hypomnesis::Snapshot::all(), hypomnesis::device_count()) {
        (Ok(all), Ok(n)) => {
            assert_eq!(all.len(), usize::try_from(n).unwrap());
            assert!(all.iter().all(|s| s.ram_bytes > 0));
        }
        (Ok(all), Err(HypomnesisError::NoGpuSource)) => assert!(all.is_empty()),
        (Err(e), _) | (Ok(_), Err(e)) => assert!(named(&e), "{e:?}"),
    }
    assert!(hypomnesis::Snapshot::now(0).unwrap().ram_bytes > 0);
}

fn hmn(args: &[&str]) -> (i32, String, String) {
    let out = crate::util::hmn::hmn().args(args).output().unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!e.contains("panicked"), "hmn {args:?} panicked: {e}");
    (out.status.code().unwrap_or(-1), o, e)
}

#[test]
fn hmn_exe_exits_with_the_documented_codes() {
    let (code, out, err) = hmn(&[]);
    println!("hmn: {code}\n{out}{err}");
    assert!(code == 0 || code == 1, "{code}");
    if code == 0 {
        assert!(
            out.starts_with("GPU ") || out.starts_with("No GPU found"),
            "{out}"
        );
    } else {
        assert!(err.starts_with("hmn: "), "{err}");
    }
    let (code, out, err) = hmn(&["ps"]);
    println!("hmn ps: {code}\n{out}{err}");
    assert!(code == 0 || code == 1, "{code}");
    assert!(
        err.contains("GPU process") || err.contains("hmn: "),
        "{err}"
    );
    let (code, out, _) = hmn(&["doctor"]);
    println!("hmn doctor: {code}\n{out}");
    assert_eq!(code, 0);
    assert!(
        out.contains("RAM: answered") && out.contains("DXGI"),
        "{out}"
    );
    let (code, _, _) = hmn(&["--bogus"]);
    assert_eq!(code, 2);
}

/// `hmn run` on Windows: the command writes to pipes, which hmn passes on (its bytes whole,
/// stdout and stderr apart) and reads for a serving engine's lines.
#[test]
fn hmn_run_passes_the_commands_output_on_and_hears_an_engine() {
    let (code, out, err) = hmn(&[
        "run",
        "--json",
        "--",
        "cmd",
        "/c",
        "echo Available KV cache memory: 3.00 GiB& echo to-stderr 1>&2",
    ]);
    println!("hmn run: {code}\n{out}{err}");
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Available KV cache memory: 3.00 GiB"),
        "{out}"
    );
    assert!(err.starts_with("to-stderr"), "{err}");
    let json = &out[out.find('{').unwrap()..];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["engine"]["engine"], "vllm", "{v}");
    assert_eq!(
        v["engine"]["events"][0]["figures"]["kv_cache_bytes"],
        3_u64 << 30
    );
}
