//! Benchmark history reports: speedups with their 95% intervals, a roofline
//! with the roofs measured on each GPU and each GEMM variant's point, the
//! share of the measured roof every variant reached, Pareto fronts of time
//! and energy, and energy per run. Rows come from the store
//! (`benchmark_results`) through `aisp_hw::bench::record` with the filters of
//! `aisp_benchmark_history`; speedups are computed from the stored samples by
//! `aisp_hw::bench::stats` (or, for imported runs that kept no samples, read
//! from the saved answer); fronts come from `crate::analysis::boards`.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::analysis::boards::{self, Objective};
use crate::analysis::history;
use crate::chart::build::{self, Bar, Roof, RoofPoint, Scale, ScatterPoint};
use crate::chart::{self};
use aisp_hw::bench::lesson::Speedup;
use aisp_hw::bench::record::{self, HistoryFilter, StoredRow};
use aisp_hw::bench::stats;
use aisp_store::Store;

use super::{Report, ReportError, Result, Section, Table, common_facts};

/// The history filters (those of `aisp_benchmark_history`).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub target: Option<String>,
    pub variant: Option<String>,
    pub run_id: Option<String>,
    /// GPU UUID or part of its name.
    pub device: Option<String>,
    /// Most rows, newest first.
    pub limit: usize,
}

/// Rows of the history with what the reports add to them.
pub struct History {
    /// Newest first; hardware roofs (target `roof`) included.
    pub rows: Vec<StoredRow>,
    pub details: HashMap<i64, Value>,
    /// Speedup of each optimized row over its run's baseline, by row id.
    pub speedups: HashMap<i64, Speedup>,
    /// Where each speedup came from: `samples` or `saved answer`.
    pub speedup_source: HashMap<i64, &'static str>,
}

pub const NO_HISTORY: &str = "no benchmark results match in the store";
pub const NO_HISTORY_HINT: &str = "Run aisp_benchmark_run on a GPU host, or import saved runs with aisp_benchmark_import \
(e.g. {\"path\": \"examples/benchmark\"}); loosen the filters otherwise.";

fn saved_speedup(details: Option<&Value>) -> Option<Speedup> {
    details
        .and_then(|d| d.get("speedup"))
        .and_then(|s| serde_json::from_value(s.clone()).ok())
}

/// Read the rows and compute each optimized variant's speedup.
pub fn collect(store: &Store, f: &Filter) -> Result<History> {
    let rows = record::history(
        store,
        &HistoryFilter {
            target: f.target.clone(),
            variant: f.variant.clone(),
            run_id: f.run_id.clone(),
            device: f.device.clone(),
            limit: f.limit.max(1),
            with_samples: true,
        },
    )
    .map_err(|e| ReportError::Store(e.to_string()))?;
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let details =
        record::details_by_id(store, &ids).map_err(|e| ReportError::Store(e.to_string()))?;
    let mut speedups = HashMap::new();
    let mut speedup_source = HashMap::new();
    for cand in rows.iter().filter(|r| {
        r.role == "optimized" && r.target != "roof" && r.status.as_deref() == Some("ok")
    }) {
        // The baseline of the same run and target (it may be outside the filter).
        let base = rows
            .iter()
            .find(|b| b.run_id == cand.run_id && b.target == cand.target && b.role == "baseline")
            .cloned()
            .or_else(|| {
                record::history(
                    store,
                    &HistoryFilter {
                        target: Some(cand.target.clone()),
                        run_id: Some(cand.run_id.clone()),
                        limit: 100,
                        with_samples: true,
                        ..Default::default()
                    },
                )
                .ok()
                .and_then(|v| v.into_iter().find(|b| b.role == "baseline"))
            });
        let from_samples = base.as_ref().and_then(|b| {
            let (bs, cs) = (b.samples_ms.as_ref()?, cand.samples_ms.as_ref()?);
            let ci = stats::speedup_ci(bs, cs, 2000, 0.95)?;
            Some(Speedup {
                target: cand.target.clone(),
                variant: cand.variant.clone(),
                baseline: b.variant.clone(),
                speedup: ci.ratio,
                ci_low: ci.ci_low,
                ci_high: ci.ci_high,
                p_value: stats::mann_whitney(bs, cs).map(|m| m.p_value),
                wins: ci.ci_low > 1.0,
                note: None,
            })
        });
        if let Some(s) = from_samples {
            speedups.insert(cand.id, s);
            speedup_source.insert(cand.id, "samples");
        } else if let Some(s) = saved_speedup(details.get(&cand.id)) {
            speedups.insert(cand.id, s);
            speedup_source.insert(cand.id, "saved answer");
        }
    }
    Ok(History {
        rows,
        details,
        speedups,
        speedup_source,
    })
}

