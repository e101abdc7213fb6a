//! Hardware ceilings measured on the GPU: device-memory bandwidth (copy
//! kernels against cuMemcpyDtoD), FP32/FP64 FMA peaks, tensor-core GEMM
//! throughput per precision, PCIe bandwidth, the cache hierarchy, and launch
//! latency. The benchmark lessons report their `pct_of_roof` against these.

use aisp_base::Cancel;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::BenchError;
use super::cuda::{DevBuf, Event, HostBuf, Stream, arg};
use super::device::Gpu;
use super::lesson::{Metric, Role, RoofKind, VariantResult, Work};
use super::stats::Summary;
use super::targets::memory::{COPY_KERNELS, CopyBufs};
use super::telemetry::Sampler;
use super::timing::{self, Phase, Plan};
use super::verify::Check;

/// One measured ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Roof {
    pub value: f64,
    /// How it was measured (e.g. `cuMemcpyDtoD, 1 GiB, median of 40`).
    pub how: String,
}

/// The ceilings known for one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Roofs {
    /// Device memory GB/s (bytes read + written) of cuMemcpyDtoD.
    pub memory: Option<Roof>,
    /// FP32 TFLOP/s of an FMA loop on the CUDA cores.
    pub fp32: Option<Roof>,
    /// Tensor-core TFLOP/s per precision (`tf32`, `bf16`, `fp16`, `fp8`).
    pub tensor: BTreeMap<String, Roof>,
    /// Pinned host-to-device GB/s.
    pub pcie_h2d: Option<Roof>,
}

impl Roofs {
    /// The roof for a variant's kind, as (value, description).
    pub fn get(&self, kind: RoofKind) -> Option<(f64, String)> {
        let r = match kind {
            RoofKind::None => None,
            RoofKind::Memory => self.memory.as_ref(),
            RoofKind::Fp32 => self.fp32.as_ref(),
            RoofKind::PcieH2d => self.pcie_h2d.as_ref(),
            RoofKind::Tf32 | RoofKind::Bf16 | RoofKind::Fp16 | RoofKind::Fp8 => {
                self.tensor.get(kind.as_str())
            }
        }?;
        Some((r.value, r.how.clone()))
    }
}

/// Time `step` with the standard plan and summarize.
fn time_step(
    gpu: &Gpu,
    plan: &Plan,
    cancelled: Cancel<'_>,
    step: &mut dyn FnMut(&Gpu, Phase) -> Result<(), BenchError>,
) -> Result<(Vec<f64>, Summary), BenchError> {
    let samples = timing::measure(gpu, plan, cancelled, step)?;
    let s = Summary::of(&samples).ok_or_else(|| BenchError::Other("no valid samples".into()))?;
    Ok((samples, s))
}

/// Theoretical device-memory bandwidth in GB/s from the memory clock (MHz,
/// double data rate) and bus width (bits).
pub fn theoretical_memory_gb_per_s(mem_clock_mhz: u32, bus_width_bits: u32) -> Option<f64> {
    (mem_clock_mhz > 0 && bus_width_bits > 0)
        .then(|| mem_clock_mhz as f64 * 1e6 * 2.0 * bus_width_bits as f64 / 8.0 / 1e9)
}

/// Theoretical memory bandwidth of `gpu`: NVML's max memory clock and bus
/// width when NVML answers, else CUDA's attributes. Returns (GB/s, source).
pub fn theoretical_memory(gpu: &Gpu, nvml: Option<&nvml_wrapper::Nvml>) -> Option<(f64, String)> {
    if let Some(n) = nvml
        && let Ok(dev) = n.device_by_uuid(gpu.info.uuid.as_str())
        && let (Ok(clock), Ok(width)) = (
            dev.max_clock_info(nvml_wrapper::enum_wrappers::device::Clock::Memory),
            dev.memory_bus_width(),
        )
        && let Some(v) = theoretical_memory_gb_per_s(clock, width)
    {
        return Some((v, format!("NVML: {clock} MHz x 2 (DDR) x {width}-bit bus")));
    }
    theoretical_memory_gb_per_s(gpu.info.memory_clock_mhz, gpu.info.memory_bus_width_bits).map(
        |v| {
            (
                v,
                format!(
                    "CUDA attributes: {} MHz x 2 (DDR) x {}-bit bus",
                    gpu.info.memory_clock_mhz, gpu.info.memory_bus_width_bits
                ),
            )
        },
    )
}

