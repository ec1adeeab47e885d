//! The table against lines the engines really printed (their versions beside them), near
//! misses that must give nothing, and the scanner against the output's worst cases.

use std::time::Instant;

use super::patterns::{TABLE, compiled};
use super::scan::{Scanner, plain};
use super::{Event, Figure, Heard, Kind};

const GIB: f64 = 1_073_741_824.0;

fn heard_in(chunks: &[&[u8]]) -> Vec<Event> {
    let heard = Heard::new(Instant::now());
    let mut s = Scanner::new();
    for c in chunks {
        s.feed(c, &heard);
    }
    s.finish(&heard);
    heard.all().0
}

fn one(line: &str) -> Event {
    let events = heard_in(&[format!("{line}\n").as_bytes()]);
    assert_eq!(events.len(), 1, "{line}: {events:?}");
    events.into_iter().next().unwrap()
}

fn gib(e: &Event, name: &str) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let b = e.bytes(name).unwrap_or_else(|| panic!("{name} in {e:?}")) as f64;
    b / GIB
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.006
}

#[test]
fn the_table_compiles_and_each_name_is_unique() {
    let c = compiled().expect("the table compiles");
    assert_eq!(c.patterns.len(), TABLE.len());
    let mut names: Vec<&str> = TABLE.iter().map(|p| p.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), TABLE.len());
    assert!(TABLE.iter().all(|p| !p.seen_in.is_empty()));
}

