//! Rules on idle time whose cause is on the host: each reads one idle column
//! of the ledger, so no two claim the same nanosecond. What-if for all of
//! them: the cause goes, and with it that idle time (the device still needs
//! its busy time, which stays).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::super::Result;
use super::super::calls::{self, CallKind};
use super::super::classify;
use super::super::gaps::{self, GapGroup};
use super::super::kernels::SHORT_KERNEL_NS;
use super::super::ledger::{Column, DeviceLedger, IdlePiece};
use super::super::model;
use super::super::regions;
use super::super::stats::pct1;
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, RegionStake, Stake, ms, per_step};

/// Shares below this are not findings (noise of any real loop).
const MIN_SHARE_PCT: f64 = 1.0;

/// A contiguous stretch of one idle cause on one thread.
#[derive(Debug, Clone, Copy)]
struct Stretch {
    start: i64,
    end: i64,
    thread: Option<i64>,
}

fn stretches(d: &DeviceLedger, col: Column) -> Vec<Stretch> {
    let mut out: Vec<Stretch> = Vec::new();
    for p in d.idle.iter().filter(|p| p.column == col) {
        match out.last_mut() {
            Some(s) if s.end == p.start && s.thread == p.thread => s.end = p.end,
            _ => out.push(Stretch {
                start: p.start,
                end: p.end,
                thread: p.thread,
            }),
        }
    }
    out
}

/// The regions (innermost NVTX range of the waited-for thread's process) holding a column's idle pieces.
fn regions_of(cx: &Ctx, d: &DeviceLedger, col: Column) -> Vec<RegionStake> {
    let pieces: Vec<&IdlePiece> = d.idle.iter().filter(|p| p.column == col).collect();
    let total: i64 = pieces.iter().map(|p| p.end - p.start).sum();
    let mut m: BTreeMap<String, (i64, u64)> = BTreeMap::new();
    for p in pieces {
        let Some(t) = p.thread else { continue };
        if let Some(r) = cx.region(t, p.start + (p.end - p.start) / 2) {
            let e = m.entry(r).or_default();
            e.0 += p.end - p.start;
            e.1 += 1;
        }
    }
    let mut v: Vec<RegionStake> = m
        .into_iter()
        .filter(|(_, (ns, _))| *ns > 0)
        .map(|(region, (ns, n))| RegionStake {
            region,
            at_stake_ns: ns,
            pct_of_finding: pct1(ns, total.max(1)),
            events: n,
        })
        .collect();
    v.sort_by(|a, b| {
        b.at_stake_ns
            .cmp(&a.at_stake_ns)
            .then(a.region.cmp(&b.region))
    });
    v.truncate(5);
    v
}

/// The largest stretches of a column, explained from the waited-for thread's CPU side (what `aisp_profile_gaps`
/// says of a gap): `(start, length, explanation)`.
fn largest_explained(
    cx: &Ctx,
    d: &DeviceLedger,
    col: Column,
    n: usize,
) -> Result<Vec<(i64, i64, String)>> {
    let mut st = stretches(d, col);
    st.sort_by_key(|s| std::cmp::Reverse(s.end - s.start));
    st.truncate(n);
    if st.is_empty() {
        return Ok(Vec::new());
    }
    let pids: Vec<i64> = d.process_key.into_iter().collect();
    let mut groups = vec![GapGroup {
        global_pids: &pids,
        threads: st.iter().map(|s| s.thread).collect(),
        gaps: st
            .iter()
            .map(|s| gaps::Gap {
                device: d.device,
                start_ns: s.start,
                end_ns: s.end,
                length_ns: s.end - s.start,
                windows: Vec::new(),
                step: None,
                kernel_before: None,
                kernel_after: None,
                launch_tid: s.thread.map(model::tid_of),
                launch_thread: None,
                cause: String::new(),
                explanation: String::new(),
                cpu: Vec::new(),
            })
            .collect(),
    }];
    gaps::attribute_cpu_groups(cx.p()?, &mut groups)?;
    Ok(groups
        .remove(0)
        .gaps
        .into_iter()
        .map(|g| (g.start_ns, g.length_ns, g.explanation))
        .collect())
}

/// An idle-cause draft under the reporting bar, bare: `Ctx::emit` lists only its share, so its evidence (regions,
/// the largest stretches, call summaries: the costly part on a long export) is not computed.
fn under_bar(i: usize, d: &DeviceLedger, col: Column, basis: &str) -> Option<Draft> {
    let bare = Draft::new(i, d, Stake::GpuIdle, basis, &[col], |s| s.columns.get(col));
    (d.share(bare.total()) < MIN_SHARE_PCT).then_some(bare)
}

/// The common shape of an idle-cause finding.
fn idle_draft(cx: &Ctx, i: usize, d: &DeviceLedger, col: Column, basis: &str) -> Draft {
    let mut dr = Draft::new(i, d, Stake::GpuIdle, basis, &[col], |s| s.columns.get(col));
    dr.regions = regions_of(cx, d, col);
    dr
}

fn steps_with(d: &DeviceLedger, col: Column) -> usize {
    d.steady_steps().filter(|s| s.columns.get(col) > 0).count()
}

// ---------------------------------------------------------------------------------------------

pub const LAUNCH_BOUND: RuleSpec = RuleSpec {
    id: "launch_bound_tiny_kernels",
    doc: "The device waits for the host to issue operations one by one: idle bubbles under 1 ms before an \
          operation whose launch had not returned when the device ran dry (ledger column idle_launch_overhead).",
    what_if: "the step's operations issued without per-operation host cost (one CUDA graph, fused kernels): its \
              launch-overhead idle goes",
    columns: &[Column::IdleLaunchOverhead],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "A kernel that runs for a few microseconds costs about as much to launch (3–10 us of CPU per launch, plus \
              the Python between launches): the device waits for each launch.",
        fix: "Capture the step in a CUDA graph (torch.cuda.CUDAGraph, or torch.compile mode=\"reduce-overhead\"), fuse \
              elementwise chains (torch.compile), use fused optimizers (fused=True / foreach=True), or give each kernel \
              more work (batch size).",
        verify: "Re-profile: aisp_profile_ledger idle_launch_overhead should shrink and the steady step with it.",
        quiet: "launch-overhead idle under 1% of the steady window",
    },
    needs_profile: true,
    eval: launch_bound,
};

fn is_per_tensor_optimizer_math(demangled: &str) -> bool {
    !demangled.contains("multi_tensor")
        && (demangled.contains("addcdiv")
            || demangled.contains("lerp_kernel")
            || demangled.contains("lerp_scalar"))
}

