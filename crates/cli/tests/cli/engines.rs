//! `hmn run` on a serving engine's start: the stand-in engines (`scripts/standins/engine.py`:
//! vLLM 0.19.1, SGLang 0.5.23, TensorRT-LLM 1.1.0rc3 as far as their lines and their memory go)
//! on the fake NVML, whose figures they rewrite as they load, beside another process (a
//! `sleep`) whose memory a hook of the stand-in changes while the engine profiles. The ledger,
//! the neighbours' part and each failure's paragraph, in the JSON and the text; the engine's
//! output passed through byte for byte.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use support::{FakeVariant, fake_nvml};

use crate::util::hmn::isolated_with_test_path as hmn;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const TOTAL: u64 = 140 * GIB;

fn standin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/standins/engine.py")
}

/// One GPU, the stand-in engine and its neighbour.
struct Stage {
    dir: PathBuf,
    neighbour: Child,
    holds: u64,
}

impl Stage {
    /// The neighbour holds `holds` GiB; a hook at `at` (LOAD, PROFILE, KV, GRAPHS) makes it
    /// hold `then` GiB.
    fn new(name: &str, holds: u64) -> Self {
        let dir = std::env::temp_dir().join(format!("hmn-engines-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let neighbour = Command::new("sleep")
            .arg("120")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let scenario = format!(
            r#"{{"devices": [{{"name": "NVIDIA H200", "total": {TOTAL}, "reserved": 643825664,
                "free_file": "{d}/free",
                "compute_processes": [
                    {{"pid_file": "{d}/engine.pid", "used": 0, "used_file": "{d}/engine.used"}},
                    {{"pid": {n}, "used": 0, "used_file": "{d}/neighbour.used"}}]}}]}}"#,
            d = dir.display(),
            n = neighbour.id(),
        );
        std::fs::write(dir.join("scenario.json"), scenario).unwrap();
        Self {
            dir,
            neighbour,
            holds,
        }
    }

    /// The figures as before any run: the neighbour's start, the engine not there.
    fn reset(&self) {
        let _ = std::fs::remove_file(self.dir.join("engine.pid"));
        let write = |f: &str, v: u64| std::fs::write(self.dir.join(f), v.to_string()).unwrap();
        write("neighbour.used", self.holds * GIB);
        write("engine.used", 0);
        write("free", TOTAL - self.holds * GIB);
    }

    fn env(&self, c: &mut Command) {
        c.env("HMN_STANDIN_DIR", &self.dir)
            .env("HMN_STANDIN_TOTAL", TOTAL.to_string())
            .env(
                "HMN_STANDIN_OTHERS",
                self.dir.join("neighbour.used").display().to_string(),
            )
            .env("HMN_STANDIN_STEP", "0.15")
            .env("HMN_STANDIN_FIXED", "1");
    }

    fn hook(&self, at: &str, then_gib: u64) -> (String, String) {
        (
            format!("HMN_STANDIN_HOOK_{at}"),
            format!(
                "echo {} > '{}'",
                then_gib * GIB,
                self.dir.join("neighbour.used").display()
            ),
        )
    }

    /// `hmn run [args] -- engine.py ENGINE`, with `env` added.
    fn run(&self, engine: &str, args: &[&str], env: &[(String, String)]) -> Output {
        self.reset();
        let mut c = hmn();
        c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", self.dir.join("scenario.json"))
            .args(["run", "--interval", "25ms"])
            .args(args)
            .arg("--")
            .arg("python3")
            .arg(standin())
            .arg(engine);
        self.env(&mut c);
        c.envs(env.iter().map(|(k, v)| (k, v)));
        c.output().unwrap()
    }

    /// The stand-in alone (no hmn): its output.
    fn plain(&self, engine: &str) -> Vec<u8> {
        self.reset();
        let mut c = Command::new("python3");
        c.arg(standin()).arg(engine);
        self.env(&mut c);
        c.output().unwrap().stdout
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = self.neighbour.kill();
        let _ = self.neighbour.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn json(o: &Output) -> Value {
    let out = String::from_utf8_lossy(&o.stdout);
    // The summary follows the command's output, whose last line may have no end.
    let at = out.find("{\n  \"command\"").unwrap_or(0);
    serde_json::from_str(&out[at..]).unwrap_or_else(|e| {
        panic!(
            "{e}: {out}\n--- stderr ---\n{}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn bytes(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not bytes: {v}"))
}

fn near(a: u64, b: u64, within: u64) -> bool {
    a.abs_diff(b) <= within
}

#[test]
fn each_engine_is_heard_and_its_gap_is_the_context_and_slack() {
    for (engine, name, kinds) in [
        (
            "vllm",
            "vllm",
            &[
                "weights_loaded",
                "profiled",
                "kv_cache_sized",
                "kv_cache_allocated",
                "capturing_graphs",
                "graphs_captured",
                "ready",
            ][..],
        ),
        (
            "sglang",
            "sglang",
            &[
                "loading_weights",
                "weights_loaded",
                "kv_cache_allocated",
                "capturing_graphs",
                "graphs_captured",
            ][..],
        ),
        (
            "trtllm",
            "tensorrt-llm",
            &[
                "weights_loaded",
                "profiled",
                "kv_cache_sized",
                "kv_cache_allocated",
            ][..],
        ),
    ] {
        let stage = Stage::new(engine, 10);
        let o = stage.run(engine, &["--json"], &[]);
        assert!(
            o.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = json(&o);
        let e = &v["engine"];
        assert_eq!(e["engine"], name, "{e}");
        assert_eq!(e["gpu"], 0);
        let mut heard: Vec<&str> = e["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["kind"].as_str().unwrap())
            .collect();
        heard.dedup();
        assert_eq!(heard, kinds, "{engine}");
        assert!(
            e["events"][0]["seen_in"]
                .as_str()
                .unwrap()
                .contains(&['0', '1'][..])
        );
        // At its last line the driver charges the engine's own figures plus the CUDA context
        // (512 MiB) and the allocator's slack (160 MiB), which no engine counts; TensorRT-LLM
        // counts the context as its memory outside torch.
        let last = e["ledger"].as_array().unwrap().last().unwrap();
        let gap = last["gap_bytes"].as_i64().unwrap();
        let want = if engine == "trtllm" { 160 } else { 672 };
        assert!(
            (gap - want * i64::try_from(MIB).unwrap()).abs() < 24 * i64::try_from(MIB).unwrap(),
            "{engine}: gap {gap} {last}"
        );
        // No neighbour moved: no sizing paragraph, no failure.
        assert!(e["sizing"].is_null() && e["failure"].is_null(), "{e}");
        // The text says the same.
        let o = stage.run(engine, &[], &[]);
        let text = String::from_utf8_lossy(&o.stderr);
        assert!(text.contains("as it started (GPU 0)"), "{text}");
        assert!(
            text.contains("more than") && text.contains("accounts for"),
            "{text}"
        );
    }
}

#[test]
fn the_output_reaches_hmns_byte_for_byte() {
    for engine in ["vllm", "sglang", "trtllm"] {
        let stage = Stage::new(&format!("bytes-{engine}"), 10);
        let plain = stage.plain(engine);
        let stage = Stage::new(&format!("bytes2-{engine}"), 10);
        let through = stage.run(engine, &[], &[]);
        assert!(!plain.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&through.stdout),
            String::from_utf8_lossy(&plain),
            "{engine}"
        );
        assert_eq!(through.stdout, plain, "{engine}");
    }
}

#[test]
fn a_neighbour_that_loads_while_the_engine_profiles_is_named_with_its_bytes() {
    for (engine, counted) in [("vllm", true), ("sglang", false), ("trtllm", true)] {
        let stage = Stage::new(&format!("loads-{engine}"), 10);
        let svg = stage.dir.join("plot.svg");
        let o = stage.run(
            engine,
            &["--json", "--plot", svg.to_str().unwrap()],
            &[stage.hook("PROFILE", 31)],
        );
        // The plot: the engine's phases as bands, the neighbour as a line.
        let drawn = std::fs::read_to_string(&svg).unwrap();
        for label in ["loading its weights", "other processes on GPU 0"] {
            assert!(drawn.contains(label), "{engine}: {label} not drawn");
        }
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let e = &json(&o)["engine"];
        let s = &e["sizing"];
        assert_eq!(
            s["others_change_bytes"].as_i64(),
            Some(21 * 1024 * 1024 * 1024),
            "{e}"
        );
        assert_eq!(
            s["largest"][0]["pid"].as_u64(),
            Some(u64::from(stage.neighbour.id()))
        );
        assert_eq!(s["largest"][0]["command"], "sleep 120");
        // vLLM and TensorRT-LLM measured it as their own non-torch memory.
        if counted {
            assert!(
                near(bytes(&s["in_its_non_torch_bytes"]), 21 * GIB, 16 * MIB),
                "{s}"
            );
        } else {
            assert!(s["in_its_non_torch_bytes"].is_null(), "{s}");
        }
        // The phase it happened in names it.
        let phase = e["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| !p["largest"].as_array().unwrap().is_empty())
            .unwrap();
        assert_eq!(phase["largest"][0]["change_bytes"].as_i64(), Some(21 << 30));
        let o = stage.run(engine, &[], &[stage.hook("PROFILE", 31)]);
        let text = String::from_utf8_lossy(&o.stderr);
        assert!(
            text.contains(&format!(
                "pid {} `sleep 120` grew by 21.0 GiB on GPU 0",
                stage.neighbour.id()
            )),
            "{text}"
        );
        assert!(
            text.contains("sizes its KV cache from the GPU's free memory"),
            "{text}"
        );
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one table of failures
fn each_failure_names_who_held_the_memory_and_what_would_have_fitted() {
    // (engine, neighbour's start, hook, vLLM utilization, pattern, a phrase of the text)
    type Case<'a> = (
        &'a str,
        u64,
        Option<(&'a str, u64)>,
        &'a str,
        &'a str,
        &'a str,
    );
    let cases: &[Case] = &[
        (
            "vllm",
            20,
            None,
            "0.9",
            "vllm.free_below_utilization",
            "--gpu-memory-utilization 0.85 would have fitted",
        ),
        (
            "vllm",
            10,
            Some(("PROFILE", 120)),
            "0.9",
            "vllm.no_cache_blocks",
            "Without the other processes it would have had 120.0 GiB more",
        ),
        (
            "vllm",
            30,
            Some(("PROFILE", 2)),
            "0.7",
            "vllm.profiling_error",
            "Free memory rose by 12.5 GiB while it profiled",
        ),
        (
            "sglang",
            10,
            Some(("PROFILE", 110)),
            "0.9",
            "sglang.not_enough_memory",
            "--mem-fraction-static above 0.90 would have left room",
        ),
        (
            "trtllm",
            10,
            Some(("KV", 70)),
            "0.9",
            "pytorch.out_of_memory",
            "It needed 49.6 GiB more than was free",
        ),
    ];
    for (engine, holds, hook, util, pattern, phrase) in cases {
        let stage = Stage::new(&format!("fail-{pattern}"), *holds);
        let mut env = vec![("HMN_STANDIN_UTILIZATION".to_string(), (*util).to_string())];
        if let Some((at, then)) = hook {
            env.push(stage.hook(at, *then));
        }
        let o = stage.run(engine, &["--json"], &env);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{pattern}: the engine's status passed on"
        );
        let e = &json(&o)["engine"];
        let f = &e["failure"];
        assert_eq!(f["pattern"], *pattern, "{e}");
        let n = u64::from(stage.neighbour.id());
        assert_eq!(f["holders"][0]["pid"].as_u64(), Some(n), "{f}");
        assert_eq!(f["holders"][0]["command"], "sleep 120");
        assert!(f["total_bytes"].as_u64() == Some(TOTAL), "{f}");
        assert_eq!(f["reserved_bytes"].as_u64(), Some(643_825_664));
        match *pattern {
            "vllm.free_below_utilization" => {
                assert_eq!(f["utilization_that_fits"].as_f64(), Some(0.85));
                assert!(
                    near(bytes(&f["short_bytes"]), 6 * GIB + 512 * MIB, 16 * MIB),
                    "{f}"
                );
            }
            "vllm.profiling_error" => {
                assert!(
                    near(
                        bytes(&f["freed_while_profiling_bytes"]),
                        12 * GIB + 512 * MIB,
                        32 * MIB
                    ),
                    "{f}"
                );
                // What it held as it failed: its weights, context and slack.
                assert!(bytes(&f["own_bytes"]) > 15 * GIB, "{f}");
            }
            "pytorch.out_of_memory" => {
                assert!(bytes(&f["short_bytes"]) > 40 * GIB, "{f}");
            }
            _ => {}
        }
        let o = stage.run(engine, &[], &env);
        let text = String::from_utf8_lossy(&o.stderr);
        assert!(text.contains("ran out of memory at"), "{text}");
        assert!(text.contains(phrase), "{pattern}: {text}");
        assert!(text.contains(&format!("pid {n} `sleep 120`")), "{text}");
    }
}

#[test]
fn a_command_that_says_nothing_known_has_no_ledger() {
    // Near misses of the table, a last line without an end, nothing the engines print.
    let o = hmn()
        .args(["run", "--json", "--", "sh", "-c"])
        .arg("printf 'Model loading took a while\\nKV Cache is allocated.\\nGPU KV cache size: many tokens'")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(json(&o)["engine"].is_null());
    // The same last line, whole: heard without its end.
    let o = hmn()
        .args([
            "run",
            "--json",
            "--",
            "sh",
            "-c",
            "printf 'GPU KV cache size: 1,024 tokens'",
        ])
        .output()
        .unwrap();
    let e = &json(&o)["engine"];
    assert_eq!(e["events"][0]["figures"]["kv_tokens"], 1024.0, "{e}");
}

#[test]
fn output_as_is_reads_nothing() {
    let stage = Stage::new("as-is", 10);
    let o = stage.run("vllm", &["--json", "--output-as-is"], &[]);
    assert!(o.status.success());
    assert!(json(&o)["engine"].is_null());
}
