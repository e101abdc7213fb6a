//! The GPU catalog: datasheet peaks with their sources.
//!
//! ```no_run
//! use aisp_knowledge::gpus;
//! let h100 = gpus::by_id("h100-sxm").unwrap();
//! assert_eq!(h100.memory_gb.value, Some(80.0));
//! let local = gpus::match_device_name("NVIDIA H100 80GB HBM3"); // NVML / nsys names
//! assert_eq!(local.map(|g| g.id.as_str()), Some("h100-sxm"));
//! ```
//!
//! Data: `data/gpus.toml`. Values are the vendor's dense (no 2:4 sparsity)
//! tensor-core peaks; bandwidths are decimal GB/s; link bandwidths are the
//! total bidirectional figure vendors print (use [`Gpu::nvlink_per_direction_gb_per_s`]
//! for collective-time estimates).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::dtype::Precision;
use super::{Figure, RawFigure, RawSource};

const DATA: &str = include_str!("data/gpus.toml");

/// One GPU model with its datasheet figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Gpu {
    /// Catalog id, e.g. `h100-sxm`.
    pub id: String,
    /// Marketing name.
    pub name: String,
    /// `nvidia` or `amd`.
    pub vendor: String,
    /// Architecture family: ampere, hopper, blackwell, ada, turing, cdna3.
    pub architecture: String,
    /// CUDA compute capability (`major.minor`), or the AMD gfx target.
    pub compute_capability: String,
    /// sxm4, sxm5, sxm, pcie, oam.
    pub form_factor: String,
    /// Other ids accepted by [`by_id`].
    pub aliases: Vec<String>,
    /// Token patterns matched against NVML/nsys device names ("!x" excludes a token).
    pub match_patterns: Vec<String>,
    /// Streaming multiprocessors (AMD: compute units).
    pub sms: Figure,
    /// Device memory, GB (10^9 bytes).
    pub memory_gb: Figure,
    /// Peak device-memory bandwidth, GB/s.
    pub memory_bandwidth_gb_per_s: Figure,
    /// GPU-to-GPU link bandwidth (NVLink, or AMD Infinity Fabric), total bidirectional GB/s.
    pub nvlink_gb_per_s: Figure,
    /// Host link bandwidth, total bidirectional GB/s.
    pub pcie_gb_per_s: Figure,
    /// Board power limit, W.
    pub tdp_w: Figure,
    /// Dense peak rates, TFLOP/s (int8: TOPS).
    pub tflops_dense: DenseTflops,
    /// Typical on-demand cloud price per GPU-hour.
    pub price_usd_per_gpu_hour: PriceRange,
}

/// Dense peak arithmetic rates per precision.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DenseTflops {
    pub fp64: Figure,
    /// Non-tensor FP32 vector rate (AMD: FP32 matrix).
    pub fp32: Figure,
    pub tf32: Figure,
    pub bf16: Figure,
    pub fp16: Figure,
    pub fp8: Figure,
    /// TOPS.
    pub int8: Figure,
    pub fp4: Figure,
}

/// An on-demand price range with its source and date.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PriceRange {
    pub low_usd: Option<f64>,
    pub high_usd: Option<f64>,
    pub source_url: Option<String>,
    /// Month the price was published (YYYY-MM).
    pub as_of: Option<String>,
    pub note: Option<String>,
}

impl Gpu {
    /// The dense peak for a precision, TFLOP/s.
    pub fn peak_tflops(&self, precision: Precision) -> Option<f64> {
        let t = &self.tflops_dense;
        match precision {
            Precision::Fp64 => t.fp64.value,
            Precision::Fp32 => t.fp32.value,
            Precision::Tf32 => t.tf32.value,
            Precision::Bf16 => t.bf16.value,
            Precision::Fp16 => t.fp16.value,
            Precision::Fp8 => t.fp8.value,
            Precision::Int8 => t.int8.value,
            Precision::Fp4 => t.fp4.value,
        }
    }

    /// The figure (value, source, note) behind [`Gpu::peak_tflops`].
    pub fn peak_figure(&self, precision: Precision) -> &Figure {
        let t = &self.tflops_dense;
        match precision {
            Precision::Fp64 => &t.fp64,
            Precision::Fp32 => &t.fp32,
            Precision::Tf32 => &t.tf32,
            Precision::Bf16 => &t.bf16,
            Precision::Fp16 => &t.fp16,
            Precision::Fp8 => &t.fp8,
            Precision::Int8 => &t.int8,
            Precision::Fp4 => &t.fp4,
        }
    }

