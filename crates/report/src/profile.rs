//! Profile reports: one Nsight Systems export, or a before/after comparison
//! of two. Every number comes from the exact analyses of `aisp_profile`
//! (info, utilization, timeline, gaps, iterations, kernels, nvtx, rules,
//! compare); this module chooses what to show and hands it to the charts.

use crate::chart::build::{self, Bar, Lane, Scale, Segment, Series};
use crate::chart::{self, Paint};
use aisp_profile::classify::{self, KernelClass};
use aisp_profile::nvtx::NvtxOptions;
use aisp_profile::summary::NameKey;
use aisp_profile::timeline::TimelineOptions;
use aisp_profile::{
    self as profile, Profile, ResolvedScope, compare, gaps, info, iterations, kernels, nvtx, rules,
    timeline, utilization,
};
use aisp_profile::{Window, WindowKind};

use super::{Block, FindingBlock, Report, Result, Section, Table, common_facts, ms};

/// The colour of a kernel class (and of copies) on every chart.
pub fn class_paint(c: KernelClass) -> Paint {
    match c {
        KernelClass::GemmTensorCore => Paint::Rgb(0x1f, 0x77, 0xb4),
        KernelClass::GemmSimtFp32 => Paint::Rgb(0x5d, 0xa5, 0xda),
        KernelClass::GemmUnknown => Paint::Rgb(0x3d, 0x8e, 0xc9),
        KernelClass::Attention => Paint::Rgb(0x8e, 0x44, 0xad),
        KernelClass::Elementwise => Paint::Rgb(0x2a, 0x9d, 0x5c),
        KernelClass::Reduction => Paint::Rgb(0xb7, 0x95, 0x0b),
        KernelClass::Copy => Paint::Rgb(0x16, 0xa0, 0x85),
        KernelClass::Communication => Paint::Rgb(0xe6, 0x7e, 0x22),
        KernelClass::Other => Paint::Rgb(0x7f, 0x8c, 0x8d),
    }
}

const MEMCPY: Paint = Paint::Rgb(0xd3, 0x54, 0x9e);
const MEMSET: Paint = Paint::Rgb(0xa5, 0x69, 0x4f);

const CLASSES: &[KernelClass] = &[
    KernelClass::GemmTensorCore,
    KernelClass::GemmSimtFp32,
    KernelClass::GemmUnknown,
    KernelClass::Attention,
    KernelClass::Elementwise,
    KernelClass::Reduction,
    KernelClass::Copy,
    KernelClass::Communication,
    KernelClass::Other,
];

fn file_name(p: &Profile) -> String {
    p.source()
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or("profile")
        .to_string()
}

fn profile_facts(p: &Profile, i: &info::Info) -> Vec<(String, String)> {
    let mut f = vec![
        ("Profile".to_string(), p.source().display().to_string()),
        (
            "Nsight Systems".to_string(),
            format!(
                "{} (export schema {})",
                i.version.product_version.as_deref().unwrap_or("unknown"),
                i.version.schema_version.as_deref().unwrap_or("unknown")
            ),
        ),
    ];
    let gpus: Vec<String> = i
        .gpus
        .iter()
        .map(|g| {
            format!(
                "{}: {}",
                g.device,
                g.name.as_deref().unwrap_or("unknown GPU")
            )
        })
        .collect();
    f.push((
        "GPUs".into(),
        if gpus.is_empty() {
            "not recorded".into()
        } else {
            gpus.join(", ")
        },
    ));
    let e = &i.environment;
    f.push((
        "Capture machine".into(),
        format!(
            "{}{}{}",
            e.hostname.as_deref().unwrap_or("host not recorded"),
            e.os.as_deref()
                .map(|o| format!(", {o}"))
                .unwrap_or_default(),
            e.cpu_cores
                .map(|c| format!(", {c} CPU cores"))
                .unwrap_or_default()
        ),
    ));
    f.push((
        "Driver / CUDA".into(),
        format!(
            "{} / {}",
            e.driver_version.as_deref().unwrap_or("not recorded"),
            e.cuda_driver_version.as_deref().unwrap_or("not recorded")
        ),
    ));
    if let Some(t) = &i.capture.session_start_utc {
        f.push(("Captured".into(), t.clone()));
    }
    if let Some(c) = &i.capture.command {
        f.push(("Command".into(), c.clone()));
    }
    f.push((
        "Events".into(),
        format!(
            "{} kernels, {} memcpy, {} memset, {} CUDA API calls, {} NVTX ranges over {} ms",
            i.counts.kernels,
            i.counts.memcpys,
            i.counts.memsets,
            i.counts.cuda_api_calls,
            i.counts.nvtx_ranges,
            ms(i.duration.activity_span_ns)
        ),
    ));
    f
}

