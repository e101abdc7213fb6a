//! The child process that runs caller-supplied kernels (`aisp
//! __kernel-lab-worker`): reads a [`Job`] on stdin, writes one JSON [`Event`]
//! per line on stdout. It exits right after a CUDA error in a kernel (the
//! context is then unusable); the parent ([`super::runner`]) starts a fresh
//! worker for the remaining items. A hang is ended by the parent's kill.
//!
//! Per size point: inputs are drawn on the host from the seed and uploaded;
//! the reference runs first (a built-in op's output is checked against a
//! float64 CPU computation), then each candidate is compiled, loaded, run once
//! on poisoned outputs, compared with the reference's outputs, and only if it
//! passes, timed (CUDA events, L2 flushed, outputs poisoned before every
//! repetition).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::compile::{self, CompileReport};
use super::spec::{
    self, BuiltinOp, Kernel, LabSpec, Reference, Resolved, ResolvedArg, ResolvedLaunch, Role,
};
use super::tolerance::{self, Comparison, Dtype};
use crate::bench::blas::{self, Blas};
use crate::bench::cuda::{DevBuf, Function, Module, arg};
use crate::bench::device::{DeviceInfo, Gpu};
use crate::bench::roofs::{self, Roof, Roofs};
use crate::bench::timing::{self, Phase, Plan};
use crate::bench::{BenchError, rng};

/// What the parent asks of one worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub spec: LabSpec,
    pub seed: u32,
    pub time_budget_s: f64,
    pub device: usize,
    pub cache_root: PathBuf,
    /// Items before this one were reported by an earlier worker.
    pub start_at: usize,
    pub measure_roofs: bool,
    /// Profile mode (under Nsight Compute): launch only this kernel, once, at
    /// the last size, on the same inputs; no reference, checks or timing.
    #[serde(default)]
    pub profile: Option<String>,
}

/// Environment variable naming a file that holds the job (used under ncu,
/// which does not pass our stdin to the program it starts).
pub const JOB_FILE_ENV: &str = "AISP_KERNEL_LAB_JOB";

/// Theoretical occupancy and the resources behind it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Resources {
    pub registers_per_thread: i32,
    pub static_shared_bytes: i32,
    pub dynamic_shared_bytes: u32,
    /// Spill (local memory) bytes per thread.
    pub local_bytes_per_thread: i32,
    pub max_threads_per_block: i32,
    pub blocks_per_sm: i32,
    /// Resident threads / the SM's maximum (cuOccupancyMaxActiveBlocksPerMultiprocessor).
    pub theoretical_occupancy_pct: f64,
}

/// One kernel at one size.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ItemResult {
    pub size: usize,
    pub kernel: String,
    pub reference: bool,
    pub compile: Option<CompileReport>,
    pub resources: Option<Resources>,
    pub launch: Option<ResolvedLaunch>,
    /// Outputs against the reference's (candidates) or the CPU (built-in reference).
    pub checks: Vec<Comparison>,
    pub samples_ms: Vec<f64>,
    pub failure: Option<String>,
    /// The failure was a CUDA error (the worker exits after reporting it).
    pub cuda_error: bool,
}

impl ItemResult {
    pub fn passed(&self) -> bool {
        self.failure.is_none() && !self.checks.is_empty() && self.checks.iter().all(|c| c.passed)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Device {
        info: DeviceInfo,
        nvrtc: String,
        cublas: Option<String>,
        cuda_driver: Option<String>,
    },
    Roofs {
        roofs: Roofs,
    },
    Start {
        item: usize,
    },
    Item {
        item: usize,
        result: ItemResult,
    },
    Fatal {
        error: String,
    },
}

/// Items per size: the reference, then the candidates.
pub fn items_per_size(spec: &LabSpec) -> usize {
    1 + spec.candidates().len()
}

fn emit(e: &Event) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, e);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Entry point of the hidden subcommand. Exit codes: 0 done, 3 stopped after
/// a CUDA error, 2 bad job or setup failure.
pub fn main() -> std::process::ExitCode {
    let mut line = String::new();
    let read = match std::env::var_os(JOB_FILE_ENV).filter(|p| !p.is_empty()) {
        Some(path) => std::fs::read_to_string(&path)
            .map(|t| line = t)
            .map_err(|e| format!("cannot read {}: {e}", path.to_string_lossy())),
        None => std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    };
    let job: Job = match read.and_then(|_| serde_json::from_str(&line).map_err(|e| e.to_string())) {
        Ok(j) => j,
        Err(e) => {
            emit(&Event::Fatal {
                error: format!("bad job: {e}"),
            });
            return std::process::ExitCode::from(2);
        }
    };
    match run(&job) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(3),
        Err(e) => {
            emit(&Event::Fatal {
                error: e.to_string(),
            });
            std::process::ExitCode::from(2)
        }
    }
}

