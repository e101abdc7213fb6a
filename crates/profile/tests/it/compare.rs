//! `compare` on the planted pairs (tests/data/planted: each tuned case and its fixed variant, captured through
//! aisp on 4×H200): the verdict and the step change against the independent measurement of
//! `scripts/planted_steps.py` (SQL over the same exports), "not comparable" where the work differs, and
//! predicted vs measured per finding. `COMPARE_DUMP=1` prints each comparison.

use std::path::{Path, PathBuf};

use aisp_profile::compare::{self, Basis, Compare, Verdict};

use crate::profile_common;

fn run_path(case: &str, ranks: usize) -> PathBuf {
    profile_common::planted(case, ranks)
}

fn compare_cases(before: &str, after: &str, ranks: usize) -> Compare {
    let c = compare::compare_paths(
        &run_path(before, ranks),
        &run_path(after, ranks),
        10,
        2,
        &|| false,
    )
    .unwrap_or_else(|e| panic!("{before} → {after}: {e}"));
    dump(&format!("{before} → {after}"), &c);
    c
}

fn dump(what: &str, c: &Compare) {
    if std::env::var_os("COMPARE_DUMP").is_none() {
        return;
    }
    eprintln!("== {what}: {}", c.summary);
    eprintln!("   step {:?}", c.step);
    for f in &c.comparability.facts {
        eprintln!(
            "   fact {} {:?} {} | {} → {} {}",
            f.fact, f.same, f.effect, f.before, f.after, f.note
        );
    }
    eprintln!("   work {:?}", c.comparability.work);
    for p in &c.predictions {
        eprintln!("   pred {p:?}");
    }
    for f in &c.findings {
        eprintln!("   finding {f:?}");
    }
    for col in c.columns.iter().take(6) {
        eprintln!("   column {col:?}");
    }
    for k in c.kernels.iter().take(5) {
        eprintln!("   kernel {k:?}");
    }
    for e in &c.evidence {
        eprintln!("   evidence {e:?}");
    }
}

/// `COMPARE_DUMP=1 cargo test -p aisp-profile --test it dump_planted_compares -- --nocapture`
#[test]
fn dump_planted_compares() {
    if std::env::var_os("COMPARE_DUMP").is_none() {
        return;
    }
    for (case, ranks) in [
        ("elementwise_chain", 1),
        ("fp32_gemm", 1),
        ("gpu_ahead", 1),
        ("copy_bound", 1),
        ("ddp_straggler", 4),
        ("ddp_exposed", 4),
    ] {
        compare_cases(case, &format!("{case}.fixed"), ranks);
    }
    compare_cases("elementwise_chain", "fp32_gemm", 1);
    let _ = (Basis::PerStep, Verdict::Improved);
}

/// scripts/planted_steps.py on the same exports (SQL, no aisp code): the median GPU step period of each
/// side and the change with its 95 % bootstrap interval, % (BENCHMARKS.md, "Predicted vs measured").
const SQL: &[(&str, usize, f64, f64, f64)] = &[
    ("elementwise_chain", 1, -78.34, -78.36, -78.30),
    ("fp32_gemm", 1, -80.90, -80.97, -80.80),
    ("gpu_ahead", 1, -21.17, -22.60, -18.46),
    ("copy_bound", 1, -81.31, -81.76, -80.95),
    ("ddp_straggler", 4, -28.60, -29.57, -28.03),
    ("ddp_exposed", 4, -10.61, -11.39, -9.98),
];

/// The planted rule each pair's fix removes (the manifest's top planted problem, as the rules name it).
fn fixed_rule(case: &str) -> &'static str {
    match case {
        "elementwise_chain" | "gpu_ahead" => "elementwise_unfused",
        "fp32_gemm" => "fp32_gemm_on_cuda_cores",
        "copy_bound" => "exposed_copies",
        "ddp_straggler" => "cross_rank_straggler",
        "ddp_exposed" => "communication_not_overlapped",
        other => panic!("no pair {other}"),
    }
}

