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

/// The input schema of `T`: an object, inlined, optional fields not nullable.
pub fn input_schema<T: JsonSchema>() -> JsonObject {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .for_deserialize()
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    finish(schema, true)
}

/// The output schema of `T`: how it serializes, with `$defs` where needed.
pub fn output_schema<T: JsonSchema>() -> JsonObject {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    finish(schema, false)
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
    simplify_optionals(&mut value);
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

/// A long-running operation answers either its output or, with `async: true`,
/// a job ticket. MCP requires the root to be an object schema.
pub fn with_job_ticket_alternative(output: JsonObject) -> JsonObject {
    let mut output = output;
    let defs = output.remove("$defs");
    let schema_uri = output.remove("$schema");
    let ticket = output_schema::<crate::jobs::JobTicket>();
    let mut ticket = ticket;
    ticket.remove("$schema");
    let mut root = Map::new();
    if let Some(uri) = schema_uri {
        root.insert("$schema".into(), uri);
    }
    root.insert("type".into(), json!("object"));
    root.insert(
        "anyOf".into(),
        json!([Value::Object(output), Value::Object(ticket)]),
    );
    if let Some(defs) = defs {
        root.insert("$defs".into(), defs);
    }
    root
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

    #[test]
    fn long_running_outputs_accept_a_job_ticket() {
        let s = with_job_ticket_alternative(output_schema::<crate::error::OpError>());
        assert_eq!(s["type"], "object");
        assert_eq!(s["anyOf"].as_array().unwrap().len(), 2);
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains("job_id"));
    }
}
