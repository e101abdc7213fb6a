//! The chart kinds: bars with intervals, roofline, scatter with a front,
//! timeline strips, line charts. Each takes numbers already computed by the
//! analysis modules and only places them; ticks and labels are the only
//! arithmetic here.

use super::{Anchor, Item, Paint, Scene};

/// Width of every chart, in points (a PDF text column is 515 pt wide; charts scale).
pub const WIDTH: f32 = 640.0;
const TITLE_H: f32 = 22.0;
const FONT: f32 = 9.0;

/// A number with 3 significant digits, without exponent for everyday ranges.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.3e}", v)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// Round steps (1, 2, 5 × 10^k) covering [lo, hi] with about `n` ticks.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// Decades covering [lo, hi] (log axes).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (a..=b).map(|e| 10f64.powi(e)).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

/// Maps data to a pixel range.
#[derive(Debug, Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    p0: f32,
    p1: f32,
    scale: Scale,
}

impl Axis {
    fn new(lo: f64, hi: f64, p0: f32, p1: f32, scale: Scale) -> Axis {
        let (lo, hi) = match scale {
            Scale::Log => {
                let lo = if lo > 0.0 { lo } else { 1e-3 };
                let hi = if hi > lo { hi } else { lo * 10.0 };
                (
                    10f64.powf(lo.log10().floor()),
                    10f64.powf(hi.log10().ceil()),
                )
            }
            Scale::Linear => {
                if hi > lo {
                    (lo, hi)
                } else {
                    (lo, lo + 1.0)
                }
            }
        };
        Axis {
            lo,
            hi,
            p0,
            p1,
            scale,
        }
    }
    fn at(&self, v: f64) -> f32 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => {
                let v = v.max(self.lo * 1e-3);
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        };
        let f = f.clamp(-0.02, 1.02) as f32;
        self.p0 + f * (self.p1 - self.p0)
    }
    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Linear => nice_ticks(self.lo, self.hi, 5),
            Scale::Log => log_ticks(self.lo, self.hi),
        }
    }
}

/// Vertical grid lines at the x axis's ticks from `top` to `bottom`, labelled below.
fn x_grid(sc: &mut Scene, ax: &Axis, top: f32, bottom: f32) {
    for t in ax.ticks() {
        let x = ax.at(t);
        sc.line((x, top), (x, bottom), Paint::Grid, 0.5);
        sc.muted_text(x, bottom + 11.0, fmt_num(t), 8.0, Anchor::Middle);
    }
}

/// The x grid and, centred under its tick labels, what the axis measures.
fn x_axis_below(sc: &mut Scene, ax: &Axis, top: f32, bottom: f32, label: &str) {
    x_grid(sc, ax, top, bottom);
    sc.muted_text(
        (ax.p0 + ax.p1) / 2.0,
        bottom + 24.0,
        label,
        8.5,
        Anchor::Middle,
    );
}

/// Horizontal grid lines at the y axis's ticks from `x0` to `x1`, labelled on the left.
fn y_grid(sc: &mut Scene, ay: &Axis, x0: f32, x1: f32) {
    for t in ay.ticks() {
        let y = ay.at(t);
        sc.line((x0, y), (x1, y), Paint::Grid, 0.5);
        sc.muted_text(x0 - 4.0, y + 3.0, fmt_num(t), 8.0, Anchor::End);
    }
}

fn title(sc: &mut Scene, text: &str) {
    sc.bold_text(0.0, 13.0, text, 11.0);
}

