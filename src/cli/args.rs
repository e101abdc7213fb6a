//! CLI flags derived from an operation's input schema, and back to JSON.
//!
//! Each input property `some_field` becomes `--some-field`. Booleans are
//! switches (`--flag`, `--flag=false`), numbers and strings take a value, enums
//! list their values, arrays take several values (or repeat the flag), and
//! objects take JSON. Properties named in the operation's `positional` list
//! are also accepted positionally; an array there takes the rest of the line
//! (`aisp profile nsys -- python train.py`).

use clap::builder::{BoolishValueParser, PossibleValuesParser};
use clap::{Arg, ArgAction, ArgMatches, Command};
use serde_json::{Map, Number, Value};

use crate::registry::ToolDef;
use crate::registry::schema::property_types;

/// The kind of value a property takes on the command line.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Bool,
    Integer,
    Number,
    String,
    Array(Box<Kind>),
    Json,
}

/// The string choices of an enum property: `enum`, or `oneOf`/`anyOf` of `const`s.
fn choices(prop: &Value) -> Option<Vec<String>> {
    if let Some(vs) = prop.get("enum").and_then(Value::as_array) {
        return Some(
            vs.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        );
    }
    let alts = prop
        .get("oneOf")
        .or_else(|| prop.get("anyOf"))
        .and_then(Value::as_array)?;
    let mut out = Vec::new();
    for alt in alts {
        if alt.get("type").and_then(Value::as_str) == Some("null") {
            continue;
        }
        match (alt.get("const"), alt.get("enum")) {
            (Some(Value::String(c)), _) => out.push(c.clone()),
            (_, Some(Value::Array(vs))) => {
                out.extend(vs.iter().filter_map(|v| v.as_str().map(str::to_string)))
            }
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

fn kind_of(prop: &Value) -> Kind {
    if choices(prop).is_some() {
        return Kind::String;
    }
    let types = property_types(prop);
    let non_null: Vec<&str> = types
        .iter()
        .map(String::as_str)
        .filter(|t| *t != "null")
        .collect();
    match non_null.as_slice() {
        ["boolean"] => Kind::Bool,
        ["integer"] => Kind::Integer,
        ["number"] => Kind::Number,
        ["string"] => Kind::String,
        ["array"] => Kind::Array(Box::new(
            prop.get("items").map(kind_of).unwrap_or(Kind::Json),
        )),
        _ => Kind::Json,
    }
}

/// Internal argument id for a positional property.
fn pos_id(name: &str) -> String {
    format!("__pos_{name}")
}

pub fn flag_name(property: &str) -> String {
    property.replace('_', "-")
}

/// Properties the CLI does not offer (handled by the dispatcher or meaningless here).
const HIDDEN: &[&str] = &["async"];

/// Extra flag spellings kept for fields that were renamed: (tool, field, old name).
const RENAMED: &[(&str, &str, &str)] = &[("aisp_ask", "path", "profile")];

/// Add the flags of `tool`'s input schema to `cmd`.
pub fn add_input_args(mut cmd: Command, tool: &ToolDef) -> Command {
    let schema = &tool.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return cmd;
    };
    for (name, prop) in props {
        if HIDDEN.contains(&name.as_str()) {
            continue;
        }
        let kind = kind_of(prop);
        let mut help = prop
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .replace('\n', " ");
        if required.contains(&name.as_str()) {
            help = format!("[required] {help}");
        }
        if let Some(default) = prop.get("default") {
            help = format!("{help} [default: {default}]");
        }
        let mut arg = Arg::new(name.clone())
            .long(flag_name(name))
            .help(help.clone());
        if flag_name(name) != *name {
            arg = arg.alias(name.clone());
        }
        for (_, _, old) in RENAMED
            .iter()
            .filter(|(t, f, _)| *t == tool.name && f == name)
        {
            arg = arg.alias(*old);
        }
        arg = match &kind {
            Kind::Bool => arg
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_parser(BoolishValueParser::new()),
            Kind::Array(inner) => {
                let a = arg.num_args(1..).action(ArgAction::Append);
                with_enum(a, prop.get("items"), inner)
            }
            Kind::Integer => with_range(
                arg.allow_negative_numbers(true).value_name("INT"),
                name,
                prop,
                true,
            ),
            Kind::Number => with_range(
                arg.allow_negative_numbers(true).value_name("NUM"),
                name,
                prop,
                false,
            ),
            Kind::String => with_enum(arg.value_name("TEXT"), Some(prop), &kind),
            Kind::Json => arg.value_name("JSON"),
        };
        cmd = cmd.arg(arg);
    }
    for (i, name) in tool.spec().positional.iter().enumerate() {
        let Some(prop) = props.get(*name) else {
            continue;
        };
        let kind = kind_of(prop);
        let mut arg = Arg::new(pos_id(name))
            .value_name(name.to_uppercase())
            .help(format!("same as --{}", flag_name(name)))
            .index(i + 1);
        if matches!(kind, Kind::Array(_)) {
            arg = arg
                .num_args(1..)
                .trailing_var_arg(true)
                .allow_hyphen_values(true)
                .last(false);
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

/// Check a number flag at parse time against the schema's bounds, naming them in the error.
fn with_range(arg: Arg, name: &str, prop: &Value, integer: bool) -> Arg {
    let min = prop.get("minimum").and_then(Value::as_f64);
    let max = prop.get("maximum").and_then(Value::as_f64);
    let flag = flag_name(name);
    let range = match (min, max) {
        (Some(lo), Some(hi)) => format!(" ({lo} to {hi})"),
        (Some(lo), None) => format!(" ({lo} or more)"),
        (None, Some(hi)) => format!(" (at most {hi})"),
        (None, None) => String::new(),
    };
    let what = if integer { "an integer" } else { "a number" };
    let parser = move |text: &str| -> Result<String, String> {
        let value = if integer {
            text.trim().parse::<i64>().ok().map(|v| v as f64)
        } else {
            text.trim().parse::<f64>().ok().filter(|v| v.is_finite())
        };
        match value {
            Some(v) if min.is_none_or(|lo| v >= lo) && max.is_none_or(|hi| v <= hi) => {
                Ok(text.trim().to_string())
            }
            _ => Err(format!("--{flag} takes {what}{range}")),
        }
    };
    arg.value_parser(parser)
}

fn with_enum(arg: Arg, prop: Option<&Value>, kind: &Kind) -> Arg {
    let values: Option<Vec<String>> = prop.and_then(choices);
    match values {
        Some(v) if !v.is_empty() && matches!(kind, Kind::String) => {
            arg.value_parser(PossibleValuesParser::new(v))
        }
        _ => arg,
    }
}

/// Build the JSON arguments from parsed matches, starting from `--json`.
pub fn matches_to_json(
    tool: &ToolDef,
    matches: &ArgMatches,
    base: Option<&str>,
) -> Result<Value, String> {
    let mut out: Map<String, Value> = match base {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err("--json must be a JSON object".into()),
            Err(e) => return Err(format!("--json is not valid JSON: {e}")),
        },
        None => Map::new(),
    };
    let Some(props) = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    else {
        return Ok(Value::Object(out));
    };
    for (name, prop) in props {
        if HIDDEN.contains(&name.as_str()) {
            continue;
        }
        let kind = kind_of(prop);
        let flag_values: Option<Vec<String>> = match kind {
            Kind::Bool => matches.get_one::<bool>(name).map(|b| vec![b.to_string()]),
            _ => matches
                .get_many::<String>(name)
                .map(|vs| vs.cloned().collect()),
        };
        let positional: Option<Vec<String>> = matches
            .try_get_many::<String>(&pos_id(name))
            .ok()
            .flatten()
            .map(|vs| vs.cloned().collect());
        let values = match (flag_values, positional) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "`{name}` was given both as --{} and positionally",
                    flag_name(name)
                ));
            }
            (Some(v), None) | (None, Some(v)) => v,
            (None, None) => continue,
        };
        out.insert(name.clone(), convert(name, &kind, &values)?);
    }
    Ok(Value::Object(out))
}

