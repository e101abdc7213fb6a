//! `rules` on the shared fixtures: the planted or known problems are found with
//! the right severity, and a healthy profile stays quiet.

use crate::profile_common;

use aisp_profile::Scope;
use aisp_profile::WindowKind;
use aisp_profile::rules::{self, Finding, Severity, printed_numbers};
use profile_common::{close, open};

fn find<'a>(f: &'a [Finding], id: &str) -> Option<&'a Finding> {
    f.iter().find(|x| x.id == id)
}

#[test]
fn train_good_sleeps_on_the_host_every_step_and_copies_nothing_that_matters() {
    // The loop sleeps 5 ms per step in its `data` range (time.sleep: clock_nanosleep), with the GPU idle.
    let p = open("train_good.sqlite");
    let r = rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
    assert_eq!(r.windows[0].window.kind, WindowKind::Steady);
    // The steady window on the GPU timeline, as scripts/ledger_sql.py computes it from the tables alone.
    assert_eq!(
        (r.windows[0].window.start_ns, r.windows[0].window.end_ns),
        (7_789_729_648, 8_142_734_358)
    );
    let w = find(&r.findings, "host_os_wait").expect("the sleep");
    assert_eq!(w.severity, Severity::Critical, "{w:?}");
    assert_eq!(w.stake, rules::Stake::GpuIdle);
    assert_eq!(w.regions[0].region, "data", "{:?}", w.regions);
    // sqlite3: SELECT count(*), sum(min(end, 8142734358) - max(start, 7789729648)) FROM OSRT_API o JOIN StringIds s
    // ON s.id = o.nameId WHERE s.value LIKE '%sleep%' AND end > 7789729648 AND start < 8142734358 → 38, 193122664:
    // the device idles for all of each sleep but the first ~0.1 ms, while it finishes the work queued before it.
    assert_eq!(w.data["stretches"], 38);
    let idle = w.time_at_stake_ns;
    assert!(
        idle <= 193_122_664 && idle * 100 >= 193_122_664 * 97,
        "{idle}"
    );
    // The rest of the idle is the host issuing 91 kernels per step: launch-bound, its own column.
    let lb = find(&r.findings, "launch_bound_tiny_kernels").expect("launch-bound");
    assert_eq!(lb.severity, Severity::High, "{lb:?}");
    assert_eq!(lb.data["kernels_per_step"], 91);
    // Each fix predicts the step it leaves: the steady median (9.10 ms) minus that cause's idle per step.
    assert_eq!(w.step_ns, Some(9_095_208));
    assert!(w.predicted_step_ns.unwrap() < lb.predicted_step_ns.unwrap());
    assert_eq!(r.highest, Severity::Critical);
    // Its pinned input copies take 0.87 % of the steady window: no finding; no fp32 GEMM in a bf16 loop.
    for id in ["exposed_copies", "fp32_gemm_on_cuda_cores"] {
        assert!(find(&r.findings, id).is_none(), "{id}");
        assert!(
            r.checked
                .iter()
                .any(|c| c.id == id && c.status == "below_threshold"),
            "{id}: {:?}",
            r.checked
        );
    }
    // Uneven steps follow the sleep: said once, by the sleep's finding (variance is info and names it).
    if let Some(v) = find(&r.findings, "step_time_variance") {
        assert_eq!(v.severity, Severity::Info);
        assert_eq!(v.data["owner"], "host_os_wait");
    }
}

