//! The performance knowledge base behind `aisp_explain`, `aisp_ai_troubleshoot`
//! and the offline answers of `aisp_ask`: concepts a GPU performance engineer
//! uses (what each is, why it matters, how to see it with aisp's tools, how to
//! fix it, where to read more) and a table of symptoms with ranked causes.
//!
//! The data lives in TOML files under `data/`, compiled in with
//! `include_str!`. Sources are named once in each file's `[sources]` table and
//! referred to by key, so every claim points at a public URL. Tests check that
//! every reference resolves, every related concept exists and every tool named
//! is one aisp has (or is planned to have, while its domain is being built).

pub mod troubleshooting;

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::words::tokenize;

/// The concept files, one per area.
const FILES: &[(&str, &str)] = &[
    (
        "gpu_architecture.toml",
        include_str!("data/gpu_architecture.toml"),
    ),
    ("kernels.toml", include_str!("data/kernels.toml")),
    ("memory.toml", include_str!("data/memory.toml")),
    ("host.toml", include_str!("data/host.toml")),
    ("training.toml", include_str!("data/training.toml")),
    ("distributed.toml", include_str!("data/distributed.toml")),
    ("inference.toml", include_str!("data/inference.toml")),
    ("profiling.toml", include_str!("data/profiling.toml")),
];

#[derive(Debug, Clone, thiserror::Error)]
pub enum KnowledgeError {
    #[error("knowledge file {file} is not valid: {message}")]
    Invalid { file: String, message: String },
}

/// A public source: where a statement can be checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub title: String,
    pub url: String,
}

/// How to see a concept at work with one of aisp's tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Detection {
    /// The aisp tool to call.
    pub tool: String,
    /// What to look for in its result.
    pub how: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    sources: BTreeMap<String, Source>,
    #[serde(default)]
    concept: Vec<RawConcept>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConcept {
    id: String,
    name: String,
    #[serde(default)]
    aliases: Vec<String>,
    definition: String,
    why: String,
    detect: Vec<Detection>,
    fix: Vec<String>,
    #[serde(default)]
    related: Vec<String>,
    sources: Vec<String>,
}

/// One concept of the knowledge base.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Concept {
    /// Stable id (snake_case), e.g. `bank_conflicts`.
    pub id: String,
    pub name: String,
    /// Other names it goes by.
    pub aliases: Vec<String>,
    /// The area: the data file it lives in (gpu_architecture, kernels, memory, host, training,
    /// distributed, inference, profiling).
    pub category: String,
    pub definition: String,
    pub why_it_matters: String,
    /// How to see it with aisp's tools.
    pub detect: Vec<Detection>,
    /// What to do about it, most effective first.
    pub fix: Vec<String>,
    /// Ids of related concepts.
    pub related: Vec<String>,
    pub sources: Vec<Source>,
}

/// Every concept, parsed once.
pub fn all() -> Result<&'static [Concept], KnowledgeError> {
    static ALL: OnceLock<Result<Vec<Concept>, KnowledgeError>> = OnceLock::new();
    ALL.get_or_init(parse_all)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

