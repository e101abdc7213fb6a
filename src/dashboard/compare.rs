//! The compare page's body: `aisp_profile_compare` of two profiles (or two
//! capture runs) as the verdict with its basis and evidence, the per-kernel
//! and per-range deltas as bar charts of the one chart module, and the
//! per-device, memory and findings differences.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;

use super::call;
use super::html::{
    arr, esc, f, fmt_bytes, fmt_ns, i, int_sep, measured, num, pct_delta, s, url_encode,
};
use crate::app::AppState;
use crate::error::OpError;
use aisp_report::chart::{self, build, svg};

pub async fn render(app: &Arc<AppState>, args: Value) -> Result<String, OpError> {
    let before = args["before"].as_str().unwrap_or("").trim().to_string();
    let after = args["after"].as_str().unwrap_or("").trim().to_string();
    if before.is_empty() || after.is_empty() {
        return Err(OpError::invalid_input(
            "compare needs a `before` and an `after` profile",
            "Give two exports (.sqlite or .nsys-rep) or two capture run ids.",
        ));
    }
    // Every argument of the generated form goes through unchanged (dispatch checks them).
    let c = call(app, "aisp_profile_compare", args).await?;
    Ok(page(&c))
}

fn side_card(h: &mut String, label: &str, side: &Value) {
    let path = s(&side["path"]);
    let gpus: Vec<&str> = arr(&side["gpus"]).iter().map(s).collect();
    let _ = write!(
        h,
        r#"<div class="card side" data-side="{l}"><div class="label">{l}</div><div class="value"><a href="/profiles?path={u}">{p}</a></div><div class="small muted">{g} · {k} kernels · kernel time {kt} · window {w} ({ws}){steps}</div></div>"#,
        l = esc(label),
        u = esc(&url_encode(path)),
        p = esc(path.rsplit('/').next().unwrap_or(path)),
        g = esc(&gpus.join(", ")),
        k = int_sep(i(&side["kernels"])),
        kt = esc(&fmt_ns(f(&side["kernel_time_ns"]))),
        w = esc(&fmt_ns(f(&side["window_ns"]))),
        ws = esc(s(&side["window_source"])),
        steps = if side["steps"].as_i64().unwrap_or(0) > 0 {
            format!(
                " · {} steps, median {}",
                i(&side["steps"]),
                esc(&fmt_ns(f(&side["step_median_ns"])))
            )
        } else {
            String::new()
        },
    );
}

