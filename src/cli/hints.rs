//! Hints and findings are written once, in the words of the MCP surface (tool
//! names like `aisp_profile_gaps`, arguments like `"limit": 20`). At the command
//! line they are rewritten here into what a person types: `aisp profile gaps`,
//! `--limit 20`, `` `--gpu` ``. The MCP front end passes them through unchanged.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

use super::args::flag_name;
use crate::registry::documents::cli_usage;
use crate::registry::{self, ToolDef};

static TOOL_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\baisp_[a-z0-9_]+\b").expect("valid regex"));
/// A small JSON object of arguments: `{"path": "run.sqlite", "limit": 5}`.
static ARG_OBJECT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\{\s*"[a-z_0-9]+"\s*:[^{}]*\}"#).expect("valid regex"));
/// One argument: `"limit": 20`, `"names": "demangled"`.
static ARG_PAIR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""([a-z_0-9]+)"\s*:\s*("[^"]*"|-?[0-9][0-9.]*|true|false)"#).expect("valid regex")
});
static BACKTICKED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"`([a-z][a-z_0-9]*)`").expect("valid regex"));

/// Tool names as CLI commands (`aisp_profile_gaps` → `aisp profile gaps`).
pub fn commands(text: &str) -> String {
    TOOL_NAME
        .replace_all(text, |c: &Captures| match registry::find(&c[0]) {
            Some(tool) => cli_usage(tool),
            None => c[0].to_string(),
        })
        .into_owned()
}

/// A hint for the command line: tool names as commands, JSON arguments as
/// flags, and `` `field` `` as `` `--field` `` where `tool` has that input.
pub fn for_cli(text: &str, tool: Option<&ToolDef>) -> String {
    let text = ARG_OBJECT.replace_all(text, |c: &Captures| {
        match serde_json::from_str::<serde_json::Map<String, Value>>(&c[0]) {
            Ok(args) => args
                .iter()
                .map(|(k, v)| flag(k, v))
                .collect::<Vec<_>>()
                .join(" "),
            Err(_) => c[0].to_string(),
        }
    });
    let text = ARG_PAIR.replace_all(&text, |c: &Captures| {
        let v: Value = serde_json::from_str(&c[2]).unwrap_or(Value::String(c[2].to_string()));
        flag(&c[1], &v)
    });
    let inputs: Vec<String> = tool
        .and_then(|t| t.input_schema.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let text = BACKTICKED.replace_all(&text, |c: &Captures| {
        if inputs.iter().any(|i| i == &c[1]) {
            format!("`--{}`", flag_name(&c[1]))
        } else {
            c[0].to_string()
        }
    });
    commands(&text)
}

fn flag(name: &str, v: &Value) -> String {
    let value = match v {
        Value::String(s) if s.contains(' ') => format!("'{s}'"),
        Value::String(s) => s.clone(),
        Value::Bool(true) => return format!("--{}", flag_name(name)),
        Value::Bool(false) => return format!("--{}=false", flag_name(name)),
        other => other.to_string(),
    };
    format!("--{} {value}", flag_name(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_commands_and_flags() {
        let gaps = registry::find("aisp_profile_gaps");
        assert_eq!(
            for_cli("Pass e.g. \"limit\": 20.", gaps),
            "Pass e.g. --limit 20."
        );
        assert_eq!(
            for_cli(
                "Pass the path of an export, e.g. {\"path\": \"run.sqlite\"}.",
                gaps
            ),
            "Pass the path of an export, e.g. --path run.sqlite."
        );
        assert_eq!(
            for_cli(
                "aisp_profile_info lists the devices; see `min_gap_ms`.",
                gaps
            ),
            "aisp profile info lists the devices; see `--min-gap-ms`."
        );
        let plan = registry::find("aisp_distributed_plan");
        assert_eq!(
            for_cli("Pass `gpu` with a catalog id.", plan),
            "Pass `--gpu` with a catalog id."
        );
        // Names that are not tools or inputs are left alone.
        assert_eq!(
            for_cli("`aisp_nope` and `other`", plan),
            "`aisp_nope` and `other`"
        );
        assert_eq!(
            commands("check aisp_profile_gaps"),
            "check aisp profile gaps"
        );
    }
}
