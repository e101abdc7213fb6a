//! `summary`: the `nsys stats` reports with their semantics —
//! `cuda_gpu_kern_sum`, `cuda_api_sum`, `cuda_gpu_mem_time_sum`,
//! `cuda_gpu_mem_size_sum`, `nvtx_sum`, `osrt_sum`.
//!
//! Time % is a row's share of the total of **all** rows of the report (before
//! any limit); Avg/Med/StdDev follow [`super::stats`]; rows are ordered by
//! total descending, then instances, then name. Kernel names are short names
//! by default (`names: demangled` groups as `nsys stats` does by default).
//! CPU-side reports (API, NVTX, OSRT) follow the process filter; with only a
//! device given they keep the processes that ran on that device.
//! OSRT rows are streamed, never loaded.

use std::collections::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::calls::api_display_name;
use super::model;
use super::stats::{self, pct1};
use super::{Profile, ResolvedScope, Result};

/// Which kernel name to group and print by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NameKey {
    /// `shortName` (nsys `:base`), e.g. `vectorized_elementwise_kernel`.
    #[default]
    Short,
    /// `demangledName` (the `nsys stats` default), with template arguments.
    Demangled,
}

impl NameKey {
    pub fn of(self, k: &model::Kernel) -> i64 {
        match self {
            NameKey::Short => k.short_name,
            NameKey::Demangled => k.demangled_name,
        }
    }
}

/// The reports `summary` can produce.
pub const REPORTS: &[&str] = &[
    "cuda_gpu_kern_sum",
    "cuda_api_sum",
    "cuda_gpu_mem_time_sum",
    "cuda_gpu_mem_size_sum",
    "nvtx_sum",
    "osrt_sum",
];

/// A row of a time report (durations in ns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimeRow {
    /// Share of the report's total time (all rows), 1 decimal.
    pub time_pct: f64,
    pub total_ns: i64,
    pub instances: u64,
    pub avg_ns: f64,
    pub med_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub stddev_ns: f64,
    pub name: String,
    /// NVTX range style: PushPop or StartEnd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
    /// NVTX domain, when not the default one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimeReport {
    pub report: String,
    /// Rows before `limit`.
    pub rows_total: usize,
    /// Σ total_ns over all rows (the Time % denominator).
    pub total_ns: i64,
    pub rows: Vec<TimeRow>,
}

