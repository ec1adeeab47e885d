//! The one table of the lines recognised: each with the engine, what it marks, the word that
//! must be on the line for it to be looked at, the whole pattern the line must match, and the
//! versions it was seen in (`docs/engines.md` names where).
//!
//! A pattern's named groups are its figures. A group's text that ends with a unit (`12.5 GiB`,
//! `810 MiB`, `3.2 GB`) is bytes, named `<group>_bytes`; one without is a number (`kv_tokens`,
//! `seconds`, `utilization`; thousands separators allowed), but a group named `…_gib` is a size
//! in GiB whose unit the line gives elsewhere, and one named `…_b` a count of bytes. A group
//! named `…_alt` is the same
//! figure as the group without the suffix (another wording of one line). SGLang's `GB` are
//! GiB (it divides by `1 << 30`), and so are vLLM 0.8's; elsewhere a `GB` is 10^9 bytes.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use regex::Regex;
use serde::Serialize;

/// The engine a line comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Engine {
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "sglang")]
    Sglang,
    #[serde(rename = "tensorrt-llm")]
    TrtLlm,
    /// PyTorch's own out-of-memory error (any engine built on it, any training script).
    #[serde(rename = "pytorch")]
    Torch,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Self::Vllm => "vLLM",
            Self::Sglang => "SGLang",
            Self::TrtLlm => "TensorRT-LLM",
            Self::Torch => "PyTorch",
        }
    }
}

/// What a line marks in the engine's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// It starts loading its weights.
    LoadingWeights,
    /// Its weights are loaded (their size).
    WeightsLoaded,
    /// Its memory profiling run is done (what it measured).
    Profiled,
    /// It decided its KV cache's size.
    KvCacheSized,
    /// Its KV cache is allocated (tokens, bytes).
    KvCacheAllocated,
    /// It starts capturing CUDA graphs (or estimated their memory).
    CapturingGraphs,
    /// Its CUDA graphs are captured (their memory).
    GraphsCaptured,
    /// It is ready to serve.
    Ready,
    /// It failed for want of memory.
    OutOfMemory,
}

impl Kind {
    /// What the engine was doing in the stretch a line of this kind ends ("while it was …").
    pub fn doing(self) -> &'static str {
        match self {
            Self::LoadingWeights => "starting",
            Self::WeightsLoaded => "loading its weights",
            Self::Profiled => "profiling memory",
            Self::KvCacheSized => "sizing its KV cache",
            Self::KvCacheAllocated => "allocating its KV cache",
            Self::CapturingGraphs => "preparing CUDA graphs",
            Self::GraphsCaptured => "capturing CUDA graphs",
            Self::Ready => "finishing its start",
            Self::OutOfMemory => "starting, until it ran out of memory",
        }
    }
}

/// One line the table knows.
#[derive(Debug)]
pub struct Pattern {
    pub name: &'static str,
    pub engine: Engine,
    pub kind: Kind,
    /// Words the line must hold to be looked at (found by one search over the output).
    pub anchor: &'static str,
    /// The whole line's expression (a number is `{N}`, a size `{SIZE}`: written out before
    /// compiling).
    pub expression: &'static str,
    /// The versions it was seen in.
    pub seen_in: &'static str,
}

/// A number: `12`, `12.5`, `1,234,567`, `-0.02`.
const N: &str = r"-?[0-9][0-9,]*(?:\.[0-9]+)?";
/// A size: a number and its unit.
const SIZE: &str = r"-?[0-9][0-9,]*(?:\.[0-9]+)? ?(?:[KMGT]i?B|B)";

