//! Small HTML helpers shared by the server-rendered parts of the dashboard:
//! escaping, numbers as people read them, reading answers leniently (a field
//! an answer lacks renders as empty, never as a panic), the error box.

use serde_json::Value;

use crate::error::OpError;

/// Escape text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A duration in ns as people read it.
pub fn fmt_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// An absolute export timestamp as seconds of the capture's timebase.
pub fn fmt_ts(ns: i64) -> String {
    format!("{:.6} s", ns as f64 / 1e9)
}

pub fn int_sep(n: i64) -> String {
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}
pub fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}
pub fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}
pub fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// An error as the page shows it: kind, message, hint.
pub fn error_box(err: &OpError) -> String {
    let hint = if err.hint.is_empty() {
        String::new()
    } else {
        format!(r#"<div class="hint">{}</div>"#, esc(&err.hint))
    };
    format!(
        r#"<div class="error" data-kind="{kind}"><span class="kind">{kind}</span> {msg}{hint}</div>"#,
        kind = esc(err.kind.as_str()),
        msg = esc(&err.message),
    )
}

/// An optional number with `digits` decimals, or an em dash when the answer has none.
pub fn num(v: &Value, digits: usize) -> String {
    v.as_f64()
        .map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "—".into())
}

/// A measured value as people read it: thousands separators from 1,000 up (with
/// its tenths when it has any, e.g. a median of an even count), two decimals
/// below; an em dash when the answer has none.
pub fn measured(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.abs() >= 1000.0 => {
            let tenths = (x * 10.0).round() as i64;
            if tenths % 10 == 0 {
                int_sep(tenths / 10)
            } else {
                format!("{}.{}", int_sep(tenths / 10), (tenths % 10).abs())
            }
        }
        Some(x) => format!("{x:.2}"),
        None => "—".into(),
    }
}

/// A signed percentage (`+2.60 %`), or an em dash.
pub fn pct_delta(v: &Value) -> String {
    v.as_f64()
        .map(|x| format!("{x:+.2} %"))
        .unwrap_or_else(|| "—".into())
}

/// A link to a tool's generated form, filled with `args`.
pub fn tool_link(tool: &str, args: &Value, text: &str) -> String {
    let args = serde_json::to_string(args).unwrap_or_else(|_| "{}".into());
    format!(
        r#"<a href="/tools/{}?args={}">{}</a>"#,
        esc(tool),
        esc(&url_encode(&args)),
        esc(text)
    )
}

/// Percent-encoding for a query value (everything but unreserved characters).
pub fn url_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_links_read_well() {
        assert_eq!(measured(&json!(8989407.5)), "8,989,407.5");
        assert_eq!(measured(&json!(-87168359.0)), "-87,168,359");
        assert_eq!(measured(&json!(1.894)), "1.89");
        assert_eq!(measured(&json!(null)), "—");
        assert_eq!(pct_delta(&json!(-37.9)), "-37.90 %");
        assert_eq!(pct_delta(&json!(2.6)), "+2.60 %");
        assert_eq!(url_encode("/a b/c.sqlite"), "%2Fa%20b%2Fc.sqlite");
        assert_eq!(
            tool_link("aisp_profile_summary", &json!({"path": "r.sqlite"}), "x"),
            r#"<a href="/tools/aisp_profile_summary?args=%7B%22path%22%3A%22r.sqlite%22%7D">x</a>"#
        );
    }
}
