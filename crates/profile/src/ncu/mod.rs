//! Nsight Compute results as per-kernel records.
//!
//! Input is the CSV that `ncu --csv --page raw` (one row per profiled kernel,
//! one column per metric, a second row of units) or `ncu --csv --page
//! details` (one row per metric or rule result, grouped by section) prints.
//! When ncu profiles a program directly, the program's own output and ncu's
//! `==PROF==`/`==WARNING==` lines are interleaved with the CSV rows; they are
//! skipped. Numbers carry thousands separators (`7,430.40`), removed here.
//!
//! What each record field comes from (raw metric, else details section/metric):
//!
//! | field | raw page | details page |
//! |---|---|---|
//! | `duration_ns` | `gpu__time_duration.sum` | SOL / Duration |
//! | `sm_throughput_pct` | `sm__throughput.avg.pct_of_peak_sustained_elapsed` | SOL / Compute (SM) Throughput |
//! | `memory_throughput_pct` | `gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed` | SOL / Memory Throughput |
//! | `dram_throughput_pct` | `gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed` | SOL / DRAM Throughput |
//! | `l1_throughput_pct` | `l1tex__throughput.avg.pct_of_peak_sustained_active` | SOL / L1/TEX Cache Throughput |
//! | `l2_throughput_pct` | `lts__throughput.avg.pct_of_peak_sustained_elapsed` | SOL / L2 Cache Throughput |
//! | `achieved_occupancy_pct` | `sm__warps_active.avg.pct_of_peak_sustained_active` | Occupancy / Achieved Occupancy |
//! | `theoretical_occupancy_pct` | `sm__maximum_warps_per_active_cycle_pct` | Occupancy / Theoretical Occupancy |
//! | `block_limits` | `launch__occupancy_limit_{blocks,registers,shared_mem,warps,barriers}` | Occupancy / Block Limit … |
//! | `dram_bandwidth_gb_per_s` | `dram__bytes.sum.per_second` | Memory Workload Analysis / Memory Throughput (byte/s) |
//! | `dram_bytes` | `dram__bytes.sum` | — |
//! | `l1_hit_rate_pct`, `l2_hit_rate_pct` | `l1tex__t_sector_hit_rate.pct`, `lts__t_sector_hit_rate.pct` | MWA / L1/TEX Hit Rate, L2 Hit Rate |
//! | `warp_stalls` | `smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio` (else `smsp__pcsamp_warps_issue_stalled_<reason>`) | — |
//! | `roofline` | FP32/FP64 SASS op rates, `dram__bytes.sum.per_second` and their peaks (the roofline sections) | — |
//! | `rules` | — | rows with a Rule Name |

pub mod compare;
pub mod patterns;

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum NcuError {
    #[error(
        "no Nsight Compute CSV table found (no header row starting with \"ID\"); is this the output of `ncu --csv --page raw` or `--page details`?"
    )]
    NoTable,
    #[error("the CSV table has no kernel rows (nothing was profiled?)")]
    Empty,
    #[error("the CSV is malformed: {0}")]
    Csv(String),
}

/// Which page a CSV holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PageKind {
    Raw,
    Details,
}

/// The CSV records of ncu's output, with every other line dropped.
///
/// A record starts on a line whose first character is `"` (ncu quotes every
/// field) and continues over following lines while a quoted field is open
/// (rule descriptions may hold newlines). Anything else is program output.
pub fn csv_records(text: &str) -> Result<Vec<Vec<String>>, NcuError> {
    let mut kept = String::with_capacity(text.len());
    let mut open = false;
    for line in text.lines() {
        if open || line.starts_with('"') {
            kept.push_str(line);
            kept.push('\n');
            // Quotes inside fields are doubled, so an odd count toggles "open".
            if line.matches('"').count() % 2 == 1 {
                open = !open;
            }
        }
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(kept.as_bytes());
    let mut out = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(|e| NcuError::Csv(e.to_string()))?;
        out.push(rec.iter().map(str::to_string).collect());
    }
    Ok(out)
}

