//! The analyze operations that read a profile: bottleneck classification and
//! retargeting to another GPU, checked against the fixtures' ground truth
//! (`tests/data/README.md`, computed with the sqlite3 CLI).

use crate::profile_common;

use aisp::app::AppState;
use aisp::context::OpContext;
use aisp::error::ErrorKind;
use aisp::registry;
use serde_json::{Value, json};

fn call(tool: &str, args: Value) -> Result<Value, aisp::OpError> {
    let app = AppState::for_tests();
    let t = registry::find(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    t.op.call_json(&OpContext::detached(app), args)
}

fn path_of(name: &str) -> String {
    profile_common::fixture(name).display().to_string()
}

fn share(device: &Value, category: &str) -> f64 {
    device["shares"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["category"] == category)
        .unwrap_or_else(|| panic!("no share {category}"))["pct"]
        .as_f64()
        .unwrap()
}

#[test]
fn train_good_is_host_bound_in_its_steady_window() {
    let v = call(
        "aisp_analyze_bottlenecks",
        json!({"path": path_of("train_good.sqlite")}),
    )
    .unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["classification"], "host-bound");
    assert_eq!(d["window"]["kind"], "steady");
    // The step ledger over the steady window on the GPU timeline (scripts/ledger_sql.py: 353,004,710 ns,
    // compute 31,172,796, copy 3,176,656, idle 318,655,258): idle the host caused is 90.25 %, idle with work
    // queued 0.02 %, and copies not overlapped by kernels are their own share (0.90 %).
    assert_eq!(share(d, "host_idle"), 90.25);
    assert_eq!(share(d, "queued_idle"), 0.02);
    assert_eq!(share(d, "copy"), 0.9);
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"host_os_wait"), "{ids:?}");
    assert!(ids.contains(&"launch_bound_tiny_kernels"), "{ids:?}");
    assert_eq!(d["largest_column"], "idle_os_wait");
    let evidence = d["evidence"].to_string();
    assert!(evidence.contains("idle_os_wait 53.44%"), "{evidence}");
}

#[test]
fn without_a_profile_it_says_what_is_missing() {
    let v = call("aisp_analyze_bottlenecks", json!({})).unwrap();
    let text = v.to_string();
    assert!(text.contains("nsys"), "{text}");
}

#[test]
fn retarget_scales_the_fp32_simt_gemm_by_the_fp32_vector_peak() {
    let v = call(
        "aisp_analyze_retarget",
        json!({"path": path_of("h200_matmul_small.sqlite"), "target_gpu": "b200"}),
    )
    .unwrap();
    assert_eq!(v["source_gpu"], "h200");
    // Σ kernel time 53,909,072 ns; the 20 fp32 FFMA GEMMs are 53,242,485 ns of it.
    assert_eq!(v["measured_kernel_ms"], 53.9091);
    let compute = v["by_bound"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["bound"] == "compute")
        .unwrap();
    assert_eq!(compute["measured_ns"], 53_242_485);
    // Catalog FP32 vector peaks: H200 67, B200 80 TFLOP/s → 53,242,485 × 67/80.
    assert_eq!(compute["estimated_ns"], 44_590_581);
}

#[test]
fn retarget_rejects_an_unknown_gpu_with_the_known_ids() {
    let e = call(
        "aisp_analyze_retarget",
        json!({"path": path_of("h200_matmul_small.sqlite"), "target_gpu": "h900"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    assert!(e.message.contains("b200"), "{}", e.message);
}