/// Truncate a label to about `max_chars` characters.
pub fn clip(label: &str, max_chars: usize) -> String {
    if label.chars().count() <= max_chars {
        label.to_string()
    } else {
        let mut s: String = label.chars().take(max_chars.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// A legend row of coloured squares at `y`.
fn legend(sc: &mut Scene, y: f32, entries: &[(String, Paint)]) -> f32 {
    let mut x = 0.0;
    let mut y = y;
    for (label, paint) in entries {
        let w = 14.0 + label.chars().count() as f32 * FONT * 0.52 + 14.0;
        if x + w > WIDTH && x > 0.0 {
            x = 0.0;
            y += 14.0;
        }
        sc.rect(x, y - 8.0, 9.0, 9.0, *paint, None);
        sc.muted_text(x + 13.0, y, label.clone(), FONT, Anchor::Start);
        x += w;
    }
    y + 6.0
}

/// Places point labels so that they do not overlap: each label tries
/// positions above and below its point, further out each time.
struct Labels {
    placed: Vec<(f32, f32, f32, f32)>,
}

impl Labels {
    fn new() -> Labels {
        Labels { placed: Vec::new() }
    }
    fn place(&mut self, sc: &mut Scene, x: f32, y: f32, text: String, size: f32) {
        let w = text.chars().count() as f32 * size * 0.52;
        let h = size + 1.0;
        let free = |ly: f32, placed: &[(f32, f32, f32, f32)]| {
            placed.iter().all(|(px, py, pw, ph)| {
                x + 5.0 + w < *px || *px + *pw < x + 5.0 || ly < *py - *ph || ly - h > *py
            })
        };
        let mut ly = y - 5.0;
        for k in 0..12 {
            let off = 4.0 + (k / 2) as f32 * h;
            let cand = if k % 2 == 0 {
                y - off + 3.0
            } else {
                y + off + h - 3.0
            };
            if free(cand, &self.placed) {
                ly = cand;
                break;
            }
        }
        self.placed.push((x + 5.0, ly, w, h));
        sc.text(x + 5.0, ly, text, size, Anchor::Start);
    }
}

/// One horizontal bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// Interval drawn as a whisker (e.g. a 95% confidence interval).
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub paint: Paint,
    /// Printed at the right end of the row (the value with its unit).
    pub note: String,
}

/// Horizontal bars, one per row, with optional whiskers and a reference line.
pub fn bars(
    chart_title: &str,
    axis_label: &str,
    rows: &[Bar],
    scale: Scale,
    reference: Option<(f64, &str)>,
) -> Scene {
    let row_h = 16.0;
    let top = TITLE_H + 4.0;
    let height = top + rows.len().max(1) as f32 * row_h + 34.0;
    let mut sc = Scene::new(chart_title, WIDTH, height);
    title(&mut sc, chart_title);
    let (x0, x1) = (210.0, WIDTH - 110.0);
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for r in rows {
        for v in [Some(r.value), r.low, r.high].into_iter().flatten() {
            if v.is_finite() && (scale == Scale::Linear || v > 0.0) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    if let Some((v, _)) = reference {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        lo = 0.0;
        hi = 1.0;
    }
    if scale == Scale::Linear {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let ax = Axis::new(lo, hi, x0, x1, scale);
    let bottom = top + rows.len().max(1) as f32 * row_h;
    x_axis_below(&mut sc, &ax, top, bottom, axis_label);
    let base = match scale {
        Scale::Linear => 0.0,
        Scale::Log => reference.map(|r| r.0).unwrap_or(ax.lo),
    };
    let bx = ax.at(base);
    for (i, r) in rows.iter().enumerate() {
        let y = top + i as f32 * row_h;
        sc.text(x0 - 6.0, y + 11.0, clip(&r.label, 40), FONT, Anchor::End);
        let vx = ax.at(r.value);
        let (a, b) = if vx >= bx { (bx, vx) } else { (vx, bx) };
        sc.rect(
            a,
            y + 3.0,
            (b - a).max(1.0),
            row_h - 6.0,
            r.paint,
            Some(format!("{}: {}", r.label, r.note)),
        );
        if let (Some(l), Some(h)) = (r.low, r.high) {
            let (lx, hx) = (ax.at(l), ax.at(h));
            let cy = y + row_h / 2.0;
            sc.line((lx, cy), (hx, cy), Paint::Ink, 1.0);
            sc.line((lx, cy - 4.0), (lx, cy + 4.0), Paint::Ink, 1.0);
            sc.line((hx, cy - 4.0), (hx, cy + 4.0), Paint::Ink, 1.0);
        }
        sc.text(x1 + 6.0, y + 11.0, r.note.clone(), FONT, Anchor::Start);
    }
    sc.line((bx, top - 2.0), (bx, bottom), Paint::Muted, 1.0);
    if let Some((v, label)) = reference {
        let x = ax.at(v);
        sc.dashed((x, top - 2.0), (x, bottom), Paint::Ink, 1.0);
        sc.muted_text(x + 3.0, top - 4.0, label, 8.0, Anchor::Start);
    }
    sc
}

/// One row of stacked horizontal bars: its parts, in the order of `parts`.
#[derive(Debug, Clone, PartialEq)]
pub struct StackedRow {
    pub label: String,
    /// One value per part (same order as the chart's parts); non-positive values draw nothing.
    pub values: Vec<f64>,
    /// Printed at the right end of the row (e.g. the total with its unit).
    pub note: String,
}

/// Horizontal bars split into parts (e.g. memory per GPU: weights, gradients,
/// optimizer states, activations), one row per item, with a legend of the parts
/// and an optional reference line (e.g. the usable memory).
pub fn stacked(
    chart_title: &str,
    axis_label: &str,
    parts: &[(String, Paint)],
    rows: &[StackedRow],
    reference: Option<(f64, &str)>,
) -> Scene {
    let row_h = 16.0;
    let top = TITLE_H + 4.0;
    let bottom = top + rows.len().max(1) as f32 * row_h;
    let legend_rows = 1.0 + (parts.len() / 5) as f32;
    let height = bottom + 34.0 + legend_rows * 14.0;
    let mut sc = Scene::new(chart_title, WIDTH, height);
    title(&mut sc, chart_title);
    let (x0, x1) = (210.0, WIDTH - 110.0);
    let mut hi = rows
        .iter()
        .map(|r| {
            r.values
                .iter()
                .filter(|v| v.is_finite() && **v > 0.0)
                .sum::<f64>()
        })
        .fold(0.0, f64::max);
    if let Some((v, _)) = reference
        && v.is_finite()
    {
        hi = hi.max(v);
    }
    if hi <= 0.0 {
        hi = 1.0;
    }
    let ax = Axis::new(0.0, hi, x0, x1, Scale::Linear);
    x_axis_below(&mut sc, &ax, top, bottom, axis_label);
    for (i, r) in rows.iter().enumerate() {
        let y = top + i as f32 * row_h;
        sc.text(x0 - 6.0, y + 11.0, clip(&r.label, 40), FONT, Anchor::End);
        let mut acc = 0.0;
        for (v, (name, paint)) in r.values.iter().zip(parts) {
            if !(v.is_finite() && *v > 0.0) {
                continue;
            }
            let (a, b) = (ax.at(acc), ax.at(acc + v));
            sc.rect(
                a,
                y + 3.0,
                b - a,
                row_h - 6.0,
                *paint,
                Some(format!("{}: {name} {}", r.label, fmt_num(*v))),
            );
            acc += v;
        }
        sc.text(x1 + 6.0, y + 11.0, r.note.clone(), FONT, Anchor::Start);
    }
    sc.line((x0, top - 2.0), (x0, bottom), Paint::Muted, 1.0);
    if let Some((v, label)) = reference {
        let x = ax.at(v);
        sc.dashed((x, top - 2.0), (x, bottom), Paint::Ink, 1.0);
        sc.muted_text(x + 3.0, top - 4.0, label, 8.0, Anchor::Start);
    }
    legend(&mut sc, bottom + 40.0, parts);
    sc
}

/// A measured compute roof (horizontal line on the roofline).
#[derive(Debug, Clone, PartialEq)]
pub struct Roof {
    pub label: String,
    pub tflop_per_s: f64,
}

/// A variant's measured point on the roofline.
#[derive(Debug, Clone, PartialEq)]
pub struct RoofPoint {
    pub label: String,
    /// FLOP per byte of compulsory DRAM traffic.
    pub intensity: f64,
    pub tflop_per_s: f64,
}

/// Roofline (log–log): the measured memory roof as a slope, each measured
/// compute roof as a ceiling, and each variant's point.
pub fn roofline(
    chart_title: &str,
    memory_gb_per_s: f64,
    roofs: &[Roof],
    points: &[RoofPoint],
) -> Scene {
    let height = 300.0;
    let mut sc = Scene::new(chart_title, WIDTH, height);
    title(&mut sc, chart_title);
    let (x0, x1, y0, y1) = (60.0, WIDTH - 130.0, height - 40.0, TITLE_H + 8.0);
    let peak = roofs
        .iter()
        .map(|r| r.tflop_per_s)
        .chain(points.iter().map(|p| p.tflop_per_s))
        .fold(1.0, f64::max);
    let low_y = points
        .iter()
        .map(|p| p.tflop_per_s)
        .filter(|v| *v > 0.0)
        .fold(peak / 1000.0, f64::min);
    let max_i = points.iter().map(|p| p.intensity).fold(1000.0, f64::max);
    let min_i = points
        .iter()
        .map(|p| p.intensity)
        .filter(|v| *v > 0.0)
        .fold(0.1, f64::min);
    let ax = Axis::new(min_i, max_i, x0, x1, Scale::Log);
    let ay = Axis::new(low_y, peak * 1.2, y0, y1, Scale::Log);
    x_grid(&mut sc, &ax, y1, y0);
    y_grid(&mut sc, &ay, x0, x1);
    sc.muted_text(
        (x0 + x1) / 2.0,
        y0 + 26.0,
        "arithmetic intensity (FLOP per byte of DRAM traffic)",
        8.5,
        Anchor::Middle,
    );
    // The y axis title starts at the chart's left edge: anchored at the axis it ran off the picture.
    sc.muted_text(2.0, y1 - 8.0, "TFLOP/s", 8.5, Anchor::Start);
    let bw_tflops = |i: f64| memory_gb_per_s * i / 1000.0;
    if memory_gb_per_s > 0.0 {
        let top = roofs.iter().map(|r| r.tflop_per_s).fold(peak, f64::max);
        let ridge = top * 1000.0 / memory_gb_per_s;
        sc.line(
            (ax.at(ax.lo), ay.at(bw_tflops(ax.lo))),
            (ax.at(ridge), ay.at(top)),
            Paint::Ink,
            1.5,
        );
        sc.text(
            ax.at(ax.lo) + 4.0,
            ay.at(bw_tflops(ax.lo)) - 6.0,
            format!("memory {} GB/s", fmt_num(memory_gb_per_s)),
            8.0,
            Anchor::Start,
        );
    }
    let mut roof_label_ys: Vec<f32> = Vec::new();
    for (i, r) in roofs.iter().enumerate() {
        let ridge = if memory_gb_per_s > 0.0 {
            r.tflop_per_s * 1000.0 / memory_gb_per_s
        } else {
            ax.lo
        };
        let y = ay.at(r.tflop_per_s);
        let paint = super::SERIES[i % super::SERIES.len()];
        sc.line((ax.at(ridge), y), (x1, y), paint, 1.5);
        let mut ly = y + 3.0;
        while roof_label_ys.iter().any(|o| (o - ly).abs() < 9.0) {
            ly += 9.0;
        }
        roof_label_ys.push(ly);
        sc.text(
            x1 + 4.0,
            ly,
            format!("{} {}", r.label, fmt_num(r.tflop_per_s)),
            8.0,
            Anchor::Start,
        );
    }
    let mut labels = Labels::new();
    for p in points {
        let (x, y) = (ax.at(p.intensity), ay.at(p.tflop_per_s));
        sc.items.push(Item::Circle {
            cx: x,
            cy: y,
            r: 3.5,
            fill: Paint::Ink,
            title: Some(format!(
                "{}: {} TFLOP/s at {} FLOP/B",
                p.label,
                fmt_num(p.tflop_per_s),
                fmt_num(p.intensity)
            )),
        });
        labels.place(&mut sc, x, y, clip(&p.label, 22), 7.5);
    }
    sc
}

/// A point of a scatter chart; front points are joined by a line.
#[derive(Debug, Clone, PartialEq)]
pub struct ScatterPoint {
    pub label: String,
    pub x: f64,
    pub y: f64,
    pub on_front: bool,
}

/// Scatter of variants over two objectives (both minimized) with the Pareto
/// front (computed by the caller) joined and highlighted.
pub fn pareto(chart_title: &str, x_label: &str, y_label: &str, points: &[ScatterPoint]) -> Scene {
    let height = 240.0;
    let mut sc = Scene::new(chart_title, WIDTH, height);
    title(&mut sc, chart_title);
    let (x0, x1, y0, y1) = (60.0, WIDTH - 150.0, height - 40.0, TITLE_H + 8.0);
    let span = |vals: Vec<f64>| -> (f64, f64, Scale) {
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo > 0.0 && hi / lo > 30.0 {
            (lo, hi, Scale::Log)
        } else {
            (
                0.0,
                if hi.is_finite() { hi * 1.1 } else { 1.0 },
                Scale::Linear,
            )
        }
    };
    let (xl, xh, xs) = span(points.iter().map(|p| p.x).collect());
    let (yl, yh, ys) = span(points.iter().map(|p| p.y).collect());
    let ax = Axis::new(xl, xh, x0, x1, xs);
    let ay = Axis::new(yl, yh, y0, y1, ys);
    x_grid(&mut sc, &ax, y1, y0);
    y_grid(&mut sc, &ay, x0, x1);
    sc.muted_text((x0 + x1) / 2.0, y0 + 26.0, x_label, 8.5, Anchor::Middle);
    // The y axis title starts at the chart's left edge: anchored at the axis it ran off the picture.
    sc.muted_text(2.0, y1 - 8.0, y_label, 8.5, Anchor::Start);
    let mut front: Vec<&ScatterPoint> = points.iter().filter(|p| p.on_front).collect();
    front.sort_by(|a, b| a.x.total_cmp(&b.x));
    if front.len() > 1 {
        sc.items.push(Item::Polyline {
            points: front.iter().map(|p| (ax.at(p.x), ay.at(p.y))).collect(),
            stroke: super::GOOD,
            width: 1.5,
        });
    }
    let mut labels = Labels::new();
    for p in points {
        let (x, y) = (ax.at(p.x), ay.at(p.y));
        sc.items.push(Item::Circle {
            cx: x,
            cy: y,
            r: if p.on_front { 4.0 } else { 3.0 },
            fill: if p.on_front {
                super::GOOD
            } else {
                super::NEUTRAL
            },
            title: Some(format!("{}: {} / {}", p.label, fmt_num(p.x), fmt_num(p.y))),
        });
        labels.place(&mut sc, x, y, clip(&p.label, 24), 7.5);
    }
    legend(
        &mut sc,
        height - 4.0,
        &[
            ("on the Pareto front".into(), super::GOOD),
            ("dominated".into(), super::NEUTRAL),
        ],
    );
    sc
}

/// One interval on a timeline lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub start_ns: i64,
    pub end_ns: i64,
    pub paint: Paint,
    pub label: String,
}

/// A lane of a timeline strip (a device or a stream).
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub label: String,
    pub segments: Vec<Segment>,
    /// Idle gaps (marked under the lane).
    pub gaps: Vec<(i64, i64)>,
}

/// Marks at least this wide (points) are drawn apart, with a gap, even beside a mark of the same colour.
const SEPARATE_PT: f32 = 3.0;

/// Timeline strips over `[t0, t1)`: one lane per device or stream, segments
/// coloured by class, idle gaps marked in red under the lane.
pub fn timeline(
    chart_title: &str,
    t0: i64,
    t1: i64,
    lanes: &[Lane],
    legend_entries: &[(String, Paint)],
) -> Scene {
    let lane_h = 22.0;
    let top = TITLE_H + 4.0;
    let legend_rows = 1.0 + (legend_entries.len() as f32 / 6.0).floor();
    let height = top + lanes.len().max(1) as f32 * lane_h + 30.0 + legend_rows * 14.0;
    let mut sc = Scene::new(chart_title, WIDTH, height);
    title(&mut sc, chart_title);
    let (x0, x1) = (110.0, WIDTH - 10.0);
    let ms = |t: i64| (t - t0) as f64 / 1e6;
    let ax = Axis::new(0.0, ms(t1).max(1e-6), x0, x1, Scale::Linear);
    let bottom = top + lanes.len().max(1) as f32 * lane_h;
    x_axis_below(&mut sc, &ax, top, bottom, "ms from the window start");
    for (i, lane) in lanes.iter().enumerate() {
        let y = top + i as f32 * lane_h;
        sc.text(x0 - 8.0, y + 12.0, clip(&lane.label, 20), FONT, Anchor::End);
        // Neighbouring segments of one colour closer than half a point are one
        // mark at this scale: merging them keeps the file small, not the numbers.
        let mut pending: Option<(f32, f32, Paint, String, usize)> = None;
        let flush = |sc: &mut Scene, p: Option<(f32, f32, Paint, String, usize)>| {
            if let Some((a, b, paint, label, n)) = p {
                let t = if n > 1 {
                    format!("{label} (+{} more)", n - 1)
                } else {
                    label
                };
                // A hairline gap at the end of a wide mark separates it from a neighbour of its colour.
                let w = if b - a >= SEPARATE_PT {
                    b - a - 0.8
                } else {
                    (b - a).max(0.4)
                };
                sc.rect(a, y + 2.0, w, lane_h - 9.0, paint, Some(t));
            }
        };
        for s in &lane.segments {
            let (a, b) = (ax.at(ms(s.start_ns)), ax.at(ms(s.end_ns)));
            match &mut pending {
                // Only marks too narrow to tell apart merge; consecutive wide ones of one colour (NVTX
                // steps) stay separate marks with a gap between them.
                Some((pa, pb, pp, _, n))
                    if *pp == s.paint
                        && a - *pb < 0.5
                        && (*pb - *pa < SEPARATE_PT || b - a < SEPARATE_PT) =>
                {
                    *pb = pb.max(b);
                    *n += 1;
                }
                _ => {
                    let done = pending.take();
                    flush(&mut sc, done);
                    pending = Some((a, b, s.paint, s.label.clone(), 1));
                }
            }
        }
        flush(&mut sc, pending.take());
        for (a, b) in &lane.gaps {
            let (xa, xb) = (ax.at(ms(*a)), ax.at(ms(*b)));
            sc.rect(
                xa,
                y + lane_h - 6.0,
                (xb - xa).max(0.8),
                3.0,
                super::IDLE,
                Some(format!("idle {} ms", fmt_num((b - a) as f64 / 1e6))),
            );
        }
    }
    let mut entries = legend_entries.to_vec();
    entries.push(("idle gap".into(), super::IDLE));
    legend(&mut sc, bottom + 40.0, &entries);
    sc
}

/// A line series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub paint: Paint,
}

/// Cuts the stretches before the first and after the last point where any series is above zero (keeping
/// one point of each as a margin), so a utilization chart shows the active part instead of a flat zero
/// over most of its width. Returns the x range kept, when anything was cut.
pub fn trim_idle_ends(series: &mut [Series]) -> Option<(f64, f64)> {
    let active = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.1 > 0.0)
            .map(|p| p.0)
    };
    let first = active().fold(f64::INFINITY, f64::min);
    let last = active().fold(f64::NEG_INFINITY, f64::max);
    if !first.is_finite() {
        return None;
    }
    // The nearest point outside the active part on each side, as a margin.
    let xs = || series.iter().flat_map(|s| s.points.iter()).map(|p| p.0);
    let lo = xs()
        .filter(|x| *x < first)
        .fold(f64::NEG_INFINITY, f64::max);
    let hi = xs().filter(|x| *x > last).fold(f64::INFINITY, f64::min);
    let (lo, hi) = (
        if lo.is_finite() { lo } else { first },
        if hi.is_finite() { hi } else { last },
    );
    let all_lo = xs().fold(f64::INFINITY, f64::min);
    let all_hi = xs().fold(f64::NEG_INFINITY, f64::max);
    if lo <= all_lo && hi >= all_hi {
        return None;
    }
    for s in series.iter_mut() {
        s.points.retain(|p| p.0 >= lo && p.0 <= hi);
    }
    Some((lo, hi))
}

