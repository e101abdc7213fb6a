//! Routing a question to aisp's tools without an LLM: classify the intent
//! from curated keyword tables, pull out what the tools need (profile paths,
//! model, GPU type and count), and plan which tools to run with which
//! arguments. The plan is also used to prime the LLM with first evidence.

use std::sync::OnceLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use aisp_knowledge::concepts::{self, normalize, troubleshooting};

/// What the question is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    SlowTraining,
    OutOfMemory,
    MultiGpuScaling,
    InferenceLatency,
    SlowKernel,
    DataLoading,
    Setup,
    CompareRuns,
    ErrorMessage,
    Concept,
    ProfileReview,
    General,
}

impl Intent {
    pub fn label(self) -> &'static str {
        match self {
            Intent::SlowTraining => "slow training",
            Intent::OutOfMemory => "out of memory",
            Intent::MultiGpuScaling => "multi-GPU scaling",
            Intent::InferenceLatency => "inference latency and throughput",
            Intent::SlowKernel => "slow kernel",
            Intent::DataLoading => "data loading and host stalls",
            Intent::Setup => "machine setup and software stack",
            Intent::CompareRuns => "comparing two runs",
            Intent::ErrorMessage => "an error message",
            Intent::Concept => "explaining a concept",
            Intent::ProfileReview => "reviewing a profile",
            Intent::General => "a general performance question",
        }
    }

    /// Concepts worth reading for this kind of question (general knowledge,
    /// never presented as measured).
    pub fn concepts(self) -> &'static [&'static str] {
        match self {
            Intent::SlowTraining | Intent::ProfileReview => &[
                "host_bound",
                "gpu_starvation",
                "kernel_launch_overhead",
                "host_device_synchronization",
                "mixed_precision",
            ],
            Intent::OutOfMemory => &[
                "activation_checkpointing",
                "memory_fragmentation",
                "zero",
                "mixed_precision",
            ],
            Intent::MultiGpuScaling => &[
                "communication_overlap",
                "nccl_ring_tree",
                "data_parallelism",
                "nvlink",
            ],
            Intent::InferenceLatency => &[
                "kv_cache",
                "continuous_batching",
                "decode_memory_bound",
                "paged_attention",
            ],
            Intent::SlowKernel => &[
                "roofline_model",
                "occupancy",
                "memory_coalescing",
                "tensor_cores",
            ],
            Intent::DataLoading => &["dataloader_workers", "pinned_memory", "host_bound"],
            Intent::Setup => &["compute_capability", "cuda_driver_compatibility"],
            Intent::CompareRuns => &["run_to_run_variance", "warmup"],
            Intent::ErrorMessage | Intent::Concept | Intent::General => &[],
        }
    }
}