/// A number as ncu prints it (`1,234.5`, `n/a` → None).
pub fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    let cleaned: String = t.chars().filter(|c| *c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Scale a value to ns, bytes/s or plain by its unit. Unknown units: None.
fn to_ns(value: f64, unit: &str) -> Option<f64> {
    let f = match unit.trim() {
        "ns" | "nsecond" | "nsec" => 1.0,
        "us" | "usecond" | "usec" => 1e3,
        "ms" | "msecond" | "msec" => 1e6,
        "s" | "second" | "sec" => 1e9,
        _ => return None,
    };
    Some(value * f)
}

fn to_bytes_per_s(value: f64, unit: &str) -> Option<f64> {
    let u = unit.trim();
    let (prefix, rest) = match u.find("byte") {
        Some(i) => (&u[..i], &u[i + 4..]),
        None => return None,
    };
    let per = match rest {
        "/s" | "/second" => 1.0,
        "/ms" | "/msecond" => 1e3,
        "/us" | "/usecond" => 1e6,
        "/ns" | "/nsecond" => 1e9,
        _ => return None,
    };
    Some(value * byte_prefix(prefix)? * per)
}

/// A per-cycle byte figure in bytes per cycle: ncu prints the DRAM peak as
/// `Kbyte/cycle` on Hopper (1.28 Kbyte/cycle on an H100) and `byte/cycle`
/// elsewhere.
fn to_bytes_per_cycle(value: f64, unit: &str) -> Option<f64> {
    let u = unit.trim();
    let i = u.find("byte")?;
    if &u[i + 4..] != "/cycle" {
        return None;
    }
    Some(value * byte_prefix(&u[..i])?)
}

/// A byte count in bytes (`16.78 Mbyte` → 16,777,216... as printed).
pub(crate) fn to_bytes(value: f64, unit: &str) -> Option<f64> {
    let u = unit.trim();
    let prefix = u.strip_suffix("byte")?;
    Some(value * byte_prefix(prefix)?)
}

/// The multiplier of a byte unit's prefix (decimal K/M/G/T, binary Ki/Mi/Gi).
fn byte_prefix(prefix: &str) -> Option<f64> {
    let scale = match prefix {
        "" => 1.0,
        "K" | "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(scale)
}

fn to_per_second(value: f64, unit: &str) -> Option<f64> {
    let f = match unit.trim() {
        "hz" | "Hz" | "/second" | "cycle/second" | "cycle/s" => 1.0,
        "Khz" | "KHz" | "kHz" => 1e3,
        "Mhz" | "MHz" => 1e6,
        "Ghz" | "GHz" | "cycle/nsecond" | "cycle/ns" => 1e9,
        "cycle/usecond" | "cycle/us" => 1e6,
        _ => return None,
    };
    Some(value * f)
}

/// A warp stall reason and its weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WarpStall {
    /// ncu's reason name (`long_scoreboard`, `math_pipe_throttle`, `barrier`, ...).
    pub reason: String,
    /// Average cycles per issued instruction a warp spent stalled for this
    /// reason (from `..._per_issue_active.ratio`), when measured that way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles_per_instruction: Option<f64>,
    /// Share of all stall cycles (or samples) of this kernel.
    pub share_pct: f64,
}

/// The roofline position of a kernel (FP32 and FP64 SASS work against DRAM
/// traffic, as ncu's roofline chart computes it; tensor-core work is not counted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Roofline {
    pub achieved_gflop_per_s: f64,
    pub dram_gb_per_s: f64,
    /// FLOP per DRAM byte.
    pub arithmetic_intensity_flop_per_byte: f64,
    pub peak_fp32_gflop_per_s: f64,
    pub peak_dram_gb_per_s: f64,
    /// Intensity where the memory roof meets the FP32 roof.
    pub ridge_flop_per_byte: f64,
    /// `memory` left of the ridge, `compute` right of it.
    pub bound: String,
    /// Achieved FLOP/s as a share of the roof at this intensity.
    pub pct_of_roof: f64,
}

/// A rule result ncu reported for a kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RuleResult {
    /// Section identifier (e.g. `Occupancy`, `LaunchStats`).
    pub section: String,
    /// Rule name (e.g. `AchievedOccupancy`).
    pub rule: String,
    /// `OPT` (optimization), `WRN`, `INF` or `ERR`.
    pub kind: String,
    pub message: String,
    /// ncu's estimate of the speedup if fixed, % of the kernel's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_speedup_pct: Option<f64>,
    /// `local` (this kernel) or `global` (the whole workload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_scope: Option<String>,
}

/// One profiled kernel launch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelRecord {
    /// ncu's result id (launch order within the report).
    pub id: u64,
    pub kernel_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<i64>,
    pub block_size: String,
    pub grid_size: String,
    /// Compute capability, e.g. `9.0`.
    pub compute_capability: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<f64>,
    /// Compute (SM) throughput, % of peak (speed of light).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sm_throughput_pct: Option<f64>,
    /// Memory throughput (the busiest memory unit), % of peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_throughput_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram_throughput_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1_throughput_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_throughput_pct: Option<f64>,
    /// `compute`, `memory`, `compute_and_memory` (both ≥ 60 % of peak) or
    /// `latency` (both under 60 %, the threshold of ncu's SOL bottleneck rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sol_bound: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_occupancy_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub theoretical_occupancy_pct: Option<f64>,
    /// Blocks per SM each resource allows (`registers`, `shared_memory`,
    /// `warps`, `blocks_per_sm`, `barriers`).
    pub block_limits: BTreeMap<String, f64>,
    /// The resources with the lowest block limit: what caps theoretical occupancy.
    pub occupancy_limiters: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registers_per_thread: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waves_per_sm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram_bandwidth_gb_per_s: Option<f64>,
    /// Bytes read from and written to DRAM (`dram__bytes.sum`, when collected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1_hit_rate_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_hit_rate_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<Roofline>,
    /// The largest stall reasons, largest first (at most 5).
    pub warp_stalls: Vec<WarpStall>,
    pub rules: Vec<RuleResult>,
}

