//! The ncu CSV parser and the Kineto analysis on real outputs. Every expected
//! number was computed independently from the same files with Python (csv,
//! json with Decimal timestamps, lzma); see tests/data/capture/README.md.

use std::path::{Path, PathBuf};

use aisp_profile::kineto::Limits;
use aisp_profile::ncu::{PageKind, summarize};
use aisp_profile::rules::{Severity, Stake};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/capture")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(data(name)).unwrap()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

const BF16_COPY: &str = "void at::vectorized_elementwise_kernel<8, at::bfloat16_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)";
const NVJET: &str = "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_bias_TNT";

#[test]
fn ncu_raw_page_gives_per_kernel_speed_of_light_and_occupancy() {
    let s = summarize(&[&read("train_good.ncu-raw.csv")], 100).unwrap();
    assert_eq!(s.pages, vec![PageKind::Raw]);
    assert_eq!(s.kernel_count, 12);
    assert_eq!(s.device_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(s.total_duration_ns, 85_760.0);
    let ids: Vec<u64> = s.kernels.iter().map(|k| k.id).collect();
    assert_eq!(ids, (0..12).collect::<Vec<_>>());

    let k0 = &s.kernels[0];
    assert_eq!(k0.kernel_name, BF16_COPY);
    assert_eq!(k0.process_id, Some(626));
    assert_eq!((k0.device, k0.stream), (Some(0), Some(7)));
    assert_eq!(k0.block_size, "(128, 1, 1)");
    assert_eq!(k0.grid_size, "(2, 1, 1)");
    assert_eq!(k0.compute_capability, "9.0");
    assert_eq!(k0.duration_ns, Some(2848.0));
    assert_eq!(k0.sm_throughput_pct, Some(0.01));
    assert_eq!(k0.memory_throughput_pct, Some(11.16));
    assert_eq!(k0.dram_throughput_pct, Some(0.14));
    assert_eq!(k0.l1_throughput_pct, Some(37.43));
    assert_eq!(k0.l2_throughput_pct, Some(12.67));
    assert_eq!(k0.achieved_occupancy_pct, Some(6.01));
    assert_eq!(k0.theoretical_occupancy_pct, Some(100.0));
    assert_eq!(k0.registers_per_thread, Some(32.0));
    assert_eq!(k0.waves_per_sm, Some(0.0));
    assert_eq!(k0.occupancy_limiters, vec!["registers", "warps"]);
    assert_eq!(k0.block_limits["registers"], 16.0);
    assert_eq!(k0.block_limits["blocks_per_sm"], 32.0);
    assert_eq!(k0.sol_bound.as_deref(), Some("latency"));
    // The basic set measures no hit rates, DRAM bytes, stalls or roofline.
    assert_eq!(k0.l2_hit_rate_pct, None);
    assert_eq!(k0.dram_bandwidth_gb_per_s, None);
    assert!(k0.warp_stalls.is_empty());
    assert_eq!(k0.roofline, None);
    assert!(k0.rules.is_empty());

    let k3 = &s.kernels[3];
    assert_eq!(k3.kernel_name, NVJET);
    assert_eq!(k3.duration_ns, Some(12_128.0));
    assert_eq!(k3.sm_throughput_pct, Some(36.69));
    assert_eq!(k3.memory_throughput_pct, Some(48.29));
    assert_eq!(k3.achieved_occupancy_pct, Some(13.84));
    assert_eq!(k3.theoretical_occupancy_pct, Some(18.75));
    assert_eq!(k3.registers_per_thread, Some(168.0));
    assert_eq!(k3.occupancy_limiters, vec!["registers", "shared_memory"]);
    assert_eq!(k3.block_limits["registers"], 1.0);
    assert_eq!(k3.block_limits["warps"], 5.0);

    let k1 = &s.kernels[1];
    assert_eq!(k1.duration_ns, Some(9184.0));
    assert_eq!(k1.dram_throughput_pct, Some(55.58));
    assert_eq!(k1.l2_throughput_pct, Some(70.28));

    // By name: 7 bf16 copies (40,352 ns), 3 GEMMs (36,512), 2 GELUs (8,896).
    let g: Vec<(u64, f64)> = s
        .by_name
        .iter()
        .map(|g| (g.launches, g.total_duration_ns))
        .collect();
    assert_eq!(g, vec![(7, 40_352.0), (3, 36_512.0), (2, 8_896.0)]);
    assert_eq!(s.by_name[0].kernel_name, BF16_COPY);
    assert_eq!(s.by_name[1].kernel_name, NVJET);
    assert!(close(
        s.by_name[1].duration_share_pct,
        100.0 * 36_512.0 / 85_760.0,
        1e-9
    ));
    // Mean SM throughput of the three GEMMs: (36.69 + 36.59 + 36.58) / 3.
    assert!(close(
        s.by_name[1].mean_sm_throughput_pct.unwrap(),
        (36.69 + 36.59 + 36.58) / 3.0,
        1e-9
    ));
    assert!(s.top_advice.is_empty());

    // The limit applies to the per-launch list only.
    let s2 = summarize(&[&read("train_good.ncu-raw.csv")], 2).unwrap();
    assert_eq!(s2.kernels.len(), 2);
    assert_eq!(s2.kernel_count, 12);
}

#[test]
fn ncu_details_page_gives_hit_rates_bandwidth_and_rules() {
    let s = summarize(&[&read("train_good.ncu-details.csv")], 100).unwrap();
    assert_eq!(s.pages, vec![PageKind::Details]);
    assert_eq!(s.kernel_count, 6);
    assert_eq!(s.total_duration_ns, 35_648.0);

    let k0 = &s.kernels[0];
    assert_eq!(k0.process_id, Some(821));
    assert_eq!(k0.duration_ns, Some(2656.0));
    assert_eq!(k0.sm_throughput_pct, Some(0.02));
    assert_eq!(k0.memory_throughput_pct, Some(12.3));
    assert_eq!(k0.achieved_occupancy_pct, Some(6.12));
    assert_eq!(k0.theoretical_occupancy_pct, Some(100.0));
    assert_eq!(k0.l1_hit_rate_pct, Some(40.0));
    assert_eq!(k0.l2_hit_rate_pct, Some(99.64));
    assert!(close(
        k0.dram_bandwidth_gb_per_s.unwrap(),
        5.01204819277,
        1e-9
    ));
    assert_eq!(k0.occupancy_limiters, vec!["registers", "warps"]);
    let rules: Vec<(&str, &str, Option<f64>)> = k0
        .rules
        .iter()
        .map(|r| (r.rule.as_str(), r.kind.as_str(), r.estimated_speedup_pct))
        .collect();
    assert_eq!(
        rules,
        vec![
            ("SOLBottleneck", "OPT", None),
            ("SOLFPRoofline", "INF", None),
            ("HighPipeUtilization", "OPT", Some(100.0)),
            ("MemoryL2Compression", "OPT", Some(0.1511)),
            ("LaunchConfiguration", "OPT", Some(98.48)),
            ("AchievedOccupancy", "OPT", Some(93.88)),
            ("WorkloadImbalance", "OPT", Some(14.0)),
            ("UncoalescedGlobalAccess", "OPT", Some(12.67)),
        ]
    );
    assert_eq!(k0.rules[4].section, "LaunchStats");
    assert_eq!(k0.rules[4].speedup_scope.as_deref(), Some("global"));
    assert!(k0.rules[4].message.starts_with(
        "The grid for this launch is configured to execute only 2 blocks, which is less than the GPU's 132 multiprocessors."
    ));

    let k1 = &s.kernels[1];
    assert!(close(
        k1.dram_bandwidth_gb_per_s.unwrap(),
        1898.43971631206,
        1e-9
    ));
    assert_eq!(k1.l2_hit_rate_pct, Some(36.64));
    let k3 = &s.kernels[3];
    assert_eq!(k3.kernel_name, NVJET);
    assert_eq!(k3.duration_ns, Some(12_288.0));
    assert_eq!(k3.l1_hit_rate_pct, Some(0.0));
    assert_eq!(k3.l2_hit_rate_pct, Some(68.15));
    assert_eq!(k3.theoretical_occupancy_pct, Some(18.75));
    assert_eq!(k3.occupancy_limiters, vec!["registers", "shared_memory"]);

    // The bf16 copy kernel: 4 launches; WorkloadImbalance fired 1, 2, 4 and 1
    // times on them but counts once per launch.
    let copy = s
        .by_name
        .iter()
        .find(|g| g.kernel_name == BF16_COPY)
        .unwrap();
    assert_eq!(copy.launches, 4);
    assert_eq!(copy.rules["WorkloadImbalance"], 4);
    assert_eq!(copy.rules["LaunchConfiguration"], 3);
    assert!(!copy.rules.contains_key("SOLFPRoofline"));

    // Advice: speedup × duration, the largest estimate per rule and launch.
    let a: Vec<(&str, u64, f64)> = s
        .top_advice
        .iter()
        .take(4)
        .map(|a| (a.rule.as_str(), a.launches, a.estimated_savings_ns))
        .collect();
    let expected = [
        ("HighPipeUtilization", 4, 18_747.888),
        ("AchievedOccupancy", 4, 10_759.516_8),
        ("TheoreticalOccupancy", 1, 9_984.0),
        ("LaunchConfiguration", 3, 9_932.339_2),
    ];
    for ((rule, n, ns), (erule, en, ens)) in a.iter().zip(expected) {
        assert_eq!((*rule, *n), (erule, en));
        assert!(close(*ns, ens, 1e-6), "{rule}: {ns} vs {ens}");
    }
    assert_eq!(s.top_advice[2].kernel_name, NVJET);
}

#[test]
fn ncu_program_output_lines_are_skipped() {
    let raw = read("train_good.ncu-raw.csv");
    assert!(raw.starts_with("==WARNING=="));
    assert!(raw.contains("final loss 2.71540358198763e-07"));
    let records = aisp_profile::ncu::csv_records(&raw).unwrap();
    // Header, units and 12 kernels; none of the 4 program/ncu lines.
    assert_eq!(records.len(), 14);
    assert!(records.iter().all(|r| r.len() == 566));
}

fn kineto() -> aisp_profile::kineto::Trace {
    aisp_profile::kineto::load(&data("train_good.kineto.json.xz"), &Default::default()).unwrap()
}

#[test]
fn kineto_xz_and_plain_json_load_the_same_events() {
    let from_xz = kineto();
    let mut bytes = Vec::new();
    lzma_rs::xz_decompress(
        &mut std::fs::File::open(data("train_good.kineto.json.xz"))
            .map(std::io::BufReader::new)
            .unwrap(),
        &mut bytes,
    )
    .unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let plain = dir.join("train_good.kineto.json");
    std::fs::write(&plain, &bytes).unwrap();
    let from_json = aisp_profile::kineto::load(&plain, &Default::default()).unwrap();
    assert_eq!(from_xz.events, 5895);
    assert_eq!(from_json.events, 5895);
    assert_eq!(from_xz.gpu_ops, from_json.gpu_ops);
    assert_eq!(from_xz.gpu_ops.len(), 470);
    assert_eq!(from_xz.steps.len(), 5);
    assert_eq!(from_xz.device_names[&0], "NVIDIA H100 80GB HBM3");
    assert_eq!(from_xz.rank, None);
    // Exact ns from the µs text: the first memcpy starts at 4461650757249.823 µs.
    assert_eq!(from_xz.gpu_ops[0].start_ns, 4_461_650_757_249_823);
    assert_eq!(from_xz.gpu_ops[0].dur_ns, 80_514);
}

#[test]
fn kineto_temporal_and_idle_breakdown() {
    let a = aisp_profile::kineto::analyze(&[kineto()], Limits::default());
    assert_eq!(a.traces.len(), 1);
    assert!(a.cross_rank.is_none());
    let r = &a.traces[0];
    assert_eq!(r.devices.len(), 1);
    let d = &r.devices[0];
    assert_eq!(d.device, 0);
    assert_eq!(d.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(d.streams, vec![7]);
    assert_eq!(d.window_start_ns, 4_461_650_757_249_823);
    assert_eq!(d.window_end_ns, 4_461_650_802_318_038);
    assert_eq!(d.window_ns, 45_068_215);
    assert_eq!((d.kernels, d.memcpys, d.memsets), (455, 10, 5));
    assert_eq!(d.kernel_sum_ns, 4_752_162);
    assert_eq!(d.busy_ns, 5_160_428);
    assert!(close(d.busy_pct, 11.450260455178888, 1e-9));
    let t = &d.temporal;
    assert_eq!(t.compute_ns, 4_752_162);
    assert_eq!(t.communication_exposed_ns, 0);
    assert_eq!(t.memory_exposed_ns, 408_266);
    assert_eq!(t.idle_ns, 39_907_787);
    assert_eq!(
        t.compute_ns + t.communication_exposed_ns + t.memory_exposed_ns + t.idle_ns,
        d.window_ns
    );
    assert!(close(t.idle_pct, 88.54973954482111, 1e-9));
    let i = &d.idle;
    assert_eq!(i.gaps, 469);
    assert_eq!(i.host_wait_ns, 39_901_290);
    assert_eq!(i.kernel_wait_ns, 0);
    assert_eq!(i.other_wait_ns, 6_497);
    assert_eq!((i.gaps_over_1ms, i.gaps_over_1ms_ns), (4, 20_016_155));
    assert_eq!(i.largest_gap_ns, 5_030_272);
    assert_eq!(i.largest_gap_start_ns, 4_461_650_782_421_276);
    assert!(d.overlap.is_none());
}

#[test]
fn kineto_kernels_launches_steps_and_operators() {
    let a = aisp_profile::kineto::analyze(&[kineto()], Limits::default());
    let r = &a.traces[0];

    let top: Vec<(u64, i64, i64, i64)> = r
        .top_kernels
        .iter()
        .take(3)
        .map(|k| (k.count, k.total_ns, k.min_ns, k.max_ns))
        .collect();
    assert_eq!(
        top,
        vec![
            (10, 1_776_479, 130_946, 223_236),
            (85, 544_752, 2_176, 11_616),
            (90, 452_492, 1_312, 9_920)
        ]
    );
    assert!(
        r.top_kernels[0]
            .name
            .starts_with("void at::native::(anonymous namespace)::multi_tensor_apply_kernel")
    );
    assert!(close(r.top_kernels[0].share_pct, 37.3825, 1e-4));

    let ls = &r.launch_stats;
    assert_eq!(ls.launches, 470);
    assert_eq!(ls.short_kernels, 225);
    assert_eq!(ls.short_kernels_cpu_ns, 1_908_946);
    assert_eq!(ls.runtime_outliers, 0);
    assert_eq!(ls.launch_delay_outliers, 5);
    assert_eq!(ls.cpu_launch_median_ns, Some(6_217.5));
    assert_eq!(ls.cpu_launch_p90_ns, Some(10_059));
    assert_eq!(ls.launch_delay_median_ns, Some(1_959.5));
    assert_eq!(ls.launch_delay_p90_ns, Some(2_355));
    assert_eq!(ls.launch_delay_max_ns, Some(217_107));
    assert_eq!(ls.kernels_under_5us, 202);
    assert!(close(
        ls.kernels_under_5us_time_pct,
        11.294922184891846,
        1e-9
    ));
    assert!(close(
        ls.kernels_under_5us_count_pct,
        44.395604395604394,
        1e-9
    ));

    let st = &r.steps;
    assert_eq!(st.count, 5);
    let steps: Vec<(&str, i64, u64, i64)> = st
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.cpu_ns, s.gpu_ops, s.gpu_busy_ns))
        .collect();
    assert_eq!(
        steps,
        vec![
            ("ProfilerStep#7", 11_175_481, 94, 1_034_612),
            ("ProfilerStep#8", 9_661_950, 94, 1_032_058),
            ("ProfilerStep#9", 9_342_318, 94, 1_031_155),
            ("ProfilerStep#10", 9_937_382, 94, 1_031_161),
            ("ProfilerStep#11", 9_892_287, 94, 1_031_442),
        ]
    );
    assert_eq!(st.cpu_median_ns, Some(9_892_287.0));
    assert_eq!(st.gpu_busy_median_ns, Some(1_031_442.0));
    assert!(st.steps.iter().all(|s| s.sync_calls == 0));

    let mem: Vec<(&str, u64, f64, i64)> = r
        .memory_ops
        .iter()
        .map(|m| (m.name.as_str(), m.count, m.bytes, m.total_ns))
        .collect();
    assert_eq!(
        mem,
        vec![
            ("Memcpy HtoD (Pinned -> Device)", 5, 20_971_520.0, 393_386),
            ("Memcpy DtoD (Device -> Device)", 5, 20_971_520.0, 11_328),
            ("Memset (Device)", 5, 20.0, 3_552),
        ]
    );
    assert!(close(r.memory_ops[0].gb_per_s, 53.31028557193189, 1e-9));

    assert_eq!(r.sync_calls.len(), 1);
    let s = &r.sync_calls[0];
    assert_eq!(
        (s.name.as_str(), s.count, s.total_ns, s.in_steps),
        ("cudaDeviceSynchronize", 1, 140_601, 0)
    );
    assert_eq!(r.memory_peaks.len(), 1);
    assert_eq!(r.memory_peaks[0].peak_allocated_bytes, 617_878_528);
    assert_eq!(r.memory_peaks[0].peak_reserved_bytes, 648_019_968);

    let ops: Vec<(&str, i64, u64)> = r
        .top_operators_by_gpu
        .iter()
        .take(4)
        .map(|o| (o.name.as_str(), o.gpu_ns, o.gpu_ops))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("aten::_fused_adam_", 1_776_479, 10),
            ("aten::copy_", 1_401_958, 185),
            ("aten::mm", 763_854, 75),
            ("aten::sum", 422_149, 40),
        ]
    );
    // Self time never exceeds the total, and some operator has nested children.
    assert!(
        r.top_operators_by_cpu
            .iter()
            .all(|o| o.cpu_self_ns <= o.cpu_total_ns)
    );
    assert!(
        r.top_operators_by_cpu
            .iter()
            .any(|o| o.cpu_self_ns < o.cpu_total_ns)
    );
}