/// Keyword tables: phrase → weight. Whole phrases match on word boundaries
/// of the normalized question; longer phrases carry more weight.
const KEYWORDS: &[(Intent, &[(&str, f64)])] = &[
    (
        Intent::SlowTraining,
        &[
            ("slow", 1.0),
            ("slower", 1.0),
            ("training", 1.5),
            ("train", 1.0),
            ("training step", 2.5),
            ("step time", 2.5),
            ("iteration", 1.0),
            ("throughput", 1.0),
            ("samples per second", 2.0),
            ("tokens per second", 1.0),
            ("mfu", 2.0),
            ("speed up", 1.5),
            ("faster", 1.0),
            ("gpu utilization", 2.0),
            ("utilization", 1.0),
            ("epoch", 1.0),
        ],
    ),
    (
        Intent::OutOfMemory,
        &[
            ("out of memory", 4.0),
            ("oom", 4.0),
            ("outofmemoryerror", 4.0),
            ("memory", 1.5),
            ("vram", 2.0),
            ("does not fit", 3.0),
            ("doesn t fit", 3.0),
            ("fit", 1.0),
            ("allocate", 1.5),
            ("memory usage", 2.0),
            ("batch size", 1.0),
        ],
    ),
    (
        Intent::MultiGpuScaling,
        &[
            ("multi gpu", 3.0),
            ("multiple gpus", 3.0),
            ("gpus", 1.0),
            ("ddp", 3.0),
            ("fsdp", 3.0),
            ("nccl", 3.0),
            ("all reduce", 3.0),
            ("allreduce", 3.0),
            ("scaling", 2.0),
            ("scale", 1.0),
            ("distributed", 2.0),
            ("nodes", 1.5),
            ("tensor parallel", 3.0),
            ("pipeline parallel", 3.0),
            ("nvlink", 2.0),
            ("infiniband", 2.0),
        ],
    ),
    (
        Intent::InferenceLatency,
        &[
            ("inference", 2.5),
            ("latency", 2.0),
            ("serving", 2.5),
            ("serve", 1.5),
            ("vllm", 3.0),
            ("decode", 2.0),
            ("prefill", 2.0),
            ("ttft", 3.0),
            ("time to first token", 3.0),
            ("kv cache", 2.5),
            ("tokens per second", 1.5),
            ("requests per second", 2.0),
            ("generation", 1.5),
            ("tensorrt llm", 3.0),
            ("sglang", 3.0),
        ],
    ),
    (
        Intent::SlowKernel,
        &[
            ("kernel", 2.0),
            ("kernels", 2.0),
            ("cuda kernel", 3.0),
            ("occupancy", 3.0),
            ("coalesced", 3.0),
            ("coalescing", 3.0),
            ("bank conflict", 3.0),
            ("bank conflicts", 3.0),
            ("gemm", 2.0),
            ("matmul", 2.0),
            ("tensor core", 2.0),
            ("tensor cores", 2.0),
            ("roofline", 3.0),
            ("memory bound", 2.5),
            ("compute bound", 2.5),
            ("registers", 1.5),
            ("warp", 1.5),
        ],
    ),
    (
        Intent::DataLoading,
        &[
            ("dataloader", 3.5),
            ("data loader", 3.5),
            ("data loading", 3.5),
            ("input pipeline", 3.0),
            ("num workers", 3.0),
            ("host bound", 3.0),
            ("cpu bound", 3.0),
            ("preprocessing", 2.0),
            ("pin memory", 2.5),
        ],
    ),
    (
        Intent::Setup,
        &[
            ("driver", 2.0),
            ("cuda version", 3.0),
            ("install", 2.0),
            ("setup", 2.0),
            ("environment", 1.5),
            ("container", 1.5),
            ("docker", 2.0),
            ("nvidia smi", 2.0),
            ("not detected", 2.5),
            ("which gpu", 2.5),
            ("what gpu", 2.5),
            ("my machine", 1.5),
        ],
    ),
    (
        Intent::CompareRuns,
        &[
            ("compare", 3.0),
            ("comparison", 3.0),
            ("before and after", 4.0),
            ("regression", 3.0),
            ("regressed", 3.0),
            ("got slower", 2.5),
            ("got faster", 2.5),
            ("did it help", 2.5),
            ("did my change", 3.0),
        ],
    ),
];

const CONCEPT_OPENERS: &[&str] = &[
    "what is",
    "what are",
    "what s",
    "what does",
    "what do",
    "explain",
    "define",
    "how does",
    "how do",
    "why does",
    "tell me about",
    "meaning of",
];

/// What a question mentions that the tools can use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct Entities {
    /// Profile or trace paths written in the question.
    pub paths: Vec<String>,
    /// A catalog model id recognised in the question (e.g. `llama-3.1-70b`).
    pub model: Option<String>,
    /// Parameters in billions when no catalog model was recognised.
    pub params_b: Option<f64>,
    /// A catalog GPU id (e.g. `h100-sxm`).
    pub gpu: Option<String>,
    /// GPU count.
    pub gpus: Option<u32>,
    /// Node count.
    pub nodes: Option<u32>,
}