/// Line chart; `y_range` fixes the y axis (e.g. 0–100 for percentages).
pub fn lines(
    chart_title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    y_range: Option<(f64, f64)>,
    markers: bool,
) -> Scene {
    let height = 210.0;
    let mut sc = Scene::new(chart_title, WIDTH, height);
    title(&mut sc, chart_title);
    let (x0, x1, y0, y1) = (60.0, WIDTH - 10.0, height - 52.0, TITLE_H + 8.0);
    let all = || series.iter().flat_map(|s| s.points.iter());
    let xl = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let xh = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let (yl, yh) = y_range.unwrap_or_else(|| {
        let hi = all().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        (
            0.0,
            if hi.is_finite() && hi > 0.0 {
                hi * 1.1
            } else {
                1.0
            },
        )
    });
    let ax = Axis::new(
        if xl.is_finite() { xl } else { 0.0 },
        if xh.is_finite() { xh } else { 1.0 },
        x0,
        x1,
        Scale::Linear,
    );
    let ay = Axis::new(yl, yh, y0, y1, Scale::Linear);
    x_grid(&mut sc, &ax, y1, y0);
    y_grid(&mut sc, &ay, x0, x1);
    sc.muted_text((x0 + x1) / 2.0, y0 + 24.0, x_label, 8.5, Anchor::Middle);
    // The y axis title starts at the chart's left edge: anchored at the axis it ran off the picture.
    sc.muted_text(2.0, y1 - 8.0, y_label, 8.5, Anchor::Start);
    for s in series {
        let pts: Vec<(f32, f32)> = s
            .points
            .iter()
            .map(|(x, y)| (ax.at(*x), ay.at(*y)))
            .collect();
        if pts.len() > 1 {
            sc.items.push(Item::Polyline {
                points: pts.clone(),
                stroke: s.paint,
                width: 1.5,
            });
        }
        if markers || pts.len() == 1 {
            for ((x, y), (dx, dy)) in pts.iter().zip(&s.points) {
                sc.items.push(Item::Circle {
                    cx: *x,
                    cy: *y,
                    r: 2.0,
                    fill: s.paint,
                    title: Some(format!("{}: {} at {}", s.label, fmt_num(*dy), fmt_num(*dx))),
                });
            }
        }
    }
    let entries: Vec<(String, Paint)> = series.iter().map(|s| (s.label.clone(), s.paint)).collect();
    legend(&mut sc, height - 6.0, &entries);
    sc
}