struct Buffers {
    /// Per argument: device buffer (buffers) and the value passed.
    dev: Vec<Option<DevBuf>>,
    pristine: Vec<Option<DevBuf>>,
    params: Vec<u64>,
    host: Vec<Vec<u8>>,
}

fn init_bytes(a: &ResolvedArg, index: usize, seed: u32) -> Vec<u8> {
    let ResolvedArg::Buffer {
        dtype, init, range, ..
    } = a
    else {
        return Vec::new();
    };
    let n = a.elements();
    let mut out = Vec::with_capacity(n as usize * dtype.bytes());
    let s = rng::hash(seed, index as u64 + 0x5eed);
    for i in 0..n {
        let v = match init {
            spec::Init::Zeros => 0.0,
            spec::Init::Ones => 1.0,
            spec::Init::Arange => i as f64,
            spec::Init::Uniform => {
                let u = rng::uniform(s, i, range.0 as f32, range.1 as f32) as f64;
                if dtype.is_float() { u } else { u.floor() }
            }
        };
        dtype.encode(v, &mut out);
    }
    out
}

fn setup(gpu: &Gpu, r: &Resolved, seed: u32) -> Result<Buffers, BenchError> {
    let need: u64 = r
        .args
        .iter()
        .map(|a| match a {
            ResolvedArg::Buffer { dtype, role, .. } => {
                a.elements() * dtype.bytes() as u64 * if *role == Role::Inout { 2 } else { 1 }
            }
            _ => 0,
        })
        .sum();
    let (free, _) = gpu.ctx.mem_info()?;
    if need as usize > free {
        return Err(BenchError::InvalidInput(format!(
            "the buffers need {:.2} GiB of device memory; {:.2} GiB is free",
            need as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        )));
    }
    let mut b = Buffers {
        dev: Vec::new(),
        pristine: Vec::new(),
        params: Vec::new(),
        host: Vec::new(),
    };
    for (i, a) in r.args.iter().enumerate() {
        match a {
            ResolvedArg::Buffer { dtype, role, .. } => {
                let bytes = a.elements() as usize * dtype.bytes();
                let d = gpu.alloc(bytes)?;
                let host = init_bytes(a, i, seed);
                d.upload(&host, &gpu.stream)?;
                b.params.push(d.ptr());
                if *role == Role::Inout {
                    let p = gpu.alloc(bytes)?;
                    p.upload(&host, &gpu.stream)?;
                    b.pristine.push(Some(p));
                } else {
                    b.pristine.push(None);
                }
                b.dev.push(Some(d));
                b.host.push(host);
            }
            ResolvedArg::Scalar { dtype, value, .. } => {
                let mut raw = Vec::new();
                dtype.encode(*value, &mut raw);
                raw.resize(8, 0);
                b.params
                    .push(u64::from_le_bytes(raw.try_into().unwrap_or([0; 8])));
                b.dev.push(None);
                b.pristine.push(None);
                b.host.push(Vec::new());
            }
        }
    }
    Ok(b)
}

