//! Checking a JSON value against a tool's schema: the one place where
//! arguments get their JSON-typed messages and ranges (`minimum`/`maximum`
//! written with `#[schemars(range(...))]` on input fields), and where an
//! answer is held to its output schema (a number that overflowed to infinity
//! serializes as `null`, which a client's schema check rejects).
//!
//! The subset of JSON Schema that schemars writes is covered: `type`,
//! `properties`, `required`, `additionalProperties`, `items`, `enum`, `const`,
//! `anyOf`/`oneOf`/`allOf`, `$ref` into `$defs`, and numeric bounds.

use serde_json::{Map, Value};

/// Where a value breaks its schema, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// `a.b[3].c`; empty at the root.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "`{}` {}", self.path, self.message)
        }
    }
}

/// How strictly to read the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Arguments: `null` stands for "not given" on optional properties (input
    /// schemas show optional fields with their plain type).
    Input,
    /// Answers: exactly as written.
    Output,
}

/// Check `value` against `root` (a schema whose `$defs` the `$ref`s point into).
pub fn check(root: &Map<String, Value>, value: &Value, mode: Mode) -> Result<(), Violation> {
    Checker {
        defs: root.get("$defs").and_then(Value::as_object),
        mode,
    }
    .check_map(root, value, &mut String::new(), 0)
}

struct Checker<'a> {
    defs: Option<&'a Map<String, Value>>,
    mode: Mode,
}

/// A JSON type name with its article, for messages.
pub fn json_type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn type_words(t: &str) -> &str {
    match t {
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "boolean" => "true or false",
        "array" => "an array",
        "object" => "an object",
        "null" => "null",
        other => other,
    }
}

fn matches_type(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => true,
    }
}

/// A short rendering of a value for messages (long strings are cut).
fn show(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() > 40 => {
            let head: String = s.chars().take(40).collect();
            format!("\"{head}…\" ({} characters)", s.chars().count())
        }
        Value::Array(a) => format!("an array of {}", a.len()),
        Value::Object(_) => "an object".into(),
        other => other.to_string(),
    }
}

const MAX_DEPTH: usize = 64;

/// The longest string argument accepted where the schema sets no `maxLength`.
pub const DEFAULT_MAX_STRING: usize = 65_536;

