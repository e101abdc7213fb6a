//! Ranking tools for a task in plain words: BM25 over each tool's name,
//! title, summary, description and curated intents (intents weigh most).

use std::collections::HashMap;

use aisp_knowledge::words::tokenize;

use crate::registry::ToolDef;

/// One ranked tool.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub tool: &'static ToolDef,
    pub score: f64,
    /// The query terms that matched, most informative first.
    pub matched: Vec<String>,
    /// An intent phrase that matched whole, if any.
    pub intent: Option<&'static str>,
}

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// An intent phrase matches when the task says it verbatim or uses every one
/// of its words (stemmed, in any order): "what tools are there" is said by
/// "which tools does it have".
fn intent_matches(intent: &str, task_lower: &str, query: &[String]) -> bool {
    if task_lower.contains(&intent.to_ascii_lowercase()) {
        return true;
    }
    // One content word ("what is in this profile" -> "profile") is too weak
    // a phrase to match out of order.
    let words = tokenize(intent);
    words.len() >= 2 && words.iter().all(|w| query.contains(w))
}

struct Doc {
    tool: &'static ToolDef,
    terms: HashMap<String, f64>,
    len: f64,
}

/// What besides the words ranks a tool.
pub struct Context<'a> {
    /// Tools the intent router plans for the task, in its order.
    pub planned: &'a [&'a str],
    /// Whether this host has a usable GPU.
    pub gpu_available: bool,
    /// Files (profiles, traces, reports) the task names.
    pub paths: &'a [String],
}

/// How much a planned tool gains, as a share of the best text score.
const PLAN_BOOST: f64 = 0.0;
/// What a tool that needs a GPU keeps of its score on a host without one,
/// unless the question says one of its curated phrases: such a tool still
/// wins when the question is about the GPU, but not on words it merely shares
/// with the question.
const NO_GPU_FACTOR: f64 = 0.6;
/// What a tool that runs a command (a capture) keeps when the task names
/// files: a question about an existing profile is answered by reading it.
const FILES_NAMED_CAPTURE_FACTOR: f64 = 0.5;

/// Rank `tools` for `task` with the router's plan and the host's GPU in mind.
pub fn rank_with(task: &str, tools: &'static [ToolDef], context: &Context<'_>) -> Vec<Ranked> {
    // A file named in the task is an argument, not a word of intent: its
    // extension (.sqlite, .json) would pull toward tools that describe their
    // input formats rather than toward what is asked of the file.
    let mut words = task.to_string();
    for path in context.paths {
        words = words.replace(path.as_str(), " ");
    }
    let mut ranked = rank(&words, tools);
    let best = ranked.first().map(|r| r.score).unwrap_or(0.0);
    for r in &mut ranked {
        if let Some(i) = context.planned.iter().position(|p| *p == r.tool.name) {
            r.score += best * PLAN_BOOST / (1.0 + i as f64);
        }
        // A whole curated phrase of a GPU tool ("memory bandwidth", "fp8
        // gemm") says the question is about the GPU itself.
        if r.tool.spec().needs_gpu && !context.gpu_available && r.intent.is_none() {
            r.score *= NO_GPU_FACTOR;
        }
        if r.tool.spec().executes_commands && !context.paths.is_empty() {
            r.score *= FILES_NAMED_CAPTURE_FACTOR;
        }
    }
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.tool.name.cmp(&b.tool.name))
    });
    ranked
}

/// Rank `tools` for `task` by their words alone; zero-score tools are left out.
pub fn rank(task: &str, tools: &'static [ToolDef]) -> Vec<Ranked> {
    let docs: Vec<Doc> = tools
        .iter()
        .map(|tool| {
            let spec = tool.spec();
            let mut terms: HashMap<String, f64> = HashMap::new();
            let mut len = 0.0;
            let mut add = |text: &str, weight: f64| {
                for t in tokenize(text) {
                    *terms.entry(t).or_default() += weight;
                    len += weight;
                }
            };
            add(&tool.name.replace('_', " "), 3.0);
            add(spec.title, 2.0);
            add(spec.summary, 2.0);
            // Descriptions say much in passing; names, summaries and intents
            // say what the tool is for.
            add(spec.description, 0.5);
            for intent in spec.intents {
                add(intent, 3.0);
            }
            Doc { tool, terms, len }
        })
        .collect();
    let n = docs.len() as f64;
    let avg_len = docs.iter().map(|d| d.len).sum::<f64>() / n.max(1.0);
    let mut query = tokenize(task);
    query.sort();
    query.dedup();
    let df = |term: &str| docs.iter().filter(|d| d.terms.contains_key(term)).count() as f64;
    let idf: HashMap<&str, f64> = query
        .iter()
        .map(|t| {
            let df = df(t);
            (t.as_str(), ((n - df + 0.5) / (df + 0.5) + 1.0).ln())
        })
        .collect();
    let task_lower = task.to_ascii_lowercase();
    let mut ranked: Vec<Ranked> = docs
        .iter()
        .filter_map(|doc| {
            let mut score = 0.0;
            let mut matched: Vec<(f64, String)> = Vec::new();
            for t in &query {
                if let Some(&tf) = doc.terms.get(t) {
                    let w = idf[t.as_str()] * tf * (K1 + 1.0)
                        / (tf + K1 * (1.0 - B + B * doc.len / avg_len));
                    score += w;
                    matched.push((w, t.clone()));
                }
            }
            let intent = doc
                .tool
                .spec()
                .intents
                .iter()
                .copied()
                .filter(|i| intent_matches(i, &task_lower, &query))
                .max_by_key(|i| tokenize(i).len());
            if let Some(i) = intent {
                // A whole curated phrase is strong evidence of intent.
                score += 2.0 + tokenize(i).len() as f64;
            }
            if score <= 0.0 {
                return None;
            }
            matched.sort_by(|a, b| b.0.total_cmp(&a.0));
            Some(Ranked {
                tool: doc.tool,
                score,
                matched: matched.into_iter().map(|(_, t)| t).collect(),
                intent,
            })
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.tool.name.cmp(&b.tool.name))
    });
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    #[test]
    fn job_questions_route_to_job_tools() {
        let ranked = rank(
            "is my background job finished? poll job status",
            registry::tools(),
        );
        assert_eq!(ranked[0].tool.name, "aisp_job_status");
        assert!(ranked[0].matched.contains(&"job".to_string()));
    }

    #[test]
    fn nonsense_matches_nothing() {
        assert!(rank("zzzz qqqq", registry::tools()).is_empty());
    }
}
