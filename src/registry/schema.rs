//! JSON Schemas for tool inputs and outputs, generated from the Rust types.
//!
//! Inputs are inlined (no `$ref`) so that every client, including ones with
//! single-type schema dialects, can read them; optional fields render as their
//! plain type instead of `["T", "null"]`. Outputs keep `$defs` because some
//! are recursive (NVTX trees).

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use super::JsonObject;

/// The input schema of `T`: an object, inlined, optional fields not nullable, without the `$schema` URI
/// (2020-12 is MCP's default dialect, and the URI is noise to the model that reads every listed tool's
/// schema: 60 characters a tool).
pub fn input_schema<T: JsonSchema>() -> JsonObject {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .for_deserialize()
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut input = finish(schema, true);
    input.remove("$schema");
    let mut value = Value::Object(input);
    drop_number_formats(&mut value);
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The output schema of `T`: how it serializes, with `$defs` where needed.
///
/// An output schema is for the client that validates `structuredContent`; the
/// model reads the result itself, whose field names carry their units. So
/// outputs keep what validation uses (types, `required`, enums, nesting, shared
/// `$defs`) and drop what it does not: prose (`description`, `title`), the
/// `$schema` URI, numeric bounds (aisp's own output never breaks them) and the
/// Rust number formats schemars adds (`uint32`, `double`, ...), which no JSON
/// Schema validator knows. Field documentation stays in the Rust types and the
/// README. (Inputs keep their descriptions: the model fills them in.)
pub fn output_schema<T: JsonSchema>() -> JsonObject {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut out = finish(schema, false);
    out.remove("$schema");
    let mut value = Value::Object(out);
    drop_number_formats(&mut value);
    for_each_subschema(&mut value, &mut |schema| {
        let description = schema.remove("description");
        for key in [
            "title",
            "examples",
            "default",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
        ] {
            schema.remove(key);
        }
        // A field of any JSON value keeps its prose: `{}` is not portable.
        if schema.is_empty()
            && let Some(d) = description
        {
            schema.insert("description".into(), d);
        }
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Call `f` on every subschema of `value` (itself included), following the
/// keywords that hold schemas, so that a property named `description` is never
/// taken for the keyword.
pub fn for_each_subschema(value: &mut Value, f: &mut dyn FnMut(&mut JsonObject)) {
    let Value::Object(obj) = value else {
        return;
    };
    f(obj);
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(map)) = obj.get_mut(key) {
            map.values_mut().for_each(|v| for_each_subschema(v, f));
        }
    }
    for key in ["items", "additionalProperties", "not", "contains"] {
        if let Some(v) = obj.get_mut(key) {
            for_each_subschema(v, f);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(items)) = obj.get_mut(key) {
            items.iter_mut().for_each(|v| for_each_subschema(v, f));
        }
    }
}

/// Loosen an output schema until it is at most `budget` characters (counted
/// as [`python_json_len`]): the largest object definition in `$defs` becomes
/// `{"type": "object"}`, again and again, and definitions nothing refers to any
/// more are dropped. The result still validates every output the full schema
/// does; it checks less deep down. Used only for the few outputs that nest
/// whole reports (triage embeds the system context), so that every tool's
/// definition fits the listing budget.
pub fn fit_output_schema(schema: &mut JsonObject, budget: usize) {
    loop {
        if python_json_len(&Value::Object(schema.clone())) <= budget {
            return;
        }
        let Some(Value::Object(defs)) = schema.get_mut("$defs") else {
            return;
        };
        let largest = defs
            .iter()
            .filter(|(_, d)| {
                d.get("type").and_then(Value::as_str) == Some("object")
                    && d.get("properties").is_some()
            })
            .map(|(name, d)| (python_json_len(d), name.clone()))
            .max();
        let Some((_, name)) = largest else {
            return;
        };
        defs.insert(name, json!({"type": "object"}));
        drop_unreferenced_defs(schema);
    }
}

/// Remove `$defs` entries that no `$ref` reaches from the root.
fn drop_unreferenced_defs(schema: &mut JsonObject) {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref")
                    && let Some(name) = r.strip_prefix("#/$defs/")
                {
                    out.push(name.to_string());
                }
                o.iter()
                    .filter(|(k, _)| *k != "$defs")
                    .for_each(|(_, v)| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let Some(Value::Object(defs)) = schema.get("$defs") else {
        return;
    };
    let mut reached = std::collections::BTreeSet::new();
    let mut todo = Vec::new();
    refs(&Value::Object(schema.clone()), &mut todo);
    while let Some(name) = todo.pop() {
        if reached.insert(name.clone())
            && let Some(d) = defs.get(&name)
        {
            refs(d, &mut todo);
        }
    }
    if let Some(Value::Object(defs)) = schema.get_mut("$defs") {
        defs.retain(|name, _| reached.contains(name));
        if defs.is_empty() {
            schema.remove("$defs");
        }
    }
}

/// The length of `value` as Python's default `json.dumps` writes it: `", "`
/// and `": "` separators and ASCII-only output (`\uXXXX` for every non-ASCII
/// character, two of them for characters outside the BMP). This is how the
/// tool-listing budgets are counted, so clients and tests agree on the numbers.
pub fn python_json_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => python_str_len(s),
        Value::Array(items) => {
            2 + items.iter().map(python_json_len).sum::<usize>() + 2 * items.len().saturating_sub(1)
        }
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| python_str_len(k) + 2 + python_json_len(v))
                .sum::<usize>()
                + 2 * map.len().saturating_sub(1)
        }
    }
}