/// Copy bandwidth at one size: every copy kernel and cuMemcpyDtoD (or only
/// the methods in `only`), each checked (output equals input) before it is
/// timed. Rows use target `copy_bandwidth`.
pub fn copy_bandwidth(
    gpu: &Gpu,
    buffer_bytes: u64,
    seed: u32,
    budget: Duration,
    cancelled: Cancel<'_>,
    nvml: Option<std::sync::Arc<nvml_wrapper::Nvml>>,
    only: Option<&[&str]>,
) -> Result<Vec<VariantResult>, BenchError> {
    gpu.reset_tally();
    let n = (buffer_bytes / 16 * 4).max(1024);
    let bufs = CopyBufs::new(gpu, n, seed)?;
    let size = bufs.size_words();
    let work = Work {
        bytes: 8.0 * n as f64,
        flops: 0.0,
    };
    let mut names: Vec<&str> = COPY_KERNELS.iter().map(|(k, _)| *k).collect();
    names.push("cuMemcpyDtoD");
    names.retain(|n| only.is_none_or(|o| o.contains(n)));
    let mut rows = Vec::new();
    for name in names {
        let role = if name == "cuMemcpyDtoD" {
            Role::Baseline
        } else {
            Role::Optimized
        };
        let mut row = VariantResult::new("copy_bandwidth", name, role, Metric::GbPerS, &size);
        let per = COPY_KERNELS
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, p)| *p);
        let launch = |gpu: &Gpu| -> Result<(), BenchError> {
            match per {
                Some(p) => bufs.launch(gpu, name, p),
                None => gpu
                    .stream
                    .copy_dtod(bufs.output.ptr(), bufs.input.ptr(), (n * 4) as usize),
            }
        };
        let result: Result<(), BenchError> = (|| {
            gpu.poison(&bufs.output)?;
            launch(gpu)?;
            gpu.sync()?;
            let check = bufs.check_copy(gpu, name)?;
            row.verified = check.passed;
            let ok = check.passed;
            row.check = Some(check);
            if !ok {
                row = row.clone().failed("failed its check, not timed");
                return Ok(());
            }
            let plan = Plan::with_budget(budget);
            let sampler = Sampler::start(nvml.clone(), &gpu.info.uuid);
            let samples = timing::measure(gpu, &plan, cancelled, &mut |gpu, phase| match phase {
                Phase::Before => Ok(()),
                Phase::Body => launch(gpu),
            });
            row.telemetry = Some(sampler.finish());
            row.set_samples(samples?, Metric::GbPerS, work, None, None);
            Ok(())
        })();
        if let Err(e) = result {
            if matches!(e, BenchError::Cancelled) {
                return Err(e);
            }
            row = row.failed(e.to_string());
        }
        row.peak_memory_bytes = Some(gpu.allocated_bytes());
        rows.push(row);
    }
    // Percent of the cuMemcpyDtoD figure measured in the same run.
    if let Some(dtod) = rows
        .iter()
        .find(|r| r.variant == "cuMemcpyDtoD")
        .and_then(|r| r.value)
    {
        for r in rows.iter_mut() {
            if let Some(v) = r.value {
                r.roof = Some(format!(
                    "cuMemcpyDtoD at the same size, same run ({dtod:.1} GB/s)"
                ));
                r.roof_value = Some(dtod);
                r.pct_of_roof = Some(v / dtod * 100.0);
            }
        }
    }
    Ok(rows)
}

