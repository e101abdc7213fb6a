//! Checking a variant's output against a CPU reference before it is timed.
//!
//! Outputs are poisoned with 0xFF bytes (NaN in every float format used)
//! before the checked run, so an element the kernel did not write fails.
//! Elementwise checks run on all host cores; GEMMs are checked on sampled
//! entries against a float64 dot product of the exact operands the GPU saw.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Check {
    pub passed: bool,
    /// What was compared and what was found, in one sentence.
    pub detail: String,
    /// Elements compared.
    pub checked: u64,
    /// Elements that differ beyond the tolerance (or were not written).
    pub mismatches: u64,
    /// Relative error ‖got − ref‖₂ / ‖ref‖₂ where that is the criterion.
    pub rel_err: Option<f64>,
}

impl Check {
    pub fn fail(detail: impl Into<String>) -> Check {
        Check {
            passed: false,
            detail: detail.into(),
            checked: 0,
            mismatches: 0,
            rel_err: None,
        }
    }
}

fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(32)
}

/// Compare `got[i]` with `want(i)` for every i using `same`, on all cores.
/// Reports the number of mismatches and the first one.
pub fn check_all<T, W, S>(what: &str, got: &[T], want: W, same: S) -> Check
where
    T: Copy + Send + Sync + std::fmt::Debug,
    W: Fn(usize) -> T + Sync,
    S: Fn(T, T) -> bool + Sync,
{
    let n = got.len();
    let parts = threads().min(n.max(1));
    let chunk = n.div_ceil(parts.max(1)).max(1);
    type Part<T> = (u64, Option<(usize, T, T)>);
    let results: Vec<Part<T>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..parts)
            .map(|p| {
                let (want, same) = (&want, &same);
                s.spawn(move || {
                    let (lo, hi) = (p * chunk, ((p + 1) * chunk).min(n));
                    let mut bad = 0u64;
                    let mut first = None;
                    for (i, &g) in got.iter().enumerate().take(hi).skip(lo) {
                        let w = want(i);
                        if !same(g, w) {
                            bad += 1;
                            if first.is_none() {
                                first = Some((i, g, w));
                            }
                        }
                    }
                    (bad, first)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((u64::MAX, None)))
            .collect()
    });
    let mismatches: u64 = results
        .iter()
        .map(|r| r.0)
        .fold(0u64, |a, b| a.saturating_add(b));
    let first = results.iter().find_map(|r| r.1);
    Check {
        passed: mismatches == 0 && n > 0,
        detail: match first {
            None if n == 0 => format!("{what}: nothing to compare"),
            None => format!("{what}: all {n} elements match the CPU reference"),
            Some((i, g, w)) => format!(
                "{what}: {mismatches} of {n} elements differ; first at {i}: got {g:?}, expected {w:?}"
            ),
        },
        checked: n as u64,
        mismatches,
        rel_err: None,
    }
}

/// Bitwise equality for f32 (NaN never equals; the poison is NaN).
pub fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() && !a.is_nan()
}

/// Relative L2 error of `got` against `want` (same length), passing when it
/// is at most `tol` and nothing is NaN or infinite.
pub fn rel_l2(what: &str, got: &[f64], want: &[f64], tol: f64) -> Check {
    let n = got.len().min(want.len());
    let bad = got.iter().take(n).filter(|g| !g.is_finite()).count() as u64;
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..n {
        num += (got[i] - want[i]).powi(2);
        den += want[i].powi(2);
    }
    let err = if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    };
    let passed = bad == 0 && n > 0 && err <= tol && got.len() == want.len();
    Check {
        passed,
        detail: if bad > 0 {
            format!(
                "{what}: {bad} of {n} checked values are NaN or infinite (unwritten or overflowed)"
            )
        } else {
            format!("{what}: relative L2 error {err:.3e} over {n} values (tolerance {tol:.1e})")
        },
        checked: n as u64,
        mismatches: bad,
        rel_err: Some(err),
    }
}

/// A scalar against a reference with a relative tolerance.
pub fn close_scalar(what: &str, got: f64, want: f64, tol: f64) -> Check {
    let err = if want != 0.0 {
        ((got - want) / want).abs()
    } else {
        got.abs()
    };
    Check {
        passed: got.is_finite() && err <= tol,
        detail: format!(
            "{what}: got {got}, CPU reference {want}, relative error {err:.2e} (tolerance {tol:.0e})"
        ),
        checked: 1,
        mismatches: u64::from(!(got.is_finite() && err <= tol)),
        rel_err: Some(err),
    }
}

/// bfloat16 bits to f32 (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// IEEE half bits to f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) & 1) as u32;
    let exp = ((h >> 10) & 0x1f) as i32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign << 31,
        (0, m) => {
            // Subnormal: value = m * 2^-24.
            let v = m as f32 * (1.0 / 16_777_216.0);
            return if sign == 1 { -v } else { v };
        }
        (31, 0) => (sign << 31) | 0x7f80_0000,
        (31, m) => (sign << 31) | 0x7fc0_0000 | (m << 13),
        (e, m) => (sign << 31) | (((e - 15 + 127) as u32) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// FP8 E4M3 (the "fn" variant: no infinities, 0x7F/0xFF are NaN) to f32.
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> 3) & 0xf) as i32;
    let mant = (b & 0x7) as f32;
    if exp == 0xf && (b & 0x7) == 0x7 {
        return f32::NAN;
    }
    let mag = if exp == 0 {
        mant / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + mant / 8.0) * 2f32.powi(exp - 7)
    };
    sign * mag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elementwise_check_finds_every_mismatch_and_the_first() {
        let got: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
        let ok = check_all("copy", &got, |i| i as f32, same_bits);
        assert!(ok.passed);
        assert_eq!((ok.checked, ok.mismatches), (10_000, 0));
        let mut bad = got.clone();
        bad[17] = f32::NAN; // poison left in place
        bad[9_999] = -1.0;
        let c = check_all("copy", &bad, |i| i as f32, same_bits);
        assert!(!c.passed);
        assert_eq!(c.mismatches, 2);
        assert!(c.detail.contains("first at 17"), "{}", c.detail);
        assert!(!check_all("copy", &[] as &[f32], |i| i as f32, same_bits).passed);
        // NaN never matches, even itself.
        assert!(!same_bits(f32::NAN, f32::NAN));
    }

    #[test]
    fn relative_error() {
        let want = vec![3.0, 4.0];
        let c = rel_l2("gemm", &[3.0, 4.0 + 5e-4], &want, 1e-3);
        assert!(c.passed);
        assert!((c.rel_err.unwrap() - 1e-4).abs() < 1e-12);
        assert!(!rel_l2("gemm", &[3.0, 4.1], &want, 1e-3).passed);
        let nan = rel_l2("gemm", &[f64::NAN, 4.0], &want, 1e-3);
        assert!(!nan.passed && nan.mismatches == 1);
        assert!(close_scalar("sum", 100.0001, 100.0, 1e-5).passed);
        assert!(!close_scalar("sum", 101.0, 100.0, 1e-5).passed);
    }

    #[test]
    fn low_precision_decoders() {
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(bf16_to_f32(0xc040), -3.0);
        assert!(bf16_to_f32(0xffff).is_nan());
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert!(f16_to_f32(0xffff).is_nan());
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0xb8), -1.0);
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
        assert!(e4m3_to_f32(0xff).is_nan());
        assert!(e4m3_to_f32(0x7f).is_nan());
    }
}