    /// Device memory in bytes.
    pub fn memory_bytes(&self) -> Option<f64> {
        self.memory_gb.value.map(|gb| gb * 1e9)
    }

    /// GPU-to-GPU link bandwidth in one direction, GB/s (half the printed total).
    pub fn nvlink_per_direction_gb_per_s(&self) -> Option<f64> {
        self.nvlink_gb_per_s.value.map(|v| v / 2.0)
    }

    /// Host link bandwidth in one direction, GB/s.
    pub fn pcie_per_direction_gb_per_s(&self) -> Option<f64> {
        self.pcie_gb_per_s.value.map(|v| v / 2.0)
    }

    /// Whether GPUs of this model talk over a switched NVLink fabric (SXM/OAM
    /// boards), rather than a 2-GPU bridge or PCIe.
    pub fn has_switched_nvlink(&self) -> bool {
        self.nvlink_gb_per_s.value.is_some()
            && matches!(self.form_factor.as_str(), "sxm" | "sxm4" | "sxm5" | "oam")
    }

    /// Midpoint of the catalog price range, when there is one.
    pub fn price_mid_usd(&self) -> Option<f64> {
        match (
            self.price_usd_per_gpu_hour.low_usd,
            self.price_usd_per_gpu_hour.high_usd,
        ) {
            (Some(l), Some(h)) => Some((l + h) / 2.0),
            _ => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    sources: BTreeMap<String, RawSource>,
    gpus: Vec<RawGpu>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpu {
    id: String,
    name: String,
    vendor: String,
    architecture: String,
    compute_capability: String,
    form_factor: String,
    aliases: Vec<String>,
    #[serde(rename = "match")]
    match_patterns: Vec<String>,
    sms: RawFigure,
    memory_gb: RawFigure,
    memory_bandwidth_gb_per_s: RawFigure,
    nvlink_gb_per_s: RawFigure,
    pcie_gb_per_s: RawFigure,
    tdp_w: RawFigure,
    tflops_dense: RawTflops,
    price_usd_per_gpu_hour: RawPrice,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTflops {
    fp64: RawFigure,
    fp32: RawFigure,
    tf32: RawFigure,
    bf16: RawFigure,
    fp16: RawFigure,
    fp8: RawFigure,
    int8: RawFigure,
    fp4: RawFigure,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    low: Option<f64>,
    high: Option<f64>,
    source: Option<String>,
    as_of: Option<String>,
    note: Option<String>,
}

fn parse(text: &str) -> Result<Vec<Gpu>, String> {
    let raw: RawCatalog = toml::from_str(text).map_err(|e| format!("gpus.toml: {e}"))?;
    let src = &raw.sources;
    let mut out = Vec::with_capacity(raw.gpus.len());
    for g in raw.gpus {
        let f =
            |fig: &RawFigure, field: &str| Figure::resolve(fig, src, &format!("{}.{field}", g.id));
        let price_url = match &g.price_usd_per_gpu_hour.source {
            Some(k) => Some(
                src.get(k)
                    .map(|s| s.url.clone())
                    .ok_or_else(|| format!("{}.price: unknown source `{k}`", g.id))?,
            ),
            None => None,
        };
        let p = &g.price_usd_per_gpu_hour;
        if (p.low.is_some() || p.high.is_some()) && (price_url.is_none() || p.as_of.is_none()) {
            return Err(format!("{}.price: a price needs a source and as_of", g.id));
        }
        if p.low.is_none() && p.note.is_none() {
            return Err(format!("{}.price: no price and no note", g.id));
        }
        let t = &g.tflops_dense;
        out.push(Gpu {
            sms: f(&g.sms, "sms")?,
            memory_gb: f(&g.memory_gb, "memory_gb")?,
            memory_bandwidth_gb_per_s: f(
                &g.memory_bandwidth_gb_per_s,
                "memory_bandwidth_gb_per_s",
            )?,
            nvlink_gb_per_s: f(&g.nvlink_gb_per_s, "nvlink_gb_per_s")?,
            pcie_gb_per_s: f(&g.pcie_gb_per_s, "pcie_gb_per_s")?,
            tdp_w: f(&g.tdp_w, "tdp_w")?,
            tflops_dense: DenseTflops {
                fp64: f(&t.fp64, "fp64")?,
                fp32: f(&t.fp32, "fp32")?,
                tf32: f(&t.tf32, "tf32")?,
                bf16: f(&t.bf16, "bf16")?,
                fp16: f(&t.fp16, "fp16")?,
                fp8: f(&t.fp8, "fp8")?,
                int8: f(&t.int8, "int8")?,
                fp4: f(&t.fp4, "fp4")?,
            },
            price_usd_per_gpu_hour: PriceRange {
                low_usd: p.low,
                high_usd: p.high,
                source_url: price_url,
                as_of: p.as_of.clone(),
                note: p.note.clone(),
            },
            id: g.id,
            name: g.name,
            vendor: g.vendor,
            architecture: g.architecture,
            compute_capability: g.compute_capability,
            form_factor: g.form_factor,
            aliases: g.aliases,
            match_patterns: g.match_patterns,
        });
    }
    Ok(out)
}

fn catalog() -> &'static Result<Vec<Gpu>, String> {
    static CATALOG: OnceLock<Result<Vec<Gpu>, String>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let parsed = parse(DATA);
        if let Err(e) = &parsed {
            tracing::error!("the compiled-in GPU catalog failed to load: {e}");
        }
        parsed
    })
}

/// Every GPU in the catalog, in file order. Empty only if the compiled-in
/// data is broken (a test guards against that; the error is logged).
pub fn all() -> &'static [Gpu] {
    match catalog() {
        Ok(v) => v,
        Err(_) => &[],
    }
}

