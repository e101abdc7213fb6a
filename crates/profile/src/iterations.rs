//! Training/inference steps: detection, per-step CPU and GPU figures, variance,
//! and what differs in the slowest steps.
//!
//! Detection, in order: a caller-given marker; the convention of NVTX push/pop
//! ranges named `step` or `step_*`; other numbered range families
//! (`iter_3`, `batch 7`, `request_1`, preferring step-like words, then ranges
//! that are not nested inside another family); and with no NVTX at all, a
//! repeating kernel pattern on each device (a kernel that occurs once per
//! iteration with the same number of kernels between occurrences), one entry
//! per device, so no device or rank is left out.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::attribution;
use super::intervals;
use super::model::{self, NvtxRange};
use super::stats;
use super::{Profile, ResolvedScope, Result};

/// The ranges chosen as steps.
#[derive(Debug, Clone)]
pub struct StepRanges {
    /// The family: `step`, `iter_`, a marker, ...
    pub family: String,
    /// How they were found: `marker`, `step_convention`, `numbered_family`.
    pub rule: &'static str,
    /// The ranges, sorted by start.
    pub ranges: Vec<NvtxRange>,
}

fn split_number(name: &str) -> Option<(&str, u64)> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 12 {
        return None;
    }
    let (head, num) = name.split_at(name.len() - digits);
    let prefix = head.trim_end_matches(['_', '-', ' ', '#', ':', '.']);
    if prefix.is_empty() {
        return None;
    }
    Some((prefix, num.parse().ok()?))
}

fn is_step_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("step") || (name.len() > 5 && name[..5].eq_ignore_ascii_case("step_"))
}

fn matches_marker(name: &str, marker: &str) -> bool {
    name == marker
        || split_number(name).is_some_and(|(prefix, _)| {
            prefix == marker.trim_end_matches(['_', '-', ' ', '#', ':', '.'])
        })
}

const STEP_WORDS: &[&str] = &["step", "iter", "batch", "request", "train", "sample"];

