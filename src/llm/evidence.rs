//! The evidence an answer rests on: every tool result gathered while
//! answering, labelled `E1`, `E2`, ... so the answer can cite it, with a
//! short quote for each citation and the rule findings it contains.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::OpError;

/// Severity of a rule finding, in order.
pub const SEVERITIES: &[&str] = &["info", "low", "medium", "high", "critical"];

pub fn severity_rank(s: &str) -> Option<usize> {
    SEVERITIES.iter().position(|x| x.eq_ignore_ascii_case(s))
}

/// One tool call and what it answered.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// `E1`, `E2`, ...
    pub id: String,
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub result: Result<Value, OpError>,
}

impl Evidence {
    pub fn ok(&self) -> bool {
        self.result.is_ok()
    }

    /// A short excerpt of the result, for citations.
    pub fn quote(&self) -> String {
        match &self.result {
            Ok(v) => quote_value(v),
            Err(e) => format!("error ({}): {}", e.kind, e.message),
        }
    }

    /// Rule findings in the result.
    pub fn findings(&self) -> Vec<Finding> {
        match &self.result {
            Ok(v) => {
                let mut out = Vec::new();
                collect_findings(v, &mut out);
                out
            }
            Err(_) => Vec::new(),
        }
    }
}

/// A rule finding as the profile rules report it (`{id, title, severity, ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Finding {
    /// The rule id.
    pub id: String,
    pub title: String,
    /// info, low, medium, high or critical.
    pub severity: String,
    /// Share of the analysed time at stake, 0–100, when the rule states it.
    pub share_pct: Option<f64>,
    /// Time at stake in ns, when the rule states it.
    pub time_at_stake_ns: Option<i64>,
    /// The rule's evidence text; where the answer left it out (a default profile answer), the finding's measured
    /// numbers in one line (its `gist`).
    pub evidence: Option<String>,
    /// Why it matters, as the rule explains it.
    pub why: Option<String>,
    /// What to do, as the rule recommends it.
    pub fix: Option<String>,
    /// How to check the fix worked.
    pub verify: Option<String>,
    /// The CUDA device the finding is about, when the rule says.
    pub device: Option<i64>,
}

impl Finding {
    pub fn rank(&self) -> usize {
        severity_rank(&self.severity).unwrap_or(0)
    }

