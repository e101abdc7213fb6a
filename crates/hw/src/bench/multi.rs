//! Peer-to-peer copies between the GPUs of one host: for every ordered pair,
//! whether peer access is possible, unidirectional and bidirectional
//! bandwidth, and the latency of a small copy.

use aisp_base::Cancel;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::BenchError;
use super::cuda::{Event, check_raw};
use super::device::Gpu;
use super::stats;

/// One ordered pair (src → dst).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct P2pPair {
    pub src: usize,
    pub dst: usize,
    /// cuDeviceCanAccessPeer(src, dst): copies go straight over NVLink/PCIe;
    /// otherwise the driver stages them through host memory.
    pub peer_access: bool,
    /// src → dst copy bandwidth, GB/s (bytes copied per second).
    pub unidirectional_gb_per_s: f64,
    /// src → dst and dst → src at once; GB/s is the sum of both directions.
    pub bidirectional_gb_per_s: f64,
    /// Time per 4-byte copy, 100 back to back on one stream, in µs.
    pub latency_us: f64,
    /// The copied bytes arrived intact.
    pub verified: bool,
    pub cv_pct: f64,
}

fn can_access(a: &Gpu, b: &Gpu) -> Result<bool, BenchError> {
    let mut v = 0i32;
    // SAFETY: writes one int; both devices are valid.
    check_raw("cuDeviceCanAccessPeer", unsafe {
        sys::cuDeviceCanAccessPeer(&mut v, a.ctx.device(), b.ctx.device())
    })?;
    Ok(v != 0)
}

fn enable_peer(from: &Gpu, to: &Gpu) -> Result<(), BenchError> {
    from.ctx.bind()?;
    // SAFETY: valid peer context; "already enabled" is fine.
    let r = unsafe { sys::cuCtxEnablePeerAccess(to.ctx.raw(), 0) };
    if r == sys::CUresult::CUDA_SUCCESS
        || r == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
    {
        Ok(())
    } else {
        check_raw("cuCtxEnablePeerAccess", r)
    }
}

/// Measure every ordered pair of `gpus` with `bytes`-byte copies.
pub fn p2p_matrix(
    gpus: &[Gpu],
    bytes: usize,
    budget: Duration,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(&str),
) -> Result<Vec<P2pPair>, BenchError> {
    let n = gpus.len();
    let mut access = vec![vec![false; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i != j {
                access[i][j] = can_access(&gpus[i], &gpus[j])?;
                if access[i][j] {
                    enable_peer(&gpus[i], &gpus[j])?;
                }
            }
        }
    }
    let srcs = gpus
        .iter()
        .map(|g| g.alloc(bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let dsts = gpus
        .iter()
        .map(|g| g.alloc(bytes))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, (g, s)) in gpus.iter().zip(&srcs).enumerate() {
        g.fill_uniform(s, 1000 + i as u32, -1.0, 1.0)?;
        g.sync()?;
    }
    let mut pairs = Vec::new();
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            if cancelled() {
                return Err(BenchError::Cancelled);
            }
            progress(&format!("GPU {i} -> GPU {j}"));
            let (a, b) = (&gpus[i], &gpus[j]);
            // Check once: the destination holds the source's values.
            b.poison(&dsts[j])?;
            b.sync()?;
            a.stream
                .copy_peer(dsts[j].ptr(), &b.ctx, srcs[i].ptr(), &a.ctx, bytes)?;
            a.sync()?;
            let got: Vec<f32> = dsts[j].download(&b.stream)?;
            let want: Vec<f32> = srcs[i].download(&a.stream)?;
            let verified = got.len() == want.len()
                && got
                    .iter()
                    .zip(&want)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
            if !verified {
                return Err(BenchError::Other(format!(
                    "a copy from GPU {i} to GPU {j} corrupted data"
                )));
            }
            // Unidirectional: events on the source's stream.
            let (e0, e1) = (Event::new(&a.ctx)?, Event::new(&a.ctx)?);
            let mut uni = Vec::new();
            let began = Instant::now();
            for rep in 0..1000 {
                e0.record(&a.stream)?;
                a.stream
                    .copy_peer(dsts[j].ptr(), &b.ctx, srcs[i].ptr(), &a.ctx, bytes)?;
                e1.record(&a.stream)?;
                let ms = e0.elapsed_ms(&e1)?;
                if rep >= 2 {
                    uni.push(ms);
                }
                if uni.len() >= 10 && began.elapsed() >= budget {
                    break;
                }
            }
            // Bidirectional: both streams at once, host-timed around 4 copies each.
            let mut bi = Vec::new();
            let began = Instant::now();
            for rep in 0..1000 {
                a.sync()?;
                b.sync()?;
                let t = Instant::now();
                for _ in 0..4 {
                    a.stream
                        .copy_peer(dsts[j].ptr(), &b.ctx, srcs[i].ptr(), &a.ctx, bytes)?;
                    b.stream
                        .copy_peer(dsts[i].ptr(), &a.ctx, srcs[j].ptr(), &b.ctx, bytes)?;
                }
                a.sync()?;
                b.sync()?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if rep >= 1 {
                    bi.push(ms);
                }
                if bi.len() >= 5 && began.elapsed() >= budget {
                    break;
                }
            }
            // Latency: 100 tiny copies back to back.
            let mut lat = Vec::new();
            for _ in 0..12 {
                e0.record(&a.stream)?;
                for _ in 0..100 {
                    a.stream
                        .copy_peer(dsts[j].ptr(), &b.ctx, srcs[i].ptr(), &a.ctx, 4)?;
                }
                e1.record(&a.stream)?;
                lat.push(e0.elapsed_ms(&e1)? * 1000.0 / 100.0);
            }
            let uni_s =
                stats::Summary::of(&uni).ok_or_else(|| BenchError::Other("no samples".into()))?;
            pairs.push(P2pPair {
                src: a.info.ordinal,
                dst: b.info.ordinal,
                peer_access: access[i][j],
                unidirectional_gb_per_s: bytes as f64 / (uni_s.median_ms / 1e3) / 1e9,
                bidirectional_gb_per_s: 8.0 * bytes as f64 / (stats::median(&bi) / 1e3) / 1e9,
                latency_us: stats::median(&lat[2..]),
                verified,
                cv_pct: uni_s.cv_pct,
            });
        }
    }
    Ok(pairs)
}
