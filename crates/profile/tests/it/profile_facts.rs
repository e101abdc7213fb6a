//! The facts of the fixtures README and nsys-anchors §4, asserted exactly
//! through the profile library (every figure was computed independently with
//! the sqlite3 CLI).

#![allow(clippy::type_complexity)] // expected-value tables read best inline

use crate::profile_common;

use aisp_profile::WindowKind;
use aisp_profile::classify::KernelClass;
use aisp_profile::gaps::{self, WindowGaps};
use aisp_profile::summary::{self, NameKey, SummaryOptions};
use aisp_profile::utilization::{self, WindowBusy};
use aisp_profile::{self as profile, Profile, ResolvedScope, Scope};
use profile_common::{close, open};

fn all(p: &Profile) -> ResolvedScope {
    p.resolve(&Scope::default()).unwrap()
}

fn busy(p: &Profile, device: i64) -> Vec<WindowBusy> {
    let u = utilization::utilization(p, &all(p), 30, 50.0).unwrap();
    u.devices
        .into_iter()
        .find(|d| d.device == device)
        .unwrap()
        .windows
}

fn busy_of(w: &[WindowBusy], kind: WindowKind) -> &WindowBusy {
    w.iter()
        .find(|w| w.window.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} window"))
}

fn gaps_of(p: &Profile, device: i64) -> Vec<WindowGaps> {
    let g = gaps::gaps(p, &all(p), 1_000_000, 5).unwrap();
    g.devices
        .into_iter()
        .find(|d| d.device == device)
        .unwrap()
        .windows
}

fn gap_window(w: &[WindowGaps], kind: WindowKind) -> (u64, i64, i64, i64) {
    let g = w.iter().find(|g| g.window.kind == kind).unwrap();
    (g.count, g.total_ns, g.largest_ns, g.smallest_ns)
}

// ---------------------------------------------------------------------------------------------
// train_good