impl Buffers {
    /// Untimed: poison outputs, restore in-out buffers.
    fn prepare(&self, gpu: &Gpu, r: &Resolved) -> Result<(), BenchError> {
        for (i, a) in r.args.iter().enumerate() {
            if let (ResolvedArg::Buffer { role, .. }, Some(d)) = (a, &self.dev[i]) {
                match role {
                    Role::Out => gpu.poison(d)?,
                    Role::Inout => {
                        if let Some(p) = &self.pristine[i] {
                            gpu.stream.copy_dtod(d.ptr(), p.ptr(), d.bytes())?;
                        }
                    }
                    Role::In => {}
                }
            }
        }
        Ok(())
    }

    fn download(&self, gpu: &Gpu, i: usize, dtype: Dtype) -> Result<Vec<f64>, BenchError> {
        let d = self.dev[i]
            .as_ref()
            .ok_or_else(|| BenchError::Other("not a buffer".into()))?;
        Ok(dtype.decode(&d.download::<u8>(&gpu.stream)?))
    }
}

/// How one kernel (candidate, reference kernel or built-in) is launched.
enum Runner {
    Kernel {
        f: Function,
        launch: ResolvedLaunch,
    },
    Builtin {
        op: BuiltinOp,
        f: Option<Function>,
        blas: Option<Blas>,
    },
}

impl Runner {
    fn launch(&self, gpu: &Gpu, b: &Buffers, r: &Resolved) -> Result<(), BenchError> {
        match self {
            Runner::Kernel { f, launch } => {
                let mut ptrs: Vec<*mut std::ffi::c_void> = b.params.iter().map(arg).collect();
                let g = launch.grid;
                let bl = launch.block;
                f.launch_shared(
                    &gpu.stream,
                    (g[0], g[1], g[2]),
                    (bl[0], bl[1], bl[2]),
                    launch.shared_bytes,
                    &mut ptrs,
                )
            }
            Runner::Builtin { op, f, blas } => {
                builtin_launch(gpu, *op, f.as_ref(), blas.as_ref(), b, r)
            }
        }
    }
}

fn bound(r: &Resolved) -> (Vec<usize>, usize) {
    let ins: Vec<usize> = r
        .args
        .iter()
        .enumerate()
        .filter(|(_, a)| matches!(a, ResolvedArg::Buffer { role: Role::In, .. }))
        .map(|(i, _)| i)
        .collect();
    let out = r
        .args
        .iter()
        .position(|a| {
            matches!(
                a,
                ResolvedArg::Buffer {
                    role: Role::Out | Role::Inout,
                    ..
                }
            )
        })
        .unwrap_or(0);
    (ins, out)
}

fn shape_of(a: &ResolvedArg) -> (Vec<u64>, Dtype) {
    match a {
        ResolvedArg::Buffer { shape, dtype, .. } => (shape.clone(), *dtype),
        ResolvedArg::Scalar { dtype, .. } => (vec![], *dtype),
    }
}

fn builtin_launch(
    gpu: &Gpu,
    op: BuiltinOp,
    f: Option<&Function>,
    blas: Option<&Blas>,
    b: &Buffers,
    r: &Resolved,
) -> Result<(), BenchError> {
    let (ins, out) = bound(r);
    let x = b.params[ins[0]];
    let y = b.params[out];
    let (xs, xd) = shape_of(&r.args[ins[0]]);
    let (rows, cols) = spec::rows_cols(&xs);
    let (rows, cols) = (rows as i64, cols as i64);
    match op {
        BuiltinOp::Copy => gpu
            .stream
            .copy_dtod(y, x, (rows * cols) as usize * xd.bytes()),
        BuiltinOp::Gemm => {
            let blas = blas.ok_or_else(|| BenchError::Other("no cuBLAS handle".into()))?;
            let (bs, _) = shape_of(&r.args[ins[1]]);
            let (_, cd) = shape_of(&r.args[out]);
            let dt = |d: Dtype| match d {
                Dtype::Bf16 => blas::DType::Bf16,
                Dtype::F16 => blas::DType::F16,
                _ => blas::DType::F32,
            };
            blas.gemm(
                xs[0] as usize,
                bs[1] as usize,
                xs[1] as usize,
                x,
                b.params[ins[1]],
                y,
                dt(xd),
                dt(cd),
                blas::Compute::F32,
            )
        }
        BuiltinOp::Transpose => {
            let f = f.ok_or_else(|| BenchError::Other("no transpose kernel".into()))?;
            let (gx, gy) = ((cols + 31) / 32, (rows + 31) / 32);
            if gy > 65535 {
                return Err(BenchError::InvalidInput(format!(
                    "built-in transpose handles at most {} rows",
                    65535 * 32
                )));
            }
            let grid = (gx as u32, gy as u32, 1);
            f.launch(
                &gpu.stream,
                grid,
                (32, 8, 1),
                &mut [arg(&x), arg(&y), arg(&rows), arg(&cols)],
            )
        }
        BuiltinOp::ReduceSum | BuiltinOp::Softmax | BuiltinOp::Layernorm => {
            let f = f.ok_or_else(|| BenchError::Other("no reference kernel".into()))?;
            let grid = (rows.clamp(1, 1 << 20) as u32, 1, 1);
            let eps = 1e-5f32;
            let mut a = vec![arg(&x), arg(&y), arg(&rows), arg(&cols)];
            if op == BuiltinOp::Layernorm {
                a.push(arg(&eps));
            }
            f.launch(&gpu.stream, grid, (256, 1, 1), &mut a)
        }
    }
}

