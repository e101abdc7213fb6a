//! Compiled-in reference data: GPUs, models and optimization techniques.
//!
//! The catalogs live in TOML files under `crates/knowledge/src/data/`, compiled in
//! with `include_str!`. Every number carries the public source it came from;
//! where none is known the value is absent (`null` in JSON) with the note
//! "no public source" rather than a guess. Tests check that every number has
//! a source that resolves to a URL.

pub mod concepts;
pub mod dtype;
pub mod gpus;
pub mod models;
pub mod techniques;
pub mod words;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use dtype::Dtype;

/// A number with where it came from, as the data files spell it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFigure {
    pub value: Option<f64>,
    pub source: Option<String>,
    pub note: Option<String>,
}

/// A public source: a URL and what it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSource {
    pub url: String,
    pub title: String,
}

/// A number with its public source, or no number and a note saying why.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Figure {
    /// The value; null when no public source is known.
    pub value: Option<f64>,
    /// Where the value comes from.
    pub source_url: Option<String>,
    /// What that source is.
    pub source_title: Option<String>,
    /// How the value was read, or why it is missing.
    pub note: Option<String>,
}

impl Figure {
    pub(crate) fn resolve(
        raw: &RawFigure,
        sources: &BTreeMap<String, RawSource>,
        what: &str,
    ) -> Result<Figure, String> {
        let source = match &raw.source {
            Some(key) => Some(
                sources
                    .get(key)
                    .ok_or_else(|| format!("{what}: unknown source key `{key}`"))?,
            ),
            None => None,
        };
        let source_url = source.map(|s| s.url.clone());
        if raw.value.is_some() && source_url.is_none() {
            return Err(format!("{what}: a value without a source"));
        }
        if raw.value.is_none() && raw.note.is_none() {
            return Err(format!("{what}: no value and no note saying why"));
        }
        Ok(Figure {
            value: raw.value,
            source_url,
            source_title: source.map(|s| s.title.clone()),
            note: raw.note.clone(),
        })
    }
}

/// The closest known names to `wanted`, for "did you mean" hints.
pub fn closest<'a>(wanted: &str, known: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted = wanted.to_ascii_lowercase();
    let n = wanted.chars().count();
    // The distance is at least the difference in length, and only distances
    // up to 3 are kept: skip the quadratic work for names that cannot qualify
    // (a megabyte of input would otherwise take minutes).
    let mut scored: Vec<(usize, &str)> = known
        .filter(|k| k.chars().count().abs_diff(n) <= 3)
        .map(|k| (edit_distance(&wanted, &k.to_ascii_lowercase()), k))
        .collect();
    scored.sort();
    // Only the nearest names, and only when they are near at all.
    let best = scored.first().map(|(d, _)| *d).unwrap_or(usize::MAX);
    scored
        .into_iter()
        .filter(|(d, _)| *d == best && *d <= 3)
        .take(3)
        .map(|(_, k)| k)
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names_rank_by_edit_distance() {
        let known = ["h100-sxm", "h100-pcie", "h200", "a100-80gb"];
        assert_eq!(closest("h100-sx", known.iter().copied()), vec!["h100-sxm"]);
        assert!(closest("zzzzzzzzzz", known.iter().copied()).is_empty());
    }
}