/// Bytes per element of a GEMM variant's inputs, read from its name.
fn input_bytes(variant: &str) -> Option<f64> {
    let v = variant.to_ascii_lowercase();
    if v.contains("fp8") {
        Some(1.0)
    } else if v.contains("bf16") || v.contains("fp16") {
        Some(2.0)
    } else if v.contains("fp32") || v.contains("tf32") {
        Some(4.0)
    } else {
        None
    }
}

/// Arithmetic intensity of an M×N×K GEMM over its compulsory DRAM traffic
/// (A and B read once, C written once): 2MNK / ((MK + KN)·in + MN·out).
pub fn gemm_intensity(variant: &str, lesson: &Value) -> Option<f64> {
    let g = |k: &str| lesson.get(k).and_then(Value::as_f64);
    let (m, n, k) = (g("m")?, g("n")?, g("k")?);
    let inb = input_bytes(variant)?;
    let outb = match lesson.get("output").and_then(Value::as_str) {
        Some("f32") => 4.0,
        Some("bf16") | Some("f16") => 2.0,
        _ => return None,
    };
    Some(2.0 * m * n * k / ((m * k + k * n) * inb + m * n * outb))
}

fn metric_unit(metric: Option<&str>) -> &str {
    match metric {
        Some("gb_per_s") => "GB/s",
        Some("tflop_per_s") => "TFLOP/s",
        Some("us_per_step") => "µs/step",
        Some(m) => m,
        None => "",
    }
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}")).unwrap_or_default()
}

fn speedup_section(h: &History, run: &str) -> Option<Section> {
    let mut rows: Vec<(&StoredRow, &Speedup)> = h
        .rows
        .iter()
        .filter(|r| r.run_id == run)
        .filter_map(|r| h.speedups.get(&r.id).map(|s| (r, s)))
        .collect();
    if rows.is_empty() {
        return None;
    }
    rows.sort_by(|a, b| (&a.0.target, &a.0.variant).cmp(&(&b.0.target, &b.0.variant)));
    let bars: Vec<Bar> = rows
        .iter()
        .map(|(r, s)| Bar {
            label: format!("{}/{}", r.target, r.variant),
            value: s.speedup,
            low: Some(s.ci_low),
            high: Some(s.ci_high),
            paint: if s.ci_low > 1.0 {
                chart::GOOD
            } else if s.ci_high < 1.0 {
                chart::BAD
            } else {
                chart::NEUTRAL
            },
            note: format!("{:.2}× [{:.2}, {:.2}]", s.speedup, s.ci_low, s.ci_high),
        })
        .collect();
    let device = rows[0].0.device_name.clone().unwrap_or_default();
    let mut s = Section::new(format!("Speedups, run {run}"));
    s.para(format!(
        "{} optimized variants against their lesson's baseline on {device}; {} win (the whole 95% interval above 1).",
        rows.len(),
        rows.iter().filter(|(_, s)| s.ci_low > 1.0).count()
    ));
    s.chart(build::bars(
        "Speedup over the baseline with 95% bootstrap interval (log scale)",
        "speedup (×), median(baseline) / median(variant)",
        &bars,
        Scale::Log,
        Some((1.0, "1× = baseline")),
    ));
    let sources: Vec<&str> = rows
        .iter()
        .filter_map(|(r, _)| h.speedup_source.get(&r.id).copied())
        .collect();
    if sources.contains(&"saved answer") {
        s.note("Intervals of imported runs are those the run computed from its samples (the saved answer keeps the interval, not the samples).");
    }
    Some(s)
}