impl Checker<'_> {
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        let mut s = schema;
        for _ in 0..16 {
            let Some(r) = s.get("$ref").and_then(Value::as_str) else {
                return s;
            };
            match r
                .strip_prefix("#/$defs/")
                .and_then(|name| self.defs.and_then(|d| d.get(name)))
            {
                Some(target) => s = target,
                None => return s,
            }
        }
        s
    }

    fn fail(path: &str, message: String) -> Result<(), Violation> {
        Err(Violation {
            path: path.to_string(),
            message,
        })
    }

    fn check(
        &self,
        schema: &Value,
        value: &Value,
        path: &mut String,
        depth: usize,
    ) -> Result<(), Violation> {
        if depth > MAX_DEPTH {
            return Ok(());
        }
        let schema = self.resolve(schema);
        match schema {
            Value::Object(s) => self.check_map(s, value, path, depth),
            // `true` accepts anything; `false` nothing.
            Value::Bool(false) => Self::fail(path, "is not allowed".into()),
            _ => Ok(()),
        }
    }

    fn check_map(
        &self,
        s: &Map<String, Value>,
        value: &Value,
        path: &mut String,
        depth: usize,
    ) -> Result<(), Violation> {
        if depth > MAX_DEPTH {
            return Ok(());
        }
        if let Some(Value::Array(all)) = s.get("allOf") {
            for sub in all {
                self.check(sub, value, path, depth + 1)?;
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alts)) = s.get(key) {
                let mut first_err = None;
                let mut first_typed = false;
                let mut ok = false;
                for alt in alts {
                    match self.check(alt, value, path, depth + 1) {
                        Ok(()) => {
                            ok = true;
                            break;
                        }
                        Err(e) => {
                            // Prefer the error of the alternative whose type matches.
                            let typed = self
                                .resolve(alt)
                                .get("type")
                                .and_then(Value::as_str)
                                .is_some_and(|t| matches_type(t, value));
                            if first_err.is_none() || (typed && !first_typed) {
                                first_err = Some(e);
                                first_typed = typed;
                            }
                        }
                    }
                }
                if !ok {
                    return Err(first_err.unwrap_or(Violation {
                        path: path.clone(),
                        message: "matches none of the allowed forms".into(),
                    }));
                }
            }
        }
        if let Some(t) = s.get("type") {
            let types: Vec<&str> = match t {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => vec![],
            };
            if !types.is_empty() && !types.iter().any(|t| matches_type(t, value)) {
                let want: Vec<&str> = types.iter().map(|t| type_words(t)).collect();
                return Self::fail(
                    path,
                    format!(
                        "must be {}, not {}",
                        want.join(" or "),
                        match value {
                            Value::Null => "null".to_string(),
                            Value::String(_) | Value::Array(_) | Value::Object(_) =>
                                json_type_of(value).to_string(),
                            other => format!("{} ({})", json_type_of(other), show(other)),
                        }
                    ),
                );
            }
        }
        if let Some(Value::Array(allowed)) = s.get("enum")
            && !allowed.contains(value)
        {
            let list: Vec<String> = allowed.iter().take(20).map(|v| v.to_string()).collect();
            return Self::fail(
                path,
                format!("must be one of {}, not {}", list.join(", "), show(value)),
            );
        }
        if let Some(c) = s.get("const")
            && c != value
        {
            return Self::fail(path, format!("must be {c}, not {}", show(value)));
        }
        if let Value::Number(n) = value
            && let Some(x) = n.as_f64()
        {
            let bound = |k: &str| s.get(k).and_then(Value::as_f64);
            if let Some(m) = bound("minimum")
                && x < m
            {
                return Self::fail(path, format!("must be at least {m}, not {n}"));
            }
            if let Some(m) = bound("exclusiveMinimum")
                && x <= m
            {
                return Self::fail(path, format!("must be greater than {m}, not {n}"));
            }
            if let Some(m) = bound("maximum")
                && x > m
            {
                return Self::fail(path, format!("must be at most {m}, not {n}"));
            }
            if let Some(m) = bound("exclusiveMaximum")
                && x >= m
            {
                return Self::fail(path, format!("must be less than {m}, not {n}"));
            }
        }
        // Arguments are names, paths, patterns and questions: a string without
        // its own `maxLength` is capped at DEFAULT_MAX_STRING characters, so a
        // megabyte pasted into a GPU name is refused at once instead of being
        // matched against every catalog entry.
        let max_len = s
            .get("maxLength")
            .and_then(Value::as_u64)
            .or(match self.mode {
                Mode::Input => Some(DEFAULT_MAX_STRING as u64),
                Mode::Output => None,
            });
        if let Value::String(text) = value
            && let Some(max) = max_len
            && text.len() as u64 > max
            && text.chars().count() as u64 > max
        {
            return Self::fail(
                path,
                format!(
                    "must be at most {max} characters, not {}",
                    text.chars().count()
                ),
            );
        }
        if let Value::Array(items) = value
            && let Some(item_schema) = s.get("items")
        {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let r = self.check(item_schema, item, path, depth + 1);
                path.truncate(len);
                r?;
            }
        }
        if let Value::Object(obj) = value {
            let props = s.get("properties").and_then(Value::as_object);
            // Arguments: missing and unknown names are left to serde, which
            // knows field aliases the schema does not show and says "missing
            // field `x`" / "unknown field `y`, expected one of ..." itself.
            let input = self.mode == Mode::Input;
            if !input && let Some(Value::Array(required)) = s.get("required") {
                for r in required.iter().filter_map(Value::as_str) {
                    if !obj.contains_key(r) {
                        let field = join(path, r);
                        return Err(Violation {
                            path: String::new(),
                            message: format!("`{field}` is required and missing"),
                        });
                    }
                }
            }
            for (k, v) in obj {
                let sub = props.and_then(|p| p.get(k)).or_else(|| {
                    // Maps with integer keys (`{"^-?\\d+$": ...}`) and the like.
                    s.get("patternProperties")
                        .and_then(Value::as_object)?
                        .iter()
                        .find(|(pattern, _)| pattern_matches(pattern, k))
                        .map(|(_, schema)| schema)
                });
                let sub = match sub {
                    Some(sub) => Some(sub),
                    None => match s.get("additionalProperties") {
                        Some(Value::Bool(false)) if input => None,
                        Some(Value::Bool(false)) => {
                            let known: Vec<&str> = props
                                .map(|p| p.keys().map(String::as_str).collect())
                                .unwrap_or_default();
                            return Err(Violation {
                                path: String::new(),
                                message: format!(
                                    "`{}` is not an argument here; known: {}",
                                    join(path, &crate::dispatch::cut_for_echo(k)),
                                    if known.is_empty() {
                                        "none".to_string()
                                    } else {
                                        known.join(", ")
                                    }
                                ),
                            });
                        }
                        Some(extra @ Value::Object(_)) => Some(extra),
                        _ => None,
                    },
                };
                let Some(sub) = sub else { continue };
                if self.mode == Mode::Input
                    && v.is_null()
                    && props.is_some_and(|p| p.contains_key(k))
                {
                    let required = s
                        .get("required")
                        .and_then(Value::as_array)
                        .is_some_and(|r| r.iter().any(|x| x == k));
                    if !required {
                        continue;
                    }
                }
                let len = path.len();
                if path.is_empty() {
                    path.push_str(k);
                } else {
                    path.push('.');
                    path.push_str(k);
                }
                let r = self.check(sub, v, path, depth + 1);
                path.truncate(len);
                r?;
            }
        }
        Ok(())
    }
}

