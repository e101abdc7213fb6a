//! The registry as the Python API presents it (`python/`): keyword names,
//! annotations, defaults and docstrings of `engine.<domain>.<op>(...)`, the
//! error class per [`ErrorKind`], and the type stubs (`python/aisp/__init__.pyi`).
//!
//! One mapping from input schemas to Python, used twice: the extension hands
//! [`signature`] and [`docstring`] to the package, which builds the methods at
//! import, and [`stubs`] writes the same signatures for type checkers and
//! editors (`aisp schemas --python-stubs`; `tests/it/schemas.rs` fails on drift).

use serde_json::{Value, json};

use crate::error::ErrorKind;
use crate::registry::{self, ToolDef};

/// Python's reserved words: an argument with one of these names is spelled
/// with a trailing underscore (`async` → `async_`), as PEP 8 suggests.
const PY_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Exception names an error class must not take: Python's built-ins (a
/// `from aisp import *` would hide them) and asyncio's/concurrent.futures'
/// `CancelledError`. Such a kind's class gets the prefix `Aisp`.
const TAKEN_EXCEPTION_NAMES: [&str; 8] = [
    "TimeoutError",
    "CancelledError",
    "NotImplementedError",
    "ConnectionError",
    "PermissionError",
    "FileNotFoundError",
    "RuntimeError",
    "ValueError",
];

/// The Python spelling of an argument, operation or domain name.
pub fn py_name(arg: &str) -> String {
    if PY_KEYWORDS.contains(&arg) {
        format!("{arg}_")
    } else {
        arg.to_string()
    }
}

/// `not_found` → `NotFound`.
fn camel_case(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The exception class for an error kind: `not_found` → `NotFoundError`,
/// `timeout` → `AispTimeoutError` (not the built-in `TimeoutError`).
pub fn error_class(kind: ErrorKind) -> String {
    let camel = camel_case(kind.as_str());
    let name = format!("{camel}Error");
    if TAKEN_EXCEPTION_NAMES.contains(&name.as_str()) {
        format!("Aisp{name}")
    } else {
        name
    }
}

/// One keyword argument of a generated method.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The name in the input schema (what `dispatch` receives).
    pub arg: String,
    /// The Python keyword (`async_` for `async`).
    pub name: String,
    /// A Python annotation (`str`, `Optional[int]`, `Literal['short', 'demangled']`).
    pub annotation: String,
    pub required: bool,
    /// The schema's default, when it states one; otherwise optional arguments default to `None`
    /// (left out of the call, so the operation's own default applies).
    pub default: Option<Value>,
    pub description: String,
}

/// The keyword arguments of a tool, in input-schema order.
pub fn signature(tool: &ToolDef) -> Vec<Param> {
    let schema = &tool.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut params: Vec<Param> = props
        .iter()
        .map(|(arg, prop)| {
            let is_required = required.contains(&arg.as_str());
            let base = annotation(prop);
            Param {
                arg: arg.clone(),
                name: py_name(arg),
                annotation: if is_required {
                    base
                } else {
                    format!("Optional[{base}]")
                },
                required: is_required,
                default: prop.get("default").cloned(),
                description: prop
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            }
        })
        .collect();
    // Python wants required keyword arguments first only for readability; keep
    // the schema's order within each group.
    params.sort_by_key(|p| !p.required);
    params
}

/// The Python annotation for one property schema.
fn annotation(prop: &Value) -> String {
    if let Some(values) = prop.get("enum").and_then(Value::as_array) {
        return literal(values);
    }
    if let Some(alts) = prop
        .get("oneOf")
        .or_else(|| prop.get("anyOf"))
        .and_then(Value::as_array)
    {
        let consts: Vec<Value> = alts
            .iter()
            .filter_map(|a| a.get("const").cloned())
            .collect();
        if consts.len() == alts.len() && !consts.is_empty() {
            return literal(&consts);
        }
        let mut parts: Vec<String> = Vec::new();
        for a in alts {
            let t = annotation(a);
            if !parts.contains(&t) {
                parts.push(t);
            }
        }
        return match parts.len() {
            0 => "Any".into(),
            1 => parts.remove(0),
            _ => format!("Union[{}]", parts.join(", ")),
        };
    }
    match prop.get("type") {
        Some(Value::String(t)) => type_name(t, prop),
        Some(Value::Array(ts)) => {
            let nullable = ts.iter().any(|t| t == "null");
            let mut parts: Vec<String> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .map(|t| type_name(t, prop))
                .collect();
            parts.dedup();
            let inner = match parts.len() {
                0 => "None".to_string(),
                1 => parts.remove(0),
                _ => format!("Union[{}]", parts.join(", ")),
            };
            if nullable && inner != "None" {
                format!("Optional[{inner}]")
            } else {
                inner
            }
        }
        _ => "Any".into(),
    }
}