#[test]
fn kineto_findings_say_the_loop_is_host_bound() {
    let a = aisp_profile::kineto::analyze(&[kineto()], Limits::default());
    let f = &a.findings[0];
    assert_eq!(f.id, "host_bound");
    assert_eq!(f.severity, Severity::Critical);
    // Idle minus kernel wait (0): 39,907,787 ns of a 45,068,215 ns window.
    assert_eq!(f.time_at_stake_ns, 39_907_787);
    assert!(close(f.share_pct, 88.54973954482111, 1e-9));
    // The Nsight rules' shape: measured idle, on device 0, the evidence as one fact.
    assert_eq!((f.stake, f.device, f.rank), (Stake::GpuIdle, Some(0), None));
    assert_eq!(f.evidence.len(), 1);
    assert!(
        f.evidence[0].contains("host wait 39.90 ms"),
        "{:?}",
        f.evidence
    );
    assert!(
        f.evidence[0].contains("median step: 9.89 ms on the CPU, 1.03 ms of GPU work"),
        "{:?}",
        f.evidence
    );
    let short = a.findings.iter().find(|f| f.id == "short_kernels").unwrap();
    assert_eq!(short.time_at_stake_ns, 1_908_946);
    assert_eq!(short.severity, Severity::Low);
    assert_eq!(short.stake, Stake::Estimate);
    assert!(a.findings.iter().any(|f| f.id == "launch_delay"));
    // Pinned copies only, no syncs in steps, no NCCL: those rules stay quiet.
    for quiet in [
        "pageable_memcpy",
        "host_sync",
        "exposed_communication",
        "rank_imbalance",
    ] {
        assert!(a.findings.iter().all(|f| f.id != quiet), "{quiet} fired");
    }
}

