//! `aisp_recommend` on the planted workloads of the tuned set (tests/data/planted, one export or a folder of
//! four ranks each): techniques matched to what the profile shows. No top-3 technique targets something the
//! run lacks (its manifest's `lacks`: attention, sequences) or already applies (its `uses`: bf16, fused
//! optimizer, CUDA graphs, DDP overlap ...) or that its manifest says must not be recommended, and the top
//! technique is the one whose fix the top finding names (`techniques.top_technique`).

use std::path::Path;

use crate::profile_common;
use aisp::app::AppState;
use aisp::context::OpContext;
use serde_json::{Value, json};

/// The profile of a case: its export, or the folder of its ranks.
fn profile_path(case: &str, ranks: u64) -> String {
    profile_common::planted(case, ranks as usize)
        .display()
        .to_string()
}

fn recommend(args: Value) -> Value {
    let t = aisp::registry::find("aisp_recommend").unwrap();
    t.op.call_json(&OpContext::detached(AppState::for_tests()), args)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The technique ids a manifest phrase names (what must not be recommended, the top technique).
fn techniques_named(phrase: &str) -> Vec<&'static str> {
    let l = phrase.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut add = |cond: bool, ids: &[&'static str]| {
        if cond {
            out.extend_from_slice(ids);
        }
    };
    add(
        l.contains("flash"),
        &["flash-attention-2", "flash-attention-3"],
    );
    add(l.contains("sequence packing"), &["sequence-packing"]);
    add(
        l.starts_with("bf16") || l.contains("bf16 autocast for the gemms"),
        &["bf16-mixed-precision"],
    );
    add(l.contains("cuda graphs"), &["cuda-graphs"]);
    add(l.contains("fused optimizer"), &["fused-optimizer"]);
    add(l.contains("pinned"), &["pinned-memory"]);
    add(
        l.contains("overlap") || l.contains("gradient bucketing"),
        &["ddp-overlap"],
    );
    add(l.contains("kernel fusion"), &["torch-compile"]);
    add(l.starts_with("tf32"), &["tf32", "bf16-mixed-precision"]);
    add(l.contains("balance the work"), &["rank-load-balancing"]);
    out
}

/// Techniques for what a run lacks (`lacks` of the manifest: model features, not techniques it could adopt).
fn for_lacking(feature: &str) -> Vec<&'static str> {
    match feature {
        "attention" => vec![
            "flash-attention-2",
            "flash-attention-3",
            "sliding-window-attention",
            "gqa",
            "mla",
            "paged-attention",
            "kv-cache-fp8",
            "kv-cache-2bit",
            "liger-kernels",
        ],
        "sequences" => vec![
            "sequence-packing",
            "context-parallel",
            "chunked-prefill",
            "prefix-caching",
        ],
        _ => vec![],
    }
}

#[test]
fn recommendations_follow_what_the_profile_shows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/planted/manifests");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().contains(".fixed"))
        .collect();
    names.sort();
    assert!(names.len() >= 9, "{names:?}");
    let mut failures = Vec::new();
    for path in names {
        let m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let case = m["case"].as_str().unwrap();
        let v = recommend(json!({
            "profile": profile_path(case, m["ranks"].as_u64().unwrap_or(1)),
            "goal": "throughput",
        }));
        let recs = v["recommendations"].as_array().unwrap();
        let top3: Vec<&str> = recs
            .iter()
            .take(3)
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        eprintln!("{case}: {top3:?}");
        for r in recs.iter().take(3) {
            eprintln!(
                "    {} → {:?}: {}",
                r["id"], r["predicted_step_ns"], r["ledger"]
            );
        }
        // Nothing the run lacks, already applies, or the manifest rules out.
        let mut banned: Vec<(&str, String)> = Vec::new();
        for phrase in m["techniques"]["must_not_recommend"].as_array().unwrap() {
            let p = phrase.as_str().unwrap();
            for id in techniques_named(p) {
                banned.push((id, format!("must not: {p}")));
            }
        }
        for f in m["lacks"].as_array().unwrap() {
            for id in for_lacking(f.as_str().unwrap()) {
                banned.push((id, format!("lacks {f}")));
            }
        }
        let uses = &m["uses"];
        if uses["cuda_graphs"] == true {
            banned.push(("cuda-graphs", "uses CUDA graphs".into()));
        }
        if uses["optimizer"].as_str().unwrap_or("").contains("fused") {
            banned.push(("fused-optimizer", "uses a fused optimizer".into()));
        }
        if uses["compute_dtype"]
            .as_str()
            .unwrap_or("")
            .contains("bf16")
        {
            banned.push(("bf16-mixed-precision", "computes in bf16".into()));
        }
        for id in &top3 {
            if let Some((_, why)) = banned.iter().find(|(b, _)| b == id) {
                failures.push(format!("{case}: `{id}` in the top 3 ({why})"));
            }
        }
        // Each of the top 3 states its ledger numbers and predicted step where the ledger prices it.
        for r in recs.iter().take(3) {
            if r["predicted_step_ns"].is_null() && r["ledger"].is_null() {
                continue;
            }
            assert!(r["predicted_step_ns"].as_i64().unwrap() > 0, "{case}: {r}");
        }
        // The top technique is the one the top finding's fix names.
        if let Some(top) = m["techniques"]["top_technique"].as_str() {
            let wanted = techniques_named(top);
            if !wanted.contains(&top3.first().copied().unwrap_or("")) {
                failures.push(format!(
                    "{case}: top is {:?}, the manifest's top technique is `{top}` ({wanted:?})",
                    top3.first()
                ));
            } else {
                let first = &recs[0];
                assert!(
                    first["reason"]
                        .as_str()
                        .unwrap()
                        .starts_with("addresses profile finding"),
                    "{case}: {first}"
                );
                assert!(
                    first["ledger"].as_str().unwrap().contains("steady step"),
                    "{case}: {first}"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_straggler_finding_alone_recommends_rebalancing_first() {
    // The case: a 4-rank compute straggler; passing the finding used to change nothing.
    let v =
        recommend(json!({"findings": ["cross_rank_straggler"], "gpus": 4, "workload": "training"}));
    let first = &v["recommendations"][0];
    assert_eq!(first["id"], "rank-load-balancing", "{v}");
    assert!(
        first["reason"]
            .as_str()
            .unwrap()
            .contains("addresses profile finding `cross_rank_straggler`")
    );
}
