//! The step ledger of the planted 4-rank sets through `aisp_profile_rules` (dispatch): `LEDGER_SETS=a,b
//! cargo test --test it dump_sets -- --nocapture` prints each set's findings and per-rank ledgers.

use crate::profile_common;

/// The folder a 4-rank planted set is decompressed into.
fn set_dir(case: &str) -> std::path::PathBuf {
    let mut dir = None;
    for r in 0..4 {
        let f = profile_common::fixture(&format!("{case}/rank{r}.sqlite"));
        dir = f.parent().map(|p| p.to_path_buf());
    }
    dir.unwrap()
}

fn set_rules(case: &str) -> serde_json::Value {
    use aisp::app::AppState;
    use aisp::context::OpContext;
    let dir = set_dir(case);
    let t = aisp::registry::find("aisp_profile_rules").unwrap();
    t.op.call_json(
        &OpContext::detached(AppState::for_tests()),
        serde_json::json!({"path": dir.display().to_string(), "detail": true}),
    )
    .unwrap_or_else(|e| panic!("{case}: {e}"))
}

/// `LEDGER_DUMP=1 LEDGER_SETS=planted/ddp_straggler,... cargo test --test profile_ledger dump_sets -- --nocapture`
#[test]
fn dump_sets() {
    let Ok(sets) = std::env::var("LEDGER_SETS") else {
        return;
    };
    for case in sets.split(',') {
        let v = set_rules(case);
        eprintln!("== {case}: {}", v["verdict"]);
        for f in v["findings"].as_array().unwrap() {
            eprintln!(
                "   [{}] {} {}% pred {} : {}",
                f["severity"], f["id"], f["share_pct"], f["predicted_step_ns"], f["title"]
            );
        }
        for l in v["ledger"].as_array().unwrap_or(&Vec::new()) {
            eprintln!("   ledger {}", l);
        }
    }
}