/// A row of a size report (bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SizeRow {
    pub total_bytes: i64,
    pub count: u64,
    pub avg_bytes: f64,
    pub med_bytes: f64,
    pub min_bytes: i64,
    pub max_bytes: i64,
    pub stddev_bytes: f64,
    pub operation: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SizeReport {
    pub report: String,
    pub rows_total: usize,
    pub total_bytes: i64,
    pub rows: Vec<SizeRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Unavailable {
    pub report: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub names: NameKey,
    pub cuda_gpu_kern_sum: Option<TimeReport>,
    pub cuda_api_sum: Option<TimeReport>,
    pub cuda_gpu_mem_time_sum: Option<TimeReport>,
    pub cuda_gpu_mem_size_sum: Option<SizeReport>,
    pub nvtx_sum: Option<TimeReport>,
    pub osrt_sum: Option<TimeReport>,
    /// Reports asked for that this export cannot produce, and why.
    pub unavailable: Vec<Unavailable>,
}

#[derive(Debug, Clone, Default)]
pub struct SummaryOptions {
    /// Reports to produce; default all of [`REPORTS`].
    pub reports: Option<Vec<String>>,
    pub names: NameKey,
    /// Rows per report (default 20).
    pub limit: Option<usize>,
}

/// Durations of one group, as `u32` while every one fits.
#[derive(Debug)]
enum Durations {
    Narrow(Vec<u32>),
    Wide(Vec<i64>),
}

impl Default for Durations {
    fn default() -> Self {
        Durations::Narrow(Vec::new())
    }
}

impl Durations {
    fn into_wide(self) -> Vec<i64> {
        match self {
            Durations::Narrow(v) => v.into_iter().map(i64::from).collect(),
            Durations::Wide(w) => w,
        }
    }

    fn push(&mut self, d: i64) {
        if let Durations::Narrow(v) = self
            && let Ok(n) = u32::try_from(d)
        {
            v.push(n);
            return;
        }
        let mut w = std::mem::take(self).into_wide();
        w.push(d);
        *self = Durations::Wide(w);
    }

    /// Append `other` after these (order kept: statistics sum in order).
    fn append(&mut self, other: Durations) {
        if let Durations::Narrow(a) = self
            && let Durations::Narrow(b) = &other
        {
            a.extend_from_slice(b);
            return;
        }
        let mut w = std::mem::take(self).into_wide();
        w.extend(other.into_wide());
        *self = Durations::Wide(w);
    }

    fn stats(&mut self) -> stats::Stats {
        match self {
            Durations::Narrow(v) => stats::stats(v),
            Durations::Wide(v) => stats::stats(v),
        }
    }
}

/// Group key → (display name, style, domain, values).
type Group = (String, Option<String>, Option<String>, Vec<i64>);
type Groups<K> = rustc_hash::FxHashMap<K, Group>;

fn time_report<K>(report: &str, groups: Groups<K>, limit: usize) -> TimeReport {
    time_report_of(
        report,
        groups
            .into_values()
            .map(|(name, style, domain, mut v)| (name, style, domain, stats::stats(&mut v))),
        limit,
    )
}

/// A report from each group's statistics.
fn time_report_of(
    report: &str,
    groups: impl Iterator<Item = (String, Option<String>, Option<String>, stats::Stats)>,
    limit: usize,
) -> TimeReport {
    let mut rows: Vec<TimeRow> = groups
        .map(|(name, style, domain, s)| TimeRow {
            time_pct: 0.0,
            total_ns: s.total,
            instances: s.count,
            avg_ns: s.avg,
            med_ns: s.med,
            min_ns: s.min,
            max_ns: s.max,
            stddev_ns: s.stddev,
            name,
            style,
            domain,
        })
        .collect();
    let total: i64 = rows.iter().map(|r| r.total_ns).sum();
    for r in &mut rows {
        r.time_pct = pct1(r.total_ns, total);
    }
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(a.instances.cmp(&b.instances))
            .then(a.name.cmp(&b.name))
    });
    let rows_total = rows.len();
    rows.truncate(limit);
    TimeReport {
        report: report.to_string(),
        rows_total,
        total_ns: total,
        rows,
    }
}

/// Kernel statistics grouped by name (the `cuda_gpu_kern_sum` report).
pub fn kern_sum(
    p: &Profile,
    scope: &ResolvedScope,
    names: NameKey,
    limit: usize,
) -> Result<TimeReport> {
    let mut groups: Groups<i64> = Groups::default();
    for k in p.kernels()? {
        if !scope.admits(k.device, k.global_pid, k.start, k.end) {
            continue;
        }
        let id = names.of(k);
        groups
            .entry(id)
            .or_insert_with(|| (p.string(id).to_string(), None, None, Vec::new()))
            .3
            .push(k.dur());
    }
    Ok(time_report("cuda_gpu_kern_sum", groups, limit))
}

/// The processes CPU-side reports keep: the process filter, else the processes
/// that ran on the filtered device, else all (None).
fn cpu_processes(p: &Profile, scope: &ResolvedScope) -> Result<Option<HashSet<i64>>> {
    if let Some(pid) = scope.process {
        return Ok(Some([pid].into_iter().collect()));
    }
    if let Some(d) = scope.device {
        let mut s: HashSet<i64> = p
            .kernels()?
            .iter()
            .filter(|k| k.device == d)
            .map(|k| model::pid_of(k.global_pid))
            .collect();
        s.extend(
            p.memcpys()?
                .iter()
                .filter(|m| m.device == d)
                .map(|m| model::pid_of(m.global_pid)),
        );
        return Ok(Some(s));
    }
    Ok(None)
}