/// FMA throughput on the CUDA cores, in TFLOP/s (an FMA counts as 2).
/// The result feeds a sink, so nothing to verify beyond it being finite.
pub fn fma_peak(
    gpu: &Gpu,
    double: bool,
    budget: Duration,
    cancelled: Cancel<'_>,
) -> Result<(f64, Summary, String), BenchError> {
    let name = if double {
        "fma_peak_f64"
    } else {
        "fma_peak_f32"
    };
    let f = if double {
        gpu.function("compute", "fma_peak_f64")?
    } else {
        gpu.function("compute", "fma_peak_f32")?
    };
    let block = 256u32;
    let per_sm = f.max_active_blocks(block)?.max(1) as u32;
    let grid = per_sm * gpu.info.sm_count * 4;
    let threads = grid as u64 * block as u64;
    let elem = if double { 8 } else { 4 };
    let out = gpu.alloc(threads as usize * elem)?;
    let iters: u32 = if double { 512 } else { 4096 };
    let o = out.ptr();
    let launch = |gpu: &Gpu| -> Result<(), BenchError> {
        if double {
            let (a, b) = (0.999_999f64, 1e-6f64);
            f.launch(
                &gpu.stream,
                (grid, 1, 1),
                (block, 1, 1),
                &mut [arg(&o), arg(&iters), arg(&a), arg(&b)],
            )
        } else {
            let (a, b) = (0.999_999f32, 1e-6f32);
            f.launch(
                &gpu.stream,
                (grid, 1, 1),
                (block, 1, 1),
                &mut [arg(&o), arg(&iters), arg(&a), arg(&b)],
            )
        }
    };
    gpu.poison(&out)?;
    launch(gpu)?;
    gpu.sync()?;
    let finite = if double {
        out.download::<f64>(&gpu.stream)?
            .iter()
            .all(|v| v.is_finite())
    } else {
        out.download::<f32>(&gpu.stream)?
            .iter()
            .all(|v| v.is_finite())
    };
    if !finite {
        return Err(BenchError::Other(format!("{name} wrote non-finite values")));
    }
    let plan = Plan {
        flush_l2: false,
        ..Plan::with_budget(budget)
    };
    let (_, s) = time_step(gpu, &plan, cancelled, &mut |gpu, phase| match phase {
        Phase::Before => Ok(()),
        Phase::Body => launch(gpu),
    })?;
    let flops = 2.0 * 8.0 * iters as f64 * threads as f64;
    let tflops = flops / (s.median_ms / 1e3) / 1e12;
    Ok((
        tflops,
        s,
        format!(
            "{name}: {grid} blocks x {block} threads x 8 chains x {iters} FMAs, median of {}",
            s.n
        ),
    ))
}

/// One PCIe measurement.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PcieRow {
    /// `h2d`, `d2h` or `bidirectional` (both at once; GB/s is the sum).
    pub direction: String,
    /// `pinned` or `pageable`.
    pub host_memory: String,
    pub bytes: u64,
    pub gb_per_s: f64,
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    pub cv_pct: f64,
    pub repetitions: u32,
    pub check: Check,
}

fn fill_pattern(buf: &mut [u8], seed: u32) {
    for (i, chunk) in buf.chunks_mut(4).enumerate() {
        let v = super::rng::hash(seed, i as u64).to_le_bytes();
        let n = chunk.len();
        chunk.copy_from_slice(&v[..n]);
    }
}

