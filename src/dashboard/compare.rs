//! The compare page's body: `aisp_profile_compare` of two runs (exports, capture runs or sets of ranks),
//! leading with the verdict — the step change with its 95 % interval and each finding's predicted vs
//! measured step — then comparability fact by fact, then what moved (findings, ledger columns, kernels, the
//! steps themselves) as charts of the one chart module with their tables.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;

use super::call;
use super::html::{arr, esc, f, fmt_ns, i, measured, num, pct_delta, s, url_encode};
use crate::app::AppState;
use crate::error::OpError;
use aisp_report::chart::{self, build, svg};

pub async fn render(app: &Arc<AppState>, mut args: Value) -> Result<String, OpError> {
    let before = args["before"].as_str().unwrap_or("").trim().to_string();
    let after = args["after"].as_str().unwrap_or("").trim().to_string();
    if before.is_empty() || after.is_empty() {
        return Err(OpError::invalid_input(
            "compare needs a `before` and an `after` profile",
            "Give two exports (.sqlite or .nsys-rep), two capture run ids, or two folders of per-rank exports.",
        ));
    }
    // Every argument of the generated form goes through unchanged (dispatch checks them); the page shows
    // every fact, the kernels that moved, each basis and the steady periods: the detailed answer.
    if let Some(a) = args.as_object_mut() {
        a.insert("detail".into(), Value::Bool(true));
    }
    let c = call(app, "aisp_profile_compare", args).await?;
    Ok(page(&c))
}

fn ms(v: &Value) -> String {
    v.as_f64()
        .map(|x| format!("{:.3} ms", x / 1e6))
        .unwrap_or_else(|| "—".into())
}

fn side_card(h: &mut String, label: &str, side: &Value) {
    let path = s(&side["path"]);
    let gpus: Vec<&str> = arr(&side["gpus"]).iter().map(s).collect();
    let mut g = gpus.to_vec();
    g.dedup();
    let _ = write!(
        h,
        r#"<div class="card side" data-side="{l}"><div class="label">{l}</div><div class="value"><a href="/profiles?path={u}">{p}</a></div><div class="small muted">{n} × {g} · {unit} · {st} steady steps (+{w} warm-up), median {med}, CV {cv} %</div></div>"#,
        l = esc(label),
        u = esc(&url_encode(path)),
        p = esc(path.rsplit('/').next().unwrap_or(path)),
        n = i(&side["world_size"]),
        g = esc(&g.join(", ")),
        unit = esc(s(&side["unit"])),
        st = i(&side["steady_steps"]),
        w = i(&side["warmup_steps"]),
        med = esc(&fmt_ns(f(&side["step_median_ns"]))),
        cv = num(&side["step_cv_pct"], 1),
    );
}