#[test]
fn h200_matmul_small_flags_fp32_simt_gemm_and_the_pageable_copy() {
    // One NVTX `step` only: the whole span is one period.
    let p = open("h200_matmul_small.sqlite");
    let f = rules::evaluate(&p, &Scope::default()).unwrap();
    let g = find(&f, "fp32_gemm_on_cuda_cores").expect("fp32 SIMT GEMM");
    // sqlite3: 20 kernels named *ffma*, 53242485 ns.
    assert_eq!(g.data["kernels"], 20);
    assert_eq!(g.data["time_ns"], 53_242_485);
    // H200 datasheet: FP32 67, TF32 494.5 TFLOP/s → the GEMMs would take 13.5 % of their time.
    assert_eq!(g.data["peaks"]["gpu"], "NVIDIA H200 SXM 141GB");
    assert_eq!(
        g.time_at_stake_ns,
        (53_242_485.0 * (1.0 - 67.0 / 494.5)) as i64
    );
    assert!(g.severity >= Severity::High, "{g:?}");
    assert!(g.fix.contains("allow_tf32"));
    // The result copied back into pageable memory: 67108864 bytes in 41.64 ms (sqlite3), plus its staging.
    let c = find(&f, "exposed_copies").expect("pageable copy");
    assert_eq!(
        (
            c.data["copies"].as_u64(),
            c.data["pageable_copies"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(c.data["bytes"], 67_108_864);
    let e = c.data["exposed_ns"].as_i64().unwrap();
    assert!((41_643_358..41_643_358 + 10_000).contains(&e), "{e}");
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
fn ddp_splits_its_collectives_into_transfer_and_waiting_and_h100_is_copy_bound() {
    // Both ranks of the DDP run are in one export (one clock): their collectives are matched by occurrence and
    // each kernel's time split at the last arrival (the shortest kernel of the instance).
    let p = open("ddp.sqlite");
    let r = rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
    let c0 = on_device(&r, "communication_not_overlapped", 0).expect("device 0");
    let c1 = on_device(&r, "communication_not_overlapped", 1).expect("device 1");
    // scripts/ledger_sql.py: exposed collective time (NCCL minus compute) 31565309 and 47845564 ns.
    assert_eq!(c0.data["exposed_all_ns"], 31_565_309);
    assert_eq!(c1.data["exposed_all_ns"], 47_845_564);
    assert_eq!(c1.data["split"], true);
    // Device 0 arrives last at almost every steady all-reduce (it is host-bound): device 1 waits for it.
    let w = on_device(&r, "collective_wait", 1).expect("device 1 waits");
    assert_eq!(w.severity, Severity::Medium, "{w:?}");
    assert!(on_device(&r, "collective_wait", 0).is_none());
    assert!(
        w.evidence.iter().any(|e| e.contains("device 0")),
        "{:?}",
        w.evidence
    );
    assert_eq!(
        c1.data["wait_ns"].as_i64().unwrap() + c1.data["exposed_ns"].as_i64().unwrap(),
        47_845_564
    );

    // h100_2gpu_1s: no NVTX steps; iterations by kernel pattern; pinned H2D copies fill 93.5 % of each period.
    let p = open("h100_2gpu_1s.sqlite");
    let r = rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
    assert_eq!(r.findings[0].id, "exposed_copies");
    for dev in [0, 1] {
        let c = on_device(&r, "exposed_copies", dev).unwrap();
        assert_eq!(c.data["pageable_copies"], 0);
        assert!(c.data["exposed_pct"].as_f64().unwrap() > 93.0, "{c:?}");
        // They are pinned already and outlast everything else in the step even at pinned bandwidth: no overlap
        // hides them, the step is bound by the bytes it moves, and fewer bytes (the data kept on the device) is the
        // fix: their whole exposed time is at stake (it was medium when only the overlap what-if was read).
        assert_eq!(c.severity, Severity::Critical, "{c:?}");
        assert_eq!(c.data["bytes_bound_steps"], c.data["steps"], "{c:?}");
        assert!(
            c.fix.starts_with("The copies outlast the rest of the step"),
            "{c:?}"
        );
    }
    assert!(
        r.ledger
            .iter()
            .all(|l| l.steps_from == aisp_profile::ledger::StepSource::KernelPattern)
    );
    // PyTorch emit_nvtx op names are not iterations, and three equal periods do not vary.
    assert!(find(&r.findings, "step_time_variance").is_none());
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

// ---------------------------------------------------------------------------------------------
// The findings contract (ARCHITECTURE.md): GPU time at stake per device, every device, overlaps
// stated, every printed number taken from the finding's data.

/// The findings of a planted 4-rank set (`tests/data/planted/<case>/rank<N>.sqlite.xz`).
fn set_findings(case: &str) -> Vec<Finding> {
    use aisp_profile::ranks;
    let files: Vec<std::path::PathBuf> = (0..4)
        .map(|r| profile_common::fixture(&format!("planted/{case}/rank{r}.sqlite")))
        .collect();
    let never = || false;
    let (mut d, skipped) = ranks::digest::digest_files(&files, 2, &never, &|_| {}).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    let names = files.iter().map(|f| f.display().to_string()).collect();
    let set = ranks::merge(&mut d, names, Vec::new()).unwrap();
    ranks::set_findings(&set, &d)
}

/// The numbers a finding prints, checked against its data (problems appended); its severity follows its share,
/// it states a basis, and nothing at stake is 0 ns. Returns how many numbers were checked.
fn check_numbers(label: &str, f: &Finding, problems: &mut Vec<String>) -> usize {
    problems.extend(
        number_problems(f)
            .into_iter()
            .map(|p| format!("{label} {p}")),
    );
    assert_eq!(
        f.severity,
        Severity::from_share(f.share_pct),
        "{label} {}",
        f.id
    );
    assert!(!f.basis.is_empty(), "{label} {}", f.id);
    if f.stake == rules::Stake::None {
        assert_eq!(f.time_at_stake_ns, 0, "{label} {}", f.id);
    }
    // The line a default answer keeps of the evidence: every finding has one, a short one.
    assert!(
        !f.gist.is_empty() && f.gist.chars().count() <= 300,
        "{label} {}: gist {:?}",
        f.id,
        f.gist
    );
    printed_numbers(&f.title).len()
        + printed_numbers(&f.gist).len()
        + f.evidence
            .iter()
            .map(|e| printed_numbers(e).len())
            .sum::<usize>()
}

fn run_all(name: &str) -> rules::Rules {
    let p = open(name);
    rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap()
}

fn on_device<'a>(r: &'a rules::Rules, id: &str, device: i64) -> Option<&'a Finding> {
    r.findings
        .iter()
        .find(|f| f.id == id && f.device == Some(device))
}

#[test]
fn blocking_the_host_while_the_gpu_works_is_not_at_stake() {
    // h100_2gpu_1s: 428.49 ms in cudaStreamSynchronize while the GPU copies: no device idle comes of it.
    let r = run_all("h100_2gpu_1s.sqlite");
    for dev in [0, 1] {
        assert!(
            on_device(&r, "cuda_api_sync", dev).is_none(),
            "{:?}",
            r.findings
        );
    }
    assert!(
        r.checked
            .iter()
            .any(|c| c.id == "cuda_api_sync" && c.status == "below_threshold"),
        "{:?}",
        r.checked
    );
    // Our decode loop under CUDA graphs: the host blocks 77.6 ms in two syncs waiting for the graph replays
    // (GPU busy); the idle around them is 0.24 % of the steady window: below a finding.
    let r = run_all("workloads/decode_fixed.sqlite");
    assert!(
        find(&r.findings, "cuda_api_sync").is_none(),
        "{:?}",
        r.findings
    );
}

#[test]
fn every_device_gets_its_own_finding() {
    let r = run_all("ddp.sqlite");
    for dev in [0, 1] {
        let c = on_device(&r, "communication_not_overlapped", dev).expect("every device");
        assert_eq!(c.stake, rules::Stake::Estimate);
        assert!(c.share_pct >= 15.0, "{c:?}");
        assert!(c.basis.contains("transfer"), "{}", c.basis);
    }
    // One overlap summary per device, one ledger summary per device.
    assert_eq!(r.overlaps.len(), 2);
    assert_eq!(r.ledger.len(), 2);
}

#[test]
fn idle_findings_claim_exclusive_columns_and_their_shares_add_up() {
    // train_good: the sleep, the launch overhead and the input waits are different ledger columns: their
    // measured idle adds up to no more than the window, and the overlap note says they are additive.
    let r = run_all("train_good.sqlite");
    let o = &r.overlaps[0];
    let sum: f64 = r.findings.iter().map(|f| f.share_pct).sum();
    assert!(close(o.sum_share_pct, sum, 0.02), "{o:?}");
    let measured: i64 = r
        .findings
        .iter()
        .filter(|f| f.stake == rules::Stake::GpuIdle)
        .map(|f| f.time_at_stake_ns)
        .sum();
    assert_eq!(measured, o.idle_union_ns);
    assert!(o.idle_union_ns <= r.windows[0].window.length_ns);
    assert!(o.note.contains("add up"), "{}", o.note);
    // No two findings read one column.
    let mut cols: Vec<&String> = r.findings.iter().flat_map(|f| f.columns.iter()).collect();
    let n = cols.len();
    cols.sort();
    cols.dedup();
    assert_eq!(cols.len(), n, "{cols:?}");
}

#[test]
fn launch_overhead_is_host_time_between_launches_not_long_host_work() {
    // mock.sqlite: the 18.25 ms gap before the reduction is its first launch loading its module (the launch
    // call runs 17.8 ms while the GPU idles): module loading, not per-operation launch overhead.
    let r = run_all("mock.sqlite");
    assert!(
        find(&r.findings, "launch_bound_tiny_kernels").is_none(),
        "{:?}",
        r.findings
    );
    let m = find(&r.findings, "module_loading").expect("lazy loading inside the launch");
    assert!(m.time_at_stake_ns > 17_000_000, "{m:?}");
    // infer_decode: thousands of tiny kernels, each launched as the GPU runs dry: launch-bound, critical.
    let r = run_all("infer_decode.sqlite");
    let lb = find(&r.findings, "launch_bound_tiny_kernels").expect("launch-bound");
    assert_eq!(lb.severity, Severity::Critical);
    // Every piece of that idle is under 1 ms (longer host stretches are gpu_starvation's).
    let p = open("infer_decode.sqlite");
    let l = aisp_profile::ledger::build(&p, &p.resolve(&Scope::default()).unwrap(), None).unwrap();
    let d = &l.devices[0];
    let pieces: Vec<_> = d
        .idle
        .iter()
        .filter(|x| x.column == aisp_profile::ledger::Column::IdleLaunchOverhead)
        .collect();
    assert!(!pieces.is_empty());
    assert!(pieces.iter().all(|x| x.end - x.start < 1_000_000));
    assert_eq!(
        pieces.iter().map(|x| x.end - x.start).sum::<i64>(),
        lb.time_at_stake_ns
    );
}

#[test]
fn copies_per_step_follow_the_detected_iterations() {
    // h100_2gpu_1s has no NVTX steps: the ledger's steps are the iterations of its one-per-iteration GEMM
    // (`..._tn_n_tilesize32x32x8...`, 24 launches per device spanning the trace: 23 iterations, 1 warm-up).
    // sqlite3 over the steady window (its 2nd to its last launch, 22 iterations): SELECT COUNT(*), SUM(bytes)
    // FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE deviceId = D AND copyKind IN (1, 2) AND start >= A AND start < B
    // → 176 H2D copies, 16979443712 bytes → 771 MB per step, on either device.
    let r = run_all("h100_2gpu_1s.sqlite");
    for dev in [0, 1] {
        let h = on_device(&r, "exposed_copies", dev).unwrap();
        assert_eq!(h.data["copies"], 176);
        assert_eq!(h.data["bytes"], 16_979_443_712_i64);
        assert_eq!(h.data["mb_per_step"], 771);
        assert_eq!(h.stake, rules::Stake::Estimate);
        assert!(h.title.contains("771 MB per step"), "{}", h.title);
    }
}

fn collect_numbers(v: &serde_json::Value, nums: &mut Vec<f64>, strings: &mut Vec<String>) {
    match v {
        serde_json::Value::Number(n) => nums.extend(n.as_f64()),
        serde_json::Value::String(s) => strings.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_numbers(x, nums, strings)),
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                strings.push(k.clone());
                collect_numbers(x, nums, strings);
            }
        }
        _ => {}
    }
}