#[test]
fn two_traces_are_compared_as_ranks() {
    let a = aisp_profile::kineto::analyze(&[kineto(), kineto()], Limits::default());
    let c = a.cross_rank.unwrap();
    assert_eq!(c.ranks.len(), 2);
    assert_eq!(c.ranks[0].compute_ns, 4_752_162);
    assert_eq!(c.compute_imbalance_pct, 0.0);
    assert!(a.findings.iter().all(|f| f.id != "rank_imbalance"));
}

/// The `--set full` capture of two GEMM launches (H100, through
/// aisp_profile_ncu on the GPU host): warp stalls and the roofline. Python
/// over the same CSV: long_scoreboard 7.757355 of 13.317104 stall cycles per
/// issued instruction (19 reasons) = 58.251 %; the DRAM peak is
/// 1.28 Kbyte/cycle × 2.619321 GHz = 3,352.73 GB/s.
#[test]
fn ncu_full_set_gives_warp_stalls_and_a_roofline_in_real_units() {
    let s = summarize(
        &[
            &read("train_good.ncu-full-gemm-raw.csv"),
            &read("train_good.ncu-full-gemm-details.csv"),
        ],
        100,
    )
    .unwrap();
    assert_eq!(s.kernel_count, 2);
    let k = &s.kernels[0];
    assert_eq!(k.kernel_name, NVJET);
    assert_eq!(k.duration_ns, Some(12_256.0));
    assert_eq!(k.warp_stalls[0].reason, "long_scoreboard");
    assert_eq!(k.warp_stalls[0].cycles_per_instruction, Some(7.757355));
    assert!(close(k.warp_stalls[0].share_pct, 58.251_066, 1e-4));
    assert_eq!(k.warp_stalls[1].reason, "wait");
    let r = k.roofline.as_ref().unwrap();
    assert!(close(r.peak_dram_gb_per_s, 3_352.730_88, 1e-6));
    assert!(close(r.dram_gb_per_s, 857.691_906, 1e-9));
    assert_eq!(r.bound, "memory");
    // Achieved is below the roof at its intensity (no percentage above 100).
    assert!(
        r.pct_of_roof > 0.0 && r.pct_of_roof <= 100.0,
        "{}",
        r.pct_of_roof
    );
    assert!(k.rules.iter().any(|r| r.rule == "CPIStall"));
}

