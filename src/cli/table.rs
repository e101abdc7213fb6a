//! Human-readable rendering of any operation's JSON output, driven by the
//! output's shape and its field names — no per-operation code:
//!
//! - an object's short fields become aligned `key  value` lines, its nested
//!   parts titled sections;
//! - an array of flat objects becomes a table (numbers right-aligned); one
//!   whose rows nest arrays or objects, or that is too wide for the terminal,
//!   becomes a list of cards (a title line, the short fields flowed as
//!   `key value · key value`, long text wrapped in full, nested parts below);
//! - numbers take their unit from the field-name suffix (`_ns`, `_ms`, `_s`,
//!   `_bytes`, `_mib`, `_pct`, `_gb_per_s`, `_mhz`, `_w`, `_c`; ARCHITECTURE.md
//!   "Units in field names"): durations scale to ns/µs/ms/s, sizes to
//!   KiB/MiB/GiB, counts get thousands separators, timestamps (`start_ns`,
//!   `end_ns`, ...) stay exact integers. The key is shown without the suffix
//!   when the value carries the unit.
//!
//! JSON stays the machine format; this is for terminals.

use std::fmt::Write;

use serde_json::{Map, Value};

/// Most rows shown per table or card list (the JSON output has all of them).
const MAX_ROWS: usize = 50;
/// A scalar longer than this gets its own wrapped line in a card.
const SHORT: usize = 44;
/// A table cell longer than this turns its table into cards (nothing is cut).
const MAX_CELL: usize = 60;
/// Objects with at most this many scalar fields render inline (`a 1 · b 2`).
const SMALL_OBJECT: usize = 6;

/// Render for the terminal at its width (`COLUMNS`, the tty's size, or 100).
pub fn render(value: &Value) -> String {
    render_width(value, terminal_width())
}

/// Render at a given width (tests and snapshots use a fixed one).
pub fn render_width(value: &Value, width: usize) -> String {
    let r = Renderer {
        width: width.clamp(60, 400),
    };
    let mut out = String::new();
    match value {
        Value::Object(map) => r.object(&mut out, map, 0),
        Value::Array(items) => r.array(&mut out, "", items, 0),
        other => {
            let _ = writeln!(out, "{}", fmt_value("", other));
        }
    }
    // One blank line between blocks, none at the start.
    let mut tidy = String::with_capacity(out.len());
    let mut blank = true;
    for line in out.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            if !blank {
                tidy.push('\n');
            }
            blank = true;
        } else {
            tidy.push_str(line);
            tidy.push('\n');
            blank = false;
        }
    }
    tidy
}

fn terminal_width() -> usize {
    if let Some(cols) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
    {
        return cols;
    }
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; on failure we keep the default.
    #[cfg(unix)]
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col >= 40 {
            return ws.ws_col as usize;
        }
    }
    100
}

struct Renderer {
    width: usize,
}

impl Renderer {
    /// An object: short fields as aligned lines, then nested parts as sections.
    fn object(&self, out: &mut String, map: &Map<String, Value>, indent: usize) {
        let pad = " ".repeat(indent);
        let lines: Vec<(String, String)> = map
            .iter()
            .filter(|(k, v)| one_line(k, v))
            .map(|(k, v)| (display_key(k, v), inline_text(k, v)))
            .collect();
        let kw = lines
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        for ((k, text), (key, v)) in lines.iter().zip(map.iter().filter(|(k, v)| one_line(k, v))) {
            if is_bullet_list(v) {
                self.long_field(out, &pad, key, v);
                continue;
            }
            let first = format!("{pad}{k:<kw$}  ");
            let hang = " ".repeat(indent + kw + 2);
            wrap_into(out, &first, &hang, text, self.width);
        }
        for (k, v) in map {
            match v {
                Value::Object(inner) if !one_line(k, v) => {
                    let _ = writeln!(out, "\n{pad}{k}:");
                    self.object(out, inner, indent + 2);
                }
                Value::Array(items) if !is_inline(v) => self.array(out, k, items, indent),
                _ => {}
            }
        }
    }