/// The thresholds and fixed facts the rules print (documented in ARCHITECTURE.md).
const CONSTANTS: [f64; 10] = [1.0, 4.0, 5.0, 7.0, 8.0, 10.0, 20.0, 50.0, 80.0, 100.0];

fn number_problems(f: &Finding) -> Vec<String> {
    let mut nums = vec![
        f.time_at_stake_ns as f64,
        f.share_pct,
        f.device.unwrap_or(0) as f64,
    ];
    nums.extend(f.step_ns.map(|v| v as f64));
    nums.extend(f.predicted_step_ns.map(|v| v as f64));
    if let Some(w) = f.window {
        nums.extend([w.length_ns as f64, w.start_ns as f64, w.end_ns as f64]);
    }
    let mut strings = Vec::new();
    collect_numbers(&f.data, &mut nums, &mut strings);
    for r in &f.regions {
        nums.extend([r.at_stake_ns as f64, r.pct_of_finding, r.events as f64]);
        strings.push(r.region.clone());
    }
    let mut out = Vec::new();
    let texts = [&f.title, &f.gist].into_iter().chain(f.evidence.iter());
    for t in texts {
        for (x, d, tok) in printed_numbers(t) {
            let scale = 10f64.powi(d as i32);
            let matches = |v: f64| (((v * scale).round() / scale) - x).abs() < 1e-9;
            let ok = CONSTANTS.contains(&x)
                || nums
                    .iter()
                    .any(|&v| matches(v) || matches(v / 1e6) || matches(v / 1e3))
                || strings.iter().any(|s| s.contains(&tok));
            if !ok {
                out.push(format!("{}: `{tok}` in \"{t}\" is not in its data", f.id));
            }
        }
    }
    out
}