fn type_name(t: &str, prop: &Value) -> String {
    match t {
        "string" => "str".into(),
        "integer" => "int".into(),
        // JSON numbers: an int is a float to Python's type checkers too.
        "number" => "float".into(),
        "boolean" => "bool".into(),
        "null" => "None".into(),
        "array" => match prop.get("items") {
            Some(items) => format!("List[{}]", annotation(items)),
            None => "List[Any]".into(),
        },
        "object" => "Dict[str, Any]".into(),
        _ => "Any".into(),
    }
}

fn literal(values: &[Value]) -> String {
    let parts: Vec<String> = values.iter().map(py_literal).collect();
    format!("Literal[{}]", parts.join(", "))
}

/// A JSON value as Python source (for defaults and `Literal`s).
pub fn py_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_string(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(py_literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", py_string(k), py_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn py_string(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The `progress` keyword every method takes (a front-end argument, not in the schema).
const PROGRESS_DOC: &str = "Called on the calling thread with {\"progress\", \"total\", \"message\"} as the operation \
reports progress; return False (or raise) to cancel the call.";

/// The docstring of a generated method: the description, every argument
/// (NumPy style), what it returns, and the CLI/MCP spellings of the same call.
pub fn docstring(tool: &ToolDef) -> String {
    let spec = tool.spec();
    let mut doc = String::new();
    doc.push_str(spec.description.trim());
    doc.push_str("\n\nParameters\n----------\n");
    for p in signature(tool) {
        let optional = if p.required { "" } else { ", optional" };
        let default = match &p.default {
            Some(d) => format!(" (default {})", py_literal(d)),
            None => String::new(),
        };
        doc.push_str(&format!(
            "{} : {}{optional}{default}\n",
            p.name, p.annotation
        ));
        let text = if p.description.is_empty() {
            "(no description)".to_string()
        } else {
            p.description.replace('\n', " ")
        };
        doc.push_str(&format!("    {text}\n"));
    }
    doc.push_str(&format!(
        "progress : callable, optional\n    {PROGRESS_DOC}\n"
    ));
    doc.push_str("\nReturns\n-------\naisp.Result\n");
    doc.push_str("    The tool's output as a dict (`.to_pandas()` for its tables)");
    if spec.long_running {
        doc.push_str("; an aisp.Job with async_=True");
    }
    doc.push_str(".\n\nRaises\n------\naisp.AispError\n    A subclass per error kind, with .kind, .message and .hint.\n");
    doc.push_str(&format!(
        "\nSame as MCP `{}` and `{}`.\n",
        tool.name,
        super::documents::cli_usage(tool)
    ));
    doc
}

/// What the extension hands the package: domains (in `ops::DOMAINS` order)
/// with their tools, each with its Python signature and docstring, and the
/// error classes.
pub fn registry_json() -> Value {
    let domains: Vec<Value> = crate::ops::DOMAINS
        .iter()
        .map(|d| {
            let tools: Vec<Value> = d
                .operations
                .iter()
                .filter_map(|op| registry::find(&op.spec().tool_name()))
                .map(tool_json)
                .collect();
            json!({"name": d.name, "description": d.description, "tools": tools})
        })
        .collect();
    let errors: Vec<Value> = ErrorKind::ALL
        .iter()
        .map(|k| json!({"kind": k.as_str(), "class": error_class(*k)}))
        .collect();
    json!({"domains": domains, "errors": errors})
}

fn tool_json(t: &ToolDef) -> Value {
    let s = t.spec();
    let params: Vec<Value> = signature(t)
        .into_iter()
        .map(|p| {
            json!({
                "arg": p.arg,
                "name": p.name,
                "annotation": p.annotation,
                "required": p.required,
                "default": p.default,
            })
        })
        .collect();
    json!({
        "tool": t.name,
        "domain": s.domain,
        "name": s.name,
        "method": py_name(s.name),
        "short": s.short,
        "summary": s.summary,
        "long_running": s.long_running,
        "needs_gpu": s.needs_gpu,
        "executes_commands": s.executes_commands,
        "example": serde_json::from_str::<Value>(s.example).unwrap_or_else(|_| json!({})),
        "params": params,
        "doc": docstring(t),
    })
}

/// The Python class name of a domain's namespace (`profile` → `ProfileDomain`).
fn domain_class(domain: &str) -> String {
    let camel = camel_case(domain);
    format!("{camel}Domain")
}

fn method_stub(out: &mut String, t: &ToolDef, name: &str) {
    let mut args = vec!["self".to_string(), "*".to_string()];
    for p in signature(t) {
        args.push(match (&p.required, &p.default) {
            (true, _) => format!("{}: {}", p.name, p.annotation),
            (false, Some(d)) if !d.is_object() && !d.is_array() => {
                format!("{}: {} = {}", p.name, p.annotation, py_literal(d))
            }
            (false, _) => format!("{}: {} = ...", p.name, p.annotation),
        });
    }
    args.push("progress: Optional[Callable[[Dict[str, Any]], Any]] = ...".into());
    let ret = if t.spec().long_running {
        "Union[Result, Job]"
    } else {
        "Result"
    };
    let summary = t.spec().summary.replace("\"\"\"", "'''");
    out.push_str(&format!(
        "    def {name}({}) -> {ret}:\n        \"\"\"{}\"\"\"\n        ...\n",
        args.join(", "),
        summary.trim()
    ));
}

/// The header of the stubs: the package's hand-written API (results, jobs, errors' base).
const STUB_HEADER: &str = r#"# Type stubs of the `aisp` Python package, generated from the operation registry.
# Do not edit: run `aisp schemas --python-stubs python/aisp/__init__.pyi`
# (tests/schemas.rs fails when this file and the code disagree).
from typing import Any, Callable, Dict, Iterator, List, Literal, Optional, Union

__version__: str

class AispError(Exception):
    kind: str
    message: str
    hint: str
    tool: Optional[str]
    def __init__(self, message: str, hint: str = ..., kind: str = ..., tool: Optional[str] = ...) -> None: ...

class Result(Dict[str, Any]):
    tool: str
    def tables(self) -> Dict[str, List[Dict[str, Any]]]: ...
    def to_pandas(self, table: Optional[str] = ...) -> Any: ...
    def _repr_html_(self) -> str: ...

class Job:
    id: str
    tool: str
    def status(self) -> Result: ...
    def done(self) -> bool: ...
    def result(self, timeout_s: Optional[float] = ..., poll_s: float = ...) -> Result: ...
    def cancel(self) -> Result: ...
    async def wait(self, poll_s: float = ...) -> Result: ...

def to_pandas(value: Any, table: Optional[str] = ...) -> Any: ...
def tools() -> List[Dict[str, Any]]: ...
"#;

/// The whole stub file.
pub fn stubs() -> String {
    let mut out = String::from(STUB_HEADER);
    for k in ErrorKind::ALL {
        out.push_str(&format!(
            "\nclass {}(AispError):\n    \"\"\"Error kind `{}`.\"\"\"\n",
            error_class(k),
            k.as_str()
        ));
    }
    for d in crate::ops::DOMAINS {
        out.push_str(&format!(
            "\nclass {}:\n    \"\"\"{}\"\"\"\n",
            domain_class(d.name),
            d.description.replace("\"\"\"", "'''")
        ));
        for op in d.operations {
            if let Some(t) = registry::find(&op.spec().tool_name()) {
                method_stub(&mut out, t, &py_name(t.spec().name));
            }
        }
    }
    out.push_str(
        "\nclass Engine:\n    \"\"\"The aisp engine in this process: `engine.<domain>.<op>(**kwargs)`.\"\"\"\n",
    );
    for d in crate::ops::DOMAINS {
        out.push_str(&format!(
            "    {}: {}\n",
            py_name(d.name),
            domain_class(d.name)
        ));
    }
    out.push_str("    home: str\n    allow_exec: bool\n");
    out.push_str(
        "    def __init__(self, home: Optional[str] = ..., allow_exec: Optional[bool] = ...) -> None: ...\n",
    );
    out.push_str("    def domains(self) -> List[str]: ...\n");
    // The short-named tools (`aisp_status`, `aisp_ask`, ...) are also methods of the engine.
    for t in registry::tools().iter().filter(|t| t.spec().short) {
        method_stub(&mut out, t, &py_name(t.spec().name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_and_taken_names_are_avoided() {
        assert_eq!(py_name("async"), "async_");
        assert_eq!(py_name("path"), "path");
        assert_eq!(error_class(ErrorKind::Timeout), "AispTimeoutError");
        assert_eq!(error_class(ErrorKind::Cancelled), "AispCancelledError");
        assert_eq!(error_class(ErrorKind::NotFound), "NotFoundError");
        assert_eq!(
            error_class(ErrorKind::GpuUnavailable),
            "GpuUnavailableError"
        );
    }

    #[test]
    fn every_argument_is_in_the_signature_and_the_docstring() {
        for t in registry::tools() {
            let params = signature(t);
            let n = t
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
                .map_or(0, |p| p.len());
            assert_eq!(params.len(), n, "{}", t.name);
            let doc = docstring(t);
            for p in &params {
                assert!(
                    doc.contains(&format!("\n{} : ", p.name)),
                    "{}: {}",
                    t.name,
                    p.name
                );
            }
        }
    }

    #[test]
    fn annotations_follow_the_schema() {
        let t = registry::find("aisp_profile_summary").unwrap();
        let params = signature(t);
        assert_eq!(params[0].name, "path");
        assert_eq!(params[0].annotation, "str");
        let names = params.iter().find(|p| p.name == "names").unwrap();
        assert_eq!(names.annotation, "Optional[Literal['short', 'demangled']]");
        let reports = params.iter().find(|p| p.name == "reports").unwrap();
        assert_eq!(reports.annotation, "Optional[List[str]]");
        let monitor = signature(registry::find("aisp_system_monitor").unwrap());
        let a = monitor.iter().find(|p| p.arg == "async").unwrap();
        assert_eq!(
            (a.name.as_str(), a.default.clone()),
            ("async_", Some(json!(false)))
        );
    }
}