/// Kernels grouped by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelGroup {
    pub kernel_name: String,
    pub launches: u64,
    pub total_duration_ns: f64,
    /// Share of the profiled kernels' total duration.
    pub duration_share_pct: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_sm_throughput_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_memory_throughput_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_achieved_occupancy_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sol_bound: Option<String>,
    /// Rules ncu raised on launches of this kernel, with how many launches.
    pub rules: BTreeMap<String, u64>,
}

/// What a report (or its CSV pages) says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcuSummary {
    /// The pages the records were built from.
    pub pages: Vec<PageKind>,
    pub kernel_count: u64,
    pub total_duration_ns: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// Kernels grouped by name, by total duration, largest first.
    pub by_name: Vec<KernelGroup>,
    /// Per launch (limited by the caller), in report order.
    pub kernels: Vec<KernelRecord>,
    /// The optimisation advice with the most time at stake: ncu's rule messages
    /// weighted by estimated speedup × kernel duration, largest first.
    pub top_advice: Vec<Advice>,
}

/// One piece of advice, with the time it may save.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Advice {
    pub rule: String,
    pub kernel_name: String,
    pub launches: u64,
    /// Σ estimated speedup × duration over those launches.
    pub estimated_savings_ns: f64,
    pub message: String,
}

/// A page parsed into rows of (column → (value, unit)).
struct Page {
    kind: PageKind,
    records: Vec<KernelRecord>,
    device_name: Option<String>,
}

fn col(header: &[String], name: &str) -> Option<usize> {
    header.iter().position(|h| h == name)
}

fn block_limit_key(raw_suffix: &str) -> Option<&'static str> {
    Some(match raw_suffix {
        "blocks" | "Block Limit SM" => "blocks_per_sm",
        "registers" | "Block Limit Registers" => "registers",
        "shared_mem" | "Block Limit Shared Mem" => "shared_memory",
        "warps" | "Block Limit Warps" => "warps",
        "barriers" | "Block Limit Barriers" => "barriers",
        _ => return None,
    })
}

fn ident(header: &[String], row: &[String]) -> KernelRecord {
    let get = |name: &str| {
        col(header, name)
            .and_then(|i| row.get(i))
            .cloned()
            .unwrap_or_default()
    };
    KernelRecord {
        id: parse_number(&get("ID")).map(|v| v as u64).unwrap_or(0),
        kernel_name: get("Kernel Name"),
        process_id: parse_number(&get("Process ID")).map(|v| v as i64),
        device: parse_number(&get("Device")).map(|v| v as i64),
        stream: parse_number(&get("Stream")).map(|v| v as i64),
        block_size: get("Block Size"),
        grid_size: get("Grid Size"),
        compute_capability: get("CC"),
        ..KernelRecord::default()
    }
}