#[test]
fn every_number_a_finding_prints_comes_from_its_data() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for name in [
        "train_good.sqlite",
        "h200_matmul_small.sqlite",
        "ddp.sqlite",
        "mock.sqlite",
        "infer_decode.sqlite",
        "h100_2gpu_1s.sqlite",
        "healthy_1pct.sqlite",
        "workloads/decode_loop.sqlite",
        "workloads/decode_fixed.sqlite",
        "workloads/train_adam_storm.sqlite",
        "workloads/train_fixed.sqlite",
        "workloads/tiny_kernels.sqlite",
        "workloads/host_sync.sqlite",
        "planted/elementwise_chain.sqlite",
        "planted/fp32_gemm.sqlite",
        "planted/gpu_ahead.sqlite",
        "planted/copy_bound.sqlite",
        "capture/dataloader_bound.nsys.sqlite",
        // data_cast_every_step: a float32 key/value cache cast to bf16 every token.
        "planted/heldout14/serve_decode.sqlite",
        // gemm_misaligned (an LM head over 50257 rows) and attention_materialized (need_weights=True).
        "planted/heldout14/gpt_pretrain.sqlite",
        "planted/heldout14/speech_ssl.sqlite",
    ] {
        for f in &run_all(name).findings {
            checked += check_numbers(name, f, &mut problems);
        }
    }
    // Sets of ranks: the straggler and the shared findings are read from the ranks' ledgers.
    for case in ["ddp_straggler", "ddp_exposed", "ddp_balanced"] {
        for f in &set_findings(case) {
            checked += check_numbers(&format!("planted/{case}"), f, &mut problems);
        }
    }
    assert!(checked > 500, "only {checked} numbers checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The checker itself: a number absent from the data is caught.
    let mut f = run_all("mock.sqlite").findings.remove(0);
    f.evidence
        .push("4.21 ms of idle time is in gaps shorter than 1 ms".into());
    assert_eq!(number_problems(&f).len(), 1, "{:?}", number_problems(&f));
    // And in the gist.
    let mut f = run_all("mock.sqlite").findings.remove(0);
    f.gist.push_str("; 4.21 ms per step elsewhere");
    assert_eq!(number_problems(&f).len(), 1, "{:?}", number_problems(&f));
}

/// A finding whose stake lies mostly in one NVTX range names it in its title (which no answer leaves out): train_good's
/// host waits are all inside `data`, the loader. A range numbered per iteration (`step_*`) encloses whole steps and
/// is never named, however much of a stake it holds (ddp's are 82.5 % inside `step_*`).
#[test]
fn a_title_names_the_nvtx_range_holding_most_of_the_stake() {
    let r = run_all("train_good.sqlite");
    let f = on_device(&r, "host_os_wait", 0).expect("train_good waits on the host");
    assert!(
        f.title.ends_with("(100% of it in NVTX `data`)"),
        "{}",
        f.title
    );
    assert_eq!(f.regions[0].region, "data");
    assert_eq!(f.regions[0].pct_of_finding, 100.0);
    for f in &run_all("ddp.sqlite").findings {
        assert!(!f.title.contains("NVTX `step_*`"), "{}", f.title);
    }
}
