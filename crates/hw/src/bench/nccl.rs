//! NCCL all-reduce bus bandwidth across the GPUs of one host, one thread per
//! GPU, reported as nccl-tests defines it: algbw = bytes / time, busbw =
//! algbw × 2(n−1)/n for all-reduce (GB = 10^9 bytes).
//!
//! libnccl is loaded by hand: PyTorch's `nvidia-nccl-cu*` wheel ships it as
//! `libnccl.so.2`, a name cudarc's loader does not try, and the path may come
//! from `AISP_NCCL_LIB`. Only the handful of functions used here are bound.
//!
//! NVLink SHARP (NVLS) follows NCCL's own environment (`NCCL_NVLS_ENABLE`);
//! aisp does not change it.

use aisp_base::Cancel;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::BenchError;
use super::cuda::Event;
use super::device::Gpu;
use super::stats;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    internal: [c_char; 128],
}

type Comm = *mut c_void;
type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetUniqueId = unsafe extern "C" fn(*mut UniqueId) -> c_int;
type CommInitRank = unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> c_int;
type AllReduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    Comm,
    *mut c_void,
) -> c_int;
type CommDestroy = unsafe extern "C" fn(Comm) -> c_int;
type ErrorString = unsafe extern "C" fn(c_int) -> *const c_char;

/// `ncclFloat32` and `ncclSum` from nccl.h (stable since NCCL 2.0).
const NCCL_FLOAT32: c_int = 7;
const NCCL_SUM: c_int = 0;

/// The loaded library and the functions aisp uses.
pub struct Nccl {
    _lib: libloading::Library,
    get_version: GetVersion,
    get_unique_id: GetUniqueId,
    comm_init_rank: CommInitRank,
    all_reduce: AllReduce,
    comm_destroy: CommDestroy,
    error_string: ErrorString,
    pub path: String,
}

// SAFETY: NCCL's API is thread-safe for distinct communicators, which is how it is used.
unsafe impl Sync for Nccl {}
unsafe impl Send for Nccl {}

impl Nccl {
    pub fn load(path: &Path) -> Result<Nccl, BenchError> {
        let missing = || BenchError::NoLibrary(format!("NCCL ({})", path.display()));
        // SAFETY: loading NVIDIA's NCCL runs its initialisers only.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|_| missing())?;
        // SAFETY: each symbol is looked up with its C signature from nccl.h.
        unsafe {
            let sym = |name: &[u8]| -> Result<*const (), BenchError> {
                lib.get::<*const ()>(name).map(|s| *s).map_err(|_| {
                    BenchError::NoLibrary(format!("NCCL symbol {}", String::from_utf8_lossy(name)))
                })
            };
            let get_version: GetVersion = std::mem::transmute(sym(b"ncclGetVersion\0")?);
            let get_unique_id: GetUniqueId = std::mem::transmute(sym(b"ncclGetUniqueId\0")?);
            let comm_init_rank: CommInitRank = std::mem::transmute(sym(b"ncclCommInitRank\0")?);
            let all_reduce: AllReduce = std::mem::transmute(sym(b"ncclAllReduce\0")?);
            let comm_destroy: CommDestroy = std::mem::transmute(sym(b"ncclCommDestroy\0")?);
            let error_string: ErrorString = std::mem::transmute(sym(b"ncclGetErrorString\0")?);
            Ok(Nccl {
                _lib: lib,
                get_version,
                get_unique_id,
                comm_init_rank,
                all_reduce,
                comm_destroy,
                error_string,
                path: path.display().to_string(),
            })
        }
    }

    fn check(&self, call: &str, r: c_int) -> Result<(), BenchError> {
        if r == 0 {
            return Ok(());
        }
        // SAFETY: NCCL returns a static string for any result code.
        let text = unsafe {
            let p = (self.error_string)(r);
            if p.is_null() {
                format!("error {r}")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Err(BenchError::Nccl {
            call: call.to_string(),
            error: text,
        })
    }

    /// NCCL version as `major.minor.patch`.
    pub fn version(&self) -> Result<String, BenchError> {
        let mut v = 0;
        // SAFETY: writes one int.
        self.check("ncclGetVersion", unsafe { (self.get_version)(&mut v) })?;
        // Since 2.9: major*10000 + minor*100 + patch.
        Ok(format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100))
    }
}

/// A barrier that lets every waiter go (answering `false`) once `stop` is
/// set, so one rank's failure ends the others' waits instead of hanging them.
pub struct StopBarrier {
    n: usize,
    state: Mutex<(usize, u64)>,
    cv: Condvar,
}

impl StopBarrier {
    pub fn new(n: usize) -> StopBarrier {
        StopBarrier {
            n,
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
        }
    }

