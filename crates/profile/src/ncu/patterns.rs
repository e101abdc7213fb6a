//! Memory access patterns per kernel from Nsight Compute counters: global
//! memory coalescing, warp divergence and shared-memory bank conflicts, each
//! with a verdict, the numbers behind it and the fix.
//!
//! Counters (raw page; [`METRICS`] is the list to collect):
//!
//! | question | counters | ideal |
//! |---|---|---|
//! | coalescing | `l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum` over `l1tex__t_requests_..._{ld,st}.sum` (sectors per request); `sm__sass_data_bytes_mem_global_op_{ld,st}.sum` (bytes the threads asked for) | every fetched 32-byte sector fully used: bytes asked ÷ (sectors × 32) = 100 % (4 sectors per request for 4-byte accesses, 16 for 16-byte ones) |
//! | divergence | `smsp__thread_inst_executed.sum` over `smsp__inst_executed.sum` (active threads per warp instruction); `smsp__sass_branch_targets{,_threads_divergent,_threads_uniform}.sum` | 32 threads per instruction; no divergent branch targets |
//! | bank conflicts | `l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum` and `l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum` over `smsp__sass_inst_executed_op_shared_{ld,st}.sum` | 0 conflicts, 1 wavefront per request (32-bit accesses) |
//!
//! Thresholds: a direction of global access is uncoalesced when under 60 %
//! of the fetched bytes are used (high under 25 %); a kernel diverges when
//! it has divergent branch targets and under 80 % of a warp's threads are
//! active per instruction (high under 60 %); shared accesses conflict when
//! a request averages at least one extra wavefront (a 2-way conflict; high
//! from 8). ncu's own rules for the same problems (`UncoalescedGlobalAccess`,
//! `ThreadDivergence`, `UncoalescedSharedAccess`) are quoted with their
//! estimated speedup when the details page is given; the time at stake is
//! that estimate × the kernel's duration, else the duration × the wasted
//! share (an upper bound).
//!
//! Cache hit rates are not repeated here: `aisp_profile_ncu_summary` has them.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::{KernelRecord, NcuError, parse_number, raw_table, summarize, to_bytes};

/// The counters the analysis reads (`ncu --metrics` takes them as listed).
pub const METRICS: &[&str] = &[
    "gpu__time_duration.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "sm__sass_data_bytes_mem_global_op_ld.sum",
    "sm__sass_data_bytes_mem_global_op_st.sum",
    "smsp__thread_inst_executed.sum",
    "smsp__inst_executed.sum",
    "smsp__sass_branch_targets.sum",
    "smsp__sass_branch_targets_threads_divergent.sum",
    "smsp__sass_branch_targets_threads_uniform.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
];

/// Below this share of fetched bytes used, a direction is uncoalesced.
pub const COALESCED_MIN_PCT: f64 = 60.0;
/// Below this share of a warp's threads active per instruction (with
/// divergent branches), a kernel diverges.
pub const WARP_EFFICIENCY_MIN_PCT: f64 = 80.0;
/// At or above this many bank conflicts per shared request, accesses conflict.
pub const CONFLICTS_PER_REQUEST_MAX: f64 = 1.0;

/// Global loads or stores of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct GlobalAccess {
    pub requests: f64,
    pub sectors: f64,
    pub sectors_per_request: f64,
    /// Bytes the threads asked for ÷ bytes fetched (sectors × 32), % (absent
    /// without `sm__sass_data_bytes_mem_global_*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efficiency_pct: Option<f64>,
    /// Sectors fetched beyond what the bytes asked for need.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excess_sectors: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Divergence {
    /// Average active threads per executed warp instruction (32 = none masked off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_per_instruction: Option<f64>,
    /// Threads per instruction ÷ 32, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warp_efficiency_pct: Option<f64>,
    /// Uniform branch targets ÷ all branch targets, % (ncu's branch efficiency).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_efficiency_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divergent_branches: Option<f64>,
}