    pub fn at_least(&self, severity: &str) -> bool {
        self.rank() >= severity_rank(severity).unwrap_or(0)
    }
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .filter_map(|i| match i {
                    Value::String(s) => Some(s.clone()),
                    Value::Null => None,
                    other => Some(other.to_string()),
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        Value::Object(o) if !o.is_empty() => Some(
            o.iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}: {s}"),
                    other => format!("{k}: {other}"),
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Objects with a string `id` and a known `severity`, anywhere in `v`.
pub fn collect_findings(v: &Value, out: &mut Vec<Finding>) {
    match v {
        Value::Object(o) => {
            let id = o.get("id").and_then(Value::as_str);
            let sev = o.get("severity").and_then(Value::as_str);
            if let (Some(id), Some(sev)) = (id, sev)
                && severity_rank(sev).is_some()
            {
                out.push(Finding {
                    id: id.to_string(),
                    title: o
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or(id)
                        .to_string(),
                    severity: sev.to_ascii_lowercase(),
                    share_pct: o.get("share_pct").and_then(Value::as_f64),
                    time_at_stake_ns: o.get("time_at_stake_ns").and_then(Value::as_i64),
                    evidence: text_of(o.get("evidence")).or_else(|| text_of(o.get("gist"))),
                    why: text_of(o.get("why")),
                    fix: text_of(o.get("fix")),
                    verify: text_of(o.get("verify")),
                    device: o.get("device").and_then(Value::as_i64),
                });
                return;
            }
            for child in o.values() {
                collect_findings(child, out);
            }
        }
        Value::Array(items) => {
            for i in items {
                collect_findings(i, out);
            }
        }
        _ => {}
    }
}

/// A one-paragraph excerpt of a tool result: its findings if it has any,
/// otherwise its top-level scalar fields and the sizes of its lists.
pub fn quote_value(v: &Value) -> String {
    let mut findings = Vec::new();
    collect_findings(v, &mut findings);
    let text = if !findings.is_empty() {
        findings.sort_by_key(|f| std::cmp::Reverse(f.rank()));
        let shown: Vec<String> = findings
            .iter()
            .take(4)
            .map(|f| {
                let share = f
                    .share_pct
                    .map(|s| format!(", {s:.1} % at stake"))
                    .unwrap_or_default();
                format!("{} `{}`: {}{share}", f.severity, f.id, f.title)
            })
            .collect();
        let more = findings.len().saturating_sub(4);
        let mut t = format!("{} finding(s): {}", findings.len(), shown.join("; "));
        if more > 0 {
            t.push_str(&format!("; and {more} more"));
        }
        t
    } else {
        match v {
            Value::Object(o) => brief(o, 0, true),
            other => short(&other.to_string(), 300),
        }
    };
    short(&text, 600)
}

/// Keys worth quoting inside nested objects.
const NESTED_KEYS: &[&str] = &[
    "device",
    "gpu",
    "name",
    "kind",
    "id",
    "collective",
    "short_name",
    "count",
];

/// A compact rendering of an object: scalars, list sizes, and the telling
/// fields (`*_pct`, device, name, ...) of the first items of nested lists, so
/// that per-device and per-window figures survive.
fn brief(o: &Map<String, Value>, depth: usize, full: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(kind) = o
        .get("window")
        .and_then(|w| w.get("kind"))
        .and_then(Value::as_str)
    {
        parts.push(format!("{kind} window"));
    }
    for (k, val) in o {
        if matches!(k.as_str(), "path" | "export" | "window" | "scope") {
            continue;
        }
        let telling = full || k.ends_with("_pct") || NESTED_KEYS.contains(&k.as_str());
        match val {
            Value::String(s) if telling => parts.push(format!("{k}: {}", short(s, 80))),
            Value::Number(n) if telling => parts.push(format!("{k}: {n}")),
            Value::Bool(b) if telling => parts.push(format!("{k}: {b}")),
            Value::Array(items) if items.iter().any(Value::is_object) && depth < 2 => {
                let shown: Vec<String> = items
                    .iter()
                    .filter_map(Value::as_object)
                    .take(3)
                    .map(|i| brief(i, depth + 1, false))
                    .filter(|b| !b.is_empty())
                    .collect();
                let more = items.len().saturating_sub(3);
                if !shown.is_empty() {
                    parts.push(format!(
                        "{k}: [{}{}]",
                        shown.join("; "),
                        if more > 0 {
                            format!("; {more} more")
                        } else {
                            String::new()
                        }
                    ));
                } else if depth == 0 {
                    parts.push(format!("{k}: {} item(s)", items.len()));
                }
            }
            Value::Array(items) if depth == 0 => {
                parts.push(format!("{k}: {} item(s)", items.len()))
            }
            Value::Object(inner) if depth < 2 => {
                let b = brief(inner, depth + 1, depth == 0);
                if !b.is_empty() {
                    parts.push(format!("{k} {{{b}}}"));
                }
            }
            _ => {}
        }
    }
    parts.join(", ")
}

fn short(s: &str, max: usize) -> String {
    super::client::truncate_chars(s, max)
}

/// Shrink a result for the model: long lists keep their first items and say
/// how many were left out; long strings are cut.
pub fn shrink(v: &Value, max_items: usize, max_str: usize) -> Value {
    match v {
        Value::Array(items) if items.len() > max_items => {
            let mut kept: Vec<Value> = items[..max_items]
                .iter()
                .map(|i| shrink(i, max_items, max_str))
                .collect();
            kept.push(Value::String(format!(
                "… {} more item(s) left out; call the tool with a smaller limit or narrower scope to see them",
                items.len() - max_items
            )));
            Value::Array(kept)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| shrink(i, max_items, max_str))
                .collect(),
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), shrink(x, max_items, max_str)))
                .collect(),
        ),
        Value::String(s) if s.chars().count() > max_str => Value::String(short(s, max_str)),
        other => other.clone(),
    }
}

/// Render a result as the text the model reads, within `max_chars`.
pub fn render_for_model(v: &Value, max_chars: usize) -> String {
    for (items, strs) in [(50, 2000), (20, 600), (8, 200), (3, 100)] {
        let text = serde_json::to_string(&shrink(v, items, strs)).unwrap_or_default();
        if text.len() <= max_chars {
            return text;
        }
    }
    let text = serde_json::to_string(&shrink(v, 3, 100)).unwrap_or_default();
    format!(
        "{} [truncated: {} more characters]",
        short(&text, max_chars),
        text.chars().count().saturating_sub(max_chars)
    )
}

/// All evidence gathered for one answer.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    items: Vec<Evidence>,
}