fn parse_all() -> Result<Vec<Concept>, KnowledgeError> {
    let mut out = Vec::new();
    for (file, text) in FILES {
        let raw: RawFile = toml::from_str(text).map_err(|e| KnowledgeError::Invalid {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        let category = file.trim_end_matches(".toml").to_string();
        for c in raw.concept {
            let mut sources = Vec::new();
            for key in &c.sources {
                let s = raw
                    .sources
                    .get(key)
                    .ok_or_else(|| KnowledgeError::Invalid {
                        file: file.to_string(),
                        message: format!("concept `{}` cites unknown source `{key}`", c.id),
                    })?;
                sources.push(s.clone());
            }
            out.push(Concept {
                id: c.id,
                name: c.name,
                aliases: c.aliases,
                category: category.clone(),
                definition: c.definition,
                why_it_matters: c.why,
                detect: c.detect,
                fix: c.fix,
                related: c.related,
                sources,
            });
        }
    }
    Ok(out)
}

/// Lowercase, punctuation to spaces, single spaces: "Bank-Conflicts" → "bank conflicts".
pub fn normalize(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A concept with how well it matched a query.
#[derive(Debug, Clone)]
pub struct ConceptMatch {
    pub concept: &'static Concept,
    /// 1.0 for an exact id/name/alias match; lower for partial matches.
    pub score: f64,
    /// Why it matched.
    pub via: String,
}

/// Look a concept up: exact id, name or alias first, then a name or alias
/// contained in the query, then ranked word overlap. Best first.
pub fn search(query: &str, limit: usize) -> Result<Vec<ConceptMatch>, KnowledgeError> {
    let concepts = all()?;
    let q = normalize(query);
    if q.is_empty() {
        return Ok(Vec::new());
    }
    let names = |c: &'static Concept| {
        std::iter::once(c.id.replace('_', " "))
            .chain(std::iter::once(normalize(&c.name)))
            .chain(c.aliases.iter().map(|a| normalize(a)))
            .collect::<Vec<String>>()
    };
    // Exact.
    for c in concepts {
        if names(c).contains(&q) {
            return Ok(vec![ConceptMatch {
                concept: c,
                score: 1.0,
                via: "exact name".into(),
            }]);
        }
    }
    let padded = format!(" {q} ");
    let mut scored: HashMap<&str, ConceptMatch> = HashMap::new();
    // A name or alias that appears whole in the query ("what are bank conflicts?").
    for c in concepts {
        if let Some(n) = names(c)
            .into_iter()
            .filter(|n| n.len() >= 3 && padded.contains(&format!(" {n} ")))
            .max_by_key(|n| n.len())
        {
            let score = 0.6 + 0.3 * (n.len() as f64 / q.len().max(1) as f64).min(1.0);
            scored.insert(
                c.id.as_str(),
                ConceptMatch {
                    concept: c,
                    score,
                    via: format!("mentions \"{n}\""),
                },
            );
        }
    }
    // Word overlap, weighted by how rare each word is across concepts.
    let q_terms: Vec<String> = {
        let mut t = tokenize(query);
        t.sort();
        t.dedup();
        t
    };
    if !q_terms.is_empty() {
        let docs: Vec<(&'static Concept, Vec<String>, Vec<String>)> = concepts
            .iter()
            .map(|c| {
                let title = tokenize(&format!(
                    "{} {} {}",
                    c.id.replace('_', " "),
                    c.name,
                    c.aliases.join(" ")
                ));
                let body = tokenize(&c.definition);
                (c, title, body)
            })
            .collect();
        let n = docs.len() as f64;
        for term in &q_terms {
            let df = docs
                .iter()
                .filter(|(_, t, b)| t.contains(term) || b.contains(term))
                .count() as f64;
            if df == 0.0 {
                continue;
            }
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for (c, title, body) in &docs {
                let w = if title.contains(term) {
                    idf
                } else if body.contains(term) {
                    0.25 * idf
                } else {
                    continue;
                };
                let entry = scored.entry(c.id.as_str()).or_insert_with(|| ConceptMatch {
                    concept: c,
                    score: 0.0,
                    via: "shared words".into(),
                });
                if entry.via == "shared words" {
                    entry.score += w;
                }
            }
        }
        // Scale overlap scores into (0, 0.6) so they rank below whole-name mentions.
        let max_overlap = scored
            .values()
            .filter(|m| m.via == "shared words")
            .map(|m| m.score)
            .fold(0.0_f64, f64::max);
        for m in scored.values_mut().filter(|m| m.via == "shared words") {
            m.score = 0.55 * m.score / max_overlap.max(f64::EPSILON) * (m.score / (m.score + 2.0));
        }
    }
    let mut ranked: Vec<ConceptMatch> = scored.into_values().filter(|m| m.score > 0.05).collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.concept.id.cmp(&b.concept.id))
    });
    ranked.truncate(limit);
    Ok(ranked)
}