/// Host↔device bandwidth: pinned and pageable, each direction, and pinned
/// bidirectional (or only the (direction, memory) cases in `only`). Each
/// transfer is checked once (bytes arrive intact).
pub fn pcie(
    gpu: &Gpu,
    bytes: usize,
    budget: Duration,
    cancelled: Cancel<'_>,
    only: Option<&[(&str, &str)]>,
) -> Result<Vec<PcieRow>, BenchError> {
    gpu.reset_tally();
    let dev_a = gpu.alloc(bytes)?;
    let dev_b = gpu.alloc(bytes)?;
    let mut pinned_src = HostBuf::alloc(&gpu.ctx, bytes)?;
    let mut pinned_dst = HostBuf::alloc(&gpu.ctx, bytes)?;
    let mut pageable_src = vec![0u8; bytes];
    let mut pageable_dst = vec![0u8; bytes];
    fill_pattern(pinned_src.as_mut_slice::<u8>(), 11);
    fill_pattern(&mut pageable_src, 11);
    pageable_dst.fill(1);
    pinned_dst.as_mut_slice::<u8>().fill(1);
    let side = Stream::new(&gpu.ctx)?;
    let (fork, join) = (Event::new(&gpu.ctx)?, Event::new(&gpu.ctx)?);
    // The device source for device-to-host copies holds the same pattern.
    dev_b.upload(pinned_src.as_slice::<u8>(), &gpu.stream)?;
    let plan = Plan {
        flush_l2: false,
        ..Plan::with_budget(budget)
    };
    let mut rows = Vec::new();
    let cases: [(&str, &str); 5] = [
        ("h2d", "pinned"),
        ("h2d", "pageable"),
        ("d2h", "pinned"),
        ("d2h", "pageable"),
        ("bidirectional", "pinned"),
    ];
    for (direction, memory) in cases {
        if only.is_some_and(|o| !o.contains(&(direction, memory))) {
            continue;
        }
        let pinned = memory == "pinned";
        let src_ptr = if pinned {
            pinned_src.ptr() as *const _
        } else {
            pageable_src.as_ptr() as *const _
        };
        let dst_ptr = if pinned {
            pinned_dst.ptr()
        } else {
            pageable_dst.as_mut_ptr() as *mut _
        };
        let step = |gpu: &Gpu| -> Result<(), BenchError> {
            // SAFETY: every host range holds `bytes` bytes and outlives the synchronised copies.
            unsafe {
                match direction {
                    "h2d" => gpu.stream.copy_htod(dev_a.ptr(), src_ptr, bytes),
                    "d2h" => gpu.stream.copy_dtoh(dst_ptr, dev_b.ptr(), bytes),
                    _ => {
                        fork.record(&gpu.stream)?;
                        side.wait(&fork)?;
                        gpu.stream.copy_htod(dev_a.ptr(), src_ptr, bytes)?;
                        side.copy_dtoh(dst_ptr, dev_b.ptr(), bytes)?;
                        join.record(&side)?;
                        gpu.stream.wait(&join)
                    }
                }
            }
        };
        // Check once.
        gpu.poison(&dev_a)?;
        step(gpu)?;
        gpu.sync()?;
        let mut checks = Vec::new();
        if direction != "d2h" {
            let got: Vec<u8> = dev_a.download(&gpu.stream)?;
            checks.push(got.as_slice() == pinned_src.as_slice::<u8>());
        }
        if direction != "h2d" {
            let got = if pinned {
                pinned_dst.as_slice::<u8>()
            } else {
                &pageable_dst[..]
            };
            checks.push(got == pinned_src.as_slice::<u8>());
        }
        let ok = checks.iter().all(|&c| c);
        let check = Check {
            passed: ok,
            detail: if ok {
                format!("all {bytes} bytes arrived intact")
            } else {
                "the destination differs from the source".into()
            },
            checked: bytes as u64,
            mismatches: u64::from(!ok),
            rel_err: None,
        };
        if !ok {
            return Err(BenchError::Other(format!(
                "{direction} {memory} copy corrupted data"
            )));
        }
        let (_, s) = time_step(gpu, &plan, cancelled, &mut |gpu, phase| match phase {
            Phase::Before => Ok(()),
            Phase::Body => step(gpu),
        })?;
        let moved = if direction == "bidirectional" {
            2 * bytes
        } else {
            bytes
        } as f64;
        rows.push(PcieRow {
            direction: direction.to_string(),
            host_memory: memory.to_string(),
            bytes: moved as u64,
            gb_per_s: moved / (s.median_ms / 1e3) / 1e9,
            median_ms: s.median_ms,
            p10_ms: s.p10_ms,
            p90_ms: s.p90_ms,
            cv_pct: s.cv_pct,
            repetitions: s.n as u32,
            check,
        });
    }
    Ok(rows)
}

/// Theoretical PCIe bandwidth per direction in GB/s for a generation and
/// lane count (after 8b/10b or 128b/130b encoding; PCI-SIG figures:
/// 2.5, 5, 8, 16, 32, 64 GT/s per lane for generations 1-6).
pub fn pcie_theoretical_gb_per_s(generation: u32, width: u32) -> Option<f64> {
    let per_lane = match generation {
        1 => 0.25,
        2 => 0.5,
        3 => 0.984_6,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => return None,
    };
    (width > 0).then_some(per_lane * width as f64)
}

/// One point of a cache sweep.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CachePoint {
    /// `per_sm` (every block rereads the same buffer: L1 while it fits) or
    /// `whole_gpu` (the working set is spread over all SMs and shifted each
    /// pass: L2 while it fits, then device memory).
    pub sweep: String,
    pub working_set_bytes: u64,
    pub gb_per_s: f64,
    pub median_ms: f64,
    pub cv_pct: f64,
}