/// The CPU's answer for a built-in op, as (flat indices, values): all
/// elements, or a sample of GEMM entries.
fn builtin_expected(op: BuiltinOp, r: &Resolved, b: &Buffers) -> (Option<Vec<usize>>, Vec<f64>) {
    let (ins, _) = bound(r);
    let (xs, xd) = shape_of(&r.args[ins[0]]);
    let x = xd.decode(&b.host[ins[0]]);
    let (rows, cols) = spec::rows_cols(&xs);
    let (rows, cols) = (rows as usize, cols as usize);
    match op {
        BuiltinOp::Copy => (None, x),
        BuiltinOp::Transpose => {
            let mut y = vec![0.0; x.len()];
            for rr in 0..rows {
                for c in 0..cols {
                    y[c * rows + rr] = x[rr * cols + c];
                }
            }
            (None, y)
        }
        BuiltinOp::ReduceSum => (None, x.chunks(cols).map(|row| row.iter().sum()).collect()),
        BuiltinOp::Softmax => {
            let mut y = Vec::with_capacity(x.len());
            for row in x.chunks(cols) {
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
                y.extend(row.iter().map(|v| (v - m).exp() / s));
            }
            (None, y)
        }
        BuiltinOp::Layernorm => {
            let mut y = Vec::with_capacity(x.len());
            for row in x.chunks(cols) {
                let mean = row.iter().sum::<f64>() / cols as f64;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
                let rstd = 1.0 / (var + 1e-5).sqrt();
                y.extend(row.iter().map(|v| (v - mean) * rstd));
            }
            (None, y)
        }
        BuiltinOp::Gemm => {
            let (bs, bd) = shape_of(&r.args[ins[1]]);
            let bm = bd.decode(&b.host[ins[1]]);
            let (m, k, n) = (xs[0] as usize, xs[1] as usize, bs[1] as usize);
            let total = m * n;
            let want = total.min(2048);
            let idx: Vec<usize> = (0..want)
                .map(|i| {
                    if want == total {
                        i
                    } else {
                        (rng::hash(7, i as u64) as usize * 65_537 + i) % total
                    }
                })
                .collect();
            let vals = idx
                .iter()
                .map(|&e| {
                    let (i, j) = (e / n, e % n);
                    (0..k).map(|p| x[i * k + p] * bm[p * n + j]).sum()
                })
                .collect();
            (Some(idx), vals)
        }
    }
}

