//! `usage`: what a run has and already uses, read from the profile itself —
//! kernel names and classes, CUDA API calls and the step ledger — never from
//! NVTX range or file names. `aisp_recommend` reads it so that it recommends
//! neither a technique for something the run does not have (attention kernels,
//! sequences, collectives, host copies, an optimizer) nor one the run already
//! applies (bf16/fp16 GEMMs, fused optimizer kernels, CUDA graph launches,
//! fused attention, pinned copies, communication overlapped with compute).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::classify::{self, KernelClass, Precision};
use super::ledger::{self, Column, DeviceLedger, Group, StepSource};
use super::{Profile, Result, Scope};

/// One thing the run has or uses, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageFact {
    /// `attention`, `fused_attention`, `gemm`, `gemm_reduced_precision`, `gemm_fp32_simt`, `gemm_tf32`,
    /// `convolution`, `elementwise`, `optimizer`, `fused_optimizer`, `cuda_graphs`, `torch_compile`,
    /// `collectives`, `overlapped_communication`, `host_copies`, `pageable_copies`.
    pub feature: String,
    pub present: bool,
    pub evidence: String,
}

/// What the run has and uses, and where its steady step goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Devices with GPU work in the export.
    pub devices: usize,
    /// How the steps were found on the device that stands for the run (the longest median step).
    pub steps_from: StepSource,
    /// Its median steady step.
    pub step_ns: i64,
    /// Its mean ns per steady step, per ledger column (non-zero ones).
    pub columns: BTreeMap<String, i64>,
    pub facts: Vec<UsageFact>,
}

impl Usage {
    /// Whether a feature is present (false when unknown).
    pub fn has(&self, feature: &str) -> bool {
        self.fact(feature).is_some_and(|f| f.present)
    }

    pub fn fact(&self, feature: &str) -> Option<&UsageFact> {
        self.facts.iter().find(|f| f.feature == feature)
    }
}

/// Kernel names that mean a fused attention implementation (FlashAttention, cuDNN/xFormers fused MHA, SDPA's
/// efficient and flash backends).
fn fused_attention(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    [
        "flash",
        "fmha",
        "efficient_attention",
        "mem_eff",
        "sdpa",
        "fused_mha",
        "cutlassf",
    ]
    .iter()
    .any(|k| l.contains(k))
}

fn fact(feature: &str, present: bool, evidence: String) -> UsageFact {
    UsageFact {
        feature: feature.into(),
        present,
        evidence,
    }
}

/// Count and the most frequent name of a kernel set.
#[derive(Default)]
struct Seen {
    count: u64,
    names: BTreeMap<String, u64>,
}

impl Seen {
    fn add(&mut self, name: &str) {
        self.count += 1;
        *self.names.entry(name.to_string()).or_default() += 1;
    }
    fn top(&self) -> String {
        self.names
            .iter()
            .max_by_key(|(n, c)| (**c, std::cmp::Reverse((*n).clone())))
            .map(|(n, _)| format!("`{n}`"))
            .unwrap_or_default()
    }
    fn say(&self, what: &str) -> String {
        if self.count == 0 {
            format!("no {what}")
        } else {
            format!("{} {what} (most: {})", self.count, self.top())
        }
    }
}

/// The kernels of each kind the run launched.
#[derive(Default)]
struct Tally {
    attention: Seen,
    fused_attention: Seen,
    gemm: Seen,
    reduced: Seen,
    simt: Seen,
    tf32: Seen,
    conv: Seen,
    elementwise: Seen,
    fused_opt: Seen,
    per_tensor_opt: Seen,
    triton: Seen,
    nccl: Seen,
}