pub(crate) fn finding_block(f: &rules::Finding) -> FindingBlock {
    let sev = serde_json::to_value(f.severity)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut lines = vec![format!(
        "{} ms at stake, {}% of the analysis window{} (rule {})",
        ms(f.time_at_stake_ns),
        f.share_pct,
        f.device
            .map(|d| format!(" on device {d}"))
            .unwrap_or_default(),
        f.id
    )];
    lines.extend(f.evidence.iter().cloned());
    lines.push(format!("Why: {}", f.why));
    lines.push(format!("Fix: {}", f.fix));
    lines.push(format!("Verify: {}", f.verify));
    FindingBlock {
        severity: sev,
        title: f.title.clone(),
        lines,
    }
}

fn utilization_section(p: &Profile, scope: &ResolvedScope) -> Result<Section> {
    let u = utilization::utilization(p, scope, 100, 50.0)?;
    let mut s = Section::new("GPU utilization");
    let mut t = Table::new(&[
        ("device", false),
        ("window", false),
        ("start ns", true),
        ("length ms", true),
        ("kernel busy ms", true),
        ("busy %", true),
        ("kernels+copies busy %", true),
    ]);
    let mut series = Vec::new();
    for (i, d) in u.devices.iter().enumerate() {
        for w in &d.windows {
            t.row(vec![
                format!("{} {}", d.device, d.gpu.as_deref().unwrap_or("")),
                w.window.kind.as_str().to_string(),
                w.window.start_ns.to_string(),
                ms(w.window.length_ns),
                ms(w.busy_ns),
                format!("{}", w.busy_pct),
                format!("{}", w.all_ops_busy_pct),
            ]);
        }
        if let Some(steady) = d
            .windows
            .iter()
            .find(|w| w.window.kind == WindowKind::Steady)
        {
            s.para(format!(
                "Device {}: steady busy {}% ({} ms of kernels in a {} ms window from the second step to the last).",
                d.device,
                steady.busy_pct,
                ms(steady.busy_ns),
                ms(steady.window.length_ns)
            ));
        }
        let chunk_ms = d.chunk_ns as f64 / 1e6;
        series.push(Series {
            label: format!("device {}", d.device),
            points: d
                .chunk_busy_pct
                .iter()
                .enumerate()
                .map(|(k, v)| ((k as f64 + 0.5) * chunk_ms, *v))
                .collect(),
            paint: chart::SERIES[i % chart::SERIES.len()],
        });
    }
    s.table(t);
    let trimmed = build::trim_idle_ends(&mut series);
    s.chart(build::lines(
        "Utilization over time (kernels + copies busy % per 1/100 of the span)",
        "ms from the first GPU operation",
        "busy %",
        &series,
        Some((0.0, 100.0)),
        false,
    ));
    if let Some((lo, hi)) = trimmed {
        s.note(format!(
            "The chart shows the active part, {} to {} ms: before and after it every GPU is idle.",
            build::fmt_num(lo),
            build::fmt_num(hi)
        ));
    }
    s.note(
        "Busy % is the union of kernel intervals over the window, never a sum of durations. \
The steady window runs from the second step to the last, leaving warm-up out.",
    );
    Ok(s)
}

