//! What `torch.compile` did in a run: graph breaks and recompilations with
//! their reasons (from the `TORCH_LOGS=graph_breaks,recompiles` output), and
//! the time spent compiling against the time spent running (from a PyTorch
//! profiler trace recorded while it compiled).
//!
//! Log lines look like
//! `V1125 01:52:13.264000 1214 torch/_dynamo/symbolic_convert.py:5127] [0/0] [__graph_breaks] Graph break in user code at f.py:36`:
//! a level letter, time, pid, source, then `[frame/compile]` and the artifact
//! tag. A graph break record follows `Graph break ... in user code at <file:line>`
//! (`Graph Break Reason:`, the unsupported construct, `Explanation:`,
//! `Hint:`); a recompilation follows `Recompiling function <f> in <file:line>`
//! with one `- <frame>/<compile>: <guard failure>` line per failed guard.
//!
//! In the trace, Dynamo's timed phases are `cpu_op` events whose names end
//! in ` (dynamo_timed)` (nested: compile time is their union);
//! `Torch-Compiled Region: F/C` marks a run of compiled graph `C` of frame
//! `F`. Steps are `ProfilerStep#N` or `step_N` annotations.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::kineto::Trace;
use crate::kineto::trace::CpuOp;

/// One distinct graph break (same place, same reason).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct GraphBreak {
    /// `file:line` of the user code where Dynamo stopped tracing.
    pub location: String,
    /// The construct Dynamo could not trace (e.g. `Unsupported Tensor.item() call with capture_scalar_outputs=False`).
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// PyTorch's own suggestion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The source line, when the log printed the user stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Times logged (once per compilation that hit it).
    pub count: u64,
    /// The `frame/compile` ids that hit it.
    pub compile_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Recompile {
    /// The `frame/compile` id of the new compilation.
    pub compile_id: String,
    pub function: String,
    pub location: String,
    /// The guard failures that triggered it, as logged (`1/0: tensor 'h' size mismatch at index 0. expected 64, actual 96`).
    pub reasons: Vec<String>,
    /// What kind of guard failed first: `shape`, `value` (a Python scalar or
    /// constant the graph specialised on), `dtype`, `device`, `grad_mode` or `other`.
    pub cause: String,
}

/// What the logs say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct LogAnalysis {
    pub graph_breaks: Vec<GraphBreak>,
    pub recompiles: Vec<Recompile>,
    /// Lines read.
    pub lines: u64,
}

fn cause_of(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    if r.contains("size mismatch") || r.contains("stride mismatch") || r.contains(".size()") {
        "shape"
    } else if r.contains("dtype") {
        "dtype"
    } else if r.contains("device") {
        "device"
    } else if r.contains("grad_mode") || r.contains("requires_grad") {
        "grad_mode"
    } else if r.contains(" == ") || r.contains("id(") || r.contains("___check_obj_id") {
        "value"
    } else {
        "other"
    }
}

/// A log line without its prefix: (compile id, tag, message).
fn strip(line: &str) -> (Option<String>, Option<String>, &str) {
    let mut rest = line;
    if let Some(i) = line.find("] ")
        && line
            .chars()
            .next()
            .is_some_and(|c| matches!(c, 'V' | 'I' | 'W' | 'E' | 'D'))
        && line[..i].contains(".py:")
    {
        rest = &line[i + 2..];
    }
    let mut id = None;
    if rest.starts_with('[')
        && let Some(j) = rest.find("] ")
        && rest[1..j].contains('/')
        && rest[1..j]
            .chars()
            .all(|c| c.is_ascii_digit() || c == '/' || c == '_')
    {
        id = Some(rest[1..j].to_string());
        rest = &rest[j + 2..];
    }
    let mut tag = None;
    if let Some(r) = rest.strip_prefix("[__")
        && let Some(j) = r.find("] ")
    {
        tag = Some(r[..j].to_string());
        rest = &r[j + 2..];
    } else if let Some(r) = rest.strip_prefix("[__")
        && let Some(t) = r.strip_suffix(']')
    {
        tag = Some(t.to_string());
        rest = "";
    }
    (id, tag, rest)
}