fn parse_raw(records: &[Vec<String>], header: &[String]) -> Page {
    // The row after the header holds units (its ID cell is empty).
    let (units, rows): (Vec<String>, &[Vec<String>]) = match records.get(1) {
        Some(r) if r.first().is_some_and(|id| id.trim().is_empty()) => (r.clone(), &records[2..]),
        _ => (vec![String::new(); header.len()], &records[1..]),
    };
    let index: HashMap<&str, usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let mut device_name = None;
    let mut out = Vec::new();
    for row in rows {
        if row.len() != header.len() {
            continue;
        }
        let val = |name: &str| index.get(name).and_then(|&i| parse_number(&row[i]));
        let unit = |name: &str| {
            index
                .get(name)
                .map(|&i| units.get(i).cloned().unwrap_or_default())
                .unwrap_or_default()
        };
        let mut k = ident(header, row);
        if device_name.is_none() {
            device_name = index
                .get("device__attribute_display_name")
                .map(|&i| row[i].clone())
                .filter(|s| !s.is_empty());
        }
        k.duration_ns = val("gpu__time_duration.sum").and_then(|v| {
            let u = unit("gpu__time_duration.sum");
            if u.is_empty() { Some(v) } else { to_ns(v, &u) }
        });
        k.sm_throughput_pct = val("sm__throughput.avg.pct_of_peak_sustained_elapsed");
        k.memory_throughput_pct =
            val("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
        k.dram_throughput_pct = val("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")
            .or_else(|| val("dram__throughput.avg.pct_of_peak_sustained_elapsed"));
        k.l1_throughput_pct = val("l1tex__throughput.avg.pct_of_peak_sustained_active");
        k.l2_throughput_pct = val("lts__throughput.avg.pct_of_peak_sustained_elapsed");
        k.achieved_occupancy_pct = val("sm__warps_active.avg.pct_of_peak_sustained_active");
        k.theoretical_occupancy_pct = val("sm__maximum_warps_per_active_cycle_pct");
        for suffix in ["blocks", "registers", "shared_mem", "warps", "barriers"] {
            if let (Some(v), Some(key)) = (
                val(&format!("launch__occupancy_limit_{suffix}")),
                block_limit_key(suffix),
            ) {
                k.block_limits.insert(key.to_string(), v);
            }
        }
        k.registers_per_thread = val("launch__registers_per_thread");
        k.waves_per_sm = val("launch__waves_per_multiprocessor");
        k.dram_bandwidth_gb_per_s = val("dram__bytes.sum.per_second")
            .and_then(|v| to_bytes_per_s(v, &unit("dram__bytes.sum.per_second")))
            .map(|b| b / 1e9);
        k.dram_bytes = val("dram__bytes.sum").and_then(|v| to_bytes(v, &unit("dram__bytes.sum")));
        k.l1_hit_rate_pct = val("l1tex__t_sector_hit_rate.pct");
        k.l2_hit_rate_pct = val("lts__t_sector_hit_rate.pct");
        k.warp_stalls = warp_stalls(header, row);
        k.roofline = roofline(&val, &unit);
        out.push(k);
    }
    Page {
        kind: PageKind::Raw,
        records: out,
        device_name,
    }
}

fn warp_stalls(header: &[String], row: &[String]) -> Vec<WarpStall> {
    const RATIO_PREFIX: &str = "smsp__average_warps_issue_stalled_";
    const RATIO_SUFFIX: &str = "_per_issue_active.ratio";
    const SAMPLE_PREFIX: &str = "smsp__pcsamp_warps_issue_stalled_";
    let mut ratios = Vec::new();
    let mut samples = Vec::new();
    for (i, h) in header.iter().enumerate() {
        let Some(v) = row.get(i).and_then(|s| parse_number(s)) else {
            continue;
        };
        if let Some(reason) = h
            .strip_prefix(RATIO_PREFIX)
            .and_then(|r| r.strip_suffix(RATIO_SUFFIX))
        {
            if !reason.ends_with("_not_issued") {
                ratios.push((reason.to_string(), v));
            }
        } else if let Some(reason) = h.strip_prefix(SAMPLE_PREFIX)
            && !reason.contains('.')
            && !reason.ends_with("_not_issued")
        {
            samples.push((reason.to_string(), v));
        }
    }
    let (list, is_ratio) = if ratios.is_empty() {
        (samples, false)
    } else {
        (ratios, true)
    };
    let total: f64 = list.iter().map(|(_, v)| v).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut out: Vec<WarpStall> = list
        .into_iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(reason, v)| WarpStall {
            reason,
            cycles_per_instruction: is_ratio.then_some(v),
            share_pct: 100.0 * v / total,
        })
        .collect();
    out.sort_by(|a, b| b.share_pct.total_cmp(&a.share_pct));
    out.truncate(5);
    out
}

fn roofline(val: &dyn Fn(&str) -> Option<f64>, unit: &dyn Fn(&str) -> String) -> Option<Roofline> {
    let rate = |op: &str| {
        val(&format!(
            "smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"
        ))
    };
    let cycles_per_s = val("smsp__cycles_elapsed.avg.per_second")
        .and_then(|v| to_per_second(v, &unit("smsp__cycles_elapsed.avg.per_second")))?;
    let fp32 = rate("fadd")? + rate("fmul")? + 2.0 * rate("ffma")?;
    let fp64 = match (rate("dadd"), rate("dmul"), rate("dfma")) {
        (Some(a), Some(m), Some(f)) => a + m + 2.0 * f,
        _ => 0.0,
    };
    let flops = (fp32 + fp64) * cycles_per_s;
    let dram = val("dram__bytes.sum.per_second")
        .and_then(|v| to_bytes_per_s(v, &unit("dram__bytes.sum.per_second")))?;
    let sm_cycles_per_s = val("sm__cycles_elapsed.avg.per_second")
        .and_then(|v| to_per_second(v, &unit("sm__cycles_elapsed.avg.per_second")))?;
    let peak_flops = 2.0
        * val("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")?
        * sm_cycles_per_s;
    let dram_cycles_per_s = val("dram__cycles_elapsed.avg.per_second")
        .and_then(|v| to_per_second(v, &unit("dram__cycles_elapsed.avg.per_second")))?;
    let peak_dram = val("dram__bytes.sum.peak_sustained")
        .and_then(|v| to_bytes_per_cycle(v, &unit("dram__bytes.sum.peak_sustained")))?
        * dram_cycles_per_s;
    if dram <= 0.0 || peak_dram <= 0.0 || peak_flops <= 0.0 {
        return None;
    }
    let ai = flops / dram;
    let ridge = peak_flops / peak_dram;
    let roof = (ai * peak_dram).min(peak_flops);
    Some(Roofline {
        achieved_gflop_per_s: flops / 1e9,
        dram_gb_per_s: dram / 1e9,
        arithmetic_intensity_flop_per_byte: ai,
        peak_fp32_gflop_per_s: peak_flops / 1e9,
        peak_dram_gb_per_s: peak_dram / 1e9,
        ridge_flop_per_byte: ridge,
        bound: if ai < ridge { "memory" } else { "compute" }.into(),
        pct_of_roof: 100.0 * flops / roof,
    })
}

