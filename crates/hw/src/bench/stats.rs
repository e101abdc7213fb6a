//! Statistics over timing samples: order statistics, spread, and the two
//! comparisons the benchmark tools report (a bootstrap confidence interval for
//! a ratio of medians and a Mann-Whitney U test).
//!
//! Everything here is deterministic: the bootstrap uses a fixed-seed generator
//! so that the same samples always give the same interval.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Order statistics and spread of one variant's samples (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub n: usize,
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Coefficient of variation: sample standard deviation over mean, in percent.
    pub cv_pct: f64,
}

impl Summary {
    /// Summarize samples; `None` when there are none or one is not finite.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            sorted.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Some(Summary {
            n,
            median_ms: quantile_sorted(&sorted, 0.5),
            p10_ms: quantile_sorted(&sorted, 0.1),
            p90_ms: quantile_sorted(&sorted, 0.9),
            min_ms: sorted[0],
            max_ms: sorted[n - 1],
            mean_ms: mean,
            cv_pct: if mean > 0.0 {
                var.sqrt() / mean * 100.0
            } else {
                0.0
            },
        })
    }
}

/// Quantile of sorted data by linear interpolation between closest ranks
/// (the "type 7" definition used by NumPy and R by default).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            let frac = pos - lo as f64;
            sorted[lo] + (sorted[hi] - sorted[lo]) * frac
        }
    }
}

/// Median of unsorted data.
pub fn median(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, 0.5)
}

/// A small deterministic generator (xorshift64*) for resampling.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Speedup of `candidate` over `baseline` (ratio of median times, > 1 means
/// the candidate is faster) with a percentile-bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RatioCi {
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Confidence level of the interval (e.g. 0.95).
    pub level: f64,
}