fn timeline_section(p: &Profile, scope: &ResolvedScope) -> Result<Option<Section>> {
    let tl = timeline::timeline(
        p,
        scope,
        &TimelineOptions {
            limit: 4000,
            merge_gap_ns: 0,
        },
    )?;
    if tl.gpu.is_empty() {
        return Ok(None);
    }
    let (t0, t1) = tl.window.bounds();
    let mut lanes = Vec::new();
    let mut devices: Vec<i64> = tl.gpu.iter().map(|g| g.device).collect();
    devices.dedup();
    for track in tl.gpu.iter().take(12) {
        let segments = track
            .entries
            .iter()
            .map(|e| {
                let paint = match e.kind.as_str() {
                    "memcpy" => MEMCPY,
                    "memset" => MEMSET,
                    _ => class_paint(classify::classify(&e.name, &e.name, [0; 3], [0; 3]).class),
                };
                // Drawn inside the window (a kernel may start before it).
                Segment {
                    start_ns: (t0 + e.offset_ns).clamp(t0, t1),
                    end_ns: (t0 + e.offset_ns + e.duration_ns).clamp(t0, t1),
                    paint,
                    label: format!("{} ({} µs)", e.name, e.busy_ns / 1000),
                }
            })
            .collect();
        lanes.push(Lane {
            label: format!("GPU {} stream {}", track.device, track.stream),
            segments,
            gaps: Vec::new(),
        });
    }
    // Idle gaps of each device (kernels ∪ copies), marked on its first lane.
    let min_gap = ((t1 - t0) / 400).max(2_000);
    let window = Window::new(WindowKind::Trim, t0, t1);
    let mut idle_total = Vec::new();
    for d in &devices {
        let union = utilization::device_union(p, scope, *d, true)?;
        let g = gaps::gaps_for(window, &union, min_gap);
        idle_total.push((*d, g.iter().map(|(a, b)| b - a).sum::<i64>(), g.len()));
        if let Some((i, _)) = tl
            .gpu
            .iter()
            .take(12)
            .enumerate()
            .find(|(_, t)| t.device == *d)
        {
            lanes[i].gaps = g;
        }
    }
    let mut legend: Vec<(String, Paint)> = CLASSES
        .iter()
        .map(|c| (c.as_str().replace('_', " "), class_paint(*c)))
        .collect();
    legend.push(("memcpy".into(), MEMCPY));
    legend.push(("memset".into(), MEMSET));
    let mut s = Section::new("Timeline");
    s.para(format!(
        "Window: {} ({} ms from {} ns). Kernels are coloured by class; NCCL kernels are `communication`.",
        tl.window_source,
        ms(tl.window.length_ns),
        t0
    ));
    s.chart(build::timeline(
        "Timeline strip per device and stream",
        t0,
        t1,
        &lanes,
        &legend,
    ));
    for (d, idle, n) in idle_total {
        s.note(format!(
            "Device {d}: {n} idle gaps of at least {} µs in this window, {} ms in all.",
            min_gap / 1000,
            ms(idle)
        ));
    }
    if tl.gpu.len() > 12 {
        s.note(format!("{} more streams are not drawn.", tl.gpu.len() - 12));
    }
    Ok(Some(s))
}

fn steps_section(p: &Profile, scope: &ResolvedScope) -> Result<Option<Section>> {
    let it = iterations::iterations(p, scope, None, 10_000)?;
    if it.processes.iter().all(|pr| pr.steps.is_empty()) {
        return Ok(None);
    }
    let mut s = Section::new("Steps");
    // Warm-up steps (the step ledger's: module loading, first allocations, autotuning) are left out
    // of the chart, which they would flatten; the table's statistics are unchanged.
    let warmup: Vec<(Option<i64>, String)> = aisp_profile::ledger::build(p, scope, None)
        .map(|l| {
            l.devices
                .iter()
                .flat_map(|d| {
                    d.steps
                        .iter()
                        .take(d.warmup_steps)
                        .map(move |st| (d.pid, st.name.clone()))
                })
                .collect()
        })
        .unwrap_or_default();
    let is_warmup = |pid: i64, name: &str| {
        warmup
            .iter()
            .any(|(p, n)| n == name && p.is_none_or(|p| p == pid))
    };
    let mut left_out_steps: Vec<String> = Vec::new();
    let mut series = Vec::new();
    let mut t = Table::new(&[
        ("process", false),
        ("steps", true),
        ("CPU median ms (after first)", true),
        ("GPU busy median ms (after first)", true),
        ("CV %", true),
        ("kernels per step", true),
    ]);
    for (i, pr) in it.processes.iter().enumerate() {
        if pr.steps.is_empty() {
            continue;
        }
        let c = chart::SERIES[(2 * i) % chart::SERIES.len()];
        let g = chart::SERIES[(2 * i + 1) % chart::SERIES.len()];
        let shown: Vec<_> = pr
            .steps
            .iter()
            .filter(|st| !is_warmup(pr.pid, &st.name))
            .collect();
        let shown = if shown.is_empty() {
            pr.steps.iter().collect()
        } else {
            shown
        };
        for st in pr
            .steps
            .iter()
            .filter(|st| !shown.iter().any(|x| x.index == st.index))
        {
            left_out_steps.push(format!(
                "{} (pid {}, {} ms of CPU time)",
                st.name,
                pr.pid,
                ms(st.cpu_ns)
            ));
        }
        series.push(Series {
            label: format!("pid {} CPU step time", pr.pid),
            points: shown
                .iter()
                .map(|st| (st.index as f64, st.cpu_ns as f64 / 1e6))
                .collect(),
            paint: c,
        });
        series.push(Series {
            label: format!("pid {} GPU busy in step", pr.pid),
            points: shown
                .iter()
                .map(|st| (st.index as f64, st.gpu_union_ns as f64 / 1e6))
                .collect(),
            paint: g,
        });
        let after = pr.cpu_after_first.as_ref();
        t.row(vec![
            pr.pid.to_string(),
            pr.step_count.to_string(),
            after
                .map(|a| format!("{:.3}", a.median / 1e6))
                .unwrap_or_default(),
            pr.gpu_union_after_first
                .as_ref()
                .map(|a| format!("{:.3}", a.median / 1e6))
                .unwrap_or_default(),
            after
                .map(|a| format!("{:.1}", a.cv_pct))
                .unwrap_or_default(),
            format!("{:.1}", pr.kernels_per_step),
        ]);
    }
    s.para(format!("Steps found by: {}.", it.rule));
    s.chart(build::lines(
        "Step time per step",
        "step index",
        "ms",
        &series,
        None,
        true,
    ));
    if !left_out_steps.is_empty() {
        s.note(format!(
            "Not in the chart: the warm-up step(s) {} — the step ledger's warm-up, which would flatten the rest.",
            left_out_steps.join(", ")
        ));
    }
    s.table(t);
    Ok(Some(s))
}

