//! The planner page's answers: `aisp_distributed_plan` (ranked layouts, the
//! memory per GPU of each as stacked bars, the reasons the others were
//! rejected) and `aisp_inference_estimate` (prefill/decode and the batch
//! sweep as a line chart). The forms are generated in the browser from the
//! two operations' input schemas; the arguments arrive here unchanged.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;

use super::call;
use super::html::{arr, esc, f, int_sep, num, s};
use crate::app::AppState;
use crate::error::OpError;
use aisp_report::chart::{self, build, svg};

/// The memory parts of a layout, in the order they are stacked.
const MEMORY_PARTS: &[(&str, &str)] = &[
    ("weights_gb", "weights"),
    ("gradients_gb", "gradients"),
    ("optimizer_gb", "optimizer states"),
    ("activations_gb", "activations"),
    ("logits_gb", "logits"),
    ("buffers_gb", "buffers"),
];

/// The step-time parts of a layout (exposed time only: hidden communication is not on the step).
const TIME_PARTS: &[(&str, &str)] = &[
    ("compute_ms", "compute"),
    ("pipeline_bubble_ms", "pipeline bubble"),
    ("tp_comm_ms", "TP communication"),
    ("dp_comm_exposed_ms", "DP communication (exposed)"),
    ("cp_comm_exposed_ms", "CP communication (exposed)"),
    ("ep_comm_ms", "EP communication"),
    ("pp_p2p_ms", "PP send/recv"),
];

/// Rejected layouts listed by name (the rest are counted by reason).
const REJECTED_SHOWN: usize = 25;

pub async fn plan(app: &Arc<AppState>, args: Value) -> Result<String, OpError> {
    Ok(plan_html(&call(app, "aisp_distributed_plan", args).await?))
}

pub async fn estimate(app: &Arc<AppState>, args: Value) -> Result<String, OpError> {
    Ok(estimate_html(
        &call(app, "aisp_inference_estimate", args).await?,
    ))
}

fn peaks(h: &mut String, p: &Value) {
    let _ = write!(
        h,
        r#"<p class="muted small">Peaks for <code>{gpu}</code>: memory {bw} GB/s ({bo}: {bs}); {prec} {tf} TFLOP/s ({to}: {ts}).</p>"#,
        gpu = esc(s(&p["gpu_id"])),
        bw = num(&p["memory_gb_per_s"]["value"], 1),
        bo = esc(s(&p["memory_gb_per_s"]["origin"])),
        bs = esc(s(&p["memory_gb_per_s"]["source"])),
        prec = esc(s(&p["precision"])),
        tf = num(&p["tflops"]["value"], 1),
        to = esc(s(&p["tflops"]["origin"])),
        ts = esc(s(&p["tflops"]["source"])),
    );
}