/// Bootstrap the ratio median(baseline) / median(candidate): resample each
/// group with replacement `resamples` times and take the central `level`
/// share of the ratios. `None` when a group is empty or a median is not positive.
pub fn speedup_ci(
    baseline: &[f64],
    candidate: &[f64],
    resamples: usize,
    level: f64,
) -> Option<RatioCi> {
    if baseline.is_empty() || candidate.is_empty() {
        return None;
    }
    let (mb, mc) = (median(baseline), median(candidate));
    if !(mb > 0.0 && mc > 0.0) {
        return None;
    }
    let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
    let mut ratios = Vec::with_capacity(resamples);
    let mut buf_b = vec![0.0; baseline.len()];
    let mut buf_c = vec![0.0; candidate.len()];
    for _ in 0..resamples.max(1) {
        for slot in buf_b.iter_mut() {
            *slot = baseline[rng.below(baseline.len())];
        }
        for slot in buf_c.iter_mut() {
            *slot = candidate[rng.below(candidate.len())];
        }
        let (b, c) = (median(&buf_b), median(&buf_c));
        if c > 0.0 {
            ratios.push(b / c);
        }
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    Some(RatioCi {
        ratio: mb / mc,
        ci_low: quantile_sorted(&ratios, tail),
        ci_high: quantile_sorted(&ratios, 1.0 - tail),
        level,
    })
}

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MannWhitney {
    /// U statistic of the first group.
    pub u: f64,
    /// Normal-approximation z score (tie-corrected, with continuity correction).
    pub z: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Two-sided Mann-Whitney U test of whether two groups of samples come from
/// the same distribution. Uses the normal approximation with tie correction,
/// adequate from about 8 samples per group (the harness takes at least 10).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let mut all: Vec<(f64, usize)> = a
        .iter()
        .map(|&x| (x, 0))
        .chain(b.iter().map(|&x| (x, 1)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut ranks = vec![0.0; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for r in ranks.iter_mut().take(j + 1).skip(i) {
            *r = avg;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let r1: f64 = all
        .iter()
        .zip(&ranks)
        .filter(|((_, g), _)| *g == 0)
        .map(|(_, r)| r)
        .sum();
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u1 = r1 - n1f * (n1f + 1.0) / 2.0;
    let mu = n1f * n2f / 2.0;
    let sigma2 = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)).max(1.0));
    if sigma2 <= 0.0 {
        // Every sample identical: no evidence of a difference.
        return Some(MannWhitney {
            u: u1,
            z: 0.0,
            p_value: 1.0,
        });
    }
    let diff = u1 - mu;
    let corrected = (diff.abs() - 0.5).max(0.0) * diff.signum();
    let z = corrected / sigma2.sqrt();
    Some(MannWhitney {
        u: u1,
        z,
        p_value: (2.0 * normal_sf(z.abs())).min(1.0),
    })
}

/// Upper tail of the standard normal distribution, P(Z > z).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' erfc Chebyshev fit,
/// relative error below 1.2e-7 everywhere).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// Relative spread of several medians: (max - min) / min, in percent. The
/// repeatability bar ("five runs within 2%") is stated on this number.
pub fn spread_pct(values: &[f64]) -> Option<f64> {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (values.len() >= 2 && min > 0.0 && max.is_finite()).then(|| (max - min) / min * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn order_statistics_match_numpy_type7() {
        // numpy.percentile([1..10], [10, 50, 90]) = [1.9, 5.5, 9.1]
        let s: Vec<f64> = (1..=10).map(f64::from).collect();
        let sum = Summary::of(&s).unwrap();
        assert_eq!(sum.n, 10);
        assert!(close(sum.p10_ms, 1.9, 1e-12));
        assert!(close(sum.median_ms, 5.5, 1e-12));
        assert!(close(sum.p90_ms, 9.1, 1e-12));
        assert_eq!(sum.min_ms, 1.0);
        assert_eq!(sum.max_ms, 10.0);
        assert!(close(sum.mean_ms, 5.5, 1e-12));
        // sample std of 1..10 = 3.0276503540974917; cv = 55.048188...%
        assert!(close(
            sum.cv_pct,
            3.027_650_354_097_491_7 / 5.5 * 100.0,
            1e-9
        ));
        // Unsorted input gives the same answer.
        let mut r = s.clone();
        r.reverse();
        assert_eq!(Summary::of(&r).unwrap(), sum);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        let one = Summary::of(&[2.5]).unwrap();
        assert_eq!(
            (one.median_ms, one.p10_ms, one.p90_ms, one.cv_pct),
            (2.5, 2.5, 2.5, 0.0)
        );
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn speedup_interval_brackets_the_ratio_and_excludes_one_for_a_real_gap() {
        // Baseline around 2.0 ms, candidate around 1.0 ms, small jitter.
        let base: Vec<f64> = (0..30)
            .map(|i| 2.0 + 0.01 * ((i * 7) % 11) as f64)
            .collect();
        let cand: Vec<f64> = (0..30)
            .map(|i| 1.0 + 0.01 * ((i * 5) % 13) as f64)
            .collect();
        let ci = speedup_ci(&base, &cand, 2000, 0.95).unwrap();
        assert!(close(ci.ratio, median(&base) / median(&cand), 1e-12));
        assert!(ci.ci_low <= ci.ratio && ci.ratio <= ci.ci_high);
        assert!(ci.ci_low > 1.7 && ci.ci_high < 2.2, "{ci:?}");
        // Deterministic.
        assert_eq!(ci, speedup_ci(&base, &cand, 2000, 0.95).unwrap());
    }

    #[test]
    fn speedup_interval_includes_one_for_identical_distributions() {
        let a: Vec<f64> = (0..40)
            .map(|i| 1.0 + 0.001 * ((i * 13) % 17) as f64)
            .collect();
        let b: Vec<f64> = (0..40)
            .map(|i| 1.0 + 0.001 * ((i * 11) % 17) as f64)
            .collect();
        let ci = speedup_ci(&a, &b, 2000, 0.95).unwrap();
        assert!(ci.ci_low <= 1.0 && ci.ci_high >= 1.0, "{ci:?}");
        assert!(speedup_ci(&[], &b, 10, 0.95).is_none());
        assert!(speedup_ci(&[0.0], &b, 10, 0.95).is_none());
    }

    #[test]
    fn mann_whitney_matches_scipy() {
        // a = 1..10, b = 6..15 (five tied pairs): U = 12.5; tie-corrected sigma^2 = 172.368...,
        // z = (|12.5 - 50| - 0.5) / sigma = 2.80221, p = erfc(z / sqrt 2) = 0.00507539
        // (the asymptotic method of scipy.stats.mannwhitneyu with use_continuity=True).
        let a: Vec<f64> = (1..=10).map(f64::from).collect();
        let b: Vec<f64> = (6..=15).map(f64::from).collect();
        let mw = mann_whitney(&a, &b).unwrap();
        assert_eq!(mw.u, 12.5);
        assert!(close(mw.z.abs(), 2.802_209_37, 1e-6), "{mw:?}");
        assert!(close(mw.p_value, 0.005_075_392, 1e-6), "{mw:?}");
        // Identical groups: p = 1.
        let same = mann_whitney(&a, &a).unwrap();
        assert!(same.p_value > 0.99);
        // All values equal: no evidence.
        assert_eq!(mann_whitney(&[1.0; 5], &[1.0; 5]).unwrap().p_value, 1.0);
        assert!(mann_whitney(&[], &a).is_none());
    }

    #[test]
    fn normal_tail_values() {
        assert!(close(normal_sf(0.0), 0.5, 1e-7));
        assert!(close(normal_sf(1.959_963_985), 0.025, 1e-7));
        assert!(close(normal_sf(-1.0), 0.841_344_746, 1e-7));
    }

    #[test]
    fn spread_of_medians() {
        assert!(close(spread_pct(&[1.00, 1.01, 1.02]).unwrap(), 2.0, 1e-9));
        assert!(spread_pct(&[1.0]).is_none());
        assert!(spread_pct(&[0.0, 1.0]).is_none());
    }
}