fn kernels_section(p: &Profile, scope: &ResolvedScope) -> Result<Section> {
    let k = kernels::kernels(p, scope, NameKey::Short, 12)?;
    let mut s = Section::new("Kernels");
    s.para(format!(
        "{} kernels, {} ms of kernel time in {} groups.",
        k.kernels,
        ms(k.total_ns),
        k.rows_total
    ));
    let top: Vec<Bar> = k
        .rows
        .iter()
        .map(|r| Bar {
            label: r.name.clone(),
            value: r.total_ns as f64 / 1e6,
            low: None,
            high: None,
            paint: class_paint(r.class.class),
            note: format!("{} ms, {}%", ms(r.total_ns), r.time_pct),
        })
        .collect();
    s.chart(build::bars(
        "Top kernels by total GPU time",
        "ms",
        &top,
        Scale::Linear,
        None,
    ));
    let classes: Vec<Bar> = k
        .classes
        .iter()
        .map(|c| Bar {
            label: c.class.as_str().replace('_', " "),
            value: c.time_pct,
            low: None,
            high: None,
            paint: class_paint(c.class),
            note: format!("{}%, {} ms", c.time_pct, ms(c.total_ns)),
        })
        .collect();
    s.chart(build::bars(
        "Kernel time by class",
        "% of kernel time",
        &classes,
        Scale::Linear,
        None,
    ));
    let mut t = Table::new(&[
        ("time %", true),
        ("total ms", true),
        ("instances", true),
        ("avg µs", true),
        ("p90 µs", true),
        ("class", false),
        ("kernel", false),
    ]);
    for r in &k.rows {
        t.row(vec![
            format!("{}", r.time_pct),
            ms(r.total_ns),
            r.instances.to_string(),
            format!("{:.1}", r.avg_ns / 1000.0),
            format!("{:.1}", r.p90_ns as f64 / 1000.0),
            r.class.class.as_str().to_string(),
            r.name.clone(),
        ]);
    }
    s.table(t);
    Ok(s)
}