/// Parse `TORCH_LOGS=graph_breaks,recompiles` output (any other lines are skipped).
pub fn parse_logs(text: &str) -> LogAnalysis {
    let mut out = LogAnalysis::default();
    // Graph break records: (location, compile id, message lines).
    let mut breaks: Vec<(String, Option<String>, Vec<String>)> = Vec::new();
    let mut recs: Vec<(String, String, String, Vec<String>)> = Vec::new();
    enum Cur {
        None,
        Break,
        Recompile,
    }
    let mut cur = Cur::None;
    for line in text.lines() {
        out.lines += 1;
        let (id, tag, msg) = strip(line);
        let m = msg.trim();
        if let Some(i) = m.find("in user code at ")
            && m.starts_with("Graph break")
        {
            let loc = m[i + "in user code at ".len()..]
                .trim_end_matches(':')
                .to_string();
            breaks.push((loc, id, Vec::new()));
            cur = Cur::Break;
            continue;
        }
        if let Some(r) = m.strip_prefix("Recompiling function ") {
            let (f, loc) = r.split_once(" in ").unwrap_or((r, ""));
            recs.push((
                id.unwrap_or_default(),
                f.trim().to_string(),
                loc.trim().to_string(),
                Vec::new(),
            ));
            cur = Cur::Recompile;
            continue;
        }
        match (&cur, tag.as_deref()) {
            (Cur::Break, Some("graph_breaks")) => {
                if let Some(b) = breaks.last_mut() {
                    b.2.push(m.to_string());
                }
            }
            (Cur::Recompile, Some("recompiles" | "recompiles_verbose")) => {
                if let Some(r) = recs.last_mut()
                    && let Some(g) = m.strip_prefix("- ")
                    && g.split(':').next().is_some_and(|p| {
                        p.contains('/') && p.chars().all(|c| c.is_ascii_digit() || c == '/')
                    })
                {
                    // `- 1/0: ___stack0 == 0.11  # if h.mean()...`: drop the source comment.
                    let g = g.split("  #").next().unwrap_or(g).trim();
                    r.3.push(g.to_string());
                }
            }
            _ => cur = Cur::None,
        }
    }
    let mut merged: BTreeMap<(String, String), GraphBreak> = BTreeMap::new();
    for (loc, id, lines) in breaks {
        let field = |p: &str| {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(p).map(|v| v.trim().to_string()))
        };
        // The construct: the first plain line after "Graph Break Reason:".
        let mut reason = None;
        let mut after_reason = false;
        for l in &lines {
            if let Some(r) = l.strip_prefix("Graph Break Reason:") {
                after_reason = true;
                let r = r.trim();
                if !r.starts_with("Encountered graph break") && !r.is_empty() {
                    reason = Some(r.to_string());
                    break;
                }
                continue;
            }
            if after_reason && !l.is_empty() {
                reason = Some(l.clone());
                break;
            }
        }
        let reason = reason.unwrap_or_else(|| "unknown (the log has no reason line)".into());
        // The user's source line: the line after the last `File "...", line N` frame.
        let code = lines
            .iter()
            .rposition(|l| l.starts_with("File \""))
            .and_then(|i| lines.get(i + 1))
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty());
        let e = merged
            .entry((loc.clone(), reason.clone()))
            .or_insert_with(|| GraphBreak {
                location: loc,
                reason,
                explanation: field("Explanation:"),
                hint: field("Hint:"),
                code: None,
                count: 0,
                compile_ids: Vec::new(),
            });
        e.count += 1;
        if e.code.is_none() {
            e.code = code;
        }
        if let Some(id) = id
            && !e.compile_ids.contains(&id)
        {
            e.compile_ids.push(id);
        }
    }
    out.graph_breaks = merged.into_values().collect();
    out.graph_breaks.sort_by_key(|b| std::cmp::Reverse(b.count));
    out.recompiles = recs
        .into_iter()
        .map(|(id, f, loc, reasons)| Recompile {
            cause: reasons
                .first()
                .map(|r| cause_of(r))
                .unwrap_or("other")
                .into(),
            compile_id: id,
            function: f,
            location: loc,
            reasons,
        })
        .collect();
    out
}

