//! Symptoms and error messages mapped to their likely causes, ranked, each
//! with the aisp checks that confirm or rule it out. Data:
//! `data/troubleshooting.toml`.
//!
//! Ranking: each symptom lists its causes in the order they are most often
//! the explanation (a curated prior, stated as such). A cause moves up when
//! the text the user pasted contains one of its `hints` — the phrases its own
//! error message or log line carries (e.g. PyTorch's "reserved by PyTorch but
//! unallocated" points at fragmentation).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{KnowledgeError, Source, normalize};

const DATA: &str = include_str!("data/troubleshooting.toml");

/// A check to run: which tool, with which arguments, and what to look for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub tool: String,
    /// Arguments to start from, as a JSON object (fill in your own paths).
    #[serde(default = "empty_args")]
    pub arguments: String,
    pub look_for: String,
}

fn empty_args() -> String {
    "{}".into()
}

impl Check {
    pub fn arguments_map(&self) -> Map<String, Value> {
        serde_json::from_str(&self.arguments).unwrap_or_default()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    sources: BTreeMap<String, Source>,
    symptom: Vec<RawSymptom>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSymptom {
    id: String,
    title: String,
    category: String,
    /// Phrases (normalized substring match) that identify the symptom.
    patterns: Vec<String>,
    summary: String,
    cause: Vec<RawCause>,
    #[serde(default)]
    concepts: Vec<String>,
    sources: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCause {
    cause: String,
    why: String,
    #[serde(default)]
    hints: Vec<String>,
    checks: Vec<Check>,
    fix: Vec<String>,
}

/// One known symptom.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Symptom {
    pub id: String,
    pub title: String,
    /// memory, communication, correctness, compatibility, hardware (errors); performance, host (symptoms).
    pub category: String,
    pub patterns: Vec<String>,
    pub summary: String,
    /// Causes in prior order (most common first).
    pub causes: Vec<Cause>,
    /// Knowledge-base concepts to read (`aisp_explain`).
    pub concepts: Vec<String>,
    pub sources: Vec<Source>,
}

impl Symptom {
    /// An error (a crash or a failed call), as opposed to a performance symptom.
    pub fn is_error(&self) -> bool {
        matches!(
            self.category.as_str(),
            "memory" | "communication" | "correctness" | "compatibility" | "hardware"
        )
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Cause {
    pub cause: String,
    pub why: String,
    /// Phrases in an error text that point at this cause.
    pub hints: Vec<String>,
    pub checks: Vec<Check>,
    pub fix: Vec<String>,
}

pub fn all() -> Result<&'static [Symptom], KnowledgeError> {
    static ALL: OnceLock<Result<Vec<Symptom>, KnowledgeError>> = OnceLock::new();
    ALL.get_or_init(parse)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

fn parse() -> Result<Vec<Symptom>, KnowledgeError> {
    let file = "troubleshooting.toml";
    let raw: RawFile = toml::from_str(DATA).map_err(|e| KnowledgeError::Invalid {
        file: file.into(),
        message: e.to_string(),
    })?;
    raw.symptom
        .into_iter()
        .map(|s| {
            let sources = s
                .sources
                .iter()
                .map(|k| {
                    raw.sources
                        .get(k)
                        .cloned()
                        .ok_or_else(|| KnowledgeError::Invalid {
                            file: file.into(),
                            message: format!("symptom `{}` cites unknown source `{k}`", s.id),
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Symptom {
                id: s.id,
                title: s.title,
                category: s.category,
                patterns: s.patterns,
                summary: s.summary,
                causes: s
                    .cause
                    .into_iter()
                    .map(|c| Cause {
                        cause: c.cause,
                        why: c.why,
                        hints: c.hints,
                        checks: c.checks,
                        fix: c.fix,
                    })
                    .collect(),
                concepts: s.concepts,
                sources,
            })
        })
        .collect()
}

/// A symptom that matched, with its causes re-ranked for the text given.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    pub symptom: &'static Symptom,
    /// The patterns found in the text.
    pub matched: Vec<String>,
    /// Match strength: longer and more patterns score higher.
    pub score: f64,
    /// Causes, best first, each with the hints found in the text.
    pub causes: Vec<(&'static Cause, Vec<String>)>,
}

/// Match a symptom or pasted error text against the table, best first.
pub fn diagnose(text: &str) -> Result<Vec<Diagnosis>, KnowledgeError> {
    let symptoms = all()?;
    let t = format!(" {} ", normalize(text));
    let mut out: Vec<Diagnosis> = symptoms
        .iter()
        .filter_map(|s| {
            let matched: Vec<String> = s
                .patterns
                .iter()
                .filter(|p| {
                    let p = normalize(p);
                    !p.is_empty() && t.contains(&format!(" {p} "))
                })
                .cloned()
                .collect();
            if matched.is_empty() {
                return None;
            }
            let score: f64 = matched
                .iter()
                .map(|p| normalize(p).split(' ').count() as f64)
                .sum();
            let mut causes: Vec<(usize, &'static Cause, Vec<String>)> = s
                .causes
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let hits: Vec<String> = c
                        .hints
                        .iter()
                        .filter(|h| {
                            let h = normalize(h);
                            !h.is_empty() && t.contains(&format!(" {h} "))
                        })
                        .cloned()
                        .collect();
                    (i, c, hits)
                })
                .collect();
            // Causes with hints in the text first (more hints first), then the prior order.
            causes.sort_by(|a, b| b.2.len().cmp(&a.2.len()).then(a.0.cmp(&b.0)));
            Some(Diagnosis {
                symptom: s,
                matched,
                score,
                causes: causes.into_iter().map(|(_, c, h)| (c, h)).collect(),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.symptom.id.cmp(&b.symptom.id))
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn the_table_parses_and_every_reference_resolves() {
        let symptoms = all().unwrap_or_else(|e| panic!("{e}"));
        assert!(symptoms.len() >= 15, "only {} symptoms", symptoms.len());
        let mut ids = HashSet::new();
        for s in symptoms {
            assert!(ids.insert(s.id.as_str()), "duplicate symptom {}", s.id);
            assert!(s.causes.len() >= 2, "{}: rank at least two causes", s.id);
            assert!(!s.sources.is_empty(), "{}: no source", s.id);
            for c in &s.concepts {
                assert!(
                    super::super::get(c).is_some(),
                    "{}: unknown concept {c}",
                    s.id
                );
            }
            for cause in &s.causes {
                assert!(
                    !cause.checks.is_empty(),
                    "{}: `{}` has no check",
                    s.id,
                    cause.cause
                );
                assert!(
                    !cause.fix.is_empty(),
                    "{}: `{}` has no fix",
                    s.id,
                    cause.cause
                );
                for check in &cause.checks {
                    let args: Value = serde_json::from_str(&check.arguments).unwrap_or_else(|e| {
                        panic!("{}: arguments of {} are not JSON: {e}", s.id, check.tool)
                    });
                    assert!(args.is_object(), "{}: arguments must be an object", s.id);
                }
            }
        }
        for required in [
            "cuda_out_of_memory",
            "nccl_timeout",
            "illegal_memory_access",
            "cudnn_error",
            "slow_data_loading",
        ] {
            assert!(ids.contains(required), "missing symptom {required}");
        }
    }

    #[test]
    fn pasted_errors_match_and_hints_reorder_causes() {
        let text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total \
                    capacity of 79.10 GiB of which 1.2 GiB is free. Of the allocated memory 60 GiB is allocated by \
                    PyTorch, and 15 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory \
                    is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
        let d = diagnose(text).unwrap();
        assert_eq!(d[0].symptom.id, "cuda_out_of_memory");
        let (first, hints) = &d[0].causes[0];
        assert!(
            first.cause.to_lowercase().contains("fragment"),
            "{}",
            first.cause
        );
        assert!(!hints.is_empty());

        let d = diagnose("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out").unwrap();
        assert_eq!(d[0].symptom.id, "nccl_timeout");

        let d =
            diagnose("RuntimeError: CUDA error: an illegal memory access was encountered").unwrap();
        assert_eq!(d[0].symptom.id, "illegal_memory_access");

        assert!(diagnose("my cat is hungry").unwrap().is_empty());
    }
}