fn nvtx_section(p: &Profile, scope: &ResolvedScope) -> Result<Option<Section>> {
    let n = nvtx::nvtx(
        p,
        scope,
        &NvtxOptions {
            limit: 12,
            ..Default::default()
        },
    )?;
    if n.names.is_empty() {
        return Ok(None);
    }
    let mut names = n.names.clone();
    names.sort_by_key(|r| std::cmp::Reverse(r.gpu_union_ns));
    let rows: Vec<Bar> = names
        .iter()
        .map(|r| Bar {
            label: r.name.clone(),
            value: r.gpu_union_ns as f64 / 1e6,
            low: None,
            high: None,
            paint: chart::SERIES[0],
            note: format!(
                "{} ms GPU, {} ms CPU",
                ms(r.gpu_union_ns),
                ms(r.cpu_total_ns)
            ),
        })
        .collect();
    let mut s = Section::new("NVTX ranges");
    s.chart(build::bars(
        "GPU time per NVTX range (union of the kernels launched inside)",
        "ms",
        &rows,
        Scale::Linear,
        None,
    ));
    s.note(format!(
        "{} of {} range names shown (largest CPU time first, drawn by GPU time). Kernels are attributed to a range by their launch (correlationId within the process).",
        n.names.len(),
        n.names_total
    ));
    Ok(Some(s))
}

/// A report of one profile (or of its scope).
pub fn profile_report(p: &Profile, scope: &ResolvedScope) -> Result<Report> {
    let i = info::info(p)?;
    let l = profile::ledger::build(p, scope, None)?;
    let r = rules::run_on(p, &l)?;
    let mut facts = profile_facts(p, &i);
    facts.extend(common_facts());
    let mut sections = Vec::new();
    let mut findings = Section::new("Findings");
    if r.findings.is_empty() {
        findings.para("Nothing significant: no rule found evidence of a problem.");
    }
    for f in &r.findings {
        findings.blocks.push(Block::Finding(finding_block(f)));
    }
    let not_fired = r.checked.iter().filter(|c| c.status != "finding").count();
    findings.note(format!(
        "{} rules checked; {} did not fire (below threshold or not applicable). Severity follows the share of the analysis window a fix could save.",
        r.checked.len(),
        not_fired
    ));
    sections.push(findings);
    sections.push(ledger_section(&l));
    sections.push(utilization_section(p, scope)?);
    if let Some(s) = timeline_section(p, scope)? {
        sections.push(s);
    }
    if let Some(s) = steps_section(p, scope)? {
        sections.push(s);
    }
    sections.push(kernels_section(p, scope)?);
    if let Some(s) = nvtx_section(p, scope)? {
        sections.push(s);
    }
    Ok(Report {
        title: format!("Profile report: {}", file_name(p)),
        subtitle: "Nsight Systems export read exactly by aisp".into(),
        facts,
        headline: r.verdict.clone(),
        sections,
    })
}

/// Where each step goes: the step ledger of each device as a stacked bar per steady step, and the steady
/// window's largest columns.
fn ledger_section(l: &profile::ledger::Ledger) -> Section {
    let mut s = Section::new("Where each step goes");
    s.para(format!(
        "The step ledger: each step's period on the GPU timeline (from its first operation to the next step's) split \
         exactly into what the device did and what it waited for; {}.",
        l.precedence
    ));
    for d in l.devices.iter().filter(|d| d.steady.steps > 0) {
        s.chart(crate::ledger::steps_chart(d));
        let mut t = Table::new(&[
            ("column", false),
            ("ms in the steady window", true),
            ("% of it", true),
        ]);
        let mut cols: Vec<_> = d.steady.columns.iter().collect();
        cols.sort_by_key(|(c, v)| (std::cmp::Reverse(*v), c.index()));
        for (c, v) in cols.into_iter().take(8) {
            t.row(vec![
                c.as_str().to_string(),
                format!("{:.3}", v as f64 / 1e6),
                format!("{:.2}", d.share(v)),
            ]);
        }
        s.table(t);
        for n in &d.notes {
            s.note(n.clone());
        }
    }
    s
}

fn verdict_word(v: compare::Verdict) -> &'static str {
    v.as_str()
}

fn pct(x: f64) -> String {
    format!("{x:+.2} %")
}