/// One real line per pattern (the engine version that printed it), and the figures it gives.
#[test]
#[allow(clippy::too_many_lines)] // one table of lines
fn every_pattern_reads_a_real_line() {
    let mut matched = std::collections::HashSet::new();
    let mut check = |line: &str, pattern: &str, figures: &[(&str, f64)]| {
        let e = one(line);
        assert_eq!(e.pattern, pattern, "{line}");
        for (name, want) in figures {
            let got = if name.ends_with("_bytes") {
                gib(&e, name)
            } else {
                e.number(name).unwrap_or(f64::NAN)
            };
            assert!(close(got, *want), "{line}: {name} {got} != {want}");
        }
        matched.insert(pattern.to_string());
    };
    // vLLM 0.9.2, 0.8.1 (`GB`), 0.19.1 (`memory and`).
    check(
        "INFO 06-10 10:57:57 [gpu_model_runner.py:1801] Model loading took 15.2683 GiB and 3.617503 seconds",
        "vllm.weights",
        &[("weights_bytes", 15.2683), ("seconds", 3.617_503)],
    );
    check(
        "INFO 03-24 04:03:55 [gpu_model_runner.py:1176] Model loading took 14.9888 GB and 28.719376 seconds",
        "vllm.weights",
        &[("weights_bytes", 14.9888)],
    );
    check(
        "(EngineCore pid=3380462) INFO 06-25 17:21:52 [gpu_model_runner.py:4820] Model loading took 15.27 GiB memory and 4.543456 seconds",
        "vllm.weights",
        &[("weights_bytes", 15.27)],
    );
    check(
        "DEBUG 06-10 10:58:13 [gpu_worker.py:230] Memory profiling takes 1.52 seconds. Total non KV cache memory: 16.55GiB; torch peak memory increase: 1.21GiB; non-torch forward increase memory: 0.06GiB; weights memory: 15.27GiB.",
        "vllm.profile",
        &[
            ("non_kv_bytes", 16.55),
            ("activations_bytes", 1.21),
            ("non_torch_bytes", 0.06),
            ("weights_bytes", 15.27),
        ],
    );
    check(
        "INFO 06-10 10:58:13 [gpu_worker.py:232] Available KV cache memory: 18.69 GiB",
        "vllm.kv_cache_memory",
        &[("kv_cache_bytes", 18.69)],
    );
    check(
        "INFO 06-10 10:58:14 [kv_cache_utils.py:716] GPU KV cache size: 136,080 tokens",
        "vllm.kv_cache_tokens",
        &[("kv_tokens", 136_080.0)],
    );
    check(
        "GPU KV cache size: 150,745 tokens, Maximum concurrency for 124,000 tokens per request: 1.22x",
        "vllm.kv_cache_tokens",
        &[("kv_tokens", 150_745.0)],
    );
    check(
        "(EngineCore pid=3380462) INFO 06-25 17:21:58 [gpu_model_runner.py:5955] Estimated CUDA graph memory: 2.35 GiB total",
        "vllm.graphs_estimated",
        &[("cuda_graphs_estimate_bytes", 2.35)],
    );
    check(
        "INFO 06-10 10:58:37 [gpu_model_runner.py:2326] Graph capturing finished in 23 secs, took 2.24 GiB",
        "vllm.graphs_captured",
        &[("cuda_graphs_bytes", 2.24), ("seconds", 23.0)],
    );
    check(
        "(EngineCore pid=3380462) INFO 06-25 17:22:03 [gpu_worker.py:597] CUDA graph pool memory: 2.44 GiB (actual), 2.35 GiB (estimated), difference: 0.09 GiB (3.6%).",
        "vllm.graph_pool",
        &[
            ("cuda_graphs_bytes", 2.44),
            ("cuda_graphs_estimate_bytes", 2.35),
        ],
    );
    check(
        "INFO 06-10 10:58:38 [core.py:172] init engine (profile, create kv cache, warmup model) took 40.37 seconds",
        "vllm.ready",
        &[("seconds", 40.37)],
    );
    check(
        "(EngineCore pid=1) INFO 01-02 03:04:05 [core.py:283] init engine (profile, create kv cache, warmup model) took 11.08 s (compilation: 6.10 s)",
        "vllm.ready",
        &[("seconds", 11.08)],
    );
    check(
        "ValueError: Free memory on device cuda:0 (30.2/139.81 GiB) on startup is less than desired GPU memory utilization (0.9, 125.83 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "vllm.free_below_utilization",
        &[
            ("free_bytes", 30.2),
            ("total_bytes", 139.81),
            ("wanted_bytes", 125.83),
            ("utilization", 0.9),
            ("device", 0.0),
        ],
    );
    check(
        "ValueError: Free memory on device (30.2/139.81 GiB) on startup is less than desired GPU memory utilization (0.9, 125.83 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "vllm.free_below_utilization",
        &[("free_bytes", 30.2)],
    );
    check(
        "AssertionError: Error in memory profiling. Initial free memory 78.53125 GiB, current free memory 99.9 GiB. This happens when other processes sharing the same container release GPU memory while vLLM is profiling during initialization.",
        "vllm.profiling_error",
        &[("free_before_bytes", 78.531_25), ("free_after_bytes", 99.9)],
    );
    check(
        "AssertionError: Error in memory profiling. Initial free memory 1073741824, current free memory 2147483648. This happens when the GPU memory was not properly cleaned up before initializing the vLLM instance.",
        "vllm.profiling_error",
        &[("free_before_bytes", 1.0), ("free_after_bytes", 2.0)],
    );
    check(
        "(EngineCore_DP0 pid=3584999) ERROR 08-19 05:56:57 [core.py:1346] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "vllm.no_cache_blocks",
        &[],
    );
    // SGLang (its GB are GiB).
    check(
        "[2025-03-27 21:33:20 TP0] Load weight begin. avail mem=139.21 GB",
        "sglang.load_begin",
        &[("free_bytes", 139.21)],
    );
    check(
        "[2025-03-27 21:33:30 TP0] Load weight end. type=Gemma3ForConditionalGeneration, dtype=torch.bfloat16, avail mem=131.08 GB, mem usage=8.13 GB.",
        "sglang.load_end",
        &[("free_bytes", 131.08), ("weights_bytes", 8.13)],
    );
    check(
        "Load weight end. elapsed=312.45 s, type=Gemma4ForConditionalGeneration, avail mem=66.05 GB, mem usage=47.23 GB.",
        "sglang.load_end",
        &[("weights_bytes", 47.23)],
    );
    check(
        "[2025-10-16 09:06:22 TP5] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB",
        "sglang.kv_cache",
        &[
            ("kv_tokens", 2_795_207.0),
            ("k_cache_bytes", 53.31),
            ("v_cache_bytes", 53.31),
        ],
    );
    check(
        "[2026-10-10 11:59:41] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1226984, KV size: 9.21 GB",
        "sglang.kv_cache",
        &[("kv_cache_bytes", 9.21)],
    );
    check(
        "[2025-10-16 09:06:22 TP5] Memory pool end. avail mem=11.87 GB",
        "sglang.pool_end",
        &[("free_bytes", 11.87)],
    );
    check(
        "[2025-11-10 19:58:57 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=12.17 GB",
        "sglang.graphs_begin",
        &[("free_bytes", 12.17)],
    );
    check(
        "[2025-11-10 19:59:09 TP0] Capture cuda graph end. Time elapsed: 11.39 s. mem usage=1.00 GB. avail mem=11.17 GB.",
        "sglang.graphs_end",
        &[
            ("seconds", 11.39),
            ("cuda_graphs_bytes", 1.0),
            ("free_bytes", 11.17),
        ],
    );
    check(
        "[2026-07-21 13:35:33 TP0] Capture target decode CUDA graph end. elapsed=4.83 s, mem usage=0.24 GB, avail mem=7.28 GB.",
        "sglang.graphs_end",
        &[
            ("seconds", 4.83),
            ("cuda_graphs_bytes", 0.24),
            ("free_bytes", 7.28),
        ],
    );
    check(
        "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=4.83 s, mem usage=0.24 GB, avail mem=7.28 GB.",
        "sglang.graphs_end",
        &[("cuda_graphs_bytes", 0.24)],
    );
    check(
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.88",
        "sglang.not_enough_memory",
        &[],
    );
    // TensorRT-LLM 1.1.0rc3.
    check(
        "[12/20/2025-04:21:50] [TRT-LLM] [I] Memory used after loading model weights (inside torch) in memory usage profiling: 63.52 GiB",
        "trtllm.weights",
        &[("weights_bytes", 63.52)],
    );
    check(
        "[12/20/2025-04:21:50] [TRT-LLM] [I] Memory used after loading model weights (outside torch) in memory usage profiling: 49.78 GiB",
        "trtllm.weights_outside",
        &[("non_torch_bytes", 49.78)],
    );
    check(
        "[12/20/2025-04:21:51] [TRT-LLM] [I] Memory dynamically allocated during inference (inside torch) in memory usage profiling: 0.85 GiB",
        "trtllm.activations",
        &[("activations_bytes", 0.85)],
    );
    check(
        "[12/20/2025-04:21:51] [TRT-LLM] [I] Memory used outside torch (e.g., NCCL and CUDA graphs) in memory usage profiling: 49.28 GiB",
        "trtllm.outside_torch",
        &[("non_torch_bytes", 49.28)],
    );
    check(
        "[12/20/2025-04:21:51] [TRT-LLM] [I] Peak memory during memory usage profiling (torch + non-torch): 113.65 GiB, available KV cache memory when calculating max tokens: 5.95 GiB, fraction is set 0.8999999761581421, kv size is 73728. device total memory 119.70 GiB, , tmp kv_mem 0.56 GiB",
        "trtllm.kv_cache",
        &[("peak_bytes", 113.65), ("kv_cache_bytes", 5.95)],
    );
    check(
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache (86720).",
        "trtllm.kv_cache_allocated",
        &[("kv_cache_bytes", 5.95), ("kv_tokens", 86_720.0)],
    );
    // PyTorch 2.4+, 2.1 (`capacty`), 2.0.
    check(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 3.06 GiB is free. Including non-PyTorch memory, this process has 40.00 GiB memory in use. Process 4242 has 96.00 GiB memory in use.",
        "pytorch.out_of_memory",
        &[
            ("tried_bytes", 20.0),
            ("total_bytes", 139.81),
            ("free_bytes", 3.06),
            ("in_use_bytes", 40.0),
        ],
    );
    check(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacty of 44.35 GiB of which 147.88 MiB is free. Process 1107750 has 44.16 GiB memory in use.",
        "pytorch.out_of_memory",
        &[("tried_bytes", 0.5)],
    );
    check(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.75 GiB total capacity; 13.99 GiB already allocated; 3.06 MiB free; 14.08 GiB reserved in total by PyTorch)",
        "pytorch.out_of_memory_2_0",
        &[("total_bytes", 14.75), ("allocated_bytes", 13.99)],
    );
    let all: std::collections::HashSet<String> = TABLE.iter().map(|p| p.name.to_string()).collect();
    assert_eq!(matched, all, "every pattern has a real line here");
}

