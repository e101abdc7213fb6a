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
//! the `max_chars` that brings the whole answer back (`max_chars` is listed in
//! no schema: the note is where an assistant learns of it). Before any row goes, an
//! operation may name parts an assistant can best spare ([`Shed`]: findings under
//! 1 %, a finding's `data` that repeats its evidence as fields, the standing
//! text of its rule): they go first, in order, and only while the answer is too
//! long. The CLI, the HTTP API and the Python API answer in full unless
//! `max_chars` is given. Numbers are never rounded: only whole fields and rows
//! go.

use serde_json::{Value, json};

/// The most characters (indented as a client shows them) an answer takes over MCP by default.
pub const MCP_ANSWER_CAP: usize = 4_500;

/// The smallest `max_chars` accepted: below it even a verdict and its first finding do not fit.
pub const MIN_ANSWER_CAP: usize = 1_000;

/// The input every operation with a `left_out` takes. It is in no tool's listed schema: an assistant that reads of a
/// size it may raise raises it on its first call (the fourth evaluation's rerun: 20,000-60,000 on each of its 12
/// calls; the ninth: 12,000-40,000 on 15 of 16). A cut answer's `left_out` names it with the value that brings the
/// answer whole, and the dispatcher takes it from any caller.
pub const MAX_CHARS: &str = "max_chars";

/// Whether an operation's output says what it leaves out: an object whose `left_out` is a list of sentences (the
/// test that holds `OpSpec::leaves_out` to the output schemas reads it).
#[cfg(test)]
pub fn says_left_out(output_schema: &serde_json::Map<String, Value>) -> bool {
    output_schema
        .get("properties")
        .and_then(|p| p.get("left_out"))
        .is_some_and(|l| {
            l.get("type") == Some(&json!("array"))
                && l.pointer("/items/type") == Some(&json!("string"))
        })
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

/// A part of an answer that goes before any row is cut, named as an operation declares it
/// (`OpSpec::sheds`): `field` (a top-level field, or `a.b.field` inside objects), `list[].field` (that field of every
/// row of a list, top-level or `a.list` inside objects), `list[key=value]` (the rows of a top-level list whose `key` is the string `value`), or
/// `list[key=value].field` (that field of those rows only: the minor findings' wording goes before the major ones'),
/// or either with `field[:N]` (that list field keeps its first N rows), or `list[:N]` (a list keeps its first N rows).
pub type Shed = &'static str;

/// What one shed removed: its name as told in `left_out`, and how many fields or rows.
struct Shedded {
    name: &'static str,
    count: usize,
}

/// Remove `shed` from `answer`; how many fields or rows went.
fn shed_one(answer: &mut Value, shed: Shed) -> usize {
    let Some(obj) = answer.as_object_mut() else {
        return 0;
    };
    let Some((list, rest)) = shed.split_once('[') else {
        // `a.b.c`: the field `c` of the object at `a.b`.
        let (parents, field) = shed.rsplit_once('.').unwrap_or(("", shed));
        return object_at(obj, parents).map_or(0, |at| usize::from(at.remove(field).is_some()));
    };
    // `a.b.list`: the list inside objects.
    let (parents, list) = list.rsplit_once('.').unwrap_or(("", list));
    let Some(at) = object_at(obj, parents) else {
        return 0;
    };
    let Some(Value::Array(rows)) = at.get_mut(list) else {
        return 0;
    };
    // `[key=value]` selects rows; `[].field` names a field of every row; `[:N]` keeps the first N rows.
    let (selector, field) = rest.split_once(']').unwrap_or((rest, ""));
    let field = field.trim_start_matches('.');
    if let Some(keep) = selector
        .strip_prefix(':')
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|_| field.is_empty())
    {
        let went = rows.len().saturating_sub(keep);
        rows.truncate(keep);
        return went;
    }
    // `key=value` matches a string field equal to `value`, or another scalar printed as `value` (`same=true`).
    let selected = |r: &Value| match selector.split_once('=') {
        Some((key, value)) => r.get(key).is_some_and(|v| match v {
            Value::String(s) => s == value,
            Value::Bool(b) => value.parse::<bool>().ok() == Some(*b),
            Value::Number(n) => value.parse::<f64>().ok() == n.as_f64(),
            _ => false,
        }),
        None => true,
    };
    if field.is_empty() {
        let before = rows.len();
        rows.retain(|r| !selected(r));
        return before - rows.len();
    }
    let rows = rows
        .iter_mut()
        .filter(|r| selected(r))
        .filter_map(Value::as_object_mut);
    // `field[:N]`: the field is a list that keeps its first N rows; how many rows went.
    if let Some((field, keep)) = field
        .strip_suffix(']')
        .and_then(|f| f.split_once("[:"))
        .and_then(|(f, n)| Some((f, n.parse::<usize>().ok()?)))
    {
        return rows
            .filter_map(|r| r.get_mut(field).and_then(Value::as_array_mut))
            .map(|items| {
                let went = items.len().saturating_sub(keep);
                items.truncate(keep);
                went
            })
            .sum();
    }
    rows.map(|r| r.remove(field).is_some())
        .filter(|&removed| removed)
        .count()
}

