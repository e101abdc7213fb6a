//! `aisp_ask` without an LLM, on the real fixtures: the answer cites exactly
//! the rule findings that `aisp_profile_rules` reports at medium severity or
//! above on the same file, says that no LLM was used, and says what the data
//! cannot answer.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use aisp::app::AppState;
use aisp::config::{Config, LlmConfig};
use aisp_hw::gpu::GpuAvailability;
use serde_json::{Value, json};

fn app() -> Arc<AppState> {
    let home = tempfile::tempdir().unwrap().keep();
    let mut config = Config::with_home(home);
    config.llm = LlmConfig::default();
    let app = AppState::new(config);
    app.set_gpu_for_tests(GpuAvailability::unavailable("no GPU in this test", false));
    app
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

async fn call(app: &Arc<AppState>, tool: &str, args: Value) -> Value {
    let t = aisp::registry::find(tool).unwrap_or_else(|| panic!("{tool} is registered"));
    aisp::dispatch::invoke(app, t, args, Default::default())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Rule ids at medium severity or above, as the rules tool reports them.
fn serious(rules: &Value) -> BTreeSet<String> {
    rules["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| matches!(f["severity"].as_str(), Some("medium" | "high" | "critical")))
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

async fn check_cites_exactly_the_serious_rules(file: &str, expected: &[&str]) -> Value {
    let app = app();
    let path = fixture(file);
    let rules = call(&app, "aisp_profile_rules", json!({"path": path})).await;
    let want = serious(&rules);
    assert_eq!(
        want,
        expected.iter().map(|s| s.to_string()).collect(),
        "{file}: the rules' own report changed"
    );

    let out = call(
        &app,
        "aisp_ask",
        json!({"question": "why is this training slow?", "profile": path}),
    )
    .await;
    assert_eq!(out["llm_used"], false);
    assert_eq!(out["model"], Value::Null);
    assert_eq!(out["intent"], "slow_training");
    let answer = out["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("> **No LLM was used.** No LLM endpoint is configured"),
        "{answer}"
    );

    let got: BTreeSet<String> = out["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        got, want,
        "{file}: findings relied on = the rules' medium-or-above findings"
    );
    for id in &want {
        assert!(
            answer.contains(&format!("`{id}`")),
            "{file}: the answer names {id}"
        );
    }
    // Lower-severity findings are not relied on.
    for f in rules["findings"].as_array().unwrap() {
        let id = f["id"].as_str().unwrap();
        if !want.contains(id) {
            assert!(!got.contains(id));
        }
    }
    // Every finding points at the citation of the rules result, which quotes them.
    let citations = out["citations"].as_array().unwrap();
    let rules_cite = citations
        .iter()
        .find(|c| c["tool"] == "aisp_profile_rules")
        .expect("the rules result is cited");
    assert_eq!(
        rules_cite["arguments"],
        json!({"path": path, "detail": true})
    );
    assert_eq!(rules_cite["ok"], true);
    for f in out["findings"].as_array().unwrap() {
        assert_eq!(f["evidence_id"], rules_cite["id"]);
        assert!(answer.contains(&format!("[{}]", rules_cite["id"].as_str().unwrap())));
    }
    // Each citation label in the answer resolves to a citation.
    let ids: Vec<&str> = citations
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for c in ids.iter() {
        assert!(answer.contains(&format!("[{c}]")));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn train_good_answer_cites_exactly_the_serious_rule_findings() {
    let out = check_cites_exactly_the_serious_rules(
        "train_good.sqlite",
        &["host_os_wait", "launch_bound_tiny_kernels"],
    )
    .await;
    let answer = out["answer"].as_str().unwrap();
    // The facts carry the fixture's numbers through from the rules (38 sleeps of about 5 ms, checked against
    // the OS runtime table in the profile rules tests).
    assert!(
        answer.contains("188.65 ms in 38 stretches over 38 of 39 steady steps"),
        "{answer}"
    );
    // The steady-state busy % comes from the utilization evidence (the ledger's steady window).
    assert!(answer.contains("steady window, busy_pct: 8.83"), "{answer}");
    // Honest about what a trace cannot say.
    assert!(answer.contains("## What the data cannot answer"));
    assert!(answer.contains("--python-sampling=true"));
    assert_eq!(out["findings"][0]["severity"], "critical");
    assert_eq!(out["findings"][0]["device"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h100_2gpu_answer_cites_exactly_the_serious_rule_findings() {
    // 428 ms of cudaStreamSynchronize while the GPU copies costs the GPU under 1 ms: the sync
    // is info, so the answer leads with the copies and never calls the run sync-bound.
    let out =
        check_cites_exactly_the_serious_rules("h100_2gpu_1s.sqlite", &["exposed_copies"]).await;
    let answer = out["answer"].as_str().unwrap();
    assert!(
        answer.contains("**critical** `exposed_copies` (device 1)"),
        "{answer}"
    );
    assert!(!answer.contains("`cuda_api_sync` ("), "{answer}");
    // Both devices' copy findings are relied on, in the rules' order (the larger predicted saving of the step
    // first; the two devices run the same 62-kernel iteration and copy the same 771 MB per step).
    let rules = call(
        &app(),
        "aisp_profile_rules",
        json!({"path": fixture("h100_2gpu_1s.sqlite")}),
    )
    .await;
    assert_eq!(out["findings"][0]["id"], "exposed_copies");
    assert_eq!(out["findings"][0]["device"], rules["findings"][0]["device"]);
    let copies = out["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "exposed_copies")
        .count();
    assert_eq!(copies, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_profile_gets_an_honest_insufficient_signal() {
    let app = app();
    let path = fixture("healthy_1pct.sqlite");
    let out = call(
        &app,
        "aisp_ask",
        json!({"question": "why is this training slow?", "profile": path}),
    )
    .await;
    assert_eq!(out["findings"], json!([]));
    let answer = out["answer"].as_str().unwrap();
    assert!(
        answer.contains("nothing at medium severity or above")
            && answer.contains("insufficient signal"),
        "{answer}"
    );
    assert!(
        answer.contains("busy_pct: 99.01"),
        "the utilization fact is there: {answer}"
    );
    assert!(
        answer.contains("Device 0 is busy 99.01 % of the span window"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_reuses_the_profile_of_the_conversation() {
    let app = app();
    let path = fixture("h200_matmul_small.sqlite");
    let first = call(
        &app,
        "aisp_ask",
        json!({"question": "why is this slow?", "profile": path}),
    )
    .await;
    let conv = first["conversation_id"].as_str().unwrap().to_string();
    let got: BTreeSet<&str> = first["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(got.contains("fp32_gemm_on_cuda_cores"), "{got:?}");
    let second = call(
        &app,
        "aisp_ask",
        json!({"question": "which kernels take the time?", "conversation_id": conv}),
    )
    .await;
    assert_eq!(second["conversation_id"], conv.as_str());
    assert!(
        second["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("Reusing the profile of the earlier turn"),
        "{}",
        second["notes"]
    );
    let tools: Vec<&str> = second["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"aisp_profile_kernels"), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_profile_the_answer_uses_the_planners_and_says_what_to_capture() {
    let app = app();
    let out = call(
        &app,
        "aisp_ask",
        json!({"question": "Training Llama 3.1 70B on 8 H100 runs out of memory"}),
    )
    .await;
    assert_eq!(out["intent"], "out_of_memory");
    let cites: Vec<(&str, &Value)> = out["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["tool"].as_str().unwrap(), &c["arguments"]))
        .collect();
    let plan = cites
        .iter()
        .find(|(t, _)| *t == "aisp_distributed_plan")
        .expect("the planner was consulted");
    assert_eq!(
        *plan.1,
        json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 8})
    );
    assert!(cites.iter().any(|(t, _)| *t == "aisp_ai_troubleshoot"));
    let answer = out["answer"].as_str().unwrap();
    assert!(answer.contains("## What the data cannot answer"));
    assert!(answer.contains("_record_memory_history"), "{answer}");
    // The GPU probe failed here (no GPU): said, not hidden.
    assert!(answer.contains("`aisp_gpu_info` could not run"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_profile_is_an_error_not_an_answer() {
    let app = app();
    let t = aisp::registry::find("aisp_ask").unwrap();
    let err = aisp::dispatch::invoke(
        &app,
        t,
        json!({"question": "why?", "profile": "/nonexistent/run.sqlite"}),
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, aisp::ErrorKind::NotFound);
    let err = aisp::dispatch::invoke(&app, t, json!({"question": "  "}), Default::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind, aisp::ErrorKind::InvalidInput);
}

use crate::profile_common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_gpu_question_on_the_ddp_profile_cites_overlap_and_nccl() {
    let app = app();
    let path = profile_common::fixture("ddp.sqlite").display().to_string();
    // Every finding at medium or above, as the detailed answer gives them (the default names those past the second
    // in `ranked` only).
    let rules = call(
        &app,
        "aisp_profile_rules",
        json!({"path": path, "detail": true}),
    )
    .await;
    let want = serious(&rules);
    let out = call(
        &app,
        "aisp_ask",
        json!({"question": "my DDP training on 2 GPUs scales badly: is the NCCL all-reduce the problem?", "profile": path}),
    )
    .await;
    assert_eq!(out["intent"], "multi_gpu_scaling");
    let got: BTreeSet<String> = out["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, want);
    let citations = out["citations"].as_array().unwrap();
    let tools: Vec<&str> = citations
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "aisp_profile_rules",
            "aisp_profile_overlap",
            "aisp_profile_nccl",
            "aisp_profile_utilization",
            "aisp_explain"
        ]
    );
    assert_eq!(
        citations[4]["arguments"],
        json!({"concept": "collectives"}),
        "the longest concept named"
    );
    // The fixture's overlap facts reach the answer: 40.70 % and 45.80 % of NCCL time hidden.
    let overlap = citations[1]["quote"].as_str().unwrap();
    assert!(
        overlap.contains("overlap_pct: 40.7") && overlap.contains("overlap_pct: 45.8"),
        "{overlap}"
    );
    let answer = out["answer"].as_str().unwrap();
    assert!(answer.contains("overlap_pct: 40.7"), "{answer}");
    assert!(
        answer.contains("**high** `communication_not_overlapped` (device 1)"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_leads_with_the_finding_that_costs_most() {
    // The planted workloads have several real problems each; the one that costs the GPU most
    // (time at stake, per device) must come first, in the findings and in the text.
    for (file, question) in [
        (
            "workloads/decode_loop.sqlite",
            "why is my decode loop so slow per token?",
        ),
        (
            "workloads/train_adam_storm.sqlite",
            "why is this training slow?",
        ),
    ] {
        let app = app();
        let path = profile_common::fixture(file).display().to_string();
        let rules = call(&app, "aisp_profile_rules", json!({"path": path})).await;
        let findings = rules["findings"].as_array().unwrap();
        let stake = |f: &Value| f["time_at_stake_ns"].as_i64().unwrap();
        let top = findings.iter().max_by_key(|f| stake(f)).unwrap();
        assert!(
            findings.iter().filter(|f| stake(f) == stake(top)).count() == 1,
            "{file}: a tie for the costliest finding"
        );
        let out = call(
            &app,
            "aisp_ask",
            json!({"question": question, "profile": path}),
        )
        .await;
        let relied = out["findings"].as_array().unwrap();
        assert!(relied.len() >= 2, "{file}: {relied:?}");
        assert_eq!(relied[0]["id"], top["id"], "{file}");
        assert_eq!(relied[0]["device"], top["device"], "{file}");
        let answer = out["answer"].as_str().unwrap();
        let at = |id: &str| {
            answer
                .find(&format!("`{id}`"))
                .unwrap_or_else(|| panic!("{file}: the answer names {id}: {answer}"))
        };
        let lead = at(top["id"].as_str().unwrap());
        for f in &relied[1..] {
            let id = f["id"].as_str().unwrap();
            if id != top["id"] {
                assert!(
                    lead < at(id),
                    "{file}: {id} named before the costliest finding"
                );
            }
        }
    }
}
