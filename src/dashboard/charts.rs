//! Static SVG charts drawn on the server: a line chart (utilization over
//! time) and a grouped bar chart (step times). Self-contained SVG text with no
//! script, so the same output can go into HTML pages and reports.

use std::fmt::Write as _;

use super::profile_page::esc;

const W: f64 = 900.0;
const H: f64 = 260.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 44.0;
const COLORS: &[&str] = &[
    "#2f6fdf", "#e0782f", "#2fa36b", "#b23fc0", "#c0392b", "#7f8c8d",
];

pub struct Series {
    pub name: String,
    /// (x, y) in chart units.
    pub points: Vec<(f64, f64)>,
}

pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Fixed top of the y axis (e.g. 100 for percentages); default the data's maximum.
    pub y_max: Option<f64>,
    pub series: &'a [Series],
}

pub struct BarSeries<'a> {
    pub name: &'a str,
    pub values: &'a [f64],
}

pub struct BarChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub categories: &'a [String],
    pub series: &'a [BarSeries<'a>],
    /// Top of the y axis when a few outliers would flatten every other bar: taller bars are cut
    /// there and labelled with their value.
    pub y_cap: Option<f64>,
}

/// 1, 2 or 5 × a power of ten: about `n` ticks from 0 to `max`.
fn nice_step(max: f64, n: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n;
    let mag = 10f64.powf(raw.log10().floor());
    let m = raw / mag;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * mag
}

fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else {
        let digits = (-step.log10().floor()).max(0.0) as usize;
        format!("{v:.digits$}")
    }
}

fn frame(out: &mut String, title: &str, x_label: &str, y_label: &str, y_max: f64) {
    let _ = write!(
        out,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    let _ = write!(
        out,
        r##"<text x="{LEFT}" y="18" font-size="13" font-weight="600" fill="#222">{}</text>"##,
        esc(title)
    );
    let step = nice_step(y_max, 5.0);
    let plot_h = H - TOP - BOTTOM;
    let mut v = 0.0;
    while v <= y_max + step * 1e-9 {
        let y = TOP + plot_h * (1.0 - v / y_max);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#e3e6ea"/><text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end" fill="#555">{l}</text>"##,
            x2 = W - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            l = tick_label(v, step)
        );
        v += step;
    }
    let _ = write!(
        out,
        r##"<text x="{x}" y="{y}" font-size="11" text-anchor="middle" fill="#555">{xl}</text><text x="14" y="{my:.1}" font-size="11" text-anchor="middle" fill="#555" transform="rotate(-90 14 {my:.1})">{yl}</text>"##,
        x = LEFT + (W - LEFT - RIGHT) / 2.0,
        y = H - 6.0,
        xl = esc(x_label),
        my = TOP + plot_h / 2.0,
        yl = esc(y_label)
    );
}

fn legend(out: &mut String, names: &[&str]) {
    let mut x = W - RIGHT;
    for (k, name) in names.iter().enumerate().rev() {
        let w = 18.0 + 6.5 * name.chars().count() as f64;
        x -= w + 10.0;
        let _ = write!(
            out,
            r##"<rect x="{x:.1}" y="8" width="12" height="10" fill="{c}"/><text x="{tx:.1}" y="17" font-size="11" fill="#333">{n}</text>"##,
            c = COLORS[k % COLORS.len()],
            tx = x + 16.0,
            n = esc(name)
        );
    }
}

