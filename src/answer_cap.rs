//! The most characters one answer costs an assistant.
//!
//! An MCP client shows a model a tool's structured answer as indented JSON (the
//! agent-eval harness prints `json.dumps(answer, indent=1)`: one key or item a
//! line). A detailed answer over many devices or steps can run to 30,000
//! characters and more, most of it rows the question did not need. Over MCP an
//! answer of an operation that says what it leaves out (its output has a
//! top-level `left_out`) therefore stops at [`MCP_ANSWER_CAP`] characters: the
//! longest lists lose their last rows (they are ranked, most important first)
//! until it fits, and `left_out` names every list cut, how many rows it kept, and
//! the `max_chars` that brings the whole answer back. The CLI, the HTTP API and
//! the Python API answer in full unless `max_chars` is given. Numbers are never
//! rounded: only whole rows go.

use serde_json::{Map, Value, json};

/// The most characters (indented as a client shows them) an answer takes over MCP by default.
pub const MCP_ANSWER_CAP: usize = 6_000;

/// The smallest `max_chars` accepted: below it even a verdict and its first finding do not fit.
pub const MIN_ANSWER_CAP: usize = 1_000;

/// The input every operation with a `left_out` takes (added to its schema by the registry).
pub const MAX_CHARS: &str = "max_chars";

/// Whether an operation's output says what it leaves out: an object whose `left_out` is a list of sentences.
pub fn says_left_out(output_schema: &Map<String, Value>) -> bool {
    output_schema
        .get("properties")
        .and_then(|p| p.get("left_out"))
        .is_some_and(|l| {
            l.get("type") == Some(&json!("array"))
                && l.pointer("/items/type") == Some(&json!("string"))
        })
}

/// The `max_chars` input, added to the schema of each operation that says what it leaves out. Its description says
/// to raise it only when `left_out` names a cut: an assistant that reads "a cap" raises it on every call first
/// (the fourth evaluation's rerun: 20,000-60,000 on each of its 12 calls, 29,042 characters a case).
pub fn add_input(schema: &mut Map<String, Value>) {
    if let Some(props) = schema
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        // `MIN_ANSWER_CAP` is checked by the dispatcher; the listing carries only what a caller needs.
        props.entry(MAX_CHARS).or_insert(json!({
            "type": "integer",
            "description": format!("Only as left_out advises; default {MCP_ANSWER_CAP} over MCP")
        }));
    }
}

/// `len(json.dumps(v, indent=1))` (ASCII-escaped): what a client shows a model of an answer.
pub fn printed_len(v: &Value) -> usize {
    indented_len(v, 0)
}

fn indented_len(v: &Value, depth: usize) -> usize {
    // Each key or item takes a line: a newline and one space per level.
    let line = |d: usize| 1 + d;
    match v {
        Value::Array(items) if !items.is_empty() => {
            2 + items.len() * line(depth + 1)
                + items
                    .iter()
                    .map(|x| indented_len(x, depth + 1))
                    .sum::<usize>()
                + (items.len() - 1)
                + line(depth)
        }
        Value::Object(m) if !m.is_empty() => {
            2 + m.len() * line(depth + 1)
                + m.iter()
                    .map(|(k, x)| {
                        crate::registry::schema::python_json_len(&json!(k))
                            + 2
                            + indented_len(x, depth + 1)
                    })
                    .sum::<usize>()
                + (m.len() - 1)
                + line(depth)
        }
        other => crate::registry::schema::python_json_len(other),
    }
}

/// A list the cap shortened: where, how many rows it had and how many it kept.
#[derive(Debug, Clone, PartialEq)]
struct Cut {
    pointer: String,
    total: usize,
    kept: usize,
}

/// Hold `answer` to `cap` characters: the longest list (most rows, then the first found) loses its last row until
/// the answer fits or every list is down to one row; `left_out` then names each list cut. Returns whether anything
/// was cut.
pub fn fit(answer: &mut Value, cap: usize) -> bool {
    let whole = printed_len(answer);
    if whole <= cap || !answer.is_object() {
        return false;
    }
    let mut len = whole;
    let mut cuts: Vec<Cut> = Vec::new();
    while len > cap {
        let Some((pointer, depth)) = longest_list(answer) else {
            break;
        };
        let Some(Value::Array(items)) = answer.pointer_mut(&pointer) else {
            break;
        };
        let total = items.len();
        let Some(last) = items.pop() else { break };
        // The row, its line, and the comma before it.
        len -= indented_len(&last, depth + 1) + 1 + (depth + 1) + 1;
        match cuts.iter_mut().find(|c| c.pointer == pointer) {
            Some(c) => c.kept = total - 1,
            None => cuts.push(Cut {
                pointer,
                total,
                kept: total - 1,
            }),
        }
    }
    if cuts.is_empty() {
        return false;
    }
    note(answer, &cuts, whole, cap);
    true
}

/// The list to cut next: the deepest with at least two rows, then the one with the most rows (the first found
/// on a tie), never `left_out` itself; with its depth. Deepest first: rows inside a device's or a finding's entry
/// are detail, and every device and finding keeps its place as long as anything else can go.
fn longest_list(v: &Value) -> Option<(String, usize)> {
    type Best = Option<(String, usize, usize)>;
    fn walk(v: &Value, pointer: &mut String, depth: usize, best: &mut Best) {
        match v {
            Value::Array(items) => {
                let better = best
                    .as_ref()
                    .is_none_or(|(_, n, d)| (depth, items.len()) > (*d, *n));
                if items.len() >= 2 && better {
                    *best = Some((pointer.clone(), items.len(), depth));
                }
                for (i, x) in items.iter().enumerate() {
                    let at = pointer.len();
                    pointer.push_str(&format!("/{i}"));
                    walk(x, pointer, depth + 1, best);
                    pointer.truncate(at);
                }
            }
            Value::Object(m) => {
                for (k, x) in m {
                    if depth == 0 && k == "left_out" {
                        continue;
                    }
                    let at = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    walk(x, pointer, depth + 1, best);
                    pointer.truncate(at);
                }
            }
            _ => {}
        }
    }
    let mut best = None;
    walk(v, &mut String::new(), 0, &mut best);
    best.map(|(p, _, d)| (p, d))
}