fn roofline_section(store: &Store, h: &History) -> Result<Option<Section>> {
    let mut by_device: BTreeMap<String, Vec<&StoredRow>> = BTreeMap::new();
    for r in h.rows.iter().filter(|r| r.target != "roof") {
        if let Some(u) = &r.device_uuid {
            by_device.entry(u.clone()).or_default().push(r);
        }
    }
    let mut s = Section::new("Roofline and share of the measured roofs");
    let mut any = false;
    for (uuid, rows) in by_device {
        let roofs =
            record::latest_roofs(store, &uuid).map_err(|e| ReportError::Store(e.to_string()))?;
        let memory = roofs.iter().find(|r| r.0 == "memory").map(|r| r.1);
        let compute: Vec<Roof> = ["fp32", "tf32", "bf16", "fp16", "fp8"]
            .iter()
            .filter_map(|k| {
                roofs.iter().find(|r| r.0 == *k).map(|r| Roof {
                    label: k.to_string(),
                    tflop_per_s: r.1,
                })
            })
            .collect();
        let name = rows[0].device_name.clone().unwrap_or_else(|| uuid.clone());
        // The newest measurement of each variant.
        let mut latest: BTreeMap<(String, String), &StoredRow> = BTreeMap::new();
        for r in &rows {
            latest
                .entry((r.target.clone(), r.variant.clone()))
                .or_insert(r);
        }
        let points: Vec<RoofPoint> = latest
            .values()
            .filter(|r| {
                r.metric.as_deref() == Some("tflop_per_s") && r.status.as_deref() == Some("ok")
            })
            .filter_map(|r| {
                let lesson = h.details.get(&r.id)?.get("details")?;
                Some(RoofPoint {
                    label: r.variant.clone(),
                    intensity: gemm_intensity(&r.variant, lesson)?,
                    tflop_per_s: r.value?,
                })
            })
            .collect();
        if let Some(bw) = memory
            && (!compute.is_empty() || !points.is_empty())
        {
            any = true;
            s.chart(build::roofline(
                &format!("Roofline of {name}: measured roofs, GEMM variants"),
                bw,
                &compute,
                &points,
            ));
            s.note(format!(
                "Memory roof {bw:.1} GB/s (cuMemcpyDtoD); compute roofs measured by aisp_hw_*: {}. A GEMM's intensity is \
2MNK over its compulsory traffic (A and B read once, C written once).",
                compute
                    .iter()
                    .map(|r| format!("{} {:.1} TFLOP/s", r.label, r.tflop_per_s))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let bars: Vec<Bar> = latest
            .values()
            .filter_map(|r| {
                let p = r.pct_of_roof?;
                Some(Bar {
                    label: format!("{}/{}", r.target, r.variant),
                    value: p,
                    low: None,
                    high: None,
                    paint: if r.role == "baseline" {
                        chart::NEUTRAL
                    } else {
                        chart::SERIES[0]
                    },
                    note: format!("{p:.1}% ({} roof)", metric_unit(r.metric.as_deref())),
                })
            })
            .collect();
        if !bars.is_empty() {
            any = true;
            s.chart(build::bars(
                &format!("Share of the roof measured on {name} (grey: baselines)"),
                "% of the measured roof",
                &bars,
                Scale::Linear,
                Some((100.0, "roof")),
            ));
        }
    }
    Ok(any.then_some(s))
}

fn pareto_and_energy(store: &Store, f: &Filter) -> Result<Vec<Section>> {
    let rows = history::latest(
        history::load(
            store,
            &history::Filter {
                target: f.target.clone(),
                device: f.device.clone(),
                run_id: f.run_id.clone(),
                include_unverified: false,
            },
        )
        .map_err(|e| ReportError::Store(e.to_string()))?,
    );
    let rows: Vec<history::Row> = rows.into_iter().filter(|r| r.target != "roof").collect();
    let groups = boards::pareto(&rows, &[Objective::Time, Objective::Energy]);
    let mut pareto = Section::new("Pareto fronts: time and energy per run");
    let mut energy_bars = Vec::new();
    let mut shown = 0;
    let mut others = Table::new(&[
        ("target", false),
        ("device", false),
        ("on the front", false),
        ("dominated", false),
    ]);
    for g in &groups {
        for p in g.front.iter().chain(g.dominated.iter()) {
            if let Some(e) = p.energy_per_run_j {
                energy_bars.push(Bar {
                    label: format!("{}/{}", g.target, p.variant),
                    value: e,
                    low: None,
                    high: None,
                    paint: chart::SERIES[1],
                    note: format!("{} J", build::fmt_num(e)),
                });
            }
        }
        let pts: Vec<ScatterPoint> = g
            .front
            .iter()
            .map(|p| (p, true))
            .chain(g.dominated.iter().map(|p| (p, false)))
            .filter_map(|(p, on)| {
                Some(ScatterPoint {
                    label: p.variant.clone(),
                    x: p.median_ms?,
                    y: p.energy_per_run_j?,
                    on_front: on,
                })
            })
            .collect();
        if pts.len() >= 3 && shown < 4 {
            shown += 1;
            pareto.chart(build::pareto(
                &format!(
                    "{} on {}: median time vs energy per run",
                    g.target, g.device
                ),
                "median ms per run",
                "J per run",
                &pts,
            ));
        } else {
            others.row(vec![
                g.target.clone(),
                g.device.clone(),
                g.front
                    .iter()
                    .map(|p| p.variant.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
                g.dominated
                    .iter()
                    .map(|p| {
                        format!(
                            "{} (by {})",
                            p.variant,
                            p.dominated_by.as_deref().unwrap_or("?")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ]);
        }
    }
    let mut out = Vec::new();
    if !groups.is_empty() {
        pareto.note("A variant is on the front when no other variant of its target, size and GPU is at least as fast and as frugal and better on one. Energy per run = mean board power × median time (NVML telemetry).");
        if !others.rows.is_empty() {
            pareto.table(others);
        }
        out.push(pareto);
    }
    if !energy_bars.is_empty() {
        let mut e = Section::new("Energy per run");
        e.chart(build::bars(
            "Energy per run (mean board power × median time)",
            "J per run (log scale)",
            &energy_bars,
            Scale::Log,
            None,
        ));
        out.push(e);
    }
    Ok(out)
}

fn results_table(h: &History) -> Section {
    let mut s = Section::new("Results");
    let mut t = Table::new(&[
        ("target", false),
        ("variant", false),
        ("role", false),
        ("median ms", true),
        ("value", true),
        ("unit", false),
        ("% roof", true),
        ("CV %", true),
        ("reps", true),
        ("energy J", true),
        ("speedup", true),
    ]);
    for r in h.rows.iter().filter(|r| r.target != "roof") {
        t.row(vec![
            r.target.clone(),
            r.variant.clone(),
            r.role.clone(),
            num(r.median_ms, 4),
            r.value.map(build::fmt_num).unwrap_or_default(),
            metric_unit(r.metric.as_deref()).to_string(),
            num(r.pct_of_roof, 1),
            num(r.cv_pct, 2),
            r.repetitions.map(|v| v.to_string()).unwrap_or_default(),
            num(r.energy_j, 1),
            h.speedups
                .get(&r.id)
                .map(|s| format!("{:.2}×", s.speedup))
                .unwrap_or_default(),
        ]);
    }
    s.table(t);
    s.note("Every variant was checked against a CPU reference before it was timed; value is the metric at the median time (GB = 10^9 bytes, read + written).");
    s
}

/// A report of the benchmark history matching `f`.
pub fn bench_report(store: &Store, f: &Filter) -> Result<Report> {
    let h = collect(store, f)?;
    let measured: Vec<&StoredRow> = h.rows.iter().filter(|r| r.target != "roof").collect();
    if measured.is_empty() {
        return Err(ReportError::Empty(NO_HISTORY.into()));
    }
    let mut runs: Vec<(String, String)> = Vec::new();
    for r in &measured {
        if !runs.iter().any(|(id, _)| *id == r.run_id) {
            runs.push((r.run_id.clone(), r.created_at.clone()));
        }
    }
    let mut devices: Vec<String> = measured
        .iter()
        .filter_map(|r| r.device_name.clone())
        .collect();
    devices.sort();
    devices.dedup();
    let mut versions: Vec<String> = measured
        .iter()
        .map(|r| {
            format!(
                "driver {}, NVRTC {}",
                r.driver_version.as_deref().unwrap_or("?"),
                r.nvrtc_version.as_deref().unwrap_or("?")
            )
        })
        .collect();
    versions.sort();
    versions.dedup();
    let mut hosts: Vec<String> = measured.iter().filter_map(|r| r.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    let mut facts = vec![
        ("GPU".to_string(), devices.join(", ")),
        ("Versions".to_string(), versions.join("; ")),
        (
            "Measured on".to_string(),
            if hosts.is_empty() {
                "host not recorded (imported run)".into()
            } else {
                hosts.join(", ")
            },
        ),
        (
            "Runs".to_string(),
            runs.iter()
                .map(|(id, at)| format!("{id} ({at})"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "Rows".to_string(),
            format!("{} measured variants", measured.len()),
        ),
    ];
    facts.extend(common_facts());
    let wins = h.speedups.values().filter(|s| s.ci_low > 1.0).count();
    let best = h
        .speedups
        .values()
        .max_by(|a, b| a.speedup.total_cmp(&b.speedup));
    let headline = match best {
        Some(b) => format!(
            "{wins} of {} optimized variants beat their baseline with the whole 95% interval above 1; the largest speedup is {}/{} at {:.2}× [{:.2}, {:.2}].",
            h.speedups.len(),
            b.target,
            b.variant,
            b.speedup,
            b.ci_low,
            b.ci_high
        ),
        None => format!(
            "{} measured variants; no speedups to show (no baselines with samples in the selection).",
            measured.len()
        ),
    };
    let mut sections = Vec::new();
    for (run, _) in runs.iter().take(4) {
        if let Some(s) = speedup_section(&h, run) {
            sections.push(s);
        }
    }
    if let Some(s) = roofline_section(store, &h)? {
        sections.push(s);
    }
    sections.extend(pareto_and_energy(store, f)?);
    sections.push(results_table(&h));
    Ok(Report {
        title: "Benchmark report".into(),
        subtitle: format!(
            "CUDA microbenchmark history from the aisp store{}",
            f.target
                .as_deref()
                .map(|t| format!(", target {t}"))
                .unwrap_or_default()
        ),
        facts,
        headline,
        sections,
    })
}