/// The object at the dotted path `parents` (`a.b`; empty: `obj` itself), if every step is an object.
fn object_at<'v>(
    obj: &'v mut serde_json::Map<String, Value>,
    parents: &str,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    parents
        .split('.')
        .filter(|k| !k.is_empty())
        .try_fold(obj, |at, key| {
            at.get_mut(key).and_then(Value::as_object_mut)
        })
}

/// A list the cap shortened: where, how many rows it had and how many it kept.
#[derive(Debug, Clone, PartialEq)]
struct Cut {
    pointer: String,
    total: usize,
    kept: usize,
}

/// Hold `answer` to `held_to` characters, its `left_out` note included. Lists are cut deepest first, each losing its last rows; at one depth the
/// longest lose rows first, one row at a time, so lists of one depth end within a row of each other, and a list
/// loses no row it need not (found at once: the row count all of them can keep, then one list at a time). Only
/// when one row each is still too much does the next depth up lose rows. `left_out` then names each list cut.
/// Returns whether anything was cut. One walk of the answer per depth, whatever its size. `sheds` go first, in
/// order, each only while the answer is still too long. `one_whole`, the argument that brings one shed part back
/// whole, is named first in the note when parts were shed (an assistant that wants one finding's every field need
/// not take the whole answer).
pub fn fit(answer: &mut Value, held_to: usize, sheds: &[Shed], one_whole: Option<&str>) -> bool {
    let whole = printed_len(answer);
    if whole <= held_to || !answer.is_object() {
        return false;
    }
    // Room for the note that says what went: [`NOTE_ROOM`], or, when a note naming many parts overran it, what
    // it took (a second pass from the whole answer, with that much less room for the rest).
    let original = answer.clone();
    let mut room = NOTE_ROOM;
    loop {
        if !fit_within(answer, whole, held_to, room, sheds, one_whole) {
            return false;
        }
        let over = printed_len(answer).saturating_sub(held_to);
        // A longer note can come of cutting more: a few passes settle it.
        if over == 0 || room > 4 * NOTE_ROOM {
            return true;
        }
        room += over;
        *answer = original.clone();
    }
}