fn launch_bound(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let col = Column::IdleLaunchOverhead;
    let kernels = cx.p()?.kernels()?;
    let api = cx.p()?.api()?;
    let launches = &cx.p()?.launch_index()?.kernel_launch;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        if d.steady.columns.get(col) == 0 {
            continue;
        }
        // Launches that wait for their kernels: `synchronous_launches` reads this column on this device.
        if launch_waits(cx, i)?.is_some_and(|w| w.blocking()) {
            continue;
        }
        let basis = "measured: the ledger's idle_launch_overhead of each steady step — idle stretches under 1 ms \
                     that end when an operation arrives whose launch call had not returned when the device ran dry";
        if let Some(bare) = under_bar(i, d, col, basis) {
            drafts.push(bare);
            continue;
        }
        let mut dr = idle_draft(cx, i, d, col, basis);
        // Kernels of the steady window: how many are tiny, and per region how many launches.
        let (lo, hi) = (d.steady.start_ns, d.steady.end_ns);
        let mut n = 0usize;
        let mut tiny = 0usize;
        let mut tiny_time = 0i64;
        let mut all_time = 0i64;
        let mut per_region: BTreeMap<String, (u64, u64, BTreeSet<i64>)> = BTreeMap::new();
        let first = kernels.partition_point(|k| k.start < lo);
        let in_window = kernels
            .iter()
            .enumerate()
            .skip(first)
            .take_while(|(_, k)| k.start < hi);
        for (k, kk) in in_window {
            if kk.device != d.device {
                continue;
            }
            n += 1;
            all_time += kk.dur();
            if kk.dur() < SHORT_KERNEL_NS {
                tiny += 1;
                tiny_time += kk.dur();
            }
            let Some(a) = launches[k].map(|a| &api[a as usize]) else {
                continue;
            };
            if let Some(r) = cx
                .regions
                .as_ref()
                .and_then(|r| r.innermost(a.global_tid, a.start))
            {
                let e = per_region.entry(regions::fold_name(&r.name)).or_default();
                e.0 += 1;
                if is_per_tensor_optimizer_math(cx.p()?.string(kk.demangled_name)) {
                    e.1 += 1;
                }
                e.2.insert(r.start);
            }
        }
        let steps = d.steady.steps.max(1);
        let kernels_per_step = n / steps;
        // Steps that also wait in a synchronizing or an allocation call: no CUDA graph can be captured across
        // either (a captured graph may not sync, and cudaMalloc/cudaFree are not allowed while capturing).
        let synced = steps_with(d, Column::IdleSync);
        let allocating = steps_with(d, Column::IdleAllocator);
        let most = |n: usize| n * 5 >= d.steady.steps * 4;
        let graph_blocked = most(synced) || most(allocating);
        let idle = dr.total();
        let mut evidence = vec![
            format!(
                "{} steady steps: the device waited for launches {} in all ({}% of the steady window), in {} of the steps",
                d.steady.steps,
                ms(idle),
                d.share(idle),
                steps_with(d, col)
            ),
            format!(
                "{n} kernels in the steady window ({kernels_per_step} per step), {tiny} of them under 5 us ({}% of kernel time)",
                pct1(tiny_time, all_time.max(1))
            ),
        ];
        let mut region_json = serde_json::Value::Null;
        if let Some(top) = dr.regions.first().cloned() {
            let (launched, optim, occ) = per_region
                .get(&top.region)
                .map(|(a, b, c)| (*a, *b, c.len() as u64))
                .unwrap_or((0, 0, 0));
            let per_occ = launched / occ.max(1);
            evidence.push(format!(
                "most of it in NVTX region `{}`: {} ({}% of the time at stake) over {occ} occurrences, {per_occ} kernels launched per occurrence",
                top.region,
                ms(top.at_stake_ns),
                top.pct_of_finding
            ));
            let advice = if optim * 4 >= launched && optim > 0 {
                evidence.push(format!(
                    "{optim} of the {launched} kernels launched in `{}` are per-tensor optimizer updates (lerp/addcdiv one parameter at a time)",
                    top.region
                ));
                format!(
                    "In `{}`: the optimizer updates one parameter tensor at a time; use the multi-tensor or fused \
                     implementation (torch.optim.Adam/AdamW/SGD with foreach=True, or fused=True), which launches a \
                     handful of kernels per step instead of {per_occ}.",
                    top.region
                )
            } else if occ >= 3 && per_occ >= 10 && !graph_blocked {
                format!(
                    "In `{}`: the same region runs {occ} times, launching {per_occ} kernels each while the device waits; \
                     capture one occurrence in a CUDA graph (torch.cuda.CUDAGraph with static input buffers, or \
                     torch.compile(mode=\"reduce-overhead\")) so it is launched once.",
                    top.region
                )
            } else {
                format!(
                    "In `{}`: fuse its small kernels (torch.compile) or give each kernel more work (batch size).",
                    top.region
                )
            };
            region_json = json!({"region": top.region, "at_stake_ns": top.at_stake_ns, "pct_of_finding": top.pct_of_finding,
                "occurrences": occ, "kernels_launched": launched, "kernels_per_occurrence": per_occ,
                "per_tensor_optimizer_kernels": optim});
            dr.fix = Some(advice);
        }
        if graph_blocked {
            // Whatever the region says: the rule's general fix starts with a CUDA graph.
            let mut blockers = Vec::new();
            if most(synced) {
                blockers.push(format!(
                    "{synced} of the {} steady steps have a synchronizing call: remove those syncs first (keep the \
                     values on the GPU, read them once per step or every N steps)",
                    d.steady.steps
                ));
            }
            if most(allocating) {
                blockers.push(format!(
                    "{allocating} of the {} steady steps allocate or free device memory (cudaMalloc/cudaFree: \
                     torch.cuda.empty_cache() in the loop, or shapes the caching allocator cannot reuse): stop that \
                     first; the host's time in those calls also delays the launches after them",
                    d.steady.steps
                ));
            }
            let caveat = format!(
                "A CUDA graph cannot be captured across a synchronizing or an allocation call, and {}. Then fuse \
                 small kernels (torch.compile), use fused optimizers (fused=True / foreach=True), give each kernel \
                 more work, or capture the step in a CUDA graph once nothing in it syncs or allocates.",
                blockers.join("; and ")
            );
            dr.fix = Some(match dr.fix.take() {
                Some(advice) => format!("{advice} {caveat}"),
                None => caveat,
            });
            // The rule's general fix leads with a CUDA graph: it does not apply until the blockers are gone.
            dr.fix_replaces = true;
        }
        let title = format!(
            "Launch-bound: the device waits {}% of each steady step for the host to issue {kernels_per_step} operations",
            d.share(idle)
        );
        let idle_step = per_step(d, idle);
        let gist = format!(
            "per steady step: {kernels_per_step} kernels ({}% of kernel time in kernels under 5 us), {} waiting for launches{}",
            pct1(tiny_time, all_time.max(1)),
            ms(idle_step),
            match (dr.regions.first(), &region_json) {
                (Some(top), serde_json::Value::Object(r)) => format!(
                    "; {}% of it in `{}`, {} kernels launched per occurrence",
                    top.pct_of_finding, top.region, r["kernels_per_occurrence"]
                ),
                _ => String::new(),
            }
        );
        drafts.push(dr.text(
            title,
            gist,
            evidence,
            json!({"idle_ns": idle, "idle_pct": d.share(idle), "idle_per_step_ns": idle_step, "steps": d.steady.steps, "steps_with_idle": steps_with(d, col),
                "kernels": n, "kernels_per_step": kernels_per_step, "tiny": tiny, "tiny_time_pct": pct1(tiny_time, all_time.max(1)),
                "steps_with_sync": synced, "steps_with_allocation": allocating,
                "top_region": region_json}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

// ---------------------------------------------------------------------------------------------

/// A kernel at least this long cannot have ended before an asynchronous launch of it returned (a launch call takes
/// microseconds).
const LONG_KERNEL_NS: i64 = 20_000;

/// At least this many such kernels before their launches are judged.
const MIN_LONG_KERNELS: usize = 50;

/// Of a device's steady kernels of at least [`LONG_KERNEL_NS`] with a recorded launch: how many, and how many of
/// their launch calls returned only after the kernel had ended.
#[derive(Debug, Clone, Copy)]
pub(super) struct LaunchWaits {
    long: usize,
    waited: usize,
}

impl LaunchWaits {
    /// Nine launches in ten or more wait for their kernel: launches are synchronous (one odd launch that blocks on
    /// a full queue does not make them so).
    fn blocking(self) -> bool {
        self.long >= MIN_LONG_KERNELS && self.waited * 10 >= self.long * 9
    }

    fn pct(self) -> f64 {
        pct1(self.waited as i64, self.long.max(1) as i64)
    }
}

/// The launch waits of the device at `i` (none without long kernels), read once per rules run for every device
/// with launch-overhead idle: both `launch_bound_tiny_kernels` (to step aside) and `synchronous_launches` ask.
fn launch_waits(cx: &Ctx, i: usize) -> Result<Option<LaunchWaits>> {
    if let Some(all) = cx.launch_waits.get() {
        return Ok(all.get(&i).copied());
    }
    let p = cx.p()?;
    let (kernels, api) = (p.kernels()?, p.api()?);
    let launches = &p.launch_index()?.kernel_launch;
    let mut all = BTreeMap::new();
    for (j, d) in cx.devices() {
        if d.steady.columns.get(Column::IdleLaunchOverhead) == 0 {
            continue;
        }
        let mut w = LaunchWaits { long: 0, waited: 0 };
        for (k, kk) in super::steady_kernels(kernels, d) {
            if kk.dur() < LONG_KERNEL_NS {
                continue;
            }
            let Some(a) = launches[k].map(|a| &api[a as usize]) else {
                continue;
            };
            w.long += 1;
            if a.end >= kk.end {
                w.waited += 1;
            }
        }
        if w.long > 0 {
            all.insert(j, w);
        }
    }
    let w = all.get(&i).copied();
    let _ = cx.launch_waits.set(all);
    Ok(w)
}

pub const LAUNCH_BLOCKING: RuleSpec = RuleSpec {
    id: "synchronous_launches",
    doc: "Kernel launches return only after their kernel has ended (nine in ten launches of kernels of 20 us or \
          more): the host cannot queue work ahead, so its whole time between launches is device idle. On such a \
          device this rule, not launch_bound_tiny_kernels, reads the ledger column idle_launch_overhead.",
    what_if: "launches asynchronous again: the host queues ahead of the device and the launch-overhead idle goes \
              (as far as the host, freed of the waits, keeps ahead)",
    columns: &[],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "An asynchronous launch returns in microseconds and the host runs ahead of the device; when every launch \
              waits for its kernel (CUDA_LAUNCH_BLOCKING=1, a debugging switch, or a tool that serializes launches), \
              the device idles through all the host's Python and dispatch between kernels.",
        fix: "Unset CUDA_LAUNCH_BLOCKING (check the environment, the launch script, and os.environ in the program and \
              its imports) and any debugging tool that serializes kernels (compute-sanitizer, a profiler in a \
              serializing mode); then profile again: what is left of the launch waits is the host's own pace.",
        verify: "Re-profile: launch calls should return before their kernels end, and aisp_profile_ledger \
                 idle_launch_overhead should shrink.",
        quiet: "launch calls return before their kernels end",
    },
    needs_profile: true,
    eval: launch_blocking,
};

fn launch_blocking(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let col = Column::IdleLaunchOverhead;
    let mut drafts = Vec::new();
    let devs: Vec<usize> = cx.devices().map(|(i, _)| i).collect();
    for i in devs {
        let d = &cx.ledger.devices[i];
        if d.steady.columns.get(col) == 0 {
            continue;
        }
        let Some(w) = launch_waits(cx, i)?.filter(|w| w.blocking()) else {
            continue;
        };
        let basis = "measured: the ledger's idle_launch_overhead of each steady step, on a device whose launch calls \
                     return after their kernels end";
        let dr = idle_draft(cx, i, d, col, basis);
        let idle = dr.total();
        let idle_step = per_step(d, idle);
        drafts.push(dr.text(
            format!(
                "Synchronous launches: {}% of launches return only after their kernel ends; the device idles {}% \
                 waiting for the next launch",
                w.pct(),
                d.share(idle)
            ),
            format!(
                "{} of {} launches of kernels of 20 us or more return after the kernel ends; {} a step waiting for \
                 launches",
                w.waited,
                w.long,
                ms(idle_step)
            ),
            vec![
                format!(
                    "{} steady steps: {} of the {} kernels of at least 20 us ({}%) ended before their launch call \
                     returned: the launches waited for them",
                    d.steady.steps,
                    w.waited,
                    w.long,
                    w.pct()
                ),
                format!(
                    "the device waited for launches {} in all ({}% of the steady window), {} a step",
                    ms(idle),
                    d.share(idle),
                    ms(idle_step)
                ),
            ],
            json!({"long_kernels": w.long, "launches_waited": w.waited, "waited_pct": w.pct(),
                "idle_ns": idle, "idle_pct": d.share(idle), "idle_per_step_ns": idle_step, "steps": d.steady.steps}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub const HOST_COMPUTE: RuleSpec = RuleSpec {
    id: "gpu_starvation",
    doc: "The device waits 1 ms or more at a time while the launching thread runs host code outside any recorded \
          call (Python, preprocessing): ledger column idle_host_compute.",
    what_if: "the host work moved off the critical path (overlapped with device work, or done ahead): its idle goes",
    columns: &[Column::IdleHostCompute],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "While the host thread works on something else, it issues nothing: the device sits idle and the step \
              takes as long as the host side.",
        fix: "Take the host work named in the evidence off the critical path: data preparation into DataLoader \
              workers, per-step Python work precomputed or batched, or overlapped with device work (no syncs, so \
              the CPU runs ahead). Idle before the same kernel every step points at what prepares that call: a \
              kernel built per input shape (cudnn.benchmark, Triton autotuning, torch.compile recompiles: fix or \
              bucket the shapes) or a mask or index built on the host.",
        verify: "Re-profile: aisp_profile_ledger idle_host_compute should shrink and the steady step with it.",
        quiet: "host-compute idle under 1% of the steady window",
    },
    needs_profile: true,
    eval: host_compute,
};

fn host_compute(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    idle_with_largest(
        cx,
        spec,
        Column::IdleHostCompute,
        "measured: the ledger's idle_host_compute — idle stretches of 1 ms or more while the thread the device waited \
         for ran host code outside any recorded CUDA or OS call",
        "GPU starvation: the device idles {pct}% of the steady window while the host computes",
        gil_held_elsewhere,
    )
}

/// CPython's default switch interval (`sys.getswitchinterval()`): a thread that wants the GIL waits this long on a
/// condition variable, then asks the holder to drop it, and waits again.
const GIL_SWITCH_NS: i64 = 5_000_000;

/// A thread waiting for the GIL shows as timed condition-variable waits that each last about the switch interval
/// (within a tenth of it: the wait times out, then the request to drop is made).
fn gil_wait(ns: i64) -> bool {
    (ns - GIL_SWITCH_NS).abs() * 10 <= GIL_SWITCH_NS
}

/// Host compute the device waits for, spent by its launching thread waiting for the Python GIL: timed
/// condition-variable waits of the switch interval (5 ms) that cover at least half of the idle, once a step or more.
/// The thread is not computing; another Python thread holds the GIL (a metrics or logging thread in C code that
/// keeps it: json.dumps, pickling), and the fix is that thread's work, not the training loop's.
fn gil_held_elsewhere(cx: &Ctx, d: &DeviceLedger, col: Column, dr: &mut Draft) -> Result<()> {
    let Some(waits) = waited_thread_os_calls(cx, d, col, |name| name == "pthread_cond_timedwait")?
    else {
        return Ok(());
    };
    let waits: Vec<i64> = waits
        .iter()
        .map(|&(s, e)| e - s)
        .filter(|&ns| gil_wait(ns))
        .collect();
    let (count, ns) = (waits.len() as u64, waits.iter().sum::<i64>());
    let steps = d.steady.steps.max(1) as u64;
    if count < steps || ns * 2 < dr.total() {
        return Ok(());
    }
    let per_step = (count as f64 / steps as f64 * 100.0).round() / 100.0;
    dr.title += &format!(
        ": the launching thread waits for the Python GIL, {per_step} waits a step of the 5 ms switch interval"
    );
    dr.gist += &format!("; {per_step} GIL waits a step");
    dr.evidence.insert(
        1,
        format!(
            "{count} waits of 4.5-5.5 ms (pthread_cond_timedwait, CPython's 5 ms switch interval) on the launching \
             thread in the steady window, {} a step: it is waiting for the GIL, which another Python thread holds",
            ms(ns / steps as i64)
        ),
    );
    dr.fix = Some(
        "Another Python thread holds the GIL while the training loop waits to launch: find it (a metrics, logging or \
         monitoring thread running C code that keeps the GIL, such as json.dumps or pickling of large data, or a long \
         pure-Python loop) and move that work to another process, make it smaller (only what is new each step) or \
         run it rarely."
            .into(),
    );
    dr.fix_replaces = true;
    if let serde_json::Value::Object(m) = &mut dr.data {
        m.insert("gil_waits".into(), json!(count));
        m.insert("gil_waits_per_step".into(), json!(per_step));
        m.insert("gil_wait_ns".into(), json!(ns));
    }
    Ok(())
}

/// The OS runtime calls named as `wanted` accepts made by the thread the device waited for in `col`'s idle, begun
/// and ended on the host side of the steady steps, as (start, end); none where that thread or side is unknown.
fn waited_thread_os_calls(
    cx: &Ctx,
    d: &DeviceLedger,
    col: Column,
    wanted: impl Fn(&str) -> bool,
) -> Result<Option<Vec<(i64, i64)>>> {
    let Some(thread) = super::step_calls::waited_for(d, |c| c == col) else {
        return Ok(None);
    };
    let p = cx.p()?;
    let Some((lo, hi)) = super::step_regions::host_window(p, d)? else {
        return Ok(None);
    };
    let ids: BTreeSet<i64> = p
        .osrt_name_ids()?
        .into_iter()
        .filter(|&id| wanted(p.string(id)))
        .collect();
    if ids.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let windows: rustc_hash::FxHashMap<i64, Vec<(i64, i64)>> =
        [(thread, vec![(lo, hi)])].into_iter().collect();
    let parts = p.fold_osrt_threads_near(
        &windows,
        |id| ids.contains(&id),
        Vec::new,
        |acc: &mut Vec<(i64, i64)>, start, end, _, _| {
            if start >= lo && end <= hi {
                acc.push((start, end));
            }
        },
    )?;
    Ok(Some(parts.into_iter().flatten().collect()))
}

pub const DATA_LOADING: RuleSpec = RuleSpec {
    id: "data_loading_stall",
    doc: "The device waits while the launching thread waits for input: queue waits and reads (sem_wait, poll, read) \
          or a DataLoader range: ledger column idle_data_loading.",
    what_if: "input ready when the step needs it (enough loader workers, prefetch): the waiting idle goes",
    columns: &[Column::IdleDataLoading],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "The training loop blocks on the next batch while the device has nothing to do: input preparation, not \
              the device, sets the step time.",
        fix: "Feed the device faster: more DataLoader workers (num_workers), persistent_workers=True, prefetch_factor, \
              pin_memory=True; move decoding/augmentation to the GPU or cache preprocessed data (aisp_analyze_dataloader \
              says whether the workers are saturated).",
        verify: "Re-profile: aisp_profile_ledger idle_data_loading should approach 0.",
        quiet: "input-wait idle under 1% of the steady window",
    },
    needs_profile: true,
    eval: data_loading,
};

fn data_loading(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    idle_with_largest(
        cx,
        spec,
        Column::IdleDataLoading,
        "measured: the ledger's idle_data_loading — idle time while the thread the device waited for was in a queue \
         wait or read (OS runtime trace) or a DataLoader range",
        "Data loading stalls the device {pct}% of the steady window",
        input_wait_cause,
    )
}

/// Process creation calls: a DataLoader iterator starts its workers with them.
const FORKS: &[&str] = &["fork", "vfork", "clone", "clone3", "posix_spawn"];

/// What the loading thread's input wait is, where its OS calls say: workers started anew each step, else a child
/// process run and waited for each step.
fn input_wait_cause(cx: &Ctx, d: &DeviceLedger, col: Column, dr: &mut Draft) -> Result<()> {
    if !workers_restarted(cx, d, col, dr)? {
        child_process_per_step(cx, d, col, dr)?;
    }
    Ok(())
}

/// The calls a parent makes to wait for a child process to end.
const CHILD_WAITS: &[&str] = &["waitpid", "wait4", "waitid"];

/// A loading thread that waits for a child process at least once a steady step runs an external command each step
/// (`subprocess.run`, `os.system`: `nvidia-smi` for telemetry, a shell tool): its poll or read on the child's pipe
/// is the child's run time, not input, and no loader setting shortens it. The fix is the command out of the step.
/// Whether it said so.
fn child_process_per_step(cx: &Ctx, d: &DeviceLedger, col: Column, dr: &mut Draft) -> Result<bool> {
    let Some(waits) = waited_thread_os_calls(cx, d, col, |name| CHILD_WAITS.contains(&name))?
    else {
        return Ok(false);
    };
    let steps = d.steady.steps.max(1) as u64;
    let count = waits.len() as u64;
    if count < steps {
        return Ok(false);
    }
    let per_step = (count as f64 / steps as f64 * 100.0).round() / 100.0;
    dr.title += &format!(": a child process run and waited for every step ({per_step} a step)");
    dr.gist += &format!("; {per_step} child processes waited for a step");
    dr.evidence.insert(
        1,
        format!(
            "{count} waits for a child process (waitpid, wait4 or waitid) on the loading thread in the steady window ({per_step} a \
             step): each step runs an external command and waits for it; the wait on its pipe is the command's run \
             time, not input"
        ),
    );
    dr.fix = Some(
        "Take the external command out of the step (subprocess.run, os.system: nvidia-smi, a shell tool): read what \
         it gives in-process (GPU telemetry through NVML: pynvml, or torch.cuda.utilization / temperature / \
         power_draw), from a background thread or process, or every N steps. More loader workers would not help."
            .into(),
    );
    dr.fix_replaces = true;
    if let serde_json::Value::Object(m) = &mut dr.data {
        m.insert("child_waits".into(), json!(count));
        m.insert("child_waits_per_step".into(), json!(per_step));
    }
    Ok(true)
}

/// A loading thread that forks at least once a steady step starts its input workers anew each step: a DataLoader
/// iterator made every step (`next(iter(loader))`, a loader built in the loop) forks its workers, waits for their
/// first batch and joins them when it is dropped. The wait is then the workers' start, not their speed, and more
/// workers only fork more: the fix is one iterator kept across steps. The forks are counted on the thread the
/// device waited for in this idle, between the launches of the steps beside the steady window. Whether it said so.
fn workers_restarted(cx: &Ctx, d: &DeviceLedger, col: Column, dr: &mut Draft) -> Result<bool> {
    let Some(forks) = waited_thread_os_calls(cx, d, col, |name| FORKS.contains(&name))? else {
        return Ok(false);
    };
    let (forks, fork_ns) = (
        forks.len() as u64,
        forks.iter().map(|&(s, e)| e - s).sum::<i64>(),
    );
    let steps = d.steady.steps.max(1) as u64;
    if forks < steps {
        return Ok(false);
    }
    let per_step = (forks as f64 / steps as f64 * 100.0).round() / 100.0;
    dr.title +=
        &format!(": {per_step} processes forked a step, the input workers started anew every step");
    dr.gist += &format!("; {per_step} forks a step");
    dr.evidence.insert(
        1,
        format!(
            "{forks} fork calls on the loading thread in the steady window ({per_step} a step, {} a step): a \
             DataLoader iterator made every step starts its workers again, waits for their first batch and joins \
             them when dropped",
            ms(fork_ns / steps as i64)
        ),
    );
    dr.fix = Some(
        "Make the iterator once and keep it: iterate the loader (for batch in loader) or take it = iter(loader) \
         outside the loop, with persistent_workers=True across epochs; the workers then prefetch while the device \
         computes. More workers would only fork more each step."
            .into(),
    );
    dr.fix_replaces = true;
    if let serde_json::Value::Object(m) = &mut dr.data {
        m.insert("forks".into(), json!(forks));
        m.insert("forks_per_step".into(), json!(per_step));
        m.insert("fork_ns".into(), json!(fork_ns));
    }
    Ok(true)
}

pub const OS_WAIT: RuleSpec = RuleSpec {
    id: "host_os_wait",
    doc: "The device waits while the launching thread sleeps or waits on a lock (nanosleep, futex, \
          pthread_mutex_lock): ledger column idle_os_wait.",
    what_if: "the sleep or lock wait removed from the loop: its idle goes",
    columns: &[Column::IdleOsWait],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "A thread that sleeps or waits on a lock issues no work: the device idles for as long.",
        fix: "Remove sleeps and polling waits from the training loop (time.sleep, busy-wait throttles), avoid lock \
              contention with other threads (logging, checkpoint or metrics threads holding the GIL or a mutex), and \
              move periodic work out of the step.",
        verify: "Re-profile: aisp_profile_ledger idle_os_wait should approach 0.",
        quiet: "sleep/lock idle under 1% of the steady window",
    },
    needs_profile: true,
    eval: os_wait,
};

fn os_wait(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    idle_with_largest(
        cx,
        spec,
        Column::IdleOsWait,
        "measured: the ledger's idle_os_wait — idle time while the thread the device waited for was in a sleep or \
         lock wait (OS runtime trace)",
        "The host sleeps or waits on a lock while the device idles {pct}% of the steady window",
        as_measured,
    )
}

/// What most of the stretches' time comes before: the next kernel after each stretch's idle run, where one kernel
/// (a family of names alike but for numbers) follows at least half of the idle time. Host work just before one
/// kernel in every step points at what prepares that call (a plan or module built per input shape, a mask or index
/// built on the host).
fn before_kernel(cx: &Ctx, d: &DeviceLedger, st: &[Stretch]) -> Result<Option<BeforeKernel>> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let starts: Vec<(i64, usize)> = super::steady_kernels(kernels, d)
        .map(|(i, k)| (k.start, i))
        .collect();
    // The device stays idle past a stretch through the pieces of other causes that follow it (the launch call's
    // own overhead, say): the idle run ends where no piece continues it.
    let runs = IdleRuns::of(d);
    let total: i64 = st.iter().map(|s| s.end - s.start).sum();
    // family → (idle ns, stretches, its kernels' names with how many stretches each ends)
    let mut by_family: BTreeMap<String, (i64, usize, BTreeMap<String, usize>)> = BTreeMap::new();
    // Per demangled name, its label and family, made once.
    let mut named: std::collections::HashMap<i64, (String, String)> = Default::default();
    for s in st {
        let end = runs.end_from(s.end);
        let at = starts.partition_point(|&(t, _)| t < end);
        // The next kernel: the one the host was preparing (a memset or copy the same call issues may come first).
        let Some(&(_, i)) = starts.get(at) else {
            continue;
        };
        let (name, family) = named.entry(kernels[i].demangled_name).or_insert_with(|| {
            let name = classify::kernel_label(p.string(kernels[i].demangled_name));
            // Kernels generated per shape (cuDNN's `..._knob_7_64x128x128_...`, tile variants) are one family:
            // their names alike but for numbers.
            let family = name
                .split(|c: char| c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join("#");
            (name, family)
        });
        let e = by_family.entry(family.clone()).or_default();
        e.0 += s.end - s.start;
        e.1 += 1;
        *e.2.entry(name.clone()).or_default() += 1;
    }
    let Some((_, (ns, n, names))) = by_family.into_iter().max_by_key(|(_, (ns, ..))| *ns) else {
        return Ok(None);
    };
    let first = names
        .iter()
        .max_by_key(|(_, c)| **c)
        .map(|(name, _)| name.clone())
        .unwrap_or_default();
    let alike = match names.len() {
        1 => String::new(),
        k => format!(" or one of {} kernels named alike", k - 1),
    };
    let pct = pct1(ns, total.max(1));
    Ok((ns * 2 >= total).then(|| BeforeKernel {
        line: format!(
            "{pct}% of this idle ({n} of {} stretches) comes just before `{first}`{alike}, the next kernel: the host \
             works before launching it",
            st.len(),
        ),
        pct,
        stretches: n,
        kernel: first,
    }))
}

/// Where each run of idle pieces ends (each piece continued by the one that starts where it ends), for every piece
/// start: made once in one pass from the last piece back. Walking each stretch's run forward from its end made the
/// rule quadratic in the pieces of a long idle run (3.7 s of a 1 GB export's 4.9 s).
struct IdleRuns {
    /// Piece starts in order, one per start (the last piece of a start wins, as a map by start would keep).
    starts: Vec<i64>,
    /// The end of the run from each start.
    ends: Vec<i64>,
}

impl IdleRuns {
    fn of(d: &DeviceLedger) -> IdleRuns {
        let mut pieces: Vec<(i64, i64)> = d.idle.iter().map(|p| (p.start, p.end)).collect();
        // Stable: of the pieces that share a start, the last stays last.
        if !pieces.is_sorted_by_key(|p| p.0) {
            pieces.sort_by_key(|p| p.0);
        }
        let mut one: Vec<(i64, i64)> = Vec::with_capacity(pieces.len());
        for p in pieces {
            match one.last_mut() {
                Some(last) if last.0 == p.0 => *last = p,
                _ => one.push(p),
            }
        }
        let starts: Vec<i64> = one.iter().map(|p| p.0).collect();
        let mut ends = vec![0i64; one.len()];
        for i in (0..one.len()).rev() {
            let end = one[i].1;
            // The piece that starts where this one ends, if any and not empty, carries the run on: it starts later,
            // so its run is already known.
            let at = starts[i..].partition_point(|&s| s < end) + i;
            ends[i] = match one.get(at) {
                Some(&(s, e)) if s == end && e > end => ends[at],
                _ => end,
            };
        }
        IdleRuns { starts, ends }
    }

    /// Where the device's idle run that continues at `t` ends: `t` itself when no piece starts there.
    fn end_from(&self, t: i64) -> i64 {
        match self.starts.binary_search(&t) {
            Ok(i) => self.ends[i],
            Err(_) => t,
        }
    }
}

/// The kernel most of an idle column's stretches come before, its share of that idle and the evidence line.
struct BeforeKernel {
    kernel: String,
    pct: f64,
    stretches: usize,
    line: String,
}

/// An idle-cause finding with the largest stretches explained from the host side.
/// What a rule adds to a draft of [`idle_with_largest`] from what this device's idle is made of (nothing, for most).
type Refine = fn(&Ctx, &DeviceLedger, Column, &mut Draft) -> Result<()>;

fn as_measured(_: &Ctx, _: &DeviceLedger, _: Column, _: &mut Draft) -> Result<()> {
    Ok(())
}

fn idle_with_largest(
    cx: &mut Ctx,
    spec: &RuleSpec,
    col: Column,
    basis: &str,
    title: &str,
    refine: Refine,
) -> Result<()> {
    let mut drafts = Vec::new();
    let devs: Vec<usize> = cx.devices().map(|(i, _)| i).collect();
    for i in devs {
        let d = &cx.ledger.devices[i];
        if d.steady.columns.get(col) == 0 {
            continue;
        }
        if let Some(bare) = under_bar(i, d, col, basis) {
            drafts.push(bare);
            continue;
        }
        let dr = idle_draft(cx, i, d, col, basis);
        let idle = dr.total();
        let st = stretches(d, col);
        let longest = st.iter().map(|s| s.end - s.start).max().unwrap_or(0);
        let largest = largest_explained(cx, d, col, 3)?;
        let mut evidence = vec![format!(
            "{} in {} stretches over {} of {} steady steps ({}% of the steady window); the longest {}",
            ms(idle),
            st.len(),
            steps_with(d, col),
            d.steady.steps,
            d.share(idle),
            ms(longest)
        )];
        for (s, len, why) in largest.iter().take(2) {
            evidence.push(format!("at {s} ns, {}: {why}", ms(*len)));
        }
        if let Some(r) = dr.regions.first() {
            evidence.push(format!(
                "most of it inside NVTX region `{}` ({}% of this idle)",
                r.region, r.pct_of_finding
            ));
        }
        let before = before_kernel(cx, d, &st)?;
        if let Some(b) = &before {
            evidence.push(b.line.clone());
        }
        let pct = d.share(idle);
        let idle_step = per_step(d, idle);
        let gist = format!(
            "{} idle per steady step, in {} stretches over {} of {} steps, the longest {}{}",
            ms(idle_step),
            st.len(),
            steps_with(d, col),
            d.steady.steps,
            ms(longest),
            match dr.regions.first() {
                Some(r) => format!("; {}% inside `{}`", r.pct_of_finding, r.region),
                None => String::new(),
            }
        ) + &before.as_ref().map_or(String::new(), |b| {
            format!(
                "; {}% just before `{}`",
                b.pct,
                classify::short_form(&b.kernel, 48)
            )
        });
        let mut dr = dr.text(
            title.replace("{pct}", &pct.to_string()),
            gist,
            evidence,
            json!({"idle_ns": idle, "idle_pct": pct, "idle_per_step_ns": idle_step, "stretches": st.len(), "longest_ns": longest,
                "steps_with_idle": steps_with(d, col), "steps": d.steady.steps,
                "largest": largest.iter().map(|(s, l, e)| json!({"start_ns": s, "length_ns": l, "explanation": e})).collect::<Vec<_>>(),
                "before_kernel": before.as_ref().map(|b| &b.kernel), "before_kernel_pct": before.as_ref().map(|b| b.pct),
                "before_kernel_stretches": before.as_ref().map(|b| b.stretches)}),
        );
        refine(cx, d, col, &mut dr)?;
        drafts.push(dr);
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub const SYNC: RuleSpec = RuleSpec {
    id: "cuda_api_sync",
    doc: "The device idles while the host blocks in a synchronizing call (stream/device/event sync, blocking \
          memcpy/memset) and while the drained pipeline refills: ledger column idle_sync.",
    what_if: "the synchronizations removed from the steady loop (the host runs ahead): their idle goes",
    columns: &[Column::IdleSync],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "While the host waits in a synchronization call it issues no work; once the device has drained its \
              queue it sits idle until the host returns and launches again. Blocking while the device is still busy \
              costs the device nothing.",
        fix: "Remove syncs from the loop: avoid .item(), .cpu(), print(tensor), blocking copies and \
              torch.cuda.synchronize() per step; order work with CUDA events (cudaStreamWaitEvent) instead of host \
              waits; accumulate metrics on the device and read them every N steps.",
        verify: "Re-profile: aisp_profile_ledger idle_sync should approach 0.",
        quiet: "synchronization idle under 1% of the steady window",
    },
    needs_profile: true,
    eval: sync,
};

/// Calls of one kind by the device's process in the steady window: name → (count, total ns); the patterns
/// (previous call on the thread → this call) and how many steady steps hold one.
struct CallSummary {
    names: BTreeMap<String, (u64, i64)>,
    patterns: BTreeMap<String, u64>,
    steps_with: usize,
}

fn call_summary(
    cx: &Ctx,
    d: &DeviceLedger,
    want: impl Fn(CallKind, i64) -> bool,
) -> Result<CallSummary> {
    let p = cx.p()?;
    let api = p.api()?;
    let (lo, hi) = (d.steady.start_ns, d.steady.end_ns);
    let process = d.process_key;
    let lo_i = api.partition_point(|a| a.start < lo);
    let mut names: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    let mut patterns: BTreeMap<String, u64> = BTreeMap::new();
    let mut kinds: rustc_hash::FxHashMap<i64, CallKind> = Default::default();
    let mut starts: Vec<i64> = Vec::new();
    let mut last_on_thread: rustc_hash::FxHashMap<i64, i64> = Default::default();
    // The call before the window on each thread is not needed: patterns start inside it.
    for a in &api[lo_i..] {
        if a.start >= hi {
            break;
        }
        if process.is_some_and(|p| model::process_key(a.global_tid) != p) {
            continue;
        }
        let kind = *kinds
            .entry(a.name)
            .or_insert_with(|| calls::api_kind(calls::api_display_name(p.string(a.name))));
        let prev = last_on_thread.insert(a.global_tid, a.name);
        if !want(kind, a.dur()) {
            continue;
        }
        let n = calls::api_display_name(cx.p()?.string(a.name)).to_string();
        let e = names.entry(n.clone()).or_default();
        e.0 += 1;
        e.1 += a.dur();
        if let Some(pn) = prev {
            let pn = calls::api_display_name(cx.p()?.string(pn));
            *patterns.entry(format!("{pn} → {n}")).or_default() += 1;
        }
        starts.push(a.start);
    }
    let steps_with = d
        .steady_steps()
        .filter(|s| {
            let i = starts.partition_point(|&t| t < s.start_ns);
            starts.get(i).is_some_and(|&t| t < s.start_ns + s.period_ns)
        })
        .count();
    Ok(CallSummary {
        names,
        patterns,
        steps_with,
    })
}

fn top_pattern(patterns: &BTreeMap<String, u64>) -> Option<(&String, &u64)> {
    patterns
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
}

fn sync(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    blocking_rule(
        cx,
        spec,
        &Blocking {
            col: Column::IdleSync,
            want: |k, _| matches!(k, CallKind::HostSync | CallKind::SyncCopy),
            what: "synchronizing calls",
            basis: "measured: the ledger's idle_sync — device idle while the host blocked in a synchronizing call \
                    (after the device ran dry) and the refill after it returned, at most 1 ms",
            recurs: Recurs::AsSeen,
            refine: |_, _, _| {},
        },
    )
}

pub const ALLOCATOR: RuleSpec = RuleSpec {
    id: "allocator_churn",
    doc: "The device idles while the host allocates or frees device memory in the steady loop (cudaMalloc, \
          cudaFree and kin) and while the pipeline refills: ledger column idle_allocator.",
    what_if: "allocations reused instead of made and freed each step: their idle goes",
    columns: &[Column::IdleAllocator],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "cudaMalloc and cudaFree in the steady state mean the caching allocator gives memory back and asks again: \
              each call costs tens to hundreds of microseconds of CPU, and cudaFree waits for the whole device.",
        fix: "Do not call torch.cuda.empty_cache() (or gc-driven frees) inside the loop; keep tensor shapes steady so \
              blocks are reused; preallocate buffers; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        verify: "Re-profile: aisp_profile_ledger idle_allocator should approach 0 and aisp_profile_summary show no \
                 cudaMalloc/cudaFree inside the steps.",
        quiet: "allocation idle under 1% of the steady window",
    },
    needs_profile: true,
    eval: allocator,
};

fn allocator(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    blocking_rule(
        cx,
        spec,
        &Blocking {
            col: Column::IdleAllocator,
            want: |k, _| k == CallKind::Allocation,
            what: "allocation/release calls",
            basis: "measured: the ledger's idle_allocator — device idle while the host was in an allocation or \
                    release call and the refill after it, at most 1 ms",
            recurs: Recurs::AsSeen,
            refine: host_pinning,
        },
    )
}

/// The calls that page-lock host memory and release it again.
const PINNING: &[&str] = &[
    "cudaHostRegister",
    "cudaHostUnregister",
    "cudaHostAlloc",
    "cudaMallocHost",
    "cudaFreeHost",
    "cuMemHostRegister",
    "cuMemHostUnregister",
    "cuMemHostAlloc",
    "cuMemAllocHost",
    "cuMemFreeHost",
];

/// Host memory page-locked and released in the steady loop, where those calls hold most of the allocation time: a
/// loader that registers each new batch array (or pins a new buffer per batch) pays the pinning of every page each
/// step, and the caching allocator's advice does not apply: the fix is staging buffers pinned once and reused.
fn host_pinning(cs: &CallSummary, d: &DeviceLedger, dr: &mut Draft) {
    let pinning = |name: &str| PINNING.iter().any(|p| name.starts_with(p));
    let all: i64 = cs.names.values().map(|v| v.1).sum();
    let (calls, ns) = cs
        .names
        .iter()
        .filter(|(name, _)| pinning(name))
        .fold((0u64, 0i64), |a, (_, v)| (a.0 + v.0, a.1 + v.1));
    // In most steps, as the generic title's "in every step" asks.
    if ns * 2 <= all || cs.steps_with * 5 < d.steady.steps * 4 {
        return;
    }
    let names: Vec<&str> = cs
        .names
        .keys()
        .filter(|name| pinning(name))
        .map(String::as_str)
        .collect();
    let steps = d.steady.steps.max(1) as i64;
    dr.title = format!(
        "Host memory page-locked and released every step ({} of {}: {}): the device idles {}% of the steady window",
        cs.steps_with,
        d.steady.steps,
        names.join(", "),
        d.share(dr.total())
    );
    dr.gist += &format!("; page-locking {} a step", ms(ns / steps));
    dr.evidence.insert(
        1,
        format!(
            "{calls} page-locking calls ({}) in the steady window, {} a step: {}% of the allocation calls' time",
            names.join(", "),
            ms(ns / steps),
            pct1(ns, all)
        ),
    );
    dr.fix = Some(
        "Page-lock the staging memory once: allocate two or three pinned buffers before the loop \
         (torch.empty(..., pin_memory=True), or one cudaHostRegister at start-up) and fill them in turn, instead of \
         registering a new array, or pinning a new buffer, for every batch and releasing it after the copy."
            .into(),
    );
    dr.fix_replaces = true;
    if let serde_json::Value::Object(m) = &mut dr.data {
        m.insert("pinning_calls".into(), json!(calls));
        m.insert("pinning_ns".into(), json!(ns));
        m.insert("pinning_per_step_ns".into(), json!(ns / steps));
    }
}

pub const MODULE_LOADING: RuleSpec = RuleSpec {
    id: "module_loading",
    doc: "The device idles in the steady window while CUDA modules load (cuModuleLoad*, cuLibraryLoad*): ledger \
          column idle_module_loading. Lazy loading normally stays in warm-up.",
    what_if: "modules loaded before the loop: the loading idle goes",
    columns: &[Column::IdleModuleLoading],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "With lazy loading, the first launch of each kernel loads its module: new kernels appearing in the steady \
              state (new shapes, new code paths) pay that inside the step.",
        fix: "Warm up every code path and shape before timing, keep shapes steady (pad or bucket), or set \
              CUDA_MODULE_LOADING=EAGER to load modules at startup.",
        verify: "Re-profile: aisp_profile_ledger idle_module_loading should be 0 in the steady window.",
        quiet: "module-loading idle under 1% of the steady window",
    },
    needs_profile: true,
    eval: module_loading,
};

fn module_loading(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    blocking_rule(
        cx,
        spec,
        &Blocking {
            col: Column::IdleModuleLoading,
            want: |k, dur| {
                k == CallKind::ModuleLoading
                    || (k == CallKind::Launch && dur >= crate::ledger::SLOW_LAUNCH_NS)
            },
            what: "module-loading calls (and launches over 1 ms: lazy loading inside the launch)",
            basis: "measured: the ledger's idle_module_loading — device idle while the host loaded CUDA modules",
            recurs: Recurs::OnceByNature,
            refine: |_, _, _| {},
        },
    )
}

/// Whether a blocking cause seen in the steady window is taken to recur at the rate it was seen.
#[derive(Clone, Copy, PartialEq)]
enum Recurs {
    /// A sync or an allocation seen once in the window may come back every N steps (a checkpoint, a log line):
    /// its time over the window is the best estimate of its cost per step.
    AsSeen,
    /// Lazy loading loads each module once per process: loads in one steady step of many are a first use (a late
    /// code path, a new shape), a cost a longer run does not pay again. Loads in several steps mean new kernels
    /// keep appearing, and count as seen.
    OnceByNature,
}

/// Steady steps needed before loads in one of them count as a one-time first use rather than a periodic cost.
const ONE_TIME_MIN_STEPS: usize = 5;

/// An idle cause that is a kind of CUDA call.
#[derive(Clone, Copy)]
struct Blocking {
    /// The ledger column its idle is counted in.
    col: Column,
    /// The calls of that kind, by kind and duration.
    want: fn(CallKind, i64) -> bool,
    /// The calls in words ("synchronizing calls").
    what: &'static str,
    basis: &'static str,
    recurs: Recurs,
    /// What the calls found say beyond the kind's generic finding (its title, evidence and fix).
    refine: fn(&CallSummary, &DeviceLedger, &mut Draft),
}

/// An idle-cause finding whose cause is a kind of CUDA call: names, counts, the call pattern before them.
fn blocking_rule(cx: &mut Ctx, spec: &RuleSpec, cause: &Blocking) -> Result<()> {
    let Blocking {
        col,
        want,
        what,
        basis,
        recurs,
        refine,
    } = *cause;
    let mut drafts = Vec::new();
    let devs: Vec<usize> = cx.devices().map(|(i, _)| i).collect();
    for i in devs {
        let d = &cx.ledger.devices[i];
        if d.steady.columns.get(col) == 0 {
            continue;
        }
        if let Some(bare) = under_bar(i, d, col, basis) {
            drafts.push(bare);
            continue;
        }
        let cs = call_summary(cx, d, want)?;
        let dr = idle_draft(cx, i, d, col, basis);
        let idle = dr.total();
        let count: u64 = cs.names.values().map(|v| v.0).sum();
        let blocked: i64 = cs.names.values().map(|v| v.1).sum();
        if recurs == Recurs::OnceByNature
            && cs.steps_with == 1
            && d.steady.steps >= ONE_TIME_MIN_STEPS
        {
            drafts.push(one_time(i, d, &cs, col, what, (count, blocked, idle)));
            continue;
        }
        let mut evidence = vec![
            format!(
                "{count} {what} in the steady window (count, total ns per name: {:?}), in {} of {} steady steps",
                cs.names, cs.steps_with, d.steady.steps
            ),
            format!(
                "the host spent {} in them; the device sat idle {} of that time and the refill after ({}% of the steady window)",
                ms(blocked),
                ms(idle),
                d.share(idle)
            ),
        ];
        if let Some((pat, n)) = top_pattern(&cs.patterns) {
            evidence.push(format!("call pattern: {pat} in {n} of {count} calls"));
        }
        let title = if cs.steps_with * 5 >= d.steady.steps * 4 && d.steady.steps >= 3 {
            format!(
                "{} in every step ({} of {}): the device idles {}% of the steady window",
                capitalize(what),
                cs.steps_with,
                d.steady.steps,
                d.share(idle)
            )
        } else {
            format!(
                "{}: the device idles {}% of the steady window around them",
                capitalize(what),
                d.share(idle)
            )
        };
        let (blocked_step, idle_step) = (per_step(d, blocked), per_step(d, idle));
        // The call made most often, by name: what to look for in the loop.
        let most = cs
            .names
            .iter()
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))
            .map_or(String::new(), |(n, (c, _))| format!(" (most: {n}, {c})"));
        let gist = format!(
            "{count} {what}{most} in {} of {} steady steps; per step the host blocked {} and the device idled {}",
            cs.steps_with,
            d.steady.steps,
            ms(blocked_step),
            ms(idle_step)
        );
        let mut draft = dr.text(
            title,
            gist,
            evidence,
            json!({"idle_ns": idle, "idle_pct": d.share(idle), "idle_per_step_ns": idle_step, "calls": cs.names, "count": count, "blocked_ns": blocked, "blocked_per_step_ns": blocked_step,
                "steps_with_call": cs.steps_with, "steps": d.steady.steps, "patterns": cs.patterns}),
        );
        refine(&cs, d, &mut draft);
        drafts.push(draft);
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

/// A cause that happened in one steady step only and does not recur by nature: reported at its one-time cost, with
/// nothing at stake per step (a fix saves the typical step nothing).
fn one_time(
    i: usize,
    d: &DeviceLedger,
    cs: &CallSummary,
    col: Column,
    what: &str,
    (count, blocked, idle): (u64, i64, i64),
) -> Draft {
    let dr = Draft::new(
        i,
        d,
        Stake::None,
        "none per step: a one-time cost (in one steady step of many; a longer run does not pay it again)",
        &[col],
        |_| 0,
    );
    let title = format!(
        "{} in 1 of {} steady steps: a one-time {} of device idle, not a per-step cost",
        capitalize(what),
        d.steady.steps,
        ms(idle)
    );
    let gist = format!(
        "{count} {what} in 1 of {} steady steps: the host blocked {} and the device idled {} once ({}% of this \
         window); the other steps pay nothing",
        d.steady.steps,
        ms(blocked),
        ms(idle),
        d.share(idle)
    );
    let evidence = vec![format!(
        "{count} {what} in the steady window (count, total ns per name: {:?}), all in 1 of {} steady steps: a \
         first use inside the window (warm-up did not reach this code path or shape)",
        cs.names, d.steady.steps
    )];
    dr.text(
        title,
        gist,
        evidence,
        json!({"one_time": true, "idle_ns": idle, "idle_pct": d.share(idle), "calls": cs.names, "count": count,
            "blocked_ns": blocked, "steps_with_call": cs.steps_with, "steps": d.steady.steps}),
    )
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}
