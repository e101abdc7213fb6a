//! `search`: kernels, NVTX ranges and CUDA API calls by name, with timestamps.
//!
//! The pattern is a case-insensitive substring, or a glob when it contains
//! `*` or `?`. Names are matched in SQL with bound parameters (`LIKE ?1
//! ESCAPE '\'`), never by splicing the pattern into a query.

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calls;
use super::model::{self, NVTX_PUSH_POP, NVTX_START_END, int, opt_int, text};
use super::{Profile, ProfileError, ResolvedScope, Result};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SearchKind {
    /// Kernels by short or demangled name.
    Kernel,
    /// NVTX push/pop and start/end ranges by text.
    Nvtx,
    /// CUDA runtime/driver API calls by name.
    Api,
}

pub const ALL_KINDS: [SearchKind; 3] = [SearchKind::Kernel, SearchKind::Nvtx, SearchKind::Api];

/// Translate a user pattern into an SQL LIKE pattern (escape `\`).
pub fn like_pattern(pattern: &str) -> String {
    let glob = pattern.contains('*') || pattern.contains('?');
    let mut out = String::new();
    if !glob {
        out.push('%');
    }
    for c in pattern.chars() {
        match c {
            '%' | '_' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '*' if glob => out.push('%'),
            '?' if glob => out.push('_'),
            c => out.push(c),
        }
    }
    if !glob {
        out.push('%');
    }
    out
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Match {
    pub kind: SearchKind,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub duration_ns: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<i64>,
    pub pid: i64,
    /// Launching thread for kernels, the calling thread for API calls and ranges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NameTotal {
    pub kind: SearchKind,
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Search {
    pub pattern: String,
    /// The SQL LIKE pattern used (case-insensitive for ASCII).
    pub like: String,
    /// Matches per kind (all of them, before `limit`).
    pub counts: BTreeMap<String, u64>,
    /// Matching names with their counts and total time, largest first.
    pub names: Vec<NameTotal>,
    /// The first matches in time order (at most `limit`).
    pub matches: Vec<Match>,
    pub truncated: bool,
}

fn matching_string_ids(p: &Profile, like: &str) -> Result<HashSet<i64>> {
    let Some(t) = &p.tables().string_ids else {
        return Ok(HashSet::new());
    };
    let sql = format!(
        "SELECT id FROM {} WHERE value LIKE ?1 ESCAPE '\\'",
        t.quoted()
    );
    let mut stmt = p.conn().prepare(&sql).map_err(|e| p.read_err(e))?;
    let mut rows = stmt.query([like]).map_err(|e| p.read_err(e))?;
    let mut out = HashSet::new();
    while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
        out.insert(int(r, 0));
    }
    Ok(out)
}

pub fn search(
    p: &Profile,
    scope: &ResolvedScope,
    pattern: &str,
    kinds: &[SearchKind],
    limit: usize,
) -> Result<Search> {
    if pattern.trim().is_empty() {
        return Err(ProfileError::BadArgument(
            "the search pattern is empty".into(),
        ));
    }
    let like = like_pattern(pattern);
    let ids = matching_string_ids(p, &like)?;
    let mut matches: Vec<Match> = Vec::new();
    let mut names: BTreeMap<(SearchKind, String), (u64, i64)> = BTreeMap::new();
    let mut add = |m: Match, matches: &mut Vec<Match>| {
        let e = names.entry((m.kind, m.name.clone())).or_default();
        e.0 += 1;
        e.1 += m.duration_ns;
        matches.push(m);
    };
    if kinds.contains(&SearchKind::Kernel) && !ids.is_empty() {
        let api = p.api()?;
        let launches = &p.launch_index()?.kernel_launch;
        for (i, k) in p.kernels()?.iter().enumerate() {
            if !scope.admits(k.device, k.global_pid, k.start, k.end) {
                continue;
            }
            let id = if ids.contains(&k.short_name) {
                k.short_name
            } else if ids.contains(&k.demangled_name) {
                k.demangled_name
            } else {
                continue;
            };
            add(
                Match {
                    kind: SearchKind::Kernel,
                    name: p.string(id).to_string(),
                    start_ns: k.start,
                    end_ns: k.end,
                    duration_ns: k.dur(),
                    device: Some(k.device),
                    stream: Some(k.stream),
                    pid: model::pid_of(k.global_pid),
                    tid: launches[i].map(|a| model::tid_of(api[a as usize].global_tid)),
                },
                &mut matches,
            );
        }
    }
    if kinds.contains(&SearchKind::Api) && !ids.is_empty() {
        for a in p.api()? {
            if ids.contains(&a.name) && scope.admits_thread(a.global_tid, a.start, a.end) {
                add(
                    Match {
                        kind: SearchKind::Api,
                        name: calls::api_display_name(p.string(a.name)).to_string(),
                        start_ns: a.start,
                        end_ns: a.end,
                        duration_ns: a.dur(),
                        device: None,
                        stream: None,
                        pid: model::pid_of(a.global_tid),
                        tid: Some(model::tid_of(a.global_tid)),
                    },
                    &mut matches,
                );
            }
        }
    }
    if kinds.contains(&SearchKind::Nvtx)
        && let Some(t) = &p.tables().nvtx
    {
        let text_col = t.col_or("text", "NULL");
        let text_id = t.col_or("textId", "NULL");
        let id_list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let by_id = if t.has("textId") && !id_list.is_empty() {
            format!(" OR {text_id} IN ({})", id_list.join(","))
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT start, \"end\", {text_col}, {text_id}, {} FROM {} \
             WHERE eventType IN ({NVTX_PUSH_POP}, {NVTX_START_END}) AND \"end\" IS NOT NULL \
             AND ({text_col} LIKE ?1 ESCAPE '\\'{by_id})",
            t.col_or("globalTid", "0"),
            t.quoted()
        );
        let mut stmt = p.conn().prepare(&sql).map_err(|e| p.read_err(e))?;
        let mut rows = stmt.query([&like]).map_err(|e| p.read_err(e))?;
        let mut found = Vec::new();
        while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
            let name = text(r, 2)
                .or_else(|| opt_int(r, 3).map(|id| p.string(id).to_string()))
                .unwrap_or_default();
            found.push((int(r, 0), int(r, 1), name, int(r, 4)));
        }
        for (s, e, name, gtid) in found {
            if scope.admits_thread(gtid, s, e) {
                add(
                    Match {
                        kind: SearchKind::Nvtx,
                        name,
                        start_ns: s,
                        end_ns: e,
                        duration_ns: e - s,
                        device: None,
                        stream: None,
                        pid: model::pid_of(gtid),
                        tid: Some(model::tid_of(gtid)),
                    },
                    &mut matches,
                );
            }
        }
    }
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for m in &matches {
        *counts
            .entry(
                serde_json::to_value(m.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            )
            .or_default() += 1;
    }
    matches.sort_by_key(|m| (m.start_ns, m.end_ns));
    let truncated = matches.len() > limit;
    matches.truncate(limit);
    let mut names: Vec<NameTotal> = names
        .into_iter()
        .map(|((kind, name), (count, total_ns))| NameTotal {
            kind,
            name,
            count,
            total_ns,
        })
        .collect();
    names.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    names.truncate(limit.max(20));
    Ok(Search {
        pattern: pattern.to_string(),
        like,
        counts,
        names,
        matches,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_become_escaped_like_patterns() {
        assert_eq!(like_pattern("nccl"), "%nccl%");
        assert_eq!(like_pattern("step_*"), "step\\_%");
        assert_eq!(like_pattern("a?c"), "a_c");
        assert_eq!(like_pattern("100%"), "%100\\%%");
        assert_eq!(
            like_pattern("x'; DROP TABLE y; --"),
            "%x'; DROP TABLE y; --%"
        );
    }
}