/// Find the step ranges of the given processes (globalPid keys; all when None).
pub fn detect_steps(
    p: &Profile,
    global_pids: Option<&[i64]>,
    marker: Option<&str>,
) -> Result<Option<StepRanges>> {
    let nvtx = p.nvtx()?;
    let in_scope =
        |r: &&NvtxRange| global_pids.is_none_or(|g| g.contains(&model::process_key(r.global_tid)));
    if let Some(m) = marker {
        let ranges: Vec<NvtxRange> = nvtx
            .ranges
            .iter()
            .filter(in_scope)
            .filter(|r| matches_marker(&r.name, m))
            .cloned()
            .collect();
        return Ok((!ranges.is_empty()).then(|| StepRanges {
            family: m.to_string(),
            rule: "marker",
            ranges,
        }));
    }
    let steps: Vec<NvtxRange> = nvtx
        .ranges
        .iter()
        .filter(in_scope)
        .filter(|r| r.is_push_pop() && is_step_name(&r.name))
        .cloned()
        .collect();
    if !steps.is_empty() {
        return Ok(Some(StepRanges {
            family: "step".into(),
            rule: "step_convention",
            ranges: steps,
        }));
    }
    // Numbered families: prefix → (distinct numbers, ranges).
    let mut families: BTreeMap<String, Vec<&NvtxRange>> = BTreeMap::new();
    for r in nvtx.ranges.iter().filter(in_scope) {
        // PyTorch emit_nvtx names (`aten::mm, op_id = 7`) number operators, not iterations.
        if super::nvtx::group_name(&r.name).len() != r.name.len() {
            continue;
        }
        if let Some((prefix, _)) = split_number(&r.name) {
            families.entry(prefix.to_string()).or_default().push(r);
        }
    }
    // Iterations follow each other: keep families whose ranges (per thread) do not overlap.
    families.retain(|_, v| {
        if v.len() < 2 {
            return false;
        }
        let mut by_thread: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
        for r in v.iter() {
            by_thread
                .entry(r.global_tid)
                .or_default()
                .push((r.start, r.end));
        }
        let overlapping: usize = by_thread
            .values_mut()
            .map(|iv| {
                iv.sort_unstable();
                iv.windows(2).filter(|w| w[1].0 < w[0].1).count()
            })
            .sum();
        overlapping * 10 <= v.len()
    });
    if families.is_empty() {
        return Ok(None);
    }
    // A family is nested when most of its ranges lie inside ranges of another family.
    let nested = |name: &str, ranges: &[&NvtxRange]| {
        families.iter().any(|(other, outer)| {
            other != name
                && ranges
                    .iter()
                    .filter(|r| {
                        outer
                            .iter()
                            .any(|o| o.start <= r.start && r.end <= o.end && o.dur() > r.dur())
                    })
                    .count()
                    * 2
                    > ranges.len()
        })
    };
    let best = families
        .iter()
        .map(|(name, ranges)| {
            let lower = name.to_ascii_lowercase();
            let word = STEP_WORDS
                .iter()
                .position(|w| lower.contains(w))
                .map_or(0, |i| STEP_WORDS.len() - i);
            let top = !nested(name, ranges);
            ((word, top, ranges.len()), name)
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, name)| name.clone());
    let Some(best) = best else { return Ok(None) };
    let ranges: Vec<NvtxRange> = families[&best].iter().map(|r| (*r).clone()).collect();
    Ok(Some(StepRanges {
        family: best,
        rule: "numbered_family",
        ranges,
    }))
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    /// 0-based position in time order within its process.
    pub index: usize,
    pub name: String,
    pub pid: i64,
    pub tid: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    /// CPU duration of the range.
    pub cpu_ns: i64,
    /// Union of the intervals of the kernels launched inside the step (any thread of the process).
    pub gpu_union_ns: i64,
    /// First attributed kernel start → last end.
    pub gpu_span_ns: Option<i64>,
    /// First attributed kernel start − step start.
    pub first_kernel_lag_ns: Option<i64>,
    /// Kernels launched inside the step by any thread of the process.
    pub kernels: u64,
    /// Kernels launched inside the step by the range's own thread (the nsys rule).
    pub kernels_same_thread: u64,
    /// NCCL kernels among `kernels`.
    pub nccl_kernels: u64,
    /// NCCL kernels by collective.
    pub collectives: BTreeMap<super::nccl::Collective, u64>,
}

/// min / median / max / mean and coefficient of variation of a per-step figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Spread {
    pub count: usize,
    pub min: i64,
    /// Middle-pair mean for an even count.
    pub median: f64,
    pub max: i64,
    pub mean: f64,
    /// Sample standard deviation / mean × 100.
    pub cv_pct: f64,
}

pub fn spread(values: &[i64]) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    let s = stats::stats(&mut v);
    let mean = s.total as f64 / s.count as f64;
    Some(Spread {
        count: values.len(),
        min: s.min,
        median: s.med,
        max: s.max,
        mean: stats::round1(mean),
        cv_pct: if mean > 0.0 {
            stats::round_ratio((s.stddev * 1000.0) as i128, (mean * 10.0) as i128, 100)
        } else {
            0.0
        },
    })
}

/// What sets a slow step apart from the median step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SlowStep {
    pub index: usize,
    pub name: String,
    pub pid: i64,
    pub cpu_ns: i64,
    /// CPU duration minus the median step's.
    pub cpu_excess_ns: i64,
    pub gpu_union_ns: i64,
    pub kernels: u64,
    /// Kernel count minus the typical (median) count.
    pub kernel_excess: i64,
    /// Longest GPU idle stretch inside the step on the process's device(s).
    pub longest_gpu_idle_ns: i64,
    /// The longest CUDA API calls of the process inside the step (name, ns).
    pub longest_api_calls: Vec<NamedDuration>,
    /// Kernels whose time in this step exceeds their median per-step time the most.
    pub kernel_excess_time: Vec<NamedDuration>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamedDuration {
    pub name: String,
    pub ns: i64,
}