/// [`fit`] with `room` characters kept for the note.
fn fit_within(
    answer: &mut Value,
    whole: usize,
    held_to: usize,
    room: usize,
    sheds: &[Shed],
    one_whole: Option<&str>,
) -> bool {
    // What the answer is held to before its `left_out` note, so that with the note it stays within the cap.
    let cap = held_to.saturating_sub(room).max(MIN_ANSWER_CAP / 2);
    let mut shedded = Vec::new();
    for &shed in sheds {
        let count = shed_one(answer, shed);
        if count > 0 {
            shedded.push(Shedded { name: shed, count });
            if printed_len(answer) <= cap {
                break;
            }
        }
    }
    let mut len = printed_len(answer);
    let mut cuts: Vec<Cut> = Vec::new();
    for depth in (0..=deepest_list(answer, 0)).rev() {
        if len <= cap {
            break;
        }
        let mut lists = Vec::new();
        lists_at(answer, depth, 0, &mut String::new(), &mut lists);
        let Some(keep) = rows_to_keep(&lists, len - cap) else {
            continue;
        };
        // Every list down to one row more than `keep` (that does not fit yet), then, in order, one list at a time
        // down to `keep` until it fits: lists whose rows are few lose only what they must.
        let mut kept: Vec<usize> = lists
            .iter()
            .map(|l| l.row_chars.len().min(keep + 1))
            .collect();
        len -= lists
            .iter()
            .zip(&kept)
            .map(|(l, &k)| l.row_chars[k..].iter().sum::<usize>())
            .sum::<usize>();
        for (l, k) in lists.iter().zip(kept.iter_mut()) {
            if len <= cap {
                break;
            }
            if *k > keep {
                *k = keep;
                len -= l.row_chars[keep];
            }
        }
        for (list, &k) in lists.iter().zip(&kept) {
            if k == list.row_chars.len() {
                continue;
            }
            if let Some(Value::Array(items)) = answer.pointer_mut(&list.pointer) {
                items.truncate(k);
            }
            cuts.push(Cut {
                pointer: list.pointer.clone(),
                total: list.row_chars.len(),
                kept: k,
            });
        }
    }
    if cuts.is_empty() && shedded.is_empty() {
        return false;
    }
    note(answer, &shedded, &cuts, whole, held_to, one_whole);
    true
}

/// The characters a cut answer keeps free for the note that says what went (a few parts and lists named).
const NOTE_ROOM: usize = 300;

/// A list that may be cut: where it is and what each of its rows costs (the row, its line and its comma).
struct List {
    pointer: String,
    row_chars: Vec<usize>,
}