/// Whether `key` matches a `patternProperties` pattern (compiled once per pattern).
fn pattern_matches(pattern: &str, key: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| regex::Regex::new(pattern).ok())
        .as_ref()
        .is_some_and(|re| re.is_match(key))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn types_ranges_and_names_are_reported_in_json_words() {
        let schema = obj(json!({
            "type": "object",
            "properties": {
                "device": {"type": "integer", "minimum": 0},
                "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e6},
                "arch": {"type": "object", "properties": {"layers": {"type": "integer"}}, "required": ["layers"]}
            },
            "required": ["price"],
            "additionalProperties": false
        }));
        let err = |v: Value| check(&schema, &v, Mode::Input).unwrap_err().to_string();
        assert_eq!(
            err(json!({"price": 1, "device": "0"})),
            "`device` must be an integer, not a string"
        );
        assert_eq!(
            err(json!({"price": -1})),
            "`price` must be greater than 0, not -1"
        );
        assert_eq!(
            err(json!({"price": 1e308})),
            "`price` must be at most 1000000, not 1e+308"
        );
        // Missing and unknown names are serde's to report for arguments (it knows aliases).
        assert!(check(&schema, &json!({"device": 1}), Mode::Input).is_ok());
        assert_eq!(
            check(&schema, &json!({"device": 1}), Mode::Output)
                .unwrap_err()
                .to_string(),
            "`price` is required and missing"
        );
        assert_eq!(
            err(json!({"price": 1, "arch": 3})),
            "`arch` must be an object, not an integer (3)"
        );
        assert!(check(&schema, &json!({"price": 1, "arch": {}}), Mode::Input).is_ok());
        assert!(check(&schema, &json!({"price": 1, "bogus": 1}), Mode::Input).is_ok());
        assert!(
            check(&schema, &json!({"price": 1, "bogus": 1}), Mode::Output)
                .unwrap_err()
                .to_string()
                .contains("not an argument")
        );
        assert!(check(&schema, &json!({"price": 2, "device": null}), Mode::Input).is_ok());
        assert!(check(&schema, &json!({"price": 2, "device": null}), Mode::Output).is_err());
    }

    #[test]
    fn pattern_properties_are_followed() {
        let schema = obj(json!({
            "type": "object",
            "properties": {"m": {"type": "object", "additionalProperties": false,
                "patternProperties": {"^-?\\d+$": {"type": "string"}}}}
        }));
        assert!(check(&schema, &json!({"m": {"0": "a", "-3": "b"}}), Mode::Output).is_ok());
        assert!(check(&schema, &json!({"m": {"0": 1}}), Mode::Output).is_err());
        assert!(check(&schema, &json!({"m": {"x": "a"}}), Mode::Output).is_err());
    }

    #[test]
    fn refs_and_alternatives_are_followed() {
        let schema = obj(json!({
            "type": "object",
            "anyOf": [{"$ref": "#/$defs/Out"}, {"type": "object", "required": ["error"]}],
            "$defs": {"Out": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}
        }));
        assert!(check(&schema, &json!({"x": 1.5}), Mode::Output).is_ok());
        assert!(check(&schema, &json!({"error": {}}), Mode::Output).is_ok());
        let e = check(&schema, &json!({"x": null}), Mode::Output).unwrap_err();
        assert_eq!(e.path, "x");
    }
}