/// Catalog ids, in file order.
pub fn ids() -> Vec<&'static str> {
    all().iter().map(|g| g.id.as_str()).collect()
}

/// Look up a GPU by catalog id or alias (case-insensitive).
pub fn by_id(id: &str) -> Option<&'static Gpu> {
    let id = id.trim().to_ascii_lowercase();
    all().iter().find(|g| g.id == id || g.aliases.contains(&id))
}

/// An unknown GPU id, with the known ones and the closest matches.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown GPU `{wanted}`{}; known GPUs: {}", did_you_mean(.suggestions), .known.join(", "))]
pub struct UnknownGpu {
    pub wanted: String,
    pub known: Vec<String>,
    pub suggestions: Vec<String>,
}

fn did_you_mean(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", s.join(" or "))
    }
}

/// Look up by id, alias or device name; the error lists the known ids.
pub fn lookup(text: &str) -> Result<&'static Gpu, UnknownGpu> {
    by_id(text)
        .or_else(|| match_device_name(text))
        .ok_or_else(|| UnknownGpu {
            wanted: text.to_string(),
            known: ids().into_iter().map(String::from).collect(),
            suggestions: super::closest(text, all().iter().map(|g| g.id.as_str()))
                .into_iter()
                .map(String::from)
                .collect(),
        })
}

