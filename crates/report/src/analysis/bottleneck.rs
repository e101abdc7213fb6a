//! What bounds a workload: time accounting over a profile's analysis window.
//!
//! Inside each device's analysis window (the steady window when there are
//! steps, as the profile rules choose it), the window's time splits into GPU
//! idle time, copy time and kernel time. Busy means kernels ∪ memcpy ∪ memset
//! (the op set of `nsys analyze gpu_gaps`): a GPU moving data is not idle.
//! Copy time is memcpy/memset time not overlapped with any kernel. Kernel time
//! splits by kernel class into compute (GEMM, attention), memory (elementwise,
//! reduction, copy kernels), communication (collectives) and other, in
//! proportion to each class's kernel time. The largest share names the
//! bottleneck: idle → host-bound (refined to launch-bound when most kernels
//! are shorter than 5 µs), copy → copy-bound, otherwise compute-, memory- or
//! communication-bound. The rules' findings are the evidence of why.

use schemars::JsonSchema;
use serde::Serialize;

use aisp_planner::model::round;
use aisp_profile::classify::KernelClass;
use aisp_profile::kernels;
use aisp_profile::rules::{self, Finding};
use aisp_profile::summary::NameKey;
use aisp_profile::utilization;
use aisp_profile::{Profile, Result, Scope, Window};

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Share {
    /// host_idle (no kernel, copy or memset), copy (memcpy/memset not overlapped by kernels), compute, memory, communication or other.
    pub category: String,
    pub time_ns: i64,
    /// Of the analysis window, 0–100.
    pub pct: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeviceBottleneck {
    pub device: i64,
    pub gpu: Option<String>,
    pub window: Window,
    /// Why this window (from the profile rules).
    pub window_reason: String,
    /// host-bound, launch-bound, copy-bound, compute-bound, memory-bound, communication-bound (busy = kernels ∪ memcpy ∪ memset).
    pub classification: String,
    pub shares: Vec<Share>,
    /// Kernels shorter than 5 µs, % of kernels in the window.
    pub short_kernel_pct: f64,
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

fn category(c: KernelClass) -> &'static str {
    match c {
        KernelClass::GemmTensorCore
        | KernelClass::GemmSimtFp32
        | KernelClass::GemmUnknown
        | KernelClass::Attention => "compute",
        KernelClass::Elementwise | KernelClass::Reduction | KernelClass::Copy => "memory",
        KernelClass::Communication => "communication",
        KernelClass::Other => "other",
    }
}

/// Classify each device's bottleneck over its analysis window.
pub fn analyze(p: &Profile, scope: &Scope) -> Result<Bottlenecks> {
    let resolved = p.resolve(scope)?;
    let rules = rules::run(p, &resolved)?;
    let gpus = aisp_profile::info::gpus(p)?;
    let mut devices = Vec::new();
    for dw in &rules.windows {
        let w = dw.window;
        if w.length_ns <= 0 {
            continue;
        }
        let sub = Scope {
            device: Some(dw.device),
            process: scope.process,
            start_ns: Some(w.start_ns),
            end_ns: Some(w.end_ns),
            nvtx_range: None,
        };
        let rs = p.resolve(&sub)?;
        let util = utilization::utilization(p, &rs, 1, 50.0)?;
        let Some(du) = util.devices.iter().find(|d| d.device == dw.device) else {
            continue;
        };
        let Some(wb) = du
            .windows
            .iter()
            .find(|x| x.window.start_ns == w.start_ns && x.window.end_ns == w.end_ns)
            .or(du.windows.last())
        else {
            continue;
        };
        let k = kernels::kernels(p, &rs, NameKey::Short, 5)?;
        let busy = wb.busy_ns.max(0) as f64;
        let all_busy = (wb.all_ops_busy_ns.max(wb.busy_ns)) as f64;
        let copy = all_busy - busy;
        let idle = (w.length_ns as f64 - all_busy).max(0.0);
        let class_total: i64 = k.classes.iter().map(|c| c.total_ns).sum();
        let mut cats: Vec<(String, f64)> = ["compute", "memory", "communication", "other"]
            .iter()
            .map(|c| (c.to_string(), 0.0))
            .collect();
        for c in &k.classes {
            let share = if class_total > 0 {
                c.total_ns as f64 / class_total as f64
            } else {
                0.0
            };
            if let Some(e) = cats.iter_mut().find(|(n, _)| n == category(c.class)) {
                e.1 += share * busy;
            }
        }
        let mut shares = vec![
            Share {
                category: "host_idle".into(),
                time_ns: idle.round() as i64,
                pct: round(idle / w.length_ns as f64 * 100.0, 2),
            },
            Share {
                category: "copy".into(),
                time_ns: copy.round() as i64,
                pct: round(copy / w.length_ns as f64 * 100.0, 2),
            },
        ];
        for (n, t) in cats {
            shares.push(Share {
                category: n,
                time_ns: t.round() as i64,
                pct: round(t / w.length_ns as f64 * 100.0, 2),
            });
        }
        shares.sort_by_key(|s| std::cmp::Reverse(s.time_ns));
        let short_pct = k
            .devices
            .iter()
            .find(|d| d.device == dw.device)
            .map(|d| d.short_count_pct)
            .unwrap_or(0.0);
        let top = shares[0].category.clone();
        let classification = match top.as_str() {
            "host_idle" if short_pct >= 50.0 => "launch-bound",
            "host_idle" => "host-bound",
            "copy" => "copy-bound",
            "compute" => "compute-bound",
            "memory" => "memory-bound",
            "communication" => "communication-bound",
            _ => "unclassified",
        }
        .to_string();
        let mut evidence = vec![
            format!(
                "{:?} window {:.3} ms: kernels busy {:.2}% ({} kernels, {:.3} ms of kernel time)",
                w.kind,
                w.length_ns as f64 / 1e6,
                wb.busy_pct,
                k.kernels,
                k.total_ns as f64 / 1e6
            ),
            format!(
                "kernels ∪ memcpy ∪ memset busy {:.3} ms ({:.2}%): copies not overlapped by kernels {:.3} ms, nothing running {:.3} ms",
                all_busy / 1e6,
                all_busy / w.length_ns as f64 * 100.0,
                copy / 1e6,
                idle / 1e6
            ),
        ];
        for c in k.classes.iter().take(4) {
            evidence.push(format!(
                "{}: {:.2}% of kernel time ({} kernels)",
                c.class.as_str(),
                c.time_pct,
                c.instances
            ));
        }
        if let Some(r) = k.rows.first() {
            evidence.push(format!(
                "top kernel {} ({}): {:.2}% of kernel time",
                r.name,
                r.class.class.as_str(),
                r.time_pct
            ));
        }
        evidence.push(format!("{short_pct:.2}% of kernels are shorter than 5 µs"));
        for f in rules
            .findings
            .iter()
            .filter(|f| {
                f.device.is_none_or(|d| d == dw.device) && f.severity > rules::Severity::Info
            })
            .take(3)
        {
            evidence.push(format!(
                "rule {} ({:?}, {:.2}% of the window): {}",
                f.id, f.severity, f.share_pct, f.title
            ));
        }
        devices.push(DeviceBottleneck {
            device: dw.device,
            gpu: aisp_profile::info::gpu_name(&gpus, dw.device),
            window: w,
            window_reason: dw.reason.clone(),
            classification,
            shares,
            short_kernel_pct: short_pct,
            evidence,
        });
    }
    let verdict = match devices.iter().max_by_key(|d| d.window.length_ns) {
        Some(d) => format!(
            "device {} is {}: {} takes {:.1}% of its {:?} window (busy = kernels ∪ memcpy ∪ memset){}",
            d.device,
            d.classification,
            match d.shares[0].category.as_str() {
                "host_idle" => "GPU idle (no kernel, copy or memset)",
                "copy" => "copying not overlapped by kernels",
                c => c,
            },
            d.shares[0].pct,
            d.window.kind,
            // The costliest finding of the same device, from the same GPU-time
            // accounting, so the two cannot contradict each other.
            rules
                .findings
                .iter()
                .find(|f| f.device == Some(d.device) && f.severity > rules::Severity::Info)
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
        // Fixture facts: each step's GPU work (0.80 ms) is far shorter than the
        // 5 ms CPU stall in `data`; steady-state busy 8.67 % (kernels). Idle
        // counts no kernel, copy or memset: sqlite3 union of the three over the
        // steady window 7,784,516,463 → 8,142,623,443 = 34,239,689 ns, so idle
        // is 90.44 %.
        let p = profile::open(&fixture("train_good.sqlite")).unwrap();
        let b = analyze(&p, &Scope::default()).unwrap();
        let d = &b.devices[0];
        assert_eq!(d.classification, "host-bound");
        assert_eq!(d.shares[0].category, "host_idle");
        assert_eq!(d.shares[0].time_ns, 358_106_980 - 34_239_689);
        assert!(b.verdict.contains("host-bound"));
        assert!(b.verdict.contains("kernels ∪ memcpy ∪ memset"));
    }

    #[test]
    fn copies_filling_the_window_are_copy_bound_not_launch_bound() {
        // h100_2gpu_1s: host-to-device copies occupy 921 of 969 ms; this was
        // "launch-bound: host idle 97.7%".
        let p = profile::open(&fixture("h100_2gpu_1s.sqlite")).unwrap();
        let b = analyze(&p, &Scope::default()).unwrap();
        for d in &b.devices {
            assert_eq!(d.classification, "copy-bound", "{:?}", d.shares);
            assert_eq!(d.shares[0].category, "copy");
            assert!(d.shares[0].pct > 90.0);
        }
        assert!(b.verdict.contains("copy-bound"), "{}", b.verdict);
        // The costliest finding agrees with the class: the copies, not a host sync.
        assert!(b.verdict.contains("host-to-device"), "{}", b.verdict);
        assert!(!b.verdict.contains("synchronization"), "{}", b.verdict);
        // Gaps between kernels that copies fill are named as copies.
        let rs = p.resolve(&Scope::default()).unwrap();
        let g = profile::gaps::gaps(&p, &rs, 1_000_000, 20).unwrap();
        let top = &g.devices[0].gaps[0];
        assert_eq!(top.cause, "gpu_copy", "{top:?}");
        assert!(!top.explanation.starts_with("cudaLaunch"), "{top:?}");
    }

    #[test]
    fn h200_matmuls_are_compute_bound_inside_the_busy_time() {
        // h200_matmul_small: 98.8% of kernel time is one fp32 SIMT GEMM; the GPU
        // is 32.55% busy over its span, so idle still wins the window; the
        // compute share is 98.8% of the busy time.
        let p = profile::open(&fixture("h200_matmul_small.sqlite")).unwrap();
        let b = analyze(&p, &Scope::default()).unwrap();
        let d = &b.devices[0];
        let compute = d.shares.iter().find(|s| s.category == "compute").unwrap();
        let memory = d.shares.iter().find(|s| s.category == "memory").unwrap();
        assert!(compute.time_ns > 50 * memory.time_ns);
        assert!(d.evidence.iter().any(|e| e.contains("gemm_simt_fp32")));
    }
}