/// A concept by id.
pub fn get(id: &str) -> Option<&'static Concept> {
    all().ok()?.iter().find(|c| c.id == id)
}

/// Concepts whose name or an alias appears whole in `text` (for routing and
/// for priming the agent), longest mention first.
pub fn mentioned_in(text: &str) -> Vec<&'static Concept> {
    let Ok(concepts) = all() else {
        return Vec::new();
    };
    let padded = format!(" {} ", normalize(text));
    let mut hits: Vec<(usize, &'static Concept)> = concepts
        .iter()
        .filter_map(|c| {
            std::iter::once(normalize(&c.name))
                .chain(c.aliases.iter().map(|a| normalize(a)))
                .chain(std::iter::once(c.id.replace('_', " ")))
                .filter(|n| n.len() >= 3 && padded.contains(&format!(" {n} ")))
                .map(|n| n.len())
                .max()
                .map(|len| (len, c))
        })
        .collect();
    hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    hits.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn the_knowledge_base_parses_and_is_complete() {
        let concepts = all().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            concepts.len() >= 100,
            "only {} concepts; the knowledge base promises at least 100",
            concepts.len()
        );
        let ids: HashSet<&str> = concepts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), concepts.len(), "duplicate concept ids");
        let mut names = HashSet::new();
        for c in concepts {
            assert!(
                c.id.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_'),
                "{}: id must be snake_case",
                c.id
            );
            for n in std::iter::once(&c.name).chain(c.aliases.iter()) {
                assert!(
                    names.insert(normalize(n)),
                    "{}: name or alias `{n}` is used twice",
                    c.id
                );
            }
            assert!(c.definition.len() >= 60, "{}: definition too short", c.id);
            assert!(c.why_it_matters.len() >= 40, "{}: why too short", c.id);
            assert!(!c.detect.is_empty(), "{}: no detection", c.id);
            assert!(!c.fix.is_empty(), "{}: no fix", c.id);
            assert!(!c.sources.is_empty(), "{}: no source", c.id);
            for r in &c.related {
                assert!(
                    ids.contains(r.as_str()),
                    "{}: related `{r}` is unknown",
                    c.id
                );
                assert_ne!(r, &c.id, "{}: related to itself", c.id);
            }
            for s in &c.sources {
                assert!(
                    s.url.starts_with("https://"),
                    "{}: source {} is not an https URL",
                    c.id,
                    s.url
                );
            }
        }
        for required in [
            "occupancy",
            "memory_coalescing",
            "bank_conflicts",
            "tensor_cores",
            "tma",
            "flash_attention",
            "cuda_graphs",
            "nccl_ring_tree",
            "zero",
            "paged_attention",
        ] {
            assert!(ids.contains(required), "missing concept {required}");
        }
    }

    #[test]
    fn search_finds_by_name_alias_and_words() {
        let m = search("Bank conflicts", 3).unwrap();
        assert_eq!(m[0].concept.id, "bank_conflicts");
        assert_eq!(m[0].score, 1.0);
        let m = search("what is flashattention and why is it faster?", 3).unwrap();
        assert_eq!(m[0].concept.id, "flash_attention");
        let m = search("KV cache", 3).unwrap();
        assert_eq!(m[0].concept.id, "kv_cache");
        let m = search("shared memory bank", 5).unwrap();
        assert!(m.iter().any(|x| x.concept.id == "bank_conflicts"), "{m:?}");
        assert!(search("zzzz qqqq", 3).unwrap().is_empty());
    }

    #[test]
    fn mentions_are_found_in_questions() {
        let ids: Vec<&str> =
            mentioned_in("Should I use CUDA graphs or torch.compile for launch overhead?")
                .iter()
                .map(|c| c.id.as_str())
                .collect();
        assert!(ids.contains(&"cuda_graphs"), "{ids:?}");
        assert!(ids.contains(&"torch_compile"), "{ids:?}");
    }
}
