//! Element types of kernel-lab buffers and the tolerance a candidate's output
//! must meet against the reference's.
//!
//! An element passes when `|got - want| <= atol + rtol * |want|` (numpy's
//! `allclose`), with NaN or infinity in `got` failing unless `want` holds the
//! same value. The defaults per dtype allow a different order of floating-point
//! accumulation (a tiled GEMM or a tree reduction against cuBLAS or a serial
//! sum) but not a wrong element.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    F64,
    F16,
    Bf16,
    I32,
    U32,
    I64,
    U8,
}

impl Dtype {
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::U8 => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
            Dtype::I64 => "i64",
            Dtype::U8 => "u8",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F32 | Dtype::F64 | Dtype::F16 | Dtype::Bf16)
    }

    /// The default tolerance for outputs of this type.
    pub fn default_tolerance(self) -> Tolerance {
        let (atol, rtol) = match self {
            Dtype::F64 => (1e-9, 1e-7),
            Dtype::F32 => (1e-4, 1e-4),
            Dtype::F16 => (1e-3, 1e-2),
            Dtype::Bf16 => (1e-2, 2e-2),
            _ => (0.0, 0.0),
        };
        Tolerance {
            atol: Some(atol),
            rtol: Some(rtol),
        }
    }

    /// Decode little-endian elements to f64 (exact for every type but
    /// i64/u64 beyond 2^53).
    pub fn decode(self, bytes: &[u8]) -> Vec<f64> {
        let n = self.bytes();
        bytes
            .chunks_exact(n)
            .map(|c| match self {
                Dtype::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Dtype::F64 => f64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
                Dtype::F16 => {
                    crate::bench::verify::f16_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64
                }
                Dtype::Bf16 => {
                    crate::bench::verify::bf16_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64
                }
                Dtype::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Dtype::U32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Dtype::I64 => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
                Dtype::U8 => c[0] as f64,
            })
            .collect()
    }

    /// Encode one value (rounded to nearest even for the 16-bit floats,
    /// truncated toward zero for integers).
    pub fn encode(self, v: f64, out: &mut Vec<u8>) {
        match self {
            Dtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            Dtype::F64 => out.extend_from_slice(&v.to_le_bytes()),
            Dtype::F16 => out.extend_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
            Dtype::Bf16 => out.extend_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
            Dtype::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            Dtype::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            Dtype::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            Dtype::U8 => out.push(v as u8),
        }
    }
}

/// f32 to bfloat16 bits, round to nearest even (NaN kept NaN).
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) as u16) | 0x40;
    }
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// f32 to IEEE half bits, round to nearest even.
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let mant = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut h = m >> shift;
        if rest > half || (rest == half && (h & 1) == 1) {
            h += 1;
        }
        return sign | h as u16;
    }
    let mut h = ((e as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
        h += 1;
    }
    sign | h as u16
}

/// Pass: |got-ref| <= atol + rtol*|ref|.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    /// Default by dtype.
    #[serde(default)]
    pub atol: Option<f64>,
    /// Default by dtype.
    #[serde(default)]
    pub rtol: Option<f64>,
}

impl Tolerance {
    /// `self`'s values where set, else `dtype`'s defaults.
    pub fn resolve(&self, dtype: Dtype) -> (f64, f64) {
        let d = dtype.default_tolerance();
        (
            self.atol.or(d.atol).unwrap_or(0.0),
            self.rtol.or(d.rtol).unwrap_or(0.0),
        )
    }
}

/// The first element outside the tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Mismatch {
    /// Flat element index.
    pub index: u64,
    /// The same index per dimension of the buffer's shape.
    pub at: Vec<u64>,
    /// null when not finite (`got_value` says which).
    pub got: Option<f64>,
    pub expected: Option<f64>,
    /// What a non-finite `got` is: `NaN` (the kernel wrote NaN), `inf`, `-inf`, or `never written` (the
    /// element still holds the 0xFF bytes outputs are poisoned with before each run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub got_value: Option<String>,
}

fn finite_or_none(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v).filter(|v| v.is_finite())
}

/// Whether `v` is the decoded poison: all-0xFF bytes are a negative NaN whose mantissa is all ones, in every
/// float width (decoded to f64, the top 7 mantissa bits survive even from bf16). A NaN a kernel computes
/// is CUDA's canonical positive NaN (0x7fffffff).
pub fn is_poison(v: f64) -> bool {
    const TOP: u64 = 0xFFFE_0000_0000_0000; // sign, exponent, 7 mantissa bits
    v.is_nan() && v.to_bits() & TOP == TOP
}

/// The word for a non-finite element.
fn non_finite(v: f64) -> Option<String> {
    if v.is_finite() {
        None
    } else if is_poison(v) {
        Some("never written".into())
    } else if v.is_nan() {
        Some("NaN".into())
    } else if v > 0.0 {
        Some("inf".into())
    } else {
        Some("-inf".into())
    }
}

/// One output buffer compared with the reference's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Comparison {
    pub buffer: String,
    pub passed: bool,
    pub checked: u64,
    /// Elements outside the tolerance, NaN/inf where the reference is finite included.
    pub mismatches: u64,
    pub max_abs_err: f64,
    /// Largest |got - want| / |want| over elements with want != 0.
    pub max_rel_err: f64,
    pub atol: f64,
    pub rtol: f64,
    pub first_mismatch: Option<Mismatch>,
}

/// Flat index to per-dimension index (row-major).
pub fn unflatten(mut index: u64, shape: &[u64]) -> Vec<u64> {
    let mut at = vec![0; shape.len()];
    for (slot, &d) in at.iter_mut().zip(shape).rev() {
        if d > 0 {
            *slot = index % d;
            index /= d;
        }
    }
    at
}