fn parse_details(records: &[Vec<String>], header: &[String]) -> Page {
    let c = |name: &str| col(header, name);
    let (Some(sec), Some(name), Some(unit), Some(value)) = (
        c("Section Name"),
        c("Metric Name"),
        c("Metric Unit"),
        c("Metric Value"),
    ) else {
        return Page {
            kind: PageKind::Details,
            records: Vec::new(),
            device_name: None,
        };
    };
    let (rule_name, rule_type, rule_desc, sp_type, sp) = (
        c("Rule Name"),
        c("Rule Type"),
        c("Rule Description"),
        c("Estimated Speedup Type"),
        c("Estimated Speedup"),
    );
    let id_col = c("ID").unwrap_or(0);
    let mut order: Vec<u64> = Vec::new();
    let mut by_id: HashMap<u64, KernelRecord> = HashMap::new();
    for row in &records[1..] {
        let Some(id) = row
            .get(id_col)
            .and_then(|s| parse_number(s))
            .map(|v| v as u64)
        else {
            continue;
        };
        let k = by_id.entry(id).or_insert_with(|| {
            order.push(id);
            ident(header, row)
        });
        let cell = |i: Option<usize>| i.and_then(|i| row.get(i)).map(String::as_str).unwrap_or("");
        let rule = cell(rule_name);
        if !rule.is_empty() {
            k.rules.push(RuleResult {
                section: cell(Some(sec)).to_string(),
                rule: rule.to_string(),
                kind: cell(rule_type).to_string(),
                message: cell(rule_desc).to_string(),
                estimated_speedup_pct: parse_number(cell(sp)),
                speedup_scope: Some(cell(sp_type).to_string()).filter(|s| !s.is_empty()),
            });
            continue;
        }
        let (section, metric, u) = (cell(Some(sec)), cell(Some(name)), cell(Some(unit)));
        let Some(v) = parse_number(cell(Some(value))) else {
            continue;
        };
        match (section, metric) {
            ("GPU Speed Of Light Throughput", "Duration") => k.duration_ns = to_ns(v, u),
            ("GPU Speed Of Light Throughput", "Compute (SM) Throughput") => {
                k.sm_throughput_pct = Some(v)
            }
            ("GPU Speed Of Light Throughput", "Memory Throughput") if u == "%" => {
                k.memory_throughput_pct = Some(v)
            }
            ("GPU Speed Of Light Throughput", "DRAM Throughput") => k.dram_throughput_pct = Some(v),
            ("GPU Speed Of Light Throughput", "L1/TEX Cache Throughput") => {
                k.l1_throughput_pct = Some(v)
            }
            ("GPU Speed Of Light Throughput", "L2 Cache Throughput") => {
                k.l2_throughput_pct = Some(v)
            }
            ("Occupancy", "Achieved Occupancy") => k.achieved_occupancy_pct = Some(v),
            ("Occupancy", "Theoretical Occupancy") => k.theoretical_occupancy_pct = Some(v),
            ("Occupancy", m) if m.starts_with("Block Limit ") => {
                if let Some(key) = block_limit_key(m) {
                    k.block_limits.insert(key.to_string(), v);
                }
            }
            ("Launch Statistics", "Registers Per Thread") => k.registers_per_thread = Some(v),
            ("Launch Statistics", "Waves Per SM") => k.waves_per_sm = Some(v),
            ("Memory Workload Analysis", "Memory Throughput") => {
                k.dram_bandwidth_gb_per_s = to_bytes_per_s(v, u).map(|b| b / 1e9)
            }
            ("Memory Workload Analysis", "L1/TEX Hit Rate") => k.l1_hit_rate_pct = Some(v),
            ("Memory Workload Analysis", "L2 Hit Rate") => k.l2_hit_rate_pct = Some(v),
            _ => {}
        }
    }
    let records = order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .collect();
    Page {
        kind: PageKind::Details,
        records,
        device_name: None,
    }
}