    fn array(&self, out: &mut String, title: &str, items: &[Value], indent: usize) {
        let pad = " ".repeat(indent);
        if !title.is_empty() {
            let _ = writeln!(out, "\n{pad}{title} ({}):", items.len());
        }
        let objects: Vec<&Map<String, Value>> = items.iter().filter_map(Value::as_object).collect();
        if objects.len() != items.len() {
            // Mixed or nested lists: one item per line, objects as cards.
            for item in items.iter().take(MAX_ROWS) {
                match item {
                    Value::Object(m) => self.card(out, m, indent + 2, None),
                    Value::Array(_) => {
                        let _ = writeln!(out, "{pad}  - {item}");
                    }
                    v => wrap_into(
                        out,
                        &format!("{pad}  - "),
                        &format!("{pad}    "),
                        &fmt_value(title, v),
                        self.width,
                    ),
                }
            }
            more(out, &pad, items.len());
            return;
        }
        if !self.table(out, title, &objects, indent) {
            // Fields equal in every card are said once, above the cards.
            let common: Vec<&String> = if objects.len() > 1 {
                objects[0]
                    .iter()
                    .filter(|(k, v)| is_scalar(v) && objects.iter().all(|o| o.get(*k) == Some(*v)))
                    .map(|(k, _)| k)
                    .collect()
            } else {
                Vec::new()
            };
            if !common.is_empty() {
                let items: Vec<String> = common
                    .iter()
                    .map(|k| {
                        let v = &objects[0][k.as_str()];
                        format!("{} {}", display_key(k, v), inline_text(k, v))
                    })
                    .collect();
                wrap_items(
                    out,
                    &format!("{pad}  all: "),
                    &format!("{pad}       "),
                    &items,
                    self.width,
                );
            }
            let total = objects.len();
            for (i, obj) in objects.iter().take(MAX_ROWS).enumerate() {
                let rest: Map<String, Value> = obj
                    .iter()
                    .filter(|(k, _)| !common.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                self.card(out, &rest, indent + 2, Some((i + 1, total)));
            }
            more(out, &pad, total);
        }
    }

    /// A table of flat rows; false when the rows nest or do not fit (cards then).
    fn table(
        &self,
        out: &mut String,
        title: &str,
        objects: &[&Map<String, Value>],
        indent: usize,
    ) -> bool {
        // Columns: scalar fields in first-seen order; small objects flattened one level.
        let mut columns: Vec<(String, Option<String>)> = Vec::new(); // (field, sub-field)
        for obj in objects {
            for (k, v) in obj.iter() {
                match v {
                    Value::Object(inner) if is_inline(v) => {
                        for (ik, iv) in inner {
                            if !is_scalar(iv) && !is_scalar_list(iv) {
                                return false;
                            }
                            let col = (k.clone(), Some(ik.clone()));
                            if !columns.contains(&col) {
                                columns.push(col);
                            }
                        }
                    }
                    v if is_scalar(v) || is_scalar_list(v) => {
                        let col = (k.clone(), None);
                        if !columns.contains(&col) {
                            columns.push(col);
                        }
                    }
                    _ => return false,
                }
            }
        }
        if columns.is_empty() {
            return false;
        }
        let cell =
            |obj: &Map<String, Value>, (k, sub): &(String, Option<String>)| -> Option<String> {
                let v = match sub {
                    Some(s) => obj.get(k)?.get(s)?,
                    None => obj.get(k)?,
                };
                let key = sub.as_deref().unwrap_or(k);
                Some(inline_text(key, v))
            };
        let rows: Vec<Vec<String>> = objects
            .iter()
            .take(MAX_ROWS)
            .map(|obj| {
                columns
                    .iter()
                    .map(|c| cell(obj, c).unwrap_or_default())
                    .collect()
            })
            .collect();
        // A long cell makes cards, except a name in the last column (no spaces: nothing to wrap).
        let last = columns.len() - 1;
        if rows.iter().any(|r| {
            r[..last].iter().any(|c| c.chars().count() > MAX_CELL)
                || (r[last].chars().count() > MAX_CELL && r[last].contains(' '))
        }) {
            return false;
        }
        // Headers: the field (sub-field when unambiguous), unit suffix dropped when values carry it.
        let headers: Vec<String> = columns
            .iter()
            .map(|(k, sub)| {
                let sample = objects.iter().find_map(|o| match sub {
                    Some(s) => o.get(k).and_then(|x| x.get(s)),
                    None => o.get(k),
                });
                let name = match sub {
                    Some(s)
                        if columns
                            .iter()
                            .filter(|(_, x)| x.as_deref() == Some(s))
                            .count()
                            == 1
                            && !columns.iter().any(|(x, none)| none.is_none() && x == s) =>
                    {
                        s.clone()
                    }
                    Some(s) => format!("{k}.{s}"),
                    None => k.clone(),
                };
                display_key(&name, sample.unwrap_or(&Value::Null))
            })
            .collect();
        let numeric: Vec<bool> = (0..columns.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].as_str())
                    .filter(|c| !c.is_empty() && *c != "-")
                    .all(looks_numeric)
            })
            .collect();
        let widths: Vec<usize> = (0..columns.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(headers[i].chars().count())
            })
            .collect();
        // A text column last (a name, as nsys stats prints it) may run past the edge.
        let last_text = !numeric[columns.len() - 1] && columns.len() > 1;
        let fixed: usize = indent + 2 + 2 * widths.len() + widths.iter().sum::<usize>()
            - if last_text {
                widths[columns.len() - 1]
            } else {
                0
            };
        let fits = if last_text {
            fixed + 16 <= self.width
        } else {
            fixed <= self.width
        };
        if !fits && columns.len() > 1 {
            return self.transposed(out, &headers, &rows, indent);
        }
        let pad = " ".repeat(indent + 2);
        let line = |cells: &[String]| {
            let parts: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let w = widths[i];
                    if numeric[i] {
                        format!("{c:>w$}")
                    } else {
                        format!("{c:<w$}")
                    }
                })
                .collect();
            format!("{pad}{}", parts.join("  ").trim_end())
        };
        let _ = title;
        let _ = writeln!(out, "{}", line(&headers));
        for row in &rows {
            let _ = writeln!(out, "{}", line(row));
        }
        more(out, &" ".repeat(indent), objects.len());
        true
    }

    /// A few wide rows as columns (fields down, rows across): the windows of
    /// a device (span, steps, steady) read side by side. False when it does not fit either.
    fn transposed(
        &self,
        out: &mut String,
        headers: &[String],
        rows: &[Vec<String>],
        indent: usize,
    ) -> bool {
        if rows.len() > 6 || rows.len() < 2 {
            return false;
        }
        // The first text column whose values tell the rows apart names them.
        let distinct = |i: usize| {
            let mut v: Vec<&String> = rows.iter().map(|r| &r[i]).collect();
            v.sort();
            v.dedup();
            v.len() == rows.len()
        };
        let name_col = (0..headers.len()).find(|&i| {
            rows.iter()
                .all(|r| !r[i].is_empty() && !looks_numeric(&r[i]))
                && distinct(i)
        });
        let titles: Vec<String> = match name_col {
            Some(i) => rows.iter().map(|r| r[i].clone()).collect(),
            None => (1..=rows.len()).map(|n| format!("[{n}]")).collect(),
        };
        let fields: Vec<usize> = (0..headers.len())
            .filter(|&i| Some(i) != name_col)
            .collect();
        let kw = fields
            .iter()
            .map(|&i| headers[i].chars().count())
            .max()
            .unwrap_or(0);
        let cw: Vec<usize> = (0..rows.len())
            .map(|r| {
                fields
                    .iter()
                    .map(|&i| rows[r][i].chars().count())
                    .chain(std::iter::once(titles[r].chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        if indent + 2 + kw + cw.iter().map(|w| w + 2).sum::<usize>() > self.width {
            return false;
        }
        let pad = " ".repeat(indent + 2);
        let mut line = format!("{pad}{:kw$}", "");
        for (t, w) in titles.iter().zip(&cw) {
            let _ = write!(line, "  {t:>w$}");
        }
        let _ = writeln!(out, "{}", line.trim_end());
        for &i in &fields {
            let mut line = format!("{pad}{:<kw$}", headers[i]);
            for (r, w) in rows.iter().zip(&cw) {
                let _ = write!(line, "  {:>w$}", r[i]);
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        true
    }

    /// One object as a card: its title (when it has one), short fields flowed
    /// as `key value · key value`, long text wrapped in full, nested parts below.
    fn card(
        &self,
        out: &mut String,
        obj: &Map<String, Value>,
        indent: usize,
        position: Option<(usize, usize)>,
    ) {
        let pad = " ".repeat(indent);
        let number = position.map(|(i, _)| format!("[{i}] ")).unwrap_or_default();
        let body = format!("{pad}{}", " ".repeat(number.chars().count().max(2)));
        let body_indent = body.chars().count();
        let label_key = label_field(obj);
        let mut flowed: Vec<String> = Vec::new();
        let mut long: Vec<(&String, &Value)> = Vec::new();
        for (k, v) in obj {
            if Some(k.as_str()) == label_key {
                continue;
            }
            if is_scalar(v) || is_scalar_list(v) {
                let text = inline_text(k, v);
                if text.chars().count() <= SHORT {
                    flowed.push(format!("{} {}", display_key(k, v), text));
                } else {
                    long.push((k, v));
                }
            }
        }
        out.push('\n');
        match label_key {
            Some(k) => {
                let label = inline_text(k, &obj[k]);
                wrap_into(out, &format!("{pad}{number}"), &body, &label, self.width);
                if !flowed.is_empty() {
                    wrap_items(out, &body, &body, &flowed, self.width);
                }
            }
            None => wrap_items(out, &format!("{pad}{number}"), &body, &flowed, self.width),
        }
        for (k, v) in long {
            self.long_field(out, &body, k, v);
        }
        for (k, v) in obj {
            match v {
                Value::Object(inner) if inner.is_empty() => {}
                Value::Object(_) if one_line(k, v) => {
                    let items: Vec<String> = v
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(ik, iv)| format!("{} {}", display_key(ik, iv), inline_text(ik, iv)))
                        .collect();
                    wrap_items(
                        out,
                        &format!("{body}{k}: "),
                        &format!("{body}  "),
                        &items,
                        self.width,
                    );
                }
                Value::Object(inner) => {
                    let _ = writeln!(out, "{body}{k}:");
                    self.object(out, inner, body_indent + 2);
                }
                Value::Array(items) if !is_scalar_list(v) => self.array(out, k, items, body_indent),
                _ => {}
            }
        }
    }
}

impl Renderer {
    /// A field too long for a flowed line: text wrapped under its key, long lists as bullets.
    fn long_field(&self, out: &mut String, pad: &str, key: &str, v: &Value) {
        if is_bullet_list(v) {
            let _ = writeln!(out, "{pad}{}:", display_key(key, v));
            for item in v.as_array().into_iter().flatten() {
                wrap_into(
                    out,
                    &format!("{pad}  - "),
                    &format!("{pad}    "),
                    &fmt_value(key, item),
                    self.width,
                );
            }
            return;
        }
        let first = format!("{pad}{}: ", display_key(key, v));
        wrap_into(
            out,
            &first,
            &format!("{pad}  "),
            &inline_text(key, v),
            self.width,
        );
    }
}

/// A list of sentences: one bullet each rather than one comma-joined line.
fn is_bullet_list(v: &Value) -> bool {
    matches!(v, Value::Array(items) if items.len() > 1
        && items.iter().all(Value::is_string)
        && items.iter().any(|x| x.as_str().is_some_and(|s| s.chars().count() > SHORT)))
}

fn more(out: &mut String, pad: &str, total: usize) {
    if total > MAX_ROWS {
        let _ = writeln!(
            out,
            "{pad}  ... {} more not shown here (--format json has all of them)",
            total - MAX_ROWS
        );
    }
}

/// The field that titles a card: a title, name or id string.
fn label_field(obj: &Map<String, Value>) -> Option<&str> {
    ["title", "name", "id", "tool", "question", "headline"]
        .into_iter()
        .find(|k| matches!(obj.get(*k), Some(Value::String(s)) if !s.is_empty()))
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

fn is_scalar_list(v: &Value) -> bool {
    matches!(v, Value::Array(items) if items.iter().all(is_scalar))
}

/// Shown on one line: scalars, scalar lists, and small flat objects.
/// Shown as one `key  value` line of an object: inline values whose text is not too long
/// (a small object with long text reads better as a section).
fn one_line(key: &str, v: &Value) -> bool {
    is_inline(v) && (!v.is_object() || inline_text(key, v).chars().count() <= 2 * SHORT)
}

fn is_inline(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            m.is_empty()
                || (m.len() <= SMALL_OBJECT
                    && m.values().all(|x| is_scalar(x) || is_scalar_list(x)))
        }
        v => is_scalar(v) || is_scalar_list(v),
    }
}

/// One-line text of an inline value.
fn inline_text(key: &str, v: &Value) -> String {
    match v {
        Value::Array(items) if items.is_empty() => "-".into(),
        Value::Array(items) => items
            .iter()
            .map(|x| fmt_value(key, x))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(m) if m.is_empty() => "-".into(),
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| format!("{} {}", display_key(k, x), inline_text(k, x)))
            .collect::<Vec<_>>()
            .join(" · "),
        v => fmt_value(key, v).replace('\n', " "),
    }
}

/// Append `text` wrapped at `width`: the first line after `first`, the rest after `hang`.
fn wrap_into(out: &mut String, first: &str, hang: &str, text: &str, width: usize) {
    let mut line = first.to_string();
    let mut fresh = true;
    let min_room = 20;
    for word in text.split(' ') {
        let len = line.chars().count();
        let wlen = word.chars().count();
        if !fresh && len + 1 + wlen > width && len > hang.chars().count() + min_room.min(len) {
            out.push_str(line.trim_end());
            out.push('\n');
            line = hang.to_string();
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// Append `items` joined by ` · `, wrapped between items (an item longer than a line is wrapped by words).
fn wrap_items(out: &mut String, first: &str, hang: &str, items: &[String], width: usize) {
    let mut line = first.to_string();
    let mut fresh = true;
    for item in items {
        let len = line.chars().count();
        let ilen = item.chars().count();
        if !fresh && len + 3 + ilen > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = hang.to_string();
            fresh = true;
        }
        if !fresh {
            line.push_str(" · ");
        }
        if line.chars().count() + ilen > width {
            // Too long for any line: words wrap, the rest continues after it.
            let mut tmp = String::new();
            wrap_into(&mut tmp, &line, hang, item, width);
            let mut lines: Vec<&str> = tmp.lines().collect();
            let last = lines.pop().unwrap_or("").to_string();
            for l in lines {
                out.push_str(l);
                out.push('\n');
            }
            line = last;
        } else {
            line.push_str(item);
        }
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

// ---------------------------------------------------------------------------------------------
// Numbers and units

/// What a field's number measures, from its name.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    /// An exact point in time or an identifier: the integer as is.
    Exact,
    /// A duration in this many ns per unit.
    Duration(f64),
    /// A size in this many bytes per unit.
    Bytes(f64),
    Percent,
    Suffix(&'static str),
    Plain,
}

fn unit_of(key: &str) -> Unit {
    let k = key.to_ascii_lowercase();
    const IDS: &[&str] = &[
        "pid",
        "tid",
        "device",
        "stream",
        "index",
        "rank",
        "pids",
        "tids",
        "streams",
        "devices",
        "year",
        "port",
        "gpu",
        "gpus_ids",
        "launch_tid",
    ];
    if IDS.contains(&k.as_str()) || k.ends_with("_id") || k.ends_with("_pid") || k.ends_with("_ids")
    {
        return Unit::Exact;
    }
    if k.ends_with("_gb_per_s") {
        return Unit::Suffix("GB/s");
    }
    if k.ends_with("_per_s") {
        return Unit::Suffix("/s");
    }
    if k.ends_with("_pct") || k == "pct" {
        return Unit::Percent;
    }
    if k.ends_with("_ns") || k == "ns" {
        let stamp = [
            "start_ns",
            "end_ns",
            "ts_ns",
            "timestamp_ns",
            "first_ns",
            "last_ns",
        ];
        if stamp.contains(&k.as_str())
            || k.ends_with("_start_ns")
            || k.ends_with("_end_ns")
            || k.ends_with("_at_ns")
        {
            return Unit::Exact;
        }
        return Unit::Duration(1.0);
    }
    if k.ends_with("_us") {
        return Unit::Duration(1e3);
    }
    if k.ends_with("_ms") {
        return Unit::Duration(1e6);
    }
    if k.ends_with("_s") && !k.ends_with("_gpus") {
        return Unit::Duration(1e9);
    }
    if k.ends_with("_bytes") || k == "bytes" {
        return Unit::Bytes(1.0);
    }
    if k.ends_with("_kib") {
        return Unit::Bytes(1024.0);
    }
    if k.ends_with("_mib") {
        return Unit::Bytes(1024.0 * 1024.0);
    }
    if k.ends_with("_gib") {
        return Unit::Bytes(1024.0 * 1024.0 * 1024.0);
    }
    if k.ends_with("_gb") {
        return Unit::Suffix("GB");
    }
    if k.ends_with("_mhz") {
        return Unit::Suffix("MHz");
    }
    if k.ends_with("_w") {
        return Unit::Suffix("W");
    }
    if k.ends_with("_c") {
        return Unit::Suffix("°C");
    }
    if k.ends_with("_tflops") {
        return Unit::Suffix("TFLOP/s");
    }
    if k.ends_with("_usd") {
        return Unit::Suffix("USD");
    }
    Unit::Plain
}

/// The key as shown: without its unit suffix when the value is printed with the unit.
fn display_key(key: &str, v: &Value) -> String {
    if !v.is_number() && !is_scalar_list(v) {
        return key.to_string();
    }
    let strip = match unit_of(key) {
        Unit::Duration(_) | Unit::Bytes(_) | Unit::Suffix(_) => true,
        // `busy_ns` and `busy_pct` often sit side by side: the percentage keeps its name.
        Unit::Percent | Unit::Exact | Unit::Plain => false,
    };
    if !strip {
        return key.to_string();
    }
    for suffix in [
        "_gb_per_s",
        "_per_s",
        "_ns",
        "_us",
        "_ms",
        "_s",
        "_bytes",
        "_kib",
        "_mib",
        "_gib",
        "_gb",
        "_mhz",
        "_w",
        "_c",
        "_tflops",
        "_usd",
    ] {
        if let Some(stem) = key.strip_suffix(suffix)
            && !stem.is_empty()
        {
            // `per_s` rates keep their meaning in the unit (`launches 12/s`).
            return stem.to_string();
        }
    }
    key.to_string()
}

/// A scalar formatted by the unit its field name carries.
fn fmt_value(key: &str, v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            match unit_of(key) {
                Unit::Exact => n.to_string(),
                Unit::Duration(per) => duration(f * per),
                Unit::Bytes(per) => bytes(f * per),
                Unit::Percent => format!("{}%", number(f)),
                Unit::Suffix(s) if s.starts_with('/') => format!("{}{s}", number(f)),
                Unit::Suffix(s) => format!("{} {s}", number(f)),
                Unit::Plain => match n.as_i64() {
                    Some(i) => group_thousands(i),
                    None => number(f),
                },
            }
        }
        other => other.to_string(),
    }
}

/// A duration given in ns, scaled to ns, µs, ms or s with two decimals.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{} ns", number(ns))
    } else if a < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{} s", number_fixed(ns / 1e9, 2))
    }
}

/// A size in bytes, scaled to B, KiB, MiB, GiB or TiB.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{} B", number(v))
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// A plain number: integers grouped, fractions with sensible decimals.
pub fn number(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    if f.fract() == 0.0 && f.abs() < 1e15 {
        return group_thousands(f as i64);
    }
    let a = f.abs();
    let decimals = if a >= 100.0 {
        1
    } else if a >= 1.0 {
        2
    } else if a >= 0.001 {
        // Three significant digits.
        (2.0 - a.log10().floor()) as usize
    } else {
        return format!("{f:.2e}");
    };
    let s = number_fixed(f, decimals);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn number_fixed(f: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, f.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let grouped = group_thousands(int.parse::<i64>().unwrap_or(0));
    let sign = if f < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
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

fn looks_numeric(cell: &str) -> bool {
    let first = cell.split(' ').next().unwrap_or("");
    let t = first.trim_end_matches('%');
    !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | '-' | 'e' | '+'))
        && t.chars().any(|c| c.is_ascii_digit())
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
            "rows": [{"name": "a", "total_ns": 10}, {"name": "b", "total_ns": 2000, "extra": true}],
            "tags": ["x", "y"]
        });
        let text = render_width(&v, 100);
        assert!(text.contains("count    1,234,567"), "{text}");
        assert!(text.contains("ratio    0.125"), "{text}");
        assert!(text.contains("tags     x, y"), "{text}");
        assert!(
            text.contains("gpu      available false · reason no driver"),
            "{text}"
        );
        assert!(text.contains("rows (2):"));
        assert!(text.contains("name    total  extra"), "{text}");
        assert!(text.contains("b     2.00 µs  true"), "{text}");
    }

    #[test]
    fn units_follow_field_names() {
        assert_eq!(fmt_value("gap_ns", &json!(77947617)), "77.95 ms");
        assert_eq!(fmt_value("start_ns", &json!(7554058424_i64)), "7554058424");
        assert_eq!(fmt_value("offset_ns", &json!(-138745)), "-138.75 µs");
        assert_eq!(fmt_value("busy_pct", &json!(5.37)), "5.37%");
        assert_eq!(fmt_value("size_bytes", &json!(2375680)), "2.27 MiB");
        assert_eq!(
            fmt_value("bandwidth_gb_per_s", &json!(2114.06)),
            "2,114.1 GB/s"
        );
        assert_eq!(
            fmt_value("recorded_duration_ns", &json!(9097000000_i64)),
            "9.10 s"
        );
        assert_eq!(fmt_value("kernels", &json!(3689)), "3,689");
        assert_eq!(fmt_value("pid", &json!(12345)), "12345");
        assert_eq!(fmt_value("avg_ns", &json!(87808.8)), "87.81 µs");
        assert_eq!(display_key("busy_ns", &json!(1)), "busy");
        assert_eq!(display_key("busy_pct", &json!(1)), "busy_pct");
        assert_eq!(display_key("start_ns", &json!(1)), "start_ns");
        assert_eq!(number(0.000012), "1.20e-5");
    }

    #[test]
    fn nested_rows_become_cards_and_long_text_is_wrapped_not_cut() {
        let long = "word ".repeat(60);
        let v = json!({"findings": [
            {"title": "Something slow", "severity": "critical", "why": long, "data": {"steps": 39},
             "largest": [{"start_ns": 1, "length_ns": 5_000_000}]}
        ]});
        let text = render_width(&v, 80);
        assert!(text.contains("[1] Something slow"), "{text}");
        assert!(text.contains("severity critical"), "{text}");
        assert_eq!(text.matches("word").count(), 60, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        assert!(text.contains("data: steps 39"), "{text}");
        assert!(text.contains("5.00 ms"), "{text}");
        assert!(!text.contains("--format json to see"), "{text}");
    }
}
