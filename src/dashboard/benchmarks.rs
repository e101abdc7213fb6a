//! The benchmarks page's body, from the stored history (this machine's runs
//! or runs imported with `aisp_benchmark_import`): leaderboards
//! (`aisp_analyze_leaderboards`), Pareto fronts as scatter plots
//! (`aisp_analyze_pareto`), a roofline per GPU with the measured roofs and
//! each GEMM variant's point (`aisp_benchmark_history`: roof rows and each
//! row's intensity), power and energy per run (`aisp_analyze_power`) and the
//! history itself. Charts are scenes of the one chart module.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::call;
use super::html::{arr, esc, f, fmt_ns, num, s};
use crate::app::AppState;
use crate::error::OpError;
use aisp_report::chart::{self, build, svg};

/// Pareto charts drawn per pair of objectives; further groups are listed in a table.
const PARETO_CHARTS: usize = 3;
/// History rows shown (newest first).
const HISTORY_ROWS: usize = 60;

/// The filters every benchmark analysis takes (`target`, `device`, `run_id`).
fn filters(args: &Value) -> Map<String, Value> {
    let mut m = Map::new();
    for k in ["target", "device", "run_id"] {
        if let Some(v) = args
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
        {
            m.insert(k.into(), json!(v));
        }
    }
    m
}

fn with(base: &Map<String, Value>, extra: Value) -> Value {
    let mut m = base.clone();
    if let Value::Object(e) = extra {
        m.extend(e);
    }
    Value::Object(m)
}

