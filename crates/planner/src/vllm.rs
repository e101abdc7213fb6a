//! vLLM serving configuration (`aisp_inference_vllm`): tensor and pipeline
//! parallel sizes from weight bytes against usable memory, the KV budget left
//! after weights and an activation workspace, max_model_len, max_num_seqs for
//! the goal, the KV dtype, chunked prefill, prefix caching and speculative
//! decoding, each choice with the numbers behind it, and the launch command.

use aisp_knowledge::Dtype;
use aisp_knowledge::gpus::Gpu;
use aisp_knowledge::models::Architecture;
use aisp_knowledge::techniques::Goal;

use crate::inference::{DecodeStep, Roofline};
use crate::model::ModelSpec;
use crate::peaks::Peaks;
use crate::serving::{self, Choice, WeightFormat};

/// What to plan for (the operation has checked the arguments).
#[derive(Debug)]
pub struct Request<'a> {
    pub model: &'a ModelSpec,
    pub arch: &'a Architecture,
    pub gpu: &'a Gpu,
    /// Peaks for the weight format (datasheet or measured).
    pub peaks: &'a Peaks,
    pub gpus: u32,
    pub gpus_per_node: u32,
    pub goal: Goal,
    pub weights: WeightFormat,
    /// gpu_memory_utilization, and whether the caller gave it.
    pub utilization: f64,
    pub utilization_given: bool,
    pub kv_requested: Option<Dtype>,
    /// The wanted max_model_len (default: the model's context, else 4096).
    pub max_model_len: Option<u32>,
    pub avg_request_tokens: Option<u32>,
    /// The model to put on the command line (default: from the model's source).
    pub hf_model: Option<String>,
    pub draft_model: Option<String>,
}

