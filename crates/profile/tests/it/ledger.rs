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
            eprintln!(
                "    {:24} {:9.3} ms {:6.2}%",
                c.as_str(),
                v as f64 / 1e6,
                d.share(v)
            );
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
            let groups: i64 = [
                Group::Compute,
                Group::Communication,
                Group::Copy,
                Group::Idle,
            ]
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

/// The ledger's groups against an independent computation from the tables alone (`scripts/ledger_sql.py`:
/// steps by launch call in NVTX `step_N` ranges, periods first-op to first-op, warm-up, then unions of
/// non-NCCL kernels, NCCL kernels minus compute, copies minus kernels, and the rest as idle).
#[test]
fn the_steady_groups_match_an_independent_sql_computation() {
    // (fixture, device, steady start, steady end, steady steps, [compute, communication, copy, idle] ns)
    type Expected = (&'static str, i64, i64, i64, usize, [i64; 4]);
    let expected: &[Expected] = &[
        (
            "train_good.sqlite",
            0,
            7_789_729_648,
            8_142_734_358,
            39,
            [31_172_796, 0, 3_176_656, 318_655_258],
        ),
        (
            "workloads/host_sync.sqlite",
            0,
            8_931_286_423,
            9_026_701_440,
            29,
            [44_054_227, 0, 272_194, 51_088_596],
        ),
        (
            "planted/elementwise_chain.sqlite",
            0,
            4_701_606_974,
            4_940_683_364,
            39,
            [236_553_713, 0, 280_798, 2_241_879],
        ),
        (
            "planted/copy_bound.sqlite",
            0,
            11_152_523_953,
            12_608_744_366,
            29,
            [241_507_142, 0, 1_200_095_399, 14_617_872],
        ),
        (
            "ddp.sqlite",
            0,
            19_635_879_405,
            19_791_235_472,
            18,
            [100_149_227, 31_565_309, 6_952_447, 16_689_084],
        ),
        (
            "ddp.sqlite",
            1,
            19_634_837_332,
            19_790_339_450,
            18,
            [104_502_885, 47_845_564, 505_375, 2_648_294],
        ),
    ];
    for &(name, dev, start, end, steps, groups) in expected {
        let p = profile_common::open(name);
        let l = ledger_of(&p);
        let d = l.devices.iter().find(|d| d.device == dev).unwrap();
        assert_eq!(
            (d.steady.start_ns, d.steady.end_ns, d.steady.steps),
            (start, end, steps),
            "{name} {dev}"
        );
        let got = [
            Group::Compute,
            Group::Communication,
            Group::Copy,
            Group::Idle,
        ]
        .map(|g| d.steady.columns.group(g));
        assert_eq!(got, groups, "{name} device {dev}");
    }
}

/// The NVTX ranges a step summary lists (train_good: `data`, `forward`, `backward`, `optimizer` once a step) and
/// their kernel time, against SQL: the kernels whose launch call (joined by correlationId in the same process) lies
/// inside a range of that name opened in the steady steps (step_1 onward; step_0 is the warm-up), over the 39
/// steady steps.
#[test]
fn the_step_summary_names_each_nvtx_range_once_a_step_with_its_kernels_time_as_sql_finds_it() {
    let p = profile_common::open("train_good.sqlite");
    let r = aisp_profile::rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
    let s = &r.ledger[0];
    assert_eq!(s.steady_steps, 39);
    let mut names: Vec<&str> = s.top_regions.iter().map(|x| x.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["backward", "data", "forward", "optimizer"]);
    let c = rusqlite::Connection::open_with_flags(
        profile_common::fixture("train_good.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    for region in &s.top_regions {
        assert_eq!(region.per_step, 1.0, "{}", region.name);
        let kernel_ns: i64 = c
            .query_row(
                "SELECT COALESCE(SUM(k.end - k.start), 0) FROM NVTX_EVENTS n
                 JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                   ON r.globalTid / 16777216 = n.globalTid / 16777216 AND r.start >= n.start AND r.end <= n.end
                 JOIN CUPTI_ACTIVITY_KIND_KERNEL k
                   ON k.correlationId = r.correlationId AND k.globalPid / 16777216 = r.globalTid / 16777216
                 WHERE n.eventType = 59 AND n.text = ?1
                   AND n.start >= (SELECT start FROM NVTX_EVENTS WHERE text = 'step_1')",
                [&region.name],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            region.kernel_ns_per_step,
            (kernel_ns as f64 / 39.0).round() as i64,
            "{}",
            region.name
        );
        // `data` launches nothing; the others do.
        assert_eq!(kernel_ns == 0, region.name == "data", "{}", region.name);
    }
}

/// The host calls a step summary lists (train_good: the main thread, which the device waits for, sleeps once a step
/// in `data`), against SQL: its `clock_nanosleep` calls from step_1 on (the 39 steady steps), count and time.
#[test]
fn the_step_summary_names_the_waited_for_threads_calls_as_sql_counts_them() {
    let p = profile_common::open("train_good.sqlite");
    let r = aisp_profile::rules::run(&p, &p.resolve(&Scope::default()).unwrap()).unwrap();
    let s = &r.ledger[0];
    let sleep = s
        .top_calls
        .iter()
        .find(|c| c.name == "clock_nanosleep")
        .unwrap_or_else(|| panic!("{:#?}", s.top_calls));
    assert!(sleep.os);
    let c = rusqlite::Connection::open_with_flags(
        profile_common::fixture("train_good.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let (calls, ns): (i64, i64) = c
        .query_row(
            "SELECT COUNT(*), SUM(o.end - o.start) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId
             WHERE s.value = 'clock_nanosleep'
               AND o.globalTid = (SELECT globalTid FROM NVTX_EVENTS WHERE text = 'step_1')
               AND o.start >= (SELECT start FROM NVTX_EVENTS WHERE text = 'step_1')",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(calls, 39);
    assert_eq!(sleep.per_step, 1.0);
    assert_eq!(sleep.ns_per_step, (ns as f64 / 39.0).round() as i64);
}