#[test]
fn near_misses_and_other_wordings_give_nothing() {
    for line in [
        // The anchor, but not the line: a user's own print, another wording, a cut line.
        "Model loading took a while",
        "Available KV cache memory: plenty",
        "GPU KV cache size: unknown tokens",
        "INFO Free memory on device (30.2/139.81 GiB) on startup. Desired GPU memory utilization is (0.9, 125.83 GiB).",
        "Load weight end. type=X",
        "KV Cache is allocated.",
        "Graph capturing finished in 23 secs",
        "CUDA out of memory. Tried to allocate 20.00 GiB",
        "Capture cuda graph end.",
        "Peak memory during memory usage profiling (torch + non-torch): lots",
    ] {
        assert!(
            heard_in(&[format!("{line}\n").as_bytes()]).is_empty(),
            "{line}"
        );
    }
}

#[test]
fn colours_control_bytes_and_carriage_returns_are_seen_through() {
    // vLLM's prefix in cyan, a tqdm bar redrawn with \r before the line, a bell.
    let line = "\u{1b}[36m(EngineCore pid=1)\u{1b}[0m INFO [gpu_worker.py:232] Available KV \
                cache memory: 18.69 GiB\u{7}";
    let events = heard_in(&[
        b"Loading: 10%|#  |\rLoading: 100%|###|\r",
        line.as_bytes(),
        b"\n",
    ]);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].kind, Kind::KvCacheSized);
    assert!(!events[0].line.contains('\u{1b}') && events[0].line.starts_with("(EngineCore"));
    assert_eq!(plain(b"a\x1b]0;title\x07b\x1b[1;31mc"), "abc");
}

