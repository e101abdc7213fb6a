//! MCP prompts: ready-made starting points for common investigations that a
//! client can offer its user. Each renders to one user message that tells the
//! model which aisp tools to call, in what order.

use serde_json::{Map, Value};

use crate::error::OpError;

pub struct PromptArg {
    pub name: &'static str,
    pub description: &'static str,
    pub required: bool,
}

pub struct PromptDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub arguments: &'static [PromptArg],
    /// The message text with `{name}` placeholders for the arguments.
    pub template: &'static str,
}

impl PromptDef {
    /// Fill the template; a missing required argument is an error.
    pub fn render(&self, args: &Map<String, Value>) -> Result<String, OpError> {
        let mut text = self.template.to_string();
        for arg in self.arguments {
            let value = match args.get(arg.name) {
                Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
                Some(Value::Null) | None if !arg.required => "(not given)".to_string(),
                Some(Value::String(_)) | Some(Value::Null) | None => {
                    return Err(OpError::invalid_input(
                        format!("prompt `{}` needs the argument `{}`", self.name, arg.name),
                        format!("Pass {}: {}", arg.name, arg.description),
                    ));
                }
                Some(other) => other.to_string(),
            };
            text = text.replace(&format!("{{{}}}", arg.name), &value);
        }
        Ok(text)
    }
}

/// Every prompt the server offers.
pub fn all() -> &'static [PromptDef] {
    PROMPTS
}

pub fn find(name: &str) -> Option<&'static PromptDef> {
    PROMPTS.iter().find(|p| p.name == name)
}

const PROMPTS: &[PromptDef] = &[];
