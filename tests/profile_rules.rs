//! `rules` on the shared fixtures: the planted or known problems are found with
//! the right severity, and a healthy profile stays quiet.

mod profile_common;

use aisp::profile::Scope;
use aisp::profile::rules::{self, Finding, Severity};
use aisp::profile::windows::WindowKind;
use profile_common::open;

fn find<'a>(f: &'a [Finding], id: &str) -> Option<&'a Finding> {
    f.iter().find(|x| x.id == id)
}

#[test]
fn train_good_is_host_bound_with_steady_stalls_and_nothing_high_about_copies() {
    let p = open("train_good.sqlite");
    let r = rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
    assert_eq!(r.windows[0].window.kind, WindowKind::Steady);
    let hb = find(&r.findings, "host_bound_steps").expect("host-bound steps");
    assert!(hb.severity >= Severity::High, "{hb:?}");
    assert_eq!(hb.data["steps"], 39);
    let st = find(&r.findings, "gpu_starvation").expect("starvation");
    assert!(st.severity >= Severity::High);
    assert_eq!(st.window.unwrap().kind, WindowKind::Steady);
    assert_eq!(st.data["gaps"], 39);
    assert_eq!(
        (st.data["min_ns"].as_i64(), st.data["max_ns"].as_i64()),
        (Some(5_132_000), Some(5_486_527))
    );
    assert!(
        st.evidence.iter().any(|e| e.contains("`data`")),
        "{:?}",
        st.evidence
    );
    assert_eq!(r.highest, Severity::Critical);
    for id in [
        "cuda_memcpy_async_pageable",
        "sync_memcpy_memset",
        "heavy_h2d_per_step",
    ] {
        if let Some(f) = find(&r.findings, id) {
            assert!(f.severity < Severity::High, "{id}: {f:?}");
        }
    }
    // The 16 pageable copies are model initialisation, outside the steps: info only.
    let pg = find(&r.findings, "cuda_memcpy_async_pageable").unwrap();
    assert_eq!(
        (
            pg.severity,
            pg.data["copies"].as_u64(),
            pg.data["in_window"].as_u64()
        ),
        (Severity::Info, Some(16), Some(0))
    );
    // No fp32 SIMT GEMM in a bf16 loop.
    assert!(find(&r.findings, "fp32_gemm_on_cuda_cores").is_none());
    assert!(
        r.checked
            .iter()
            .any(|c| c.id == "fp32_gemm_on_cuda_cores" && c.status == "below_threshold")
    );
}

#[test]
fn h200_matmul_small_flags_fp32_simt_gemm_and_the_pageable_copy() {
    let p = open("h200_matmul_small.sqlite");
    let f = rules::evaluate(&p, &Scope::default()).unwrap();
    let g = find(&f, "fp32_gemm_on_cuda_cores").expect("fp32 SIMT GEMM");
    assert_eq!(g.data["share_of_kernel_time_pct"], 98.8);
    assert_eq!(g.data["kernels"], 20);
    assert!(g.severity >= Severity::High, "{g:?}");
    assert!(g.fix.contains("allow_tf32"));
    let c = find(&f, "cuda_memcpy_async_pageable").expect("pageable copy");
    assert_eq!(c.data["copies"], 1);
    assert!(
        c.evidence
            .iter()
            .any(|e| e.contains("Device-to-Host 67108864 bytes")),
        "{:?}",
        c.evidence
    );
}

#[test]
fn healthy_profile_reports_nothing_above_info() {
    let p = open("healthy_1pct.sqlite");
    let r = rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
    assert!(
        r.findings.iter().all(|f| f.severity == Severity::Info),
        "{:?}",
        r.findings
    );
    assert_eq!(r.highest, Severity::Info);
    assert!(
        r.verdict.starts_with("nothing significant"),
        "{}",
        r.verdict
    );
    assert!(r.checked.len() >= 10);
}

#[test]
fn ddp_reports_exposed_communication_and_h100_its_copies() {
    let p = open("ddp.sqlite");
    let f = rules::evaluate(&p, &Scope::default()).unwrap();
    let c = find(&f, "communication_not_overlapped").expect("exposed NCCL");
    assert_eq!(c.device, Some(1));
    assert_eq!(c.data["overlap_pct"], 51.76);
    assert!(!c.title.contains("same stream"));

    let p = open("h100_2gpu_1s.sqlite");
    let f = rules::evaluate(&p, &Scope::default()).unwrap();
    // H2D copies fill the capture; kernel gaps are not starvation while the GPU copies.
    assert_eq!(f[0].id, "heavy_h2d_per_step");
    let s = find(&f, "gpu_starvation").unwrap();
    assert!(s.severity <= Severity::Low);
    // Severity follows the share: a 4-copy pageable finding is info, never high by presence.
    let pg = find(&f, "cuda_memcpy_async_pageable").unwrap();
    assert_eq!(pg.severity, Severity::Info);
    // PyTorch emit_nvtx op names are not iterations.
    assert!(find(&f, "step_time_variance").is_none() && find(&f, "first_step_overhead").is_none());
}

#[test]
fn every_finding_is_complete_and_consistent() {
    for name in [
        "train_good.sqlite",
        "h200_matmul_small.sqlite",
        "ddp.sqlite",
        "mock.sqlite",
        "infer_decode.sqlite",
    ] {
        let p = open(name);
        for f in rules::evaluate(&p, &Scope::default()).unwrap() {
            assert!(
                !f.title.is_empty()
                    && !f.why.is_empty()
                    && !f.fix.is_empty()
                    && !f.verify.is_empty(),
                "{name} {f:?}"
            );
            assert!(!f.evidence.is_empty(), "{name} {}", f.id);
            let w = f.window.unwrap();
            assert!(
                f.time_at_stake_ns >= 0 && f.time_at_stake_ns <= w.length_ns,
                "{name} {}",
                f.id
            );
            assert_eq!(
                f.severity,
                Severity::from_share(f.share_pct),
                "{name} {}",
                f.id
            );
        }
    }
}