/// Steps of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessSteps {
    pub pid: i64,
    /// Devices this process ran kernels on.
    pub devices: Vec<i64>,
    /// The repeating kernel that delimits this entry's iterations (`kernel_pattern` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    pub step_count: usize,
    /// Per-step CPU duration over all steps.
    pub cpu_all: Option<Spread>,
    /// Per-step CPU duration without the first step (lazy loading, warm-up).
    pub cpu_after_first: Option<Spread>,
    pub gpu_union_all: Option<Spread>,
    pub gpu_union_after_first: Option<Spread>,
    /// Typical (median) kernels launched per step, any thread of the process.
    pub kernels_per_step: f64,
    /// Typical kernels per step under the same-thread rule.
    pub kernels_per_step_same_thread: f64,
    /// The first step, reported apart (left out of `aisp_profile_iterations` answers that list it in `steps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_step: Option<Step>,
    /// Median CPU step time / median GPU-projected time: well above 1 means host-bound.
    pub cpu_to_gpu_ratio: Option<f64>,
    pub slowest: Vec<SlowStep>,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Iterations {
    /// The family of ranges used as steps (`step`, `request_`, a marker, or the kernel name(s) of
    /// the pattern, `|`-joined when devices differ).
    pub family: Option<String>,
    /// `marker`, `step_convention`, `numbered_family`, `kernel_pattern`, or `none`.
    pub rule: String,
    pub processes: Vec<ProcessSteps>,
    /// When no steps were found: why, and what to do.
    pub note: Option<String>,
}