/// One step of the run.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct StepTime {
    pub name: String,
    pub duration_ns: i64,
    /// Time inside Dynamo/Inductor compilation during the step.
    pub compile_ns: i64,
}

/// What the trace says.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct TraceCompile {
    /// Union of Dynamo's timed phases (`... (dynamo_timed)` events), ns.
    pub compile_ns: i64,
    /// Time of the steps outside compilation, ns.
    pub run_ns: i64,
    /// Compile time as a share of the steps' time, %.
    pub compile_share_pct: f64,
    /// Frames Dynamo compiled (`Torch-Compiled Region: F/…`): more than one
    /// for a single compiled function means graph breaks split it.
    pub frames: u64,
    /// Compiled graphs (distinct `F/C` ids).
    pub graphs: u64,
    /// Graphs with compile id > 0: recompilations.
    pub recompiled_graphs: u64,
    /// Median duration of the steps that did not compile, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady_step_ns: Option<i64>,
    /// Steps the compile time would pay for at the steady step time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_in_steady_steps: Option<f64>,
    pub steps: Vec<StepTime>,
}

fn union_ns(mut iv: Vec<(i64, i64)>) -> i64 {
    iv.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in iv {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

fn overlap(iv: &[(i64, i64)], s: i64, e: i64) -> i64 {
    union_ns(
        iv.iter()
            .filter_map(|&(a, b)| {
                let (a, b) = (a.max(s), b.min(e));
                (a < b).then_some((a, b))
            })
            .collect(),
    )
}

fn is_step_name(n: &str) -> bool {
    let n = n.to_ascii_lowercase();
    let digits = n
        .strip_prefix("step_")
        .or_else(|| n.strip_prefix("step "))
        .or_else(|| n.strip_prefix("step"));
    digits.is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

/// The compile-time picture of a trace; None when it has no compile events
/// and no compiled regions (not a torch.compile run, or compiled before
/// profiling started — then `frames`/`graphs` still count the regions).
pub fn analyze_trace(trace: &Trace) -> Option<TraceCompile> {
    let compile: Vec<(i64, i64)> = trace
        .cpu_ops
        .iter()
        .filter(|o| o.name.ends_with(" (dynamo_timed)"))
        .map(|o| (o.start_ns, o.start_ns + o.dur_ns))
        .collect();
    let mut ids: Vec<(u64, u64)> = trace
        .cpu_ops
        .iter()
        .filter_map(|o| o.name.strip_prefix("Torch-Compiled Region: "))
        .filter_map(|id| {
            let (f, c) = id.trim().split_once('/')?;
            Some((f.parse().ok()?, c.parse().ok()?))
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if compile.is_empty() && ids.is_empty() {
        return None;
    }
    let mut frames: Vec<u64> = ids.iter().map(|x| x.0).collect();
    frames.dedup();
    let steps: Vec<&CpuOp> = if !trace.steps.is_empty() {
        trace.steps.iter().collect()
    } else {
        trace
            .annotations
            .iter()
            .filter(|a| is_step_name(&a.name))
            .collect()
    };
    let step_times: Vec<StepTime> = steps
        .iter()
        .map(|s| StepTime {
            name: s.name.clone(),
            duration_ns: s.dur_ns,
            compile_ns: overlap(&compile, s.start_ns, s.start_ns + s.dur_ns),
        })
        .collect();
    let compile_ns = union_ns(compile);
    let steps_total: i64 = step_times.iter().map(|s| s.duration_ns).sum();
    let steps_compile: i64 = step_times.iter().map(|s| s.compile_ns).sum();
    let mut steady: Vec<i64> = step_times
        .iter()
        .filter(|s| s.compile_ns == 0)
        .map(|s| s.duration_ns)
        .collect();
    steady.sort_unstable();
    let steady_step_ns = (!steady.is_empty()).then(|| steady[steady.len() / 2]);
    Some(TraceCompile {
        compile_ns,
        run_ns: steps_total - steps_compile,
        compile_share_pct: if steps_total > 0 {
            100.0 * steps_compile as f64 / steps_total as f64
        } else {
            0.0
        },
        frames: frames.len() as u64,
        graphs: ids.len() as u64,
        recompiled_graphs: ids.iter().filter(|x| x.1 > 0).count() as u64,
        steady_step_ns,
        compile_in_steady_steps: steady_step_ns
            .filter(|s| *s > 0)
            .map(|s| compile_ns as f64 / s as f64),
        steps: step_times,
    })
}

/// The fix for a graph break, by what broke.
pub fn break_fix(b: &GraphBreak) -> String {
    let r = b.reason.to_ascii_lowercase();
    if r.contains("item()") || r.contains("capture_scalar_outputs") {
        "Keep the value on the GPU: replace the Python `if t.item() > x` with `torch.where`/`torch.cond`, or set \
         torch._dynamo.config.capture_scalar_outputs = True so .item() is traced."
            .into()
    } else if r.contains("print") || r.contains("logging") || r.contains("builtin") {
        "Move printing and logging out of the compiled function (or guard it with torch.compiler.is_compiling())."
            .into()
    } else if r.contains("data-dependent") || r.contains("dynamic shape") || r.contains("nonzero") {
        "Avoid shapes that depend on tensor values inside the compiled region (mask instead of index), or mark the \
         op as a custom op."
            .into()
    } else {
        match &b.hint {
            Some(h) => h.clone(),
            None => "Rewrite the construct Dynamo cannot trace, or move it out of the compiled function; \
                     torch._dynamo.explain(fn)(*args) lists every break."
                .into(),
        }
    }
}

/// The fix for a recompilation, by its cause.
pub fn recompile_fix(r: &Recompile) -> &'static str {
    match r.cause.as_str() {
        "shape" => {
            "Mark the varying dimension dynamic (torch._dynamo.mark_dynamic(x, 0) or torch.compile(dynamic=True)), \
             or pad inputs to a few fixed sizes."
        }
        "value" => {
            "The graph specialised on a Python value (often one produced by .item() at a graph break): keep it a \
             tensor, or remove the graph break that turned it into a constant."
        }
        "dtype" | "device" => "Keep input dtypes and devices the same from call to call.",
        "grad_mode" => {
            "Call the compiled function under one grad mode (train or no_grad), or compile one per mode."
        }
        _ => {
            "Read the guard failure: each distinct value of the guarded expression compiles a new graph."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_stripped() {
        let (id, tag, msg) = strip(
            "V1125 01:52:13.264000 1214 torch/_dynamo/symbolic_convert.py:5127] [0/0] [__graph_breaks] Graph break in user code at f.py:36",
        );
        assert_eq!(id.as_deref(), Some("0/0"));
        assert_eq!(tag.as_deref(), Some("graph_breaks"));
        assert_eq!(msg, "Graph break in user code at f.py:36");
        assert_eq!(
            cause_of("1/1: tensor 'h' size mismatch at index 0"),
            "shape"
        );
        assert_eq!(cause_of("1/0: ___stack0 == 0.1155"), "value");
    }

    #[test]
    fn union_merges_nested_intervals() {
        assert_eq!(union_ns(vec![(0, 10), (2, 5), (20, 30), (25, 35)]), 25);
    }
}