/// Compare `got` with `want` elementwise.
pub fn compare(
    buffer: &str,
    got: &[f64],
    want: &[f64],
    shape: &[u64],
    (atol, rtol): (f64, f64),
) -> Comparison {
    let n = got.len().min(want.len());
    let (mut bad, mut max_abs, mut max_rel) = (0u64, 0f64, 0f64);
    let mut first = None;
    for i in 0..n {
        let (g, w) = (got[i], want[i]);
        let ok = if g.is_finite() && w.is_finite() {
            let d = (g - w).abs();
            max_abs = max_abs.max(d);
            if w != 0.0 {
                max_rel = max_rel.max(d / w.abs());
            }
            d <= atol + rtol * w.abs()
        } else {
            // Same non-finite value (inf == inf; NaN where the reference is NaN).
            (g.is_nan() && w.is_nan()) || g == w
        };
        if !ok {
            bad += 1;
            if first.is_none() {
                first = Some(Mismatch {
                    index: i as u64,
                    at: unflatten(i as u64, shape),
                    got: finite_or_none(g),
                    expected: finite_or_none(w),
                    got_value: non_finite(g),
                });
            }
        }
    }
    if got.len() != want.len() {
        bad += got.len().abs_diff(want.len()) as u64;
    }
    Comparison {
        buffer: buffer.to_string(),
        passed: bad == 0 && n > 0,
        checked: n as u64,
        mismatches: bad,
        max_abs_err: max_abs,
        max_rel_err: max_rel,
        atol,
        rtol,
        first_mismatch: first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_dtype_and_overrides() {
        assert_eq!(Tolerance::default().resolve(Dtype::F32), (1e-4, 1e-4));
        assert_eq!(Tolerance::default().resolve(Dtype::Bf16), (1e-2, 2e-2));
        assert_eq!(Tolerance::default().resolve(Dtype::I32), (0.0, 0.0));
        let t = Tolerance {
            atol: Some(0.5),
            rtol: None,
        };
        assert_eq!(t.resolve(Dtype::F16), (0.5, 1e-2));
    }

    #[test]
    fn comparison_finds_the_first_bad_element_and_the_errors() {
        let want: Vec<f64> = (0..12).map(|i| i as f64).collect();
        let mut got = want.clone();
        got[5] += 1e-5; // inside f32's default tolerance
        let ok = compare("y", &got, &want, &[3, 4], (1e-4, 1e-4));
        assert!(ok.passed, "{ok:?}");
        assert!((ok.max_abs_err - 1e-5).abs() < 1e-12);
        assert!((ok.max_rel_err - 2e-6).abs() < 1e-12);
        got[6] = 7.0; // an off-by-one: element 6 holds element 7
        got[11] = Dtype::F32.decode(&[0xFF; 4])[0]; // never written (poison)
        let bad = compare("y", &got, &want, &[3, 4], (1e-4, 1e-4));
        assert!(!bad.passed);
        assert_eq!(bad.mismatches, 2);
        let first = bad.first_mismatch.unwrap();
        assert_eq!((first.index, first.at.clone()), (6, vec![1, 2]));
        assert_eq!((first.got, first.expected), (Some(7.0), Some(6.0)));
        assert_eq!(bad.max_abs_err, 1.0);
        // The relative part scales with the reference value.
        assert!(compare("y", &[1000.05], &[1000.0], &[1], (0.0, 1e-4)).passed);
        assert!(!compare("y", &[1000.2], &[1000.0], &[1], (0.0, 1e-4)).passed);
        // Integers default to exact.
        let (a, r) = Tolerance::default().resolve(Dtype::I32);
        assert!(!compare("i", &[3.0], &[4.0], &[1], (a, r)).passed);
        // NaN where the reference has NaN is the same value.
        assert!(compare("y", &[f64::NAN], &[f64::NAN], &[1], (0.0, 0.0)).passed);
        // Nothing compared is not a pass.
        assert!(!compare("y", &[], &[], &[0], (1.0, 1.0)).passed);
    }

    #[test]
    fn a_nan_the_kernel_wrote_is_not_called_unwritten() {
        for d in [Dtype::F32, Dtype::F64, Dtype::F16, Dtype::Bf16] {
            let poison = d.decode(&vec![0xFF; d.bytes()])[0];
            assert!(is_poison(poison), "{d:?}");
            let m = compare("y", &[poison], &[1.0], &[1], (0.0, 0.0))
                .first_mismatch
                .unwrap();
            assert_eq!(m.got_value.as_deref(), Some("never written"), "{d:?}");
        }
        // What a kernel computes (0/0 on the GPU is the canonical positive NaN).
        let written = Dtype::F32.decode(&0x7fff_ffffu32.to_le_bytes())[0];
        let m = compare("y", &[written], &[1.0], &[1], (0.0, 0.0))
            .first_mismatch
            .unwrap();
        assert_eq!(m.got_value.as_deref(), Some("NaN"));
        let m = compare("y", &[f64::INFINITY], &[1.0], &[1], (0.0, 0.0))
            .first_mismatch
            .unwrap();
        assert_eq!(m.got_value.as_deref(), Some("inf"));
    }

    #[test]
    fn encodings_round_trip() {
        for (d, v) in [
            (Dtype::F32, 1.5),
            (Dtype::F64, -2.25),
            (Dtype::F16, 0.333251953125),
            (Dtype::Bf16, -3.0),
            (Dtype::I32, -7.0),
            (Dtype::U8, 200.0),
        ] {
            let mut b = Vec::new();
            d.encode(v, &mut b);
            assert_eq!(b.len(), d.bytes());
            assert_eq!(d.decode(&b), vec![v], "{d:?}");
        }
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001);
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(unflatten(7, &[2, 2, 2]), vec![1, 1, 1]);
    }
}