pub async fn render(app: &Arc<AppState>, args: Value) -> Result<String, OpError> {
    let filt = filters(&args);
    let (history, boards, pareto_mem, pareto_energy, power) = futures::join!(
        call(
            app,
            "aisp_benchmark_history",
            with(&filt, json!({"limit": 1000}))
        ),
        call(
            app,
            "aisp_analyze_leaderboards",
            Value::Object(filt.clone())
        ),
        call(
            app,
            "aisp_analyze_pareto",
            with(&filt, json!({"objectives": ["time", "memory"]}))
        ),
        call(
            app,
            "aisp_analyze_pareto",
            with(&filt, json!({"objectives": ["time", "energy"]}))
        ),
        call(app, "aisp_analyze_power", Value::Object(filt.clone())),
    );
    let history = history?;
    let rows = arr(&history["rows"]);
    let mut h = String::new();
    if rows.is_empty() {
        h.push_str(r#"<p class="muted" id="no-history">No benchmark results in this machine's store yet. Run <code>aisp_benchmark_run</code> on a GPU, or import saved runs (e.g. <code>examples/benchmark</code>) with the form above.</p>"#);
        return Ok(h);
    }
    let runs = arr(&history["runs"]);
    let _ = write!(
        h,
        r#"<p class="muted" id="history-summary">{} stored results from {} run(s): {}.</p>"#,
        rows.len(),
        runs.len(),
        esc(&runs.iter().map(s).collect::<Vec<_>>().join(", "))
    );
    section(&mut h, "roofline", "Roofline", Ok(roofline(rows)));
    section(
        &mut h,
        "leaderboards",
        "Leaderboards",
        boards.map(|b| leaderboards(&b)),
    );
    section(
        &mut h,
        "pareto",
        "Pareto fronts",
        pareto_mem.and_then(|m| pareto_energy.map(|e| pareto(&[m, e]))),
    );
    section(
        &mut h,
        "power",
        "Power and energy per run",
        power.map(|p| power_view(&p)),
    );
    section(&mut h, "history", "History", Ok(history_table(rows)));
    Ok(h)
}

fn section(h: &mut String, id: &str, title: &str, body: Result<String, OpError>) {
    let _ = write!(h, r#"<section class="panel" id="{id}"><h2>{title}</h2>"#);
    match body {
        Ok(b) => h.push_str(&b),
        Err(e) => h.push_str(&super::html::error_box(&e)),
    }
    h.push_str("</section>");
}

/// A measured value: one decimal from 1 up, three significant digits below
/// (a launch costs 0.00800 µs/step, not 0.0), or an em dash.
fn value(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.abs() >= 1.0 || x == 0.0 => format!("{x:.1}"),
        Some(x) => {
            let digits = (2.0 - x.abs().log10().floor()).clamp(0.0, 12.0) as usize;
            format!("{x:.digits$}")
        }
        None => "—".into(),
    }
}

/// A time in ms as people read it (µs and ns for the short ones), or an em dash.
fn ms(v: &Value) -> String {
    v.as_f64()
        .map(|m| fmt_ns(m * 1e6))
        .unwrap_or_else(|| "—".into())
}

fn metric_unit(m: &str) -> &str {
    match m {
        "gb_per_s" => "GB/s",
        "tflop_per_s" => "TFLOP/s",
        "us_per_step" => "µs/step",
        other => other,
    }
}

fn leaderboards(b: &Value) -> String {
    let mut h = String::new();
    let boards = arr(&b["boards"]);
    if boards.is_empty() {
        return r#"<p class="muted">No target has two or more measured variants.</p>"#.into();
    }
    for board in boards {
        let _ = write!(
            h,
            r#"<h4 data-board="{t}"><code>{t}</code> · {size} · {dev} <span class="muted small">(baseline {base})</span></h4>"#,
            t = esc(s(&board["target"])),
            size = esc(s(&board["size"])),
            dev = esc(s(&board["device"])),
            base = esc(s(&board["baseline"])),
        );
        h.push_str(r#"<table class="grid board"><thead><tr><th>rank</th><th>variant</th><th>role</th><th>median</th><th>CV</th><th>value</th><th>% of roof</th><th>speedup vs baseline</th><th>run</th></tr></thead><tbody>"#);
        for e in arr(&board["entries"]) {
            let _ = write!(
                h,
                r#"<tr data-target="{t}" data-variant="{v}" data-rank="{r}"><td class="num">{r}</td><td><code>{v}</code></td><td>{role}</td><td class="num">{med}</td><td class="num">{cv} %</td><td class="num" data-col="value">{val} {unit}</td><td class="num">{roof}</td><td class="num" data-col="speedup">{sp}×</td><td class="small">{run}</td></tr>"#,
                t = esc(s(&board["target"])),
                v = esc(s(&e["variant"])),
                r = e["rank"].as_i64().unwrap_or(0),
                role = esc(s(&e["role"])),
                med = ms(&e["median_ms"]),
                cv = num(&e["cv_pct"], 2),
                val = value(&e["value"]),
                unit = esc(metric_unit(s(&e["metric"]))),
                roof = e["pct_of_roof"]
                    .as_f64()
                    .map(|p| format!("{p:.1} %"))
                    .unwrap_or_else(|| "—".into()),
                sp = num(&e["speedup_vs_baseline"], 2),
                run = esc(s(&e["run_id"])),
            );
        }
        h.push_str("</tbody></table>");
    }
    h
}

/// One roofline per GPU: the newest roof of each kind from the history's
/// `roof` rows, and the newest measurement of each variant that has an
/// intensity (GEMMs).
fn roofline(rows: &[Value]) -> String {
    #[derive(Default)]
    struct Device<'a> {
        name: String,
        memory: Option<f64>,
        roofs: Vec<build::Roof>,
        points: BTreeMap<(String, String), &'a Value>,
    }
    let mut devices: BTreeMap<String, Device> = BTreeMap::new();
    for r in rows {
        let uuid = s(&r["device_uuid"]);
        if uuid.is_empty() || s(&r["status"]) != "ok" {
            continue;
        }
        let d = devices.entry(uuid.to_string()).or_default();
        if d.name.is_empty() {
            d.name = s(&r["device_name"]).to_string();
        }
        let variant = s(&r["variant"]).to_string();
        if s(&r["target"]) == "roof" {
            // Rows come newest first: the first of each kind is the latest.
            match (variant.as_str(), s(&r["metric"])) {
                ("memory", "gb_per_s") if d.memory.is_none() => d.memory = r["value"].as_f64(),
                (_, "tflop_per_s") if !d.roofs.iter().any(|x| x.label == variant) => {
                    if let Some(v) = r["value"].as_f64() {
                        d.roofs.push(build::Roof {
                            label: variant,
                            tflop_per_s: v,
                        });
                    }
                }
                _ => {}
            }
        } else if r["intensity_flop_per_byte"].is_f64() && r["value"].is_f64() {
            d.points
                .entry((s(&r["target"]).to_string(), variant))
                .or_insert(r);
        }
    }
    let mut h = String::new();
    let mut any = false;
    for (uuid, mut d) in devices {
        let Some(bw) = d.memory else { continue };
        if d.roofs.is_empty() && d.points.is_empty() {
            continue;
        }
        any = true;
        d.roofs
            .sort_by(|a, b| a.tflop_per_s.total_cmp(&b.tflop_per_s));
        let points: Vec<build::RoofPoint> = d
            .points
            .values()
            .map(|r| build::RoofPoint {
                label: s(&r["variant"]).to_string(),
                intensity: f(&r["intensity_flop_per_byte"]),
                tflop_per_s: f(&r["value"]),
            })
            .collect();
        let _ = write!(
            h,
            r#"<div class="roofline" data-device="{u}" data-memory-gb-per-s="{bw:.1}">"#,
            u = esc(&uuid)
        );
        h.push_str(&svg::render(&build::roofline(
            &format!("Roofline of {}: measured roofs, GEMM variants", d.name),
            bw,
            &d.roofs,
            &points,
        )));
        let _ = write!(
            h,
            r#"<p class="muted small">Memory roof {bw:.1} GB/s; compute roofs {}. Points: each GEMM variant's newest measurement at its intensity (2MNK over A and B read once and C written once).</p></div>"#,
            esc(&d
                .roofs
                .iter()
                .map(|r| format!("{} {:.1} TFLOP/s", r.label, r.tflop_per_s))
                .collect::<Vec<_>>()
                .join(", "))
        );
    }
    if !any {
        h.push_str(r#"<p class="muted">No measured roofs in the history: <code>aisp_hw_roofline</code> measures them on a GPU.</p>"#);
    }
    h
}

fn pareto(answers: &[Value]) -> String {
    let mut h = String::new();
    for a in answers {
        let objectives: Vec<&str> = arr(&a["objectives"]).iter().map(s).collect();
        let (x_obj, y_obj) = match objectives.as_slice() {
            [x, y] => (*x, *y),
            _ => continue,
        };
        let value = |p: &Value, o: &str| -> Option<f64> {
            match o {
                "time" => p["median_ms"].as_f64(),
                "memory" => p["peak_memory_bytes"].as_f64().map(|b| b / 1e6),
                "energy" => p["energy_per_run_j"].as_f64(),
                _ => None,
            }
        };
        let unit = |o: &str| match o {
            "time" => "median ms per run",
            "memory" => "peak device memory, MB",
            "energy" => "J per run",
            _ => "",
        };
        let mut charts = 0;
        let mut rest = String::new();
        for g in arr(&a["groups"]) {
            let pts: Vec<build::ScatterPoint> = arr(&g["front"])
                .iter()
                .map(|p| (p, true))
                .chain(arr(&g["dominated"]).iter().map(|p| (p, false)))
                .filter_map(|(p, on)| {
                    Some(build::ScatterPoint {
                        label: s(&p["variant"]).to_string(),
                        x: value(p, x_obj)?,
                        y: value(p, y_obj)?,
                        on_front: on,
                    })
                })
                .collect();
            if pts.len() >= 3 && charts < PARETO_CHARTS {
                charts += 1;
                h.push_str(&svg::render(&build::pareto(
                    &format!(
                        "{} on {}: {x_obj} vs {y_obj}",
                        s(&g["target"]),
                        s(&g["device"])
                    ),
                    unit(x_obj),
                    unit(y_obj),
                    &pts,
                )));
            } else {
                let names = |k: &str| {
                    arr(&g[k])
                        .iter()
                        .map(|p| match p["dominated_by"].as_str() {
                            Some(by) => format!("{} (by {by})", s(&p["variant"])),
                            None => s(&p["variant"]).to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = write!(
                    rest,
                    "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(s(&g["target"])),
                    esc(s(&g["device"])),
                    esc(&names("front")),
                    esc(&names("dominated")),
                );
            }
        }
        if !rest.is_empty() {
            let _ = write!(
                h,
                r#"<details><summary>Other fronts ({x_obj} vs {y_obj})</summary><table class="grid"><thead><tr><th>target</th><th>GPU</th><th>on the front</th><th>dominated</th></tr></thead><tbody>{rest}</tbody></table></details>"#
            );
        }
    }
    if h.is_empty() {
        h.push_str(r#"<p class="muted">No target with variants to compare.</p>"#);
    }
    h
}

fn power_view(p: &Value) -> String {
    let mut h = String::new();
    let entries = arr(&p["entries"]);
    if entries.is_empty() {
        return r#"<p class="muted">No result carries board energy (NVML) in this history.</p>"#
            .into();
    }
    let bars: Vec<build::Bar> = entries
        .iter()
        .filter(|e| e["energy_per_run_mj"].as_f64().is_some_and(|v| v > 0.0))
        .map(|e| {
            let short = s(&e["label"]).split(" [").next().unwrap_or("").to_string();
            build::Bar {
                label: short,
                value: f(&e["energy_per_run_mj"]),
                low: None,
                high: None,
                paint: if s(&e["role"]) == "baseline" {
                    chart::NEUTRAL
                } else {
                    chart::SERIES[1]
                },
                note: format!(
                    "{} mJ · {:.0} W",
                    build::fmt_num(f(&e["energy_per_run_mj"])),
                    f(&e["avg_power_w"])
                ),
            }
        })
        .collect();
    h.push_str(&svg::render(&build::bars(
        "Energy per run (mean board power × median time; grey: baselines)",
        "mJ per run (log scale)",
        &bars,
        build::Scale::Log,
        None,
    )));
    h.push_str(r#"<table class="grid"><thead><tr><th>variant</th><th>role</th><th>mean power</th><th>median</th><th>energy per run</th><th>efficiency</th><th>energy vs baseline</th></tr></thead><tbody>"#);
    for e in entries {
        let _ = write!(
            h,
            r#"<tr><td>{}</td><td>{}</td><td class="num">{} W</td><td class="num">{}</td><td class="num">{} mJ</td><td class="num">{} {}</td><td class="num">{}×</td></tr>"#,
            esc(s(&e["label"])),
            esc(s(&e["role"])),
            num(&e["avg_power_w"], 1),
            ms(&e["median_ms"]),
            num(&e["energy_per_run_mj"], 3),
            num(&e["efficiency"], 4),
            esc(&s(&e["efficiency_unit"]).replace('_', " ")),
            num(&e["energy_vs_baseline"], 3),
        );
    }
    h.push_str("</tbody></table>");
    let _ = write!(
        h,
        r#"<p class="muted small">{} · {} results without power telemetry.</p>"#,
        esc(s(&p["method"])),
        p["without_power"].as_i64().unwrap_or(0)
    );
    h
}

fn history_table(rows: &[Value]) -> String {
    let mut h = String::new();
    h.push_str(r#"<table class="grid" id="history-rows"><thead><tr><th>when</th><th>run</th><th>GPU</th><th>target</th><th>variant</th><th>status</th><th>median</th><th>value</th><th>% of roof</th><th>energy</th></tr></thead><tbody>"#);
    for r in rows.iter().take(HISTORY_ROWS) {
        let _ = write!(
            h,
            r#"<tr><td class="small">{}</td><td class="small">{}</td><td class="small">{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td class="num">{}</td><td class="num">{} {}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            esc(s(&r["created_at"])),
            esc(s(&r["run_id"])),
            esc(s(&r["device_name"])),
            esc(s(&r["target"])),
            esc(s(&r["variant"])),
            esc(s(&r["status"])),
            ms(&r["median_ms"]),
            value(&r["value"]),
            esc(metric_unit(s(&r["metric"]))),
            r["pct_of_roof"]
                .as_f64()
                .map(|p| format!("{p:.1} %"))
                .unwrap_or_else(|| "—".into()),
            r["energy_j"]
                .as_f64()
                .map(|e| format!("{e:.1} J"))
                .unwrap_or_else(|| "—".into()),
        );
    }
    h.push_str("</tbody></table>");
    if rows.len() > HISTORY_ROWS {
        let _ = write!(
            h,
            r#"<p class="muted small">{} older results not shown: filter by target or run, or use <a href="/tools/aisp_benchmark_history">aisp_benchmark_history</a>.</p>"#,
            rows.len() - HISTORY_ROWS
        );
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_three_significant_digits_below_one() {
        assert_eq!(value(&json!(1345.5410944)), "1345.5");
        assert_eq!(value(&json!(0.008)), "0.00800");
        assert_eq!(value(&json!(0.5123)), "0.512");
        assert_eq!(value(&json!(0.0)), "0.0");
        assert_eq!(ms(&json!(0.000008)), "8 ns");
        assert_eq!(ms(&json!(25.4213)), "25.42 ms");
    }
}