fn resources(gpu: &Gpu, f: &Function, l: &ResolvedLaunch) -> Result<Resources, BenchError> {
    let (regs, local, shared) = f.resources()?;
    let threads = l.block.iter().product::<u32>();
    let blocks = f.max_active_blocks_shared(threads, l.shared_bytes)?;
    Ok(Resources {
        registers_per_thread: regs,
        static_shared_bytes: shared,
        dynamic_shared_bytes: l.shared_bytes,
        local_bytes_per_thread: local,
        max_threads_per_block: f.max_threads_per_block()?,
        blocks_per_sm: blocks,
        theoretical_occupancy_pct: (blocks as f64 * threads as f64
            / gpu.info.max_threads_per_sm.max(1) as f64
            * 100.0)
            .min(100.0),
    })
}

const REFERENCE_SOURCE: &str = include_str!("../../../../../kernels/lab_reference.cu");

fn load(
    gpu: &Gpu,
    k: &Kernel,
    cache_root: &std::path::Path,
    item: &mut ItemResult,
) -> Result<Option<Function>, BenchError> {
    match compile::compile(k, &gpu.info.arch, Some(cache_root))? {
        Err(report) => {
            item.failure = Some(format!(
                "compile error: {}",
                report
                    .errors
                    .iter()
                    .map(|d| format!("line {}: {}", d.line, d.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            item.compile = Some(report);
            Ok(None)
        }
        Ok(built) => {
            let m = Arc::new(Module::load(&gpu.ctx, &built.cubin)?);
            let name = built
                .report
                .lowered_name
                .clone()
                .unwrap_or_else(|| k.entry.clone());
            item.compile = Some(built.report);
            Ok(Some(m.function(&name)?))
        }
    }
}

fn reference_kernel(entry: &str) -> Kernel {
    Kernel {
        name: Some("lab_reference".into()),
        source: REFERENCE_SOURCE.to_string(),
        entry: entry.to_string(),
        launch: None,
        options: Vec::new(),
    }
}

/// Build the runner for kernel `k` (or the built-in op) at size `r`.
fn prepare_runner(
    gpu: &Gpu,
    job: &Job,
    reference: &Reference,
    k: Option<&Kernel>,
    r: &Resolved,
    item: &mut ItemResult,
) -> Result<Option<Runner>, BenchError> {
    if let Some(k) = k {
        let l = k
            .launch
            .as_ref()
            .or(job.spec.launch.as_ref())
            .ok_or_else(|| BenchError::InvalidInput("no launch".into()))?;
        let launch = spec::resolve_launch(l, &r.vars).map_err(BenchError::InvalidInput)?;
        let Some(f) = load(gpu, k, &job.cache_root, item)? else {
            return Ok(None);
        };
        if launch.shared_bytes > 48 << 10 {
            f.set_max_dynamic_shared(launch.shared_bytes)?;
        }
        item.resources = Some(resources(gpu, &f, &launch)?);
        item.launch = Some(launch.clone());
        return Ok(Some(Runner::Kernel { f, launch }));
    }
    let Reference::Op(op) = reference else {
        return Err(BenchError::Other("no reference".into()));
    };
    let (ins, _) = bound(r);
    let (_, xd) = shape_of(&r.args[ins[0]]);
    let entry = match op {
        BuiltinOp::Transpose => Some(match xd.bytes() {
            1 => "lab_transpose_u8",
            2 => "lab_transpose_u16",
            8 => "lab_transpose_u64",
            _ => "lab_transpose_u32",
        }),
        BuiltinOp::ReduceSum => Some("lab_reduce_rows"),
        BuiltinOp::Softmax => Some("lab_softmax_rows"),
        BuiltinOp::Layernorm => Some("lab_layernorm_rows"),
        _ => None,
    };
    let f = match entry {
        Some(e) => {
            let mut scratch = ItemResult::default();
            match load(gpu, &reference_kernel(e), &job.cache_root, &mut scratch)? {
                Some(f) => Some(f),
                None => {
                    return Err(BenchError::Other(format!(
                        "built-in reference failed to compile: {:?}",
                        scratch.failure
                    )));
                }
            }
        }
        None => None,
    };
    let blas = if *op == BuiltinOp::Gemm {
        Some(Blas::new(gpu)?)
    } else {
        None
    };
    Ok(Some(Runner::Builtin { op: *op, f, blas }))
}

/// Run once on poisoned outputs and return every out/inout buffer.
fn run_once(
    gpu: &Gpu,
    runner: &Runner,
    b: &Buffers,
    r: &Resolved,
) -> Result<Vec<(usize, Vec<f64>)>, BenchError> {
    b.prepare(gpu, r)?;
    runner.launch(gpu, b, r)?;
    gpu.sync()?;
    let mut outs = Vec::new();
    for (i, a) in r.args.iter().enumerate() {
        if let ResolvedArg::Buffer {
            role: Role::Out | Role::Inout,
            dtype,
            ..
        } = a
        {
            outs.push((i, b.download(gpu, i, *dtype)?));
        }
    }
    Ok(outs)
}

fn time(
    gpu: &Gpu,
    job: &Job,
    runner: &Runner,
    b: &Buffers,
    r: &Resolved,
) -> Result<Vec<f64>, BenchError> {
    let budget = Duration::from_secs_f64(job.time_budget_s);
    // One untimed-by-plan run to size the repetitions of slow kernels.
    let start = crate::bench::cuda::Event::new(&gpu.ctx)?;
    let end = crate::bench::cuda::Event::new(&gpu.ctx)?;
    b.prepare(gpu, r)?;
    start.record(&gpu.stream)?;
    runner.launch(gpu, b, r)?;
    end.record(&gpu.stream)?;
    let one = start.elapsed_ms(&end)?;
    let mut plan = Plan::with_budget(budget);
    plan.min_reps = timing::min_reps_for(one, budget, 10);
    plan.warmup = if one > 100.0 { 1 } else { 3 };
    timing::measure(gpu, &plan, &|| false, &mut |gpu, phase| match phase {
        Phase::Before => b.prepare(gpu, r),
        Phase::Body => runner.launch(gpu, b, r),
    })
}

fn is_cuda(e: &BenchError) -> bool {
    matches!(e, BenchError::Cuda { .. } | BenchError::Cublas { .. })
}

/// Returns Ok(false) when it stopped after a CUDA error.
pub fn run(job: &Job) -> Result<bool, BenchError> {
    crate::bench::libs::preload();
    let resolved = job.spec.validate().map_err(BenchError::InvalidInput)?;
    let reference = job.spec.reference().map_err(BenchError::InvalidInput)?;
    let candidates = job.spec.candidates();
    let gpu = Gpu::open(job.device, &job.cache_root)?;
    emit(&Event::Device {
        info: gpu.info.clone(),
        nvrtc: gpu.nvrtc_version_string(),
        cublas: blas::cublas_version(),
        cuda_driver: crate::bench::cuda::driver_version(),
    });
    if let Some(label) = &job.profile {
        return profile_once(&gpu, job, &resolved, &reference, label);
    }
    if job.measure_roofs {
        let mut r = Roofs::default();
        let never = || false;
        if let Ok(rows) = roofs::copy_bandwidth(
            &gpu,
            256 << 20,
            job.seed,
            Duration::from_millis(300),
            &never,
            None,
            Some(&["cuMemcpyDtoD"]),
        ) && let Some(d) = rows.iter().find(|x| x.value.is_some())
        {
            r.memory = Some(Roof {
                value: d.value.unwrap_or(0.0),
                how: format!(
                    "cuMemcpyDtoD, 256 MiB, bytes read + written, median of {}",
                    d.repetitions
                ),
            });
        }
        if let Ok((tf, _, how)) = roofs::fma_peak(&gpu, false, Duration::from_millis(300), &never) {
            r.fp32 = Some(Roof { value: tf, how });
        }
        emit(&Event::Roofs { roofs: r });
    }
    let per = items_per_size(&job.spec);
    let first_size = job.start_at / per;
    for (s, r) in resolved.iter().enumerate().skip(first_size) {
        gpu.reset_tally();
        let base = s * per;
        let b = setup(&gpu, r, job.seed)?;
        // The reference: run for its outputs; reported (checked and timed) unless an earlier worker did.
        let ref_item_no = base;
        let report_ref = ref_item_no >= job.start_at;
        if report_ref {
            emit(&Event::Start { item: ref_item_no });
        }
        let ref_kernel = match &reference {
            Reference::Kernel(k) => Some(k),
            Reference::Op(_) => None,
        };
        let mut item = ItemResult {
            size: s,
            kernel: reference.label(),
            reference: true,
            ..Default::default()
        };
        let mut ref_outputs = None;
        let outcome = (|| -> Result<(), BenchError> {
            let Some(runner) = prepare_runner(&gpu, job, &reference, ref_kernel, r, &mut item)?
            else {
                return Ok(());
            };
            let outs = run_once(&gpu, &runner, &b, r)?;
            if let Reference::Op(op) = &reference {
                let (idx, want) = builtin_expected(*op, r, &b);
                let (_, out_i) = bound(r);
                let (shape, dtype) = shape_of(&r.args[out_i]);
                let got_all = &outs
                    .iter()
                    .find(|(i, _)| *i == out_i)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let got: Vec<f64> = match &idx {
                    Some(idx) => idx.iter().map(|&i| got_all[i]).collect(),
                    None => got_all.clone(),
                };
                let shape_cmp = if idx.is_some() {
                    vec![got.len() as u64]
                } else {
                    shape
                };
                let tol = job.spec.tolerance.unwrap_or_default().resolve(dtype);
                let name = match &r.args[out_i] {
                    ResolvedArg::Buffer { name, .. } => name.clone(),
                    _ => String::new(),
                };
                let mut c = tolerance::compare(
                    &format!(
                        "{name} (vs float64 CPU{})",
                        if idx.is_some() {
                            ", sampled entries"
                        } else {
                            ""
                        }
                    ),
                    &got,
                    &want,
                    &shape_cmp,
                    tol,
                );
                if let (Some(idx), Some(m)) = (&idx, c.first_mismatch.as_mut()) {
                    m.index = idx[m.index as usize] as u64;
                }
                item.checks.push(c);
                ref_outputs = Some(vec![(out_i, got_all.clone())]);
            } else {
                item.checks = outs
                    .iter()
                    .map(|(i, v)| {
                        let name = match &r.args[*i] {
                            ResolvedArg::Buffer { name, .. } => name.clone(),
                            _ => String::new(),
                        };
                        tolerance::Comparison {
                            buffer: name,
                            passed: true,
                            checked: v.len() as u64,
                            mismatches: 0,
                            max_abs_err: 0.0,
                            max_rel_err: 0.0,
                            atol: 0.0,
                            rtol: 0.0,
                            first_mismatch: None,
                        }
                    })
                    .collect();
                ref_outputs = Some(outs);
            }
            if report_ref && item.passed() {
                item.samples_ms = time(&gpu, job, &runner, &b, r)?;
            } else if !item.passed() {
                item.failure = Some(
                    "the built-in reference disagrees with the float64 CPU computation".into(),
                );
                ref_outputs = None;
            }
            Ok(())
        })();
        let ref_cuda = outcome.as_ref().err().is_some_and(is_cuda);
        if let Err(e) = outcome {
            item.failure = Some(e.to_string());
            item.cuda_error = ref_cuda;
            ref_outputs = None;
        }
        if item.failure.is_some() && item.compile.as_ref().is_some_and(|c| !c.ok) {
            ref_outputs = None;
        }
        if report_ref {
            emit(&Event::Item {
                item: ref_item_no,
                result: item,
            });
        }
        if ref_cuda {
            // The context is gone: this size's candidates cannot be checked.
            for (j, cand) in candidates.iter().enumerate() {
                let no = base + 1 + j;
                if no >= job.start_at {
                    let result = ItemResult {
                        size: s,
                        kernel: cand.label().to_string(),
                        failure: Some(
                            "not run: the reference hit a CUDA error at this size".into(),
                        ),
                        ..Default::default()
                    };
                    emit(&Event::Item { item: no, result });
                }
            }
            return Ok(false);
        }
        for (j, cand) in candidates.iter().enumerate() {
            let no = base + 1 + j;
            if no < job.start_at {
                continue;
            }
            emit(&Event::Start { item: no });
            let mut item = ItemResult {
                size: s,
                kernel: cand.label().to_string(),
                ..Default::default()
            };
            let outcome = (|| -> Result<(), BenchError> {
                let Some(runner) = prepare_runner(&gpu, job, &reference, Some(cand), r, &mut item)?
                else {
                    return Ok(());
                };
                let outs = run_once(&gpu, &runner, &b, r)?;
                let Some(want) = &ref_outputs else {
                    item.failure = Some("not checked: the reference failed at this size, so the candidate was not timed".into());
                    return Ok(());
                };
                for (i, w) in want {
                    let (shape, dtype) = shape_of(&r.args[*i]);
                    let name = match &r.args[*i] {
                        ResolvedArg::Buffer { name, .. } => name.clone(),
                        _ => String::new(),
                    };
                    let got = outs
                        .iter()
                        .find(|(k, _)| k == i)
                        .map(|(_, v)| v.as_slice())
                        .unwrap_or(&[]);
                    let tol = job.spec.tolerance.unwrap_or_default().resolve(dtype);
                    item.checks
                        .push(tolerance::compare(&name, got, w, &shape, tol));
                }
                if item.passed() {
                    item.samples_ms = time(&gpu, job, &runner, &b, r)?;
                } else {
                    item.failure = Some(mismatch_text(&item.checks));
                }
                Ok(())
            })();
            let cuda = outcome.as_ref().err().is_some_and(is_cuda);
            if let Err(e) = outcome {
                item.failure = Some(e.to_string());
                item.cuda_error = cuda;
            }
            emit(&Event::Item {
                item: no,
                result: item,
            });
            if cuda {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Profile mode: one launch of kernel `label` at the last size, for a
/// profiler attached to this process (the parent filters on its name).
fn profile_once(
    gpu: &Gpu,
    job: &Job,
    resolved: &[Resolved],
    reference: &Reference,
    label: &str,
) -> Result<bool, BenchError> {
    let r = resolved
        .last()
        .ok_or_else(|| BenchError::InvalidInput("no size to profile".into()))?;
    let k = job
        .spec
        .kernels
        .iter()
        .find(|k| k.label() == label)
        .ok_or_else(|| BenchError::InvalidInput(format!("no kernel named `{label}`")))?;
    let b = setup(gpu, r, job.seed)?;
    let mut item = ItemResult {
        size: resolved.len() - 1,
        kernel: label.to_string(),
        ..Default::default()
    };
    let Some(runner) = prepare_runner(gpu, job, reference, Some(k), r, &mut item)? else {
        return Err(BenchError::Other(
            item.failure
                .unwrap_or_else(|| "the kernel did not compile".into()),
        ));
    };
    b.prepare(gpu, r)?;
    runner.launch(gpu, &b, r)?;
    gpu.sync()?;
    emit(&Event::Item {
        item: 0,
        result: item,
    });
    Ok(true)
}

/// One sentence naming the first bad element.
pub fn mismatch_text(checks: &[Comparison]) -> String {
    match checks.iter().find(|c| !c.passed) {
        Some(c) => match &c.first_mismatch {
            Some(m) => format!(
                "incorrect: {} has {} of {} elements outside atol {:.0e} + rtol {:.0e}; first at index {} {:?}: got {}, expected {}",
                c.buffer,
                c.mismatches,
                c.checked,
                c.atol,
                c.rtol,
                m.index,
                m.at,
                match (m.got, m.got_value.as_deref()) {
                    (Some(v), _) => v.to_string(),
                    (None, Some("never written")) =>
                        "NaN: never written (the element still holds the 0xFF poison outputs start with)".to_string(),
                    (None, Some("NaN")) => "NaN (written by the kernel)".to_string(),
                    (None, Some(other)) => other.to_string(),
                    (None, None) => "a non-finite value".to_string(),
                },
                m.expected.map_or("NaN".to_string(), |v| v.to_string())
            ),
            None => format!(
                "incorrect: {} could not be compared ({} elements)",
                c.buffer, c.checked
            ),
        },
        None => "incorrect".into(),
    }
}