/// The routing decision.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Route {
    pub intent: Intent,
    /// Other intents with some support, strongest first.
    pub also: Vec<Intent>,
    /// The phrases that decided it.
    pub matched: Vec<String>,
    pub entities: Entities,
    /// Knowledge-base concepts the question names.
    pub concepts: Vec<String>,
    /// Troubleshooting symptoms the question's text matches.
    pub symptoms: Vec<String>,
    /// One of them is an error (a crash or failed call), not only a performance symptom.
    pub error_message: bool,
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static regex")
}

fn path_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        re(r#"(?i)([^\s'"`,;()\[\]]+\.(?:sqlite|nsys-rep|qdrep|ncu-rep|csv|json|json\.gz))\b"#)
    })
}

/// Extract paths, model, GPU and counts.
pub fn entities(question: &str) -> Entities {
    let mut e = Entities {
        paths: path_re()
            .captures_iter(question)
            .map(|c| c[1].trim_end_matches(['.', ':']).to_string())
            .collect(),
        ..Entities::default()
    };
    e.paths.dedup();
    let q = normalize(question);
    let padded = format!(" {q} ");
    let has = |w: &str| padded.contains(&format!(" {w} "));

    // Model: family + size, else a bare size in billions.
    static SIZE: OnceLock<Regex> = OnceLock::new();
    let size_re = SIZE
        .get_or_init(|| re(r"(?i)\b(\d+(?:\.\d+)?)\s*b\b(?:\s*(?:param|model|llm|parameter))?"));
    let size: Option<f64> = size_re
        .captures(question)
        .and_then(|c| c[1].parse::<f64>().ok())
        .filter(|s| *s > 0.0 && *s < 5000.0);
    let moe = {
        static MOE: OnceLock<Regex> = OnceLock::new();
        MOE.get_or_init(|| re(r"(?i)\b8\s*x\s*(7|22)\s*b\b"))
            .captures(question)
            .map(|c| c[1].to_string())
    };
    let model = if has("deepseek") && (has("v3") || has("r1")) {
        Some("deepseek-v3")
    } else if has("mixtral") || moe.is_some() {
        match moe.as_deref() {
            Some("22") => Some("mixtral-8x22b"),
            _ => Some("mixtral-8x7b"),
        }
    } else if has("gpt3") || has("gpt 3") || (size == Some(175.0)) {
        Some("gpt3-175b")
    } else if has("llama") || has("llama3") {
        match size.map(|s| s.round() as i64) {
            Some(1) => Some("llama-3.2-1b"),
            Some(3) => Some("llama-3.2-3b"),
            Some(8) => Some("llama-3.1-8b"),
            Some(70) => Some("llama-3.1-70b"),
            Some(405) => Some("llama-3.1-405b"),
            _ => None,
        }
    } else if has("mistral") && size.map(|s| s.round() as i64) == Some(7) {
        Some("mistral-7b")
    } else if has("qwen") || has("qwen2") || has("qwen2 5") {
        match size.map(|s| s.round() as i64) {
            Some(7) => Some("qwen2.5-7b"),
            Some(72) => Some("qwen2.5-72b"),
            _ => None,
        }
    } else {
        None
    };
    e.model = model.map(str::to_string);
    if e.model.is_none() {
        e.params_b = size;
    }

    // GPU type.
    e.gpu = if has("h100") {
        Some(if has("pcie") {
            "h100-pcie"
        } else if has("nvl") {
            "h100-nvl"
        } else {
            "h100-sxm"
        })
    } else if has("h200") {
        Some("h200")
    } else if has("b200") {
        Some("b200")
    } else if has("b300") {
        Some("b300")
    } else if has("a100") {
        Some(if has("40gb") || has("40") {
            "a100-40gb"
        } else if has("pcie") {
            "a100-80gb-pcie"
        } else {
            "a100-80gb"
        })
    } else if has("l40s") {
        Some("l40s")
    } else if has("l4") {
        Some("l4")
    } else if has("t4") {
        Some("t4")
    } else if has("a10g") {
        Some("a10g")
    } else if has("a10") {
        Some("a10")
    } else if has("4090") {
        Some("rtx-4090")
    } else if has("5090") {
        Some("rtx-5090")
    } else if has("mi300x") {
        Some("mi300x")
    } else {
        None
    }
    .map(str::to_string);

    static GPUS: OnceLock<Regex> = OnceLock::new();
    let gpus_re = GPUS.get_or_init(|| {
        re(r"(?i)\b(\d{1,5})\s*(?:x\s*)?(?:gpus?|cards?|devices?|ranks?|(?:nvidia\s+)?(?:h100|h200|a100|b200|b300|l40s|l4|a10g?|4090|5090|mi300x)s?)\b")
    });
    e.gpus = gpus_re
        .captures(question)
        .and_then(|c| c[1].parse::<u32>().ok())
        .filter(|n| *n >= 1);
    static NODES: OnceLock<Regex> = OnceLock::new();
    let nodes_re = NODES.get_or_init(|| re(r"(?i)\b(\d{1,4})\s*nodes?\b"));
    e.nodes = nodes_re
        .captures(question)
        .and_then(|c| c[1].parse::<u32>().ok())
        .filter(|n| *n >= 1);
    e
}