fn page(c: &Value) -> String {
    let mut h = String::new();
    h.push_str(r#"<div class="cards">"#);
    side_card(&mut h, "before", &c["before"]);
    side_card(&mut h, "after", &c["after"]);
    h.push_str("</div>");

    let verdict = s(&c["verdict"]);
    let _ = write!(
        h,
        r#"<section class="panel" id="verdict"><h2>Verdict</h2><p class="verdict verdict-{v}" data-verdict="{v}" data-basis="{b}" data-delta-pct="{d}"><span class="verdict-word">{v}</span> {delta} <span class="muted">(threshold {t} %, noise {n} %)</span></p><p><b>Basis:</b> <code>{b}</code> — {metric}</p><p>{reason}</p>"#,
        v = esc(verdict),
        b = esc(s(&c["basis"])),
        d = num(&c["delta_pct"], 2),
        delta = esc(&pct_delta(&c["delta_pct"])),
        t = num(&c["threshold_pct"], 2),
        n = num(&c["noise_pct"], 2),
        metric = esc(s(&c["metric"])),
        reason = esc(s(&c["verdict_reason"])),
    );
    h.push_str(r#"<table class="grid" id="evidence"><thead><tr><th>basis</th><th>metric</th><th>before</th><th>after</th><th>change</th><th>noise</th><th>threshold</th><th>says</th></tr></thead><tbody>"#);
    for e in arr(&c["evidence"]) {
        let _ = write!(
            h,
            r#"<tr data-basis="{b}"><td><code>{b}</code></td><td class="small">{m} (better {better})</td><td class="num">{bv}</td><td class="num">{av}</td><td class="num">{d}</td><td class="num">{n}</td><td class="num">{t}</td><td><span class="says says-{says}">{says}</span></td></tr>"#,
            b = esc(s(&e["basis"])),
            m = esc(s(&e["metric"])),
            better = esc(s(&e["better"])),
            bv = measured(&e["before"]),
            av = measured(&e["after"]),
            d = esc(&pct_delta(&e["delta_pct"])),
            n = num(&e["noise_pct"], 2),
            t = num(&e["threshold_pct"], 2),
            says = esc(s(&e["says"])),
        );
    }
    h.push_str("</tbody></table>");
    let cmp = &c["comparability"];
    let _ = write!(
        h,
        r#"<p class="muted">Comparability {lvl} (score {sc}): same GPUs {same}, {shared} % of kernel time in shared kernels, {ident} % of calls identical launches.</p>"#,
        lvl = esc(s(&cmp["level"])),
        sc = num(&cmp["score"], 2),
        same = cmp["same_gpus"]
            .as_bool()
            .map(|b| if b { "yes" } else { "no" })
            .unwrap_or("unknown"),
        shared = num(&cmp["shared_kernel_time_pct"], 1),
        ident = num(&cmp["identical_launch_calls_pct"], 1),
    );
    let reasons = arr(&cmp["reasons"]);
    if !reasons.is_empty() {
        h.push_str(r#"<ul class="muted small">"#);
        for r in reasons {
            let _ = write!(h, "<li>{}</li>", esc(s(r)));
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>");

    // Per-kernel deltas: the regressions and improvements the answer lists, as one chart.
    let kernels: Vec<&Value> = arr(&c["kernel_regressions"])
        .iter()
        .chain(arr(&c["kernel_improvements"]))
        .collect();
    h.push_str(r#"<section class="panel" id="kernel-deltas"><h2>Kernels</h2><p class="muted small">Totals follow how much work each capture holds; the verdict above rests on its basis (per step, per call of identical launches, per second of window), not on these totals. The per-call column compares like with like.</p>"#);
    if kernels.is_empty() {
        h.push_str(r#"<p class="muted">No kernel changed its total time.</p>"#);
    } else {
        let bars: Vec<build::Bar> = kernels
            .iter()
            .map(|k| {
                let d = f(&k["delta_ns"]);
                build::Bar {
                    label: s(&k["name"]).to_string(),
                    value: d / 1e6,
                    low: None,
                    high: None,
                    paint: if d > 0.0 { chart::BAD } else { chart::GOOD },
                    note: format!("{:+.2} ms ({})", d / 1e6, pct_delta(&k["delta_pct"])),
                }
            })
            .collect();
        h.push_str(&svg::render(&build::bars(
            "Kernel time, after − before (red: more time, green: less)",
            "ms of kernel time",
            &bars,
            build::Scale::Linear,
            None,
        )));
        h.push_str(r#"<table class="grid"><thead><tr><th>kernel</th><th>before</th><th>after</th><th>change</th><th>calls</th><th>per call</th><th>per-call change</th></tr></thead><tbody>"#);
        for k in kernels {
            let _ = write!(
                h,
                r#"<tr data-kernel="{n}"><td>{n}</td><td class="num">{b}</td><td class="num">{a}</td><td class="num">{d}</td><td class="num">{bc} → {ac}</td><td class="num">{bp} → {ap}</td><td class="num">{pd}</td></tr>"#,
                n = esc(s(&k["name"])),
                b = esc(&fmt_ns(f(&k["before_ns"]))),
                a = esc(&fmt_ns(f(&k["after_ns"]))),
                d = esc(&pct_delta(&k["delta_pct"])),
                bc = int_sep(i(&k["before_count"])),
                ac = int_sep(i(&k["after_count"])),
                bp = k["before_per_call_ns"]
                    .as_f64()
                    .map(fmt_ns)
                    .map(|x| esc(&x))
                    .unwrap_or_else(|| "—".into()),
                ap = k["after_per_call_ns"]
                    .as_f64()
                    .map(fmt_ns)
                    .map(|x| esc(&x))
                    .unwrap_or_else(|| "—".into()),
                pd = esc(&pct_delta(&k["per_call_delta_pct"])),
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");

    let ranges = arr(&c["ranges"]);
    h.push_str(r#"<section class="panel" id="range-deltas"><h2>NVTX ranges</h2>"#);
    if ranges.is_empty() {
        h.push_str(r#"<p class="muted">No NVTX range on either side.</p>"#);
    } else {
        let bars: Vec<build::Bar> = ranges
            .iter()
            .map(|r| {
                let d = f(&r["delta_gpu_ns"]);
                build::Bar {
                    label: s(&r["name"]).to_string(),
                    value: d / 1e6,
                    low: None,
                    high: None,
                    paint: if d > 0.0 { chart::BAD } else { chart::GOOD },
                    note: format!("{:+.2} ms", d / 1e6),
                }
            })
            .collect();
        h.push_str(&svg::render(&build::bars(
            "GPU time per NVTX range (union of its kernels), after − before",
            "ms of GPU time",
            &bars,
            build::Scale::Linear,
            None,
        )));
        h.push_str(r#"<table class="grid"><thead><tr><th>range</th><th>CPU before</th><th>CPU after</th><th>GPU before</th><th>GPU after</th></tr></thead><tbody>"#);
        for r in ranges {
            let _ = write!(
                h,
                r#"<tr data-range="{n}"><td>{n}</td><td class="num">{cb}</td><td class="num">{ca}</td><td class="num">{gb}</td><td class="num">{ga}</td></tr>"#,
                n = esc(s(&r["name"])),
                cb = esc(&fmt_ns(f(&r["before_cpu_ns"]))),
                ca = esc(&fmt_ns(f(&r["after_cpu_ns"]))),
                gb = esc(&fmt_ns(f(&r["before_gpu_ns"]))),
                ga = esc(&fmt_ns(f(&r["after_gpu_ns"]))),
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");

    h.push_str(r#"<section class="panel" id="devices-memory"><h2>Devices and memory traffic</h2>"#);
    h.push_str(r#"<table class="grid"><thead><tr><th>GPU</th><th>window</th><th>busy before</th><th>busy after</th><th>overlap before</th><th>overlap after</th></tr></thead><tbody>"#);
    for d in arr(&c["devices"]) {
        let _ = write!(
            h,
            r#"<tr><td>{}</td><td>{}</td><td class="num">{} %</td><td class="num">{} %</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            i(&d["device"]),
            esc(s(&d["window"])),
            num(&d["busy_pct_before"], 2),
            num(&d["busy_pct_after"], 2),
            num(&d["overlap_pct_before"], 1),
            num(&d["overlap_pct_after"], 1),
        );
    }
    h.push_str("</tbody></table>");
    let mem = arr(&c["memory"]);
    if !mem.is_empty() {
        h.push_str(r#"<table class="grid"><thead><tr><th>copies</th><th>bytes before</th><th>bytes after</th><th>time before</th><th>time after</th></tr></thead><tbody>"#);
        for m in mem {
            let _ = write!(
                h,
                r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                esc(s(&m["direction"])),
                esc(&fmt_bytes(f(&m["before_bytes"]))),
                esc(&fmt_bytes(f(&m["after_bytes"]))),
                esc(&fmt_ns(f(&m["before_ns"]))),
                esc(&fmt_ns(f(&m["after_ns"]))),
            );
        }
        h.push_str("</tbody></table>");
    }
    let list = |v: &Value| -> String {
        let a: Vec<String> = arr(v)
            .iter()
            .map(|x| format!("<code>{}</code>", esc(s(x))))
            .collect();
        if a.is_empty() {
            "none".into()
        } else {
            a.join(", ")
        }
    };
    let _ = write!(
        h,
        r#"<p id="findings-delta">Findings resolved: {} · new findings: {}</p></section>"#,
        list(&c["findings_resolved"]),
        list(&c["findings_new"])
    );
    h
}