    /// Wait for all `n` parties; `false` when `stop` was set instead.
    pub fn wait(&self, stop: &AtomicBool) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if stop.load(Ordering::SeqCst) {
            self.cv.notify_all();
            return false;
        }
        let generation = st.1;
        st.0 += 1;
        if st.0 == self.n {
            st.0 = 0;
            st.1 += 1;
            self.cv.notify_all();
            return true;
        }
        loop {
            let (guard, _) = self
                .cv
                .wait_timeout(st, Duration::from_millis(20))
                .unwrap_or_else(|p| p.into_inner());
            st = guard;
            if st.1 != generation {
                return true;
            }
            if stop.load(Ordering::SeqCst) {
                return false;
            }
        }
    }
}

/// algbw and busbw of an all-reduce of `bytes` taking `seconds` on `ranks` GPUs.
pub fn allreduce_bandwidth(bytes: f64, seconds: f64, ranks: usize) -> (f64, f64) {
    let algbw = bytes / seconds / 1e9;
    let factor = if ranks > 0 {
        2.0 * (ranks as f64 - 1.0) / ranks as f64
    } else {
        0.0
    };
    (algbw, algbw * factor)
}

/// One message size.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AllReduceRow {
    pub bytes: u64,
    /// float32 elements per rank.
    pub count: u64,
    /// Median over repetitions of the slowest rank's time per all-reduce.
    pub time_us: f64,
    pub algbw_gb_per_s: f64,
    pub busbw_gb_per_s: f64,
    pub repetitions: u32,
    /// The sums were checked on sampled elements of every rank.
    pub verified: bool,
}