/// Classify a question. `has_profile` says a profile was attached.
pub fn classify(question: &str, has_profile: bool) -> Route {
    let q = normalize(question);
    let padded = format!(" {q} ");
    let mut scores: Vec<(Intent, f64, Vec<String>)> = KEYWORDS
        .iter()
        .map(|(intent, words)| {
            let mut score = 0.0;
            let mut matched = Vec::new();
            for (w, weight) in *words {
                if padded.contains(&format!(" {w} ")) {
                    score += weight;
                    matched.push(w.to_string());
                }
            }
            (*intent, score, matched)
        })
        .collect();
    let entities = entities(question);
    let diagnoses = troubleshooting::diagnose(question).unwrap_or_default();
    let symptoms: Vec<String> = diagnoses.iter().map(|x| x.symptom.id.clone()).collect();
    let error_message = diagnoses.iter().any(|d| d.symptom.is_error());
    let concepts: Vec<String> = concepts::mentioned_in(question)
        .iter()
        .map(|c| c.id.clone())
        .collect();
    if error_message {
        // A pasted error message is the strongest signal there is.
        scores.push((Intent::ErrorMessage, 5.0, symptoms.clone()));
    }
    let asks_definition = CONCEPT_OPENERS
        .iter()
        .any(|o| q.starts_with(o) || padded.contains(&format!(" {o} ")));
    if asks_definition && !concepts.is_empty() {
        // "What is occupancy?" is a definition unless it is clearly about a run.
        let about_run = has_profile || q.contains(" my ");
        scores.push((
            Intent::Concept,
            if about_run { 2.0 } else { 6.0 },
            vec![concepts[0].clone()],
        ));
    }
    if entities.paths.len() >= 2
        && let Some(s) = scores.iter_mut().find(|s| s.0 == Intent::CompareRuns)
    {
        s.1 += 2.0;
    }
    scores.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (intent, matched) = match scores.first() {
        Some((i, s, m)) if *s > 0.0 => (*i, m.clone()),
        _ if has_profile => (Intent::ProfileReview, Vec::new()),
        _ => (Intent::General, Vec::new()),
    };
    // A vague "why is it slow?" with a profile attached is a profile review
    // of a training run; keep the profile in charge.
    let also = scores
        .iter()
        .skip(1)
        .filter(|(_, s, _)| *s >= 2.0)
        .map(|(i, _, _)| *i)
        .collect();
    Route {
        intent,
        also,
        matched,
        entities,
        concepts,
        symptoms,
        error_message,
    }
}

/// A tool to run and why.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCall {
    pub tool: &'static str,
    pub arguments: Value,
    pub why: &'static str,
}

fn call(tool: &'static str, arguments: Value, why: &'static str) -> PlannedCall {
    PlannedCall {
        tool,
        arguments,
        why,
    }
}