/// Detect steps and compute per-step figures for the processes in scope.
pub fn iterations(
    p: &Profile,
    scope: &ResolvedScope,
    marker: Option<&str>,
    max_steps_listed: usize,
) -> Result<Iterations> {
    let kernels = p.kernels()?;
    let gpids: Option<Vec<i64>> = match (scope.process, scope.device) {
        (None, None) => None,
        _ => {
            let mut g: Vec<i64> = kernels
                .iter()
                .filter(|k| scope.admits(k.device, k.global_pid, k.start, k.end))
                .map(|k| k.global_pid & model::PID_MASK)
                .collect();
            g.sort_unstable();
            g.dedup();
            Some(g)
        }
    };
    let detected = detect_steps(p, gpids.as_deref(), marker)?;
    let Some(sr) = detected else {
        return kernel_pattern(p, scope, max_steps_listed);
    };
    let ranges: Vec<&NvtxRange> = sr
        .ranges
        .iter()
        .filter(|r| scope.overlaps(r.start, r.end))
        .collect();
    let attributed = attribution::attribute(p, &ranges)?;
    let mut per_process: BTreeMap<i64, Vec<(usize, &NvtxRange)>> = BTreeMap::new();
    for (i, r) in ranges.iter().enumerate() {
        per_process
            .entry(model::pid_of(r.global_tid))
            .or_default()
            .push((i, r));
    }
    let mut processes = Vec::new();
    for (pid, items) in per_process {
        let mut steps = Vec::new();
        let mut step_kernels: Vec<&[u32]> = Vec::new();
        for (pos, (i, r)) in items.iter().enumerate() {
            let a = &attributed[*i];
            let ks: Vec<&model::Kernel> = a
                .any_thread
                .iter()
                .map(|&ki| &kernels[ki as usize])
                .filter(|k| scope.device.is_none_or(|d| d == k.device))
                .collect();
            let union = intervals::union(ks.iter().map(|k| (k.start, k.end)).collect());
            let first = ks.iter().map(|k| k.start).min();
            let last = ks.iter().map(|k| k.end).max();
            let mut collectives: BTreeMap<super::nccl::Collective, u64> = BTreeMap::new();
            for k in &ks {
                let n = p.string(k.short_name);
                if super::nccl::is_nccl(n) {
                    *collectives
                        .entry(super::nccl::Collective::of(n))
                        .or_default() += 1;
                }
            }
            let nccl: u64 = collectives.values().sum();
            steps.push(Step {
                index: pos,
                name: r.name.clone(),
                pid,
                tid: model::tid_of(r.global_tid),
                start_ns: r.start,
                end_ns: r.end,
                cpu_ns: r.dur(),
                gpu_union_ns: intervals::length(&union),
                gpu_span_ns: first.zip(last).map(|(f, l)| l - f),
                first_kernel_lag_ns: first.map(|f| f - r.start),
                kernels: ks.len() as u64,
                kernels_same_thread: a.same_thread.len() as u64,
                nccl_kernels: nccl,
                collectives,
            });
            step_kernels.push(&a.any_thread);
        }
        let devices: Vec<i64> = {
            let mut d: Vec<i64> = kernels
                .iter()
                .filter(|k| model::pid_of(k.global_pid) == pid)
                .map(|k| k.device)
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        };
        let cpu: Vec<i64> = steps.iter().map(|s| s.cpu_ns).collect();
        let gpu: Vec<i64> = steps.iter().map(|s| s.gpu_union_ns).collect();
        let kcount: Vec<i64> = steps.iter().map(|s| s.kernels as i64).collect();
        let kcount_same: Vec<i64> = steps.iter().map(|s| s.kernels_same_thread as i64).collect();
        let cpu_all = spread(&cpu);
        let cpu_after = spread(cpu.get(1..).unwrap_or(&[]));
        let gpu_all = spread(&gpu);
        let gpu_after = spread(gpu.get(1..).unwrap_or(&[]));
        let med = |v: &[i64]| {
            let mut v = v.to_vec();
            stats::median(&mut v)
        };
        let kernels_per_step = med(kcount.get(1..).filter(|s| !s.is_empty()).unwrap_or(&kcount));
        let kernels_per_step_same_thread = med(kcount_same
            .get(1..)
            .filter(|s| !s.is_empty())
            .unwrap_or(&kcount_same));
        let ratio = match (
            &cpu_after.as_ref().or(cpu_all.as_ref()),
            &gpu_after.as_ref().or(gpu_all.as_ref()),
        ) {
            (Some(c), Some(g)) if g.median > 0.0 => Some(stats::round_ratio(
                (c.median * 10.0) as i128,
                (g.median * 10.0) as i128,
                100,
            )),
            _ => None,
        };
        let slowest = slow_steps(p, &steps, &step_kernels, kernels_per_step, pid)?;
        let first_step = steps.first().cloned();
        let step_count = steps.len();
        let listed: Vec<Step> = if steps.len() > max_steps_listed {
            steps.into_iter().take(max_steps_listed).collect()
        } else {
            steps
        };
        processes.push(ProcessSteps {
            pid,
            devices,
            anchor: None,
            step_count,
            cpu_all,
            cpu_after_first: cpu_after,
            gpu_union_all: gpu_all,
            gpu_union_after_first: gpu_after,
            kernels_per_step,
            kernels_per_step_same_thread,
            first_step,
            cpu_to_gpu_ratio: ratio,
            slowest,
            steps: listed,
        });
    }
    // Processes that ran kernels in scope but have no step ranges are named, not dropped.
    let mut without: Vec<i64> = kernels
        .iter()
        .filter(|k| k.global_pid != 0 && scope.admits(k.device, k.global_pid, k.start, k.end))
        .map(|k| model::pid_of(k.global_pid))
        .filter(|pid| processes.iter().all(|ps| ps.pid != *pid))
        .collect();
    without.sort_unstable();
    without.dedup();
    let note = (!without.is_empty()).then(|| {
        format!(
            "process(es) {without:?} ran kernels but have no `{}` ranges, so they are not listed",
            sr.family
        )
    });
    Ok(Iterations {
        family: Some(sr.family),
        rule: sr.rule.to_string(),
        processes,
        note,
    })
}