/// All-reduce (sum, float32) over `gpus.len()` GPUs for each size in
/// `sizes_bytes`, `iters` back-to-back all-reduces per timed repetition.
pub fn allreduce_sweep(
    nccl: &Nccl,
    ordinals: &[usize],
    cache_root: &Path,
    sizes_bytes: &[u64],
    budget_per_size: Duration,
    cancelled: Cancel<'_>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<AllReduceRow>, BenchError> {
    let n = ordinals.len();
    let mut id = UniqueId { internal: [0; 128] };
    // SAFETY: fills the id.
    nccl.check("ncclGetUniqueId", unsafe { (nccl.get_unique_id)(&mut id) })?;
    let max_bytes = sizes_bytes.iter().copied().max().unwrap_or(0).max(4) as usize;
    let barrier = StopBarrier::new(n);
    let stop = AtomicBool::new(false);
    let failed = Mutex::new(None::<BenchError>);
    // samples[size_index][rank] = per-repetition µs per all-reduce
    let samples = Mutex::new(vec![vec![Vec::<f64>::new(); n]; sizes_bytes.len()]);
    let checks = Mutex::new(vec![true; sizes_bytes.len()]);
    let reps_per_size = Mutex::new(vec![0u32; sizes_bytes.len()]);
    // Each rank's time for one all-reduce; every rank sizes its loops from
    // the slowest, so all of them issue the same number of collectives.
    let probe_ms = Mutex::new(vec![0.0f64; n]);
    std::thread::scope(|s| {
        for (rank, &ordinal) in ordinals.iter().enumerate() {
            let (barrier, stop, failed, samples, checks, reps_per_size, probe_ms) = (
                &barrier,
                &stop,
                &failed,
                &samples,
                &checks,
                &reps_per_size,
                &probe_ms,
            );
            s.spawn(move || {
                let fail = |e: BenchError| {
                    stop.store(true, Ordering::SeqCst);
                    let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                    if f.is_none() {
                        *f = Some(e);
                    }
                };
                // A set-up error on any rank releases everyone at the barrier
                // before anyone joins the communicator.
                let setup =
                    (|| -> Result<(Gpu, super::cuda::DevBuf, super::cuda::DevBuf), BenchError> {
                        let gpu = Gpu::open(ordinal, cache_root)?;
                        let send = gpu.alloc(max_bytes)?;
                        let recv = gpu.alloc(max_bytes)?;
                        gpu.fill_uniform(&send, 500 + rank as u32, -1.0, 1.0)?;
                        gpu.sync()?;
                        Ok((gpu, send, recv))
                    })();
                let ready = setup.is_ok();
                if let Err(e) = &setup {
                    fail(BenchError::Other(format!("GPU {ordinal}: {e}")));
                }
                let together = barrier.wait(stop);
                let Ok((gpu, send, recv)) = setup else { return };
                if !together {
                    return;
                }
                if !ready || stop.load(Ordering::SeqCst) {
                    return;
                }
                let mut comm: Comm = std::ptr::null_mut();
                // SAFETY: every rank calls this with the same id and rank count.
                let r = unsafe { (nccl.comm_init_rank)(&mut comm, n as c_int, id, rank as c_int) };
                if let Err(e) = nccl.check("ncclCommInitRank", r) {
                    fail(e);
                    return;
                }
                let stream_raw = gpu.stream.raw() as *mut c_void;
                let all_reduce = |count: usize| -> Result<(), BenchError> {
                    // SAFETY: send/recv hold at least `count` floats on this rank's device.
                    nccl.check("ncclAllReduce", unsafe {
                        (nccl.all_reduce)(
                            send.ptr() as *const c_void,
                            recv.ptr() as *mut c_void,
                            count,
                            NCCL_FLOAT32,
                            NCCL_SUM,
                            comm,
                            stream_raw,
                        )
                    })
                };
                let (e0, e1) = match (Event::new(&gpu.ctx), Event::new(&gpu.ctx)) {
                    (Ok(a), Ok(b)) => (a, b),
                    _ => {
                        fail(BenchError::Other("cuEventCreate failed".into()));
                        return;
                    }
                };
                for (si, &bytes) in sizes_bytes.iter().enumerate() {
                    if rank == 0 && cancelled() {
                        stop.store(true, Ordering::SeqCst);
                    }
                    if !barrier.wait(stop) {
                        break;
                    }
                    if rank == 0 {
                        progress(&format!("all-reduce {bytes} bytes"));
                    }
                    let count = (bytes / 4).max(1) as usize;
                    let result = (|| -> Result<(), BenchError> {
                        gpu.poison(&recv)?;
                        all_reduce(count)?;
                        gpu.sync()?;
                        // Check up to 4096 spread elements against the sum over ranks.
                        let got: Vec<f32> = recv.download_range(0, count, &gpu.stream)?;
                        let step = (count / 4096).max(1);
                        let ok = (0..count).step_by(step).all(|i| {
                            let want: f64 = (0..n)
                                .map(|r| {
                                    super::rng::uniform(500 + r as u32, i as u64, -1.0, 1.0) as f64
                                })
                                .sum();
                            (got[i] as f64 - want).abs() <= 1e-5 * n as f64
                        });
                        if !ok {
                            checks.lock().unwrap_or_else(|p| p.into_inner())[si] = false;
                        }
                        for _ in 0..5 {
                            all_reduce(count)?;
                        }
                        gpu.sync()?;
                        // Timed: iterations sized so one repetition is about 2 ms.
                        e0.record(&gpu.stream)?;
                        all_reduce(count)?;
                        e1.record(&gpu.stream)?;
                        let mine_ms = e0.elapsed_ms(&e1)?.max(1e-3);
                        probe_ms.lock().unwrap_or_else(|p| p.into_inner())[rank] = mine_ms;
                        if !barrier.wait(stop) {
                            return Err(BenchError::Cancelled);
                        }
                        let one_ms = probe_ms
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .iter()
                            .copied()
                            .fold(1e-3, f64::max);
                        let iters = ((2.0 / one_ms).ceil() as usize).clamp(1, 1000);
                        let reps = ((budget_per_size.as_secs_f64() * 1e3 / (one_ms * iters as f64))
                            .floor() as usize)
                            .clamp(5, 200);
                        let mut mine = Vec::with_capacity(reps);
                        for _ in 0..reps {
                            if !barrier.wait(stop) {
                                return Err(BenchError::Cancelled);
                            }
                            e0.record(&gpu.stream)?;
                            for _ in 0..iters {
                                all_reduce(count)?;
                            }
                            e1.record(&gpu.stream)?;
                            mine.push(e0.elapsed_ms(&e1)? * 1e3 / iters as f64);
                        }
                        reps_per_size.lock().unwrap_or_else(|p| p.into_inner())[si] = reps as u32;
                        samples.lock().unwrap_or_else(|p| p.into_inner())[si][rank] = mine;
                        Ok(())
                    })();
                    match result {
                        Ok(()) => {}
                        // Another rank stopped (or the caller cancelled): leave quietly.
                        Err(BenchError::Cancelled) => break,
                        // The others are released at their next barrier. A rank
                        // that fails between two collectives of a pair can still
                        // leave its peers waiting inside NCCL.
                        Err(e) => {
                            fail(e);
                            break;
                        }
                    }
                }
                // SAFETY: communicator created above, destroyed once.
                unsafe { (nccl.comm_destroy)(comm) };
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if cancelled() || stop.load(Ordering::SeqCst) {
        return Err(BenchError::Cancelled);
    }
    let samples = samples.into_inner().unwrap_or_else(|p| p.into_inner());
    let checks = checks.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut rows = Vec::new();
    for (si, &bytes) in sizes_bytes.iter().enumerate() {
        let per_rank = &samples[si];
        let reps = per_rank.iter().map(|v| v.len()).min().unwrap_or(0);
        if reps == 0 {
            continue;
        }
        // Slowest rank per repetition (the collective is done when all are).
        let slowest: Vec<f64> = (0..reps)
            .map(|r| per_rank.iter().map(|v| v[r]).fold(0.0, f64::max))
            .collect();
        let t_us = stats::median(&slowest);
        let (algbw, busbw) = allreduce_bandwidth(bytes as f64, t_us / 1e6, n);
        rows.push(AllReduceRow {
            bytes,
            count: (bytes / 4).max(1),
            time_us: t_us,
            algbw_gb_per_s: algbw,
            busbw_gb_per_s: busbw,
            repetitions: reps as u32,
            verified: checks[si],
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_bandwidth_follows_nccl_tests() {
        // 1 GB in 10 ms on 8 ranks: algbw 100 GB/s, busbw 100 * 2*7/8 = 175 GB/s.
        let (alg, bus) = allreduce_bandwidth(1e9, 0.01, 8);
        assert!((alg - 100.0).abs() < 1e-9);
        assert!((bus - 175.0).abs() < 1e-9);
        // Two ranks: busbw = algbw.
        let (alg, bus) = allreduce_bandwidth(1e9, 0.01, 2);
        assert!((alg - bus).abs() < 1e-9);
    }

    #[test]
    fn the_barrier_meets_and_releases_everyone_on_stop() {
        let b = StopBarrier::new(3);
        let stop = AtomicBool::new(false);
        // Three parties meet twice.
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|_| s.spawn(|| b.wait(&stop) && b.wait(&stop)))
                .collect();
            assert!(hs.into_iter().all(|h| h.join().unwrap()));
        });
        // Two wait for a third that fails instead: both are released with `false`.
        let b = StopBarrier::new(3);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let waiters: Vec<_> = (0..2).map(|_| s.spawn(|| b.wait(&stop))).collect();
            std::thread::sleep(Duration::from_millis(30));
            stop.store(true, Ordering::SeqCst);
            assert!(waiters.into_iter().all(|h| !h.join().unwrap()));
        });
        assert!(!b.wait(&stop));
    }

    #[test]
    fn a_missing_library_is_an_error_not_a_panic() {
        let err = Nccl::load(Path::new("/nonexistent/libnccl.so.2"))
            .err()
            .unwrap();
        assert!(matches!(err, BenchError::NoLibrary(_)));
    }
}
