//! The step ledger on every Nsight Systems fixture: each step's columns sum to
//! its period exactly, steps tile the device's timeline, and the steady window
//! is the steps after warm-up. `LEDGER_DUMP=1` prints each ledger's steady
//! summary (for reading, not asserted).

use aisp_profile::ledger::{self, Column, Group};
use aisp_profile::{Profile, Scope};

use crate::profile_common;

const FIXTURES: &[&str] = &[
    "train_good.sqlite",
    "h100_2gpu_1s.sqlite",
    "h200_matmul_small.sqlite",
    "healthy_1pct.sqlite",
    "mock.sqlite",
    "ddp.sqlite",
    "infer_decode.sqlite",
    "workloads/healthy.sqlite",
    "workloads/pageable_copies.sqlite",
    "workloads/host_sync.sqlite",
    "workloads/fp32_no_tf32.sqlite",
    "workloads/tiny_kernels.sqlite",
    "workloads/decode_loop.sqlite",
    "workloads/decode_fixed.sqlite",
    "workloads/train_adam_storm.sqlite",
    "workloads/train_fixed.sqlite",
    "capture/dataloader_bound.nsys.sqlite",
    "capture/dataloader_healthy.nsys.sqlite",
    "capture/nccl_sizes_1gpu.sqlite",
];

fn ledger_of(p: &Profile) -> ledger::Ledger {
    let scope = p.resolve(&Scope::default()).unwrap();
    ledger::build(p, &scope, None).unwrap()
}

fn dump(name: &str, l: &ledger::Ledger) {
    if std::env::var_os("LEDGER_DUMP").is_none() {
        return;
    }
    for d in &l.devices {
        let st = &d.steady;
        eprintln!(
            "{name} device {} {:?} {:?}: {} steps ({} warm-up), steady {} steps median {:.3} ms cv {:.1}% host {:?}",
            d.device,
            d.source,
            d.family,
            d.steps.len(),
            d.warmup_steps,
            st.steps,
            st.period_median_ns as f64 / 1e6,
            st.period_cv_pct,
            st.host_median_ns.map(|h| h as f64 / 1e6)
        );
        for (c, v) in st.columns.iter() {
            eprintln!("    {:24} {:9.3} ms {:6.2}%", c.as_str(), v as f64 / 1e6, d.share(v));
        }
        eprintln!(
            "    hidden comm {:.3} ms, hidden copy {:.3} ms, chains {:?}",
            st.hidden_communication_ns as f64 / 1e6,
            st.hidden_copy_ns as f64 / 1e6,
            st.chains
        );
        for n in &d.notes {
            eprintln!("    note: {n}");
        }
    }
}

#[test]
fn every_step_sums_to_its_period_on_every_fixture() {
    for name in FIXTURES {
        let p = profile_common::open(name);
        let l = ledger_of(&p);
        dump(name, &l);
        assert!(!l.devices.is_empty(), "{name}: no device ledger");
        for d in &l.devices {
            assert!(!d.steps.is_empty(), "{name} device {}: no steps", d.device);
            for (i, s) in d.steps.iter().enumerate() {
                assert_eq!(
                    s.columns.total(),
                    s.period_ns,
                    "{name} device {} step {i} ({}): columns {:?}",
                    d.device,
                    s.name,
                    s.columns
                );
                if let Some(next) = d.steps.get(i + 1) {
                    assert_eq!(
                        s.start_ns + s.period_ns,
                        next.start_ns,
                        "{name} device {}: steps {i} and {} do not tile the timeline",
                        d.device,
                        i + 1
                    );
                }
            }
            let steady: i64 = d.steady_steps().map(|s| s.period_ns).sum();
            assert_eq!(steady, d.steady.length_ns, "{name} device {}", d.device);
            assert_eq!(
                d.steady.columns.total(),
                d.steady.length_ns,
                "{name} device {}",
                d.device
            );
            let groups: i64 = [Group::Compute, Group::Communication, Group::Copy, Group::Idle]
                .iter()
                .map(|&g| d.steady.columns.group(g))
                .sum();
            assert_eq!(groups, d.steady.length_ns, "{name} device {}", d.device);
        }
    }
}

/// train_good (NVTX `step_0` … `step_39`, one H200): steps come from the ranges,
/// the first is warm-up, and the steady window is the GPU periods of the rest.
#[test]
fn train_good_steps_follow_its_nvtx_ranges_on_the_gpu() {
    let p = profile_common::open("train_good.sqlite");
    let l = ledger_of(&p);
    assert_eq!(l.devices.len(), 1);
    let d = &l.devices[0];
    assert_eq!(d.source, ledger::StepSource::Nvtx);
    assert_eq!(d.steps.len(), 40);
    assert!(d.steps[0].warmup && !d.steps[1].warmup);
    assert_eq!(d.steps[0].name, "step_0");
    // The host stalls 5 ms per step with the GPU idle: idle dominates every steady step.
    let idle = d.steady.columns.group(Group::Idle);
    assert!(
        idle * 2 > d.steady.length_ns,
        "idle {idle} of {}",
        d.steady.length_ns
    );
    assert!(d.steady.columns.get(Column::IdleQueued) * 10 < idle);
}

/// `LEDGER_DUMP=1 cargo test --test profile_ledger dump_rules -- --nocapture`: the findings of every fixture.
#[test]
fn dump_rules() {
    if std::env::var_os("LEDGER_DUMP").is_none() {
        return;
    }
    let names: Vec<String> = match std::env::var("LEDGER_FIXTURES") {
        Ok(v) => v.split(',').map(String::from).collect(),
        Err(_) => FIXTURES.iter().map(|s| s.to_string()).collect(),
    };
    for name in &names {
        let p = profile_common::open(name);
        let r = aisp_profile::rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
        eprintln!("== {name}: {}", r.verdict);
        for f in &r.findings {
            eprintln!(
                "   [{:?}] {} dev {:?} {:.2}% pred {:?} then {:?}: {}",
                f.severity,
                f.id,
                f.device,
                f.share_pct,
                f.predicted_step_ns.map(|v| v as f64 / 1e6),
                f.then_limited_by,
                f.title
            );
        }
    }
}