#[test]
fn a_line_split_across_chunks_or_without_an_end_is_read() {
    let line = b"INFO Model loading took 15.27 GiB memory and 4.5 seconds";
    // Split at every byte: one event each way.
    for cut in 1..line.len() {
        let (a, b) = line.split_at(cut);
        let events = heard_in(&[b"noise\n", a, b, b"\nmore"]);
        assert_eq!(events.len(), 1, "cut at {cut}");
    }
    // The last line, with no end at all.
    assert_eq!(heard_in(&[b"x\n", line]).len(), 1);
}

#[test]
fn garbage_floods_and_overlong_lines_are_survived() {
    // Bytes of every value, no line ends in 64 KiB: nothing heard, one line too long.
    let garbage: Vec<u8> = (0..65_536_u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let heard = Heard::new(Instant::now());
    let mut s = Scanner::new();
    s.feed(&garbage, &heard);
    s.feed(b"\nGPU KV cache size: 1,000 tokens\n", &heard);
    s.finish(&heard);
    let (events, dropped, overlong) = heard.all();
    assert_eq!((events.len(), dropped), (1, 0));
    // The garbage has \n and \r bytes in it; what matters is that the real line is read.
    assert!(overlong <= 1);
    // A flood of one matching line is bounded.
    let many = "Available KV cache memory: 1.00 GiB\n".repeat(super::EVENTS_KEPT + 10);
    let heard = Heard::new(Instant::now());
    let mut s = Scanner::new();
    s.feed(many.as_bytes(), &heard);
    let (events, dropped, _) = heard.all();
    assert_eq!((events.len(), dropped), (super::EVENTS_KEPT, 10));
    // A matching line longer than the bound is not looked at.
    let long = format!(
        "Available KV cache memory: 1.00 GiB {}\n",
        "x".repeat(super::scan::LINE_MAX)
    );
    let heard = Heard::new(Instant::now());
    let mut s = Scanner::new();
    s.feed(b"start\n", &heard);
    s.feed(long.as_bytes(), &heard);
    let (events, _, overlong) = heard.all();
    assert_eq!((events.len(), overlong), (0, 1));
}

#[test]
fn figures_are_bytes_only_with_a_unit() {
    let e = one("Load weight begin. avail mem=1,024.5 GB");
    assert_eq!(
        e.figures.get("free_bytes"),
        Some(&Figure::Bytes(1_100_048_498_688))
    );
    let e = one("GPU KV cache size: 12 tokens");
    assert_eq!(e.figures.get("kv_tokens"), Some(&Figure::Number(12.0)));
    // A negative graph figure (vLLM's can be) stays a number, never a huge byte count.
    let e = one("CUDA graph pool memory: -0.19 GiB (actual), 2.43 GiB (estimated)");
    assert!(matches!(e.figures.get("cuda_graphs"), Some(Figure::Number(n)) if *n < 0.0));
}

#[test]
fn a_line_as_long_as_the_bound_is_read_and_a_longer_one_counted_once() {
    // Exactly LINE_MAX bytes, arriving in pieces with no end until the next chunk: heard.
    let words = "Available KV cache memory: 2.00 GiB ";
    let line = format!("{words}{}", "x".repeat(super::scan::LINE_MAX - words.len()));
    assert_eq!(line.len(), super::scan::LINE_MAX);
    let (front, back) = line.as_bytes().split_at(100);
    let events = heard_in(&[b"start\n", front, back, b"\n"]);
    assert_eq!(events.len(), 1);
    // A 10 KiB line is well within it.
    let line = format!("{words}{}\n", "y".repeat(10 * 1024));
    assert_eq!(heard_in(&[b"start\n", line.as_bytes()]).len(), 1);
    // 40 KiB without an end, in 8 KiB pieces: one line too long, counted once.
    let heard = Heard::new(Instant::now());
    let mut s = Scanner::new();
    s.feed(b"start\n", &heard);
    for _ in 0..5 {
        s.feed(&[b'z'; 8 * 1024], &heard);
    }
    s.feed(b"\nGPU KV cache size: 7 tokens\n", &heard);
    let (events, _, overlong) = heard.all();
    assert_eq!((events.len(), overlong), (1, 1));
}

#[test]
fn lines_in_the_middle_of_a_chunk_are_cut_at_their_ends() {
    use super::scan::line_around;
    let text = b"one\nINFO GPU KV cache size: 5 tokens\rtwo";
    let at = 9; // "GPU KV cache size:" starts at 9
    assert_eq!(line_around(text, at, at + 14), (4, 36));
    assert_eq!(line_around(b"GPU KV cache size: 5 tokens", 0, 14), (0, 27));
    // Several lines in one chunk, two of them the table's: each heard whole, in order.
    let events = heard_in(&[
        b"first\nnoise\nINFO GPU KV cache size: 5 tokens\nmiddle\r\x1b[32mAvailable KV cache memory: 3.00 GiB\x1b[0m\rlast\n",
    ]);
    let lines: Vec<&str> = events.iter().map(|e| e.line.as_str()).collect();
    assert_eq!(
        lines,
        [
            "INFO GPU KV cache size: 5 tokens",
            "Available KV cache memory: 3.00 GiB"
        ]
    );
}