fn verdict_section(h: &mut String, c: &Value) {
    let verdict = s(&c["verdict"]);
    let st = &c["step"];
    let change = if st.is_null() {
        String::new()
    } else {
        format!(
            "step {} → {}: {} <span class=\"muted\">(95 % interval {} to {}; {} and {} steady steps)</span>",
            esc(&ms(&st["before_median_ns"])),
            esc(&ms(&st["after_median_ns"])),
            esc(&pct_delta(&st["change_pct"])),
            esc(&pct_delta(&st["ci_low_pct"])),
            esc(&pct_delta(&st["ci_high_pct"])),
            i(&st["before_steps"]),
            i(&st["after_steps"]),
        )
    };
    let _ = write!(
        h,
        r#"<section class="panel" id="verdict"><h2>Verdict</h2><p class="verdict verdict-{v}" data-verdict="{v}" data-basis="{b}" data-change-pct="{d}" data-ci-low-pct="{lo}" data-ci-high-pct="{hi}"><span class="verdict-word">{w}</span> {change}</p><p><b>Basis:</b> <code>{b}</code> — {reason}</p>"#,
        v = esc(verdict),
        w = esc(&verdict.replace('_', " ")),
        b = esc(s(&c["basis"])),
        d = num(&st["change_pct"], 2),
        lo = num(&st["ci_low_pct"], 2),
        hi = num(&st["ci_high_pct"], 2),
        reason = esc(s(&c["verdict_reason"])),
    );
    let preds = arr(&c["predictions"]);
    if !preds.is_empty() {
        h.push_str(r#"<h3>Predicted vs measured</h3><p class="muted small">Each finding of the before run states the step its fix alone would leave (the ledger's what-if); beside it, the step the after run measured. A finding marked fixed is gone or shrank by more than half: its fix is what changed.</p><table class="grid" id="predictions"><thead><tr><th>finding</th><th>share before</th><th>step before</th><th>predicted</th><th>measured</th><th>error</th><th>then limited by (predicted → measured)</th><th>after</th></tr></thead><tbody>"#);
        for p in preds {
            let applied = p["applied"].as_bool().unwrap_or(false);
            let _ = write!(
                h,
                r#"<tr data-finding="{id}" data-applied="{applied}" data-error-pct="{e}"><td><code>{id}</code>{fixed}</td><td class="num">{sh} %</td><td class="num">{b}</td><td class="num">{pr}</td><td class="num">{me}</td><td class="num">{ep}</td><td>{t} → {m}</td><td>{after}</td></tr>"#,
                id = esc(s(&p["id"])),
                fixed = if applied { " <b>(fixed)</b>" } else { "" },
                sh = num(&p["share_pct"], 2),
                b = esc(&ms(&p["step_ns"])),
                pr = esc(&ms(&p["predicted_step_ns"])),
                me = esc(&ms(&p["measured_step_ns"])),
                e = num(&p["error_pct"], 2),
                ep = esc(&pct_delta(&p["error_pct"])),
                t = esc(p["then_limited_by"].as_str().unwrap_or("?")),
                m = esc(p["measured_limited_by"].as_str().unwrap_or("?")),
                after = esc(s(&p["after"])),
            );
        }
        h.push_str("</tbody></table>");
        if !st.is_null() {
            let before = f(&st["before_median_ns"]) / 1e6;
            let mut bars = vec![build::Bar {
                label: "before (measured)".into(),
                value: before,
                low: None,
                high: None,
                paint: chart::NEUTRAL,
                note: format!("{before:.3} ms"),
            }];
            for p in preds
                .iter()
                .filter(|p| p["applied"].as_bool() == Some(true))
            {
                let v = f(&p["predicted_step_ns"]) / 1e6;
                bars.push(build::Bar {
                    label: format!("predicted: {}", s(&p["id"])),
                    value: v,
                    low: None,
                    high: None,
                    paint: chart::SERIES[1],
                    note: format!("{v:.3} ms"),
                });
            }
            let after = f(&st["after_median_ns"]) / 1e6;
            let (lo, hi) = (
                before * (1.0 + f(&st["ci_low_pct"]) / 100.0),
                before * (1.0 + f(&st["ci_high_pct"]) / 100.0),
            );
            bars.push(build::Bar {
                label: "after (measured)".into(),
                value: after,
                low: Some(lo.min(hi)),
                high: Some(lo.max(hi)),
                paint: chart::SERIES[0],
                note: format!("{after:.3} ms ({})", pct_delta(&st["change_pct"])),
            });
            h.push_str(&svg::render(&build::bars(
                "Median steady step: before, predicted by the fixed findings, after (whisker: 95 % interval)",
                "ms",
                &bars,
                build::Scale::Linear,
                None,
            )));
        }
    }
    h.push_str("</section>");
}

fn comparability_section(h: &mut String, c: &Value) {
    let cmp = &c["comparability"];
    let _ = write!(
        h,
        r#"<section class="panel" id="comparability" data-comparable="{}"><h2>Comparability</h2><table class="grid"><thead><tr><th>fact</th><th>before</th><th>after</th><th>same</th><th>effect</th></tr></thead><tbody>"#,
        cmp["comparable"].as_bool().unwrap_or(false)
    );
    for fact in arr(&cmp["facts"]) {
        let same = match fact["same"].as_bool() {
            Some(true) => "yes",
            Some(false) => "no",
            None => "not recorded",
        };
        let _ = write!(
            h,
            r#"<tr data-fact="{n}" data-same="{same}" data-effect="{e}"><td>{label}</td><td class="small">{b}</td><td class="small">{a}</td><td>{same}</td><td class="small">{e}{note}</td></tr>"#,
            n = esc(s(&fact["fact"])),
            label = esc(&s(&fact["fact"]).replace('_', " ")),
            b = esc(s(&fact["before"])),
            a = esc(s(&fact["after"])),
            e = esc(s(&fact["effect"])),
            note = if s(&fact["note"]).is_empty() {
                String::new()
            } else {
                format!(": {}", esc(s(&fact["note"])))
            },
        );
    }
    h.push_str("</tbody></table>");
    let w = &cmp["work"];
    let explained: Vec<String> = arr(&w["explained_by"])
        .iter()
        .map(|x| format!("<code>{}</code>", esc(s(x))))
        .collect();
    let _ = write!(
        h,
        r#"<p id="work" data-same="{}">Work per step: {}. {} % of calls are identical launches.{}</p>"#,
        w["same"].as_bool().unwrap_or(false),
        esc(s(&w["reason"])),
        num(&w["identical_launch_calls_pct"], 1),
        if explained.is_empty() {
            String::new()
        } else {
            format!(
                " The kernels that changed belong to {}.",
                explained.join(", ")
            )
        }
    );
    let changed = arr(&w["changed"]);
    if !changed.is_empty() {
        h.push_str(r#"<table class="grid small"><thead><tr><th>kernel</th><th>column</th><th>per step before</th><th>per step after</th></tr></thead><tbody>"#);
        for k in changed {
            let _ = write!(
                h,
                r#"<tr><td>{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                esc(s(&k["name"])),
                esc(s(&k["column"])),
                num(&k["before"], 1),
                num(&k["after"], 1),
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");
}

fn findings_section(h: &mut String, c: &Value) {
    h.push_str(r#"<section class="panel" id="findings-delta"><h2>Findings</h2>"#);
    let rows = arr(&c["findings"]);
    if rows.is_empty() {
        h.push_str(r#"<p class="muted">No finding at 1 % or more of the steady window on either side.</p>"#);
    } else {
        h.push_str(r#"<table class="grid"><thead><tr><th>finding</th><th>device</th><th>before</th><th>after</th><th>status</th></tr></thead><tbody>"#);
        for r in rows {
            let _ = write!(
                h,
                r#"<tr data-finding="{id}" data-status="{st}"><td><code>{id}</code></td><td>{d}</td><td class="num">{b} %</td><td class="num">{a} %</td><td>{st}</td></tr>"#,
                id = esc(s(&r["id"])),
                st = esc(s(&r["status"])),
                d = r["device"]
                    .as_i64()
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| "set".into()),
                b = num(&r["before_share_pct"], 2),
                a = num(&r["after_share_pct"], 2),
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");
}

fn columns_section(h: &mut String, c: &Value) {
    let cols: Vec<&Value> = arr(&c["columns"])
        .iter()
        .filter(|x| i(&x["change_ns"]) != 0)
        .collect();
    h.push_str(r#"<section class="panel" id="column-deltas"><h2>Ledger columns per step</h2><p class="muted small">Where the steady step's time went on each side (the device or rank that stands for the run), mean ns per steady step.</p>"#);
    if cols.is_empty() {
        h.push_str(r#"<p class="muted">No ledger column moved.</p>"#);
    } else {
        let bars: Vec<build::Bar> = cols
            .iter()
            .map(|x| {
                let d = f(&x["change_ns"]);
                build::Bar {
                    label: s(&x["column"]).to_string(),
                    value: d / 1e6,
                    low: None,
                    high: None,
                    paint: if d > 0.0 { chart::BAD } else { chart::GOOD },
                    note: format!("{:+.3} ms", d / 1e6),
                }
            })
            .collect();
        h.push_str(&svg::render(&build::bars(
            "Ledger columns per steady step, after − before (red: more time, green: less)",
            "ms per step",
            &bars,
            build::Scale::Linear,
            None,
        )));
        h.push_str(r#"<table class="grid"><thead><tr><th>column</th><th>before</th><th>after</th><th>change</th></tr></thead><tbody>"#);
        for x in cols {
            let _ = write!(
                h,
                r#"<tr data-column="{n}"><td>{n}</td><td class="num">{b}</td><td class="num">{a}</td><td class="num">{d}</td></tr>"#,
                n = esc(s(&x["column"])),
                b = esc(&fmt_ns(f(&x["before_ns"]))),
                a = esc(&fmt_ns(f(&x["after_ns"]))),
                d = esc(&fmt_ns(f(&x["change_ns"]))),
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");
}

fn kernels_section(h: &mut String, c: &Value) {
    let kernels = arr(&c["kernels"]);
    h.push_str(r#"<section class="panel" id="kernel-deltas"><h2>Kernels per step</h2><p class="muted small">Calls and time per steady step (all devices or ranks): a fix that fuses, changes precision or rebalances shows as kernels that leave or arrive.</p>"#);
    if kernels.is_empty() {
        h.push_str(r#"<p class="muted">No kernel changed its time per step.</p>"#);
    } else {
        let bars: Vec<build::Bar> = kernels
            .iter()
            .map(|k| {
                let d = f(&k["change_ns"]);
                build::Bar {
                    label: s(&k["name"]).to_string(),
                    value: d / 1e6,
                    low: None,
                    high: None,
                    paint: if d > 0.0 { chart::BAD } else { chart::GOOD },
                    note: format!("{:+.3} ms", d / 1e6),
                }
            })
            .collect();
        h.push_str(&svg::render(&build::bars(
            "Kernel time per steady step, after − before (red: more time, green: less)",
            "ms per step",
            &bars,
            build::Scale::Linear,
            None,
        )));
        h.push_str(r#"<table class="grid"><thead><tr><th>kernel</th><th>column</th><th>calls per step</th><th>before</th><th>after</th><th>change</th></tr></thead><tbody>"#);
        for k in kernels {
            let _ = write!(
                h,
                r#"<tr data-kernel="{n}"><td>{n}</td><td>{col}</td><td class="num">{bc} → {ac}</td><td class="num">{b}</td><td class="num">{a}</td><td class="num">{d}</td></tr>"#,
                n = esc(s(&k["name"])),
                col = esc(s(&k["column"])),
                bc = num(&k["before_count"], 1),
                ac = num(&k["after_count"], 1),
                b = esc(&fmt_ns(f(&k["before_ns"]))),
                a = esc(&fmt_ns(f(&k["after_ns"]))),
                d = esc(&fmt_ns(f(&k["change_ns"]))),
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");
}

fn steps_section(h: &mut String, c: &Value) {
    let series: Vec<build::Series> = [
        ("before", &c["before"], chart::NEUTRAL),
        ("after", &c["after"], chart::SERIES[0]),
    ]
    .into_iter()
    .filter(|(_, sd, _)| !arr(&sd["step_periods_ns"]).is_empty())
    .map(|(label, sd, paint)| build::Series {
        label: format!("{label} ({})", s(&sd["unit"])),
        points: arr(&sd["step_periods_ns"])
            .iter()
            .enumerate()
            .map(|(k, v)| (k as f64, f(v) / 1e6))
            .collect(),
        paint,
    })
    .collect();
    h.push_str(r#"<section class="panel" id="steps"><h2>Steps</h2>"#);
    if !series.is_empty() {
        h.push_str(&svg::render(&build::lines(
            "Steady step periods on the GPU timeline",
            "steady step",
            "ms",
            &series,
            None,
            true,
        )));
    }
    h.push_str(r#"<table class="grid" id="evidence"><thead><tr><th>basis</th><th>metric</th><th>before</th><th>after</th><th>change</th><th>95 % interval</th><th>says</th></tr></thead><tbody>"#);
    for e in arr(&c["evidence"]) {
        let _ = write!(
            h,
            r#"<tr data-basis="{b}"><td><code>{b}</code></td><td class="small">{m}</td><td class="num">{bv}</td><td class="num">{av}</td><td class="num">{d}</td><td class="num">{lo} to {hi}</td><td><span class="says says-{says}">{says}</span></td></tr>"#,
            b = esc(s(&e["basis"])),
            m = esc(s(&e["metric"])),
            bv = measured(&e["before"]),
            av = measured(&e["after"]),
            d = esc(&pct_delta(&e["change_pct"])),
            lo = esc(&pct_delta(&e["ci_low_pct"])),
            hi = esc(&pct_delta(&e["ci_high_pct"])),
            says = esc(s(&e["says"])),
        );
    }
    h.push_str("</tbody></table></section>");
}

fn page(c: &Value) -> String {
    let mut h = String::new();
    // The verdict first: did the fix work, by how much, and as predicted?
    verdict_section(&mut h, c);
    h.push_str(r#"<div class="cards">"#);
    side_card(&mut h, "before", &c["before"]);
    side_card(&mut h, "after", &c["after"]);
    h.push_str("</div>");
    comparability_section(&mut h, c);
    findings_section(&mut h, c);
    columns_section(&mut h, c);
    kernels_section(&mut h, c);
    steps_section(&mut h, c);
    h
}
