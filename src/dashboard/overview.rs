//! The overview page's server-rendered part: the triage's next steps and the
//! software stack's problems (`aisp_triage`, `aisp_system_dependencies`,
//! called through the dispatcher). The live GPU cards are drawn in the
//! browser (`assets/overview.js`) from `aisp_status` and `aisp_gpu_info`.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Value, json};

use super::call;
use super::html::{arr, esc, s, tool_link};
use crate::app::AppState;
use crate::error::OpError;

pub async fn render(app: &Arc<AppState>) -> Result<String, OpError> {
    let (triage, deps) = futures::join!(
        call(app, "aisp_triage", json!({})),
        call(app, "aisp_system_dependencies", json!({})),
    );
    let triage = triage?;
    let mut h = String::new();
    h.push_str(r#"<section class="panel" id="next-steps"><h2>Next steps</h2>"#);
    next_steps(&mut h, &triage);
    h.push_str("</section>");
    h.push_str(r#"<section class="panel" id="stack"><h2>Software stack</h2>"#);
    match deps {
        Ok(d) => stack(&mut h, &d, &triage["context"]["health"]),
        Err(e) => h.push_str(&super::html::error_box(&e)),
    }
    h.push_str("</section>");
    Ok(h)
}

fn next_steps(h: &mut String, triage: &Value) {
    let steps = arr(&triage["next_steps"]);
    if steps.is_empty() {
        h.push_str(r#"<p class="muted">The triage has no next step for this machine.</p>"#);
        return;
    }
    h.push_str(r#"<ol class="steps">"#);
    for (n, st) in steps.iter().enumerate() {
        let tool = s(&st["tool"]);
        let _ = write!(
            h,
            r#"<li data-step="{n}" data-tool="{t}"><strong>{link}</strong> — {why}</li>"#,
            t = esc(tool),
            link = tool_link(tool, &st["arguments"], tool),
            why = esc(s(&st["why"])),
        );
    }
    h.push_str("</ol>");
}

/// Every check of the stack that is not `ok`, then the host's health notes.
fn stack(h: &mut String, deps: &Value, health: &Value) {
    let checks: Vec<&Value> = arr(&deps["checks"])
        .iter()
        .filter(|c| s(&c["status"]) != "ok")
        .collect();
    let _ = write!(
        h,
        r#"<p class="headline" data-overall="{o}">Overall: {o} · {n} of {t} checks need attention</p>"#,
        o = esc(s(&deps["overall"])),
        n = checks.len(),
        t = arr(&deps["checks"]).len(),
    );
    if !checks.is_empty() {
        h.push_str(r#"<table class="grid"><thead><tr><th>status</th><th>component</th><th>problem</th><th>fix</th></tr></thead><tbody>"#);
        for c in checks {
            let st = s(&c["status"]);
            let _ = write!(
                h,
                r#"<tr data-component="{comp}"><td><span class="sev sev-{cls}">{st}</span></td><td><code>{comp}</code></td><td>{msg}</td><td>{fix}</td></tr>"#,
                cls = esc(match st {
                    "error" | "fail" | "critical" => "critical",
                    "warning" | "warn" => "warning",
                    _ => "info",
                }),
                st = esc(st),
                comp = esc(s(&c["component"])),
                msg = esc(s(&c["message"])),
                fix = esc(c["fix"].as_str().unwrap_or("")),
            );
        }
        h.push_str("</tbody></table>");
    }
    for (key, label) in [
        ("problems", "Problems"),
        ("env_warnings", "Environment"),
        ("container_mismatches", "Container limits"),
        ("parameters_differ", "Kernel parameters"),
        ("network", "Network"),
    ] {
        let items = arr(&health[key]);
        if items.is_empty() {
            continue;
        }
        let _ = write!(
            h,
            r#"<h4>{}</h4><ul class="health" data-health="{key}">"#,
            esc(label)
        );
        for it in items {
            let text = it.as_str().map(str::to_string).unwrap_or_else(|| {
                // A structured problem: its message, else the whole record.
                it.get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| it.to_string())
            });
            let _ = write!(h, "<li>{}</li>", esc(&text));
        }
        h.push_str("</ul>");
    }
}