/// A raw page as a table: header, units (empty when the CSV has none) and kernel rows.
pub(crate) struct RawTable {
    pub header: Vec<String>,
    pub units: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The raw page's table. Errors as [`summarize`].
pub(crate) fn raw_table(text: &str) -> Result<RawTable, NcuError> {
    let records = csv_records(text)?;
    let start = records
        .iter()
        .position(|r| r.first().is_some_and(|c| c == "ID"))
        .ok_or(NcuError::NoTable)?;
    let header = records[start].clone();
    let mut rows = records[start + 1..].to_vec();
    let units = match rows.first() {
        Some(r) if r.first().is_some_and(|id| id.trim().is_empty()) => rows.remove(0),
        _ => vec![String::new(); header.len()],
    };
    rows.retain(|r| r.len() == header.len());
    Ok(RawTable {
        header,
        units,
        rows,
    })
}

fn parse_page(text: &str) -> Result<Page, NcuError> {
    let records = csv_records(text)?;
    let start = records
        .iter()
        .position(|r| r.first().is_some_and(|c| c == "ID"))
        .ok_or(NcuError::NoTable)?;
    let records = &records[start..];
    let header = records[0].clone();
    let page = if col(&header, "Metric Name").is_some() && col(&header, "Section Name").is_some() {
        parse_details(records, &header)
    } else {
        parse_raw(records, &header)
    };
    if page.records.is_empty() {
        return Err(NcuError::Empty);
    }
    Ok(page)
}

/// Which page a CSV holds (None when it holds no ncu table).
pub fn detect_page(text: &str) -> Option<PageKind> {
    parse_page(text).ok().map(|p| p.kind)
}

fn fill<T: Clone>(dst: &mut Option<T>, src: &Option<T>) {
    if dst.is_none() {
        dst.clone_from(src);
    }
}

/// Merge the details page's record into the raw page's (same report, same id).
fn merge(raw: &mut KernelRecord, d: KernelRecord) {
    fill(&mut raw.duration_ns, &d.duration_ns);
    fill(&mut raw.sm_throughput_pct, &d.sm_throughput_pct);
    fill(&mut raw.memory_throughput_pct, &d.memory_throughput_pct);
    fill(&mut raw.dram_throughput_pct, &d.dram_throughput_pct);
    fill(&mut raw.l1_throughput_pct, &d.l1_throughput_pct);
    fill(&mut raw.l2_throughput_pct, &d.l2_throughput_pct);
    fill(&mut raw.achieved_occupancy_pct, &d.achieved_occupancy_pct);
    fill(
        &mut raw.theoretical_occupancy_pct,
        &d.theoretical_occupancy_pct,
    );
    fill(&mut raw.registers_per_thread, &d.registers_per_thread);
    fill(&mut raw.waves_per_sm, &d.waves_per_sm);
    fill(&mut raw.dram_bandwidth_gb_per_s, &d.dram_bandwidth_gb_per_s);
    fill(&mut raw.l1_hit_rate_pct, &d.l1_hit_rate_pct);
    fill(&mut raw.l2_hit_rate_pct, &d.l2_hit_rate_pct);
    if raw.block_limits.is_empty() {
        raw.block_limits = d.block_limits;
    }
    raw.rules = d.rules;
}

/// The SOL classification ncu's bottleneck rule uses: under 60 % of peak on
/// both compute and memory means neither is the limit (latency).
pub fn sol_bound(sm_pct: Option<f64>, mem_pct: Option<f64>) -> Option<String> {
    const HIGH: f64 = 60.0;
    let (sm, mem) = (sm_pct?, mem_pct?);
    Some(
        match (sm >= HIGH, mem >= HIGH) {
            (true, true) => "compute_and_memory",
            (true, false) => "compute",
            (false, true) => "memory",
            (false, false) => "latency",
        }
        .into(),
    )
}

fn finish_record(k: &mut KernelRecord) {
    k.sol_bound = sol_bound(k.sm_throughput_pct, k.memory_throughput_pct);
    if let Some(min) = k.block_limits.values().copied().reduce(f64::min) {
        k.occupancy_limiters = k
            .block_limits
            .iter()
            .filter(|(_, v)| **v == min)
            .map(|(n, _)| n.clone())
            .collect();
    }
}

fn mean(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.flatten().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Build the summary from one or two CSV pages of the same report (raw,
/// details, or both: records are merged by result id).
pub fn summarize(pages: &[&str], kernel_limit: usize) -> Result<NcuSummary, NcuError> {
    let mut parsed = Vec::new();
    for text in pages {
        parsed.push(parse_page(text)?);
    }
    let kinds: Vec<PageKind> = parsed.iter().map(|p| p.kind).collect();
    let device_name = parsed.iter().find_map(|p| p.device_name.clone());
    let mut records: Vec<KernelRecord> = Vec::new();
    let mut details: HashMap<u64, KernelRecord> = HashMap::new();
    for p in parsed {
        match p.kind {
            PageKind::Raw if records.is_empty() => records = p.records,
            PageKind::Details => details.extend(p.records.into_iter().map(|k| (k.id, k))),
            PageKind::Raw => {}
        }
    }
    if records.is_empty() {
        let mut d: Vec<KernelRecord> = details.drain().map(|(_, k)| k).collect();
        d.sort_by_key(|k| k.id);
        records = d;
    } else {
        for k in &mut records {
            if let Some(d) = details.remove(&k.id) {
                merge(k, d);
            }
        }
    }
    for k in &mut records {
        finish_record(k);
    }
    let total: f64 = records.iter().filter_map(|k| k.duration_ns).sum();

    let mut groups: Vec<(String, Vec<&KernelRecord>)> = Vec::new();
    for k in &records {
        match groups.iter_mut().find(|(n, _)| *n == k.kernel_name) {
            Some((_, v)) => v.push(k),
            None => groups.push((k.kernel_name.clone(), vec![k])),
        }
    }
    let mut by_name: Vec<KernelGroup> = groups
        .into_iter()
        .map(|(name, ks)| {
            let dur: f64 = ks.iter().filter_map(|k| k.duration_ns).sum();
            let mut rules = BTreeMap::new();
            for k in &ks {
                // A rule may fire several times on one launch (one per
                // unbalanced unit); count launches.
                let mut names: Vec<&str> = k
                    .rules
                    .iter()
                    .filter(|r| r.kind != "INF")
                    .map(|r| r.rule.as_str())
                    .collect();
                names.sort_unstable();
                names.dedup();
                for n in names {
                    *rules.entry(n.to_string()).or_insert(0) += 1;
                }
            }
            let sm = mean(ks.iter().map(|k| k.sm_throughput_pct));
            let mem = mean(ks.iter().map(|k| k.memory_throughput_pct));
            KernelGroup {
                kernel_name: name,
                launches: ks.len() as u64,
                total_duration_ns: dur,
                duration_share_pct: if total > 0.0 {
                    100.0 * dur / total
                } else {
                    0.0
                },
                mean_sm_throughput_pct: sm,
                mean_memory_throughput_pct: mem,
                mean_achieved_occupancy_pct: mean(ks.iter().map(|k| k.achieved_occupancy_pct)),
                sol_bound: sol_bound(sm, mem),
                rules,
            }
        })
        .collect();
    by_name.sort_by(|a, b| b.total_duration_ns.total_cmp(&a.total_duration_ns));

    // Advice: rule × kernel name, weighted by estimated speedup × duration.
    let mut advice: Vec<Advice> = Vec::new();
    for k in &records {
        let Some(d) = k.duration_ns else {
            continue;
        };
        // Per launch, the largest estimate of each rule (a rule firing once per
        // unbalanced unit gives overlapping estimates, not additive ones).
        let mut best: Vec<(&RuleResult, f64)> = Vec::new();
        for r in &k.rules {
            let Some(sp) = r
                .estimated_speedup_pct
                .filter(|sp| *sp > 0.0 && r.kind != "INF")
            else {
                continue;
            };
            match best.iter_mut().find(|(b, _)| b.rule == r.rule) {
                Some(slot) if sp > slot.1 => *slot = (r, sp),
                Some(_) => {}
                None => best.push((r, sp)),
            }
        }
        for (r, sp) in best {
            let saving = sp / 100.0 * d;
            match advice
                .iter_mut()
                .find(|a| a.rule == r.rule && a.kernel_name == k.kernel_name)
            {
                Some(a) => {
                    a.launches += 1;
                    a.estimated_savings_ns += saving;
                }
                None => advice.push(Advice {
                    rule: r.rule.clone(),
                    kernel_name: k.kernel_name.clone(),
                    launches: 1,
                    estimated_savings_ns: saving,
                    message: r.message.clone(),
                }),
            }
        }
    }
    advice.sort_by(|a, b| b.estimated_savings_ns.total_cmp(&a.estimated_savings_ns));
    advice.truncate(10);

    let kernel_count = records.len() as u64;
    records.truncate(kernel_limit);
    Ok(NcuSummary {
        pages: kinds,
        kernel_count,
        total_duration_ns: total,
        device_name,
        by_name,
        kernels: records,
        top_advice: advice,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_units() {
        assert_eq!(parse_number("1,980,000"), Some(1_980_000.0));
        assert_eq!(parse_number("7,430.40"), Some(7430.4));
        assert_eq!(parse_number("n/a"), None);
        assert_eq!(parse_number("(128, 1, 1)"), None);
        assert_eq!(to_ns(12.5, "usecond"), Some(12_500.0));
        assert_eq!(to_ns(3.0, "ms"), Some(3e6));
        assert_eq!(to_bytes_per_s(5.0, "Gbyte/second"), Some(5e9));
        assert_eq!(to_bytes_per_s(2.0, "Tbyte/s"), Some(2e12));
        assert_eq!(to_bytes_per_s(2.0, "byte"), None);
        assert_eq!(to_per_second(1.5, "Ghz"), Some(1.5e9));
    }

    #[test]
    fn program_output_and_multiline_fields_are_handled() {
        let text = "==PROF== Connected to process 1\nhello \"world\n\"ID\",\"Kernel Name\",\"Rule Description\"\n\"0\",\"k\",\"two\nlines \"\"quoted\"\"\"\nfinal loss 1.0\n";
        let recs = csv_records(text).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1], vec!["0", "k", "two\nlines \"quoted\""]);
    }

    #[test]
    fn sol_classification_follows_the_60_percent_rule() {
        assert_eq!(
            sol_bound(Some(80.0), Some(20.0)).as_deref(),
            Some("compute")
        );
        assert_eq!(sol_bound(Some(10.0), Some(75.0)).as_deref(), Some("memory"));
        assert_eq!(
            sol_bound(Some(60.0), Some(60.0)).as_deref(),
            Some("compute_and_memory")
        );
        assert_eq!(
            sol_bound(Some(36.69), Some(48.29)).as_deref(),
            Some("latency")
        );
        assert_eq!(sol_bound(None, Some(1.0)), None);
    }

    /// A raw row with stall and roofline metrics (the names the full and
    /// roofline sets use; values chosen so the arithmetic is checkable by hand).
    #[test]
    fn stalls_and_roofline_from_raw_metrics() {
        let cols = [
            ("ID", "", "0"),
            ("Kernel Name", "", "k"),
            ("gpu__time_duration.sum", "usecond", "10"),
            (
                "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                "",
                "6",
            ),
            (
                "smsp__average_warps_issue_stalled_long_scoreboard_not_issued_per_issue_active.ratio",
                "",
                "9",
            ),
            (
                "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
                "",
                "3",
            ),
            (
                "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
                "",
                "1",
            ),
            ("smsp__cycles_elapsed.avg.per_second", "Ghz", "2"),
            (
                "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed",
                "",
                "100",
            ),
            (
                "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed",
                "",
                "100",
            ),
            (
                "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
                "",
                "400",
            ),
            ("sm__cycles_elapsed.avg.per_second", "hz", "2,000,000,000"),
            (
                "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
                "",
                "16,896",
            ),
            ("dram__bytes.sum.per_second", "Gbyte/second", "500"),
            ("dram__bytes.sum.peak_sustained", "byte/cycle", "1,280"),
            ("dram__cycles_elapsed.avg.per_second", "Ghz", "2.5"),
        ];
        let line = |i: usize| {
            cols.iter()
                .map(|c| format!("\"{}\"", [c.0, c.1, c.2][i]))
                .collect::<Vec<_>>()
                .join(",")
        };
        let text = format!("{}\n{}\n{}\n", line(0), line(1), line(2));
        let s = summarize(&[&text], 10).unwrap();
        let k = &s.kernels[0];
        assert_eq!(k.duration_ns, Some(10_000.0));
        let reasons: Vec<_> = k.warp_stalls.iter().map(|w| w.reason.as_str()).collect();
        assert_eq!(reasons, vec!["long_scoreboard", "barrier", "wait"]);
        assert_eq!(k.warp_stalls[0].share_pct, 60.0);
        assert_eq!(k.warp_stalls[0].cycles_per_instruction, Some(6.0));
        let r = k.roofline.as_ref().unwrap();
        // (100 + 100 + 2·400) FLOP/cycle × 2e9 cycle/s = 2,000 GFLOP/s; 500 GB/s.
        assert_eq!(r.achieved_gflop_per_s, 2000.0);
        assert_eq!(r.arithmetic_intensity_flop_per_byte, 4.0);
        // 2 × 16,896 × 2e9 = 67,584 GFLOP/s; 1,280 B/cycle × 2.5e9 = 3,200 GB/s.
        assert_eq!(r.peak_fp32_gflop_per_s, 67_584.0);
        assert_eq!(r.peak_dram_gb_per_s, 3200.0);
        assert_eq!(r.ridge_flop_per_byte, 21.12);
        assert_eq!(r.bound, "memory");
        // Roof at AI 4 is 12,800 GFLOP/s.
        assert_eq!(r.pct_of_roof, 100.0 * 2000.0 / 12_800.0);
    }

    #[test]
    fn text_without_a_table_is_an_error() {
        assert!(matches!(
            summarize(&["final loss 1.0\n"], 5),
            Err(NcuError::NoTable)
        ));
    }
}