fn python_str_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            ' '..='~' => 1,
            c if (c as u32) > 0xFFFF => 12,
            _ => 6,
        })
        .sum::<usize>()
}

/// Remove schemars' Rust number formats (`"format": "uint32"`, `"double"`, ...).
fn drop_number_formats(value: &mut Value) {
    match value {
        Value::Object(obj) => {
            if obj
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(is_rust_number_format)
                && obj.get("type").and_then(Value::as_str) != Some("string")
            {
                obj.remove("format");
            }
            obj.values_mut().for_each(drop_number_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_number_formats),
        _ => {}
    }
}

fn is_rust_number_format(format: &str) -> bool {
    matches!(
        format,
        "int"
            | "uint"
            | "float"
            | "double"
            | "int8"
            | "int16"
            | "int32"
            | "int64"
            | "int128"
            | "uint8"
            | "uint16"
            | "uint32"
            | "uint64"
            | "uint128"
    )
}

fn finish(schema: Schema, is_input: bool) -> JsonObject {
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        // Clients show the tool's own title and description; the type's are noise.
        obj.remove("title");
        obj.remove("description");
        if !obj.contains_key("type") && !obj.contains_key("anyOf") && !obj.contains_key("oneOf") {
            obj.insert("type".into(), json!("object"));
        }
        if is_input && !obj.contains_key("properties") {
            // A tool with no inputs: the spec recommends an explicit empty object.
            obj.insert("properties".into(), json!({}));
            obj.insert("additionalProperties".into(), json!(false));
        }
    }
    if is_input {
        simplify_optionals(&mut value);
    }
    split_type_arrays(&mut value);
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Rewrite `"type": ["X", "null"]` as `"type": "X"` and
/// `anyOf: [S, {"type": "null"}]` as `S` for properties that are not required,
/// recursively. An absent optional field and a null one mean the same to us.
fn simplify_optionals(value: &mut Value) {
    match value {
        Value::Object(obj) => {
            let required: Vec<String> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Object(props)) = obj.get_mut("properties") {
                for (name, prop) in props.iter_mut() {
                    if !required.contains(name) {
                        strip_null(prop);
                    }
                }
            }
            for (_, child) in obj.iter_mut() {
                simplify_optionals(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(simplify_optionals),
        _ => {}
    }
}

fn strip_null(prop: &mut Value) {
    let Some(obj) = prop.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = obj.get("type") {
        let non_null: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        if non_null.len() == 1 {
            obj.insert("type".into(), non_null[0].clone());
        } else if non_null.len() < types.len() {
            obj.insert("type".into(), Value::Array(non_null));
        }
    }
    // `enum` lists for optional enums carry a trailing null.
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if obj.get("default").is_some_and(Value::is_null) {
        obj.remove("default");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = obj.get(key) {
            let non_null: Vec<Value> = alts
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .cloned()
                .collect();
            if non_null.len() == 1 && non_null.len() < alts.len() {
                let inner = non_null[0].clone();
                obj.remove(key);
                if let Value::Object(inner) = inner {
                    for (k, v) in inner {
                        obj.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
}

/// Rewrite `"type": ["X", "null"]` as `anyOf: [{"type": "X"}, {"type": "null"}]`:
/// the same contract, but readable by clients that map schemas onto a
/// single-type dialect (the MCP Inspector's `--strict` portability check).
fn split_type_arrays(value: &mut Value) {
    match value {
        Value::Object(obj) => {
            if let Some(Value::Array(types)) = obj.get("type").cloned()
                && types.len() > 1
                && types.iter().all(Value::is_string)
            {
                obj.remove("type");
                let branches: Vec<Value> = types
                    .iter()
                    .map(|t| {
                        let name = t.as_str().unwrap_or_default();
                        let mut b = Map::new();
                        b.insert("type".into(), t.clone());
                        for k in branch_keywords(name) {
                            if let Some(v) = obj.get(*k) {
                                b.insert((*k).into(), v.clone());
                            }
                        }
                        if let Some(Value::Array(values)) = obj.get("enum") {
                            // Each branch keeps the enum values of its own type.
                            let own: Vec<Value> = values
                                .iter()
                                .filter(|v| json_type_name(v) == name)
                                .cloned()
                                .collect();
                            if !own.is_empty() && name != "null" {
                                b.insert("enum".into(), Value::Array(own));
                            }
                        }
                        Value::Object(b)
                    })
                    .collect();
                for t in &types {
                    for k in branch_keywords(t.as_str().unwrap_or_default()) {
                        obj.remove(*k);
                    }
                }
                obj.remove("enum");
                obj.insert("anyOf".into(), Value::Array(branches));
            }
            for (_, child) in obj.iter_mut() {
                split_type_arrays(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(split_type_arrays),
        _ => {}
    }
}

/// Keywords that constrain only values of one JSON type.
fn branch_keywords(type_name: &str) -> &'static [&'static str] {
    match type_name {
        "string" => &["format", "pattern", "minLength", "maxLength"],
        "integer" | "number" => &[
            "format",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
        ],
        "array" => &["items", "minItems", "maxItems"],
        "object" => &["properties", "required", "additionalProperties"],
        _ => &[],
    }
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Long-running operations take two more inputs, handled by the dispatcher.
pub fn add_long_running_inputs(schema: &mut JsonObject) {
    let props = schema
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(props) = props {
        props.entry("timeout_s").or_insert(json!({
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Stop the operation after this many seconds and return a `timeout` error. Default: no limit beyond the operation's own."
        }));
        props.entry("async").or_insert(json!({
            "type": "boolean",
            "default": false,
            "description": "Return {job_id} at once and run in the background; poll aisp_job_status."
        }));
    }
}

/// What a tool's `structuredContent` may be: its output, the error envelope
/// `{"error": {kind, message, hint}}` (clients such as the TypeScript SDK
/// validate error results against the output schema too) and, for long-running
/// operations, the job ticket of `async: true`. MCP requires an object root.
pub fn with_alternatives(output: JsonObject, long_running: bool) -> JsonObject {
    let mut output = output;
    let defs = output.remove("$defs");
    let schema_uri = output.remove("$schema");
    let mut alternatives = vec![Value::Object(output), error_envelope_schema()];
    if long_running {
        alternatives.push(inlined::<crate::jobs::JobTicket>());
    }
    let mut root = Map::new();
    if let Some(uri) = schema_uri {
        root.insert("$schema".into(), uri);
    }
    root.insert("type".into(), json!("object"));
    root.insert("anyOf".into(), Value::Array(alternatives));
    if let Some(defs) = defs {
        root.insert("$defs".into(), defs);
    }
    root
}

/// The error envelope as every tool's output schema admits it: the same
/// contract as `ErrorEnvelope`'s own schema (`kind` one of the closed set,
/// `message` and `hint` strings), without the prose of each kind, which would
/// otherwise be repeated in every tool of `tools/list` (a sixth of its size).
/// The kinds are documented once, in the README (and on `ErrorKind`).
fn error_envelope_schema() -> Value {
    let kinds: Vec<&str> = crate::error::ErrorKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    json!({
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": kinds},
                    "message": {"type": "string"},
                    "hint": {"type": "string"}
                },
                "required": ["kind", "message", "hint"]
            }
        },
        "required": ["error"]
    })
}

/// A small output type's schema with no `$defs`, to embed in another schema.
fn inlined<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .for_serialize()
        .into_generator();
    let mut v = generator.into_root_schema_for::<T>().to_value();
    if let Some(o) = v.as_object_mut() {
        o.remove("$schema");
    }
    split_type_arrays(&mut v);
    v
}

/// The JSON type names a property schema allows (after simplification).
pub fn property_types(prop: &Value) -> Vec<String> {
    match prop.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect(),
        _ => {
            if prop.get("enum").is_some() {
                vec!["string".into()]
            } else {
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Example {
        /// A required path.
        path: String,
        /// An optional limit.
        #[serde(default)]
        limit: Option<u32>,
        mode: Option<Mode>,
    }

    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fast,
        Slow,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Empty {}

    #[test]
    fn optional_fields_render_as_plain_types_and_are_not_required() {
        let s = input_schema::<Example>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"], json!(["path"]));
        assert_eq!(s["properties"]["limit"]["type"], "integer");
        assert_eq!(s["properties"]["mode"]["enum"], json!(["fast", "slow"]));
        assert_eq!(s["properties"]["mode"]["type"], "string");
        assert_eq!(s["additionalProperties"], false);
        assert!(!serde_json::to_string(&s).unwrap().contains("$ref"));
        assert!(!s.contains_key("title"));
    }

    #[test]
    fn empty_inputs_are_closed_objects() {
        let s = input_schema::<Empty>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"], json!({}));
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Out {
        when: Option<String>,
        mode: Option<Mode>,
        n: u32,
    }

    #[test]
    fn nullable_outputs_use_single_type_branches() {
        let s = output_schema::<Out>();
        let text = serde_json::to_string(&s).unwrap();
        assert!(!text.contains(r#"["string","null"]"#), "{text}");
        assert_eq!(
            s["properties"]["when"]["anyOf"],
            json!([{"type": "string"}, {"type": "null"}])
        );
        assert_eq!(s["properties"]["n"], json!({"type": "integer"}));
        assert!(!text.contains("uint32"), "{text}");
    }

    #[test]
    fn python_lengths_match_json_dumps() {
        // Each expected length is `len(json.dumps(v))` in Python 3.
        let cases = [
            (json!({"a": [1, 2], "b": null}), 24),
            (json!("s\u{d7}s \u{3bc}s \u{2014} \"q\" \\ \n"), 37),
            (json!("\u{1F600}"), 14),
            (json!({}), 2),
            (json!([]), 2),
            (json!({"x": {"y": true, "z": 1.5}}), 28),
        ];
        for (v, expected) in cases {
            assert_eq!(python_json_len(&v), expected, "{v}");
        }
    }

    #[test]
    fn outputs_are_fitted_by_loosening_the_largest_definitions() {
        let mut s = with_alternatives(output_schema::<Nested>(), false);
        let full = python_json_len(&Value::Object(s.clone()));
        fit_output_schema(&mut s, full - 1);
        let text = serde_json::to_string(&s).unwrap();
        assert!(python_json_len(&Value::Object(s.clone())) < full);
        assert!(text.contains(r#""Big":{"type":"object"}"#), "{text}");
        assert!(
            !text.contains("Inner"),
            "unreferenced defs are dropped: {text}"
        );
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Nested {
        big: Big,
        small: u8,
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Big {
        a: Inner,
        b: Inner,
        c: String,
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        x: u32,
        y: Option<String>,
    }

    #[test]
    fn outputs_admit_the_error_envelope_and_long_ones_a_job_ticket() {
        let s = with_alternatives(output_schema::<Out>(), false);
        assert_eq!(s["type"], "object");
        let alts = s["anyOf"].as_array().unwrap();
        assert_eq!(alts.len(), 2);
        assert_eq!(alts[1]["required"], json!(["error"]));
        let kinds = &alts[1]["properties"]["error"]["properties"]["kind"]["enum"];
        let expected: Vec<&str> = crate::error::ErrorKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(kinds, &json!(expected));
        let s = with_alternatives(output_schema::<Out>(), true);
        let text = serde_json::to_string(&s["anyOf"][2]).unwrap();
        assert!(text.contains("job_id"));
    }
}