fn slow_steps(
    p: &Profile,
    steps: &[Step],
    step_kernels: &[&[u32]],
    typical_kernels: f64,
    pid: i64,
) -> Result<Vec<SlowStep>> {
    if steps.len() < 3 {
        return Ok(Vec::new());
    }
    let kernels = p.kernels()?;
    let api = p.api()?;
    let mut cpu: Vec<i64> = steps.iter().map(|s| s.cpu_ns).collect();
    let median_cpu = stats::median(&mut cpu);
    // Median per-step time of each kernel name (short name).
    let mut per_name: HashMap<i64, Vec<i64>> = HashMap::new();
    for (si, ks) in step_kernels.iter().enumerate() {
        let mut t: HashMap<i64, i64> = HashMap::new();
        for &ki in ks.iter() {
            let k = &kernels[ki as usize];
            *t.entry(k.short_name).or_default() += k.dur();
        }
        for (name, ns) in t {
            let v = per_name.entry(name).or_insert_with(|| vec![0; steps.len()]);
            v[si] = ns;
        }
    }
    let name_median: HashMap<i64, f64> = per_name
        .iter()
        .map(|(n, v)| {
            let mut v = v.clone();
            (*n, stats::median(&mut v))
        })
        .collect();
    let mut order: Vec<usize> = (0..steps.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(steps[i].cpu_ns));
    let mut out = Vec::new();
    for &si in order.iter().take(3) {
        let s = &steps[si];
        let ks: Vec<&model::Kernel> = step_kernels[si]
            .iter()
            .map(|&ki| &kernels[ki as usize])
            .collect();
        let union = intervals::union(ks.iter().map(|k| (k.start, k.end)).collect());
        let idle = intervals::gaps_in_window(
            &union,
            (
                s.start_ns,
                s.end_ns.max(union.last().map_or(s.end_ns, |u| u.1)),
            ),
            0,
        );
        let longest_gpu_idle_ns = idle.iter().map(|(a, b)| b - a).max().unwrap_or(0);
        let lo = api.partition_point(|a| a.start < s.start_ns);
        let mut calls: Vec<NamedDuration> = api[lo..]
            .iter()
            .take_while(|a| a.start < s.end_ns)
            .filter(|a| model::pid_of(a.global_tid) == pid)
            .map(|a| NamedDuration {
                name: super::summary::api_display_name(p.string(a.name)).to_string(),
                ns: a.dur(),
            })
            .collect();
        calls.sort_by_key(|c| std::cmp::Reverse(c.ns));
        calls.truncate(3);
        let mut t: HashMap<i64, i64> = HashMap::new();
        for k in &ks {
            *t.entry(k.short_name).or_default() += k.dur();
        }
        let mut excess: Vec<NamedDuration> = t
            .into_iter()
            .map(|(n, ns)| NamedDuration {
                name: p.string(n).to_string(),
                ns: ns - name_median.get(&n).copied().unwrap_or(0.0).round() as i64,
            })
            .filter(|d| d.ns > 0)
            .collect();
        excess.sort_by_key(|d| std::cmp::Reverse(d.ns));
        excess.truncate(3);
        out.push(SlowStep {
            index: s.index,
            name: s.name.clone(),
            pid,
            cpu_ns: s.cpu_ns,
            cpu_excess_ns: s.cpu_ns - median_cpu.round() as i64,
            gpu_union_ns: s.gpu_union_ns,
            kernels: s.kernels,
            kernel_excess: s.kernels as i64 - typical_kernels.round() as i64,
            longest_gpu_idle_ns,
            longest_api_calls: calls,
            kernel_excess_time: excess,
        });
    }
    Ok(out)
}