fn convert(name: &str, kind: &Kind, values: &[String]) -> Result<Value, String> {
    let one = || values.last().cloned().unwrap_or_default();
    match kind {
        Kind::Bool => Ok(Value::Bool(one() == "true")),
        Kind::Integer => one()
            .parse::<i64>()
            .map(|n| Value::Number(n.into()))
            .map_err(|_| format!("--{} expects an integer, got `{}`", flag_name(name), one())),
        Kind::Number => one()
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("--{} expects a number, got `{}`", flag_name(name), one())),
        Kind::String => Ok(Value::String(one())),
        Kind::Array(inner) => {
            // A single JSON array is accepted as well as separate values.
            if values.len() == 1 && values[0].trim_start().starts_with('[') {
                return serde_json::from_str(&values[0])
                    .map_err(|e| format!("--{} is not a valid JSON array: {e}", flag_name(name)));
            }
            values
                .iter()
                .map(|v| convert(name, inner, std::slice::from_ref(v)))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        Kind::Json => {
            let text = one();
            serde_json::from_str(&text)
                .or(Ok(Value::String(text)))
                .map_err(|e: serde_json::Error| e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn parse(tool: &str, argv: &[&str]) -> Result<Value, String> {
        let tool = registry::find(tool).unwrap();
        let cmd = add_input_args(Command::new("x").no_binary_name(true), tool);
        let m = cmd.try_get_matches_from(argv).map_err(|e| e.to_string())?;
        matches_to_json(tool, &m, None)
    }

    #[test]
    fn flags_are_typed_from_the_schema() {
        assert_eq!(
            parse(
                "aisp_system_monitor",
                &["--duration-s", "2.5", "--interval-ms", "100"]
            )
            .unwrap(),
            serde_json::json!({"duration_s": 2.5, "interval_ms": 100})
        );
        assert_eq!(
            parse("aisp_job_list", &["--state", "running", "--limit", "3"]).unwrap(),
            serde_json::json!({"state": "running", "limit": 3})
        );
        assert!(parse("aisp_job_list", &["--state", "bogus"]).is_err());
        // Enums written as oneOf consts list their choices; bounds are checked with a plain message.
        assert_eq!(
            parse(
                "aisp_profile_kernels",
                &["x.sqlite", "--names", "demangled"]
            )
            .unwrap(),
            serde_json::json!({"path": "x.sqlite", "names": "demangled"})
        );
        let err = parse("aisp_profile_kernels", &["x.sqlite", "--names", "long"]).unwrap_err();
        assert!(err.contains("short") && err.contains("demangled"), "{err}");
        let err = parse("aisp_profile_kernels", &["x.sqlite", "--limit", "-1"]).unwrap_err();
        assert!(
            err.contains("--limit takes an integer (0 or more)"),
            "{err}"
        );
        assert!(parse("aisp_job_list", &["--limit", "many"]).is_err());
        // Snake-case spelling is accepted too.
        assert_eq!(
            parse("aisp_system_monitor", &["--duration_s", "1"]).unwrap(),
            serde_json::json!({"duration_s": 1.0})
        );
    }

    #[test]
    fn positionals_fill_the_named_fields() {
        assert_eq!(
            parse("aisp_job_status", &["job_abc"]).unwrap(),
            serde_json::json!({"job_id": "job_abc"})
        );
        assert_eq!(
            parse("aisp_suggest_tools", &["find idle gaps", "--limit", "2"]).unwrap(),
            serde_json::json!({"task": "find idle gaps", "limit": 2})
        );
        assert!(parse("aisp_job_status", &["a", "--job-id", "b"]).is_err());
    }

    #[test]
    fn json_base_is_merged_under_flags() {
        let tool = registry::find("aisp_job_list").unwrap();
        let cmd = add_input_args(Command::new("x").no_binary_name(true), tool);
        let m = cmd.try_get_matches_from(["--limit", "4"]).unwrap();
        let v = matches_to_json(tool, &m, Some(r#"{"limit": 9, "state": "failed"}"#)).unwrap();
        assert_eq!(v, serde_json::json!({"limit": 4, "state": "failed"}));
        assert!(matches_to_json(tool, &m, Some("[1]")).is_err());
        assert!(matches_to_json(tool, &m, Some("{")).is_err());
    }
}