#[test]
fn every_planted_fix_improves_by_what_sql_measures_and_as_its_finding_predicted() {
    for &(case, ranks, sql, lo, hi) in SQL {
        let c = compare_cases(case, &format!("{case}.fixed"), ranks);
        assert_eq!(c.verdict, Verdict::Improved, "{case}: {}", c.summary);
        assert!(
            c.comparability.comparable,
            "{case}: {:?}",
            c.comparability.facts
        );
        // fp32_gemm has no step ranges: its steps are iterations of a kernel, a unit of identical work.
        let basis = if case == "fp32_gemm" {
            Basis::PerUnit
        } else {
            Basis::PerStep
        };
        assert_eq!(c.basis, basis, "{case}");
        let st = c.step.as_ref().unwrap();
        // Each measurement's change lies in the other's interval.
        assert!(
            lo <= st.change_pct && st.change_pct <= hi,
            "{case}: {} outside SQL [{lo}, {hi}]",
            st.change_pct
        );
        assert!(
            st.ci_low_pct <= sql && sql <= st.ci_high_pct,
            "{case}: SQL {sql} outside {st:?}"
        );
        assert!(st.ci_high_pct < 0.0);
        assert_eq!((c.before.world_size, c.after.world_size), (ranks, ranks));
        // Predicted vs measured: the fixed finding is gone or shrank, and its prediction holds within ±20 %.
        let p = c
            .predictions
            .iter()
            .find(|p| p.id == fixed_rule(case))
            .unwrap_or_else(|| {
                panic!(
                    "{case}: no prediction for {} in {:?}",
                    fixed_rule(case),
                    c.predictions
                )
            });
        assert!(
            p.applied && matches!(p.after.as_str(), "gone" | "shrank"),
            "{case}: {p:?}"
        );
        assert!(p.error_pct.abs() <= 20.0, "{case}: {p:?}");
        assert_eq!(p.measured_step_ns, c.after.step_median_ns, "{case}");
        assert!(
            c.findings
                .iter()
                .any(|f| f.id == p.id && f.status == p.after),
            "{case}"
        );
        // The verdict leads the summary, with the interval and the prediction.
        assert!(c.summary.starts_with("improved: "), "{}", c.summary);
        assert!(
            c.summary.contains("95% CI") && c.summary.contains(&format!("{} {}", p.id, p.after)),
            "{}",
            c.summary
        );
    }
}

#[test]
fn different_work_or_world_size_is_not_comparable() {
    // Two planted programs: 6 bf16 GEMMs and a 20-op chain per step vs an fp32 MLP with 11 GEMMs per step.
    let c = compare_cases("elementwise_chain", "fp32_gemm", 1);
    assert_eq!((c.verdict, c.basis), (Verdict::NotComparable, Basis::None));
    let w = c
        .comparability
        .facts
        .iter()
        .find(|f| f.fact == "work_per_step")
        .unwrap();
    assert_eq!((w.same, w.effect.as_str()), (Some(false), "blocks"));
    assert!(
        c.verdict_reason.contains("6 vs 11 GEMM kernels per step"),
        "{}",
        c.verdict_reason
    );
    assert!(c.step.is_none() && c.evidence.is_empty() && c.predictions.is_empty());
    // Two of the four ranks of the fixed straggler run against all four.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let full = run_path("ddp_straggler.fixed", 4);
    for r in 0..2 {
        std::fs::copy(
            full.join(format!("rank{r}.sqlite")),
            dir.path().join(format!("rank{r}.sqlite")),
        )
        .unwrap();
    }
    let c = compare::compare_paths(&run_path("ddp_straggler", 4), dir.path(), 10, 2, &|| false)
        .unwrap();
    assert_eq!(c.verdict, Verdict::NotComparable, "{}", c.summary);
    let ws = c
        .comparability
        .facts
        .iter()
        .find(|f| f.fact == "world_size")
        .unwrap();
    assert_eq!((ws.same, ws.effect.as_str()), (Some(false), "blocks"));
    assert!(
        c.verdict_reason.contains("different world sizes"),
        "{}",
        c.verdict_reason
    );
}