/// The most regular once-per-iteration kernel among one device's kernels (in
/// time order) whose occurrences span at least half of them: (cv of the launches between occurrences,
/// occurrences, demangled name).
pub(crate) fn pattern_anchor(
    kernels: &[model::Kernel],
    idx: &[usize],
) -> Option<(f64, usize, i64)> {
    let mut positions: HashMap<i64, Vec<usize>> = HashMap::new();
    for (pos, &ki) in idx.iter().enumerate() {
        positions
            .entry(kernels[ki].demangled_name)
            .or_default()
            .push(pos);
    }
    let mut best: Option<(f64, usize, i64)> = None;
    for (name, pos) in positions {
        // An anchor repeats through most of the trace: a kernel that repeats regularly in one stretch only (a
        // phase of a few hundred kernels) would make that stretch the whole of the steps.
        if pos.len() < 3
            || pos.len() * 2 > idx.len()
            || (pos[pos.len() - 1] - pos[0]) * 2 < idx.len()
        {
            continue;
        }
        let seg: Vec<i64> = pos.windows(2).map(|w| (w[1] - w[0]) as i64).collect();
        let mean = seg.iter().sum::<i64>() as f64 / seg.len() as f64;
        if mean < 4.0 {
            continue;
        }
        let var = seg.iter().map(|&s| (s as f64 - mean).powi(2)).sum::<f64>() / seg.len() as f64;
        let cv = var.sqrt() / mean;
        if cv > 0.05 {
            continue;
        }
        let cand = (cv, pos.len(), name);
        // Fewest occurrences wins (one per iteration), then regularity, then the lower id.
        if best.is_none_or(|b| (cand.1, cand.0, cand.2) < (b.1, b.0, b.2)) {
            best = Some(cand);
        }
    }
    best
}

/// What opens each iteration of a loop found without step ranges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum IterationMark {
    /// A kernel that runs once per iteration (its name id).
    Anchor(i64),
    /// A sequence of `length` kernels that repeats each iteration; `opens` is its first kernel's name id.
    Sequence { length: usize, opens: i64 },
}

/// Where the iterations of one device's loop begin (positions in `idx`, kernels in time order): at each
/// occurrence of a once-per-iteration kernel, or else at each repetition of the loop's kernel sequence.
pub(crate) fn iteration_starts(
    kernels: &[model::Kernel],
    idx: &[usize],
) -> Option<(Vec<usize>, IterationMark)> {
    if let Some((_, _, name)) = pattern_anchor(kernels, idx) {
        let starts = idx
            .iter()
            .enumerate()
            .filter(|(_, ki)| kernels[**ki].demangled_name == name)
            .map(|(pos, _)| pos)
            .collect();
        return Some((starts, IterationMark::Anchor(name)));
    }
    let names: Vec<i64> = idx.iter().map(|&ki| kernels[ki].demangled_name).collect();
    let r = super::repeat::repetition(&names)?;
    let opens = names[r.starts[0]];
    Some((
        r.starts,
        IterationMark::Sequence {
            length: r.length,
            opens,
        },
    ))
}

