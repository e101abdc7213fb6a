//! Human-readable rendering of any operation's JSON output: scalars as
//! aligned `key: value` lines, arrays of objects as tables, nested objects as
//! indented sections. JSON stays the machine format; this is for terminals.

use std::fmt::Write;

use serde_json::{Map, Value};

/// Widest a table cell may be before it is cut (with an ellipsis).
const MAX_CELL: usize = 60;
/// Most rows shown per table (the JSON output has all of them).
const MAX_ROWS: usize = 50;

pub fn render(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) => render_object(&mut out, map, 0),
        Value::Array(items) => render_array(&mut out, "", items, 0),
        other => {
            let _ = writeln!(out, "{}", scalar(other));
        }
    }
    out
}

fn render_object(out: &mut String, map: &Map<String, Value>, indent: usize) {
    let pad = " ".repeat(indent);
    let scalars: Vec<(&String, &Value)> = map
        .iter()
        .filter(|(_, v)| is_scalar(v) || is_scalar_list(v))
        .collect();
    let width = scalars.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &scalars {
        let text = if let Value::Array(items) = v {
            if items.is_empty() {
                "-".to_string()
            } else {
                items.iter().map(scalar).collect::<Vec<_>>().join(", ")
            }
        } else {
            scalar(v)
        };
        let _ = writeln!(out, "{pad}{k:<width$}  {text}");
    }
    for (k, v) in map {
        match v {
            Value::Object(inner) if !inner.is_empty() => {
                let _ = writeln!(out, "\n{pad}{k}:");
                render_object(out, inner, indent + 2);
            }
            Value::Array(items) if !is_scalar_list(v) && !items.is_empty() => {
                render_array(out, k, items, indent);
            }
            _ => {}
        }
    }
}

fn render_array(out: &mut String, title: &str, items: &[Value], indent: usize) {
    let pad = " ".repeat(indent);
    if !title.is_empty() {
        let _ = writeln!(out, "\n{pad}{title} ({}):", items.len());
    }
    let objects: Vec<&Map<String, Value>> = items.iter().filter_map(Value::as_object).collect();
    if objects.len() != items.len() {
        for item in items.iter().take(MAX_ROWS) {
            let _ = writeln!(out, "{pad}  - {}", cut(&compact(item)));
        }
        return;
    }
    // Columns: scalar fields in first-seen order.
    let mut columns: Vec<String> = Vec::new();
    for obj in &objects {
        for (k, v) in obj.iter() {
            if (is_scalar(v) || is_scalar_list(v)) && !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    let rows: Vec<Vec<String>> = objects
        .iter()
        .take(MAX_ROWS)
        .map(|obj| {
            columns
                .iter()
                .map(|c| match obj.get(c) {
                    Some(Value::Array(items)) => {
                        cut(&items.iter().map(scalar).collect::<Vec<_>>().join(", "))
                    }
                    Some(v) => cut(&scalar(v)),
                    None => String::new(),
                })
                .collect()
        })
        .collect();
    if !columns.is_empty() {
        let widths: Vec<usize> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(c.len())
            })
            .collect();
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let _ = writeln!(out, "{pad}  {}", line(&columns));
        for row in &rows {
            let _ = writeln!(out, "{pad}  {}", line(row));
        }
    }
    if objects.len() > MAX_ROWS {
        let _ = writeln!(
            out,
            "{pad}  ... {} more (use --format json for all)",
            objects.len() - MAX_ROWS
        );
    }
    // Nested structure inside rows is summarised, not expanded.
    let nested = objects
        .iter()
        .any(|o| o.values().any(|v| !is_scalar(v) && !is_scalar_list(v)));
    if nested {
        let _ = writeln!(
            out,
            "{pad}  (rows have nested fields: use --format json to see them)"
        );
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

fn is_scalar_list(v: &Value) -> bool {
    matches!(v, Value::Array(items) if items.iter().all(is_scalar))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                group_thousands(i)
            } else if let Some(f) = n.as_f64() {
                if f.abs() >= 1000.0 {
                    format!("{f:.1}")
                } else {
                    let s = format!("{f:.4}");
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                }
            } else {
                n.to_string()
            }
        }
        other => other.to_string(),
    }
}

fn group_thousands(i: i64) -> String {
    let digits = i.unsigned_abs().to_string();
    let mut out = String::new();
    for (n, c) in digits.chars().enumerate() {
        if n > 0 && (digits.len() - n).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if i < 0 { format!("-{out}") } else { out }
}

fn compact(v: &Value) -> String {
    if is_scalar(v) {
        scalar(v)
    } else {
        v.to_string()
    }
}

fn cut(s: &str) -> String {
    let s = s.replace('\n', " ");
    if s.chars().count() <= MAX_CELL {
        s
    } else {
        let mut t: String = s.chars().take(MAX_CELL - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_tables_and_numbers_render_readably() {
        let v = json!({
            "version": "0.1.0",
            "count": 1234567,
            "ratio": 0.125,
            "gpu": {"available": false, "reason": "no driver"},
            "rows": [{"name": "a", "ns": 10}, {"name": "b", "ns": 2000, "extra": true}],
            "tags": ["x", "y"]
        });
        let text = render(&v);
        assert!(text.contains("count    1,234,567"), "{text}");
        assert!(text.contains("ratio    0.125"));
        assert!(text.contains("tags     x, y"));
        assert!(text.contains("gpu:\n  available  false\n  reason     no driver"));
        assert!(text.contains("rows (2):"));
        assert!(text.contains("name  ns     extra"));
        assert!(text.contains("b     2,000  true"));
    }

    #[test]
    fn long_cells_are_cut() {
        let long = "k".repeat(200);
        let text = render(&json!({"rows": [{"name": long}]}));
        assert!(text.contains('…'));
        assert!(!text.contains(&"k".repeat(100)));
    }
}