/// The DDP workload on two H200 (torch.profiler through aisp_profile_torch on
/// the GPU host, one trace per rank). Python over the same files (lzma, json
/// with Decimal timestamps): the union of non-NCCL kernels is 45,743,449 ns on
/// rank 0 (846 of 922 kernels) and 46,890,211 ns on rank 1 (879 of 956), so
/// rank 1 computes (46,890,211 − 45,743,449) / 46,890,211 = 2.45 % longer.
#[test]
fn two_real_ddp_ranks_are_compared() {
    let load = |r: u32| {
        aisp_profile::kineto::load(
            &data(&format!("ddp.rank{r}.kineto.json.xz")),
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("rank {r}: {e}"))
    };
    let a = aisp_profile::kineto::analyze(&[load(0), load(1)], Limits::default());
    let c = a.cross_rank.unwrap();
    assert_eq!(c.ranks.len(), 2);
    assert_eq!(c.ranks[0].compute_ns, 45_743_449);
    assert_eq!(c.ranks[1].compute_ns, 46_890_211);
    assert_eq!(c.slowest_index, 1);
    assert!(close(c.compute_imbalance_pct, 2.4456, 1e-3));
    // A 2.4 % difference is below the imbalance rule's threshold.
    assert!(a.findings.iter().all(|f| f.id != "rank_imbalance"));
}