/// What the run of an export has and uses.
pub fn usage(p: &Profile) -> Result<Usage> {
    let scope = p.resolve(&Scope::default())?;
    let l = ledger::build(p, &scope, None)?;
    let lead: Option<&DeviceLedger> = l
        .devices
        .iter()
        .filter(|d| d.steady.steps > 0)
        .max_by_key(|d| d.steady.period_median_ns);
    let kernels = p.kernels()?;
    let mut t = Tally::default();
    let mut cache: BTreeMap<i64, classify::Classification> = BTreeMap::new();
    for k in kernels {
        let short = p.string(k.short_name);
        let demangled = p.string(k.demangled_name);
        let c = cache
            .entry(k.demangled_name)
            .or_insert_with(|| classify::classify(demangled, short, k.grid, k.block));
        let lower = demangled.to_ascii_lowercase();
        match c.class {
            KernelClass::Attention => {
                t.attention.add(short);
                if fused_attention(demangled) {
                    t.fused_attention.add(short);
                }
            }
            KernelClass::GemmTensorCore | KernelClass::GemmSimtFp32 | KernelClass::GemmUnknown => {
                t.gemm.add(short);
                if lower.contains("conv") || lower.contains("dgrad") || lower.contains("wgrad") {
                    t.conv.add(short);
                }
                match (c.class, c.precision) {
                    (KernelClass::GemmSimtFp32, _) => t.simt.add(short),
                    (_, Some(Precision::Tf32)) => t.tf32.add(short),
                    (
                        KernelClass::GemmTensorCore,
                        Some(
                            Precision::Bf16
                            | Precision::Fp16
                            | Precision::Fp8
                            | Precision::Fp4
                            | Precision::Int8,
                        ),
                    ) => t.reduced.add(short),
                    // Tensor-core GEMMs whose name does not give the precision: not fp32 (that would be TF32 or
                    // SIMT), so a reduced precision.
                    (KernelClass::GemmTensorCore, None) if !lower.contains("f32f32") => {
                        t.reduced.add(short)
                    }
                    _ => {}
                }
            }
            KernelClass::Communication => t.nccl.add(short),
            KernelClass::Elementwise => t.elementwise.add(short),
            _ => {}
        }
        if ledger::is_optimizer_kernel(demangled) {
            t.fused_opt.add(short);
        } else if lower.contains("lerp_kernel")
            || lower.contains("addcdiv")
            || lower.contains("addcmul")
        {
            t.per_tensor_opt.add(short);
        }
        if short.starts_with("triton_")
            || lower.contains("triton_poi")
            || lower.contains("triton_red")
        {
            t.triton.add(short);
        }
        if super::nccl::is_nccl(short) && c.class != KernelClass::Communication {
            t.nccl.add(short);
        }
    }
    // CUDA graph launches.
    let api = p.api()?;
    let mut graph_launches = 0u64;
    let mut names: BTreeMap<i64, bool> = BTreeMap::new();
    for a in api {
        let is_graph = *names
            .entry(a.name)
            .or_insert_with(|| p.string(a.name).starts_with("cudaGraphLaunch"));
        if is_graph {
            graph_launches += 1;
        }
    }
    let kinds: [(&str, &Seen, &str); 10] = [
        ("attention", &t.attention, "attention kernels"),
        (
            "fused_attention",
            &t.fused_attention,
            "fused attention kernels",
        ),
        ("gemm", &t.gemm, "GEMM kernels"),
        (
            "gemm_reduced_precision",
            &t.reduced,
            "reduced-precision (bf16/fp16/fp8) tensor-core GEMM kernels",
        ),
        ("gemm_fp32_simt", &t.simt, "fp32 GEMM kernels on CUDA cores"),
        ("gemm_tf32", &t.tf32, "TF32 tensor-core GEMM kernels"),
        ("convolution", &t.conv, "convolution kernels"),
        ("elementwise", &t.elementwise, "elementwise kernels"),
        ("torch_compile", &t.triton, "Triton kernels from Inductor"),
        ("collectives", &t.nccl, "collective (NCCL) kernels"),
    ];
    let mut facts: Vec<UsageFact> = kinds
        .iter()
        .map(|(feature, seen, what)| fact(feature, seen.count > 0, seen.say(what)))
        .collect();
    let optimizers = t.fused_opt.count + t.per_tensor_opt.count;
    facts.push(fact(
        "optimizer",
        optimizers > 0,
        if optimizers == 0 {
            "no optimizer kernels (no multi-tensor or fused optimizer, no per-tensor lerp/addcdiv updates)".into()
        } else {
            format!(
                "{} fused and {} per-tensor optimizer kernels",
                t.fused_opt.count, t.per_tensor_opt.count
            )
        },
    ));
    facts.push(fact(
        "fused_optimizer",
        t.fused_opt.count > 0,
        t.fused_opt.say("multi-tensor or fused optimizer kernels"),
    ));
    facts.push(fact(
        "cuda_graphs",
        graph_launches > 0,
        if graph_launches > 0 {
            format!("{graph_launches} cudaGraphLaunch calls")
        } else {
            "no cudaGraphLaunch call".into()
        },
    ));
    let mut columns = BTreeMap::new();
    let (mut step_ns, mut steps_from) = (0, StepSource::Span);
    if let Some(d) = lead {
        let n = d.steady.steps.max(1) as i64;
        for (c, v) in d.steady.columns.iter() {
            columns.insert(c.as_str().to_string(), v / n);
        }
        step_ns = d.steady.period_median_ns;
        steps_from = d.source.clone();
        // Communication overlapped with compute: at least a third of the collective time hidden.
        let exposed = d.steady.columns.group(Group::Communication);
        let hidden = d.steady.hidden_communication_ns;
        let total = exposed + hidden;
        facts.push(fact(
            "overlapped_communication",
            total > 0 && hidden * 3 >= total,
            if total == 0 {
                "no collective time in the steady steps".into()
            } else {
                format!(
                    "{:.1}% of the steady steps' collective time runs beside compute ({:.2} ms hidden, {:.2} ms exposed)",
                    100.0 * hidden as f64 / total as f64,
                    hidden as f64 / 1e6,
                    exposed as f64 / 1e6
                )
            },
        ));
        let h2d =
            d.steady.columns.get(Column::H2dPageable) + d.steady.columns.get(Column::H2dPinned);
        let d2h =
            d.steady.columns.get(Column::D2hPageable) + d.steady.columns.get(Column::D2hPinned);
        let copies =
            h2d + d2h + d.steady.hidden_copy_ns + d.steady.columns.get(Column::IdlePageableStaging);
        let pageable = d.steady.columns.get(Column::H2dPageable)
            + d.steady.columns.get(Column::D2hPageable)
            + d.steady.columns.get(Column::IdlePageableStaging);
        let loading = d.steady.columns.get(Column::IdleDataLoading);
        facts.push(fact(
            "host_copies",
            h2d + d2h + loading > 0 || copies > d.steady.length_ns / 100,
            format!(
                "{:.2} ms of exposed host copies and {:.2} ms of idle waiting for input per steady step",
                (h2d + d2h) as f64 / n as f64 / 1e6,
                loading as f64 / n as f64 / 1e6
            ),
        ));
        facts.push(fact(
            "pageable_copies",
            pageable > 0,
            format!(
                "{:.2} ms of pageable copies and their staging per steady step",
                pageable as f64 / n as f64 / 1e6
            ),
        ));
    }
    Ok(Usage {
        devices: l.devices.iter().filter(|d| !d.steps.is_empty()).count(),
        steps_from,
        step_ns,
        columns,
        facts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_attention_is_read_from_kernel_names() {
        assert!(fused_attention(
            "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64>>"
        ));
        assert!(fused_attention("fmha_cutlassF_bf16_aligned_64x128_rf_sm80"));
        assert!(fused_attention(
            "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16"
        ));
        assert!(!fused_attention("softmax_warp_forward"));
    }
}
