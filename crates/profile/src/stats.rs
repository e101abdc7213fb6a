//! Statistics with `nsys stats` semantics, computed exactly.
//!
//! - Avg, Med and StdDev are rounded to 0.1 half away from zero (SQLite
//!   `ROUND(x, 1)`); Avg and Med are rounded from the exact rational value, so
//!   53,242,485 / 20 = 2,662,124.25 gives 2,662,124.3 (not banker's .2).
//! - Med of an even count is the mean of the two middle values.
//! - StdDev is the sample standard deviation (n − 1), two-pass, 0 for n = 1.
//! - Time % is a row's share of the total of all rows of the report.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Count, total and distribution of a set of durations (or sizes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Stats {
    pub count: u64,
    pub total: i64,
    pub avg: f64,
    pub med: f64,
    pub min: i64,
    pub max: i64,
    pub stddev: f64,
}

/// Round `num / den` to one decimal, half away from zero, exactly.
pub fn round1_ratio(num: i128, den: i128) -> f64 {
    round_ratio(num, den, 10)
}

/// Round `num / den` to `1/scale`, half away from zero, exactly.
pub fn round_ratio(num: i128, den: i128, scale: i128) -> f64 {
    if den == 0 {
        return 0.0;
    }
    let (num, den) = if den < 0 { (-num, -den) } else { (num, den) };
    let scaled = num * scale;
    let q = scaled / den;
    let r = scaled % den;
    let q = if 2 * r.abs() >= den {
        q + scaled.signum()
    } else {
        q
    };
    q as f64 / scale as f64
}

/// `ROUND(x, 1)` on a float: half away from zero.
pub fn round1(x: f64) -> f64 {
    let y = (x * 10.0).abs();
    // Guard against 0.05 represented as 0.04999...: nudge by a few ulps.
    let r = (y + y * 4.0 * f64::EPSILON).round();
    r.copysign(x) / 10.0
}

/// `ROUND(100 * part / whole, 1)`.
pub fn pct1(part: i64, whole: i64) -> f64 {
    round_ratio(100 * part as i128, whole as i128, 10)
}

/// `ROUND(100 * part / whole, 2)`.
pub fn pct2(part: i64, whole: i64) -> f64 {
    round_ratio(100 * part as i128, whole as i128, 100)
}

/// Median (middle-pair mean for even n) of values; reorders the slice.
pub fn median<T: Copy + Ord + Into<i64>>(values: &mut [T]) -> f64 {
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    let (_, hi, _) = values.select_nth_unstable(n / 2);
    let hi: i64 = (*hi).into();
    if n % 2 == 1 {
        return hi as f64;
    }
    let lo: i64 = values[..n / 2].iter().copied().max().map_or(hi, Into::into);
    round_ratio(lo as i128 + hi as i128, 2, 10)
}

/// Nearest-rank percentile (`p` in 0..=100) of values sorted ascending.
pub fn percentile_sorted(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The `nsys stats` statistics of `values`; reorders the slice. Generic so
/// that millions of short durations can be held as `u32` (same answer).
pub fn stats<T: Copy + Ord + Into<i64>>(values: &mut [T]) -> Stats {
    let n = values.len();
    if n == 0 {
        return Stats {
            count: 0,
            total: 0,
            avg: 0.0,
            med: 0.0,
            min: 0,
            max: 0,
            stddev: 0.0,
        };
    }
    let mut total: i128 = 0;
    let mut min = i64::MAX;
    let mut max = i64::MIN;
    for &v in values.iter() {
        let v: i64 = v.into();
        total += v as i128;
        min = min.min(v);
        max = max.max(v);
    }
    let mean = total as f64 / n as f64;
    let stddev = if n > 1 {
        let ss: f64 = values
            .iter()
            .map(|&v| {
                let d = Into::<i64>::into(v) as f64 - mean;
                d * d
            })
            .sum();
        round1((ss / (n - 1) as f64).sqrt())
    } else {
        0.0
    };
    Stats {
        count: n as u64,
        total: total as i64,
        avg: round1_ratio(total, n as i128),
        med: median(values),
        min,
        max,
        stddev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_half_away_from_zero_and_exact() {
        assert_eq!(round1_ratio(53_242_485, 20), 2_662_124.3);
        assert_eq!(round1_ratio(2001, 20), 100.1);
        assert_eq!(round1_ratio(-2001, 20), -100.1);
        assert_eq!(round1_ratio(1, 3), 0.3);
        assert_eq!(round1(0.05), 0.1);
        assert_eq!(round1(-0.05), -0.1);
        assert_eq!(round1(3556.24), 3556.2);
        assert_eq!(pct2(400_000_000, 403_990_000), 99.01);
        assert_eq!(pct1(180_313_015, 416_141_800), 43.3);
    }

    #[test]
    fn median_takes_the_middle_pair_mean_and_stddev_is_sample() {
        // osrt_sum sem_wait, n = 2, from a published nsys run.
        let a = 167_993_715i64 - 165_021_400;
        let b = 167_993_715i64 + 165_021_400 + 1;
        let mut v = vec![a, b];
        let s = stats(&mut v);
        assert_eq!(s.med, 167_993_715.5);
        assert_eq!(s.count, 2);
        let mut one = vec![5];
        assert_eq!(stats(&mut one).stddev, 0.0);
        let mut v = vec![1, 2, 3, 4];
        let s = stats(&mut v);
        assert_eq!((s.med, s.avg, s.min, s.max, s.total), (2.5, 2.5, 1, 4, 10));
        assert_eq!(s.stddev, 1.3); // sqrt(5/3) = 1.29
        let mut e: Vec<i64> = vec![];
        assert_eq!(stats(&mut e).count, 0);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 50.0), 50);
        assert_eq!(percentile_sorted(&v, 99.0), 99);
        assert_eq!(percentile_sorted(&v, 100.0), 100);
        assert_eq!(percentile_sorted(&[7], 90.0), 7);
    }
}