fn assumptions(h: &mut String, a: &Value) {
    let list = arr(a);
    if list.is_empty() {
        return;
    }
    h.push_str(r#"<details><summary>Assumptions</summary><ul class="small">"#);
    for x in list {
        let _ = write!(h, "<li>{}</li>", esc(s(x)));
    }
    h.push_str("</ul></details>");
}

fn parts_of(v: &Value, parts: &[(&str, &str)]) -> Vec<f64> {
    parts.iter().map(|(k, _)| f(&v[*k])).collect()
}

fn legend(parts: &[(&str, &str)]) -> Vec<(String, chart::Paint)> {
    parts
        .iter()
        .enumerate()
        .map(|(n, (_, label))| (label.to_string(), chart::SERIES[n % chart::SERIES.len()]))
        .collect()
}

fn plan_html(p: &Value) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<p class="headline" id="plan-verdict">{}</p><p class="muted">{} of {} layouts fit and divide the model on {} node(s) × {} GPUs; {} tokens per step (sequence {}, global batch {}).</p>"#,
        esc(s(&p["verdict"])),
        int_sep(p["feasible"].as_i64().unwrap_or(0)),
        int_sep(p["evaluated"].as_i64().unwrap_or(0)),
        p["nodes"].as_i64().unwrap_or(0),
        p["gpus_per_node"].as_i64().unwrap_or(0),
        int_sep(p["tokens_per_step"].as_i64().unwrap_or(0)),
        int_sep(p["seq_len"].as_i64().unwrap_or(0)),
        int_sep(p["global_batch"].as_i64().unwrap_or(0)),
    );
    peaks(&mut h, &p["peaks"]);
    let cands = arr(&p["candidates"]);
    if cands.is_empty() {
        h.push_str(r#"<p class="muted">No layout fits: see the reasons below.</p>"#);
    } else {
        h.push_str(r#"<h4>Ranked layouts</h4><table class="grid" id="layouts"><thead><tr><th>rank</th><th>layout</th><th>step</th><th>tokens/s</th><th>MFU</th><th>memory per GPU</th><th>headroom</th></tr></thead><tbody>"#);
        for (n, c) in cands.iter().enumerate() {
            let m = &c["memory"];
            let _ = write!(
                h,
                r#"<tr data-rank="{r}"><td class="num">{r}</td><td>{d}<details><summary class="small">why</summary><ul class="small">{why}</ul></details></td><td class="num">{step} ms</td><td class="num">{tps}</td><td class="num">{mfu} %</td><td class="num" data-col="memory-per-gpu">{mem} GB of {usable} GB</td><td class="num">{head} GB</td></tr>"#,
                r = n + 1,
                d = esc(s(&c["description"])),
                why = arr(&c["reasons"])
                    .iter()
                    .map(|x| format!("<li>{}</li>", esc(s(x))))
                    .collect::<String>(),
                step = num(&c["time"]["step_ms"], 1),
                tps = num(&c["tokens_per_s"], 1),
                mfu = num(&c["mfu_pct"], 2),
                mem = num(&m["total_gb"], 2),
                usable = num(&m["usable_gb"], 1),
                head = num(&m["headroom_gb"], 2),
            );
        }
        h.push_str("</tbody></table>");
        let usable = cands[0]["memory"]["usable_gb"].as_f64();
        let label = |n: usize, c: &Value| {
            let l = &c["layout"];
            format!(
                "#{} TP{} PP{} DP{} Z{}",
                n + 1,
                l["tp"].as_i64().unwrap_or(1),
                l["pp"].as_i64().unwrap_or(1),
                l["dp"].as_i64().unwrap_or(1),
                l["zero_stage"].as_i64().unwrap_or(0)
            )
        };
        let rows: Vec<build::StackedRow> = cands
            .iter()
            .enumerate()
            .map(|(n, c)| build::StackedRow {
                label: label(n, c),
                values: parts_of(&c["memory"], MEMORY_PARTS),
                note: format!("{:.1} GB", f(&c["memory"]["total_gb"])),
            })
            .collect();
        h.push_str(&svg::render(&build::stacked(
            "Memory per GPU of each ranked layout",
            "GB per GPU",
            &legend(MEMORY_PARTS),
            &rows,
            usable.map(|u| (u, "usable")),
        )));
        let rows: Vec<build::StackedRow> = cands
            .iter()
            .enumerate()
            .map(|(n, c)| build::StackedRow {
                label: label(n, c),
                values: parts_of(&c["time"], TIME_PARTS),
                note: format!("{:.0} ms", f(&c["time"]["step_ms"])),
            })
            .collect();
        h.push_str(&svg::render(&build::stacked(
            "Step time of each ranked layout (communication hidden behind compute left out)",
            "ms per step",
            &legend(TIME_PARTS),
            &rows,
            None,
        )));
    }
    h.push_str(r#"<h4>Rejected layouts</h4>"#);
    let kinds = arr(&p["rejected_by_kind"]);
    if kinds.is_empty() {
        h.push_str(r#"<p class="muted">None.</p>"#);
    } else {
        h.push_str(r#"<ul id="rejected-kinds">"#);
        for k in kinds {
            let _ = write!(
                h,
                r#"<li><b>{}</b>: {} layouts</li>"#,
                esc(s(&k[0])),
                int_sep(k[1].as_i64().unwrap_or(0))
            );
        }
        h.push_str("</ul>");
        let rejected = arr(&p["rejected"]);
        let _ = write!(
            h,
            r#"<details><summary>{} listed with their reason</summary><table class="grid" id="rejected"><thead><tr><th>layout</th><th>why not</th></tr></thead><tbody>"#,
            rejected.len().min(REJECTED_SHOWN)
        );
        for r in rejected.iter().take(REJECTED_SHOWN) {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(s(&r["description"])),
                esc(s(&r["reason"]))
            );
        }
        h.push_str("</tbody></table></details>");
    }
    assumptions(&mut h, &p["assumptions"]);
    h
}

fn estimate_html(e: &Value) -> String {
    let mut h = String::new();
    let fits = e["fits"].as_bool().unwrap_or(false);
    // The tile says what the sweep below shows (weights and KV read per step): the first batch that is
    // compute-bound, or that decode stays memory-bound over the whole sweep. The weights-only crossover
    // (KV reads left out) is smaller, so it is named as such beside it.
    let swept = arr(&e["batch_sweep"])
        .iter()
        .filter_map(|b| b["batch"].as_i64())
        .max();
    let (cross_label, cross) = match (e["first_compute_bound_batch"].as_i64(), swept) {
        (Some(b), _) => (
            "decode turns compute-bound at batch".to_string(),
            format!(
                "{b} <span class=\"muted small\">(weights-only crossover {})</span>",
                num(&e["crossover_batch"], 1)
            ),
        ),
        (None, Some(max)) => (
            "decode compute-bound at batch".to_string(),
            format!(
                "not up to {max}: memory-bound <span class=\"muted small\">(KV reads grow with the batch; weights-only crossover {})</span>",
                num(&e["crossover_batch"], 1)
            ),
        ),
        (None, None) => (
            "weights-only crossover batch".to_string(),
            num(&e["crossover_batch"], 1),
        ),
    };
    let _ = write!(
        h,
        r#"<div class="cards"><div class="card"><div class="label">weights per GPU</div><div class="value" data-metric="weights-per-gpu">{w} GB</div></div><div class="card"><div class="label">fits</div><div class="value">{fits}</div></div><div class="card"><div class="label">largest batch in memory</div><div class="value">{mb}</div></div><div class="card"><div class="label">{cross_label}</div><div class="value" data-metric="compute-bound-batch">{cross}</div></div><div class="card"><div class="label">request latency</div><div class="value">{lat} ms</div></div></div>"#,
        w = num(&e["weights_per_gpu_gb"], 2),
        fits = if fits { "yes" } else { "no" },
        mb = e["max_batch_by_memory"]
            .as_i64()
            .map(|b| b.to_string())
            .unwrap_or_else(|| "—".into()),
        cross_label = cross_label,
        cross = cross,
        lat = num(&e["request_latency_ms"], 1),
    );
    peaks(&mut h, &e["peaks"]);
    let pf = &e["prefill"];
    let dc = &e["decode"];
    let _ = write!(
        h,
        r#"<table class="grid" id="phases"><thead><tr><th>phase</th><th>batch</th><th>tokens</th><th>memory time</th><th>compute time</th><th>TP comm</th><th>time</th><th>bound</th><th>tokens/s</th></tr></thead><tbody><tr><td>prefill</td><td class="num">{pb}</td><td class="num">{pt}</td><td class="num">{pm} ms</td><td class="num">{pc} ms</td><td class="num">{pk} ms</td><td class="num">{ptm} ms</td><td>{pbd}</td><td class="num">{ptps}</td></tr><tr><td>decode step</td><td class="num">{db}</td><td class="num">{dt}</td><td class="num">{dm} ms</td><td class="num">{dcm} ms</td><td class="num">{dk} ms</td><td class="num">{dtm} ms</td><td>{dbd}</td><td class="num">{dtps}</td></tr></tbody></table>"#,
        pb = pf["batch"].as_i64().unwrap_or(0),
        pt = int_sep(pf["prompt_tokens"].as_i64().unwrap_or(0)),
        pm = num(&pf["memory_ms"], 3),
        pc = num(&pf["compute_ms"], 3),
        pk = num(&pf["tp_comm_ms"], 3),
        ptm = num(&pf["time_ms"], 3),
        pbd = esc(s(&pf["bound"])),
        ptps = num(&pf["tokens_per_s"], 1),
        db = dc["batch"].as_i64().unwrap_or(0),
        dt = int_sep(dc["context_tokens"].as_i64().unwrap_or(0)),
        dm = num(&dc["memory_ms"], 3),
        dcm = num(&dc["compute_ms"], 3),
        dk = num(&dc["tp_comm_ms"], 3),
        dtm = num(&dc["step_ms"], 3),
        dbd = esc(s(&dc["bound"])),
        dtps = num(&dc["total_tokens_per_s"], 1),
    );
    let sweep = arr(&e["batch_sweep"]);
    if sweep.len() > 1 {
        let series = [build::Series {
            label: "decode tokens/s (all sequences)".into(),
            points: sweep
                .iter()
                .map(|b| (f(&b["batch"]), f(&b["total_tokens_per_s"])))
                .collect(),
            paint: chart::SERIES[0],
        }];
        h.push_str(&svg::render(&build::lines(
            "Decode throughput against batch size",
            "batch (sequences decoded together)",
            "tokens/s",
            &series,
            None,
            true,
        )));
        h.push_str(r#"<table class="grid"><thead><tr><th>batch</th><th>step</th><th>bound</th><th>tokens/s per sequence</th><th>tokens/s in all</th></tr></thead><tbody>"#);
        for b in sweep {
            let _ = write!(
                h,
                r#"<tr><td class="num">{}</td><td class="num">{} ms</td><td>{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                b["batch"].as_i64().unwrap_or(0),
                num(&b["step_ms"], 3),
                esc(s(&b["bound"])),
                num(&b["per_sequence_tokens_per_s"], 2),
                num(&b["total_tokens_per_s"], 1),
            );
        }
        h.push_str("</tbody></table>");
    }
    assumptions(&mut h, &e["assumptions"]);
    h
}
