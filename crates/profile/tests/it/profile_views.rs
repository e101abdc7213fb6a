//! search, timeline, compare and export on real exports.

use crate::profile_common;

use aisp_profile::compare::{self, Verdict};
use aisp_profile::export::{self, Format};
use aisp_profile::search::{self, SearchKind};
use aisp_profile::summary::NameKey;
use aisp_profile::timeline::{self, TimelineOptions};
use aisp_profile::{Profile, ResolvedScope, Scope};
use profile_common::open;

fn all(p: &Profile) -> ResolvedScope {
    p.resolve(&Scope::default()).unwrap()
}

#[test]
fn search_finds_kernels_ranges_and_api_calls_with_bound_parameters() {
    let p = open("ddp.sqlite");
    let s = search::search(&p, &all(&p), "allreduce", &search::ALL_KINDS, 5).unwrap();
    assert_eq!(s.counts.get("kernel"), Some(&496));
    assert_eq!(s.counts.get("nvtx"), Some(&496));
    assert_eq!(s.names[0].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    assert_eq!(s.names[0].total_ns, 180_313_015);
    assert_eq!(s.matches.len(), 5);
    assert!(s.truncated);
    assert!(s.matches.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    // Globs, kinds and device filters.
    let s = search::search(&p, &all(&p), "step_1?", &[SearchKind::Nvtx], 100).unwrap();
    assert_eq!(
        s.counts.get("nvtx"),
        Some(&20),
        "step_10..step_19 on 2 ranks"
    );
    let d1 = p
        .resolve(&Scope {
            device: Some(1),
            ..Scope::default()
        })
        .unwrap();
    let s = search::search(&p, &d1, "nccl*AllReduce*", &[SearchKind::Kernel], 1).unwrap();
    assert_eq!(s.counts.get("kernel"), Some(&248));
    assert_eq!(s.matches[0].device, Some(1));
    let s = search::search(&p, &all(&p), "cudaStreamSynchronize", &[SearchKind::Api], 3).unwrap();
    assert_eq!(s.counts.get("api"), Some(&132));
    // Quotes and LIKE metacharacters are data, not SQL.
    let s = search::search(
        &p,
        &all(&p),
        "x'); DROP TABLE StringIds; --",
        &search::ALL_KINDS,
        3,
    )
    .unwrap();
    assert!(s.counts.is_empty());
    let s = search::search(&p, &all(&p), "100%", &search::ALL_KINDS, 3).unwrap();
    assert!(s.counts.is_empty());
    assert!(search::search(&p, &all(&p), " ", &search::ALL_KINDS, 3).is_err());
}

#[test]
fn timeline_shows_a_typical_step_compactly() {
    let p = open("train_good.sqlite");
    let t = timeline::timeline(&p, &all(&p), &TimelineOptions::default()).unwrap();
    assert!(t.window_source.contains("step_"), "{}", t.window_source);
    assert_eq!(
        t.window.length_ns, 9_080_906,
        "the median step after the first"
    );
    let g = &t.gpu[0];
    assert_eq!((g.device, g.stream), (0, 7));
    let merged: u32 = g.entries.iter().map(|e| e.count).sum();
    assert!(g.entries.len() <= 40);
    assert!(merged as u64 <= g.events);
    let main = t.cpu.iter().find(|c| c.tid == 883).unwrap();
    let names: Vec<&str> = main.ranges.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        &names[..5],
        ["step_8", "data", "forward", "backward", "optimizer"]
    );
    assert_eq!(main.ranges[1].depth, 1);
    assert!(
        main.api
            .iter()
            .any(|e| e.name == "kernel launches" && e.count > 10)
    );
    // An explicit window.
    let s = p
        .resolve(&Scope {
            start_ns: Some(7_851_067_345),
            end_ns: Some(7_852_000_000),
            ..Scope::default()
        })
        .unwrap();
    let t = timeline::timeline(
        &p,
        &s,
        &TimelineOptions {
            limit: 3,
            merge_gap_ns: 0,
        },
    )
    .unwrap();
    assert_eq!(t.window.length_ns, 932_655);
    assert!(t.cpu.iter().all(|c| c.ranges.len() <= 3));
}

#[test]
fn compare_is_neutral_on_the_same_capture_and_sees_real_differences() {
    let a = open("train_good.sqlite");
    let b = open("train_good.sqlite");
    let c = compare::compare(&a, &b, 5).unwrap();
    assert_eq!(c.verdict, Verdict::Neutral);
    assert_eq!(c.delta_pct, 0.0);
    assert_eq!(c.before_value_ns, 9_080_906.0);
    assert_eq!(c.comparability.level, "high");
    assert!(c.kernel_regressions.is_empty() && c.kernel_improvements.is_empty());
    assert!(c.noise_pct > 0.0 && c.threshold_pct >= 2.0);
    // The GPU side of the steps (fixtures README: median GPU-projected union, steps ≥ 1).
    let g = c
        .evidence
        .iter()
        .find(|e| e.basis == "per_step_gpu")
        .unwrap();
    assert_eq!(
        (g.before, g.after, g.says),
        (798_909.0, 798_909.0, Verdict::Neutral)
    );

    // Different workloads on the same GPU model (the old verdict: "improved" at comparability
    // 0.25, from total kernel time 53.9 → 32.1 ms): not comparable, no basis.
    let h = open("h200_matmul_small.sqlite");
    let c = compare::compare(&h, &a, 3).unwrap();
    assert_eq!(c.comparability.level, "low");
    assert_eq!(c.verdict, Verdict::NotComparable);
    assert_eq!(c.basis, "none");
    assert!(
        c.verdict_reason.starts_with("different workloads"),
        "{}",
        c.verdict_reason
    );
    assert_eq!(c.comparability.identical_launch_calls_pct, 0.0);
    assert_eq!(
        (c.before.kernel_time_ns, c.after.kernel_time_ns),
        (53_909_072, 32_075_674)
    );
    assert_eq!(
        c.kernel_improvements[0].delta_ns, -53_242_485,
        "the fp32 GEMM is gone"
    );
    assert!(
        c.findings_resolved
            .contains(&"fp32_gemm_on_cuda_cores".to_string())
    );
    assert!(c.findings_new.contains(&"host_os_wait".to_string()));

    // A multi-rank capture against itself.
    let d = open("ddp.sqlite");
    let c = compare::compare(&d, &d, 3).unwrap();
    assert_eq!(c.verdict, Verdict::Neutral);
    assert_eq!(
        c.before.step_median_ns,
        Some(8_666_402.0),
        "the slower rank (pid 640) stands for the run"
    );
    let dev1 = c.devices.iter().find(|x| x.device == 1).unwrap();
    assert_eq!(
        (
            dev1.window.as_str(),
            dev1.busy_pct_before,
            dev1.overlap_pct_before
        ),
        ("steady", Some(97.97), Some(52.63))
    );
}

#[test]
fn exports_write_valid_perfetto_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let p = open("train_good.sqlite");
    let s = all(&p);
    let out = dir.path().join("t.json");
    let e = export::export(&p, &s, Format::Perfetto, &out, None, NameKey::Short, false).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    assert_eq!(ev.len() as u64, e.records);
    let kernels = ev.iter().filter(|x| x["cat"] == "kernel").count();
    assert_eq!(kernels, 3689);
    assert_eq!(
        ev.iter().filter(|x| x["ph"] == "s").count(),
        3689,
        "one flow per launched kernel"
    );
    assert!(
        ev.iter()
            .any(|x| x["ph"] == "M" && x["args"]["name"] == "GPU 0: NVIDIA H200")
    );
    assert!(
        ev.iter()
            .any(|x| x["ph"] == "M" && x["args"]["name"] == "pt_autograd_0")
    );
    assert!(
        ev.iter()
            .filter(|x| x["ph"] == "X")
            .all(|x| x["ts"].as_f64().unwrap() >= 0.0 && x["dur"].as_f64().unwrap() >= 0.0)
    );
    let step = ev
        .iter()
        .find(|x| x["cat"] == "nvtx" && x["name"] == "step_8")
        .unwrap();
    assert_eq!(step["dur"].as_f64().unwrap(), 9080.906);
    // Refuses to overwrite by default.
    assert!(export::export(&p, &s, Format::Perfetto, &out, None, NameKey::Short, false).is_err());

    let csv_path = dir.path().join("k.csv");
    let e = export::export(
        &p,
        &s,
        Format::Csv,
        &csv_path,
        Some("cuda_gpu_kern_sum"),
        NameKey::Short,
        false,
    )
    .unwrap();
    assert_eq!(e.records, 9);
    let text = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = text.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("time_pct,total_ns,instances")
    );
    assert!(lines.next().unwrap().starts_with("32.9,10537055,120,"));
    let trace = dir.path().join("trace.csv");
    let e = export::export(
        &p,
        &s,
        Format::Csv,
        &trace,
        Some("kernels"),
        NameKey::Short,
        false,
    )
    .unwrap();
    assert_eq!(e.records, 3689);
    assert!(
        export::export(
            &p,
            &s,
            Format::Csv,
            &dir.path().join("x.csv"),
            Some("nope"),
            NameKey::Short,
            false
        )
        .is_err()
    );
}