/// Read bandwidth against working-set size. Nothing is flushed between
/// repetitions: the point is to see the caches.
pub fn cache_sweep(
    gpu: &Gpu,
    max_bytes: u64,
    budget_per_point: Duration,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(&str),
) -> Result<Vec<CachePoint>, BenchError> {
    gpu.reset_tally();
    let buf = gpu.alloc(max_bytes as usize)?;
    gpu.fill_uniform(&buf, 5, 0.0, 1.0)?;
    gpu.sync()?;
    let sink = gpu.sink().ptr();
    let plan = Plan {
        flush_l2: false,
        warmup: 2,
        min_reps: 5,
        ..Plan::with_budget(budget_per_point)
    };
    let mut points = Vec::new();
    // Per-SM sweep: 4 KiB .. 1 MiB per block.
    let fb = gpu.function("memory", "read_sweep_block")?;
    let per_sm = fb.max_active_blocks(256)?.max(1) as u32;
    let grid = per_sm * gpu.info.sm_count;
    let mut ws = 4u64 << 10;
    while ws <= (1 << 20).min(max_bytes) {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        progress(&format!("per-SM working set {} KiB", ws >> 10));
        let n4 = ws / 16;
        let passes = ((16u64 << 20) / ws).clamp(1, 4096) as u32;
        let p = buf.ptr();
        let (_, s) = time_step(gpu, &plan, cancelled, &mut |gpu, phase| match phase {
            Phase::Before => Ok(()),
            Phase::Body => fb.launch(
                &gpu.stream,
                (grid, 1, 1),
                (256, 1, 1),
                &mut [arg(&p), arg(&n4), arg(&passes), arg(&sink)],
            ),
        })?;
        let bytes = ws as f64 * passes as f64 * grid as f64;
        points.push(CachePoint {
            sweep: "per_sm".into(),
            working_set_bytes: ws,
            gb_per_s: bytes / (s.median_ms / 1e3) / 1e9,
            median_ms: s.median_ms,
            cv_pct: s.cv_pct,
        });
        ws *= 2;
    }
    // Whole-GPU sweep: 1 MiB .. max_bytes.
    let fg = gpu.function("memory", "read_sweep_global")?;
    let mut ws = 1u64 << 20;
    while ws <= max_bytes {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        progress(&format!("whole-GPU working set {} MiB", ws >> 20));
        let n4 = ws / 16;
        // A multiple of 4: the kernel interleaves four passes.
        let passes = (((1u64 << 30) / ws).clamp(4, 1024) as u32).div_ceil(4) * 4;
        let p = buf.ptr();
        let grid = gpu.grid_for(&fg, 256, n4)?;
        let (_, s) = time_step(gpu, &plan, cancelled, &mut |gpu, phase| match phase {
            Phase::Before => Ok(()),
            Phase::Body => fg.launch(
                &gpu.stream,
                (grid, 1, 1),
                (256, 1, 1),
                &mut [arg(&p), arg(&n4), arg(&passes), arg(&sink)],
            ),
        })?;
        let bytes = ws as f64 * passes as f64;
        points.push(CachePoint {
            sweep: "whole_gpu".into(),
            working_set_bytes: ws,
            gb_per_s: bytes / (s.median_ms / 1e3) / 1e9,
            median_ms: s.median_ms,
            cv_pct: s.cv_pct,
        });
        ws *= 2;
    }
    drop(buf);
    Ok(points)
}

/// Levels read off a sweep: L1 (per-SM points up to 64 KiB), L2 (whole-GPU
/// points from 1 MiB to half the L2) and device memory (points at 8x L2 or
/// more); each the median of its points.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct CacheLevels {
    pub l1_gb_per_s: Option<f64>,
    pub l2_gb_per_s: Option<f64>,
    pub device_memory_gb_per_s: Option<f64>,
}

pub fn cache_levels(points: &[CachePoint], l2_bytes: u64) -> CacheLevels {
    let med = |v: Vec<f64>| (!v.is_empty()).then(|| super::stats::median(&v));
    CacheLevels {
        l1_gb_per_s: med(points
            .iter()
            .filter(|p| p.sweep == "per_sm" && p.working_set_bytes <= 64 << 10)
            .map(|p| p.gb_per_s)
            .collect()),
        l2_gb_per_s: med(points
            .iter()
            .filter(|p| {
                p.sweep == "whole_gpu"
                    && p.working_set_bytes >= 1 << 20
                    && p.working_set_bytes <= l2_bytes / 2
            })
            .map(|p| p.gb_per_s)
            .collect()),
        device_memory_gb_per_s: med(points
            .iter()
            .filter(|p| p.sweep == "whole_gpu" && p.working_set_bytes >= 8 * l2_bytes)
            .map(|p| p.gb_per_s)
            .collect()),
    }
}

