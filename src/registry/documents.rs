//! `tool-schemas/`: one JSON file per tool (name, title, description, input
//! and output schemas, annotations, flags), generated from the registry. A test
//! fails when the files and the code disagree.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::{self as registry, ToolDef};

/// The document written for one tool.
pub fn document(tool: &ToolDef) -> Value {
    let spec = tool.spec();
    json!({
        "name": tool.name,
        "title": spec.title,
        "description": spec.description,
        "domain": spec.domain,
        "cli": cli_usage(tool),
        "http": format!("POST {}", spec.http_path()),
        "annotations": {
            "title": spec.title,
            "readOnlyHint": spec.hints.read_only,
            "destructiveHint": spec.hints.destructive,
            "idempotentHint": spec.hints.idempotent,
            "openWorldHint": spec.hints.open_world,
        },
        "needs_gpu": spec.needs_gpu,
        "long_running": spec.long_running,
        "executes_commands": spec.executes_commands,
        "inputSchema": Value::Object((*tool.input_schema).clone()),
        "outputSchema": Value::Object((**tool.output_schema()).clone()),
    })
}

/// `aisp <domain> <op>` (or `aisp <op>` for short names).
pub fn cli_usage(tool: &ToolDef) -> String {
    let spec = tool.spec();
    let op = spec.name.replace('_', "-");
    if spec.short {
        format!("aisp {op}")
    } else {
        format!("aisp {} {op}", spec.domain)
    }
}

/// File name → pretty JSON text, for every tool.
pub fn render_all() -> BTreeMap<String, String> {
    registry::tools()
        .iter()
        .map(|t| {
            let mut text = serde_json::to_string_pretty(&document(t)).unwrap_or_default();
            text.push('\n');
            (format!("{}.json", t.name), text)
        })
        .collect()
}

/// Differences between `dir` and the code: (file, what is wrong).
pub fn check(dir: &Path) -> Vec<(String, &'static str)> {
    let expected = render_all();
    let mut problems = Vec::new();
    for (name, text) in &expected {
        match std::fs::read_to_string(dir.join(name)) {
            Ok(found) if &found == text => {}
            Ok(_) => problems.push((name.clone(), "differs from the code")),
            Err(_) => problems.push((name.clone(), "is missing")),
        }
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".json") && !expected.contains_key(&name) {
                problems.push((name, "is stale: no such tool"));
            }
        }
    }
    problems.sort();
    problems
}

/// Write every schema file and delete stale ones. Returns how many were written.
pub fn write(dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let expected = render_all();
    for (name, text) in &expected {
        std::fs::write(dir.join(name), text)?;
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".json") && !expected.contains_key(&name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(expected.len())
}