#[test]
fn windows_cut_from_a_two_gpu_run_are_compared_per_unit_of_identical_work() {
    // h100_2gpu_1s: 1 s of a 2×H100 job without step ranges, its session recorded as 295 s. Two 450 ms
    // windows of its GPU timeline, the second on other physical GPUs (other UUIDs), then the second run
    // 1.14× slower. A verdict per second of window would divide by the windows or the session; per unit it
    // is the repeating unit of kernels both windows hold.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = profile_common::fixture("h100_2gpu_1s.sqlite");
    let t0 = 155_360_295_935i64;
    let (b, a, s) = (
        dir.path().join("w1.sqlite"),
        dir.path().join("w2.sqlite"),
        dir.path().join("w2_slow.sqlite"),
    );
    gpu_window(&src, &b, t0, t0 + 450_000_000);
    gpu_window(&src, &a, t0 + 500_000_000, t0 + 950_000_000);
    let conn = crate::export_edit::open_for_edit(&a).unwrap();
    crate::export_edit::set_gpu_uuids(&conn, "0000").unwrap();
    drop(conn);
    crate::export_edit::scale(&a, &s, 1.14, None).unwrap();

    let c = compare::compare_paths(&b, &a, 10, 2, &|| false).unwrap();
    dump("window 1 → window 2", &c);
    assert_eq!(
        (c.verdict, c.basis),
        (Verdict::NoChange, Basis::PerUnit),
        "{}",
        c.summary
    );
    assert!(c.step.as_ref().unwrap().change_pct.abs() < 0.5);
    assert!(
        c.verdict_reason.contains("per unit of identical work"),
        "{}",
        c.verdict_reason
    );
    assert!(
        c.verdict_reason
            .contains("step time itself is not recorded"),
        "{}",
        c.verdict_reason
    );
    assert_eq!(c.comparability.work.shared_kernels_pct, 100.0);
    // Other physical GPUs are stated, next to the unrecorded model.
    let uuids = c
        .comparability
        .facts
        .iter()
        .find(|f| f.fact == "gpu_uuids")
        .unwrap();
    assert_eq!((uuids.same, uuids.effect.as_str()), (Some(false), "noted"));
    assert!(uuids.after.contains("(inferred)"));
    let model = c
        .comparability
        .facts
        .iter()
        .find(|f| f.fact == "gpu_model")
        .unwrap();
    assert_eq!(model.same, None);
    assert!(c.summary.contains("gpu uuids differs"), "{}", c.summary);

    let c = compare::compare_paths(&b, &s, 10, 2, &|| false).unwrap();
    dump("window 1 → window 2, 1.14× slower", &c);
    assert_eq!(
        (c.verdict, c.basis),
        (Verdict::Regressed, Basis::PerUnit),
        "{}",
        c.summary
    );
    let st = c.step.unwrap();
    assert!(
        st.ci_low_pct <= 14.0 && 14.0 <= st.ci_high_pct + 0.05,
        "{st:?}"
    );
    assert!((st.change_pct - 14.0).abs() < 0.2, "{st:?}");
}

#[test]
fn windows_of_one_run_and_the_same_capture_are_no_change() {
    // tests/data/README.md "Cut windows": two 220 ms windows of train_good; less work fits in the second
    // (the old verdict per second of window: −37.90 %, "inconclusive"). Per unit of identical work (no step
    // ranges) and per NVTX step: no change.
    let c = compare::compare(
        &profile_common::open("cut/train_good_steady.sqlite"),
        &profile_common::open("cut/train_good_warmup.sqlite"),
        5,
    )
    .unwrap();
    assert_eq!(
        (c.verdict, c.basis),
        (Verdict::NoChange, Basis::PerUnit),
        "{}",
        c.summary
    );
    assert_eq!(c.comparability.work.shared_kernels_pct, 100.0);
    let c = compare::compare(
        &profile_common::open("cut/train_good_steady_nvtx.sqlite"),
        &profile_common::open("cut/train_good_warmup_nvtx.sqlite"),
        5,
    )
    .unwrap();
    assert_eq!(
        (c.verdict, c.basis),
        (Verdict::NoChange, Basis::PerStep),
        "{}",
        c.summary
    );
    let st = c.step.unwrap();
    assert!(st.ci_low_pct < 0.0 && st.ci_high_pct > 0.0, "{st:?}");
    // tests/data/README.md, "Cut windows": the GPU step periods' medians 8,998,761 → 9,239,527.5 ns (SQL).
    assert_eq!(
        (st.before_median_ns, st.after_median_ns, st.change_pct),
        (8_998_761.0, 9_239_527.5, 2.68)
    );
    assert_eq!((st.ci_low_pct, st.ci_high_pct), (-4.78, 4.89));
    let c = compare::compare(
        &profile_common::open("ddp.sqlite"),
        &profile_common::open("ddp.sqlite"),
        3,
    )
    .unwrap();
    assert_eq!(c.verdict, Verdict::NoChange);
    assert_eq!(c.verdict_reason, "the same capture on both sides");
    assert_eq!(c.before.world_size, 2);
}

#[test]
fn a_real_fix_is_an_improvement_its_reverse_a_regression_and_other_gpus_or_models_not_comparable() {
    // workloads/pageable_copies.py vs healthy.py on one H100: the batch no longer copied from pageable memory.
    let broken = profile_common::open("workloads/pageable_copies.sqlite");
    let fixed = profile_common::open("workloads/healthy.sqlite");
    let c = compare::compare(&broken, &fixed, 5).unwrap();
    assert_eq!(
        (c.verdict, c.basis),
        (Verdict::Improved, Basis::PerStep),
        "{}",
        c.summary
    );
    assert!(
        c.findings
            .iter()
            .any(|f| f.id == "exposed_copies" && f.status == "gone")
    );
    assert_eq!(
        compare::compare(&fixed, &broken, 5).unwrap().verdict,
        Verdict::Regressed
    );
    // train_good (H200) vs healthy (H100): different GPU models.
    let c = compare::compare(&profile_common::open("train_good.sqlite"), &fixed, 3).unwrap();
    assert_eq!(c.verdict, Verdict::NotComparable);
    assert!(
        c.verdict_reason.starts_with("different GPU models"),
        "{}",
        c.verdict_reason
    );
    // host_sync.py (4 layers, batch 512) vs healthy.py (8 layers): the old verdict was "regressed" +43 %.
    let c = compare::compare(
        &profile_common::open("workloads/host_sync.sqlite"),
        &fixed,
        3,
    )
    .unwrap();
    assert_eq!(c.verdict, Verdict::NotComparable);
    assert!(
        c.verdict_reason.contains("11 vs 23 GEMM kernels per step"),
        "{}",
        c.verdict_reason
    );
}

