//! The profile page's sections, rendered on the server as HTML fragments from
//! the answers of the profile operations (called through the dispatcher,
//! like any front end). The page loads them in parallel and the timeline
//! (the one JavaScript component) beside them.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::call;
pub use super::html::error_box;
use super::html::{arr, esc, f, fmt_ns, fmt_ts, i, int_sep, s};
use crate::app::AppState;
use crate::error::OpError;
use aisp_report::chart::{self, build, svg};

fn with(scope: &Map<String, Value>, extra: Value) -> Value {
    let mut m = scope.clone();
    if let Value::Object(e) = extra {
        m.extend(e);
    }
    Value::Object(m)
}

/// Render one section of the profile page.
pub async fn section(
    app: &Arc<AppState>,
    name: &str,
    scope: Map<String, Value>,
) -> Result<String, OpError> {
    match name {
        "overview" => {
            let (info, util) = futures::join!(
                call(app, "aisp_profile_info", json!({"path": scope["path"]})),
                call(
                    app,
                    "aisp_profile_utilization",
                    with(&scope, json!({"chunks": 120}))
                ),
            );
            Ok(overview(&info?, &util?))
        }
        // `detail`: every finding in full, with the structured data the timeline links read.
        "findings" => Ok(findings(
            &call(
                app,
                "aisp_profile_rules",
                with(&scope, json!({"detail": true})),
            )
            .await?,
        )),
        "ledger" => Ok(ledger(
            &call(
                app,
                "aisp_profile_ledger",
                with(&scope, json!({"steps": 40})),
            )
            .await?,
        )),
        "utilization" => Ok(utilization(
            &call(
                app,
                "aisp_profile_utilization",
                with(&scope, json!({"chunks": 120})),
            )
            .await?,
        )),
        "nvtx" => Ok(nvtx(
            &call(
                app,
                "aisp_profile_nvtx",
                with(
                    &scope,
                    json!({"limit": 15, "max_depth": 4, "max_children": 8}),
                ),
            )
            .await?,
        )),
        "gaps" => Ok(gaps(
            &call(app, "aisp_profile_gaps", with(&scope, json!({"limit": 15}))).await?,
        )),
        "iterations" => Ok(iterations(
            &call(
                app,
                "aisp_profile_iterations",
                with(&scope, json!({"limit": 10000})),
            )
            .await?,
        )),
        // A set of exports (folder or glob): the cross-rank view. Empty for one export, so the page
        // keeps its single-export sections.
        "ranks" => {
            let path = scope.get("path").and_then(Value::as_str).unwrap_or("");
            if !aisp_profile::ranks::is_set(path) {
                return Ok(String::new());
            }
            Ok(rank_set(
                &call(
                    app,
                    "aisp_profile_ranks",
                    json!({"path": path, "detail": true}),
                )
                .await?,
            ))
        }
        other => Err(OpError::not_found(
            format!("the profile page has no section `{other}`"),
            "Sections: overview, findings, ledger, utilization, nvtx, gaps, iterations, ranks.",
        )),
    }
}