/// The rows each list keeps so that cutting the rest saves at least `excess` characters: the largest such count
/// (at least one row). `None` when no list has two rows.
fn rows_to_keep(lists: &[List], excess: usize) -> Option<usize> {
    let longest = lists.iter().map(|l| l.row_chars.len()).max()?;
    let saved = |keep: usize| -> usize {
        lists
            .iter()
            .map(|l| l.row_chars.iter().skip(keep).sum::<usize>())
            .sum()
    };
    // What is saved shrinks as more rows are kept: the largest count that still saves enough.
    let (mut lo, mut hi) = (1, longest);
    if saved(1) < excess {
        return Some(1);
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if saved(mid) >= excess {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// The depth of the deepest list the cap may shorten ([`cuttable`]; the answer's own fields are at depth 1).
fn deepest_list(v: &Value, depth: usize) -> usize {
    let below = match v {
        Value::Array(items) => items.iter().map(|x| deepest_list(x, depth + 1)).max(),
        Value::Object(m) => m
            .iter()
            .filter(|(k, _)| depth != 0 || k.as_str() != "left_out")
            .map(|(_, x)| deepest_list(x, depth + 1))
            .max(),
        _ => None,
    };
    let here = match v {
        Value::Array(items) if cuttable(items) => depth,
        _ => 0,
    };
    below.unwrap_or(0).max(here)
}

/// Whether the cap may shorten a list: it has two rows or more, and they are not all numbers. A list of numbers is a
/// tuple (a window's `[start, end]`) or a series indexed by position (a value per rank or step): a shorter one says
/// something else, and its rows cost a few characters each.
fn cuttable(items: &[Value]) -> bool {
    items.len() >= 2 && !items.iter().all(|x| x.is_number() || x.is_null())
}

/// The lists the cap may shorten at `depth`, never `left_out` itself, with their rows' costs.
fn lists_at(v: &Value, depth: usize, at: usize, pointer: &mut String, out: &mut Vec<List>) {
    match v {
        Value::Array(items) if at == depth && cuttable(items) => out.push(List {
            pointer: pointer.clone(),
            // A row at depth + 1: its text, its line (a newline and its indent) and the comma before it.
            row_chars: items
                .iter()
                .map(|x| indented_len(x, depth + 1) + 1 + (depth + 1) + 1)
                .collect(),
        }),
        Value::Array(items) if at < depth => {
            for (i, x) in items.iter().enumerate() {
                let mark = pointer.len();
                pointer.push_str(&format!("/{i}"));
                lists_at(x, depth, at + 1, pointer, out);
                pointer.truncate(mark);
            }
        }
        Value::Object(m) if at < depth => {
            for (k, x) in m {
                if at == 0 && k == "left_out" {
                    continue;
                }
                let mark = pointer.len();
                pointer.push('/');
                pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                lists_at(x, depth, at + 1, pointer, out);
                pointer.truncate(mark);
            }
        }
        _ => {}
    }
}

/// The parts shed, told in short: fields of one list's rows shed from as many rows are named together
/// (`findings[].{data, why} (2 each)`, `findings[severity=low].{evidence, basis} (4 each)`), as are fields of one
/// object (`before.{export, driver}`).
fn shed_parts(shedded: &[Shedded]) -> Vec<String> {
    // (prefix, joint, fields, rows): `list[` + `].` + field for a list's field (`list[].field`,
    // `list[key=value].field`), `a` + `.` + field for an object's field (`a.field`), (name, "", [], count) for
    // any other part.
    let mut groups: Vec<(&str, &str, Vec<&str>, usize)> = Vec::new();
    for s in shedded {
        let (prefix, joint, field) = match s.name.split_once("].") {
            Some((list, field)) => (list, "].", field),
            None if !s.name.contains('[') && s.name.contains('.') => {
                let (parent, field) = s.name.rsplit_once('.').unwrap_or(("", s.name));
                (parent, ".", field)
            }
            None => {
                groups.push((s.name, "", Vec::new(), s.count));
                continue;
            }
        };
        match groups.iter_mut().find(|(p, j, fields, n)| {
            *p == prefix && *j == joint && *n == s.count && !fields.is_empty()
        }) {
            Some((_, _, fields, _)) => fields.push(field),
            None => groups.push((prefix, joint, vec![field], s.count)),
        }
    }
    groups
        .into_iter()
        .map(
            |(name, joint, fields, n)| match (joint, fields.as_slice()) {
                (".", [one]) => format!("`{name}.{one}`"),
                (".", many) => format!("`{name}.{{{}}}`", many.join(", ")),
                (_, [one]) if one.ends_with(']') => match one.split_once("[:") {
                    Some((field, keep)) => format!(
                        "`{name}].{field}` past its first {} ({n} rows)",
                        match keep.trim_end_matches(']') {
                            "1" => "row".to_string(),
                            k => format!("{k} rows"),
                        }
                    ),
                    None => format!("`{name}].{one}` ({n})"),
                },
                (_, []) => match name.strip_suffix(']').and_then(|n| n.split_once("[:")) {
                    Some((list, keep)) => format!(
                        "`{list}` past its first {} ({n} rows)",
                        match keep {
                            "1" => "row".to_string(),
                            k => format!("{k} rows"),
                        }
                    ),
                    None if name.contains('[') => format!("`{name}` ({n})"),
                    None => format!("`{name}`"),
                },
                (_, [one]) => format!("`{name}].{one}` ({n})"),
                (_, many) => format!("`{name}].{{{}}}` ({n} each)", many.join(", ")),
            },
        )
        .collect()
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

/// The `left_out` line: each part shed, each list cut (`rows`: 7 of 30 kept) and how to get the rest.
fn note(
    answer: &mut Value,
    shedded: &[Shedded],
    cuts: &[Cut],
    whole: usize,
    cap: usize,
    one_whole: Option<&str>,
) {
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
    let mut how = Vec::new();
    if !shedded.is_empty() {
        how.push(format!("leaving out {}", shed_parts(shedded).join(", ")));
    }
    if !lists.is_empty() {
        how.push(format!("cutting the last rows of: {}", lists.join(", ")));
    }
    // The whole answer plus room for the note, rounded up to a thousand.
    let all = whole.div_ceil(1000) * 1000;
    let one = match one_whole {
        Some(hint) if !shedded.is_empty() => format!("{hint}; "),
        _ => String::new(),
    };
    let line = format!(
        "Held to {cap} characters ({whole} whole) by {}. {one}`{MAX_CHARS}: {all}` gives all of it.",
        how.join(" and ")
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
        assert!(!fit(&mut v, 1_000, &[], None));
        assert_eq!(v, before);
    }

    #[test]
    fn the_longest_list_loses_its_last_rows_and_left_out_says_so() {
        let rows: Vec<Value> = (0..40)
            .map(|i| json!({"name": format!("kernel_{i}"), "ns": i * 1000}))
            .collect();
        let mut v = json!({"devices": [0, 1], "rows": rows, "left_out": ["earlier note"]});
        let whole = printed_len(&v);
        assert!(fit(&mut v, 1_500, &[], None));
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
        assert!(fit(&mut v, 2_000, &[], None));
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

    /// The argument that brings one shed part back whole leads the note, where parts were shed; a cut list alone
    /// comes back only with the whole answer.
    #[test]
    fn the_note_names_the_cheaper_way_to_one_shed_part_first() {
        let finding = json!({"id": "a", "why": "w".repeat(900), "evidence": ["e"]});
        let mut shed = json!({"findings": [finding.clone(), finding]});
        assert!(fit(
            &mut shed,
            1_000,
            &["findings[].why"],
            Some("`finding: <id>` gives one")
        ));
        let line = shed["left_out"][0].as_str().unwrap();
        assert!(
            line.contains("(2). `finding: <id>` gives one; `max_chars: 2000` gives all of it."),
            "{line}"
        );
        let rows: Vec<Value> = (0..200).map(|i| json!({"i": i})).collect();
        let mut cut = json!({"rows": rows});
        assert!(fit(
            &mut cut,
            1_000,
            &["findings[].why"],
            Some("`finding: <id>` gives one")
        ));
        let line = cut["left_out"][0].as_str().unwrap();
        assert!(!line.contains("finding"), "{line}");
    }

    #[test]
    fn a_large_answer_is_cut_in_one_walk_per_depth() {
        // 200,000 rows: cut row by row with a walk each, this would take hours.
        let rows: Vec<Value> = (0..200_000).map(|i| json!({"i": i})).collect();
        let mut v = json!({"rows": rows});
        assert!(fit(&mut v, 6_000, &[], None));
        let mut body = v.clone();
        body.as_object_mut().unwrap().remove("left_out");
        let kept = v["rows"].as_array().unwrap().len();
        // The rows fill what the note leaves free, and the note fits in the rest.
        assert!(
            printed_len(&body) <= 6_000 - NOTE_ROOM && kept > 100,
            "{kept}"
        );
        assert!(printed_len(&v) <= 6_000, "{}", printed_len(&v));
        // One more row would not have fitted.
        body["rows"]
            .as_array_mut()
            .unwrap()
            .push(json!({"i": kept}));
        assert!(printed_len(&body) > 6_000 - NOTE_ROOM);
    }

    #[test]
    fn lists_of_few_rows_lose_only_what_they_must() {
        let row = |c: char| Value::String(c.to_string().repeat(400));
        let mut v = json!({"a": [row('a'), row('b')], "b": [row('c'), row('d')], "c": [row('e'), row('f')]});
        // One row less fits (with room for the note): only the first list (in order) gives one up.
        let cap = printed_len(&v) - 300 + NOTE_ROOM - 1;
        assert!(fit(&mut v, cap, &[], None));
        let lens: Vec<usize> = ["a", "b", "c"]
            .iter()
            .map(|k| v[*k].as_array().unwrap().len())
            .collect();
        assert_eq!(lens, vec![1, 2, 2]);
    }

    #[test]
    fn sheds_go_first_in_order_and_only_while_too_long() {
        let finding = |sev: &str| {
            json!({"id": format!("rule_{sev}"), "severity": sev, "evidence": ["e".repeat(300)],
                   "why": "w".repeat(400), "data": {"x": "d".repeat(900)}})
        };
        let mut v = json!({"findings": [finding("high"), finding("medium"), finding("info")],
                           "checked": ["c".repeat(500)]});
        let sheds = [
            "findings[severity=info]",
            "findings[].data",
            "findings[].why",
            "checked",
        ];
        // Room for everything but the info finding and the data: the why and the checks stay.
        let mut enough = v.clone();
        enough["findings"].as_array_mut().unwrap().pop();
        for f in enough["findings"].as_array_mut().unwrap() {
            f.as_object_mut().unwrap().remove("data");
        }
        let cap = printed_len(&enough) + 10 + NOTE_ROOM;
        assert!(fit(&mut v, cap, &sheds, None));
        let findings = v["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 2);
        assert!(
            findings
                .iter()
                .all(|f| f.get("data").is_none() && f.get("why").is_some())
        );
        assert_eq!(findings[0]["evidence"].as_array().unwrap().len(), 1);
        assert!(v.get("checked").is_some());
        let line = v["left_out"][0].as_str().unwrap();
        assert!(
            line.contains("leaving out `findings[severity=info]` (1), `findings[].data` (2)"),
            "{line}"
        );
        assert!(!line.contains("cutting"), "{line}");
    }

    /// `list[key=value].field` sheds the field from the selected rows only, and the note says so.
    #[test]
    fn a_field_goes_from_the_selected_rows_only() {
        let finding = |sev: &str| json!({"severity": sev, "evidence": ["e".repeat(400)], "basis": "b".repeat(200)});
        let mut v =
            json!({"findings": [finding("high"), finding("low"), finding("low"), finding("low")]});
        let sheds = [
            "findings[severity=low].evidence",
            "findings[severity=low].basis",
        ];
        assert!(fit(&mut v, 1_600, &sheds, None));
        let findings = v["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 4, "no row is cut while a shed suffices");
        assert!(findings[0].get("evidence").is_some() && findings[0].get("basis").is_some());
        assert!(
            findings[1..]
                .iter()
                .all(|f| f.get("evidence").is_none() && f.get("basis").is_none())
        );
        let line = v["left_out"][0].as_str().unwrap();
        assert!(
            line.contains("leaving out `findings[severity=low].{evidence, basis}` (3 each)"),
            "{line}"
        );
        // A list inside an object, its rows selected by a boolean.
        let fact = |same: bool| json!({"same": same, "what": "f".repeat(500)});
        let mut v = json!({"comparability": {"facts": [fact(true), fact(false), fact(true)]}});
        assert!(fit(
            &mut v,
            1_000,
            &["comparability.facts[same=true]"],
            None
        ));
        assert_eq!(v["comparability"]["facts"], json!([fact(false)]));
        // `field[:N]`: a list field keeps its first rows.
        let mut v = json!({"findings": [{"evidence": ["a".repeat(600), "b".repeat(600)]},
                                        {"evidence": ["c".repeat(600), "d".repeat(600), "e".repeat(9)]}]});
        assert!(fit(&mut v, 1_900, &["findings[].evidence[:1]"], None));
        assert_eq!(v["findings"][0]["evidence"], json!(["a".repeat(600)]));
        assert_eq!(v["findings"][1]["evidence"], json!(["c".repeat(600)]));
        let line = v["left_out"][0].as_str().unwrap();
        assert!(
            line.contains("leaving out `findings[].evidence` past its first row (3 rows)"),
            "{line}"
        );
        // `list[:N]`: a list keeps its first rows.
        let mut v = json!({"ledger": ["a".repeat(600), "b".repeat(600), "c".repeat(600)]});
        assert!(fit(&mut v, 1_000, &["ledger[:1]"], None));
        assert_eq!(v["ledger"], json!(["a".repeat(600)]));
        let line = v["left_out"][0].as_str().unwrap();
        assert!(
            line.contains("leaving out `ledger` past its first row (2 rows)"),
            "{line}"
        );
    }

    #[test]
    fn lists_of_numbers_are_never_cut() {
        // A window's [start, end] (the output schema says two items) and a value per rank keep every number.
        let rows: Vec<Value> = (0..60)
            .map(|i| json!({"name": format!("kernel_{i}")}))
            .collect();
        let mut v = json!({"scope": {"trim": [10_800_000_000i64, 11_100_000_000i64]},
                           "wait_ns": [40_399_663, 55_469_998], "rows": rows});
        assert!(fit(&mut v, 500, &[], None));
        assert_eq!(v["scope"]["trim"].as_array().unwrap().len(), 2);
        assert_eq!(v["wait_ns"].as_array().unwrap().len(), 2);
        assert!(v["rows"].as_array().unwrap().len() < 60);
    }

    #[test]
    fn a_list_keeps_one_row_at_least() {
        let mut v = json!({"rows": ["a".repeat(3000), "b".repeat(3000)]});
        assert!(fit(&mut v, 1_000, &[], None));
        assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    }
}
