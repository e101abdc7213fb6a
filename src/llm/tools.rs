//! aisp's operations as function tools for the model.
//!
//! Only operations that look and do not touch are offered: read-only, no
//! user commands, not long-running (long runs belong to the user, who can
//! start them with `async: true`). `aisp_ask` and `aisp_ai_status` are left
//! out (the model is already talking to the LLM); `aisp_explain` and
//! `aisp_suggest_tools` are offered with their LLM options forced off.
//!
//! Offering all tools would cost tens of thousands of prompt tokens per step,
//! more than a small local model's whole context. The model gets the tools
//! that rank highest for the question, the profile tools when a profile is
//! attached, and `aisp_suggest_tools` to find the rest; any eligible tool may
//! be called by name even if it was not offered.

use async_openai::types::chat::{ChatCompletionTool, ChatCompletionTools, FunctionObject};
use serde_json::{Map, Value};

use crate::registry::{self, ToolDef};

/// Tools never offered to the model.
const EXCLUDED: &[&str] = &["aisp_ask", "aisp_ai_status"];

/// Arguments forced off in nested calls: no LLM inside the LLM's own tools.
const FORCED_OFF: &[(&str, &str)] = &[("aisp_explain", "expand"), ("aisp_suggest_tools", "llm")];

/// Why a tool may not be called by the model, or None when it may.
pub fn refusal(tool: &ToolDef) -> Option<&'static str> {
    let spec = tool.spec();
    if EXCLUDED.contains(&tool.name.as_str()) {
        return Some("it would call the LLM from inside the LLM's own investigation");
    }
    if spec.executes_commands {
        return Some("it runs a command the user supplies; ask the user to run it");
    }
    if spec.long_running {
        return Some(
            "it is long-running (captures, benchmarks, monitors); suggest it to the user instead",
        );
    }
    if !spec.hints.read_only {
        return Some("it changes state outside aisp's store; suggest it to the user instead");
    }
    None
}

pub fn eligible(tool: &ToolDef) -> bool {
    refusal(tool).is_none()
}

/// Every tool the model may call.
pub fn eligible_tools() -> Vec<&'static ToolDef> {
    registry::tools().iter().filter(|t| eligible(t)).collect()
}

/// Drop arguments that would make a nested tool call the LLM.
pub fn sanitize_args(tool: &str, args: &mut Map<String, Value>) {
    for (t, field) in FORCED_OFF {
        if *t == tool {
            args.remove(*field);
        }
    }
}

/// The function definition the model sees: name, description, input schema.
pub fn function_tool(tool: &ToolDef) -> ChatCompletionTools {
    let spec = tool.spec();
    let mut schema = (*tool.input_schema).clone();
    // `$schema` and `title` are noise to the model; the rest is plain JSON Schema.
    schema.remove("$schema");
    schema.remove("title");
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (t, field) in FORCED_OFF {
            if *t == tool.name {
                props.remove(*field);
            }
        }
    }
    let mut description = spec.description.to_string();
    if description.len() > 700 {
        description = super::client::truncate_chars(&description, 700);
    }
    ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: tool.name.clone(),
            description: Some(description),
            parameters: Some(Value::Object(schema)),
            strict: None,
        },
    })
}

/// Tools to offer for a question: `must` first (those that exist and are
/// eligible), then the best-ranked for the question, up to `limit`, plus
/// `aisp_suggest_tools` for finding the rest.
pub fn select(question: &str, must: &[&str], limit: usize) -> Vec<&'static ToolDef> {
    let mut out: Vec<&'static ToolDef> = Vec::new();
    let push = |t: &'static ToolDef, out: &mut Vec<&'static ToolDef>| {
        if eligible(t) && !out.iter().any(|o| o.name == t.name) {
            out.push(t);
        }
    };
    for name in must {
        if let Some(t) = registry::find(name) {
            push(t, &mut out);
        }
    }
    for r in crate::suggest::rank(question, registry::tools()) {
        if out.len() >= limit {
            break;
        }
        push(r.tool, &mut out);
    }
    for name in ["aisp_suggest_tools", "aisp_status"] {
        if let Some(t) = registry::find(name) {
            push(t, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_looking_tools_are_eligible() {
        for t in eligible_tools() {
            let s = t.spec();
            assert!(
                s.hints.read_only && !s.executes_commands && !s.long_running,
                "{}",
                t.name
            );
            assert!(!EXCLUDED.contains(&t.name.as_str()));
        }
        let monitor = registry::find("aisp_system_monitor").unwrap();
        assert!(!eligible(monitor));
        assert!(refusal(monitor).unwrap().contains("long-running"));
    }

    #[test]
    fn function_tools_carry_the_input_schema() {
        let t = registry::find("aisp_suggest_tools").unwrap();
        let ChatCompletionTools::Function(f) = function_tool(t) else {
            panic!("not a function tool")
        };
        assert_eq!(f.function.name, "aisp_suggest_tools");
        let params = f.function.parameters.unwrap();
        assert!(params["properties"]["task"].is_object());
        assert!(
            params["properties"].get("llm").is_none(),
            "the LLM option is hidden"
        );
        assert!(params.get("$schema").is_none());
    }

    #[test]
    fn selection_puts_required_tools_first_and_respects_the_limit() {
        let picked = select("is my background job finished", &["aisp_status"], 3);
        assert_eq!(picked[0].name, "aisp_status");
        assert!(picked.iter().any(|t| t.name == "aisp_job_status"));
        assert!(picked.iter().any(|t| t.name == "aisp_suggest_tools"));
        assert!(picked.iter().all(|t| eligible(t)));
        assert!(picked.len() <= 4);
    }
}