pub fn summary(p: &Profile, scope: &ResolvedScope, options: &SummaryOptions) -> Result<Summary> {
    let limit = options.limit.unwrap_or(20);
    let wanted: Vec<String> = match &options.reports {
        Some(r) if !r.is_empty() => r.clone(),
        _ => REPORTS.iter().map(|s| s.to_string()).collect(),
    };
    for r in &wanted {
        if !REPORTS.contains(&r.as_str()) {
            return Err(super::ProfileError::BadArgument(format!(
                "unknown report `{r}`; available: {}",
                REPORTS.join(", ")
            )));
        }
    }
    let want = |r: &str| wanted.iter().any(|w| w == r);
    let tables = p.tables();
    let procs = cpu_processes(p, scope)?;
    let cpu_ok = |gtid: i64, s: i64, e: i64| {
        procs
            .as_ref()
            .is_none_or(|set| set.contains(&model::pid_of(gtid)))
            && scope.overlaps(s, e)
    };
    let mut out = Summary {
        names: options.names,
        cuda_gpu_kern_sum: None,
        cuda_api_sum: None,
        cuda_gpu_mem_time_sum: None,
        cuda_gpu_mem_size_sum: None,
        nvtx_sum: None,
        osrt_sum: None,
        unavailable: Vec::new(),
    };
    let mut missing = |report: &str, reason: &str| {
        out.unavailable.push(Unavailable {
            report: report.to_string(),
            reason: reason.to_string(),
        })
    };
    let mut kern = None;
    if want("cuda_gpu_kern_sum") {
        if tables.kernel.is_some() {
            kern = Some(kern_sum(p, scope, options.names, limit)?);
        } else {
            missing("cuda_gpu_kern_sum", "no kernel table (CUDA trace was off)");
        }
    }
    let mut api_sum = None;
    if want("cuda_api_sum") {
        if tables.runtime.is_some() {
            // Name id → group (several ids share a display name), so that
            // millions of calls neither hash nor copy a string each; each
            // group's durations stay in row order.
            let mut groups: Vec<Group> = Vec::new();
            let mut by_name: HashMap<String, usize> = HashMap::new();
            let mut by_id: rustc_hash::FxHashMap<i64, usize> = Default::default();
            for a in p.api()? {
                if !cpu_ok(a.global_tid, a.start, a.end) {
                    continue;
                }
                let g = *by_id.entry(a.name).or_insert_with(|| {
                    let name = api_display_name(p.string(a.name)).to_string();
                    *by_name.entry(name.clone()).or_insert_with(|| {
                        groups.push((name, None, None, Vec::new()));
                        groups.len() - 1
                    })
                });
                groups[g].3.push(a.dur());
            }
            let groups: Groups<usize> = groups.into_iter().enumerate().collect();
            api_sum = Some(time_report("cuda_api_sum", groups, limit));
        } else {
            missing("cuda_api_sum", "no CUPTI_ACTIVITY_KIND_RUNTIME table");
        }
    }
    let mut mem_time = None;
    let mut mem_size = None;
    if want("cuda_gpu_mem_time_sum") || want("cuda_gpu_mem_size_sum") {
        if tables.memcpy.is_some() || tables.memset.is_some() {
            let opers = p.memcpy_oper_labels()?;
            let mut durs: Groups<i64> = Groups::default();
            let mut sizes: Groups<i64> = Groups::default();
            let mut push = |key: i64, name: String, d: i64, b: i64| {
                durs.entry(key)
                    .or_insert_with(|| (name.clone(), None, None, Vec::new()))
                    .3
                    .push(d);
                sizes
                    .entry(key)
                    .or_insert_with(|| (name, None, None, Vec::new()))
                    .3
                    .push(b);
            };
            for m in p.memcpys()? {
                if scope.admits(m.device, m.global_pid, m.start, m.end) {
                    let label = opers
                        .get(&m.copy_kind)
                        .cloned()
                        .unwrap_or_else(|| format!("kind {}", m.copy_kind));
                    push(
                        m.copy_kind,
                        format!("[CUDA memcpy {label}]"),
                        m.end - m.start,
                        m.bytes,
                    );
                }
            }
            for m in p.memsets()? {
                if scope.admits(m.device, m.global_pid, m.start, m.end) {
                    push(-1, "[CUDA memset]".to_string(), m.end - m.start, m.bytes);
                }
            }
            if want("cuda_gpu_mem_time_sum") {
                mem_time = Some(time_report("cuda_gpu_mem_time_sum", durs, limit));
            }
            if want("cuda_gpu_mem_size_sum") {
                let t = time_report("cuda_gpu_mem_size_sum", sizes, limit);
                mem_size = Some(SizeReport {
                    report: t.report,
                    rows_total: t.rows_total,
                    total_bytes: t.total_ns,
                    rows: t
                        .rows
                        .into_iter()
                        .map(|r| SizeRow {
                            total_bytes: r.total_ns,
                            count: r.instances,
                            avg_bytes: r.avg_ns,
                            med_bytes: r.med_ns,
                            min_bytes: r.min_ns,
                            max_bytes: r.max_ns,
                            stddev_bytes: r.stddev_ns,
                            operation: r.name,
                        })
                        .collect(),
                });
            }
        } else {
            if want("cuda_gpu_mem_time_sum") {
                missing("cuda_gpu_mem_time_sum", "no memcpy or memset tables");
            }
            if want("cuda_gpu_mem_size_sum") {
                missing("cuda_gpu_mem_size_sum", "no memcpy or memset tables");
            }
        }
    }
    let mut nvtx_sum = None;
    if want("nvtx_sum") {
        if tables.nvtx.is_some() {
            let nvtx = p.nvtx()?;
            let mut groups: Groups<(i64, String, i64)> = Groups::default();
            for r in &nvtx.ranges {
                if !cpu_ok(r.global_tid, r.start, r.end) {
                    continue;
                }
                let key = (r.domain, r.name.clone(), r.event_type);
                groups
                    .entry(key)
                    .or_insert_with(|| {
                        (
                            r.name.clone(),
                            Some(
                                if r.is_push_pop() {
                                    "PushPop"
                                } else {
                                    "StartEnd"
                                }
                                .to_string(),
                            ),
                            (r.domain != 0).then(|| {
                                nvtx.domains
                                    .get(&r.domain)
                                    .cloned()
                                    .unwrap_or_else(|| format!("domain {}", r.domain))
                            }),
                            Vec::new(),
                        )
                    })
                    .3
                    .push(r.dur());
            }
            nvtx_sum = Some(time_report("nvtx_sum", groups, limit));
        } else {
            missing(
                "nvtx_sum",
                "no NVTX_EVENTS table (NVTX trace was off or no ranges were pushed)",
            );
        }
    }
    let mut osrt = None;
    if want("osrt_sum") {
        let whole = if scope.trim.is_none() && procs.is_none() {
            p.osrt_name_stats()?
        } else {
            None
        };
        if let Some(whole) = whole {
            // Every call of the file: the per-name statistics kept with its tables.
            let groups = whole
                .by_name
                .iter()
                .map(|(&id, s)| (p.string(id).to_string(), None, None, s.clone()));
            osrt = Some(time_report_of("osrt_sum", groups, limit));
        } else if tables.osrt.is_some() {
            // Tens of millions of calls: their durations are held as u32
            // where they fit (half the memory of i64; the same statistics).
            let parts = p.fold_osrt(
                scope.trim,
                rustc_hash::FxHashMap::default,
                |m: &mut rustc_hash::FxHashMap<i64, Durations>, s, e, gtid, name| {
                    if procs
                        .as_ref()
                        .is_none_or(|set| set.contains(&model::pid_of(gtid)))
                    {
                        m.entry(name).or_default().push(e - s);
                    }
                },
            )?;
            let mut by_name: HashMap<i64, Durations> = HashMap::new();
            for part in parts {
                for (k, v) in part {
                    // The first part's values move in; later parts extend them.
                    match by_name.entry(k) {
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(v);
                        }
                        std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().append(v),
                    }
                }
            }
            let groups = by_name
                .into_iter()
                .map(|(id, mut v)| (p.string(id).to_string(), None, None, v.stats()));
            osrt = Some(time_report_of("osrt_sum", groups, limit));
        } else {
            missing(
                "osrt_sum",
                "no OSRT_API table (OS runtime trace was off: nsys profile -t osrt)",
            );
        }
    }
    out.cuda_gpu_kern_sum = kern;
    out.cuda_api_sum = api_sum;
    out.cuda_gpu_mem_time_sum = mem_time;
    out.cuda_gpu_mem_size_sum = mem_size;
    out.nvtx_sum = nvtx_sum;
    out.osrt_sum = osrt;
    Ok(out)
}