#[test]
fn train_good_info_and_kernels() {
    let p = open("train_good.sqlite");
    let v = p.version();
    assert_eq!(v.schema_version.as_deref(), Some("3.20.3"));
    assert_eq!(v.product_version.as_deref(), Some("2025.3.2.0"));
    let info = profile::info::info(&p).unwrap();
    assert_eq!(info.gpus.len(), 1);
    assert_eq!(info.gpus[0].name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(info.gpus[0].source, "TARGET_INFO_GPU");
    assert_eq!(info.gpus[0].sm_count, Some(132));
    let proc = info.processes.iter().find(|p| p.pid == 883).unwrap();
    assert_eq!(proc.name.as_deref(), Some("python3"));
    let t883 = proc.threads.iter().find(|t| t.tid == 883).unwrap();
    let t935 = proc.threads.iter().find(|t| t.tid == 935).unwrap();
    assert_eq!((t883.kernels_launched, t935.kernels_launched), (1649, 2040));
    assert_eq!(t935.name.as_deref(), Some("pt_autograd_0"));
    assert_eq!(info.counts.kernels, 3689);
    assert_eq!(info.counts.memcpys, 97);
    assert_eq!(info.counts.memsets, 40);
    assert_eq!(info.counts.nvtx_ranges, 202);
    assert_eq!(info.streams.iter().filter(|s| s.kernels > 0).count(), 1);

    let k = profile::kernels::kernels(&p, &all(&p), NameKey::Short, 20).unwrap();
    assert_eq!((k.kernels, k.total_ns), (3689, 32_075_674));
    let top = &k.rows[0];
    assert_eq!(top.name, "multi_tensor_apply_kernel");
    assert_eq!(
        (top.total_ns, top.instances, top.time_pct),
        (10_537_055, 120, 32.9)
    );
    let tc = k
        .classes
        .iter()
        .find(|c| c.class == KernelClass::GemmTensorCore)
        .unwrap();
    assert_eq!(
        (tc.instances, tc.total_ns, tc.time_pct),
        (920, 8_335_440, 26.0)
    );
    assert!(
        k.classes
            .iter()
            .all(|c| c.class != KernelClass::GemmSimtFp32)
    );
    let d = &k.devices[0];
    assert_eq!(
        (
            d.short_kernels,
            d.short_count_pct,
            d.short_total_ns,
            d.short_time_pct
        ),
        (1688, 45.76, 4_086_115, 12.74)
    );

    // nsys default naming: demangled #1 is FusedAdam, 32.7 % x80.
    let r = summary::kern_sum(&p, &all(&p), NameKey::Demangled, 5).unwrap();
    assert!(
        r.rows[0].name.contains("FusedAdamMathFunctor"),
        "{}",
        r.rows[0].name
    );
    assert_eq!((r.rows[0].time_pct, r.rows[0].instances), (32.7, 80));
}

#[test]
fn train_good_windows_busy_and_gaps() {
    let p = open("train_good.sqlite");
    let w = busy(&p, 0);
    let span = busy_of(&w, WindowKind::Span);
    assert_eq!(
        (span.window.start_ns, span.window.end_ns),
        (7_554_058_424, 8_151_033_731)
    );
    assert_eq!(
        (span.window.length_ns, span.busy_ns),
        (596_975_307, 32_075_674)
    );
    let steps = busy_of(&w, WindowKind::Steps);
    assert_eq!(
        (
            steps.window.start_ns,
            steps.window.end_ns,
            steps.window.length_ns
        ),
        // The steps on the GPU timeline (step_0's first operation to step_39's last), as
        // scripts/ledger_sql.py finds them from the tables; the NVTX ranges themselves span
        // 7,536,978,629 → 8,142,623,443.
        (7_542_435_040, 8_142_734_358, 600_299_318)
    );
    let steady = busy_of(&w, WindowKind::Steady);
    assert_eq!(
        (span.busy_pct, steps.busy_pct, steady.busy_pct),
        (5.37, 5.34, 8.83)
    );

    let g = gaps_of(&p, 0);
    assert_eq!(
        gap_window(&g, WindowKind::Span),
        (53, 431_696_550, 77_947_617, 1_455_639)
    );
    let s = gap_window(&g, WindowKind::Steps);
    assert_eq!((s.0, s.1, s.2), (53, 435_021_969, 77_947_617));
    // The steady window starts at step_1's first kernel: the 38 sleeps of steps 1–38 (python over the tables:
    // kernel-union gaps over 1 ms inside 7,789,729,648 → 8,142,734,358).
    assert_eq!(
        gap_window(&g, WindowKind::Steady),
        (38, 197_331_109, 5_368_319, 5_132_000)
    );

    // The largest gap is lazy module loading in step_0's forward.
    let listed = gaps::gaps(&p, &all(&p), 1_000_000, 3).unwrap();
    let first = &listed.devices[0].gaps[0];
    assert_eq!(first.length_ns, 77_947_617);
    assert_eq!(first.step.as_deref(), Some("step_0"));
    assert_eq!(first.cause, "module_loading");
    assert!(first.cpu.iter().any(|c| c.name == "cuLibraryLoadData"));
    assert!(
        first
            .cpu
            .iter()
            .any(|c| c.source == "nvtx" && c.name == "forward")
    );
}

#[test]
fn train_good_steady_gaps_are_the_data_stall() {
    let p = open("train_good.sqlite");
    let w = busy(&p, 0);
    let steady = busy_of(&w, WindowKind::Steady).window;
    let scope = p
        .resolve(&Scope {
            start_ns: Some(steady.start_ns),
            end_ns: Some(steady.end_ns),
            ..Scope::default()
        })
        .unwrap();
    let g = gaps::gaps(&p, &scope, 1_000_000, 50).unwrap();
    let listed = &g.devices[0].gaps;
    // Every steady-state stall: the launching thread sleeps in NVTX `data` (time.sleep(0.005)).
    let stalls: Vec<_> = listed.iter().filter(|g| g.length_ns >= 5_000_000).collect();
    assert!(stalls.len() >= 38, "{}", stalls.len());
    for gap in stalls {
        assert!(
            gap.cpu
                .iter()
                .any(|c| c.source == "nvtx" && c.name == "data"),
            "{gap:?}"
        );
        assert_eq!(gap.launch_thread.as_deref(), Some("python3"));
    }
}

#[test]
fn train_good_memory_nvtx_and_steps() {
    let p = open("train_good.sqlite");
    let m = profile::memory::memory(&p, &all(&p), 20).unwrap();
    let class = |dir: &str, src: &str, dst: &str| {
        m.by_class
            .iter()
            .find(|c| {
                c.direction == dir
                    && c.src_kind.as_deref() == Some(src)
                    && c.dst_kind.as_deref() == Some(dst)
            })
            .map(|c| (c.count, c.bytes, c.time_ns))
            .unwrap_or_else(|| panic!("no {dir} {src}->{dst}"))
    };
    assert_eq!(
        class("Host-to-Device", "Pageable", "Device"),
        (16, 134_283_264, 14_970_816)
    );
    assert_eq!(
        class("Host-to-Device", "Pinned", "Device"),
        (40, 167_772_160, 3_144_015)
    );
    assert_eq!(class("Device-to-Host", "Device", "Pinned"), (1, 4, 2_848));
    assert_eq!(
        class("Device-to-Device", "Device", "Device"),
        (40, 167_772_160, 83_552)
    );
    assert_eq!(
        (m.memset.count, m.memset.bytes, m.memset.time_ns),
        (40, 160, 31_072)
    );
    assert_eq!(
        (
            m.pageable_async.count,
            m.pageable_async.in_steps,
            m.pageable_async.bytes
        ),
        (16, 0, 134_283_264)
    );
    assert_eq!(
        m.blocking.sync_memcpy_calls + m.blocking.sync_memset_calls,
        0
    );
    assert_eq!(
        m.mem_kind_labels.get(&0).map(String::as_str),
        Some("Pageable")
    );
    assert_eq!(
        m.mem_kind_labels.get(&1).map(String::as_str),
        Some("Pinned")
    );

    let s = summary::summary(
        &p,
        &all(&p),
        &SummaryOptions {
            limit: Some(100),
            ..Default::default()
        },
    )
    .unwrap();
    let api = s.cuda_api_sum.unwrap();
    let sync = api
        .rows
        .iter()
        .find(|r| r.name == "cudaStreamSynchronize")
        .unwrap();
    assert_eq!(
        (sync.instances, sync.total_ns, sync.max_ns),
        (17, 227_174, 21_560)
    );
    let nvtx = s.nvtx_sum.unwrap();
    for name in ["data", "forward", "backward", "optimizer"] {
        assert_eq!(
            nvtx.rows.iter().find(|r| r.name == name).unwrap().instances,
            40,
            "{name}"
        );
    }
    let cublas = nvtx
        .rows
        .iter()
        .find(|r| r.name == "cublasCreate_v2")
        .unwrap();
    assert_eq!(cublas.instances, 2);
    assert_eq!(nvtx.rows_total, 40 + 4 + 1);

    let it = profile::iterations::iterations(&p, &all(&p), None, 100).unwrap();
    assert_eq!(it.rule, "step_convention");
    let ps = &it.processes[0];
    assert_eq!((ps.pid, ps.step_count), (883, 40));
    let cpu = ps.cpu_all.as_ref().unwrap();
    assert_eq!(
        (cpu.min, cpu.median, cpu.max),
        (8_590_726, 9_106_425.0, 247_530_793)
    );
    let cpu1 = ps.cpu_after_first.as_ref().unwrap();
    assert_eq!(
        (cpu1.min, cpu1.median, cpu1.max),
        (8_590_726, 9_080_906.0, 10_684_561)
    );
    let gpu = ps.gpu_union_all.as_ref().unwrap();
    assert_eq!(
        (gpu.min, gpu.median, gpu.max),
        (792_540, 799_084.5, 901_470)
    );
    let gpu1 = ps.gpu_union_after_first.as_ref().unwrap();
    assert_eq!(
        (gpu1.min, gpu1.median, gpu1.max),
        (792_540, 798_909.0, 806_876)
    );
    assert_eq!(
        (ps.kernels_per_step, ps.kernels_per_step_same_thread),
        (91.0, 40.0)
    );
    let first = ps.first_step.as_ref().unwrap();
    assert_eq!((first.kernels, first.kernels_same_thread), (139, 88));
    assert!(
        ps.steps[1..]
            .iter()
            .all(|s| s.kernels == 91 && s.kernels_same_thread == 40)
    );
    assert!(ps.cpu_to_gpu_ratio.unwrap() > 10.0);
}

// ---------------------------------------------------------------------------------------------
// h200_matmul_small

#[test]
fn h200_matmul_small_facts() {
    let p = open("h200_matmul_small.sqlite");
    assert_eq!(p.version().schema_version.as_deref(), Some("3.20.3"));
    assert!(p.tables().memset.is_none() && p.tables().osrt.is_none());
    let info = profile::info::info(&p).unwrap();
    assert_eq!(info.gpus[0].name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(info.gpus[0].bus_location.as_deref(), Some("0000:00:06.0"));
    assert_eq!(info.processes.iter().filter(|p| p.kernels > 0).count(), 1);
    let proc = info.processes.iter().find(|p| p.pid == 645).unwrap();
    assert_eq!(proc.threads.len(), 1);

    let r = summary::kern_sum(&p, &all(&p), NameKey::Short, 10).unwrap();
    assert_eq!((r.total_ns, r.rows_total), (53_909_072, 3));
    let gemm = &r.rows[0];
    assert!(
        gemm.name
            .starts_with("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8")
    );
    assert_eq!(
        (gemm.time_pct, gemm.total_ns, gemm.instances),
        (98.8, 53_242_485, 20)
    );
    // 53,242,485 / 20 = 2,662,124.25: half away from zero gives .3.
    assert_eq!(
        (gemm.avg_ns, gemm.med_ns, gemm.stddev_ns),
        (2_662_124.3, 2_661_135.0, 3_556.2)
    );

    let k = profile::kernels::kernels(&p, &all(&p), NameKey::Short, 5).unwrap();
    assert_eq!(k.rows[0].class.class, KernelClass::GemmSimtFp32);
    let simt = k
        .classes
        .iter()
        .find(|c| c.class == KernelClass::GemmSimtFp32)
        .unwrap();
    assert_eq!(simt.time_pct, 98.8);
    assert_eq!(k.devices[0].short_kernels, 0);

    let w = busy(&p, 0);
    let span = busy_of(&w, WindowKind::Span);
    assert_eq!(
        (span.window.start_ns, span.window.length_ns, span.busy_pct),
        (3_868_424_902, 165_602_173, 32.55)
    );
    // One NVTX `step` only: the ledger needs two steps for a steps window, so the span is the one period.
    assert!(
        w.iter()
            .all(|x| !matches!(x.window.kind, WindowKind::Steps | WindowKind::Steady)),
        "one step: no steps or steady window"
    );

    let g = gaps_of(&p, 0);
    let (n, total, largest, _) = gap_window(&g, WindowKind::Span);
    assert_eq!((n, total, largest), (2, 111_397_935, 90_786_510));

    let m = profile::memory::memory(&p, &all(&p), 5).unwrap();
    assert_eq!(m.by_class.len(), 1);
    let c = &m.by_class[0];
    assert_eq!(
        (
            c.direction.as_str(),
            c.src_kind.as_deref(),
            c.dst_kind.as_deref()
        ),
        ("Device-to-Host", Some("Device"), Some("Pageable"))
    );
    assert_eq!((c.count, c.bytes, c.time_ns), (1, 67_108_864, 41_643_358));
    assert_eq!((m.pageable_async.count, m.pageable_async.in_steps), (1, 0));
    assert_eq!(
        m.pageable_async.largest[0].api_duration_ns,
        Some(93_109_557)
    );
    assert_eq!(m.blocking.sync_memcpy_calls, 0);

    let s = summary::summary(&p, &all(&p), &SummaryOptions::default()).unwrap();
    let api = s.cuda_api_sum.unwrap();
    let row = |n: &str| {
        api.rows
            .iter()
            .find(|r| r.name == n)
            .map(|r| (r.instances, r.total_ns))
            .unwrap()
    };
    assert_eq!(row("cudaStreamSynchronize"), (1, 12_552));
    assert_eq!(row("cudaDeviceSynchronize"), (1, 9_552));
    assert!(s.unavailable.iter().any(|u| u.report == "osrt_sum"));

    let it = profile::iterations::iterations(&p, &all(&p), None, 10).unwrap();
    let st = &it.processes[0].steps[0];
    assert_eq!(
        (st.name.as_str(), st.cpu_ns, st.kernels),
        ("step", 115_045_894, 40)
    );
    assert_eq!(
        (st.gpu_union_ns, st.gpu_span_ns, st.first_kernel_lag_ns),
        (53_867_857, Some(74_774_448), Some(90_686_518))
    );
}

// ---------------------------------------------------------------------------------------------
// ddp

#[test]
fn ddp_per_device_facts() {
    let p = open("ddp.sqlite");
    let info = profile::info::info(&p).unwrap();
    let g0 = info.gpus.iter().find(|g| g.device == 0).unwrap();
    let g1 = info.gpus.iter().find(|g| g.device == 1).unwrap();
    assert_eq!(
        (g0.bus_location.as_deref(), g1.bus_location.as_deref()),
        (Some("0000:00:06.0"), Some("0000:00:07.0"))
    );
    assert!(g0.uuid.as_deref().unwrap().starts_with("d47e8c5f"));
    assert!(g1.uuid.as_deref().unwrap().starts_with("0450eaf6"));
    assert_eq!(info.counts.osrt_calls, Some(1_282_481));

    let k = profile::kernels::kernels(&p, &all(&p), NameKey::Short, 3).unwrap();
    assert_eq!(k.rows[0].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    assert_eq!(
        (k.rows[0].time_pct, k.rows[0].total_ns, k.rows[0].instances),
        (43.3, 180_313_015, 496)
    );
    let dev = |d: i64| k.devices.iter().find(|x| x.device == d).unwrap();
    assert_eq!((dev(0).kernels, dev(0).total_ns), (3592, 176_757_905));
    assert_eq!((dev(1).kernels, dev(1).total_ns), (3592, 239_383_895));
    assert_eq!(
        (
            dev(0).short_kernels,
            dev(0).short_count_pct,
            dev(0).short_total_ns,
            dev(0).short_time_pct
        ),
        (768, 21.38, 1_648_950, 0.93)
    );
    assert_eq!(
        (
            dev(1).short_kernels,
            dev(1).short_count_pct,
            dev(1).short_total_ns,
            dev(1).short_time_pct
        ),
        (792, 22.05, 1_549_594, 0.65)
    );
    // Per device the all-reduce is 35.3 % / 49.3 % of kernel time.
    for (d, pct) in [(0, 35.3), (1, 49.3)] {
        let s = p
            .resolve(&Scope {
                device: Some(d),
                ..Scope::default()
            })
            .unwrap();
        let r = summary::kern_sum(&p, &s, NameKey::Short, 1).unwrap();
        assert_eq!(
            (r.rows[0].name.as_str(), r.rows[0].time_pct),
            ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", pct)
        );
    }

    let expect = [
        (
            0,
            150_186_366,
            19_232_272_901,
            558_962_571,
            26.87,
            19_303_768_000,
            487_467_472,
            30.19,
            84.78,
        ),
        (
            1,
            182_966_536,
            19_232_426_900,
            557_912_550,
            32.79,
            19_298_257_945,
            492_081_505,
            36.10,
            97.97,
        ),
    ];
    for (d, union, s0, span, p_span, st0, steps_len, p_steps, p_steady) in expect {
        let w = busy(&p, d);
        let sp = busy_of(&w, WindowKind::Span);
        assert_eq!(
            (
                sp.busy_ns,
                sp.window.start_ns,
                sp.window.length_ns,
                sp.busy_pct
            ),
            (union, s0, span, p_span),
            "dev{d}"
        );
        let st = busy_of(&w, WindowKind::Steps);
        assert_eq!(
            (st.window.start_ns, st.window.length_ns, st.busy_pct),
            (st0, steps_len, p_steps),
            "dev{d}"
        );
        assert_eq!(busy_of(&w, WindowKind::Steady).busy_pct, p_steady, "dev{d}");
    }

    let g = gaps_of(&p, 0);
    let s = gap_window(&g, WindowKind::Span);
    assert_eq!((s.0, s.1, s.2), (19, 374_961_725, 102_124_541));
    // Steps and steady windows on the GPU timeline (scripts/ledger_sql.py), gaps of the kernel union over
    // 1 ms inside them from the tables.
    assert_eq!(
        (
            gap_window(&g, WindowKind::Steps).0,
            gap_window(&g, WindowKind::Steps).1
        ),
        (15, 306_606_423)
    );
    let st = gap_window(&g, WindowKind::Steady);
    assert_eq!((st.0, st.1), (1, 1_367_802));
    let g = gaps_of(&p, 1);
    let s = gap_window(&g, WindowKind::Span);
    assert_eq!((s.0, s.1, s.2), (17, 365_819_630, 107_832_301));
    assert_eq!(
        (
            gap_window(&g, WindowKind::Steps).0,
            gap_window(&g, WindowKind::Steps).1
        ),
        (13, 305_395_451)
    );
    assert!(
        g.iter()
            .all(|w| w.window.kind != WindowKind::Steady || w.count == 0)
    );
}

#[test]
fn ddp_nccl_overlap_and_steps() {
    let p = open("ddp.sqlite");
    let n = profile::nccl::nccl(&p, &all(&p)).unwrap();
    use profile::nccl::Collective::*;
    let row = |d: i64, c| {
        let r = n
            .collectives
            .iter()
            .find(|r| r.device == d && r.collective == c)
            .unwrap();
        (r.stream, r.count, r.total_ns)
    };
    assert_eq!(row(0, AllReduce), (17, 248, 62_380_478));
    assert_eq!(row(0, Broadcast), (17, 7, 2_533_143));
    assert_eq!(row(0, AllGather), (17, 1, 367_455));
    assert_eq!(row(1, AllReduce), (17, 248, 117_932_537));
    assert_eq!(row(1, Broadcast), (17, 7, 5_128_534));
    assert_eq!(row(1, AllGather), (17, 1, 114_367));
    let tot: Vec<i64> = n.devices.iter().map(|d| d.total_ns).collect();
    assert_eq!(tot, vec![65_281_076, 123_175_438]);
    assert_eq!(n.ranks, 2);
    assert!(!n.message_sizes_recorded);

    let o = profile::overlap::overlap(&p, &all(&p)).unwrap();
    for (d, ov, pct, steps_pct) in [(0, 26_571_539, 40.70, 42.09), (1, 56_417_359, 45.80, 47.54)] {
        let dev = o.devices.iter().find(|x| x.device == d).unwrap();
        assert_eq!(
            (
                dev.compute_streams.clone(),
                dev.communication_streams.clone(),
                dev.shared_stream
            ),
            (vec![7], vec![17], false)
        );
        let span = dev
            .windows
            .iter()
            .find(|w| w.window.kind == WindowKind::Span)
            .unwrap();
        assert_eq!((span.overlap_ns, span.overlap_pct), (ov, pct), "dev{d}");
        let steps = dev
            .windows
            .iter()
            .find(|w| w.window.kind == WindowKind::Steps)
            .unwrap();
        assert_eq!(steps.overlap_pct, steps_pct, "dev{d}");
    }

    let it = profile::iterations::iterations(&p, &all(&p), None, 100).unwrap();
    let expect = [
        (
            640,
            7_900_414,
            8_674_291.5,
            346_897_820,
            8_666_402.0,
            12_693_769,
            (6_874_884, 7_417_457.0, 7_870_108),
            (7_400_065.0, 7_727_200),
        ),
        (
            641,
            5_229_906,
            7_530_903.5,
            347_944_450,
            7_240_665.0,
            10_044_452,
            (7_734_783, 8_484_987.0, 15_734_816),
            (8_425_598.0, 9_686_770),
        ),
    ];
    for (pid, min, med, max, med1, max1, gpu, gpu1) in expect {
        let ps = it.processes.iter().find(|x| x.pid == pid).unwrap();
        assert_eq!(ps.step_count, 20);
        let c = ps.cpu_all.as_ref().unwrap();
        assert_eq!((c.min, c.median, c.max), (min, med, max), "pid {pid}");
        let c1 = ps.cpu_after_first.as_ref().unwrap();
        assert_eq!((c1.median, c1.max), (med1, max1), "pid {pid}");
        let g = ps.gpu_union_all.as_ref().unwrap();
        assert_eq!((g.min, g.median, g.max), gpu, "pid {pid}");
        let g1 = ps.gpu_union_after_first.as_ref().unwrap();
        assert_eq!((g1.median, g1.max), gpu1, "pid {pid}");
        assert_eq!(
            (ps.kernels_per_step, ps.kernels_per_step_same_thread),
            (176.0, 64.0)
        );
        assert_eq!(ps.steps[0].kernels, 236);
        assert_eq!(ps.steps[1].kernels, 178);
        // All-reduce per step: 1 in step_0, then 13 each (248 in all).
        let ar: Vec<u64> = ps
            .steps
            .iter()
            .map(|s| s.collectives.get(&AllReduce).copied().unwrap_or(0))
            .collect();
        assert_eq!(ar[0], 1);
        assert!(ar[1..].iter().all(|&n| n == 13));
        assert_eq!(ar.iter().sum::<u64>(), 248);
    }
}

#[test]
fn ddp_launch_join_uses_the_process() {
    let p = open("ddp.sqlite");
    let kernels = p.kernels().unwrap();
    let api = p.api().unwrap();
    let idx = p.launch_index().unwrap();
    assert!(!idx.correlation_only);
    // Every kernel has exactly one same-process launch; the correlationId-only join would be wrong.
    assert!(idx.kernel_launch.iter().all(Option::is_some));
    for (d, truth) in [(0, 176_757_905i64), (1, 239_383_895)] {
        let t: i64 = kernels
            .iter()
            .zip(&idx.kernel_launch)
            .filter(|(k, _)| k.device == d)
            .map(|(k, l)| {
                let a = &api[l.unwrap() as usize];
                assert_eq!(
                    profile::process_key(a.global_tid),
                    profile::process_key(k.global_pid)
                );
                k.dur()
            })
            .sum();
        assert_eq!(t, truth);
    }
    // The wrong join (correlationId only) inflates rows: 4,399 / 4,265.
    let mut by_corr: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for a in api {
        *by_corr.entry(a.correlation).or_default() += 1;
    }
    for (d, rows, inflated) in [(0, 4399usize, 231_375_554i64), (1, 4265, 317_130_167)] {
        let mut n = 0;
        let mut sum = 0;
        for k in kernels.iter().filter(|k| k.device == d) {
            let m = by_corr.get(&k.correlation).copied().unwrap_or(0);
            n += m;
            sum += m as i64 * k.dur();
        }
        assert_eq!((n, sum), (rows, inflated));
    }
    let nv = profile::nvtx::nvtx(&p, &all(&p), &Default::default()).unwrap();
    let names: std::collections::HashMap<&str, u64> = nv
        .names
        .iter()
        .map(|n| (n.name.as_str(), n.instances))
        .collect();
    let s = summary::summary(
        &p,
        &all(&p),
        &SummaryOptions {
            limit: Some(100),
            ..Default::default()
        },
    )
    .unwrap();
    let nvtx = s.nvtx_sum.unwrap();
    let count = |n: &str| {
        nvtx.rows
            .iter()
            .filter(|r| r.name == n)
            .map(|r| r.instances)
            .sum::<u64>()
    };
    assert_eq!(count("ncclAllReduce"), 2 * 248);
    assert_eq!(count("ncclBroadcast"), 2 * 7);
    assert_eq!(count("ncclAllGather"), 2);
    assert_eq!(count("cublasCreate_v2"), 2 * 2);
    let _ = names;
}

#[test]
fn ddp_sync_apis_per_process() {
    let p = open("ddp.sqlite");
    let expect: [(i64, &[(&str, u64, i64)]); 2] = [
        (
            640,
            &[
                ("cudaStreamWaitEvent", 1060, 1_687_177),
                ("cudaDeviceSynchronize", 1, 1_424_974),
                ("cudaStreamSynchronize", 66, 566_985),
                ("cudaEventSynchronize", 80, 240_359),
            ],
        ),
        (
            641,
            &[
                ("cudaDeviceSynchronize", 1, 34_152_849),
                ("cudaEventSynchronize", 80, 23_511_380),
                ("cudaStreamWaitEvent", 1060, 922_649),
                ("cudaStreamSynchronize", 66, 514_425),
            ],
        ),
    ];
    for (pid, rows) in expect {
        let s = p
            .resolve(&Scope {
                process: Some(pid),
                ..Scope::default()
            })
            .unwrap();
        let r = summary::summary(
            &p,
            &s,
            &SummaryOptions {
                reports: Some(vec!["cuda_api_sum".into()]),
                limit: Some(100),
                ..Default::default()
            },
        )
        .unwrap();
        let api = r.cuda_api_sum.unwrap();
        for (name, n, total) in rows {
            let row = api.rows.iter().find(|r| r.name == *name).unwrap();
            assert_eq!((row.instances, row.total_ns), (*n, *total), "{pid} {name}");
        }
        if pid == 641 {
            let ev = api
                .rows
                .iter()
                .find(|r| r.name == "cudaEventSynchronize")
                .unwrap();
            assert_eq!(ev.max_ns, 3_086_871);
        }
        let m = profile::memory::memory(&p, &s, 5).unwrap();
        assert_eq!(m.pageable_async.count, 177, "pid {pid}");
        assert_eq!(m.blocking.sync_memcpy_calls, 0);
    }
    let m = profile::memory::memory(&p, &all(&p), 5).unwrap();
    assert_eq!(m.pageable_async.count, 354);
    let dev0 = p
        .resolve(&Scope {
            device: Some(0),
            ..Scope::default()
        })
        .unwrap();
    let m0 = profile::memory::memory(&p, &dev0, 500).unwrap();
    let h2d = m0
        .pageable_async
        .largest
        .iter()
        .filter(|c| c.direction == "Host-to-Device")
        .count();
    let d2h = m0
        .pageable_async
        .largest
        .iter()
        .filter(|c| c.direction == "Device-to-Host")
        .count();
    assert_eq!((h2d, d2h), (174, 3));
}

// ---------------------------------------------------------------------------------------------
// infer_decode

#[test]
fn infer_decode_facts() {
    let p = open("infer_decode.sqlite");
    let k = profile::kernels::kernels(&p, &all(&p), NameKey::Short, 10).unwrap();
    assert_eq!((k.kernels, k.total_ns), (63_685, 395_934_974));
    let d = &k.devices[0];
    assert_eq!((d.short_kernels, d.short_count_pct), (43_914, 68.96));
    let row = |n: &str| {
        k.rows
            .iter()
            .find(|r| r.name == n)
            .map(|r| (r.instances, r.total_ns))
            .unwrap()
    };
    assert_eq!(row("CatArrayBatchedCopy"), (6_240, 184_177_370));
    assert_eq!(k.rows[0].time_pct, 46.5);
    assert_eq!(
        row("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_NNT"),
        (9_216, 53_028_669)
    );
    assert_eq!(row("vectorized_elementwise_kernel"), (31_622, 48_951_717));
    assert_eq!(row("Kernel2"), (130, 25_905_423));
    let sdpa = k
        .rows
        .iter()
        .find(|r| r.name.contains("sdpa") && r.name.contains("flash"))
        .unwrap();
    assert_eq!((sdpa.instances, sdpa.total_ns), (3_072, 24_077_966));
    assert_eq!(sdpa.class.class, KernelClass::Attention);
    // Kernel2 is a cutlass tensor-op bf16 GEMM: only its demangled name says so.
    let k2 = k.rows.iter().find(|r| r.name == "Kernel2").unwrap();
    assert_eq!(k2.class.class, KernelClass::GemmTensorCore);
    assert!(k2.demangled.as_deref().unwrap().contains("tensorop_bf16"));
    let copy = k
        .rows
        .iter()
        .find(|r| r.name == "CatArrayBatchedCopy")
        .unwrap();
    assert_eq!(copy.class.class, KernelClass::Copy);

    let w = busy(&p, 0);
    let span = busy_of(&w, WindowKind::Span);
    assert_eq!(
        (span.busy_ns, span.window.length_ns, span.busy_pct),
        (395_907_294, 8_597_747_958, 4.60)
    );
    let info = profile::info::info(&p).unwrap();
    assert_eq!(info.counts.nvtx_ranges, 133);
    let it = profile::iterations::iterations(&p, &all(&p), None, 10).unwrap();
    assert_eq!(
        (it.rule.as_str(), it.family.as_deref()),
        ("numbered_family", Some("request"))
    );
    assert_eq!(it.processes[0].step_count, 2);
}

// ---------------------------------------------------------------------------------------------
// h100_2gpu_1s, healthy_1pct, mock (nsys-anchors §4)

#[test]
fn h100_top_kernels_table_is_exact() {
    let p = open("h100_2gpu_1s.sqlite");
    assert_eq!(p.version().schema_version.as_deref(), Some("3.25.0"));
    assert_eq!(p.version().product_version.as_deref(), Some("2026.2.1.210"));
    let r = summary::kern_sum(&p, &all(&p), NameKey::Short, 10).unwrap();
    assert_eq!(r.total_ns, 44_829_522);
    assert_eq!(r.rows_total, 15);
    #[rustfmt::skip]
    let expect: [(f64, i64, u64, f64, f64, i64, i64, f64, &str); 10] = [
        (69.4, 31_121_662, 248, 125_490.6, 133_296.0, 57_473, 306_210, 45_956.4, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"),
        (10.7, 4_780_503, 26, 183_865.5, 209_857.0, 89_281, 239_104, 64_733.8, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"),
        (6.9, 3_075_500, 1_836, 1_675.1, 1_536.0, 1_120, 4_096, 397.5, "vectorized_elementwise_kernel"),
        (4.9, 2_199_305, 240, 9_163.8, 8_768.0, 5_184, 18_592, 4_250.1, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_split_k_kernel__5x_cublas"),
        (2.3, 1_044_672, 448, 2_331.9, 2_144.0, 1_664, 7_424, 754.1, "elementwise_kernel"),
        (2.3, 1_044_610, 116, 9_005.3, 9_184.0, 2_656, 9_504, 966.5, "reduce_kernel"),
        (0.9, 425_155, 172, 2_471.8, 2_464.0, 1_472, 3_040, 246.4, "unrolled_elementwise_kernel"),
        (0.6, 283_873, 56, 5_069.2, 4_672.0, 4_544, 7_584, 986.5, "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"),
        (0.5, 230_113, 48, 4_794.0, 4_800.0, 4_704, 4_864, 37.7, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"),
        (0.5, 220_992, 60, 3_683.2, 3_104.0, 3_040, 7_328, 1_435.2, "vectorized_gather_kernel"),
    ];
    for (row, e) in r.rows.iter().zip(expect) {
        assert_eq!(
            (
                row.time_pct,
                row.total_ns,
                row.instances,
                row.min_ns,
                row.max_ns,
                row.name.as_str()
            ),
            (e.0, e.1, e.2, e.5, e.6, e.8)
        );
        assert!(
            close(row.avg_ns, e.3, 0.1)
                && close(row.med_ns, e.4, 0.1)
                && close(row.stddev_ns, e.7, 0.1),
            "{row:?}"
        );
    }
    // With demangled names (the nsys default) #4 is a MeanOps reduce_kernel, 1,028,034 ns x112.
    let d = summary::kern_sum(&p, &all(&p), NameKey::Demangled, 10).unwrap();
    assert_eq!(d.rows_total, 41);
    assert_eq!(d.rows[0].total_ns, 31_121_662);
    assert!(d.rows[3].name.contains("reduce_kernel") && d.rows[3].name.contains("MeanOps"));
    assert_eq!((d.rows[3].total_ns, d.rows[3].instances), (1_028_034, 112));
    assert_eq!((d.rows[4].total_ns, d.rows[4].instances), (494_144, 224));
    // All fp32 SIMT (ffma) GEMMs, never tensor cores despite `xmma`.
    let k = profile::kernels::kernels(&p, &all(&p), NameKey::Short, 10).unwrap();
    assert!(
        k.classes
            .iter()
            .all(|c| c.class != KernelClass::GemmTensorCore)
    );
    assert_eq!(k.rows[0].class.class, KernelClass::GemmSimtFp32);
}

#[test]
fn h100_devices_memory_and_attribution() {
    let p = open("h100_2gpu_1s.sqlite");
    let info = profile::info::info(&p).unwrap();
    assert!(p.tables().gpu_info.is_none());
    assert_eq!(info.gpus.len(), 2);
    assert!(
        info.gpus
            .iter()
            .all(|g| g.name.is_none() && g.sm_count.is_none())
    );
    assert_eq!(info.environment.visible_devices.len(), 2);
    assert_eq!(
        info.environment.driver_version.as_deref(),
        Some("580.95.05")
    );
    assert_eq!(
        info.environment.cuda_driver_version.as_deref(),
        Some("13.0")
    );
    assert_eq!(info.counts.kernels, 3442);
    assert_eq!(info.duration.kernel_span_ns, Some(960_485_009));
    assert_eq!(info.duration.activity_span_ns, 969_447_605);
    assert_eq!(info.counts.nvtx_ranges, 16_782);
    let streams: Vec<(i64, i64)> = info
        .streams
        .iter()
        .filter(|s| s.kernels > 0)
        .map(|s| (s.device, s.stream))
        .collect();
    assert_eq!(streams, vec![(0, 7), (1, 15)]);
    let pids: Vec<(i64, Vec<i64>)> = info
        .processes
        .iter()
        .filter(|p| p.kernels > 0)
        .map(|p| (p.pid, p.devices.clone()))
        .collect();
    assert_eq!(pids, vec![(111, vec![0]), (112, vec![1])]);

    for (d, union, span, pct) in [
        (0, 22_385_163, 960_485_009, 2.33),
        (1, 22_444_359, 960_307_663, 2.34),
    ] {
        let w = busy(&p, d);
        let s = busy_of(&w, WindowKind::Span);
        assert_eq!(
            (s.busy_ns, s.window.length_ns, s.busy_pct),
            (union, span, pct)
        );
        assert_eq!(s.idle_ns, span - union);
    }
    // All GPU ops (kernel + memcpy + memset) over that op span: 99.32 % / 99.33 %.
    let u = utilization::utilization(&p, &all(&p), 30, 50.0).unwrap();
    for (d, pct) in [(0, 99.32), (1, 99.33)] {
        let dev = u.devices.iter().find(|x| x.device == d).unwrap();
        let au = utilization::device_union(&p, &all(&p), d, true).unwrap();
        let (s, e) = (au.first().unwrap().0, au.last().unwrap().1);
        assert_eq!(
            profile::stats::pct2(profile::intervals::length(&au), e - s),
            pct
        );
        assert_eq!(dev.concurrency, 1.0);
    }

    let m = profile::memory::memory(&p, &all(&p), 10).unwrap();
    let dir = |n: &str| {
        m.by_direction
            .iter()
            .find(|d| d.direction == n)
            .map(|d| (d.count, d.bytes, d.time_ns))
            .unwrap()
    };
    assert_eq!(dir("Host-to-Device"), (450, 50_950_507_584, 1_841_630_798));
    assert_eq!(dir("Device-to-Host"), (4, 18, 7_872));
    assert_eq!(dir("Device-to-Device"), (450, 59_368_472_576, 39_203_544));
    let kinds = |s: &str, d: &str| {
        m.by_class
            .iter()
            .filter(|c| c.src_kind.as_deref() == Some(s) && c.dst_kind.as_deref() == Some(d))
            .map(|c| c.count)
            .sum::<u64>()
    };
    assert_eq!(
        (
            kinds("Device", "Device"),
            kinds("Pinned", "Device"),
            kinds("Pageable", "Device"),
            kinds("Device", "Pinned")
        ),
        (450, 446, 4, 4)
    );
    assert_eq!(
        (m.memset.count, m.memset.bytes, m.memset.time_ns),
        (22, 17_672, 29_216)
    );
    // The true pageable async copies: 4 ops / 3,136 B (nsys-ai flags the 450 pinned ones instead).
    assert_eq!((m.pageable_async.count, m.pageable_async.bytes), (4, 3_136));

    let s = summary::summary(&p, &all(&p), &SummaryOptions::default()).unwrap();
    let api = s.cuda_api_sum.unwrap();
    let sync = api
        .rows
        .iter()
        .find(|r| r.name == "cudaStreamSynchronize")
        .unwrap();
    assert_eq!(
        (sync.instances, sync.total_ns, sync.max_ns),
        (8, 856_929_451, 428_468_918)
    );
    let wait = api
        .rows
        .iter()
        .find(|r| r.name == "cudaStreamWaitEvent")
        .unwrap();
    assert_eq!((wait.instances, wait.total_ns), (236, 542_161));

    // Kernels with a same-process launch row: 1,632 of 3,442; all of them inside push/pop ranges, max depth 5.
    let nv = profile::nvtx::nvtx(&p, &all(&p), &Default::default()).unwrap();
    assert_eq!(nv.ranges, 16_782);
    assert_eq!(nv.attribution.kernels, 3442);
    assert_eq!(nv.attribution.kernels_with_launch, 1632);
    assert_eq!(nv.attribution.kernels_in_ranges_same_thread, 1632);
    assert_eq!(nv.attribution.max_depth_same_thread, 5);
    let o = profile::overlap::overlap(&p, &all(&p)).unwrap();
    for (d, compute) in [(0, 22_385_163), (1, 22_444_359)] {
        let w = &o.devices.iter().find(|x| x.device == d).unwrap().windows[0];
        assert_eq!(
            (
                w.compute_only_ns,
                w.communication_only_ns,
                w.overlap_ns,
                w.overlap_pct
            ),
            (compute, 0, 0, 0.0)
        );
    }
    let n = profile::nccl::nccl(&p, &all(&p)).unwrap();
    assert!(n.collectives.is_empty());
}

#[test]
fn healthy_and_mock_facts() {
    let p = open("healthy_1pct.sqlite");
    assert_eq!(p.version().schema_version.as_deref(), Some("3.24.14"));
    let info = profile::info::info(&p).unwrap();
    assert_eq!(info.gpus[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(info.gpus[0].sm_count, None, "unknown, not 0");
    assert_eq!(info.counts.kernels, 400);
    assert_eq!(info.duration.activity_span_ns, 403_993_000);
    let r = summary::kern_sum(&p, &all(&p), NameKey::Short, 10).unwrap();
    assert_eq!(r.total_ns, 400_000_000);
    let rows: Vec<(f64, i64, u64, f64, f64, &str)> = r
        .rows
        .iter()
        .map(|r| {
            (
                r.time_pct,
                r.total_ns,
                r.instances,
                r.stddev_ns,
                r.med_ns,
                r.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (50.0, 200_000_000, 200, 0.0, 1_000_000.0, "elementwise_add"),
            (50.0, 200_000_000, 200, 0.0, 1_000_000.0, "gemm_nn_128x128"),
        ]
    );
    let w = busy(&p, 0);
    let s = busy_of(&w, WindowKind::Span);
    assert_eq!(
        (s.busy_ns, s.window.length_ns, s.busy_pct, s.idle_ns),
        (400_000_000, 403_990_000, 99.01, 3_990_000)
    );
    let s = summary::summary(&p, &all(&p), &SummaryOptions::default()).unwrap();
    let missing: Vec<&str> = s.unavailable.iter().map(|u| u.report.as_str()).collect();
    assert_eq!(missing, vec!["nvtx_sum", "osrt_sum"]);
    assert_eq!(
        p.launch_index()
            .unwrap()
            .kernel_launch
            .iter()
            .flatten()
            .count(),
        400
    );
    let m = profile::memory::memory(&p, &all(&p), 5).unwrap();
    assert!(!m.pageable_async.kinds_recorded);

    let p = open("mock.sqlite");
    let info = profile::info::info(&p).unwrap();
    let g = &info.gpus[0];
    assert_eq!(
        (
            g.name.as_deref(),
            g.chip.as_deref(),
            g.sm_count,
            g.memory_bytes,
            g.bus_location.as_deref(),
            g.cuda_id
        ),
        (
            Some("NVIDIA GeForce RTX 3080"),
            Some("GA102"),
            Some(68),
            Some(10_736_893_952),
            Some("0000:01:00.0"),
            Some(0)
        )
    );
    assert_eq!(info.duration.kernel_span_ns, Some(18_254_667));
    assert_eq!(info.duration.activity_span_ns, 235_830_432);
    let r = summary::kern_sum(&p, &all(&p), NameKey::Short, 10).unwrap();
    let rows: Vec<(f64, i64, &str)> = r
        .rows
        .iter()
        .map(|r| (r.time_pct, r.total_ns, r.name.as_str()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (65.1, 2_689, "reduce_kernel"),
            (34.9, 1_440, "vectorized_elementwise_kernel")
        ]
    );
    let w = busy(&p, 0);
    assert_eq!(busy_of(&w, WindowKind::Span).busy_pct, 0.02);
    let m = profile::memory::memory(&p, &all(&p), 5).unwrap();
    assert_eq!(m.pageable_async.count, 0, "the one D2H is pinned");
    assert_eq!(m.by_class[0].dst_kind.as_deref(), Some("Pinned"));
    let s = summary::summary(&p, &all(&p), &SummaryOptions::default()).unwrap();
    let sync = s
        .cuda_api_sum
        .unwrap()
        .rows
        .into_iter()
        .find(|r| r.name == "cudaStreamSynchronize")
        .unwrap();
    assert_eq!((sync.instances, sync.total_ns), (1, 16_012));
}

#[test]
fn scopes_filter_and_reject_bad_windows() {
    let p = open("ddp.sqlite");
    let s = p
        .resolve(&Scope {
            device: Some(1),
            ..Scope::default()
        })
        .unwrap();
    let k = profile::kernels::kernels(&p, &s, NameKey::Short, 5).unwrap();
    assert_eq!((k.kernels, k.total_ns), (3592, 239_383_895));
    assert!(
        p.resolve(&Scope {
            device: Some(7),
            ..Scope::default()
        })
        .is_err()
    );
    assert!(
        p.resolve(&Scope {
            process: Some(1),
            ..Scope::default()
        })
        .is_err()
    );
    assert!(
        p.resolve(&Scope {
            start_ns: Some(10),
            end_ns: Some(5),
            ..Scope::default()
        })
        .is_err()
    );
    // Outside the capture: rejected like nsys-ai's TRIM_OUT_OF_RANGE.
    assert!(
        p.resolve(&Scope {
            start_ns: Some(0),
            end_ns: Some(1000),
            ..Scope::default()
        })
        .is_err()
    );
    assert!(
        p.resolve(&Scope {
            nvtx_range: Some("no_such_range".into()),
            ..Scope::default()
        })
        .is_err()
    );
    // nvtx_range trims to the first start and last end of that name (in pid 640: step_3).
    let s = p
        .resolve(&Scope {
            nvtx_range: Some("step_3".into()),
            process: Some(640),
            ..Scope::default()
        })
        .unwrap();
    let it = profile::iterations::iterations(&p, &s, None, 100).unwrap();
    assert_eq!(it.processes.len(), 1);
    assert_eq!(it.processes[0].step_count, 1);
    assert_eq!(it.processes[0].steps[0].name, "step_3");
}

/// OS runtime rows out of time order inside a gap (nsys flushes per-thread
/// buffers, so an export can hold a few) must not change what a gap's CPU
/// activity adds up to: the streaming union gives way to an exact second pass.
/// Swapping the times of two `ioctl` rows of the launching thread inside the
/// largest gap keeps the same set of intervals but puts them out of row order.
#[test]
fn gap_attribution_is_exact_when_os_runtime_rows_are_out_of_time_order() {
    let original = profile_common::fixture("train_good.sqlite");
    let dir = tempfile::tempdir().unwrap();
    let swapped = dir.path().join("swapped.sqlite");
    std::fs::copy(&original, &swapped).unwrap();
    let (gs, ge) = (7_554_190_551_i64, 7_632_138_168_i64);
    {
        let conn = rusqlite::Connection::open(&swapped).unwrap();
        let rows: Vec<(i64, i64, i64)> = conn
            .prepare(
                "SELECT o.rowid, o.start, o.\"end\" FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId
                 WHERE s.value = 'ioctl' AND o.globalTid % 16777216 = 883
                   AND o.start >= ?1 AND o.\"end\" <= ?2 ORDER BY o.rowid",
            )
            .unwrap()
            .query_map([gs, ge], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(rows.len() >= 10, "{}", rows.len());
        let (first, last) = (rows[0], rows[rows.len() - 1]);
        assert!(first.1 < last.1);
        let set = "UPDATE OSRT_API SET start = ?1, \"end\" = ?2 WHERE rowid = ?3";
        conn.execute(set, [last.1, last.2, first.0]).unwrap();
        conn.execute(set, [first.1, first.2, last.0]).unwrap();
    }
    let explained = |path: &std::path::Path| {
        let p = profile::open(path).unwrap();
        let g = gaps::gaps(&p, &all(&p), 1_000_000, 20).unwrap();
        let gap = g.devices[0]
            .gaps
            .iter()
            .find(|g| g.start_ns == gs && g.end_ns == ge)
            .expect("the largest gap")
            .clone();
        (gap.cause, gap.explanation, gap.cpu)
    };
    let (cause, explanation, cpu) = explained(&original);
    let ioctl = cpu
        .iter()
        .find(|c| c.name == "ioctl")
        .expect("ioctl in the gap");
    assert_eq!((ioctl.calls, ioctl.overlap_ns), (25, 1_515_953));
    assert_eq!(explained(&swapped), (cause, explanation, cpu));
}

// ---------------------------------------------------------------------------------------------
// Nothing left out across devices and processes; labels that say what a figure is (issue 15)

/// One SQL query's rows over a fixture, read with plain rusqlite.
fn sql_rows(name: &str, sql: &str) -> Vec<Vec<i64>> {
    let c = rusqlite::Connection::open_with_flags(
        profile_common::fixture(name),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| (0..n).map(|i| r.get::<_, i64>(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn nvtx_gpu_time_is_a_union_per_device_and_the_aggregate_their_sum() {
    // ddp: both ranks push `ncclAllReduce`; each rank's 248 all-reduce kernels run on its
    // own GPU's stream 17 (fixtures README: 62,380,478 / 117,932,537 ns). The old figure was
    // one union over both GPUs, 118,851,441 ns, less than the two GPUs' time.
    let p = open("ddp.sqlite");
    let nv = profile::nvtx::nvtx(
        &p,
        &all(&p),
        &profile::nvtx::NvtxOptions {
            limit: usize::MAX,
            ..Default::default()
        },
    )
    .unwrap();
    let name = |n: &str| nv.names.iter().find(|r| r.name == n).unwrap();
    let ar = name("ncclAllReduce");
    let per: Vec<(i64, i64, u64)> = ar
        .per_device
        .iter()
        .map(|d| (d.device, d.gpu_union_ns, d.kernels))
        .collect();
    assert_eq!(per, vec![(0, 62_380_478, 248), (1, 117_932_537, 248)]);
    assert_eq!(ar.gpu_union_ns, 62_380_478 + 117_932_537);
    // Per device, each step's union is the README's per-step GPU-projected time: step_0 is
    // the largest on both ranks (7,870,108 / 15,734,816 ns).
    let s0 = name("step_0");
    let per: Vec<(i64, i64)> = s0
        .per_device
        .iter()
        .map(|d| (d.device, d.gpu_union_ns))
        .collect();
    assert_eq!(per, vec![(0, 7_870_108), (1, 15_734_816)]);
    assert_eq!(s0.gpu_union_ns, 7_870_108 + 15_734_816);
    assert!(
        nv.notes
            .iter()
            .any(|n| n.contains("sum of the per-device unions"))
    );
    // The per-process trees agree: each rank's step_0 node holds its own device's union.
    let roots: Vec<i64> = nv
        .threads
        .iter()
        .flat_map(|t| t.roots.iter())
        .filter(|r| r.name == "step_0")
        .map(|r| r.gpu_union_ns)
        .collect();
    assert_eq!(roots, vec![7_870_108, 15_734_816]);
}

#[test]
fn kernel_pattern_iterations_cover_every_device() {
    // h100_2gpu_1s has no step ranges: the old detector reported only device 0 (pid 111).
    let p = open("h100_2gpu_1s.sqlite");
    let it = profile::iterations::iterations(&p, &all(&p), None, 10).unwrap();
    assert_eq!(it.rule, "kernel_pattern");
    let devs: Vec<(i64, Vec<i64>)> = it
        .processes
        .iter()
        .map(|ps| (ps.pid, ps.devices.clone()))
        .collect();
    assert_eq!(devs, vec![(111, vec![0]), (112, vec![1])]);
    for ps in &it.processes {
        // Iterations are the stretches between consecutive anchor launches on the device.
        let anchor = ps.anchor.as_deref().unwrap();
        let rows = sql_rows(
            "h100_2gpu_1s.sqlite",
            &format!(
                "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName \
                 WHERE k.deviceId = {} AND s.value = '{}'",
                ps.devices[0],
                anchor.replace('\'', "''")
            ),
        );
        assert_eq!(ps.step_count as i64, rows[0][0] - 1, "{anchor}");
    }
}

#[test]
fn memory_classes_are_split_per_device() {
    // ddp: every (direction, src kind, dst kind) class with its per-device counts, bytes and
    // time, against SQL over the same file.
    let p = open("ddp.sqlite");
    let m = profile::memory::memory(&p, &all(&p), 0).unwrap();
    let rows = sql_rows(
        "ddp.sqlite",
        "SELECT copyKind, srcKind, dstKind, deviceId, COUNT(*), SUM(bytes), SUM(\"end\" - start) \
         FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
    );
    let labels = |k: i64| match k {
        0 => "Pageable",
        1 => "Pinned",
        2 => "Device",
        _ => "other",
    };
    let mut seen = 0;
    for r in &rows {
        let class = m
            .by_class
            .iter()
            .find(|c| {
                c.src_kind.as_deref() == Some(labels(r[1]))
                    && c.dst_kind.as_deref() == Some(labels(r[2]))
                    && c.direction
                        == match r[0] {
                            1 => "Host-to-Device",
                            2 => "Device-to-Host",
                            8 => "Device-to-Device",
                            10 => "Peer-to-Peer",
                            _ => "other",
                        }
            })
            .unwrap_or_else(|| panic!("no class for {r:?}"));
        let d = class
            .per_device
            .iter()
            .find(|d| d.device == r[3])
            .unwrap_or_else(|| panic!("no device {} in {class:?}", r[3]));
        assert_eq!(
            (d.count as i64, d.bytes, d.time_ns),
            (r[4], r[5], r[6]),
            "{r:?}"
        );
        seen += 1;
    }
    let listed: usize = m.by_class.iter().map(|c| c.per_device.len()).sum();
    assert_eq!(listed, seen, "every (class, device) row and no other");
    assert!(m.by_class.iter().any(|c| c.per_device.len() == 2));
    let ms = sql_rows(
        "ddp.sqlite",
        "SELECT deviceId, COUNT(*), SUM(bytes), SUM(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_MEMSET GROUP BY 1 ORDER BY 1",
    );
    let got: Vec<Vec<i64>> = m
        .memset
        .per_device
        .iter()
        .map(|d| vec![d.device, d.count as i64, d.bytes, d.time_ns])
        .collect();
    assert_eq!(got, ms);
}

#[test]
fn kernel_statistics_say_which_median_is_which() {
    // h100's top kernel: 248 calls, so the middle-pair median (133,296.0, nsys stats) and
    // the nearest-rank p50 (the 124th smallest) are different definitions.
    let p = open("h100_2gpu_1s.sqlite");
    let k = profile::kernels::kernels(&p, &all(&p), NameKey::Short, 1).unwrap();
    let r = &k.rows[0];
    assert_eq!((r.instances, r.med_ns), (248, 133_296.0));
    let sorted = sql_rows(
        "h100_2gpu_1s.sqlite",
        "SELECT k.\"end\" - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName \
         WHERE s.value = 'sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas' \
         ORDER BY 1",
    );
    assert_eq!(r.p50_ns, sorted[123][0]);
    assert_eq!(r.p90_ns, sorted[((0.9f64 * 248.0).ceil() as usize) - 1][0]);
    assert_eq!(
        r.med_ns,
        (sorted[123][0] + sorted[124][0]) as f64 / 2.0,
        "median = middle-pair mean"
    );
    assert!(k.statistics.contains("two middle") && k.statistics.contains("nearest-rank"));
}

#[test]
fn utilization_chunks_state_their_own_window() {
    // train_good: the chunks run over kernels ∪ memcpy ∪ memset, which start 3.8 s before
    // the first kernel (the `span` window's start).
    let p = open("train_good.sqlite");
    let u = utilization::utilization(&p, &all(&p), 30, 50.0).unwrap();
    let d = &u.devices[0];
    let ops = sql_rows(
        "train_good.sqlite",
        "SELECT MIN(s), MAX(e) FROM (SELECT start s, \"end\" e FROM CUPTI_ACTIVITY_KIND_KERNEL \
         UNION ALL SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_MEMCPY \
         UNION ALL SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_MEMSET)",
    );
    assert_eq!(
        (d.chunk_start_ns, d.chunk_end_ns),
        (Some(ops[0][0]), Some(ops[0][1]))
    );
    let span = busy_of(&d.windows, WindowKind::Span);
    assert_eq!(span.window.start_ns, 7_554_058_424);
    assert!(d.chunk_start_ns.unwrap() < span.window.start_ns);
    assert_eq!(d.chunk_ns, (ops[0][1] - ops[0][0] + 29) / 30);
    // With a trim, the chunks stay inside it.
    let trim = p
        .resolve(&Scope {
            start_ns: Some(7_900_000_000),
            end_ns: Some(8_000_000_000),
            ..Default::default()
        })
        .unwrap();
    let u = utilization::utilization(&p, &trim, 10, 50.0).unwrap();
    let clipped = sql_rows(
        "train_good.sqlite",
        "SELECT MAX(MIN(s), 7900000000), MIN(MAX(e), 8000000000) FROM (SELECT start s, \"end\" e FROM CUPTI_ACTIVITY_KIND_KERNEL \
         UNION ALL SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_MEMCPY \
         UNION ALL SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_MEMSET) WHERE e > 7900000000 AND s < 8000000000",
    );
    assert_eq!(
        (u.devices[0].chunk_start_ns, u.devices[0].chunk_end_ns),
        (Some(clipped[0][0]), Some(clipped[0][1]))
    );
    assert_eq!(clipped[0], vec![7_901_403_617, 7_997_020_374]);
}

#[test]
fn gpu_uuids_from_the_environment_are_labelled_inferred() {
    // h100_2gpu_1s records no GPU table; NVIDIA_VISIBLE_DEVICES lists two UUIDs. The old
    // answer put them in `uuid` as if recorded.
    let p = open("h100_2gpu_1s.sqlite");
    let info = profile::info::info(&p).unwrap();
    for (g, uuid) in info.gpus.iter().zip([
        "GPU-f6b62fcc-9318-c13e-22f6-766d35cb6503",
        "GPU-bd2a81ed-b150-22a2-9a53-2cc03b8b3a43",
    ]) {
        assert_eq!(g.uuid, None, "device {}", g.device);
        assert_eq!(g.inferred_uuid.as_deref(), Some(uuid));
        assert!(g.uuid_basis.as_deref().unwrap().starts_with("inferred"));
        assert_eq!(g.source, "unknown");
    }
    // Recorded UUIDs stay facts (ddp has TARGET_INFO_GPU).
    let info = profile::info::info(&open("ddp.sqlite")).unwrap();
    assert!(
        info.gpus
            .iter()
            .all(|g| g.uuid.is_some() && g.inferred_uuid.is_none())
    );
}

/// Each kernel group says where the step ledger puts it (its compute column, or `communication` for a
/// collective), the time per ledger class adds up to all kernel time, and the fused optimizer is apart from the
/// elementwise kernels as in the ledger.
#[test]
fn kernel_rows_carry_the_ledgers_class() {
    use aisp_profile::ledger::Column;
    let names: Vec<&str> = Column::ALL.iter().map(|c| c.as_str()).collect();
    for (fixture, expect) in [
        (
            "planted/fp32_gemm.sqlite",
            &[
                ("Kernel2", "gemm_fp32_simt"),
                ("multi_tensor_apply_kernel", "optimizer"),
            ][..],
        ),
        (
            "ddp.sqlite",
            &[
                ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"),
                (
                    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
                    "gemm_tensor_core",
                ),
                ("multi_tensor_apply_kernel", "optimizer"),
            ][..],
        ),
    ] {
        let p = open(fixture);
        let k = profile::kernels::kernels(&p, &all(&p), NameKey::Short, 100).unwrap();
        for (name, class) in expect {
            let row = k.rows.iter().find(|r| r.name == *name).unwrap();
            assert_eq!(row.ledger_class, *class, "{fixture} {name}");
        }
        for c in &k.ledger_classes {
            assert!(
                c.ledger_class == "communication" || names.contains(&c.ledger_class.as_str()),
                "{fixture}: {}",
                c.ledger_class
            );
        }
        let n: u64 = k.ledger_classes.iter().map(|c| c.instances).sum();
        let t: i64 = k.ledger_classes.iter().map(|c| c.total_ns).sum();
        assert_eq!((n, t), (k.kernels, k.total_ns), "{fixture}");
        // The classifier's elementwise class holds the optimizer kernels the ledger puts apart.
        let optimizer = k
            .ledger_classes
            .iter()
            .find(|c| c.ledger_class == "optimizer")
            .unwrap();
        let row = k
            .rows
            .iter()
            .find(|r| r.name == "multi_tensor_apply_kernel")
            .unwrap();
        assert_eq!(optimizer.total_ns, row.total_ns, "{fixture}");
        assert_eq!(row.class.class, KernelClass::Elementwise);
    }
}

/// Grouped by operation (the kernels tool's default), PyTorch's generic launchers split by what they carry: on
/// train_good the 120 `multi_tensor_apply_kernel` launches are 80 fused-Adam launches and the rest, each row's
/// figures those SQL counts over the demangled names, and the rows add up to the short-name grouping.
#[test]
fn kernels_by_operation_split_a_launcher_by_what_it_carries() {
    use aisp_profile::kernels::KernelNames;
    let p = open("train_good.sqlite");
    let by_op =
        profile::kernels::kernels(&p, &all(&p), KernelNames::Operation, usize::MAX).unwrap();
    let by_short = profile::kernels::kernels(&p, &all(&p), NameKey::Short, usize::MAX).unwrap();
    assert_eq!(by_op.total_ns, by_short.total_ns);
    assert_eq!(
        by_op.rows.iter().map(|r| r.total_ns).sum::<i64>(),
        by_op.total_ns
    );
    let adam = by_op
        .rows
        .iter()
        .find(|r| r.name == "multi_tensor_apply_kernel[FusedAdamMathFunctor]")
        .unwrap();
    let sql = sql_rows(
        "train_good.sqlite",
        "SELECT count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k \
         JOIN StringIds s ON s.id = k.demangledName \
         WHERE s.value LIKE '%multi_tensor_apply_kernel%FusedAdamMathFunctor%'",
    );
    assert_eq!(vec![adam.instances as i64, adam.total_ns], sql[0]);
    // Every launcher row of the short grouping is the sum of its operation rows.
    for short in &by_short.rows {
        let (n, t) = by_op
            .rows
            .iter()
            .filter(|r| r.name == short.name || r.name.starts_with(&format!("{}[", short.name)))
            .fold((0, 0), |(n, t), r| (n + r.instances, t + r.total_ns));
        assert_eq!((n, t), (short.instances, short.total_ns), "{}", short.name);
    }
    // The group's largest demangled name stays one field away.
    assert!(
        adam.demangled
            .as_deref()
            .unwrap()
            .contains("FusedAdamMathFunctor")
    );
}
