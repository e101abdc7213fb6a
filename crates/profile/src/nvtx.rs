//! `nvtx`: the NVTX range tree per thread and GPU time projected onto ranges.
//!
//! Kernels are attributed to ranges by [`super::attribution`] (launch call
//! inside the range, same process, any thread; the same-thread figure beside
//! it). Per range name: instances, CPU time, GPU-projected time (the union of
//! the attributed kernels' intervals), kernel time and kernels launched.
//!
//! GPU time is a union **per device**: kernels of two ranks overlap in time
//! on different GPUs, and a union across devices would count two GPUs busy at
//! once as one. `per_device` lists each device's union; the cross-device
//! aggregate `gpu_union_ns` is their sum (GPU-device time, as `nsys`'s
//! per-GPU projections add up), never a union over devices.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::attribution;
use super::intervals;
use super::model::{self, NvtxRange};
use super::{Profile, ResolvedScope, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RangeName {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// PushPop or StartEnd.
    pub style: String,
    pub instances: u64,
    pub cpu_total_ns: i64,
    pub cpu_avg_ns: f64,
    /// Σ over devices of each device's union of the intervals of kernels launched inside any
    /// instance (any thread of the process): GPU-device time, see `per_device`.
    pub gpu_union_ns: i64,
    /// Σ durations of those kernels.
    pub gpu_kernel_sum_ns: i64,
    /// Kernels launched inside the instances, any thread of the process.
    pub kernels: u64,
    /// Kernels launched inside the instances by the range's own thread (the nsys rule).
    pub kernels_same_thread: u64,
    /// Σ over devices of the per-device union under the same-thread rule.
    pub gpu_union_same_thread_ns: i64,
    /// The devices the attributed kernels ran on: union, Σ durations and count per device (left out of
    /// default `aisp_profile_nvtx` answers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_device: Vec<RangeDevice>,
}

/// GPU time of a range name on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RangeDevice {
    pub device: i64,
    /// Union of the attributed kernels' intervals on this device.
    pub gpu_union_ns: i64,
    pub gpu_kernel_sum_ns: i64,
    pub kernels: u64,
}

/// Per device: (union, Σ durations, count) of the given kernels.
fn per_device(kernels: &[model::Kernel], ks: &[u32]) -> BTreeMap<i64, (i64, i64, u64)> {
    let mut by: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for &ki in ks {
        let k = &kernels[ki as usize];
        by.entry(k.device).or_default().push((k.start, k.end));
    }
    by.into_iter()
        .map(|(d, iv)| {
            let sum = iv.iter().map(|(s, e)| e - s).sum();
            let n = iv.len() as u64;
            (d, (intervals::length(&intervals::union(iv)), sum, n))
        })
        .collect()
}