/// A line chart with a shared x axis.
pub fn line_chart(c: &LineChart) -> String {
    let mut out = String::new();
    let (mut x_min, mut x_max, mut y_top) = (f64::MAX, f64::MIN, 0f64);
    for s in c.series {
        for &(x, y) in &s.points {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_top = y_top.max(y);
        }
    }
    if x_min > x_max {
        return r#"<p class="muted">No data to chart.</p>"#.into();
    }
    if x_max <= x_min {
        x_max = x_min + 1.0;
    }
    let y_max = c.y_max.unwrap_or_else(|| {
        let step = nice_step(y_top.max(1e-9), 5.0);
        (y_top / step).ceil().max(1.0) * step
    });
    frame(&mut out, c.title, c.x_label, c.y_label, y_max);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + plot_w * (x - x_min) / (x_max - x_min);
    let py = |y: f64| TOP + plot_h * (1.0 - (y / y_max).clamp(0.0, 1.0));
    let xstep = nice_step(x_max - x_min, 8.0);
    let mut v = (x_min / xstep).ceil() * xstep;
    while v <= x_max + xstep * 1e-9 {
        let _ = write!(
            out,
            r##"<text x="{x:.1}" y="{y}" font-size="11" text-anchor="middle" fill="#555">{l}</text>"##,
            x = px(v),
            y = H - BOTTOM + 15.0,
            l = tick_label(v, xstep)
        );
        v += xstep;
    }
    for (k, s) in c.series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let mut d = String::new();
        for (n, &(x, y)) in s.points.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if n == 0 { "M" } else { " L" },
                px(x),
                py(y)
            );
        }
        let _ = write!(
            out,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"><title>{}</title></path>"#,
            esc(&s.name)
        );
    }
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// Grouped bars, one group per category.
pub fn bar_chart(c: &BarChart) -> String {
    let mut out = String::new();
    let n = c.categories.len();
    if n == 0 || c.series.is_empty() {
        return r#"<p class="muted">No data to chart.</p>"#.into();
    }
    let top = c
        .series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0f64, f64::max);
    let top = c.y_cap.filter(|&cap| cap > 0.0 && cap < top).unwrap_or(top);
    let step = nice_step(top.max(1e-9), 5.0);
    let y_max = (top / step).ceil().max(1.0) * step;
    frame(&mut out, c.title, c.x_label, c.y_label, y_max);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let group = plot_w / n as f64;
    let bar = (group * 0.8 / c.series.len() as f64).max(0.5);
    let label_every = ((n as f64 * 28.0 / plot_w).ceil() as usize).max(1);
    for (k, cat) in c.categories.iter().enumerate() {
        let gx = LEFT + group * k as f64 + group * 0.1;
        for (si, s) in c.series.iter().enumerate() {
            let v = s.values.get(k).copied().unwrap_or(0.0);
            let h = plot_h * (v / y_max).clamp(0.0, 1.0);
            let _ = write!(
                out,
                r#"<rect x="{x:.2}" y="{y:.2}" width="{bar:.2}" height="{h:.2}" fill="{c}"><title>{cat}: {name} {v:.3} {u}</title></rect>"#,
                x = gx + bar * si as f64,
                y = TOP + plot_h - h,
                c = COLORS[si % COLORS.len()],
                cat = esc(cat),
                name = esc(s.name),
                u = esc(c.y_label)
            );
            if v > y_max {
                // Cut: a zigzag at the top and the value.
                let x = gx + bar * si as f64;
                let _ = write!(
                    out,
                    r##"<text x="{tx:.1}" y="{ty:.1}" font-size="10" fill="#222">{v:.1}</text><rect x="{x:.2}" y="{ry:.1}" width="{bar:.2}" height="3" fill="#fff"/>"##,
                    tx = x + bar + 2.0,
                    ty = TOP + 10.0,
                    ry = TOP + 6.0,
                );
            }
        }
        if k % label_every == 0 {
            let _ = write!(
                out,
                r##"<text x="{x:.1}" y="{y}" font-size="11" text-anchor="middle" fill="#555">{l}</text>"##,
                x = LEFT + group * (k as f64 + 0.5),
                y = H - BOTTOM + 15.0,
                l = esc(cat)
            );
        }
    }
    let names: Vec<&str> = c.series.iter().map(|s| s.name).collect();
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(9.1, 5.0), 2.0);
        assert_eq!(nice_step(0.8, 5.0), 0.2);
    }

    #[test]
    fn charts_draw_every_point_and_bar_and_escape_text() {
        let s = [Series {
            name: "GPU <0>".into(),
            points: vec![(0.0, 10.0), (1.0, 50.0), (2.0, 100.0)],
        }];
        let svg = line_chart(&LineChart {
            title: "t",
            x_label: "x",
            y_label: "y",
            y_max: Some(100.0),
            series: &s,
        });
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches(" L").count(), 2);
        assert!(svg.contains("GPU &lt;0&gt;"));
        let cats: Vec<String> = (0..4).map(|k| k.to_string()).collect();
        let svg = bar_chart(&BarChart {
            title: "steps",
            x_label: "step",
            y_label: "ms",
            categories: &cats,
            series: &[
                BarSeries {
                    name: "cpu",
                    values: &[1.0, 2.0, 3.0, 4.0],
                },
                BarSeries {
                    name: "gpu",
                    values: &[0.5, 0.5, 0.5, 0.5],
                },
            ],
            y_cap: None,
        });
        assert_eq!(svg.matches("<rect").count(), 8 + 2);
        // A capped axis cuts the tall bar and labels its value.
        let svg = bar_chart(&BarChart {
            title: "steps",
            x_label: "step",
            y_label: "ms",
            categories: &cats,
            series: &[BarSeries {
                name: "cpu",
                values: &[40.0, 2.0, 2.1, 1.9],
            }],
            y_cap: Some(3.0),
        });
        assert!(svg.contains(">40.0</text>"));
    }
}