/// No NVTX steps: on each device, look for a kernel that occurs once per
/// iteration, or else a kernel sequence that repeats; every device gets its own anchor and its own entry.
fn kernel_pattern(
    p: &Profile,
    scope: &ResolvedScope,
    max_steps_listed: usize,
) -> Result<Iterations> {
    let kernels = p.kernels()?;
    let mut by_device: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, k) in kernels.iter().enumerate() {
        if scope.admits(k.device, k.global_pid, k.start, k.end) {
            by_device.entry(k.device).or_default().push(i);
        }
    }
    let mut processes = Vec::new();
    let mut families: Vec<String> = Vec::new();
    let mut without: Vec<i64> = Vec::new();
    let mut by_sequence: Vec<(i64, usize)> = Vec::new();
    for (&device, idx) in &by_device {
        let Some((anchors, mark)) = iteration_starts(kernels, idx) else {
            without.push(device);
            continue;
        };
        let name = match mark {
            IterationMark::Anchor(name) => name,
            IterationMark::Sequence { length, opens } => {
                by_sequence.push((device, length));
                opens
            }
        };
        let mut steps = Vec::new();
        for (n, w) in anchors.windows(2).enumerate() {
            let ks: Vec<&model::Kernel> = idx[w[0]..w[1]].iter().map(|&ki| &kernels[ki]).collect();
            let union = intervals::union(ks.iter().map(|k| (k.start, k.end)).collect());
            let start = ks[0].start;
            let end = kernels[idx[w[1]]].start;
            steps.push(Step {
                index: n,
                name: format!("iteration {n}"),
                pid: model::pid_of(ks[0].global_pid),
                tid: 0,
                start_ns: start,
                end_ns: end,
                cpu_ns: end - start,
                gpu_union_ns: intervals::length(&union),
                gpu_span_ns: ks.iter().map(|k| k.end).max().map(|e| e - start),
                first_kernel_lag_ns: Some(0),
                kernels: ks.len() as u64,
                kernels_same_thread: 0,
                nccl_kernels: ks
                    .iter()
                    .filter(|k| super::nccl::is_nccl(p.string(k.short_name)))
                    .count() as u64,
                collectives: BTreeMap::new(),
            });
        }
        // The process that launched most of the device's kernels stands for it.
        let mut per_pid: BTreeMap<i64, usize> = BTreeMap::new();
        for &ki in idx {
            *per_pid
                .entry(model::pid_of(kernels[ki].global_pid))
                .or_default() += 1;
        }
        let pid = per_pid
            .iter()
            .max_by_key(|(pid, n)| (**n, std::cmp::Reverse(**pid)))
            .map_or(0, |(pid, _)| *pid);
        let cpu: Vec<i64> = steps.iter().map(|s| s.cpu_ns).collect();
        let gpu: Vec<i64> = steps.iter().map(|s| s.gpu_union_ns).collect();
        let mut kc: Vec<i64> = steps.iter().map(|s| s.kernels as i64).collect();
        let step_count = steps.len();
        let first_step = steps.first().cloned();
        steps.truncate(max_steps_listed);
        let family = p.string(name).to_string();
        if !families.contains(&family) {
            families.push(family.clone());
        }
        processes.push(ProcessSteps {
            pid,
            devices: vec![device],
            anchor: Some(family),
            step_count,
            cpu_all: spread(&cpu),
            cpu_after_first: spread(cpu.get(1..).unwrap_or(&[])),
            gpu_union_all: spread(&gpu),
            gpu_union_after_first: spread(gpu.get(1..).unwrap_or(&[])),
            kernels_per_step: stats::median(&mut kc),
            kernels_per_step_same_thread: 0.0,
            first_step,
            cpu_to_gpu_ratio: None,
            slowest: Vec::new(),
            steps,
        });
    }
    if processes.is_empty() {
        return Ok(Iterations {
            family: None,
            rule: "none".into(),
            processes: Vec::new(),
            note: Some(
                "no step ranges (NVTX `step_N`, `iter_N`, ...) and no regular kernel pattern: \
                 wrap each iteration in torch.cuda.nvtx.range_push(f\"step_{i}\") / range_pop(), or pass `marker`"
                    .into(),
            ),
        });
    }
    let mut note = "no NVTX step ranges: iterations are the stretches between occurrences of one kernel that repeats \
                    regularly, found on each device separately (GPU time, not CPU step time; `anchor` names each \
                    device's kernel)"
        .to_string();
    for (device, length) in by_sequence {
        note.push_str(&format!(
            "; no kernel runs once per iteration on device {device}: its iterations are the repetitions of a \
             sequence of {length} kernels, and `anchor` names the first of them"
        ));
    }
    if !without.is_empty() {
        note.push_str(&format!(
            "; no regular kernel pattern on device(s) {without:?}, which are not listed"
        ));
    }
    Ok(Iterations {
        family: Some(families.join(" | ")),
        rule: "kernel_pattern".into(),
        processes,
        note: Some(note),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names_split_into_family_and_number() {
        assert_eq!(split_number("step_12"), Some(("step", 12)));
        assert_eq!(split_number("request 3"), Some(("request", 3)));
        assert_eq!(split_number("decode_T"), None);
        assert_eq!(split_number("42"), None);
        assert!(is_step_name("step") && is_step_name("Step_0") && !is_step_name("stepper"));
        assert!(matches_marker("iter_7", "iter") && matches_marker("iter", "iter"));
        assert!(!matches_marker("iteration_7", "iter"));
    }
}