/// Lowercase alphanumeric tokens of a device name ("NVIDIA A100-SXM4-80GB" →
/// ["nvidia", "a100", "sxm4", "80gb"]).
fn tokens(name: &str) -> Vec<String> {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

/// How many required tokens of `pattern` the name has, or None when it lacks
/// one or has an excluded (`!x`) one.
fn pattern_score(pattern: &str, name_tokens: &[String]) -> Option<usize> {
    let mut score = 0;
    for part in pattern.split_whitespace() {
        if let Some(excluded) = part.strip_prefix('!') {
            if name_tokens.iter().any(|t| t == excluded) {
                return None;
            }
        } else if name_tokens.iter().any(|t| t == part) {
            score += 1;
        } else {
            return None;
        }
    }
    Some(score)
}

/// Map a device name as NVML, nvidia-smi or nsys report it ("NVIDIA H100 80GB
/// HBM3", "Tesla T4", "NVIDIA A100-SXM4-80GB") to its catalog entry. The most
/// specific matching pattern wins; None when no entry matches (an unlisted part:
/// callers should derive peaks from the device itself).
pub fn match_device_name(name: &str) -> Option<&'static Gpu> {
    let toks = tokens(name);
    let mut best: Option<(usize, &'static Gpu)> = None;
    for gpu in all() {
        for p in &gpu.match_patterns {
            if let Some(score) = pattern_score(p, &toks)
                && best.is_none_or(|(b, _)| score > b)
            {
                best = Some((score, gpu));
            }
        }
    }
    best.map(|(_, g)| g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_loads_and_every_number_has_a_source_url() {
        let parsed = parse(DATA).expect("gpus.toml must load");
        assert_eq!(parsed.len(), all().len());
        assert!(parsed.len() >= 17, "catalog has {} GPUs", parsed.len());
        for g in all() {
            let t = &g.tflops_dense;
            for fig in [
                &g.sms,
                &g.memory_gb,
                &g.memory_bandwidth_gb_per_s,
                &g.nvlink_gb_per_s,
                &g.pcie_gb_per_s,
                &g.tdp_w,
                &t.fp64,
                &t.fp32,
                &t.tf32,
                &t.bf16,
                &t.fp16,
                &t.fp8,
                &t.int8,
                &t.fp4,
            ] {
                match fig.value {
                    Some(_) => assert!(
                        fig.source_url
                            .as_deref()
                            .is_some_and(|u| u.starts_with("https://")),
                        "{}: a value without an https source",
                        g.id
                    ),
                    None => assert!(fig.note.is_some(), "{}: a null without a note", g.id),
                }
            }
        }
    }

    #[test]
    fn required_gpus_are_present() {
        for id in [
            "a100-40gb",
            "a100-80gb",
            "h100-sxm",
            "h100-pcie",
            "h100-nvl",
            "h200",
            "b200",
            "b300",
            "l40s",
            "l4",
            "a10g",
            "t4",
            "rtx-4090",
            "rtx-5090",
            "mi300x",
        ] {
            assert!(by_id(id).is_some(), "{id} missing");
        }
    }

    #[test]
    fn datasheet_values_are_the_published_dense_figures() {
        let h100 = by_id("h100-sxm").unwrap();
        assert_eq!(h100.peak_tflops(Precision::Bf16), Some(989.4));
        assert_eq!(h100.peak_tflops(Precision::Fp8), Some(1978.9));
        assert_eq!(h100.memory_bandwidth_gb_per_s.value, Some(3350.0));
        assert_eq!(h100.sms.value, Some(132.0));
        assert_eq!(h100.nvlink_per_direction_gb_per_s(), Some(450.0));
        let a100 = by_id("a100-80gb").unwrap();
        assert_eq!(a100.peak_tflops(Precision::Bf16), Some(312.0));
        assert_eq!(a100.peak_tflops(Precision::Fp8), None);
        assert!(a100.tflops_dense.fp8.note.is_some());
        assert_eq!(by_id("h200").unwrap().memory_gb.value, Some(141.0));
        assert_eq!(
            by_id("b200").unwrap().peak_tflops(Precision::Bf16),
            Some(2250.0)
        );
        // T4 has no BF16: the catalog says so instead of inventing a number.
        assert_eq!(by_id("t4").unwrap().peak_tflops(Precision::Bf16), None);
        // A10G is AWS-only: compute peaks are null with a note.
        let a10g = by_id("a10g").unwrap();
        assert_eq!(a10g.peak_tflops(Precision::Fp16), None);
        assert!(
            a10g.tflops_dense
                .fp16
                .note
                .as_deref()
                .unwrap()
                .contains("no public source")
        );
    }

    #[test]
    fn ids_and_aliases_resolve_case_insensitively() {
        assert_eq!(by_id("H100").unwrap().id, "h100-sxm");
        assert_eq!(by_id("a100").unwrap().id, "a100-80gb");
        assert!(by_id("v100").is_none());
        assert_eq!(lookup("H100 SXM").unwrap().id, "h100-sxm");
        let err = lookup("h100sxm").unwrap_err();
        assert_eq!(err.suggestions, vec!["h100-sxm".to_string()]);
        assert!(err.to_string().contains("known GPUs: a100-40gb"));
    }

    #[test]
    fn nvml_and_nsys_device_names_map_to_entries() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", Some("h100-sxm")),
            ("NVIDIA H100 PCIe", Some("h100-pcie")),
            ("NVIDIA H100 NVL", Some("h100-nvl")),
            ("NVIDIA H200", Some("h200")),
            ("NVIDIA H200 NVL", None),
            ("NVIDIA GH200 480GB", None),
            ("NVIDIA A100-SXM4-80GB", Some("a100-80gb")),
            ("NVIDIA A100-SXM4-40GB", Some("a100-40gb")),
            ("NVIDIA A100 80GB PCIe", Some("a100-80gb-pcie")),
            ("NVIDIA B200", Some("b200")),
            ("NVIDIA L40S", Some("l40s")),
            ("NVIDIA L4", Some("l4")),
            ("NVIDIA L40", None),
            ("NVIDIA A10G", Some("a10g")),
            ("NVIDIA A10", Some("a10")),
            ("Tesla T4", Some("t4")),
            ("NVIDIA GeForce RTX 4090", Some("rtx-4090")),
            ("NVIDIA GeForce RTX 4090 D", None),
            ("NVIDIA GeForce RTX 5090", Some("rtx-5090")),
            ("AMD Instinct MI300X", Some("mi300x")),
            ("NVIDIA GeForce RTX 3090", None),
        ];
        for (name, want) in cases {
            assert_eq!(
                match_device_name(name).map(|g| g.id.as_str()),
                want,
                "{name}"
            );
        }
    }
}