/// Calls and Σ ns of one identical launch.
type CallsTime = (f64, f64);

/// Kernels of an export grouped by identical launch (demangled name text, grid, block):
/// (calls, Σ ns), read with plain SQL.
fn launches(path: &std::path::Path) -> std::collections::HashMap<String, CallsTime> {
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let mut st = c
        .prepare(
            "SELECT s.value || '|' || gridX || ',' || gridY || ',' || gridZ || '|' || blockX || ',' || blockY || ',' || blockZ,
                    COUNT(*), SUM(\"end\" - start)
             FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY 1",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            (r.get::<_, i64>(1)? as f64, r.get::<_, i64>(2)? as f64),
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn evidence<'a>(c: &'a compare::Compare, basis: &str) -> &'a compare::Evidence {
    c.evidence
        .iter()
        .find(|e| e.basis == basis)
        .unwrap_or_else(|| panic!("no {basis} evidence in {:?}", c.evidence))
}

#[test]
fn windows_cut_from_one_run_are_not_an_improvement() {
    // Two 220 ms windows of train_good without NVTX (tests/data/README.md, "Cut windows"):
    // same run, less work fits in the second. Total kernel time falls 37.36 %, which the
    // old verdict called "improved" at high comparability.
    let steady = profile_common::fixture("cut/train_good_steady.sqlite");
    let warmup = profile_common::fixture("cut/train_good_warmup.sqlite");
    let b = aisp_profile::open(&steady).unwrap();
    let a = aisp_profile::open(&warmup).unwrap();
    let c = compare::compare(&b, &a, 5).unwrap();
    assert_eq!(
        (c.before.kernel_time_ns, c.after.kernel_time_ns),
        (19_177_039, 12_012_566)
    );
    assert_eq!(
        (c.before.window_ns, c.after.window_ns),
        (220_000_000, 220_000_000)
    );
    assert_eq!(c.before.window_source, "ANALYSIS_DETAILS");
    assert_ne!(c.verdict, Verdict::Improved);
    assert_eq!(c.verdict, Verdict::Inconclusive, "{}", c.verdict_reason);
    assert!(
        c.verdict_reason.contains("cuts of different work"),
        "{}",
        c.verdict_reason
    );

    // Per call, over identical launches, at the before side's mix (SQL over both files).
    let (lb, la) = (launches(&steady), launches(&warmup));
    let shared: Vec<(&CallsTime, &CallsTime)> = lb
        .iter()
        .filter_map(|(k, x)| la.get(k).map(|y| (x, y)))
        .collect();
    let den: f64 = shared.iter().map(|(x, _)| x.1).sum();
    let num: f64 = shared.iter().map(|(x, y)| x.0 * y.1 / y.0).sum();
    let work_a: f64 = shared.iter().map(|(x, y)| y.0 * x.1 / x.0).sum();
    assert_eq!((den, num.round()), (19_177_039.0, 19_202_128.0));
    let pc = evidence(&c, "per_call");
    assert_eq!(
        (pc.before, pc.after, pc.delta_pct),
        (den, num.round(), 0.13)
    );
    assert_eq!(pc.says, Verdict::Neutral, "the kernels are equally fast");
    let ps = evidence(&c, "per_second_of_window");
    assert_eq!(
        (ps.before, ps.after),
        ((den / 0.22).round(), (work_a / 0.22).round())
    );
    assert_eq!((ps.after, ps.delta_pct), (54_133_745.0, -37.9));
    assert_eq!(
        ps.says,
        Verdict::Regressed,
        "less work per second of window"
    );
    assert_eq!(c.comparability.identical_launch_calls_pct, 97.7);
    // Per-kernel deltas carry time per call beside the totals.
    let k = &c.kernel_improvements[0];
    assert_eq!(k.name, "multi_tensor_apply_kernel");
    assert!(k.per_call_delta_pct.unwrap().abs() < 1.0, "{k:?}");

    // The same cuts with their NVTX steps: the per-step basis decides, and the same run
    // stays neutral (medians after the first step 8,989,407.5 → 9,223,207 ns, +2.60 %).
    let b = open("cut/train_good_steady_nvtx.sqlite");
    let a = open("cut/train_good_warmup_nvtx.sqlite");
    let c = compare::compare(&b, &a, 5).unwrap();
    assert_eq!(
        (c.verdict, c.basis.as_str()),
        (Verdict::Neutral, "per_step")
    );
    let st = evidence(&c, "per_step");
    assert_eq!(
        (st.before, st.after, st.delta_pct),
        (8_989_407.5, 9_223_207.0, 2.6)
    );
}

#[test]
fn a_real_fix_is_an_improvement_and_its_reverse_a_regression() {
    // workloads/pageable_copies.py vs healthy.py: the same model and kernels, the batch no
    // longer copied from pageable memory every step.
    let broken = open("workloads/pageable_copies.sqlite");
    let fixed = open("workloads/healthy.sqlite");
    let c = compare::compare(&broken, &fixed, 5).unwrap();
    assert_eq!(c.verdict, Verdict::Improved, "{}", c.verdict_reason);
    assert_eq!(c.basis, "per_step");
    assert_eq!(c.comparability.same_gpus, Some(true));
    assert!(c.comparability.identical_launch_calls_pct >= 99.0);
    let st = evidence(&c, "per_step");
    assert_eq!(
        (st.before, st.after, st.delta_pct),
        (10_607_083.0, 4_714_612.0, -55.55)
    );
    // Kernels are as fast as before: the step got shorter, not the kernels.
    assert_eq!(evidence(&c, "per_call").says, Verdict::Neutral);
    let c = compare::compare(&fixed, &broken, 5).unwrap();
    assert_eq!(c.verdict, Verdict::Regressed, "{}", c.verdict_reason);
}

#[test]
fn gpus_are_never_claimed_the_same_when_unknown_and_different_gpus_are_not_comparable() {
    // h100_2gpu_1s records no TARGET_INFO_GPU. Against a copy of itself (another capture as
    // far as compare knows) the old reasons said "same GPUs, schema, device count and kernels".
    let p = open("h100_2gpu_1s.sqlite");
    let copy = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("h100_copy.sqlite");
    std::fs::copy(profile_common::fixture("h100_2gpu_1s.sqlite"), &copy).unwrap();
    let q = aisp_profile::open(&copy).unwrap();
    let c = compare::compare(&p, &q, 3).unwrap();
    assert_eq!(c.verdict, Verdict::Neutral, "{}", c.verdict_reason);
    assert_eq!(c.comparability.same_gpus, None);
    assert!(
        c.comparability
            .reasons
            .iter()
            .any(|r| r.contains("not verified")),
        "{:?}",
        c.comparability.reasons
    );
    assert!(!c.summary.contains("same GPUs"));
    assert!(
        c.comparability
            .reasons
            .iter()
            .all(|r| !r.contains("same GPUs"))
    );
    // train_good (H200) vs the healthy workload (H100): the old verdict was "improved"
    // (step time 9.08 → 4.71 ms).
    let h200 = open("train_good.sqlite");
    let h100 = open("workloads/healthy.sqlite");
    let c = compare::compare(&h200, &h100, 3).unwrap();
    assert_eq!(c.comparability.same_gpus, Some(false));
    assert_eq!(c.verdict, Verdict::NotComparable);
    assert!(
        c.verdict_reason.starts_with("different GPUs"),
        "{}",
        c.verdict_reason
    );
}

#[test]
fn a_different_amount_of_work_per_step_is_inconclusive() {
    // host_sync.py (4 layers, batch 512) vs healthy.py (8 layers, batch 2048): step time
    // +43 %, but only 46 % of calls are identical launches. The old verdict: "regressed".
    let c = compare::compare(
        &open("workloads/host_sync.sqlite"),
        &open("workloads/healthy.sqlite"),
        3,
    )
    .unwrap();
    assert_eq!(c.verdict, Verdict::Inconclusive, "{}", c.verdict_reason);
    assert!(c.comparability.identical_launch_calls_pct < 80.0);
    assert!(
        c.verdict_reason.contains("work per step differs"),
        "{}",
        c.verdict_reason
    );
}