/// The table.
pub const TABLE: &[Pattern] = &[
    // vLLM, V1 engine (wording, not the file:line prefix, which moves between versions).
    Pattern {
        name: "vllm.weights",
        engine: Engine::Vllm,
        kind: Kind::WeightsLoaded,
        anchor: "Model loading took",
        expression: r"Model loading took (?P<weights>{SIZE})(?: memory)? and (?P<seconds>{N}) ?s(?:ec(?:ond)?s?)?",
        seen_in: "vLLM 0.8.0–0.8.2 (`GB`, meaning GiB), 0.8.5.post1–0.11.0 (`GiB and`), 0.11.1–0.34.0 (`GiB memory and`)",
    },
    Pattern {
        name: "vllm.profile",
        engine: Engine::Vllm,
        kind: Kind::Profiled,
        anchor: "Memory profiling takes",
        expression: r"Memory profiling takes (?P<seconds>{N}) seconds\.? ?Total non KV cache memory: (?P<non_kv>{SIZE}); torch peak memory increase: (?P<activations>{SIZE}); non-torch forward increase memory: (?P<non_torch>{SIZE}); weights memory: (?P<weights>{SIZE})",
        seen_in: "vLLM 0.9.1–0.34.0, at DEBUG only (VLLM_LOGGING_LEVEL=DEBUG)",
    },
    Pattern {
        name: "vllm.kv_cache_memory",
        engine: Engine::Vllm,
        kind: Kind::KvCacheSized,
        anchor: "Available KV cache memory:",
        expression: r"Available KV cache memory: (?P<kv_cache>{SIZE})",
        seen_in: "vLLM 0.9.1–0.34.0",
    },
    Pattern {
        name: "vllm.kv_cache_tokens",
        engine: Engine::Vllm,
        kind: Kind::KvCacheAllocated,
        anchor: "KV cache size:",
        expression: r"GPU KV cache size: (?P<kv_tokens>{N}) tokens",
        seen_in: "vLLM 0.8.0–0.34.0 (one line with the concurrency from 0.28.0)",
    },
    Pattern {
        name: "vllm.graphs_estimated",
        engine: Engine::Vllm,
        kind: Kind::CapturingGraphs,
        anchor: "Estimated CUDA graph memory:",
        expression: r"Estimated CUDA graph memory: (?P<cuda_graphs_estimate>{SIZE}) total",
        seen_in: "vLLM 0.18.0–0.33.0",
    },
    Pattern {
        name: "vllm.graphs_captured",
        engine: Engine::Vllm,
        kind: Kind::GraphsCaptured,
        anchor: "Graph capturing finished in",
        expression: r"Graph capturing finished in (?P<seconds>{N}) secs?, took (?P<cuda_graphs>{SIZE})",
        seen_in: "vLLM 0.7.3–0.34.0",
    },
    Pattern {
        name: "vllm.graph_pool",
        engine: Engine::Vllm,
        kind: Kind::GraphsCaptured,
        anchor: "CUDA graph pool memory:",
        expression: r"CUDA graph pool memory: (?P<cuda_graphs>{SIZE}) \(actual\), (?P<cuda_graphs_estimate>{SIZE}) \(estimated\)",
        seen_in: "vLLM 0.18.0–0.34.0",
    },
    Pattern {
        name: "vllm.ready",
        engine: Engine::Vllm,
        kind: Kind::Ready,
        anchor: "init engine (profile, create kv cache, warmup model) took",
        expression: r"init engine \(profile, create kv cache, warmup model\) took (?P<seconds>{N}) ?s(?:econds)?",
        seen_in: "vLLM 0.7.3–0.19 (`seconds`), 0.20.0–0.34.0 (`s`)",
    },
    Pattern {
        name: "vllm.free_below_utilization",
        engine: Engine::Vllm,
        kind: Kind::OutOfMemory,
        anchor: "is less than desired GPU memory utilization",
        expression: r"Free memory on device (?:cuda:(?P<device>{N}) )?\((?P<free_gib>{N})/(?P<total_gib>{N}) GiB\) on startup is less than desired GPU memory utilization \((?P<utilization>{N}), (?P<wanted>{SIZE})\)",
        seen_in: "vLLM 0.9.1–0.13.0 (no device), 0.14.0–0.34.0 (`cuda:N`)",
    },
    Pattern {
        name: "vllm.profiling_error",
        engine: Engine::Vllm,
        kind: Kind::OutOfMemory,
        anchor: "Error in memory profiling.",
        expression: r"Error in memory profiling\. Initial free memory (?:(?P<free_before>{SIZE})|(?P<free_before_b>{N})), current free memory (?:(?P<free_after>{SIZE})|(?P<free_after_b>{N}))",
        seen_in: "vLLM 0.7.3–0.9.0 (bytes), 0.9.1–0.27 (GiB)",
    },
    Pattern {
        name: "vllm.no_cache_blocks",
        engine: Engine::Vllm,
        kind: Kind::OutOfMemory,
        anchor: "No available memory for the cache blocks",
        expression: r"No available memory for the cache blocks",
        seen_in: "vLLM 0.7.3–0.34.0",
    },
    // SGLang.
    Pattern {
        name: "sglang.load_begin",
        engine: Engine::Sglang,
        kind: Kind::LoadingWeights,
        anchor: "Load weight begin.",
        expression: r"Load weight begin\. avail mem=(?P<free>{SIZE})",
        seen_in: "SGLang 0.3.6–0.5.23",
    },
    Pattern {
        name: "sglang.load_end",
        engine: Engine::Sglang,
        kind: Kind::WeightsLoaded,
        anchor: "Load weight end.",
        expression: r"Load weight end\. .*?avail mem=(?P<free>{SIZE})(?:, mem usage=(?P<weights>{SIZE}))?",
        seen_in: "SGLang 0.3.6–0.4.3 (no mem usage), 0.4.4–0.5.8, 0.5.9–0.5.23 (`elapsed=`, no `dtype=`)",
    },
    Pattern {
        name: "sglang.kv_cache",
        engine: Engine::Sglang,
        kind: Kind::KvCacheAllocated,
        anchor: "KV Cache is allocated.",
        expression: r"KV Cache is allocated\. (?:dtype: [^,]+, )?(?:#tokens: (?P<kv_tokens>{N}), )?(?:K size: (?P<k_cache>{SIZE}), V size: (?P<v_cache>{SIZE})|KV size: (?P<kv_cache>{SIZE}))",
        seen_in: "SGLang 0.4.3 (no #tokens), 0.4.4–0.5.12, 0.5.13–0.5.23 (`dtype:`); MLA `KV size` from 0.4.6.post1",
    },
    Pattern {
        name: "sglang.pool_end",
        engine: Engine::Sglang,
        kind: Kind::KvCacheAllocated,
        anchor: "Memory pool end.",
        expression: r"Memory pool end\. avail mem=(?P<free>{SIZE})",
        seen_in: "SGLang 0.3.6–0.5.23",
    },
    Pattern {
        name: "sglang.graphs_begin",
        engine: Engine::Sglang,
        kind: Kind::CapturingGraphs,
        anchor: "graph begin.",
        expression: r"Capture (?:[a-z]+ )*(?:cuda|CUDA) graph begin\..*?avail mem=(?P<free>{SIZE})",
        seen_in: "SGLang 0.4.4–0.5.13 (`Capture cuda graph begin`), 0.5.14–0.5.23 (`Capture target decode CUDA graph begin`)",
    },
    Pattern {
        name: "sglang.graphs_end",
        engine: Engine::Sglang,
        kind: Kind::GraphsCaptured,
        anchor: "graph end.",
        expression: r"Capture (?:[a-z]+ )*(?:cuda|CUDA) graph end\.(?: bs=\[[^\]]*\],)? (?:Time elapsed: (?P<seconds>{N}) ?s|elapsed=(?P<seconds_alt>{N}) ?s)(?:.*?mem usage=(?P<cuda_graphs>{SIZE}))?(?:.*?avail mem=(?P<free>{SIZE}))?",
        seen_in: "SGLang 0.4.0–0.5.13 (`Time elapsed:`; avail before mem usage in 0.4.4–0.4.5), 0.5.14–0.5.23 (`Capture target decode CUDA graph end. elapsed=`)",
    },
    // TensorRT-LLM, PyTorch backend.
    Pattern {
        name: "trtllm.weights",
        engine: Engine::TrtLlm,
        kind: Kind::WeightsLoaded,
        anchor: "model weights (inside torch) in memory usage profiling",
        expression: r"Memory used after loading model weights \(inside torch\) in memory usage profiling: (?P<weights>{SIZE})",
        seen_in: "TensorRT-LLM 1.1.0rc3 (the wording since NVIDIA/TensorRT-LLM#3467, April 2025)",
    },
    Pattern {
        name: "trtllm.weights_outside",
        engine: Engine::TrtLlm,
        kind: Kind::WeightsLoaded,
        anchor: "model weights (outside torch) in memory usage profiling",
        expression: r"Memory used after loading model weights \(outside torch\) in memory usage profiling: (?P<non_torch>{SIZE})",
        seen_in: "TensorRT-LLM 1.1.0rc3",
    },
    Pattern {
        name: "trtllm.activations",
        engine: Engine::TrtLlm,
        kind: Kind::Profiled,
        anchor: "during inference (inside torch) in memory usage profiling",
        expression: r"Memory dynamically allocated during inference \(inside torch\) in memory usage profiling: (?P<activations>{SIZE})",
        seen_in: "TensorRT-LLM 1.1.0rc3",
    },
    Pattern {
        name: "trtllm.outside_torch",
        engine: Engine::TrtLlm,
        kind: Kind::Profiled,
        anchor: "Memory used outside torch (e.g., NCCL and CUDA graphs)",
        expression: r"Memory used outside torch \(e\.g\., NCCL and CUDA graphs\) in memory usage profiling: (?P<non_torch>{SIZE})",
        seen_in: "TensorRT-LLM 1.1.0rc3",
    },
    Pattern {
        name: "trtllm.kv_cache",
        engine: Engine::TrtLlm,
        kind: Kind::KvCacheSized,
        anchor: "Peak memory during memory usage profiling",
        expression: r"Peak memory during memory usage profiling \(torch \+ non-torch\): (?P<peak>{SIZE}), available KV cache memory when calculating max tokens: (?P<kv_cache>{SIZE})",
        seen_in: "TensorRT-LLM 1.1.0rc3 (also the shorter and longer forms of 2025–2026: the figures lead the line in each)",
    },
    Pattern {
        name: "trtllm.kv_cache_allocated",
        engine: Engine::TrtLlm,
        kind: Kind::KvCacheAllocated,
        anchor: "for max tokens in paged KV cache",
        expression: r"\[MemUsageChange\] Allocated (?P<kv_cache>{SIZE}) for max tokens in paged KV cache \((?P<kv_tokens>{N})\)",
        seen_in: "TensorRT-LLM 1.1.0rc3 (its C++ logger)",
    },
    Pattern {
        name: "sglang.not_enough_memory",
        engine: Engine::Sglang,
        kind: Kind::OutOfMemory,
        anchor: "Not enough memory. Please try to increase --mem-fraction-static",
        expression: r"Not enough memory\. Please try to increase --mem-fraction-static",
        seen_in: "SGLang 0.3.6–0.5.23",
    },
    // PyTorch's out-of-memory error: any engine or script on it.
    Pattern {
        name: "pytorch.out_of_memory",
        engine: Engine::Torch,
        kind: Kind::OutOfMemory,
        anchor: "CUDA out of memory.",
        expression: r"CUDA out of memory\. Tried to allocate (?P<tried>{SIZE})\. GPU (?P<device>{N}) has a total capac(?:i)?ty of (?P<total>{SIZE}) of which (?P<free>{SIZE}) is free\.(?:.*?this process has (?P<in_use>{SIZE}) memory in use)?",
        seen_in: "PyTorch 2.1 (`capacty`), 2.2–2.9",
    },
    Pattern {
        name: "pytorch.out_of_memory_2_0",
        engine: Engine::Torch,
        kind: Kind::OutOfMemory,
        anchor: "total capacity;",
        expression: r"CUDA out of memory\. Tried to allocate (?P<tried>{SIZE}) \(GPU (?P<device>{N}); (?P<total>{SIZE}) total capacity; (?P<allocated>{SIZE}) already allocated; (?P<free>{SIZE}) free;",
        seen_in: "PyTorch 2.0 and before",
    },
];

/// The table compiled: the anchors' search and each pattern's expression.
pub struct Compiled {
    pub anchors: AhoCorasick,
    /// The same words for the search over the whole output: SIMD (Teddy) where the CPU has
    /// it, many times the automaton's speed on text that holds none of them.
    pub fast: Option<aho_corasick::packed::Searcher>,
    pub patterns: Vec<Regex>,
}

/// The table, compiled once (`None` if it could not be: a test proves it can).
pub fn compiled() -> Option<&'static Compiled> {
    static COMPILED: OnceLock<Option<Compiled>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let anchors = AhoCorasick::new(TABLE.iter().map(|p| p.anchor)).ok()?;
            let patterns = TABLE
                .iter()
                .map(|p| Regex::new(&expand(p.expression)))
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            let fast = aho_corasick::packed::Searcher::new(TABLE.iter().map(|p| p.anchor));
            Some(Compiled {
                anchors,
                fast,
                patterns,
            })
        })
        .as_ref()
}

/// `pattern` with `{SIZE}` and `{N}` written out.
pub fn expand(pattern: &str) -> String {
    pattern.replace("{SIZE}", SIZE).replace("{N}", N)
}