/// Model arguments shared by the planners (`model` or `params_b`, `gpu`,
/// `gpus`, and `nodes` for the training planners that take it).
fn model_args(e: &Entities, with_nodes: bool) -> Option<Map<String, Value>> {
    let mut m = Map::new();
    if let Some(model) = &e.model {
        m.insert("model".into(), json!(model));
    } else if let Some(p) = e.params_b {
        m.insert("params_b".into(), json!(p));
    } else {
        return None;
    }
    if let Some(g) = &e.gpu {
        m.insert("gpu".into(), json!(g));
    }
    if let Some(n) = e.gpus {
        m.insert("gpus".into(), json!(n));
    }
    if let Some(n) = e.nodes.filter(|_| with_nodes) {
        m.insert("nodes".into(), json!(n));
    }
    Some(m)
}

/// The tools to run for a route, in order. `profile` is the attached profile.
pub fn plan(route: &Route, question: &str, profile: Option<&str>) -> Vec<PlannedCall> {
    let mut calls: Vec<PlannedCall> = Vec::new();
    let e = &route.entities;
    let mut intents = vec![route.intent];
    if route.intent != Intent::Concept {
        // A definition needs the knowledge base, not probes of this machine.
        intents.extend(route.also.iter().copied().take(1));
    }

    if route.intent == Intent::CompareRuns && e.paths.len() >= 2 {
        calls.push(call(
            "aisp_profile_compare",
            json!({"before": e.paths[0], "after": e.paths[1]}),
            "compare the two captures named in the question",
        ));
    }
    let profile = profile.or_else(|| {
        // A single profile path written in the question counts as attached.
        (e.paths.len() == 1 && e.paths[0].ends_with(".sqlite")
            || e.paths.len() == 1 && e.paths[0].ends_with(".nsys-rep"))
        .then(|| e.paths[0].as_str())
    });
    if let Some(p) = profile {
        calls.push(call(
            "aisp_profile_rules",
            // In full: the composed answer quotes each finding's why, evidence and verify.
            json!({"path": p, "detail": true}),
            "find the problems in the profile, ranked by the time at stake",
        ));
        for intent in &intents {
            match intent {
                Intent::MultiGpuScaling => {
                    calls.push(call(
                        "aisp_profile_overlap",
                        json!({"path": p}),
                        "how much communication hides behind compute",
                    ));
                    calls.push(call(
                        "aisp_profile_nccl",
                        json!({"path": p}),
                        "collectives, their time and bandwidth",
                    ));
                }
                Intent::OutOfMemory => calls.push(call(
                    "aisp_profile_memory",
                    json!({"path": p}),
                    "copies, their memory kinds and memory use over time",
                )),
                Intent::SlowKernel | Intent::InferenceLatency => calls.push(call(
                    "aisp_profile_kernels",
                    json!({"path": p, "limit": 10}),
                    "the kernels that take the time, with their class",
                )),
                Intent::DataLoading => calls.push(call(
                    "aisp_profile_gaps",
                    json!({"path": p}),
                    "GPU idle gaps and what the CPU did meanwhile",
                )),
                _ => {}
            }
        }
        calls.push(call(
            "aisp_profile_utilization",
            json!({"path": p}),
            "how busy each GPU is over the span, the steps and the steady state",
        ));
    } else {
        for intent in &intents {
            match intent {
                Intent::SlowTraining | Intent::ProfileReview | Intent::General => {
                    calls.push(call(
                        "aisp_triage",
                        json!({}),
                        "what this machine is and what to check first",
                    ));
                    if let Some(mut m) = model_args(e, true) {
                        m.insert("workload".into(), json!("training"));
                        m.insert("goal".into(), json!("throughput"));
                        calls.push(call(
                            "aisp_recommend",
                            Value::Object(m),
                            "techniques ranked for this model and GPUs",
                        ));
                    }
                }
                Intent::OutOfMemory => {
                    calls.push(call(
                        "aisp_gpu_info",
                        json!({}),
                        "memory on this machine's GPUs, and what is using it now",
                    ));
                    if let Some(m) = model_args(e, true) {
                        let inference = route.also.contains(&Intent::InferenceLatency)
                            || normalize(question).contains("inference");
                        if inference {
                            let mut kv = Map::new();
                            if let Some(model) = &e.model {
                                kv.insert("model".into(), json!(model));
                                if let Some(g) = &e.gpu {
                                    kv.insert("gpu".into(), json!(g));
                                }
                                calls.push(call(
                                    "aisp_inference_kv_cache",
                                    Value::Object(kv),
                                    "how much memory the KV cache needs",
                                ));
                            }
                        } else {
                            calls.push(call(
                                "aisp_distributed_plan",
                                Value::Object(m),
                                "per-GPU memory of the layouts that fit, and why others do not",
                            ));
                        }
                    }
                }
                Intent::MultiGpuScaling => {
                    calls.push(call(
                        "aisp_gpu_topology",
                        json!({}),
                        "how the GPUs are connected (NVLink, PCIe, NUMA)",
                    ));
                    if let Some(m) = model_args(e, true) {
                        calls.push(call(
                            "aisp_distributed_plan",
                            Value::Object(m),
                            "parallel layouts with memory and step-time estimates",
                        ));
                    }
                }
                Intent::InferenceLatency => {
                    if let Some(m) = model_args(e, false) {
                        calls.push(call(
                            "aisp_inference_estimate",
                            Value::Object(m),
                            "prefill and decode latency and throughput from the roofline",
                        ));
                    } else {
                        calls.push(call(
                            "aisp_gpu_info",
                            json!({}),
                            "which GPU serves, and its memory",
                        ));
                    }
                }
                Intent::SlowKernel => calls.push(call(
                    "aisp_gpu_info",
                    json!({}),
                    "the GPU the kernel runs on: architecture, SMs, clocks",
                )),
                Intent::DataLoading => calls.push(call(
                    "aisp_system_cpu_memory",
                    json!({}),
                    "CPU cores, NUMA and memory available to data loading",
                )),
                Intent::Setup => {
                    calls.push(call(
                        "aisp_triage",
                        json!({}),
                        "status and a compact context of this machine",
                    ));
                    calls.push(call(
                        "aisp_system_software",
                        json!({}),
                        "driver, CUDA, PyTorch and library versions",
                    ));
                }
                Intent::CompareRuns | Intent::ErrorMessage | Intent::Concept => {}
            }
        }
    }
    // Ranked causes help with errors, and with performance symptoms when there is
    // no profile to measure them in.
    if route.error_message || (!route.symptoms.is_empty() && profile.is_none()) {
        calls.push(call(
            "aisp_ai_troubleshoot",
            json!({"symptom": super::client::truncate_chars(question, 2000)}),
            "known causes of this symptom, ranked, with checks",
        ));
    }
    if let Some(c) = route.concepts.first() {
        calls.push(call(
            "aisp_explain",
            json!({"concept": c}),
            "what the concept means and how to see it",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    calls.retain(|c| seen.insert((c.tool, c.arguments.to_string())));
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_follow_the_words() {
        assert_eq!(
            classify("why is my training step so slow?", false).intent,
            Intent::SlowTraining
        );
        let r = classify("I get CUDA out of memory with batch size 64", false);
        assert_eq!(r.intent, Intent::OutOfMemory);
        assert!(
            r.symptoms.contains(&"cuda_out_of_memory".to_string()),
            "{:?}",
            r.symptoms
        );
        assert_eq!(
            classify(
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                false
            )
            .intent,
            Intent::ErrorMessage
        );
        assert_eq!(
            classify("my model doesn't fit in VRAM", false).intent,
            Intent::OutOfMemory
        );
        assert_eq!(
            classify("DDP on 8 GPUs scales badly, NCCL all-reduce is slow", false).intent,
            Intent::MultiGpuScaling
        );
        assert_eq!(
            classify("vLLM time to first token is high", false).intent,
            Intent::InferenceLatency
        );
        assert_eq!(
            classify("what is occupancy?", false).intent,
            Intent::Concept
        );
        assert_eq!(
            classify("my dataloader is the bottleneck, num_workers=2", false).intent,
            Intent::DataLoading
        );
        assert_eq!(classify("look at this", true).intent, Intent::ProfileReview);
        assert_eq!(classify("hello", false).intent, Intent::General);
        assert_eq!(
            classify("compare before.sqlite and after.sqlite", false).intent,
            Intent::CompareRuns
        );
    }

    #[test]
    fn entities_are_extracted() {
        let e = entities("Llama 3.1 70B on 8x H100 across 2 nodes, profile in runs/a.sqlite");
        assert_eq!(e.model.as_deref(), Some("llama-3.1-70b"));
        assert_eq!(e.gpu.as_deref(), Some("h100-sxm"));
        assert_eq!(e.gpus, Some(8));
        assert_eq!(e.nodes, Some(2));
        assert_eq!(e.paths, vec!["runs/a.sqlite".to_string()]);
        let e = entities("a 13B model on 4 A100 40GB");
        assert_eq!(e.model, None);
        assert_eq!(e.params_b, Some(13.0));
        assert_eq!(e.gpu.as_deref(), Some("a100-40gb"));
        assert_eq!(e.gpus, Some(4));
        assert_eq!(
            entities("mixtral 8x22b").model.as_deref(),
            Some("mixtral-8x22b")
        );
    }

    /// Every planned call names a tool aisp has (or is building), and the
    /// arguments parse as that tool's input wherever the tool exists.
    #[test]
    fn planned_arguments_fit_the_tools() {
        let questions = [
            "why is my training slow?",
            "Llama 3.1 70B on 8x H100 across 2 nodes runs out of memory",
            "training a 13B model on 4 A100 40GB OOM",
            "serving llama 3.1 8b with vLLM on 2 H100: time to first token is high",
            "inference latency of a 7B model on an L40S",
            "DDP on 8 GPUs scales badly, NCCL all-reduce is slow, mixtral 8x7b on 2 nodes",
            "my custom CUDA kernel is slow, occupancy looks low",
            "my dataloader is the bottleneck",
            "which driver and CUDA version do I have?",
            "compare before.sqlite and after.sqlite",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "what is paged attention?",
            "GPU utilization is low",
        ];
        let mut checked = 0;
        for q in questions {
            for profile in [None, Some("run.sqlite")] {
                let r = classify(q, profile.is_some());
                for c in plan(&r, q, profile) {
                    assert!(
                        crate::registry::find(c.tool).is_some(),
                        "{q}: plans unknown tool {}",
                        c.tool
                    );
                    if let Some(t) = crate::registry::find(c.tool) {
                        if let Err(e) = t.op.check_args(c.arguments.clone()) {
                            panic!("{q}: arguments for {} do not parse: {}", c.tool, e.message);
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(
            checked >= 20,
            "only {checked} planned calls could be checked"
        );
    }

    #[test]
    fn plans_start_from_the_profile_when_there_is_one() {
        let r = classify("why is this training slow?", true);
        let p = plan(&r, "why is this training slow?", Some("t.sqlite"));
        assert_eq!(p[0].tool, "aisp_profile_rules");
        assert_eq!(p[0].arguments, json!({"path": "t.sqlite", "detail": true}));
        assert!(p.iter().any(|c| c.tool == "aisp_profile_utilization"));
        let q = "training Llama 3.1 8B on 8 H100 runs out of memory";
        let r = classify(q, false);
        let p = plan(&r, q, None);
        let tools: Vec<&str> = p.iter().map(|c| c.tool).collect();
        assert!(tools.contains(&"aisp_gpu_info"), "{tools:?}");
        assert!(tools.contains(&"aisp_distributed_plan"), "{tools:?}");
        let dp = p
            .iter()
            .find(|c| c.tool == "aisp_distributed_plan")
            .unwrap();
        assert_eq!(
            dp.arguments,
            json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": 8})
        );
    }
}