/// Shared-memory loads or stores of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SharedAccess {
    pub requests: f64,
    pub bank_conflicts: f64,
    pub conflicts_per_request: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavefronts_per_request: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    UncoalescedGlobal,
    WarpDivergence,
    BankConflicts,
}

/// One problem found on a kernel.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Problem {
    pub pattern: Pattern,
    /// `high` or `medium` by how far the measure is from ideal.
    pub severity: String,
    /// What was measured, with the numbers.
    pub evidence: String,
    pub fix: String,
    /// ncu's rule for the same problem and its estimated speedup, % of the kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ncu_rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ncu_estimated_speedup_pct: Option<f64>,
    /// Kernel time a fix may remove, ns (see `stake_basis`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stake_ns: Option<f64>,
    pub stake_basis: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct KernelPatterns {
    pub id: u64,
    pub kernel_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<f64>,
    /// `flagged`, `clean` or `insufficient_signal` (the counters were not collected).
    pub verdict: String,
    /// Why, in one sentence with the numbers.
    pub verdict_reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_loads: Option<GlobalAccess>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_stores: Option<GlobalAccess>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Divergence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_loads: Option<SharedAccess>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_stores: Option<SharedAccess>,
    pub problems: Vec<Problem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PatternReport {
    pub kernel_count: u64,
    pub flagged: u64,
    /// Kernels, in report order.
    pub kernels: Vec<KernelPatterns>,
    /// Counters of [`METRICS`] absent from the CSV (those questions are not answered).
    pub missing_metrics: Vec<String>,
}

impl PatternReport {
    /// Flagged kernels first, the most time at stake (their largest problem's)
    /// first; then the rest in report order.
    pub fn flagged_first(&mut self) {
        let stake = |k: &KernelPatterns| {
            k.problems
                .iter()
                .filter_map(|p| p.stake_ns)
                .fold(0.0, f64::max)
        };
        self.kernels.sort_by(|a, b| {
            (b.verdict == "flagged")
                .cmp(&(a.verdict == "flagged"))
                .then(stake(b).total_cmp(&stake(a)))
        });
    }
}

type Metrics = HashMap<String, f64>;
/// Per kernel (result id) its counters, and the counters the page lacks.
type RawMetrics = (Vec<(u64, Metrics)>, Vec<String>);

fn raw_metrics(text: &str) -> Result<RawMetrics, NcuError> {
    let super::RawTable {
        header,
        units,
        rows,
    } = raw_table(text)?;
    let idx: HashMap<&str, usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let missing: Vec<String> = METRICS
        .iter()
        .filter(|m| !idx.contains_key(*m))
        .map(|m| m.to_string())
        .collect();
    let mut out = Vec::new();
    for row in rows {
        let Some(id) = idx
            .get("ID")
            .and_then(|&i| parse_number(&row[i]))
            .map(|v| v as u64)
        else {
            continue;
        };
        let mut m = Metrics::new();
        for name in METRICS {
            let Some(&i) = idx.get(name) else { continue };
            let Some(v) = parse_number(&row[i]) else {
                continue;
            };
            let unit = units.get(i).map(String::as_str).unwrap_or("");
            let v = if name.starts_with("sm__sass_data_bytes") {
                match to_bytes(v, if unit.is_empty() { "byte" } else { unit }) {
                    Some(b) => b,
                    None => continue,
                }
            } else {
                v
            };
            m.insert(name.to_string(), v);
        }
        out.push((id, m));
    }
    Ok((out, missing))
}

fn global(m: &Metrics, dir: &str) -> Option<GlobalAccess> {
    let req = *m.get(&format!(
        "l1tex__t_requests_pipe_lsu_mem_global_op_{dir}.sum"
    ))?;
    let sec = *m.get(&format!(
        "l1tex__t_sectors_pipe_lsu_mem_global_op_{dir}.sum"
    ))?;
    if req <= 0.0 {
        return None;
    }
    let bytes = m
        .get(&format!("sm__sass_data_bytes_mem_global_op_{dir}.sum"))
        .copied();
    let (eff, excess) = match bytes {
        Some(b) if sec > 0.0 => {
            let ideal = (b / 32.0).ceil();
            (
                Some((100.0 * b / (sec * 32.0)).min(100.0)),
                Some((sec - ideal).max(0.0)),
            )
        }
        _ => (None, None),
    };
    Some(GlobalAccess {
        requests: req,
        sectors: sec,
        sectors_per_request: sec / req,
        efficiency_pct: eff,
        excess_sectors: excess,
    })
}

fn shared(m: &Metrics, dir: &str) -> Option<SharedAccess> {
    let req = *m.get(&format!("smsp__sass_inst_executed_op_shared_{dir}.sum"))?;
    let conflicts = *m.get(&format!(
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{dir}.sum"
    ))?;
    if req <= 0.0 {
        return None;
    }
    let wf = m
        .get(&format!(
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{dir}.sum"
        ))
        .map(|w| w / req);
    Some(SharedAccess {
        requests: req,
        bank_conflicts: conflicts,
        conflicts_per_request: conflicts / req,
        wavefronts_per_request: wf,
    })
}

fn divergence(m: &Metrics) -> Option<Divergence> {
    let tpi = match (
        m.get("smsp__thread_inst_executed.sum"),
        m.get("smsp__inst_executed.sum"),
    ) {
        (Some(t), Some(i)) if *i > 0.0 => Some(t / i),
        _ => None,
    };
    let targets = m.get("smsp__sass_branch_targets.sum").copied();
    let uniform = m
        .get("smsp__sass_branch_targets_threads_uniform.sum")
        .copied();
    let divergent = m
        .get("smsp__sass_branch_targets_threads_divergent.sum")
        .copied();
    if tpi.is_none() && divergent.is_none() {
        return None;
    }
    Some(Divergence {
        threads_per_instruction: tpi,
        warp_efficiency_pct: tpi.map(|t| 100.0 * t / 32.0),
        branch_efficiency_pct: match (targets, uniform) {
            (Some(t), Some(u)) if t > 0.0 => Some(100.0 * u / t),
            _ => None,
        },
        divergent_branches: divergent,
    })
}

/// ncu's rule on this kernel for a pattern, with its estimated speedup.
fn ncu_rule(k: Option<&KernelRecord>, names: &[&str]) -> Option<(String, Option<f64>)> {
    k?.rules
        .iter()
        .filter(|r| names.contains(&r.rule.as_str()) && r.kind != "INF")
        .max_by(|a, b| {
            a.estimated_speedup_pct
                .unwrap_or(0.0)
                .total_cmp(&b.estimated_speedup_pct.unwrap_or(0.0))
        })
        .map(|r| (r.rule.clone(), r.estimated_speedup_pct))
}

fn stake(
    duration: Option<f64>,
    rule: &Option<(String, Option<f64>)>,
    wasted_share: Option<f64>,
) -> (Option<f64>, String) {
    match (duration, rule.as_ref().and_then(|r| r.1), wasted_share) {
        (Some(d), Some(sp), _) => (
            Some(d * sp / 100.0),
            format!("ncu's estimated speedup ({sp:.1} %) × the kernel's duration"),
        ),
        (Some(d), None, Some(w)) => (
            Some(d * w),
            "upper bound: the kernel's duration × the wasted share of the measure".into(),
        ),
        _ => (None, "no duration measured".into()),
    }
}

fn fmt_pct(v: f64) -> String {
    format!("{v:.1} %")
}

/// Analyse the raw page (and, optionally, the details page for ncu's rules)
/// of one report.
pub fn analyze(raw: &str, details: Option<&str>) -> Result<PatternReport, NcuError> {
    let (rows, missing) = raw_metrics(raw)?;
    if rows.is_empty() {
        return Err(NcuError::Empty);
    }
    let mut pages = vec![raw];
    if let Some(d) = details {
        pages.push(d);
    }
    let summary = summarize(&pages, usize::MAX)?;
    let records: HashMap<u64, &KernelRecord> = summary.kernels.iter().map(|k| (k.id, k)).collect();
    let mut kernels = Vec::new();
    for (id, m) in rows {
        let rec = records.get(&id).copied();
        let duration = rec
            .and_then(|r| r.duration_ns)
            .or_else(|| m.get("gpu__time_duration.sum").copied());
        let (gl, gs) = (global(&m, "ld"), global(&m, "st"));
        let div = divergence(&m);
        let (sl, ss) = (shared(&m, "ld"), shared(&m, "st"));
        let mut problems = Vec::new();
        let mut clean_notes = Vec::new();

        // Coalescing: every direction under the threshold is reported; the
        // worse one sets the severity and the stake.
        let mut worst: Option<f64> = None;
        let mut bad: Vec<String> = Vec::new();
        for (dir, a) in [("loads", &gl), ("stores", &gs)] {
            let Some(a) = a else { continue };
            let eff = a.efficiency_pct.or_else(|| {
                (a.sectors_per_request > 16.0).then_some(100.0 * 16.0 / a.sectors_per_request)
            });
            let Some(e) = eff else { continue };
            worst = Some(worst.map_or(e, |w: f64| w.min(e)));
            if e < COALESCED_MIN_PCT {
                bad.push(match a.excess_sectors {
                    Some(x) => format!(
                        "global {dir}: {:.1} sectors per request, {} of the fetched bytes used ({x:.0} excess sectors)",
                        a.sectors_per_request,
                        fmt_pct(e)
                    ),
                    // Without the requested-bytes counter, more than 16 sectors
                    // per request (the most a 16-byte access needs) bounds the use.
                    None => format!(
                        "global {dir}: {:.1} sectors per request, at most {} of the fetched bytes used",
                        a.sectors_per_request,
                        fmt_pct(e)
                    ),
                });
            }
        }
        if let Some(e) = worst {
            if !bad.is_empty() {
                let rule = ncu_rule(rec, &["UncoalescedGlobalAccess"]);
                let (stake_ns, basis) = stake(duration, &rule, Some(1.0 - e / 100.0));
                problems.push(Problem {
                    pattern: Pattern::UncoalescedGlobal,
                    severity: if e < 25.0 { "high" } else { "medium" }.into(),
                    evidence: bad.join("; "),
                    fix: "Make consecutive threads touch consecutive addresses: index with threadIdx.x in the \
                          fastest-moving dimension, transpose through shared memory, or switch the data layout \
                          (array of structs → struct of arrays)."
                        .into(),
                    ncu_estimated_speedup_pct: rule.as_ref().and_then(|r| r.1),
                    ncu_rule: rule.map(|r| r.0),
                    stake_ns,
                    stake_basis: basis,
                });
            } else {
                clean_notes.push(format!("global accesses {} efficient", fmt_pct(e)));
            }
        }

        if let Some(d) = &div {
            let divergent = d.divergent_branches.unwrap_or(0.0) > 0.0;
            let eff = d.warp_efficiency_pct.or(d.branch_efficiency_pct);
            match eff {
                Some(e) if divergent && e < WARP_EFFICIENCY_MIN_PCT => {
                    let rule = ncu_rule(rec, &["ThreadDivergence", "BranchDivergence"]);
                    let (stake_ns, basis) = stake(duration, &rule, Some(1.0 - e / 100.0));
                    let tpi = d
                        .threads_per_instruction
                        .map(|t| format!("{t:.1} of 32 threads active per warp instruction"))
                        .unwrap_or_else(|| format!("branch efficiency {}", fmt_pct(e)));
                    problems.push(Problem {
                        pattern: Pattern::WarpDivergence,
                        severity: if e < 60.0 { "high" } else { "medium" }.into(),
                        evidence: format!(
                            "{tpi} ({} warp efficiency), {:.0} divergent branch targets",
                            fmt_pct(e),
                            d.divergent_branches.unwrap_or(0.0)
                        ),
                        fix: "Make the branch select data rather than code (compute both coefficients and pick \
                              with a ternary), sort or bin the work so that a warp's threads take the same path, \
                              or hoist the data-dependent condition out of the inner loop."
                            .into(),
                        ncu_estimated_speedup_pct: rule.as_ref().and_then(|r| r.1),
                        ncu_rule: rule.map(|r| r.0),
                        stake_ns,
                        stake_basis: basis,
                    });
                }
                Some(e) => clean_notes.push(format!("warp efficiency {}", fmt_pct(e))),
                None => {}
            }
        }

        let mut worst_sh: Option<(&str, &SharedAccess)> = None;
        for (dir, a) in [("loads", &sl), ("stores", &ss)] {
            if let Some(a) = a
                && worst_sh.is_none_or(|w| a.conflicts_per_request > w.1.conflicts_per_request)
            {
                worst_sh = Some((dir, a));
            }
        }
        if let Some((dir, a)) = worst_sh {
            if a.conflicts_per_request >= CONFLICTS_PER_REQUEST_MAX {
                let ways = a
                    .wavefronts_per_request
                    .unwrap_or(1.0 + a.conflicts_per_request);
                let rule = ncu_rule(
                    rec,
                    &[
                        "UncoalescedSharedAccess",
                        "SharedMemoryConflicts",
                        "MemoryShared",
                    ],
                );
                let (stake_ns, basis) = stake(duration, &rule, Some(1.0 - 1.0 / ways.max(1.0)));
                problems.push(Problem {
                    pattern: Pattern::BankConflicts,
                    severity: if a.conflicts_per_request >= 8.0 { "high" } else { "medium" }.into(),
                    evidence: format!(
                        "shared {dir}: {:.1} bank conflicts per request ({:.1} wavefronts per request; 1 is conflict-free)",
                        a.conflicts_per_request, ways
                    ),
                    fix: "Pad shared arrays by one element per row (tile[32][33]) or swizzle the index (XOR the \
                          column with the row) so that a warp's 32 accesses fall in 32 different banks."
                        .into(),
                    ncu_estimated_speedup_pct: rule.as_ref().and_then(|r| r.1),
                    ncu_rule: rule.map(|r| r.0),
                    stake_ns,
                    stake_basis: basis,
                });
            } else {
                clean_notes.push(format!(
                    "shared memory {:.2} conflicts per request",
                    a.conflicts_per_request
                ));
            }
        }

        let answered = worst.is_some() || div.is_some() || worst_sh.is_some();
        let (verdict, reason) = if !problems.is_empty() {
            (
                "flagged",
                problems
                    .iter()
                    .map(|p| p.evidence.clone())
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        } else if answered {
            ("clean", clean_notes.join("; "))
        } else {
            (
                "insufficient_signal",
                "none of the coalescing, divergence or bank-conflict counters were collected for this kernel".into(),
            )
        };
        kernels.push(KernelPatterns {
            id,
            kernel_name: rec.map(|r| r.kernel_name.clone()).unwrap_or_default(),
            duration_ns: duration,
            verdict: verdict.into(),
            verdict_reason: reason,
            global_loads: gl,
            global_stores: gs,
            divergence: div,
            shared_loads: sl,
            shared_stores: ss,
            problems,
        });
    }
    Ok(PatternReport {
        kernel_count: kernels.len() as u64,
        flagged: kernels.iter().filter(|k| k.verdict == "flagged").count() as u64,
        kernels,
        missing_metrics: missing,
    })
}
