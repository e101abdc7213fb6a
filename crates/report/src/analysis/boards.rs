//! Comparisons over benchmark history: Pareto fronts (time, memory, energy),
//! leaderboards with speedup over the baseline variant, performance per watt,
//! and how time scales with problem size.
//!
//! Rows are only compared within one group — the same target, size and
//! device — because a front or a ranking across different workloads means
//! nothing.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::history::Row;
use aisp_planner::round;

/// (target, size, device).
type GroupKey = (String, String, String);

fn group(rows: &[Row]) -> BTreeMap<GroupKey, Vec<&Row>> {
    let mut g: BTreeMap<GroupKey, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        g.entry((
            r.target.clone(),
            r.size.clone().unwrap_or_default(),
            r.device_name.clone().unwrap_or_default(),
        ))
        .or_default()
        .push(r);
    }
    g
}

/// Joules one run of the measured operation takes: mean board power × median time.
pub fn energy_per_run_j(r: &Row) -> Option<f64> {
    Some(r.avg_power_w? * r.median_ms? / 1e3)
}

/// An objective to minimize.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Median time per run (ms).
    Time,
    /// Peak device memory (bytes).
    Memory,
    /// Energy per run (J): mean board power × median time.
    Energy,
}

impl Objective {
    pub fn value(self, r: &Row) -> Option<f64> {
        match self {
            Objective::Time => r.median_ms,
            Objective::Memory => r.peak_memory_bytes.map(|b| b as f64),
            Objective::Energy => energy_per_run_j(r),
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FrontPoint {
    pub label: String,
    pub variant: String,
    pub median_ms: Option<f64>,
    pub peak_memory_bytes: Option<i64>,
    pub energy_per_run_j: Option<f64>,
    /// For dominated points: the variant that is at least as good on every objective and better on one.
    pub dominated_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ParetoGroup {
    pub target: String,
    pub size: String,
    pub device: String,
    pub front: Vec<FrontPoint>,
    pub dominated: Vec<FrontPoint>,
    /// Variants left out because they lack an objective's measurement.
    pub incomplete: Vec<String>,
}

fn point(r: &Row, by: Option<String>) -> FrontPoint {
    FrontPoint {
        label: r.label(),
        variant: r.variant.clone(),
        median_ms: r.median_ms,
        peak_memory_bytes: r.peak_memory_bytes,
        energy_per_run_j: energy_per_run_j(r).map(|e| round(e, 6)),
        dominated_by: by,
    }
}

/// Pareto front per group over `objectives` (all minimized).
pub fn pareto(rows: &[Row], objectives: &[Objective]) -> Vec<ParetoGroup> {
    let mut out = Vec::new();
    for ((target, size, device), members) in group(rows) {
        let (complete, incomplete): (Vec<&Row>, Vec<&Row>) = members
            .into_iter()
            .partition(|r| objectives.iter().all(|o| o.value(r).is_some()));
        let vals = |r: &Row| -> Vec<f64> { objectives.iter().filter_map(|o| o.value(r)).collect() };
        let mut front = Vec::new();
        let mut dominated = Vec::new();
        for r in &complete {
            let v = vals(r);
            let by = complete.iter().find(|o| {
                let w = vals(o);
                w.iter().zip(&v).all(|(a, b)| a <= b) && w.iter().zip(&v).any(|(a, b)| a < b)
            });
            match by {
                Some(o) => dominated.push(point(r, Some(o.variant.clone()))),
                None => front.push(point(r, None)),
            }
        }
        front.sort_by(|a, b| {
            a.median_ms
                .unwrap_or(f64::MAX)
                .total_cmp(&b.median_ms.unwrap_or(f64::MAX))
        });
        out.push(ParetoGroup {
            target,
            size,
            device,
            front,
            dominated,
            incomplete: incomplete.iter().map(|r| r.variant.clone()).collect(),
        });
    }
    out
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BoardEntry {
    pub rank: usize,
    pub variant: String,
    pub role: String,
    pub median_ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub metric: Option<String>,
    pub value: Option<f64>,
    pub pct_of_roof: Option<f64>,
    /// Baseline median time / this median time (>1 is faster than the baseline).
    pub speedup_vs_baseline: Option<f64>,
    pub run_id: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Board {
    pub target: String,
    pub size: String,
    pub device: String,
    pub baseline: Option<String>,
    pub entries: Vec<BoardEntry>,
}

/// Variants ranked by median time within each group, with speedup over the baseline.
pub fn leaderboards(rows: &[Row]) -> Vec<Board> {
    let mut out = Vec::new();
    for ((target, size, device), mut members) in group(rows) {
        members.retain(|r| r.median_ms.is_some());
        members.sort_by(|a, b| {
            a.median_ms
                .unwrap_or(f64::MAX)
                .total_cmp(&b.median_ms.unwrap_or(f64::MAX))
        });
        let base = members.iter().find(|r| r.role == "baseline").copied();
        let entries = members
            .iter()
            .enumerate()
            .map(|(i, r)| BoardEntry {
                rank: i + 1,
                variant: r.variant.clone(),
                role: r.role.clone(),
                median_ms: r.median_ms,
                cv_pct: r.cv_pct,
                metric: r.metric.clone(),
                value: r.value,
                pct_of_roof: r.pct_of_roof.map(|p| round(p, 2)),
                speedup_vs_baseline: match (base.and_then(|b| b.median_ms), r.median_ms) {
                    (Some(b), Some(m)) if m > 0.0 => Some(round(b / m, 3)),
                    _ => None,
                },
                run_id: r.run_id.clone(),
                created_at: r.created_at.clone(),
            })
            .collect();
        if !members.is_empty() {
            out.push(Board {
                target,
                size,
                device,
                baseline: base.map(|b| b.variant.clone()),
                entries,
            });
        }
    }
    out
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PowerEntry {
    pub label: String,
    pub variant: String,
    pub role: String,
    pub avg_power_w: f64,
    pub median_ms: Option<f64>,
    /// Mean power × median time.
    pub energy_per_run_mj: Option<f64>,
    /// value / avg_power_w for throughput metrics, with the unit in `efficiency_unit`.
    pub efficiency: Option<f64>,
    pub efficiency_unit: Option<String>,
    /// Energy per run relative to the group's baseline (0.6 = 40% less).
    pub energy_vs_baseline: Option<f64>,
}

/// Performance per watt from the telemetry recorded with each result.
pub fn power(rows: &[Row]) -> (Vec<PowerEntry>, usize) {
    let mut out = Vec::new();
    let mut without = 0;
    for (_, members) in group(rows) {
        let base_e = members
            .iter()
            .find(|r| r.role == "baseline")
            .and_then(|r| energy_per_run_j(r));
        for r in members {
            let Some(w) = r.avg_power_w.filter(|w| *w > 0.0) else {
                without += 1;
                continue;
            };
            let e = energy_per_run_j(r);
            let (eff, unit) = match (r.higher_is_better(), r.value, &r.metric) {
                (true, Some(v), Some(m)) => (Some(round(v / w, 4)), Some(format!("{m}_per_w"))),
                _ => (None, None),
            };
            out.push(PowerEntry {
                label: r.label(),
                variant: r.variant.clone(),
                role: r.role.clone(),
                avg_power_w: round(w, 1),
                median_ms: r.median_ms,
                energy_per_run_mj: e.map(|e| round(e * 1e3, 4)),
                efficiency: eff,
                efficiency_unit: unit,
                energy_vs_baseline: match (e, base_e) {
                    (Some(e), Some(b)) if b > 0.0 => Some(round(e / b, 3)),
                    _ => None,
                },
            });
        }
    }
    (out, without)
}

/// The product of the numbers in a size string ("n=16777216" → 16777216,
/// "4096x4096x4096" → 6.87e10); None without numbers.
pub fn size_number(size: &str) -> Option<f64> {
    let nums: Vec<f64> = size
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .filter(|t| !t.is_empty())
        .filter_map(|t| t.parse::<f64>().ok())
        .filter(|v| *v > 0.0)
        .collect();
    if nums.is_empty() {
        None
    } else {
        Some(nums.iter().product())
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ScalingSeries {
    pub target: String,
    pub variant: String,
    pub device: String,
    /// (size, size as a number, median ms, value).
    pub points: Vec<(String, f64, f64, Option<f64>)>,
    /// Least-squares slope of log(time) against log(size): 1 = time grows with size.
    pub time_exponent: Option<f64>,
    pub reading: String,
}

/// Fit how time grows with size for each (target, variant, device) measured at ≥ 2 sizes.
pub fn size_scaling(rows: &[Row]) -> Vec<ScalingSeries> {
    let mut g: BTreeMap<(String, String, String), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        g.entry((
            r.target.clone(),
            r.variant.clone(),
            r.device_name.clone().unwrap_or_default(),
        ))
        .or_default()
        .push(r);
    }
    let mut out = Vec::new();
    for ((target, variant, device), members) in g {
        let mut pts: Vec<(String, f64, f64, Option<f64>)> = members
            .iter()
            .filter_map(|r| {
                let s = r.size.clone()?;
                Some((s.clone(), size_number(&s)?, r.median_ms?, r.value))
            })
            .collect();
        pts.sort_by(|a, b| a.1.total_cmp(&b.1));
        pts.dedup_by(|a, b| a.1 == b.1);
        if pts.len() < 2 {
            continue;
        }
        let xs: Vec<f64> = pts.iter().map(|p| p.1.ln()).collect();
        let ys: Vec<f64> = pts.iter().map(|p| p.2.ln()).collect();
        let n = xs.len() as f64;
        let mx = xs.iter().sum::<f64>() / n;
        let my = ys.iter().sum::<f64>() / n;
        let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let slope = (sxx > 0.0).then(|| round(sxy / sxx, 3));
        let reading = match slope {
            Some(b) if b < 0.5 => format!(
                "time grows as size^{b}: overhead-dominated (launch or latency bound) over this range"
            ),
            Some(b) if b <= 1.15 => format!(
                "time grows as size^{b}: about linear, throughput-bound (bandwidth or compute)"
            ),
            Some(b) => format!(
                "time grows as size^{b}: faster than linear (caches overflow or the algorithm is superlinear)"
            ),
            None => "sizes do not differ".into(),
        };
        out.push(ScalingSeries {
            target,
            variant,
            device,
            points: pts,
            time_exponent: slope,
            reading,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::history::{self, testing::insert};
    use super::*;
    use aisp_store::Store;

    fn store_with_rows() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let d = "NVIDIA H100 80GB HBM3";
        let t = "2026-01-01T00:00:00Z";
        // naive: slow, small; tiled: fast, big; vec: fast and small (dominates naive); blas: fastest, biggest.
        insert(
            &store,
            "r",
            t,
            "matmul",
            "naive",
            "baseline",
            "4096",
            10.0,
            "tflop_per_s",
            13.7,
            None,
            Some(100),
            Some(300.0),
            d,
        );
        insert(
            &store,
            "r",
            t,
            "matmul",
            "tiled",
            "optimized",
            "4096",
            4.0,
            "tflop_per_s",
            34.4,
            None,
            Some(500),
            Some(400.0),
            d,
        );
        insert(
            &store,
            "r",
            t,
            "matmul",
            "vec",
            "optimized",
            "4096",
            5.0,
            "tflop_per_s",
            27.5,
            None,
            Some(100),
            Some(320.0),
            d,
        );
        insert(
            &store,
            "r",
            t,
            "matmul",
            "blas",
            "optimized",
            "4096",
            0.5,
            "tflop_per_s",
            275.0,
            None,
            Some(400),
            None,
            d,
        );
        // Scaling series: copy at 3 sizes, time ∝ size.
        for (n, ms) in [(1_000_000u64, 0.01), (4_000_000, 0.04), (16_000_000, 0.16)] {
            insert(
                &store,
                "r",
                t,
                "copy",
                "vec4",
                "optimized",
                &format!("n={n}"),
                ms,
                "gb_per_s",
                8.0 * n as f64 / ms / 1e6,
                None,
                None,
                None,
                d,
            );
        }
        (dir, store)
    }

    #[test]
    fn pareto_front_over_time_and_memory() {
        let (_d, store) = store_with_rows();
        let rows = history::latest(
            history::load(
                &store,
                &history::Filter {
                    target: Some("matmul".into()),
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        let g = &pareto(&rows, &[Objective::Time, Objective::Memory])[0];
        let front: Vec<&str> = g.front.iter().map(|p| p.variant.as_str()).collect();
        assert_eq!(front, vec!["blas", "vec"]);
        let naive = g.dominated.iter().find(|p| p.variant == "naive").unwrap();
        assert_eq!(naive.dominated_by.as_deref(), Some("vec"));
        let tiled = g.dominated.iter().find(|p| p.variant == "tiled").unwrap();
        assert_eq!(tiled.dominated_by.as_deref(), Some("blas"));
        // With energy, blas has no power reading: it is incomplete, not silently dropped.
        let g = &pareto(&rows, &[Objective::Time, Objective::Energy])[0];
        assert_eq!(g.incomplete, vec!["blas".to_string()]);
    }

    #[test]
    fn leaderboard_speedups_and_power() {
        let (_d, store) = store_with_rows();
        let rows = history::load(
            &store,
            &history::Filter {
                target: Some("matmul".into()),
                ..Default::default()
            },
        )
        .unwrap();
        let b = &leaderboards(&rows)[0];
        assert_eq!(b.baseline.as_deref(), Some("naive"));
        assert_eq!(b.entries[0].variant, "blas");
        assert_eq!(b.entries[0].speedup_vs_baseline, Some(20.0));
        assert_eq!(b.entries.last().unwrap().speedup_vs_baseline, Some(1.0));
        let (p, without) = power(&rows);
        assert_eq!(without, 1);
        let tiled = p.iter().find(|e| e.variant == "tiled").unwrap();
        // 400 W × 4 ms = 1.6 J = 1600 mJ; 34.4 TFLOP/s / 400 W.
        assert_eq!(tiled.energy_per_run_mj, Some(1600.0));
        assert_eq!(tiled.efficiency, Some(0.086));
        assert_eq!(tiled.efficiency_unit.as_deref(), Some("tflop_per_s_per_w"));
        // naive: 300 W × 10 ms = 3 J; tiled uses 1.6 / 3 of it.
        assert_eq!(tiled.energy_vs_baseline, Some(0.533));
    }

    #[test]
    fn size_scaling_fits_the_exponent() {
        let (_d, store) = store_with_rows();
        let rows = history::load(
            &store,
            &history::Filter {
                target: Some("copy".into()),
                ..Default::default()
            },
        )
        .unwrap();
        let s = &size_scaling(&rows)[0];
        assert_eq!(s.points.len(), 3);
        assert_eq!(s.time_exponent, Some(1.0));
        assert!(s.reading.contains("linear"));
        assert_eq!(size_number("m=2,n=3,k=4"), Some(24.0));
        assert_eq!(size_number("large"), None);
    }
}
