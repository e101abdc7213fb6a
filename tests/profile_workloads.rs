//! `aisp_profile_rules` on our own captures (workloads/, captured on an H100
//! with Nsight Systems 2025.3.1 by scripts/capture-workloads.sh): each planted
//! problem is found at its severity, the healthy control stays quiet, as
//! workloads/expectations.json says. Exact figures were checked with the
//! sqlite3 CLI over the same files (queries beside each assertion).

mod profile_common;

use aisp::app::AppState;
use aisp::context::OpContext;
use aisp::registry;
use serde_json::{Value, json};

const WORKLOADS: [&str; 5] = [
    "healthy",
    "pageable_copies",
    "host_sync",
    "fp32_no_tf32",
    "tiny_kernels",
];

fn rules(workload: &str) -> Value {
    let path = profile_common::fixture(&format!("workloads/{workload}.sqlite"));
    let t = registry::find("aisp_profile_rules").unwrap();
    t.op.call_json(
        &OpContext::detached(AppState::for_tests()),
        json!({"path": path.display().to_string()}),
    )
    .unwrap_or_else(|e| panic!("{workload}: {e}"))
}

fn rank(severity: &str) -> u8 {
    match severity {
        "info" => 0,
        "low" => 1,
        "medium" => 2,
        "high" => 3,
        "critical" => 4,
        other => panic!("unknown severity {other}"),
    }
}

fn finding<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no finding {id}"))
}

#[test]
fn every_planted_problem_is_found_and_the_control_stays_quiet() {
    let expectations: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/expectations.json"),
        )
        .unwrap(),
    )
    .unwrap();
    for w in WORKLOADS {
        let v = rules(w);
        let e = &expectations[w];
        let findings = v["findings"].as_array().unwrap();
        let min = e["min_severity"].as_str().map_or(0, rank);
        for id in e["require"].as_array().unwrap() {
            let f = finding(&v, id.as_str().unwrap());
            assert!(
                rank(f["severity"].as_str().unwrap()) >= min,
                "{w}: {id} is {} (expected at least {})",
                f["severity"],
                e["min_severity"]
            );
        }
        if let Some(limit) = e["forbid_at_or_above"].as_str() {
            for f in findings {
                assert!(
                    rank(f["severity"].as_str().unwrap()) < rank(limit),
                    "{w}: {} at {} in the healthy control",
                    f["id"],
                    f["severity"]
                );
            }
        }
    }
}

#[test]
fn fp32_gemms_are_counted_exactly_in_the_steady_window() {
    let v = rules("fp32_no_tf32");
    let f = finding(&v, "fp32_gemm_on_cuda_cores");
    assert_eq!(f["severity"], "critical");
    // Steady window = step_1 start → step_19 end.
    assert_eq!(f["window"]["start_ns"], 9_322_767_586i64);
    assert_eq!(f["window"]["end_ns"], 9_353_946_705i64);
    // sqlite3: kernels overlapping the window whose shortName has `ffma` or is
    // cuBLAS's `Kernel2`: 42, Σ(end-start) 28,142,314 of 31,563,432 for all 129.
    assert_eq!(f["data"]["kernels"], 42);
    assert_eq!(f["data"]["time_ns"], 28_142_314);
    assert_eq!(f["data"]["share_of_kernel_time_pct"], 89.2);
}

#[test]
fn pageable_copies_are_counted_exactly() {
    let v = rules("pageable_copies");
    let f = finding(&v, "cuda_memcpy_async_pageable");
    // sqlite3: MEMCPY rows with srcKind or dstKind 0 (Pageable) whose runtime
    // call (same correlationId) is a *Async API: 46; overlapping the steady
    // window: 29 copies, 973,078,528 bytes.
    assert_eq!(f["data"]["copies"], 46);
    assert_eq!(f["data"]["in_window"], 29);
    assert_eq!(f["data"]["bytes_in_window"], 973_078_528i64);
    assert!(rank(f["severity"].as_str().unwrap()) >= rank("medium"));
}

#[test]
fn warm_up_in_the_first_steady_step_is_not_called_variance() {
    let v = rules("healthy");
    let f = finding(&v, "step_time_variance");
    // step_1 (6.07 ms, the slowest) is the tail of warm-up; what remains is
    // 28 steps with a CV just over 10 %, a low-severity observation.
    assert_eq!(f["severity"], "low");
    assert_eq!(f["data"]["steps"], 28);
    let evidence = f["evidence"].to_string();
    assert!(evidence.contains("step_1"), "{evidence}");
}

#[test]
fn compare_through_the_tool_names_its_verdict_basis_and_reason() {
    let compare = |before: &str, after: &str| {
        let t = registry::find("aisp_profile_compare").unwrap();
        t.op.call_json(
            &OpContext::detached(AppState::for_tests()),
            json!({
                "before": profile_common::fixture(before).display().to_string(),
                "after": profile_common::fixture(after).display().to_string(),
            }),
        )
        .unwrap()
    };
    // The fix of the planted problem: improved, per step.
    let v = compare(
        "workloads/pageable_copies.sqlite",
        "workloads/healthy.sqlite",
    );
    assert_eq!(v["verdict"], "improved");
    assert_eq!(v["basis"], "per_step");
    assert_eq!(v["delta_pct"], -55.55);
    assert!(v["verdict_reason"].as_str().unwrap().contains("-55.55%"));
    // Two different workloads: fp32 GEMMs on 4 layers vs bf16 on 8 (the old verdict on the
    // per-step figure: "regressed" +198.52 %).
    let v = compare("workloads/fp32_no_tf32.sqlite", "workloads/healthy.sqlite");
    assert_eq!(v["verdict"], "not_comparable");
    assert_eq!(v["basis"], "none");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .starts_with("not comparable: different workloads")
    );
}