/// A window of the GPU timeline cut from `src` into `dst`: the kernels, copies and memsets that run inside
/// [from, to) (h100_2gpu_1s's host runs up to 440 ms ahead of its GPUs, so a window of launch calls would hold
/// little GPU work), with `ANALYSIS_DETAILS` set to the window.
fn gpu_window(src: &Path, dst: &Path, from: i64, to: i64) {
    let conn = crate::export_edit::copy_for_edit(src, dst).unwrap();
    for t in [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    ] {
        conn.execute(
            &format!("DELETE FROM {t} WHERE start < ?1 OR \"end\" > ?2"),
            [from, to],
        )
        .unwrap();
    }
    conn.execute(
        "UPDATE ANALYSIS_DETAILS SET startTime = ?1, stopTime = ?2, duration = ?2 - ?1",
        [from, to],
    )
    .unwrap();
}

#[test]
fn findings_come_largest_predicted_saving_first_with_what_then_limits_the_step() {
    for name in [
        "planted/copy_bound.sqlite",
        "planted/gpu_ahead.sqlite",
        "train_good.sqlite",
        "ddp.sqlite",
    ] {
        let p = profile_common::open(name);
        let r = aisp_profile::rules::run(&p, &p.resolve(&aisp_profile::Scope::default()).unwrap())
            .unwrap();
        let savings: Vec<i64> = r
            .findings
            .iter()
            .map(aisp_profile::rules::predicted_saving_ns)
            .collect();
        assert!(
            savings.windows(2).all(|w| w[0] >= w[1]),
            "{name}: {savings:?}"
        );
        for f in r
            .findings
            .iter()
            .filter(|f| f.stake != aisp_profile::rules::Stake::None)
        {
            let (step, pred) = (f.step_ns.unwrap(), f.predicted_step_ns.unwrap());
            assert!(pred <= step, "{name} {}: {pred} > {step}", f.id);
            assert!(f.then_limited_by.is_some(), "{name} {}", f.id);
        }
        assert_eq!(
            r.highest,
            r.findings.iter().map(|f| f.severity).max().unwrap()
        );
    }
}

/// The summary's last sentence says where the after run's steady step goes: each group above 1 % and the largest
/// columns, the same figures the after run's own rules give in its ledger in short, and the median step compare
/// measured.
#[test]
fn the_summary_says_where_the_after_run_step_goes_as_its_ledger_does() {
    let c = compare_cases("copy_bound", "copy_bound.fixed", 1);
    let p = profile_common::open("planted/copy_bound.fixed.sqlite");
    let r =
        aisp_profile::rules::run(&p, &p.resolve(&aisp_profile::Scope::default()).unwrap()).unwrap();
    let s = &r.ledger[0];
    let split = c
        .summary
        .split(". After, the steady window is ")
        .nth(1)
        .unwrap_or_else(|| panic!("no split in {}", c.summary));
    for (group, pct) in &s.groups_pct {
        let said = format!("{group} {pct}%");
        assert_eq!(split.contains(&said), *pct >= 1.0, "{said} in {split}");
    }
    let (groups, _) = split.split_once("; largest columns: ").unwrap();
    assert!(groups.starts_with("compute "), "{groups}");
    let columns: Vec<String> = s
        .top_columns
        .iter()
        .map(|(c, v)| format!("{c} {v}%"))
        .collect();
    assert!(split.contains(&columns.join(", ")), "{split}");
    let median = c.after.step_median_ns as f64 / 1e6;
    // Then the kernels the step spends most in, the first as the after run's own step summary names it.
    assert!(
        split.contains(&format!(
            "(median step {median:.2} ms); led by `{}` ",
            s.top_kernels[0].name
        )),
        "{split}"
    );
    // What is left after: the first finding above info with the numbers it rests on, as the after run's rules give.
    let top = r
        .findings
        .iter()
        .find(|f| f.severity > aisp_profile::rules::Severity::Info)
        .expect("copy_bound.fixed keeps low findings");
    assert!(
        c.summary.contains(&format!(
            "After, still: {} {} {}%",
            top.id,
            top.severity.as_str(),
            top.share_pct
        )) && c.summary.contains(&format!("({})", top.gist)),
        "{}",
        c.summary
    );
}