/// A colour on a sequential scale from pale (t = 0) to deep red (t = 1).
fn heat(t: f64) -> Paint {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    Paint::Rgb(lerp(255.0, 165.0), lerp(245.0, 15.0), lerp(235.0, 21.0))
}

/// A heat map: one row per label in `rows`, one column per label in `cols`,
/// cells coloured from the smallest to the largest value (`None`: no value,
/// drawn grey). Each cell's tooltip gives its value with `unit`.
pub fn heat_map(
    chart_title: &str,
    rows: &[String],
    cols: &[String],
    values: &[Vec<Option<f64>>],
    unit: &str,
) -> Scene {
    let x0 = 70.0;
    let top = TITLE_H + 4.0;
    let n_rows = rows.len().max(1) as f32;
    let n_cols = cols.len().max(1) as f32;
    // Cells shrink to fit at most 64 rows in 384 points; labels thin out to stay readable.
    let cell_h = (384.0 / n_rows).clamp(2.0, 16.0);
    let cell_w = ((WIDTH - x0 - 10.0) / n_cols).min(40.0);
    let bottom = top + n_rows * cell_h;
    let height = bottom + 48.0;
    let mut sc = Scene::new(chart_title, WIDTH, height);
    title(&mut sc, chart_title);
    let all: Vec<f64> = values.iter().flatten().flatten().copied().collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let row_every = (9.0 / cell_h).ceil().max(1.0) as usize;
    let col_every = (34.0 / cell_w).ceil().max(1.0) as usize;
    for (i, label) in rows.iter().enumerate() {
        let y = top + i as f32 * cell_h;
        if i % row_every == 0 {
            sc.muted_text(
                x0 - 4.0,
                y + cell_h.min(9.0),
                clip(label, 12),
                7.5,
                Anchor::End,
            );
        }
        for (j, col) in cols.iter().enumerate() {
            let x = x0 + j as f32 * cell_w;
            let v = values.get(i).and_then(|r| r.get(j)).copied().flatten();
            let (fill, tip) = match v {
                Some(v) => (
                    heat((v - lo) / span),
                    format!("{label}, {col}: {} {unit}", fmt_num(v)),
                ),
                None => (Paint::Grid, format!("{label}, {col}: no value")),
            };
            sc.rect(
                x,
                y,
                (cell_w - 0.5).max(0.5),
                (cell_h - 0.5).max(0.5),
                fill,
                Some(tip),
            );
        }
    }
    for (j, col) in cols.iter().enumerate() {
        if j % col_every == 0 {
            let x = x0 + (j as f32 + 0.5) * cell_w;
            sc.muted_text(x, bottom + 10.0, clip(col, 8), 7.5, Anchor::Middle);
        }
    }
    if !all.is_empty() {
        legend(
            &mut sc,
            bottom + 32.0,
            &[
                (format!("{} {unit} (smallest)", fmt_num(lo)), heat(0.0)),
                (format!("{} {unit}", fmt_num((lo + hi) / 2.0)), heat(0.5)),
                (format!("{} {unit} (largest)", fmt_num(hi)), heat(1.0)),
                ("no value".into(), Paint::Grid),
            ],
        );
    }
    sc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text's estimated extent (the 0.52 em advance the layout uses) inside the picture.
    fn texts_fit(sc: &Scene) {
        for i in &sc.items {
            if let Item::Text {
                x,
                text,
                size,
                anchor,
                ..
            } = i
            {
                let w = text.chars().count() as f32 * size * 0.52;
                let (l, r) = match anchor {
                    Anchor::Start => (*x, x + w),
                    Anchor::Middle => (x - w / 2.0, x + w / 2.0),
                    Anchor::End => (x - w, *x),
                };
                assert!(
                    l >= 0.0 && r <= sc.width,
                    "`{text}` runs from {l} to {r} of {}",
                    sc.width
                );
            }
        }
    }

    #[test]
    fn axis_titles_stay_inside_the_picture() {
        let points = [
            ScatterPoint {
                label: "baseline".into(),
                x: 1.5,
                y: 2048.0,
                on_front: true,
            },
            ScatterPoint {
                label: "tiled".into(),
                x: 0.7,
                y: 4096.0,
                on_front: true,
            },
        ];
        let sc = pareto(
            "time vs memory",
            "median time, ms",
            "peak device memory, MB",
            &points,
        );
        assert!(sc.texts().contains(&"peak device memory, MB"));
        texts_fit(&sc);
        let series = [Series {
            label: "device 0".into(),
            points: vec![(0.0, 10.0), (1.0, 90.0)],
            paint: crate::chart::SERIES[0],
        }];
        texts_fit(&lines(
            "busy",
            "ms",
            "busy % of the window",
            &series,
            Some((0.0, 100.0)),
            false,
        ));
    }

    #[test]
    fn idle_ends_are_cut_with_a_point_of_margin() {
        let mut s = vec![
            Series {
                label: "GPU 0".into(),
                points: (0..20)
                    .map(|k| (k as f64, if (14..17).contains(&k) { 80.0 } else { 0.0 }))
                    .collect(),
                paint: crate::chart::SERIES[0],
            },
            Series {
                label: "GPU 1".into(),
                points: (0..20)
                    .map(|k| (k as f64, if k == 12 { 5.0 } else { 0.0 }))
                    .collect(),
                paint: crate::chart::SERIES[1],
            },
        ];
        assert_eq!(trim_idle_ends(&mut s), Some((11.0, 17.0)));
        assert_eq!(s[0].points.first().unwrap().0, 11.0);
        assert_eq!(s[1].points.last().unwrap().0, 17.0);
        // Nothing to cut, or nothing active: unchanged.
        assert_eq!(trim_idle_ends(&mut s), None);
        let mut idle = vec![Series {
            label: "idle".into(),
            points: vec![(0.0, 0.0), (1.0, 0.0)],
            paint: crate::chart::SERIES[0],
        }];
        assert_eq!(trim_idle_ends(&mut idle), None);
    }

    #[test]
    fn consecutive_steps_of_one_colour_stay_apart() {
        let step = |i: i64| Segment {
            start_ns: i * 100_000_000,
            end_ns: (i + 1) * 100_000_000,
            paint: crate::chart::SERIES[0],
            label: format!("step_{i}"),
        };
        let lane = Lane {
            label: "NVTX".into(),
            segments: (0..3).map(step).collect(),
            gaps: Vec::new(),
        };
        let sc = timeline("steps", 0, 300_000_000, &[lane], &[]);
        let marks: Vec<(f32, f32, String)> = sc
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Rect {
                    x,
                    w,
                    title: Some(t),
                    ..
                } if t.starts_with("step_") => Some((*x, *w, t.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            marks.iter().map(|m| m.2.as_str()).collect::<Vec<_>>(),
            ["step_0", "step_1", "step_2"],
            "one mark per step, none merged into `step_0 (+2 more)`"
        );
        for pair in marks.windows(2) {
            assert!(
                pair[0].0 + pair[0].1 < pair[1].0,
                "a visible gap between {} and {}",
                pair[0].2,
                pair[1].2
            );
        }
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(
            nice_ticks(0.0, 100.0, 5),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(log_ticks(0.5, 300.0), vec![0.1, 1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(fmt_num(7.894), "7.89");
        assert_eq!(fmt_num(3065.45), "3065");
    }

    #[test]
    fn stacked_rows_place_their_parts_end_to_end() {
        let parts = vec![
            ("weights".to_string(), crate::chart::SERIES[0]),
            ("activations".to_string(), crate::chart::SERIES[1]),
        ];
        let sc = stacked(
            "memory per GPU",
            "GB",
            &parts,
            &[StackedRow {
                label: "TP4".into(),
                values: vec![10.0, 30.0],
                note: "40 GB".into(),
            }],
            Some((72.0, "usable")),
        );
        let rects: Vec<(f32, f32)> = sc
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Rect {
                    x,
                    w,
                    title: Some(_),
                    ..
                } => Some((*x, *w)),
                _ => None,
            })
            .collect();
        assert_eq!(rects.len(), 2);
        assert!(
            (rects[0].0 + rects[0].1 - rects[1].0).abs() < 0.01,
            "{rects:?}"
        );
        assert!((rects[1].1 / rects[0].1 - 3.0).abs() < 0.01);
        assert!(sc.texts().contains(&"40 GB"));
        assert!(sc.texts().contains(&"usable"));
    }

    #[test]
    fn bars_carry_their_notes_and_intervals() {
        let sc = bars(
            "speedups",
            "speedup (×)",
            &[Bar {
                label: "gemm/cublas".into(),
                value: 7.89,
                low: Some(7.8),
                high: Some(7.9),
                paint: crate::chart::GOOD,
                note: "7.89×".into(),
            }],
            Scale::Log,
            Some((1.0, "1× = baseline")),
        );
        assert!(sc.texts().contains(&"7.89×"));
        let whiskers = sc
            .items
            .iter()
            .filter(|i| {
                matches!(
                    i,
                    Item::Line {
                        stroke: Paint::Ink,
                        dashed: false,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(whiskers, 3);
    }

    #[test]
    fn timeline_merges_only_adjacent_marks_of_one_colour() {
        let seg = |a: i64, b: i64, p: Paint| Segment {
            start_ns: a,
            end_ns: b,
            paint: p,
            label: "k".into(),
        };
        let lane = Lane {
            label: "GPU 0".into(),
            segments: vec![
                seg(0, 10, crate::chart::GOOD),
                seg(11, 20, crate::chart::GOOD),
                seg(500_000, 600_000, crate::chart::BAD),
            ],
            gaps: vec![(20, 500_000)],
        };
        let sc = timeline("t", 0, 1_000_000, &[lane], &[]);
        let rects = sc
            .items
            .iter()
            .filter(|i| matches!(i, Item::Rect { .. }))
            .count();
        // 2 segment marks + 1 gap + 1 legend square (idle).
        assert_eq!(rects, 4);
    }
}