/// The configuration.
#[derive(Debug)]
pub struct Plan {
    pub command: String,
    pub engine_args: serde_json::Map<String, serde_json::Value>,
    pub choices: Vec<Choice>,
    pub kv_capacity_tokens: u64,
    pub decode_at_max_seqs: Option<DecodeStep>,
    pub replicas: u32,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum VllmError {
    /// The weights and one sequence do not fit on the GPUs given.
    #[error("{0}")]
    DoesNotFit(String),
}

/// Plan a vLLM server; `assumptions` gets the planner's own assumptions appended.
pub fn plan(req: &Request<'_>, assumptions: &mut Vec<String>) -> Result<Plan, VllmError> {
    let Request {
        model,
        arch,
        gpu,
        peaks,
        gpus,
        gpus_per_node: gpn,
        goal,
        weights,
        utilization: util,
        kv_requested,
        ..
    } = *req;
    let mut choices: Vec<Choice> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let choose = |c: &mut Vec<Choice>, s: &str, v: String, why: String| {
        c.push(Choice {
            setting: s.into(),
            value: v,
            why,
        })
    };
    let cc = serving::compute_capability(gpu).unwrap_or(0.0);

    choose(
        &mut choices,
        "gpu_memory_utilization",
        util.to_string(),
        if req.utilization_given {
            "given".into()
        } else if goal == Goal::Memory {
            format!(
                "0.95 for the memory goal: vLLM suggests raising it when KV space is short ({})",
                serving::VLLM_OPTIMIZATION_URL
            )
        } else {
            format!("vLLM's default 0.9 ({})", serving::VLLM_ENGINE_ARGS_URL)
        },
    );
    let usable = gpu.memory_bytes().unwrap_or(0.0) * util;
    let max_len_wanted = req.max_model_len.or(arch.context).unwrap_or(4096);
    let batched = if goal == Goal::Latency { 2048 } else { 8192 };
    let kv_try = kv_requested.unwrap_or(Dtype::Bf16);
    let tps = serving::tp_options(Some(arch), gpus.min(gpn));
    let fits_tp = |tp: u32, pp: u32, kv: Dtype| -> u64 {
        let r = Roofline {
            tp,
            kv_dtype: kv,
            ..serving::roofline_for(model, weights, peaks, tp, kv, gpu)
        };
        let reserve = serving::activation_reserve_bytes(Some(arch), tp, batched, 256);
        let free = usable - reserve - r.weight_bytes() / (tp * pp) as f64;
        let per_tok = (r.memory_per_gpu_bytes(1, 1) - r.weight_bytes() / tp as f64) / pp as f64;
        if free <= 0.0 {
            0
        } else {
            (free / per_tok).floor() as u64
        }
    };
    let mut pick: Option<(u32, u32)> = None;
    let min_tokens = max_len_wanted.min(4096) as u64;
    let latency_first = goal == Goal::Latency;
    let mut tp_list = tps.clone();
    if latency_first {
        tp_list.reverse();
    }
    for &tp in &tp_list {
        if fits_tp(tp, 1, kv_try) >= min_tokens {
            pick = Some((tp, 1));
            break;
        }
    }
    if pick.is_none() {
        let tp = *tps.last().unwrap_or(&1);
        let nodes = (gpus / gpn).max(1);
        for pp in 2..=nodes {
            if fits_tp(tp, pp, kv_try) >= min_tokens {
                pick = Some((tp, pp));
                break;
            }
        }
    }
    let Some((tp, pp)) = pick else {
        return Err(VllmError::DoesNotFit(format!(
            "{} in {} does not fit on {gpus} × {} with room for a {min_tokens}-token sequence: weights alone are {:.1} GB against {:.1} GB usable per GPU",
            model.label,
            weights.as_str(),
            gpu.id,
            model.total_params * weights.dtype().bytes() / 1e9,
            usable / 1e9
        )));
    };
    choose(
        &mut choices,
        "tensor_parallel_size",
        tp.to_string(),
        if latency_first {
            format!(
                "latency goal: the largest TP in a node that divides {} heads and fits, so each token's weight read is split {tp} ways",
                arch.heads
            )
        } else {
            format!(
                "smallest TP (dividing {} heads) whose GPUs hold {:.1} GB of {} weights per GPU plus KV for {min_tokens} tokens; smaller TP leaves more GPUs for replicas",
                arch.heads,
                model.total_params * weights.dtype().bytes() / tp as f64 / pp as f64 / 1e9,
                weights.as_str()
            )
        },
    );
    if pp > 1 {
        choose(
            &mut choices,
            "pipeline_parallel_size",
            pp.to_string(),
            format!("TP{tp} within a node is not enough memory; {pp} pipeline stages across nodes"),
        );
    }
    // KV dtype.
    let mut kv = kv_try;
    let cap_bf16 = fits_tp(tp, pp, Dtype::Bf16);
    let fp8_ok = cc >= 8.9;
    if kv_requested.is_none() {
        let short = cap_bf16 < max_len_wanted as u64;
        if fp8_ok && (goal != Goal::Latency || short) {
            kv = Dtype::Fp8;
            choose(
                &mut choices,
                "kv_cache_dtype",
                "fp8".into(),
                format!(
                    "halves KV bytes per token ({} → {} B), doubling the tokens that fit; {} has FP8 support (compute capability {}){}",
                    arch.kv_bytes_per_token(Dtype::Bf16),
                    arch.kv_bytes_per_token(Dtype::Fp8),
                    gpu.id,
                    gpu.compute_capability,
                    if short {
                        "; bf16 KV would not even hold one max_model_len sequence"
                    } else {
                        ""
                    }
                ),
            );
        } else {
            choose(
                &mut choices,
                "kv_cache_dtype",
                "auto".into(),
                if fp8_ok {
                    "latency goal and the bf16 KV fits: keep full-precision KV".into()
                } else {
                    format!(
                        "{} (compute capability {}) lacks fast FP8: keep the model dtype",
                        gpu.id, gpu.compute_capability
                    )
                },
            );
        }
    } else {
        choose(
            &mut choices,
            "kv_cache_dtype",
            if kv == Dtype::Fp8 {
                "fp8".into()
            } else {
                "auto".into()
            },
            "given".into(),
        );
    }
    let capacity = fits_tp(tp, pp, kv);
    let max_len = if capacity < max_len_wanted as u64 {
        let l = (capacity / 16 * 16) as u32;
        warnings.push(format!("the KV budget holds {capacity} tokens per replica, less than the wanted {max_len_wanted}: max_model_len lowered to {l}"));
        l
    } else {
        max_len_wanted
    };
    choose(
        &mut choices,
        "max_model_len",
        max_len.to_string(),
        format!(
            "{}; the KV budget per replica is {capacity} tokens at {} B/token",
            if req.max_model_len.is_some() {
                "wanted length"
            } else {
                "the model's maximum context"
            },
            arch.kv_bytes_per_token(kv)
        ),
    );
    // max_num_seqs.
    let avg = req
        .avg_request_tokens
        .unwrap_or((max_len / 4).max(1))
        .max(1) as u64;
    let kv_seqs = (capacity / avg).max(1) as u32;
    let r = serving::roofline_for(model, weights, peaks, tp, kv, gpu);
    let seqs = if latency_first {
        let b = serving::latency_batch(&r, avg, kv_seqs.min(1024), 1.1);
        choose(
            &mut choices,
            "max_num_seqs",
            b.to_string(),
            format!(
                "largest batch whose decode step stays within 10% of batch 1 ({:.2} ms vs {:.2} ms) for {avg}-token requests",
                r.decode(b, avg).step_ms,
                r.decode(1, avg).step_ms
            ),
        );
        b
    } else {
        let cross = r.crossover_batch().ceil().max(1.0) as u32;
        let b = kv_seqs.min(cross.next_power_of_two()).min(1024);
        choose(
            &mut choices,
            "max_num_seqs",
            b.to_string(),
            format!(
                "min(KV room for {kv_seqs} requests of {avg} tokens, decode crossover batch {:.0} rounded up to a power of two): beyond the crossover decode is compute-bound and more sequences add latency, not throughput",
                r.crossover_batch()
            ),
        );
        b
    };
    choose(
        &mut choices,
        "max_num_batched_tokens",
        batched.to_string(),
        format!(
            "{}: vLLM's tuning guide — smaller values favour inter-token latency, larger ones throughput ({})",
            if latency_first {
                "2048 for latency"
            } else {
                "8192 for throughput"
            },
            serving::VLLM_OPTIMIZATION_URL
        ),
    );
    choose(&mut choices, "enable_chunked_prefill", "true".into(), "splits long prefills into chunks that share steps with decodes, so inter-token latency stays steady (Sarathi-Serve; on by default in vLLM V1)".into());
    choose(&mut choices, "enable_prefix_caching", "true".into(), "reuses KV blocks of shared prefixes (system prompts, multi-turn); costs nothing when prefixes differ".into());
    let mut args = serde_json::Map::new();
    let hf = req
        .hf_model
        .clone()
        .or_else(|| hf_id(model))
        .unwrap_or_else(|| model.id.clone().unwrap_or_else(|| "MODEL".into()));
    args.insert("model".into(), hf.clone().into());
    args.insert("tensor_parallel_size".into(), tp.into());
    if pp > 1 {
        args.insert("pipeline_parallel_size".into(), pp.into());
    }
    args.insert("gpu_memory_utilization".into(), util.into());
    args.insert("max_model_len".into(), max_len.into());
    args.insert("max_num_seqs".into(), seqs.into());
    args.insert("max_num_batched_tokens".into(), batched.into());
    args.insert("enable_chunked_prefill".into(), true.into());
    args.insert("enable_prefix_caching".into(), true.into());
    if kv == Dtype::Fp8 {
        args.insert("kv_cache_dtype".into(), "fp8".into());
    }
    if let Some(q) = weights.vllm_flag() {
        args.insert("quantization".into(), q.into());
        choose(
            &mut choices,
            "quantization",
            q.into(),
            format!(
                "{} weights: {:.1} GB instead of {:.1} GB in bf16",
                weights.as_str(),
                model.total_params * weights.dtype().bytes() / 1e9,
                model.total_params * 2.0 / 1e9
            ),
        );
    }
    match (&req.draft_model, latency_first, pp) {
        (Some(d), true, 1) => {
            let spec = serde_json::json!({"model": d, "num_speculative_tokens": 5});
            args.insert("speculative_config".into(), spec);
            choose(&mut choices, "speculative_config", format!("draft {d}, 5 tokens"), "latency goal with a draft model: speculative decoding gave 2–3× on T5-XXL with identical outputs (Leviathan et al.); gains shrink as batch grows".into());
        }
        (Some(_), true, _) => warnings.push("speculative decoding skipped: vLLM historically does not combine it with pipeline parallelism".into()),
        (Some(_), false, _) => warnings.push("draft_model ignored: speculative decoding helps latency at low batch, and the goal is not latency".into()),
        (None, true, _) => warnings.push("no draft_model: speculative decoding not configured (give one of the same family, or try method ngram for prompt-copying workloads)".into()),
        _ => {}
    }
    let mut cmd = format!("vllm serve {hf}");
    for (k, v) in &args {
        if k == "model" {
            continue;
        }
        let flag = k.replace('_', "-");
        match v {
            serde_json::Value::Bool(true) => cmd.push_str(&format!(" \\\n  --{flag}")),
            serde_json::Value::Object(_) => cmd.push_str(&format!(" \\\n  --{flag} '{v}'")),
            serde_json::Value::String(s) => cmd.push_str(&format!(" \\\n  --{flag} {s}")),
            other => cmd.push_str(&format!(" \\\n  --{flag} {other}")),
        }
    }
    let replicas = gpus / (tp * pp);
    if replicas > 1 {
        warnings.push(format!("{gpus} GPUs hold {replicas} replicas of TP{tp}: run one server per replica (or --data-parallel-size {replicas}) behind a load balancer"));
    }
    assumptions.push("activation workspace: hidden state and gated-MLP intermediates for max_num_batched_tokens plus fp32 logits for 256 rows; vLLM measures the real peak at start-up and may find more or less KV room".into());
    let decode = Some(r.decode(seqs, avg));
    Ok(Plan {
        command: cmd,
        engine_args: args,
        choices,
        kv_capacity_tokens: capacity,
        decode_at_max_seqs: decode,
        replicas,
        warnings,
    })
}

fn hf_id(model: &ModelSpec) -> Option<String> {
    // `hf:org/name` (or `hf:/folder`): vLLM takes the same repo id or path.
    if let Some(repo) = model.id.as_deref().and_then(|i| i.strip_prefix("hf:")) {
        return Some(repo.to_string());
    }
    let url = &model.source;
    let rest = url.strip_prefix("https://huggingface.co/")?;
    let mut parts = rest.split('/');
    Some(format!("{}/{}", parts.next()?, parts.next()?))
}