/// A before/after report of a comparison (two exports or two sets of ranks): the verdict first — the step
/// change with its interval and each finding's predicted vs measured step — then comparability, then what
/// moved (findings, ledger columns, kernels, the steps themselves).
pub fn compare_report_of(c: &compare::Compare) -> Report {
    let mut facts = vec![
        ("Before".to_string(), c.before.path.clone()),
        ("After".to_string(), c.after.path.clone()),
        ("GPUs before".to_string(), c.before.gpus.join(", ")),
        ("GPUs after".to_string(), c.after.gpus.join(", ")),
        (
            "Steps".to_string(),
            format!(
                "{} ({} steady) / {} ({} steady)",
                c.before.unit, c.before.steady_steps, c.after.unit, c.after.steady_steps
            ),
        ),
    ];
    facts.push((
        "Nsight Systems".to_string(),
        format!(
            "{} / {}",
            c.before
                .export
                .product_version
                .as_deref()
                .unwrap_or("unknown"),
            c.after
                .export
                .product_version
                .as_deref()
                .unwrap_or("unknown")
        ),
    ));
    facts.extend(common_facts());
    // 1. The verdict.
    let mut overview = Section::new("Verdict");
    match &c.step {
        Some(st) => overview.para(format!(
            "{}: the step went from {} to {} ms, {} (95 % interval {} to {}), {}.",
            verdict_word(c.verdict).to_uppercase(),
            format_args!("{:.3}", st.before_median_ns / 1e6),
            format_args!("{:.3}", st.after_median_ns / 1e6),
            pct(st.change_pct),
            pct(st.ci_low_pct),
            pct(st.ci_high_pct),
            match c.basis {
                compare::Basis::PerStep => "per NVTX step on the GPU timeline",
                compare::Basis::PerUnit => "per unit of identical work (no step ranges)",
                compare::Basis::PerCall => "per call of identical launches (kernel speed only)",
                compare::Basis::None => "no basis",
            }
        )),
        None => overview.para(format!("{}.", verdict_word(c.verdict).to_uppercase())),
    }
    overview.para(c.verdict_reason.clone());
    if !c.predictions.is_empty() {
        let mut t = Table::new(&[
            ("finding", false),
            ("share before %", true),
            ("step before ms", true),
            ("predicted ms", true),
            ("measured ms", true),
            ("error %", true),
            ("then limited by (predicted → measured)", false),
            ("after", false),
        ]);
        for p in &c.predictions {
            t.row(vec![
                format!("{}{}", p.id, if p.applied { " (fixed)" } else { "" }),
                format!("{:.2}", p.share_pct),
                ms(p.step_ns),
                ms(p.predicted_step_ns),
                ms(p.measured_step_ns),
                format!("{:+.1}", p.error_pct),
                format!(
                    "{} → {}",
                    p.then_limited_by.as_deref().unwrap_or("?"),
                    p.measured_limited_by.as_deref().unwrap_or("?")
                ),
                p.after.clone(),
            ]);
        }
        overview.table(t);
        if let Some(st) = &c.step {
            let mut bars = vec![Bar {
                label: "before (measured)".into(),
                value: st.before_median_ns / 1e6,
                low: None,
                high: None,
                paint: chart::NEUTRAL,
                note: format!("{:.3} ms", st.before_median_ns / 1e6),
            }];
            for p in c.predictions.iter().filter(|p| p.applied) {
                bars.push(Bar {
                    label: format!("predicted: {}", p.id),
                    value: p.predicted_step_ns as f64 / 1e6,
                    low: None,
                    high: None,
                    paint: chart::SERIES[1],
                    note: format!("{:.3} ms", p.predicted_step_ns as f64 / 1e6),
                });
            }
            let lo = st.before_median_ns * (1.0 + st.ci_low_pct / 100.0) / 1e6;
            let hi = st.before_median_ns * (1.0 + st.ci_high_pct / 100.0) / 1e6;
            bars.push(Bar {
                label: "after (measured)".into(),
                value: st.after_median_ns / 1e6,
                low: Some(lo.min(hi)),
                high: Some(lo.max(hi)),
                paint: chart::SERIES[0],
                note: format!(
                    "{:.3} ms ({})",
                    st.after_median_ns / 1e6,
                    pct(st.change_pct)
                ),
            });
            overview.chart(build::bars(
                "Median steady step: before, predicted by the fixed findings, after (whisker: 95 % interval)",
                "ms",
                &bars,
                Scale::Linear,
                None,
            ));
        }
    }
    // 2. Comparability.
    let mut comp = Section::new("Comparability");
    let mut t = Table::new(&[
        ("fact", false),
        ("before", false),
        ("after", false),
        ("same", false),
        ("effect", false),
    ]);
    for f in &c.comparability.facts {
        t.row(vec![
            f.fact.replace('_', " "),
            f.before.clone(),
            f.after.clone(),
            match f.same {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "not recorded".into(),
            },
            if f.note.is_empty() {
                f.effect.clone()
            } else {
                format!("{}: {}", f.effect, f.note)
            },
        ]);
    }
    comp.table(t);
    let w = &c.comparability.work;
    comp.para(format!(
        "Work per step: {}. Identical launches: {:.1} % of calls.{}",
        w.reason,
        w.identical_launch_calls_pct,
        if w.explained_by.is_empty() {
            String::new()
        } else {
            format!(
                " The kernels that changed belong to {}.",
                w.explained_by.join(", ")
            )
        }
    ));
    if !w.changed.is_empty() {
        let mut t = Table::new(&[
            ("kernel", false),
            ("column", false),
            ("per step before", true),
            ("per step after", true),
        ]);
        for k in &w.changed {
            t.row(vec![
                k.name.clone(),
                k.column.clone(),
                format!("{}", k.before),
                format!("{}", k.after),
            ]);
        }
        comp.table(t);
    }
    // 3. What moved.
    let mut deltas = Section::new("What moved");
    if !c.findings.is_empty() {
        let mut t = Table::new(&[
            ("finding", false),
            ("device", true),
            ("before %", true),
            ("after %", true),
            ("status", false),
        ]);
        for f in &c.findings {
            t.row(vec![
                f.id.clone(),
                f.device.map(|d| d.to_string()).unwrap_or_default(),
                format!("{:.2}", f.before_share_pct),
                format!("{:.2}", f.after_share_pct),
                f.status.clone(),
            ]);
        }
        deltas.table(t);
    }
    let col_bars: Vec<Bar> = c
        .columns
        .iter()
        .filter(|x| x.change_ns != 0)
        .map(|x| Bar {
            label: x.column.clone(),
            value: x.change_ns as f64 / 1e6,
            low: None,
            high: None,
            paint: if x.change_ns > 0 {
                chart::BAD
            } else {
                chart::GOOD
            },
            note: format!(
                "{:.3} → {:.3} ms",
                x.before_ns as f64 / 1e6,
                x.after_ns as f64 / 1e6
            ),
        })
        .collect();
    if !col_bars.is_empty() {
        deltas.chart(build::bars(
            "Ledger columns per steady step, after − before (red: more time, green: less)",
            "ms per step",
            &col_bars,
            Scale::Linear,
            None,
        ));
    }
    if !c.kernels.is_empty() {
        let mut t = Table::new(&[
            ("kernel", false),
            ("column", false),
            ("calls per step", false),
            ("ms per step before", true),
            ("ms per step after", true),
            ("Δ ms", true),
        ]);
        for k in &c.kernels {
            t.row(vec![
                k.name.clone(),
                k.column.clone(),
                format!("{} → {}", k.before_count, k.after_count),
                ms(k.before_ns),
                ms(k.after_ns),
                ms(k.change_ns),
            ]);
        }
        deltas.table(t);
    }
    let steps: Vec<Series> = [
        ("before", &c.before, chart::NEUTRAL),
        ("after", &c.after, chart::SERIES[0]),
    ]
    .into_iter()
    .filter(|(_, s, _)| !s.step_periods_ns.is_empty())
    .map(|(label, s, paint)| Series {
        label: format!("{label} ({})", s.unit),
        points: s
            .step_periods_ns
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, v as f64 / 1e6))
            .collect(),
        paint,
    })
    .collect();
    if !steps.is_empty() {
        deltas.chart(build::lines(
            "Steady step periods on the GPU timeline, before and after",
            "steady step",
            "ms",
            &steps,
            None,
            true,
        ));
    }
    if !c.evidence.is_empty() {
        let mut ev = Table::new(&[
            ("basis", false),
            ("metric", false),
            ("before", true),
            ("after", true),
            ("Δ %", true),
            ("95 % interval", false),
            ("says", false),
        ]);
        for e in &c.evidence {
            ev.row(vec![
                serde_json::to_value(e.basis)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                e.metric.clone(),
                build::fmt_num(e.before),
                build::fmt_num(e.after),
                format!("{:+.2}", e.change_pct),
                format!("{:+.2} to {:+.2}", e.ci_low_pct, e.ci_high_pct),
                verdict_word(e.says).into(),
            ]);
        }
        deltas.table(ev);
    }
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    Report {
        title: format!(
            "Before/after report: {} → {}",
            name(&c.before.path),
            name(&c.after.path)
        ),
        subtitle: "Two runs compared by aisp on the step ledger".into(),
        facts,
        headline: c.summary.clone(),
        sections: vec![overview, comp, deltas],
    }
}