impl Ledger {
    pub fn items(&self) -> &[Evidence] {
        &self.items
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&Evidence> {
        self.items.iter().find(|e| e.id == id)
    }

    /// An earlier call with the same tool and arguments.
    pub fn same_call(&self, tool: &str, args: &Map<String, Value>) -> Option<&Evidence> {
        self.items
            .iter()
            .find(|e| e.tool == tool && &e.arguments == args)
    }

    pub fn record(
        &mut self,
        tool: &str,
        arguments: Map<String, Value>,
        result: Result<Value, OpError>,
    ) -> &Evidence {
        let id = format!("E{}", self.items.len() + 1);
        self.items.push(Evidence {
            id,
            tool: tool.to_string(),
            arguments,
            result,
        });
        self.items.last().expect("just pushed")
    }

    /// Successful evidence from `tool`.
    pub fn from_tool(&self, tool: &str) -> Option<&Evidence> {
        self.items.iter().find(|e| e.tool == tool && e.ok())
    }
}

/// Evidence labels cited in `text`: `[E1]`, `[E2, E3]`, `[E4][E5]`, in order of
/// first appearance.
pub fn cited_ids(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'['
            && let Some(end) = text[i + 1..].find(']')
        {
            let inner = &text[i + 1..i + 1 + end];
            let labels: Vec<&str> = inner
                .split([',', ';', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            let all_labels = !labels.is_empty()
                && labels.iter().all(|l| {
                    l.len() >= 2
                        && (l.starts_with('E') || l.starts_with('e'))
                        && l[1..].chars().all(|c| c.is_ascii_digit())
                });
            if all_labels {
                for l in labels {
                    let id = format!("E{}", &l[1..]);
                    if !out.contains(&id) {
                        out.push(id);
                    }
                }
            }
            i += end + 2;
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn citations_are_parsed_in_order_without_duplicates() {
        let text =
            "GPU idles [E2]. Copies are pinned [E1, E3]; see [E2][e4] and [not a cite] [E] [x1].";
        assert_eq!(cited_ids(text), vec!["E2", "E1", "E3", "E4"]);
    }

    #[test]
    fn findings_are_found_anywhere_and_quoted() {
        let v = json!({"path": "a.sqlite", "findings": [
            {"id": "gpu_starvation", "title": "GPU starved", "severity": "high", "share_pct": 41.25,
             "evidence": "39 gaps of 5.1–5.5 ms", "why": "host stalls", "fix": ["prefetch"], "verify": "busy % up"},
            {"id": "tiny", "title": "small", "severity": "info", "gist": "0.02 ms per step"},
            {"id": "not_a_finding", "severity": "bogus"}
        ]});
        let mut f = Vec::new();
        collect_findings(&v, &mut f);
        assert_eq!(f.len(), 2);
        // A default answer's finding: its line of numbers stands for the evidence it left out.
        assert_eq!(f[1].evidence.as_deref(), Some("0.02 ms per step"));
        assert_eq!(f[0].id, "gpu_starvation");
        assert_eq!(f[0].fix.as_deref(), Some("prefetch"));
        assert!(f[0].at_least("medium") && !f[1].at_least("medium"));
        let q = quote_value(&v);
        assert!(
            q.starts_with("2 finding(s): high `gpu_starvation`: GPU starved, 41.2 % at stake"),
            "{q}"
        );
    }

    #[test]
    fn results_are_shrunk_to_fit() {
        let big = json!({"rows": (0..500).map(|i| json!({"i": i, "name": "x".repeat(50)})).collect::<Vec<_>>()});
        let text = render_for_model(&big, 4000);
        assert!(text.len() <= 4100, "{}", text.len());
        assert!(text.contains("more item(s) left out"));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["rows"].as_array().unwrap().len() < 500);
    }

    #[test]
    fn quotes_of_plain_results_list_scalars() {
        let v = json!({"version": "0.1.0", "tool_count": 42, "gpu": {"available": false, "reason": "no driver"}, "devices": [1, 2]});
        assert_eq!(
            quote_value(&v),
            "version: 0.1.0, tool_count: 42, gpu {available: false, reason: no driver}, devices: 2 item(s)"
        );
        let util = json!({"path": "t.sqlite", "devices": [{"device": 0, "gpu": "NVIDIA H200", "kernels": 3689,
            "windows": [{"window": {"kind": "span", "start_ns": 1}, "busy_ns": 5, "busy_pct": 5.37},
                        {"window": {"kind": "steady"}, "busy_pct": 8.67}]}]});
        assert_eq!(
            quote_value(&util),
            "devices: [device: 0, gpu: NVIDIA H200, windows: [span window, busy_pct: 5.37; steady window, busy_pct: 8.67]]"
        );
    }
}