fn overview(info: &Value, util: &Value) -> String {
    let mut h = String::new();
    let gpus = arr(&info["gpus"]);
    let mut names: Vec<(String, usize)> = Vec::new();
    for g in gpus {
        let n = s(&g["name"]).to_string();
        match names.iter_mut().find(|(x, _)| *x == n) {
            Some(e) => e.1 += 1,
            None => names.push((n, 1)),
        }
    }
    let gpu_text = if names.is_empty() {
        "none recorded".to_string()
    } else {
        names
            .iter()
            .map(|(n, c)| format!("{c} × {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let d = &info["duration"];
    let kernels: i64 = arr(&info["processes"])
        .iter()
        .map(|p| i(&p["kernels"]))
        .sum();
    h.push_str(r#"<div class="cards">"#);
    let card = |h: &mut String, label: &str, value: &str, attr: &str| {
        let _ = write!(
            h,
            r#"<div class="card"{attr}><div class="label">{}</div><div class="value">{}</div></div>"#,
            esc(label),
            esc(value)
        );
    };
    card(&mut h, "GPUs", &gpu_text, "");
    card(&mut h, "Kernels", &int_sep(kernels), "");
    card(
        &mut h,
        "GPU span",
        &fmt_ns(f(&d["kernel_span_ns"])),
        r#" title="first kernel start → last kernel end""#,
    );
    card(
        &mut h,
        "Activity span",
        &fmt_ns(f(&d["activity_span_ns"])),
        "",
    );
    for dev in arr(&util["devices"]) {
        let device = i(&dev["device"]);
        let windows = arr(&dev["windows"]);
        let pick = |kind: &str| windows.iter().find(|w| s(&w["window"]["kind"]) == kind);
        match pick("steady") {
            Some(w) => card(
                &mut h,
                &format!("GPU {device} steady busy"),
                &format!("{:.2} %", f(&w["busy_pct"])),
                &format!(
                    r#" data-metric="steady-busy" data-device="{device}" title="kernel-busy share of the steady window, {} long""#,
                    esc(&fmt_ns(f(&w["window"]["length_ns"])))
                ),
            ),
            None => {
                if let Some(w) = pick("span") {
                    card(
                        &mut h,
                        &format!("GPU {device} busy (span; no steady window)"),
                        &format!("{:.2} %", f(&w["busy_pct"])),
                        r#" data-metric="span-busy""#,
                    );
                }
            }
        }
    }
    h.push_str("</div>");
    let cap = &info["capture"];
    let _ = write!(
        h,
        r#"<p class="muted">{product} {version} · schema {schema}{cmd}</p>"#,
        product = esc(s(&info["version"]["product"])),
        version = esc(s(&info["version"]["product_version"])),
        schema = esc(s(&info["version"]["schema_version"])),
        cmd = if s(&cap["command"]).is_empty() {
            String::new()
        } else {
            format!(" · <code>{}</code>", esc(s(&cap["command"])))
        },
    );
    h
}

/// The place a finding points at: its first timed item (a gap, a call), else its window.
fn finding_place(finding: &Value) -> Option<(i64, i64)> {
    fn search(v: &Value, depth: u32) -> Option<(i64, i64)> {
        if depth > 4 {
            return None;
        }
        match v {
            Value::Object(m) => {
                if let Some(start) = m.get("start_ns").and_then(Value::as_i64) {
                    let end = m.get("end_ns").and_then(Value::as_i64).or_else(|| {
                        m.get("length_ns")
                            .or_else(|| m.get("duration_ns"))
                            .and_then(Value::as_i64)
                            .map(|l| start + l)
                    });
                    if let Some(end) = end
                        && end > start
                    {
                        return Some((start, end));
                    }
                }
                m.values().find_map(|x| search(x, depth + 1))
            }
            Value::Array(a) => a.iter().find_map(|x| search(x, depth + 1)),
            _ => None,
        }
    }
    search(&finding["data"], 0).or_else(|| {
        let w = &finding["window"];
        let (s, e) = (w["start_ns"].as_i64()?, w["end_ns"].as_i64()?);
        (e > s).then_some((s, e))
    })
}

/// A link that moves the timeline to `[start, end)` with some context around it.
fn timeline_link(start: i64, end: i64, text: &str) -> String {
    let pad = ((end - start) / 4).max(1_000);
    format!(
        r##"<a class="to-timeline" href="#timeline" data-start="{}" data-end="{}">{}</a>"##,
        start - pad,
        end + pad,
        esc(text)
    )
}

fn findings(rules: &Value) -> String {
    let mut h = String::new();
    let list = arr(&rules["findings"]);
    let _ = write!(
        h,
        r#"<p class="headline" data-highest="{}">{}</p>"#,
        esc(s(&rules["highest"])),
        esc(s(&rules["verdict"]))
    );
    if list.is_empty() {
        h.push_str(r#"<p class="muted">No rule found anything significant.</p>"#);
    }
    for (n, fnd) in list.iter().enumerate() {
        let sev = s(&fnd["severity"]);
        let place = finding_place(fnd)
            .map(|(a, b)| timeline_link(a, b, "show on timeline"))
            .unwrap_or_default();
        let _ = write!(
            h,
            r#"<article class="finding" data-rule="{id}" data-rank="{n}"><header><span class="sev sev-{sev}">{sev}</span> <strong>{title}</strong> <span class="muted">{share:.1} % of the window · {stake} at stake{dev}</span> {place}</header><ul>"#,
            id = esc(s(&fnd["id"])),
            sev = esc(sev),
            title = esc(s(&fnd["title"])),
            share = f(&fnd["share_pct"]),
            stake = esc(&fmt_ns(f(&fnd["time_at_stake_ns"]))),
            dev = fnd["device"]
                .as_i64()
                .map(|d| format!(" · GPU {d}"))
                .unwrap_or_default(),
        );
        for e in arr(&fnd["evidence"]) {
            let _ = write!(h, "<li>{}</li>", esc(s(e)));
        }
        let regions: Vec<String> = arr(&fnd["regions"])
            .iter()
            .map(|r| {
                format!(
                    "{} {} ({:.1} %)",
                    s(&r["region"]),
                    fmt_ns(f(&r["at_stake_ns"])),
                    f(&r["pct_of_finding"])
                )
            })
            .collect();
        if !regions.is_empty() {
            let _ = write!(
                h,
                r#"<li class="muted">at stake by NVTX region: {}</li>"#,
                esc(&regions.join(", "))
            );
        }
        if let Some(basis) = fnd["basis"].as_str() {
            let _ = write!(h, r#"<li class="muted">basis: {}</li>"#, esc(basis));
        }
        let _ = write!(
            h,
            r#"</ul><details><summary>Why, fix, verify</summary><p><b>Why.</b> {}</p><p><b>Fix.</b> {}</p><p><b>Verify.</b> {}</p></details></article>"#,
            esc(s(&fnd["why"])),
            esc(s(&fnd["fix"])),
            esc(s(&fnd["verify"]))
        );
    }
    // `checked`: each rule that found nothing, by id, with its status and why in words.
    let below: Vec<(&String, &Value)> = rules["checked"]
        .as_object()
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    if !below.is_empty() {
        let _ = write!(
            h,
            r#"<details class="checks"><summary>{} other rules checked</summary><ul>"#,
            below.len()
        );
        for (id, why) in below {
            let _ = write!(h, "<li><code>{}</code> {}</li>", esc(id), esc(s(why)));
        }
        h.push_str("</ul></details>");
    }
    h
}

/// The step ledger: a stacked bar per steady step (one export) or per rank (a set), and the largest columns.
fn ledger(ans: &Value) -> String {
    use aisp_profile::ledger::DeviceLedger;
    let mut h = String::new();
    let devices: Vec<(Option<u32>, DeviceLedger)> = arr(&ans["devices"])
        .iter()
        .filter_map(|d| {
            let l: DeviceLedger = serde_json::from_value(d.clone()).ok()?;
            Some((d["rank"].as_u64().map(|r| r as u32), l))
        })
        .filter(|(_, l)| l.steady.steps > 0)
        .collect();
    if devices.is_empty() {
        return r#"<p class="muted">No GPU activity in this profile.</p>"#.into();
    }
    let _ = write!(
        h,
        r#"<p class="muted small">Each step's period on the GPU timeline (first operation to the next step's first) split exactly: {}.</p>"#,
        esc(s(&ans["precedence"]))
    );
    if devices.iter().all(|(r, _)| r.is_some()) {
        let ranks: Vec<(u32, &DeviceLedger)> =
            devices.iter().map(|(r, l)| (r.unwrap_or(0), l)).collect();
        h.push_str(&svg::render(&aisp_report::ledger::ranks_chart(&ranks)));
    } else {
        for (_, l) in &devices {
            h.push_str(&svg::render(&aisp_report::ledger::steps_chart(l)));
        }
    }
    h.push_str(
        r#"<table class="grid"><thead><tr><th>device</th><th>steady steps</th><th>median step</th><th>largest columns (% of the steady window)</th></tr></thead><tbody>"#,
    );
    for (r, l) in &devices {
        let mut cols: Vec<_> = l.steady.columns.iter().collect();
        cols.sort_by_key(|(c, v)| (std::cmp::Reverse(*v), c.index()));
        let top: Vec<String> = cols
            .iter()
            .take(4)
            .map(|(c, v)| format!("{} {:.1} %", c.as_str(), l.share(*v)))
            .collect();
        let _ = write!(
            h,
            r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td></tr>"#,
            match r {
                Some(r) => format!("rank {r} (GPU {})", l.device),
                None => format!("GPU {}", l.device),
            },
            l.steady.steps,
            esc(&fmt_ns(l.steady.period_median_ns as f64)),
            esc(&top.join(", ")),
        );
    }
    h.push_str("</tbody></table>");
    h
}

fn utilization(util: &Value) -> String {
    let mut h = String::new();
    let devices = arr(&util["devices"]);
    if devices.is_empty() {
        return r#"<p class="muted">No GPU activity in this profile.</p>"#.into();
    }
    let mut series: Vec<build::Series> = devices
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let (chunk, origin) = (f(&d["chunk_ns"]), f(&d["chunk_start_ns"]));
            build::Series {
                label: format!("GPU {}", i(&d["device"])),
                points: arr(&d["chunk_busy_pct"])
                    .iter()
                    .enumerate()
                    .map(|(c, v)| ((origin + (c as f64 + 0.5) * chunk) / 1e9, f(v)))
                    .collect(),
                paint: chart::SERIES[k % chart::SERIES.len()],
            }
        })
        .collect();
    // The active part: most captures are mostly start-up and tear-down, a flat zero.
    let trimmed = build::trim_idle_ends(&mut series);
    h.push_str(&svg::render(&build::lines(
        "GPU busy % over time (kernels and copies, union)",
        "s (the capture's timebase, as on the timeline)",
        "busy %",
        &series,
        Some((0.0, 100.0)),
        false,
    )));
    if let Some((lo, hi)) = trimmed {
        let _ = write!(
            h,
            r#"<p class="muted small" id="util-trimmed">The chart shows the active part, {lo:.3} s to {hi:.3} s: before and after it every GPU is idle.</p>"#
        );
    }
    h.push_str(
        r#"<table class="grid"><thead><tr><th>GPU</th><th>window</th><th>length</th><th>kernel busy</th><th>busy incl. copies</th><th></th></tr></thead><tbody>"#,
    );
    for d in devices {
        for w in arr(&d["windows"]) {
            let win = &w["window"];
            let _ = write!(
                h,
                r#"<tr><td>{}</td><td>{}</td><td>{}</td><td class="num">{:.2} %</td><td class="num">{:.2} %</td><td>{}</td></tr>"#,
                i(&d["device"]),
                esc(s(&win["kind"])),
                esc(&fmt_ns(f(&win["length_ns"]))),
                f(&w["busy_pct"]),
                f(&w["all_ops_busy_pct"]),
                timeline_link(i(&win["start_ns"]), i(&win["end_ns"]), "show"),
            );
        }
    }
    h.push_str("</tbody></table>");
    h
}

fn nvtx_node(h: &mut String, node: &Value, depth: u32) {
    let children = arr(&node["children"]);
    let label = format!(
        r#"<span class="nv-name">{}</span> <span class="muted">×{} · CPU {} · GPU {} · {} kernels</span>"#,
        esc(s(&node["name"])),
        i(&node["instances"]),
        esc(&fmt_ns(f(&node["cpu_total_ns"]))),
        esc(&fmt_ns(f(&node["gpu_union_ns"]))),
        int_sep(i(&node["kernels"])),
    );
    if children.is_empty() {
        let _ = write!(h, r#"<li class="leaf">{label}</li>"#);
    } else {
        let open = if depth < 1 { " open" } else { "" };
        let _ = write!(h, "<li><details{open}><summary>{label}</summary><ul>");
        for c in children {
            nvtx_node(h, c, depth + 1);
        }
        h.push_str("</ul></details></li>");
    }
}

fn nvtx(n: &Value) -> String {
    let mut h = String::new();
    if i(&n["ranges"]) == 0 {
        return r#"<p class="muted">No NVTX ranges in this profile: annotate the code (torch.cuda.nvtx.range, nvtx.annotate) to see its phases here.</p>"#.into();
    }
    let _ = write!(
        h,
        r#"<p class="muted">{} ranges, {} names. GPU time is the union of the kernels launched inside each range (by correlation id, any thread of the process).</p>"#,
        int_sep(i(&n["ranges"])),
        int_sep(i(&n["names_total"]))
    );
    for note in arr(&n["notes"]) {
        let _ = write!(h, r#"<p class="muted small">{}</p>"#, esc(s(note)));
    }
    for t in arr(&n["threads"]) {
        let _ = write!(
            h,
            r#"<h4>{} (pid {}, tid {})</h4><ul class="tree">"#,
            esc(t["thread"].as_str().unwrap_or("thread")),
            i(&t["pid"]),
            i(&t["tid"])
        );
        for r in arr(&t["roots"]) {
            nvtx_node(&mut h, r, 0);
        }
        h.push_str("</ul>");
    }
    h.push_str(
        r#"<table class="grid"><thead><tr><th>range</th><th>instances</th><th>CPU total</th><th>GPU (union)</th><th>kernel sum</th><th>kernels</th></tr></thead><tbody>"#,
    );
    for r in arr(&n["names"]) {
        let _ = write!(
            h,
            r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            esc(s(&r["name"])),
            int_sep(i(&r["instances"])),
            esc(&fmt_ns(f(&r["cpu_total_ns"]))),
            esc(&fmt_ns(f(&r["gpu_union_ns"]))),
            esc(&fmt_ns(f(&r["gpu_kernel_sum_ns"]))),
            int_sep(i(&r["kernels"])),
        );
    }
    h.push_str("</tbody></table>");
    h
}

fn gaps(g: &Value) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<p class="muted">Idle stretches longer than {} between {} on each GPU: the steady-state window's largest first, then the largest of the rest (first step, warm-up), with what the launching thread did meanwhile.</p>"#,
        esc(&fmt_ns(f(&g["min_gap_ns"]))),
        if g["kernels_only"].as_bool().unwrap_or(true) {
            "kernels"
        } else {
            "GPU operations"
        }
    );
    for d in arr(&g["devices"]) {
        let list = arr(&d["gaps"]);
        let total = i(&d["gaps_total"]);
        let _ = write!(
            h,
            r#"<h4>GPU {} — {} gaps{}</h4>"#,
            i(&d["device"]),
            int_sep(total),
            if (list.len() as i64) < total {
                format!(", {} listed", list.len())
            } else {
                String::new()
            }
        );
        if list.is_empty() {
            h.push_str(r#"<p class="muted">None.</p>"#);
            continue;
        }
        h.push_str(r#"<table class="grid"><thead><tr><th>at</th><th>length</th><th>cause</th><th>explanation</th><th>step</th><th>between</th><th></th></tr></thead><tbody>"#);
        for gap in list {
            let _ = write!(
                h,
                r#"<tr><td class="num">{}</td><td class="num">{}</td><td><span class="cause">{}</span></td><td>{}</td><td>{}</td><td class="small">{} → {}</td><td>{}</td></tr>"#,
                esc(&fmt_ts(i(&gap["start_ns"]))),
                esc(&fmt_ns(f(&gap["length_ns"]))),
                esc(s(&gap["cause"])),
                esc(s(&gap["explanation"])),
                esc(gap["step"].as_str().unwrap_or("")),
                esc(gap["kernel_before"].as_str().unwrap_or("start")),
                esc(gap["kernel_after"].as_str().unwrap_or("end")),
                timeline_link(i(&gap["start_ns"]), i(&gap["end_ns"]), "show"),
            );
        }
        h.push_str("</tbody></table>");
    }
    for note in arr(&g["left_out"]) {
        let _ = write!(
            h,
            r#"<p class="muted small left-out">Not listed: {}</p>"#,
            esc(s(note))
        );
    }
    h
}

fn iterations(it: &Value) -> String {
    let mut h = String::new();
    let procs = arr(&it["processes"]);
    if procs.is_empty() {
        let note = it["note"].as_str().unwrap_or("No iterations found.");
        return format!(r#"<p class="muted">{}</p>"#, esc(note));
    }
    let _ = write!(
        h,
        r#"<p class="muted">Iterations found by <code>{}</code> ({}).</p>"#,
        esc(s(&it["rule"])),
        esc(s(&it["family"]))
    );
    for (k, p) in procs.iter().enumerate() {
        let steps = arr(&p["steps"]);
        let a = &p["cpu_after_first"];
        let g = &p["gpu_union_after_first"];
        let _ = write!(
            h,
            r#"<h4>pid {} — {} steps · median CPU step {} (cv {:.1} %) · median GPU time {} · CPU/GPU {:.2}×</h4>"#,
            i(&p["pid"]),
            i(&p["step_count"]),
            esc(&fmt_ns(f(&a["median"]))),
            f(&a["cv_pct"]),
            esc(&fmt_ns(f(&g["median"]))),
            f(&p["cpu_to_gpu_ratio"]),
        );
        // A first step with module loading can take 30x the others: left out of the chart (and
        // said so) rather than flattening every other step.
        let median = f(&a["median"]);
        let first_outlier = steps
            .first()
            .filter(|st| median > 0.0 && steps.len() > 2 && f(&st["cpu_ns"]) > 4.0 * median);
        let shown = &steps[usize::from(first_outlier.is_some())..];
        let series = [
            build::Series {
                label: "CPU step time".into(),
                points: shown
                    .iter()
                    .map(|st| (f(&st["index"]), f(&st["cpu_ns"]) / 1e6))
                    .collect(),
                paint: chart::SERIES[(2 * k) % chart::SERIES.len()],
            },
            build::Series {
                label: "GPU time (union of the step's kernels)".into(),
                points: shown
                    .iter()
                    .map(|st| (f(&st["index"]), f(&st["gpu_union_ns"]) / 1e6))
                    .collect(),
                paint: chart::SERIES[(2 * k + 1) % chart::SERIES.len()],
            },
        ];
        h.push_str(&svg::render(&build::lines(
            "Step time per iteration",
            "step",
            "ms",
            &series,
            None,
            true,
        )));
        if let Some(st) = first_outlier {
            let _ = write!(
                h,
                r#"<p class="muted small">Not in the chart: {} (step {}), {} of CPU time — {:.0}× the median, warm-up.</p>"#,
                esc(s(&st["name"])),
                i(&st["index"]),
                esc(&fmt_ns(f(&st["cpu_ns"]))),
                f(&st["cpu_ns"]) / median
            );
        }
        if let Some(first) = steps.first() {
            let last = steps.last().unwrap_or(first);
            let _ = write!(
                h,
                r#"<p>{}</p>"#,
                timeline_link(
                    i(&first["start_ns"]),
                    i(&last["end_ns"]),
                    "all steps on the timeline"
                )
            );
        }
    }
    h
}

/// The cross-rank view of a set (`aisp_profile_ranks`): findings, ranks, the rank × step heat map,
/// collectives with skew and bandwidth, links, and every note of the answer.
fn rank_set(ans: &Value) -> String {
    let mut h = String::new();
    let set = &ans["set"];
    let cr = &set["cross_rank"];
    let ranks = arr(&cr["ranks"]);
    let residual = set["alignment"]["residual_ns"].as_f64();
    let _ = write!(
        h,
        r#"<div class="rank-set" data-set="1" data-ranks="{}"><p class="headline">{} ranks from {} export(s) · clock residual {}</p>"#,
        ranks.len(),
        ranks.len(),
        arr(&set["files"]).len(),
        esc(&residual.map_or(
            "not aligned by collectives (no skew concluded)".into(),
            fmt_ns
        )),
    );
    let findings = arr(&ans["findings"]);
    if findings.is_empty() {
        h.push_str(r#"<p class="muted">No straggler, skew-dominated collective, slow node or slow link above the clock residual.</p>"#);
    }
    for fnd in findings {
        let sev = s(&fnd["severity"]);
        let _ = write!(
            h,
            r#"<article class="finding" data-rule="{id}"><header><span class="sev sev-{sev}">{sev}</span> <strong>{title}</strong> <span class="muted">{share:.1} % of the median rank's window · {stake} at stake</span></header><ul>"#,
            id = esc(s(&fnd["id"])),
            sev = esc(sev),
            title = esc(s(&fnd["title"])),
            share = f(&fnd["share_pct"]),
            stake = esc(&fmt_ns(f(&fnd["time_at_stake_ns"]))),
        );
        for e in arr(&fnd["evidence"]) {
            let _ = write!(h, "<li>{}</li>", esc(s(e)));
        }
        h.push_str("</ul></article>");
    }
    h.push_str(r#"<table class="grid ranks"><thead><tr><th>rank</th><th>host</th><th>GPU</th><th>clock offset</th><th>median step</th><th>busy</th><th>exposed comm.</th><th>waiting at collectives</th><th>last arrivals</th></tr></thead><tbody>"#);
    for r in ranks {
        let _ = write!(
            h,
            r#"<tr data-rank="{rank}"><td>{rank}</td><td>{host}</td><td>{dev}</td><td>{off}</td><td>{step}</td><td>{busy:.2} %</td><td>{exp}</td><td>{wait}</td><td>{last}</td></tr>"#,
            rank = i(&r["rank"]),
            host = esc(r["hostname"].as_str().unwrap_or("–")),
            dev = i(&r["device"]),
            off = esc(&fmt_ns(f(&r["offset_ns"]))),
            step = esc(&r["step_median_ns"].as_f64().map_or("–".into(), fmt_ns)),
            busy = f(&r["busy_pct"]),
            exp = esc(&fmt_ns(f(&r["exposed_communication_ns"]))),
            wait = esc(&fmt_ns(f(&r["collective_wait_ns"]))),
            last = i(&r["last_arrivals"]),
        );
    }
    h.push_str("</tbody></table>");
    if let Some(hm) = cr["heat_map"].as_object() {
        let rows: Vec<String> = arr(&hm["ranks"])
            .iter()
            .map(|r| format!("rank {}", i(r)))
            .collect();
        let cols: Vec<String> = arr(&hm["steps"]).iter().map(|x| s(x).to_string()).collect();
        let values: Vec<Vec<Option<f64>>> = arr(&hm["values"])
            .iter()
            .map(|row| {
                arr(row)
                    .iter()
                    .map(|v| v.as_f64().map(|ns| ns / 1e6))
                    .collect()
            })
            .collect();
        let what = if s(&hm["figure"]) == "cpu_ns" {
            "CPU step time"
        } else {
            "GPU-projected step time"
        };
        h.push_str(r#"<div class="heat-map">"#);
        h.push_str(&svg::render(&build::heat_map(
            &format!("{what} per rank and step (ms)"),
            &rows,
            &cols,
            &values,
            "ms",
        )));
        h.push_str("</div>");
        if hm["truncated"].as_bool() == Some(true) {
            h.push_str(r#"<p class="muted small">Ranks or steps were left out to keep the map readable.</p>"#);
        }
    }
    let colls = arr(&cr["collectives"]);
    if !colls.is_empty() {
        h.push_str(r#"<table class="grid"><thead><tr><th>collective</th><th>instances</th><th>wait per device</th><th>transfer</th><th>skew share</th><th>sized</th><th>algbw</th><th>busbw</th></tr></thead><tbody>"#);
        let gbs = |v: &Value| v.as_f64().map_or("–".into(), |b| format!("{b:.2} GB/s"));
        for c in colls {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} %</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(s(&c["kind"])),
                i(&c["instances"]),
                esc(&fmt_ns(f(&c["wait_per_device_ns"]))),
                esc(&fmt_ns(f(&c["transfer_ns"]))),
                f(&c["skew_share_pct"]),
                i(&c["sized_instances"]),
                esc(&gbs(&c["alg_gb_per_s"])),
                esc(&gbs(&c["bus_gb_per_s"])),
            );
        }
        h.push_str("</tbody></table>");
    }
    for n in arr(&cr["notes"]) {
        let _ = write!(h, r#"<p class="muted small note">{}</p>"#, esc(s(n)));
    }
    if !arr(&cr["links"]).is_empty() {
        let _ = write!(
            h,
            r#"<p class="muted small">{}</p>"#,
            esc(s(&cr["link_basis"]))
        );
    }
    h.push_str("</div>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_durations_read_well() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(fmt_ns(1_500.0), "1.5 µs");
        assert_eq!(fmt_ns(2_345_678.0), "2.35 ms");
        assert_eq!(fmt_ns(3.0e9), "3.000 s");
        assert_eq!(int_sep(1234567), "1,234,567");
        assert_eq!(int_sep(-1000), "-1,000");
    }

    #[test]
    fn a_finding_points_at_its_first_timed_item_else_its_window() {
        let f = json!({"data": {"largest": [{"start_ns": 100, "length_ns": 50}]},
                       "window": {"start_ns": 0, "end_ns": 1000}});
        assert_eq!(finding_place(&f), Some((100, 150)));
        let f = json!({"data": {"steps": 3}, "window": {"start_ns": 10, "end_ns": 20}});
        assert_eq!(finding_place(&f), Some((10, 20)));
        assert_eq!(finding_place(&json!({"data": {}})), None);
    }
}