/// Σ over devices of the per-device union (never one union across devices).
fn device_time(kernels: &[model::Kernel], ks: &[u32]) -> i64 {
    per_device(kernels, ks).values().map(|v| v.0).sum()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TreeNode {
    pub name: String,
    pub instances: u64,
    pub cpu_total_ns: i64,
    /// Σ over devices of the per-device union of the attributed kernels.
    pub gpu_union_ns: i64,
    pub kernels: u64,
    /// Children beyond `max_children` or `max_depth` are folded into `more`.
    pub children: Vec<TreeNode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadTree {
    pub pid: i64,
    pub tid: i64,
    pub thread: Option<String>,
    pub ranges: u64,
    pub max_depth: u32,
    pub roots: Vec<TreeNode>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AttributionTotals {
    /// Kernels in scope.
    pub kernels: u64,
    /// Kernels whose launch call was found (correlationId + process).
    pub kernels_with_launch: u64,
    /// Kernels inside at least one range, any thread of the process.
    pub kernels_in_ranges: u64,
    /// Kernels inside at least one range of their launching thread.
    pub kernels_in_ranges_same_thread: u64,
    /// Deepest nesting of ranges enclosing a launch on its own thread (push/pop).
    pub max_depth_same_thread: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Nvtx {
    pub ranges: u64,
    pub unclosed_ranges: u64,
    pub names_total: usize,
    /// Range names, largest CPU time first (at most `limit`).
    pub names: Vec<RangeName>,
    pub threads: Vec<ThreadTree>,
    pub attribution: AttributionTotals,
    pub notes: Vec<String>,
}

/// Group PyTorch `emit_nvtx` names: `aten::linear, op_id = 314300` and
/// `aten::add, seq = 12, op_id = 34` become `aten::linear` / `aten::add`.
pub fn group_name(name: &str) -> &str {
    let mut end = name.len();
    for marker in [", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = "] {
        if let Some(i) = name.find(marker) {
            end = end.min(i);
        }
    }
    &name[..end]
}

pub struct NvtxOptions {
    pub limit: usize,
    pub max_depth: u32,
    pub max_children: usize,
    /// List numbered families (`step_0`, `step_1`, ...) as one pattern (`step_*`); see [`super::families`].
    pub group_numbered: bool,
}

impl Default for NvtxOptions {
    fn default() -> Self {
        NvtxOptions {
            limit: 20,
            max_depth: 4,
            max_children: 8,
            group_numbered: false,
        }
    }
}

struct PathAcc {
    name: String,
    depth: u32,
    instances: u64,
    cpu: i64,
    kernels: Vec<u32>,
    children: Vec<usize>,
}

pub fn nvtx(p: &Profile, scope: &ResolvedScope, options: &NvtxOptions) -> Result<Nvtx> {
    let all = p.nvtx()?;
    let kernels = p.kernels()?;
    let ranges: Vec<&NvtxRange> = all
        .ranges
        .iter()
        .filter(|r| scope.admits_thread(r.global_tid, r.start, r.end))
        .collect();
    let attributed = attribution::attribute(p, &ranges)?;
    let on_device = |ki: &u32| {
        scope
            .device
            .is_none_or(|d| kernels[*ki as usize].device == d)
    };
    let families = if options.group_numbered {
        super::families::Families::detect(ranges.iter().map(|r| group_name(&r.name)))
    } else {
        super::families::Families::default()
    };
    // Per name.
    type NameKey = (i64, String, i64);
    let mut per_name: HashMap<NameKey, (u64, i64, Vec<u32>, Vec<u32>)> = HashMap::new();
    for (r, a) in ranges.iter().zip(&attributed) {
        let e = per_name
            .entry((
                r.domain,
                families.key(group_name(&r.name)).into_owned(),
                r.event_type,
            ))
            .or_default();
        e.0 += 1;
        e.1 += r.dur();
        e.2.extend(a.any_thread.iter().filter(|k| on_device(k)));
        e.3.extend(a.same_thread.iter().filter(|k| on_device(k)));
    }
    let mut names: Vec<RangeName> = per_name
        .into_iter()
        .map(|((domain, name, style), (n, cpu, mut any, mut same))| {
            any.sort_unstable();
            any.dedup();
            same.sort_unstable();
            same.dedup();
            let devices = per_device(kernels, &any);
            RangeName {
                name,
                domain: (domain != 0).then(|| {
                    all.domains
                        .get(&domain)
                        .cloned()
                        .unwrap_or_else(|| format!("domain {domain}"))
                }),
                style: if style == model::NVTX_PUSH_POP {
                    "PushPop"
                } else {
                    "StartEnd"
                }
                .to_string(),
                instances: n,
                cpu_total_ns: cpu,
                cpu_avg_ns: super::stats::round1_ratio(cpu as i128, n as i128),
                gpu_union_ns: devices.values().map(|v| v.0).sum(),
                gpu_kernel_sum_ns: any.iter().map(|&k| kernels[k as usize].dur()).sum(),
                kernels: any.len() as u64,
                kernels_same_thread: same.len() as u64,
                gpu_union_same_thread_ns: device_time(kernels, &same),
                per_device: devices
                    .into_iter()
                    .map(|(device, (u, sum, n))| RangeDevice {
                        device,
                        gpu_union_ns: u,
                        gpu_kernel_sum_ns: sum,
                        kernels: n,
                    })
                    .collect(),
            }
        })
        .collect();
    names.sort_by(|a, b| {
        b.cpu_total_ns
            .cmp(&a.cpu_total_ns)
            .then(a.name.cmp(&b.name))
    });
    let names_total = names.len();
    names.truncate(options.limit);

    // Trees: per thread, push/pop ranges nest; build path nodes.
    let mut by_thread: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, r) in ranges.iter().enumerate() {
        if r.is_push_pop() {
            by_thread.entry(r.global_tid).or_default().push(i);
        }
    }
    let tnames = super::info::thread_names(p)?;
    let mut threads = Vec::new();
    for (gtid, idx) in by_thread {
        let mut nodes: Vec<PathAcc> = Vec::new();
        let mut roots: Vec<usize> = Vec::new();
        let mut stack: Vec<(i64, usize)> = Vec::new(); // (end, node)
        let mut max_depth = 0u32;
        for &i in &idx {
            let r = ranges[i];
            while stack.last().is_some_and(|(end, _)| *end <= r.start) {
                stack.pop();
            }
            let parent = stack.last().map(|(_, n)| *n);
            let siblings = match parent {
                Some(pn) => &nodes[pn].children,
                None => &roots,
            };
            let gname = families.key(group_name(&r.name));
            let found = siblings.iter().copied().find(|&c| nodes[c].name == gname);
            let node = match found {
                Some(n) => n,
                None => {
                    let depth = parent.map_or(0, |pn| nodes[pn].depth + 1);
                    nodes.push(PathAcc {
                        name: gname.to_string(),
                        depth,
                        instances: 0,
                        cpu: 0,
                        kernels: Vec::new(),
                        children: Vec::new(),
                    });
                    let n = nodes.len() - 1;
                    match parent {
                        Some(pn) => nodes[pn].children.push(n),
                        None => roots.push(n),
                    }
                    n
                }
            };
            max_depth = max_depth.max(nodes[node].depth + 1);
            nodes[node].instances += 1;
            nodes[node].cpu += r.dur();
            nodes[node]
                .kernels
                .extend(attributed[i].any_thread.iter().filter(|k| on_device(k)));
            stack.push((r.end, node));
        }
        fn build(
            nodes: &mut [PathAcc],
            n: usize,
            opts: &NvtxOptions,
            kernels: &[model::Kernel],
        ) -> TreeNode {
            let mut ks = std::mem::take(&mut nodes[n].kernels);
            ks.sort_unstable();
            ks.dedup();
            let union = device_time(kernels, &ks);
            let mut children: Vec<usize> = nodes[n].children.clone();
            children.sort_by_key(|&c| std::cmp::Reverse(nodes[c].cpu));
            let (keep, more) = if nodes[n].depth + 1 >= opts.max_depth {
                (Vec::new(), children.len())
            } else {
                let more = children.len().saturating_sub(opts.max_children);
                (
                    children
                        .into_iter()
                        .take(opts.max_children)
                        .collect::<Vec<_>>(),
                    more,
                )
            };
            TreeNode {
                name: nodes[n].name.clone(),
                instances: nodes[n].instances,
                cpu_total_ns: nodes[n].cpu,
                gpu_union_ns: union,
                kernels: ks.len() as u64,
                children: keep
                    .into_iter()
                    .map(|c| build(nodes, c, opts, kernels))
                    .collect(),
                more: (more > 0).then_some(more as u64),
            }
        }
        roots.sort_by_key(|&c| std::cmp::Reverse(nodes[c].cpu));
        let mut more_roots = 0;
        if roots.len() > options.max_children {
            more_roots = roots.len() - options.max_children;
            roots.truncate(options.max_children);
        }
        let mut built: Vec<TreeNode> = roots
            .iter()
            .map(|&r| build(&mut nodes, r, options, kernels))
            .collect();
        if more_roots > 0 {
            built.push(TreeNode {
                name: format!("… {more_roots} more top-level ranges"),
                instances: 0,
                cpu_total_ns: 0,
                gpu_union_ns: 0,
                kernels: 0,
                children: Vec::new(),
                more: Some(more_roots as u64),
            });
        }
        threads.push(ThreadTree {
            pid: model::pid_of(gtid),
            tid: model::tid_of(gtid),
            thread: tnames.get(&gtid).cloned(),
            ranges: idx.len() as u64,
            max_depth,
            roots: built,
        });
    }
    // Totals.
    let in_scope: Vec<usize> = kernels
        .iter()
        .enumerate()
        .filter(|(_, k)| scope.admits(k.device, k.global_pid, k.start, k.end))
        .map(|(i, _)| i)
        .collect();
    let launches = &p.launch_index()?.kernel_launch;
    let mut any_flag = vec![false; kernels.len()];
    let mut depth_same = vec![0u32; kernels.len()];
    for (r, a) in ranges.iter().zip(&attributed) {
        for &k in &a.any_thread {
            any_flag[k as usize] = true;
        }
        if r.is_push_pop() {
            for &k in &a.same_thread {
                depth_same[k as usize] += 1;
            }
        }
    }
    let attribution = AttributionTotals {
        kernels: in_scope.len() as u64,
        kernels_with_launch: in_scope.iter().filter(|&&i| launches[i].is_some()).count() as u64,
        kernels_in_ranges: in_scope.iter().filter(|&&i| any_flag[i]).count() as u64,
        kernels_in_ranges_same_thread: in_scope.iter().filter(|&&i| depth_same[i] > 0).count()
            as u64,
        max_depth_same_thread: in_scope.iter().map(|&i| depth_same[i]).max().unwrap_or(0),
    };
    let mut notes = Vec::new();
    if names.iter().any(|n| n.per_device.len() > 1) {
        notes.push(
            "ranges whose kernels ran on several devices: gpu_union_ns is the sum of the per-device unions \
             (GPU-device time; per_device lists each device), not a union across devices"
                .into(),
        );
    }
    if p.tables().nvtx.is_none() {
        notes.push(
            "this export has no NVTX_EVENTS table: no ranges were recorded (nsys profile -t nvtx)"
                .into(),
        );
    }
    if ranges
        .iter()
        .any(|r| group_name(&r.name).len() != r.name.len())
    {
        notes.push("PyTorch emit_nvtx annotations (`, seq = N`, `, op_id = N`, `, sizes = [...]`) are stripped to group ranges by operator".into());
    }
    for family in families.describe() {
        notes.push(format!(
            "{family}: one row and one tree node for the family, its times covering all members \
             (group_numbered=false lists each)"
        ));
    }
    if p.launch_index()?.correlation_only {
        notes.push(
            "kernels were matched to launch calls by correlationId alone (no globalPid column)"
                .into(),
        );
    }
    Ok(Nvtx {
        ranges: ranges.len() as u64,
        unclosed_ranges: all.unclosed,
        names_total,
        names,
        threads,
        attribution,
        notes,
    })
}
