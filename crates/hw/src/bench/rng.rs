//! The CPU mirror of the device-side random numbers in `kernels/common.cuh`.
//!
//! Inputs are generated on the GPU (`fill_uniform_f32`) from a counter-based
//! hash of (seed, index). The same function here lets the host compute
//! reference results without copying inputs back, bit for bit.

/// splitmix64 finaliser over (seed, index); the high 32 bits.
pub fn hash(seed: u32, i: u64) -> u32 {
    let mut z = (seed as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(0x94D0_49BB_1331_11EB);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 32) as u32
}

/// Uniform in [lo, hi), rounded exactly as the device computes it
/// (`__fmaf_rn(hi - lo, t, lo)`).
pub fn uniform(seed: u32, i: u64, lo: f32, hi: f32) -> f32 {
    let t = (hash(seed, i) >> 8) as f32 * (1.0 / 16_777_216.0);
    (hi - lo).mul_add(t, lo)
}

/// A fresh seed for a run: nanoseconds since the epoch folded to 32 bits,
/// never zero.
pub fn fresh_seed() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x1234_5678);
    let s = hash((nanos >> 32) as u32, nanos & 0xFFFF_FFFF);
    if s == 0 { 1 } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_an_independent_implementation() {
        // Computed with Python integers (arbitrary precision, masked to 64 bits)
        // from the same formula as kernels/common.cuh.
        assert_eq!(hash(1, 0), 3_139_425_692);
        assert_eq!(hash(1, 1), 791_299_464);
        assert_eq!(hash(42, 123_456_789), 3_248_803_816);
        assert_eq!(hash(7, (1 << 40) + 3), 2_201_880_504);
        assert_eq!(uniform(1, 0, -1.0, 1.0), 0.461_908_94);
        assert_eq!(uniform(1, 1, -1.0, 1.0), -0.631_522_54);
        assert_eq!(uniform(42, 123_456_789, -1.0, 1.0), 0.512_842_06);
    }

    #[test]
    fn uniform_stays_in_range_and_is_not_constant() {
        let vals: Vec<f32> = (0..10_000).map(|i| uniform(99, i, 0.0, 1.0)).collect();
        assert!(vals.iter().all(|&v| (0.0..1.0).contains(&v)));
        let mean = vals.iter().map(|&v| v as f64).sum::<f64>() / vals.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert_ne!(fresh_seed(), 0);
    }
}