/// Launch costs: `throughput_us` is the time per launch of 1000 empty kernels
/// back to back (events around the batch); `round_trip_us` is launch plus
/// stream synchronisation seen from the host (median of 200).
pub fn launch_latency(gpu: &Gpu, cancelled: Cancel<'_>) -> Result<(f64, f64), BenchError> {
    let f = gpu.function("launch", "empty_kernel")?;
    let batch = |gpu: &Gpu| -> Result<(), BenchError> {
        for _ in 0..1000 {
            f.launch(&gpu.stream, (1, 1, 1), (32, 1, 1), &mut [])?;
        }
        Ok(())
    };
    let plan = Plan {
        flush_l2: false,
        per_rep: 1000,
        min_reps: 10,
        ..Plan::with_budget(Duration::from_millis(300))
    };
    let (_, s) = time_step(gpu, &plan, cancelled, &mut |gpu, phase| match phase {
        Phase::Before => Ok(()),
        Phase::Body => batch(gpu),
    })?;
    let mut trips = Vec::with_capacity(200);
    for _ in 0..220 {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        let t = Instant::now();
        f.launch(&gpu.stream, (1, 1, 1), (32, 1, 1), &mut [])?;
        gpu.sync()?;
        trips.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let trips = &trips[20..];
    Ok((s.median_ms * 1000.0, super::stats::median(trips)))
}

/// A device buffer of `bytes` filled with random data (helper for callers
/// that need scratch space sized by the GPU).
pub fn scratch(gpu: &Gpu, bytes: usize, seed: u32) -> Result<DevBuf, BenchError> {
    let b = gpu.alloc(bytes)?;
    gpu.fill_uniform(&b, seed, 0.0, 1.0)?;
    Ok(b)
}

/// Did a check pass? (Used where rows carry a [`Check`].)
pub fn passed(c: &Option<Check>) -> bool {
    c.as_ref().is_some_and(|c| c.passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn theoretical_bandwidths() {
        // H100 SXM: 2619 MHz HBM3, 5120-bit bus -> 3352.3 GB/s.
        let h100 = theoretical_memory_gb_per_s(2619, 5120).unwrap();
        assert!((h100 - 3352.32).abs() < 0.01, "{h100}");
        // H200: 3201 MHz HBM3e, 6144-bit bus -> 4916.7 GB/s.
        let h200 = theoretical_memory_gb_per_s(3201, 6144).unwrap();
        assert!((h200 - 4916.736).abs() < 0.01, "{h200}");
        assert!(theoretical_memory_gb_per_s(0, 5120).is_none());
        // PCIe 5.0 x16: 63.0 GB/s per direction; 4.0 x16: 31.5.
        assert!((pcie_theoretical_gb_per_s(5, 16).unwrap() - 63.008).abs() < 1e-9);
        assert!((pcie_theoretical_gb_per_s(4, 16).unwrap() - 31.504).abs() < 1e-9);
        assert!(pcie_theoretical_gb_per_s(9, 16).is_none());
    }

    #[test]
    fn roofs_lookup() {
        let mut r = Roofs::default();
        assert!(r.get(RoofKind::Memory).is_none());
        r.memory = Some(Roof {
            value: 3000.0,
            how: "memcpy".into(),
        });
        r.tensor.insert(
            "bf16".into(),
            Roof {
                value: 700.0,
                how: "cublas".into(),
            },
        );
        assert_eq!(r.get(RoofKind::Memory).unwrap().0, 3000.0);
        assert_eq!(r.get(RoofKind::Bf16).unwrap().0, 700.0);
        assert!(r.get(RoofKind::Fp8).is_none());
        assert!(r.get(RoofKind::None).is_none());
    }

    #[test]
    fn cache_levels_pick_their_ranges() {
        let p = |sweep: &str, ws: u64, g: f64| CachePoint {
            sweep: sweep.into(),
            working_set_bytes: ws,
            gb_per_s: g,
            median_ms: 1.0,
            cv_pct: 0.0,
        };
        let l2 = 50u64 << 20;
        let pts = vec![
            p("per_sm", 16 << 10, 20000.0),
            p("per_sm", 32 << 10, 22000.0),
            p("per_sm", 512 << 10, 9000.0),
            p("whole_gpu", 4 << 20, 9000.0),
            p("whole_gpu", 16 << 20, 8000.0),
            p("whole_gpu", 512 << 20, 3000.0),
        ];
        let lv = cache_levels(&pts, l2);
        assert_eq!(lv.l1_gb_per_s, Some(21000.0));
        assert_eq!(lv.l2_gb_per_s, Some(8500.0));
        assert_eq!(lv.device_memory_gb_per_s, Some(3000.0));
    }
}
