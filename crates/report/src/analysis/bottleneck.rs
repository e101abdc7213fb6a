//! What bounds a workload, read from the step ledger: each device's steady
//! window (its steps after warm-up, on the GPU timeline; the whole span when
//! there are no steps) splits exactly into the ledger's columns, grouped here
//! into host idle (idle the host caused), idle with work queued, copy, compute
//! (GEMMs, attention), memory (elementwise, reductions, optimizer and copy
//! kernels), communication (collective transfer and waiting) and other
//! kernels. The largest group names the bottleneck: host idle → host-bound,
//! refined by its largest cause (launch-bound, sync-bound, input-bound);
//! copy → copy-bound; otherwise compute-, memory- or communication-bound. The
//! rules read the same ledger, so their findings are the evidence of why and
//! the two cannot disagree.

use schemars::JsonSchema;
use serde::Serialize;

use aisp_planner::round;
use aisp_profile::ledger::{self, Column, DeviceLedger};
use aisp_profile::rules::{self, Finding};
use aisp_profile::{Profile, Result, Scope, Window};

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Share {
    /// host_idle (idle the host caused), queued_idle (idle with work queued), copy (exposed copies), compute,
    /// memory, communication or other.
    pub category: String,
    pub time_ns: i64,
    /// Of the steady window, 0–100.
    pub pct: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeviceBottleneck {
    pub device: i64,
    pub gpu: Option<String>,
    pub window: Window,
    /// Why this window (the step ledger's steady window).
    pub window_reason: String,
    /// host-bound, launch-bound, sync-bound, input-bound, copy-bound, compute-bound, memory-bound,
    /// communication-bound (from the ledger's exclusive partition).
    pub classification: String,
    pub shares: Vec<Share>,
    /// The ledger column that holds most of the window.
    pub largest_column: Option<String>,
    /// Facts with numbers behind the classification.
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Bottlenecks {
    pub devices: Vec<DeviceBottleneck>,
    /// The profile rules' findings, most time at stake first.
    pub findings: Vec<Finding>,
    pub verdict: String,
}

/// The bottleneck category of a ledger column.
fn category(c: Column) -> &'static str {
    use Column::*;
    match c {
        GemmTensorCore | GemmFp32Simt | GemmOther | Attention => "compute",
        Elementwise | Reduction | Optimizer | CopyKernel => "memory",
        OtherKernel => "other",
        CommTransfer | CommWait | Comm => "communication",
        H2dPageable | H2dPinned | D2hPageable | D2hPinned | D2d | P2p | Memset => "copy",
        IdleQueued | IdleUnattributed => "queued_idle",
        _ => "host_idle",
    }
}

const CATEGORIES: [&str; 7] = [
    "host_idle",
    "queued_idle",
    "copy",
    "compute",
    "memory",
    "communication",
    "other",
];

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

fn classify(d: &DeviceLedger, top: &str) -> String {
    let host = |c: Column| d.steady.columns.get(c);
    match top {
        "host_idle" => {
            let largest = d
                .steady
                .columns
                .largest(Some(ledger::Group::Idle))
                .map(|(c, _)| c);
            match largest {
                Some(Column::IdleLaunchOverhead) => "launch-bound",
                Some(Column::IdleSync) => "sync-bound",
                Some(Column::IdleDataLoading) => "input-bound",
                _ if host(Column::IdleLaunchOverhead) * 2 > d.steady.columns.host_idle() => {
                    "launch-bound"
                }
                _ => "host-bound",
            }
        }
        "copy" => "copy-bound",
        "compute" => "compute-bound",
        "memory" => "memory-bound",
        "communication" => "communication-bound",
        _ => "unclassified",
    }
    .to_string()
}

fn device(d: &DeviceLedger, rules: &rules::Rules, gpu: Option<String>) -> DeviceBottleneck {
    let len = d.steady.length_ns.max(1);
    let mut shares: Vec<Share> = CATEGORIES
        .iter()
        .map(|&cat| {
            let t: i64 = d
                .steady
                .columns
                .iter()
                .filter(|(c, _)| category(*c) == cat)
                .map(|(_, v)| v)
                .sum();
            Share {
                category: cat.to_string(),
                time_ns: t,
                pct: round(t as f64 / len as f64 * 100.0, 2),
            }
        })
        .collect();
    shares.sort_by_key(|s| std::cmp::Reverse(s.time_ns));
    let classification = classify(d, &shares[0].category);
    let mut evidence = vec![format!(
        "steady window {:.3} ms over {} steps (median step {:.3} ms, warm-up {} step(s) apart): {}",
        ms(len),
        d.steady.steps,
        ms(d.steady.period_median_ns),
        d.warmup_steps,
        shares
            .iter()
            .filter(|s| s.time_ns > 0)
            .map(|s| format!("{} {:.2}%", s.category, s.pct))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    let mut cols: Vec<(Column, i64)> = d.steady.columns.iter().collect();
    cols.sort_by_key(|(c, v)| (std::cmp::Reverse(*v), c.index()));
    evidence.push(format!(
        "largest ledger columns: {}",
        cols.iter()
            .take(4)
            .map(|(c, v)| format!(
                "{} {:.2}%",
                c.as_str(),
                round(*v as f64 / len as f64 * 100.0, 2)
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Some(h) = d.steady.host_median_ns {
        evidence.push(format!(
            "the host needs {:.3} ms to issue a step (median), the GPU period is {:.3} ms",
            ms(h),
            ms(d.steady.period_median_ns)
        ));
    }
    for f in rules
        .findings
        .iter()
        .filter(|f| f.device.is_none_or(|x| x == d.device) && f.severity > rules::Severity::Info)
        .take(3)
    {
        evidence.push(format!(
            "rule {} ({:?}, {:.2}% of the window): {}",
            f.id, f.severity, f.share_pct, f.title
        ));
    }
    let window_reason = rules
        .windows
        .iter()
        .find(|w| w.device == d.device)
        .map(|w| w.reason.clone())
        .unwrap_or_default();
    DeviceBottleneck {
        device: d.device,
        gpu,
        window: rules::steady_window(d),
        window_reason,
        classification,
        shares,
        largest_column: cols.first().map(|(c, _)| c.as_str().to_string()),
        evidence,
    }
}

/// Classify each device's bottleneck over its steady window, from the step ledger.
pub fn analyze(p: &Profile, scope: &Scope) -> Result<Bottlenecks> {
    let resolved = p.resolve(scope)?;
    let l = ledger::build(p, &resolved, None)?;
    let rules = rules::run_on(p, &l)?;
    let gpus = aisp_profile::info::gpus(p)?;
    let devices: Vec<DeviceBottleneck> = l
        .devices
        .iter()
        .filter(|d| d.steady.steps > 0 && d.steady.length_ns > 0)
        .map(|d| device(d, &rules, aisp_profile::info::gpu_name(&gpus, d.device)))
        .collect();
    let verdict = match devices.iter().max_by_key(|d| d.window.length_ns) {
        Some(d) => format!(
            "device {} is {}: {} takes {:.1}% of its steady window (the step ledger){}",
            d.device,
            d.classification,
            match d.shares[0].category.as_str() {
                "host_idle" => "GPU idle while the host works (no kernel, copy or memset)",
                "queued_idle" => "GPU idle with work queued",
                "copy" => "copying with no kernel beside it",
                c => c,
            },
            d.shares[0].pct,
            // The costliest finding of the same device, from the same ledger, so the two cannot contradict.
            rules
                .findings
                .iter()
                .find(|f| f.device.is_none_or(|x| x == d.device)
                    && f.severity > rules::Severity::Info)
                .map(|f| format!(
                    "; costliest finding: {} ({:?}, {:.2}% of the window)",
                    f.title, f.severity, f.share_pct
                ))
                .unwrap_or_else(|| "; no finding above info".into())
        ),
        None => "the profile has no GPU work in scope to classify".into(),
    };
    Ok(Bottlenecks {
        devices,
        findings: rules.findings,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aisp_profile as profile;

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests")
            .join("data")
            .join(name)
    }

    #[test]
    fn train_good_is_host_bound() {
        // Each step's GPU work (0.80 ms) is far shorter than the 5 ms sleep in `data`; scripts/ledger_sql.py over
        // the steady window (7,789,729,648 → 8,142,734,358): compute 31,172,796, copy 3,176,656, idle 318,655,258.
        let p = profile::open(&fixture("train_good.sqlite")).unwrap();
        let b = analyze(&p, &Scope::default()).unwrap();
        let d = &b.devices[0];
        assert_eq!(d.classification, "host-bound");
        assert_eq!(d.shares[0].category, "host_idle");
        let idle: i64 = d
            .shares
            .iter()
            .filter(|s| s.category.ends_with("idle"))
            .map(|s| s.time_ns)
            .sum();
        assert_eq!(idle, 318_655_258);
        assert_eq!(d.largest_column.as_deref(), Some("idle_os_wait"));
        assert!(b.verdict.contains("host-bound"), "{}", b.verdict);
        assert!(b.verdict.contains("The host sleeps"), "{}", b.verdict);
    }

    #[test]
    fn copies_filling_the_window_are_copy_bound_not_launch_bound() {
        // h100_2gpu_1s: pinned host-to-device copies take 93.5 % of each detected iteration.
        let p = profile::open(&fixture("h100_2gpu_1s.sqlite")).unwrap();
        let b = analyze(&p, &Scope::default()).unwrap();
        for d in &b.devices {
            assert_eq!(d.classification, "copy-bound", "{:?}", d.shares);
            assert_eq!(d.shares[0].category, "copy");
            assert!(d.shares[0].pct > 90.0);
        }
        assert!(b.verdict.contains("copy-bound"), "{}", b.verdict);
        // The costliest finding agrees with the class: the copies, not a host sync.
        assert!(
            b.verdict.contains("Copies on the critical path"),
            "{}",
            b.verdict
        );
        assert!(!b.verdict.contains("ynchroniz"), "{}", b.verdict);
        // Gaps between kernels that copies fill are named as copies.
        let rs = p.resolve(&Scope::default()).unwrap();
        let g = profile::gaps::gaps(&p, &rs, 1_000_000, 20).unwrap();
        let top = &g.devices[0].gaps[0];
        assert_eq!(top.cause, "gpu_copy", "{top:?}");
        assert!(!top.explanation.starts_with("cudaLaunch"), "{top:?}");
    }

    #[test]
    fn h200_matmuls_are_compute_bound_inside_the_busy_time() {
        // h200_matmul_small: one span (no steps); 98.8 % of kernel time is one fp32 SIMT GEMM.
        let p = profile::open(&fixture("h200_matmul_small.sqlite")).unwrap();
        let b = analyze(&p, &Scope::default()).unwrap();
        let d = &b.devices[0];
        let compute = d.shares.iter().find(|s| s.category == "compute").unwrap();
        let memory = d.shares.iter().find(|s| s.category == "memory").unwrap();
        assert!(compute.time_ns > 50 * memory.time_ns);
        assert!(
            d.evidence.iter().any(|e| e.contains("gemm_fp32_simt")),
            "{:?}",
            d.evidence
        );
    }

    #[test]
    fn planted_workloads_are_classified_by_what_holds_their_step() {
        for (name, class) in [
            ("planted/elementwise_chain.sqlite.xz", "memory-bound"),
            ("planted/fp32_gemm.sqlite.xz", "compute-bound"),
            ("planted/copy_bound.sqlite.xz", "copy-bound"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("p.sqlite");
            let mut input = std::io::BufReader::new(std::fs::File::open(fixture(name)).unwrap());
            let mut output = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
            lzma_rs::xz_decompress(&mut input, &mut output).unwrap();
            drop(output);
            let p = profile::open(&out).unwrap();
            let b = analyze(&p, &Scope::default()).unwrap();
            assert_eq!(
                b.devices[0].classification, class,
                "{name}: {:?}",
                b.devices[0].shares
            );
        }
    }
}