/// A cut list's name with its positions in outer lists as `[]`: `/devices/0/steps` is `devices[].steps`.
fn list_name(pointer: &str) -> String {
    let mut name = String::new();
    for part in pointer.trim_start_matches('/').split('/') {
        if part.parse::<usize>().is_ok() {
            name.push_str("[]");
        } else {
            if !name.is_empty() {
                name.push('.');
            }
            name.push_str(&part.replace("~1", "/").replace("~0", "~"));
        }
    }
    name
}

/// The `left_out` line: each list cut (`rows`: 7 of 30 kept) and how to get the rest.
fn note(answer: &mut Value, cuts: &[Cut], whole: usize, cap: usize) {
    // Lists of one name (`devices[].steps`) are told together: their rows kept of their rows in all.
    let mut named: Vec<(String, usize, usize, usize)> = Vec::new();
    for c in cuts {
        let name = list_name(&c.pointer);
        match named.iter_mut().find(|(n, ..)| *n == name) {
            Some((_, lists, kept, total)) => {
                *lists += 1;
                *kept += c.kept;
                *total += c.total;
            }
            None => named.push((name, 1, c.kept, c.total)),
        }
    }
    let lists: Vec<String> = named
        .iter()
        .map(|(name, lists, kept, total)| match lists {
            1 => format!("`{name}` {kept} of {total}"),
            n => format!("`{name}` {kept} of {total} (in {n} lists)"),
        })
        .collect();
    // The whole answer plus room for the note, rounded up to a thousand.
    let all = whole.div_ceil(1000) * 1000;
    let line = format!(
        "Held to {cap} characters ({whole} whole) by cutting the last rows of: {}. \
         `{MAX_CHARS}: {all}` gives all of it; or ask a narrower question (`limit`, a device, steps or a window).",
        lists.join(", ")
    );
    if let Some(obj) = answer.as_object_mut() {
        match obj.entry("left_out").or_insert_with(|| json!([])) {
            Value::Array(items) => items.push(Value::String(line)),
            other => *other = json!([line]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_indent1_len(v: &Value) -> usize {
        // serde_json's pretty printer with a one-space indent and Python's separators.
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        serde::Serialize::serialize(v, &mut ser).unwrap();
        String::from_utf8(buf).unwrap().len()
    }

    #[test]
    fn printed_len_is_indented_json() {
        let v = json!({"a": [1, 2, {"b": "x", "c": []}], "d": {}, "e": null, "f": 1.5});
        assert_eq!(printed_len(&v), python_indent1_len(&v));
    }

    #[test]
    fn an_answer_under_the_cap_is_untouched() {
        let mut v = json!({"rows": [1, 2, 3]});
        let before = v.clone();
        assert!(!fit(&mut v, 1_000));
        assert_eq!(v, before);
    }

    #[test]
    fn the_longest_list_loses_its_last_rows_and_left_out_says_so() {
        let rows: Vec<Value> = (0..40)
            .map(|i| json!({"name": format!("kernel_{i}"), "ns": i * 1000}))
            .collect();
        let mut v = json!({"devices": [0, 1], "rows": rows, "left_out": ["earlier note"]});
        let whole = printed_len(&v);
        assert!(fit(&mut v, 1_500));
        let kept = v["rows"].as_array().unwrap();
        assert!(kept.len() < 40 && kept.len() >= 2);
        // The first rows stay, in order; the two-row list of devices is untouched.
        assert_eq!(kept[0]["name"], "kernel_0");
        assert_eq!(v["devices"].as_array().unwrap().len(), 2);
        let notes = v["left_out"].as_array().unwrap();
        assert_eq!(notes[0], "earlier note");
        let line = notes[1].as_str().unwrap();
        assert!(
            line.contains(&format!("`rows` {} of 40", kept.len())),
            "{line}"
        );
        assert!(line.contains(&format!("({whole} whole)")), "{line}");
        // Without the note the rows fit; the note is the only thing past the cap.
        let mut body = v.clone();
        body["left_out"].as_array_mut().unwrap().pop();
        assert!(printed_len(&body) <= 1_500);
    }

    #[test]
    fn nested_lists_are_cut_in_turn() {
        let steps = |n: usize| -> Vec<Value> {
            (0..n)
                .map(|i| json!({"step": i, "ns": 1_000_000 + i}))
                .collect()
        };
        let mut v = json!({"devices": [{"steps": steps(25)}, {"steps": steps(25)}]});
        assert!(fit(&mut v, 2_000));
        let a = v["devices"][0]["steps"].as_array().unwrap().len();
        let b = v["devices"][1]["steps"].as_array().unwrap().len();
        assert!(a.abs_diff(b) <= 1, "{a} {b}");
        assert_eq!(v["devices"].as_array().unwrap().len(), 2);
        let line = v["left_out"][0].as_str().unwrap();
        assert!(
            line.contains(&format!("`devices[].steps` {} of 50 (in 2 lists)", a + b)),
            "{line}"
        );
    }

    #[test]
    fn a_list_keeps_one_row_at_least() {
        let mut v = json!({"rows": ["a".repeat(3000), "b".repeat(3000)]});
        assert!(fit(&mut v, 1_000));
        assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    }
}
