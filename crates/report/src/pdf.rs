//! A report as PDF through `krilla`: A4 pages, an embedded and subset OFL
//! font (Liberation Sans, `fonts/OFL.txt`) with a ToUnicode map so all text
//! can be selected and searched, charts drawn as vector paths from the same
//! [`Scene`] the HTML shows (no raster image anywhere), a title page with the
//! machine, GPU, versions and time, and "Page i of N" on every page.
//!
//! Layout runs first into a list of pages of drawing operations, so the page
//! count is known when the footers are drawn.

use krilla::Document;
use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Rect, Transform};
use krilla::metadata::Metadata;
use krilla::num::NormalizedF32;
use krilla::page::PageSettings;
use krilla::paint::{Fill, Stroke, StrokeDash};
use krilla::surface::Surface;
use krilla::text::{Font, TextDirection};

use super::{Block, Report, ReportError, Result};
use crate::chart::{Anchor, Item, Paint, Scene};

const REGULAR: &[u8] = include_bytes!("fonts/LiberationSans-Regular.ttf");
const BOLD: &[u8] = include_bytes!("fonts/LiberationSans-Bold.ttf");

const PAGE_W: f32 = 595.28;
const PAGE_H: f32 = 841.89;
const MARGIN: f32 = 42.0;
const CONTENT_W: f32 = PAGE_W - 2.0 * MARGIN;
const BOTTOM: f32 = PAGE_H - MARGIN - 18.0;

/// Glyph advances of the embedded faces, for wrapping and alignment.
struct Metrics {
    regular: ttf_parser::Face<'static>,
    bold: ttf_parser::Face<'static>,
}

impl Metrics {
    fn new() -> Result<Metrics> {
        let parse = |d: &'static [u8]| {
            ttf_parser::Face::parse(d, 0).map_err(|e| ReportError::Pdf(format!("font: {e}")))
        };
        Ok(Metrics {
            regular: parse(REGULAR)?,
            bold: parse(BOLD)?,
        })
    }

    fn face(&self, bold: bool) -> &ttf_parser::Face<'static> {
        if bold { &self.bold } else { &self.regular }
    }

    fn width(&self, text: &str, size: f32, bold: bool) -> f32 {
        let f = self.face(bold);
        let upem = f.units_per_em() as f32;
        text.chars()
            .map(|c| {
                f.glyph_index(c)
                    .and_then(|g| f.glyph_hor_advance(g))
                    .unwrap_or(500) as f32
            })
            .sum::<f32>()
            * size
            / upem
    }

    /// Characters the font lacks become `?` (never an invisible box).
    fn printable(&self, text: &str) -> String {
        let f = &self.regular;
        text.chars()
            .map(|c| match c {
                '\t' | '\n' | '\r' => ' ',
                c if f.glyph_index(c).is_some() => c,
                _ => '?',
            })
            .collect()
    }

    /// Greedy word wrap to `width`; words longer than a line are cut.
    fn wrap(&self, text: &str, size: f32, bold: bool, width: f32) -> Vec<String> {
        let mut lines = Vec::new();
        let mut cur = String::new();
        for word in text.split_whitespace() {
            let candidate = if cur.is_empty() {
                word.to_string()
            } else {
                format!("{cur} {word}")
            };
            if self.width(&candidate, size, bold) <= width {
                cur = candidate;
                continue;
            }
            if !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
            }
            let mut w = word.to_string();
            while self.width(&w, size, bold) > width && w.chars().count() > 1 {
                let mut head = String::new();
                for c in w.chars() {
                    if self.width(&format!("{head}{c}"), size, bold) > width {
                        break;
                    }
                    head.push(c);
                }
                if head.is_empty() {
                    break;
                }
                w = w[head.len()..].to_string();
                lines.push(head);
            }
            cur = w;
        }
        if !cur.is_empty() {
            lines.push(cur);
        }
        if lines.is_empty() {
            lines.push(String::new());
        }
        lines
    }

    /// Cut `text` to fit `width`, ending in `…` when cut.
    fn fit(&self, text: &str, size: f32, bold: bool, width: f32) -> String {
        if self.width(text, size, bold) <= width {
            return text.to_string();
        }
        let mut out = String::new();
        for c in text.chars() {
            if self.width(&format!("{out}{c}…"), size, bold) > width {
                break;
            }
            out.push(c);
        }
        out.push('…');
        out
    }
}

/// One drawing operation on a page, in page coordinates (y down).
enum Op {
    Text {
        x: f32,
        y: f32,
        text: String,
        size: f32,
        bold: bool,
        paint: Paint,
    },
    Rect {
        x: f32,
        y: f32,
        w: f32,
        h: f32,
        paint: Paint,
    },
    Line {
        a: (f32, f32),
        b: (f32, f32),
        paint: Paint,
        width: f32,
    },
    Chart {
        index: usize,
        x: f32,
        y: f32,
        scale: f32,
    },
}

struct Layout<'a> {
    m: &'a Metrics,
    pages: Vec<Vec<Op>>,
    y: f32,
    charts: Vec<&'a Scene>,
}

const PANEL: Paint = Paint::Rgb(0xee, 0xf1, 0xf6);

fn severity_paint(s: &str) -> Paint {
    match s {
        "critical" => Paint::Rgb(0xa0, 0x18, 0x18),
        "high" => Paint::Rgb(0xd2, 0x55, 0x1e),
        "medium" => Paint::Rgb(0xa6, 0x7c, 0x00),
        "low" => Paint::Rgb(0x3b, 0x7d, 0xd8),
        _ => Paint::Rgb(0x7a, 0x84, 0x94),
    }
}

impl<'a> Layout<'a> {
    fn page(&mut self) -> &mut Vec<Op> {
        if self.pages.is_empty() {
            self.pages.push(Vec::new());
        }
        self.pages.last_mut().expect("a page")
    }
    fn new_page(&mut self) {
        self.pages.push(Vec::new());
        self.y = MARGIN;
    }
    /// Start a new page unless `h` more points fit.
    fn ensure(&mut self, h: f32) {
        if self.y + h > BOTTOM && self.y > MARGIN + 1.0 {
            self.new_page();
        }
    }
    fn text(&mut self, x: f32, text: &str, size: f32, bold: bool, paint: Paint) {
        let t = self.m.printable(text);
        let y = self.y + size;
        self.page().push(Op::Text {
            x,
            y,
            text: t,
            size,
            bold,
            paint,
        });
    }
    fn wrapped(&mut self, x: f32, text: &str, size: f32, bold: bool, paint: Paint, width: f32) {
        let leading = size * 1.32;
        for line in self.m.wrap(&self.m.printable(text), size, bold, width) {
            self.ensure(leading);
            self.text(x, &line, size, bold, paint);
            self.y += leading;
        }
    }

    fn table(&mut self, t: &super::Table) {
        let size = 7.6;
        let pad = 3.0;
        let cols = t.headers.len().max(1);
        let natural: Vec<f32> = (0..cols)
            .map(|c| {
                let head = self.m.width(&t.headers[c], size, true);
                t.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|v| self.m.width(v, size, false))
                    .fold(head, f32::max)
                    + 2.0 * pad
                    + 1.0
            })
            .collect();
        let total: f32 = natural.iter().sum();
        let widths: Vec<f32> = if total <= CONTENT_W {
            natural.clone()
        } else {
            // Numbers keep their width; text columns share what is left.
            let fixed: f32 = (0..cols)
                .filter(|c| t.numeric.get(*c) == Some(&true))
                .map(|c| natural[c])
                .sum();
            let text_total: f32 = total - fixed;
            let room = (CONTENT_W - fixed).max(60.0);
            (0..cols)
                .map(|c| {
                    if t.numeric.get(c) == Some(&true) {
                        natural[c]
                    } else {
                        natural[c] / text_total.max(1.0) * room
                    }
                })
                .collect()
        };
        let row_h = size * 1.6;
        let header = |l: &mut Layout| {
            let mut x = MARGIN;
            let y = l.y;
            l.page().push(Op::Rect {
                x: MARGIN,
                y,
                w: widths.iter().sum(),
                h: row_h,
                paint: PANEL,
            });
            for (c, h) in t.headers.iter().enumerate() {
                let w = widths[c];
                let s = l.m.fit(&l.m.printable(h), size, true, w - 2.0 * pad);
                let tx = if t.numeric.get(c) == Some(&true) {
                    x + w - pad - l.m.width(&s, size, true)
                } else {
                    x + pad
                };
                l.page().push(Op::Text {
                    x: tx,
                    y: y + row_h - 3.2,
                    text: s,
                    size,
                    bold: true,
                    paint: Paint::Ink,
                });
                x += w;
            }
            l.y += row_h;
        };
        self.ensure(row_h * 3.0);
        header(self);
        for r in &t.rows {
            if self.y + row_h > BOTTOM {
                self.new_page();
                header(self);
            }
            let mut x = MARGIN;
            let y = self.y;
            for (c, v) in r.iter().enumerate().take(cols) {
                let w = widths[c];
                let s = self.m.fit(&self.m.printable(v), size, false, w - 2.0 * pad);
                let tx = if t.numeric.get(c) == Some(&true) {
                    x + w - pad - self.m.width(&s, size, false)
                } else {
                    x + pad
                };
                self.page().push(Op::Text {
                    x: tx,
                    y: y + row_h - 3.2,
                    text: s,
                    size,
                    bold: false,
                    paint: Paint::Ink,
                });
                x += w;
            }
            self.y += row_h;
            let y = self.y;
            self.page().push(Op::Line {
                a: (MARGIN, y),
                b: (MARGIN + widths.iter().sum::<f32>(), y),
                paint: Paint::Grid,
                width: 0.4,
            });
        }
        self.y += 6.0;
    }
}

fn layout<'a>(r: &'a Report, m: &'a Metrics) -> Layout<'a> {
    let mut l = Layout {
        m,
        pages: Vec::new(),
        y: MARGIN + 120.0,
        charts: Vec::new(),
    };
    // Title page.
    l.wrapped(MARGIN, &r.title, 22.0, true, Paint::Ink, CONTENT_W);
    l.y += 4.0;
    l.wrapped(MARGIN, &r.subtitle, 11.0, false, Paint::Muted, CONTENT_W);
    l.y += 18.0;
    l.wrapped(MARGIN, &r.headline, 12.5, true, Paint::Ink, CONTENT_W);
    l.y += 20.0;
    for (k, v) in &r.facts {
        let key_w = 130.0;
        let lines = m.wrap(&m.printable(v), 10.0, false, CONTENT_W - key_w);
        l.ensure(13.5 * lines.len() as f32);
        l.text(MARGIN, k, 10.0, true, Paint::Muted);
        for line in lines {
            l.text(MARGIN + key_w, &line, 10.0, false, Paint::Ink);
            l.y += 13.5;
        }
        l.y += 2.0;
    }
    for s in &r.sections {
        if l.pages.len() == 1 {
            l.new_page();
        } else {
            l.y += 10.0;
        }
        // Keep a heading with what follows it: its first paragraph and chart.
        let lead: f32 = s
            .blocks
            .iter()
            .take(2)
            .take_while(|b| matches!(b, Block::Para(_) | Block::Chart(_)))
            .map(|b| match b {
                Block::Chart(c) => c.height * (CONTENT_W / c.width).min(1.0) + 10.0,
                _ => 30.0,
            })
            .sum();
        l.ensure((40.0 + lead).min(BOTTOM - MARGIN));
        l.wrapped(MARGIN, &s.heading, 15.0, true, Paint::Ink, CONTENT_W);
        let y = l.y + 1.0;
        l.page().push(Op::Line {
            a: (MARGIN, y),
            b: (MARGIN + CONTENT_W, y),
            paint: Paint::Grid,
            width: 0.8,
        });
        l.y += 8.0;
        for b in &s.blocks {
            match b {
                Block::Para(t) => {
                    l.wrapped(MARGIN, t, 9.5, false, Paint::Ink, CONTENT_W);
                    l.y += 4.0;
                }
                Block::Note(t) => {
                    l.wrapped(MARGIN, t, 8.0, false, Paint::Muted, CONTENT_W);
                    l.y += 4.0;
                }
                Block::Table(t) => l.table(t),
                Block::Chart(sc) => {
                    let scale = (CONTENT_W / sc.width).min(1.0);
                    let h = sc.height * scale;
                    l.ensure(h + 6.0);
                    let index = l.charts.len();
                    l.charts.push(sc);
                    let y = l.y;
                    l.page().push(Op::Chart {
                        index,
                        x: MARGIN,
                        y,
                        scale,
                    });
                    l.y += h + 10.0;
                }
                Block::Finding(f) => {
                    l.ensure(40.0);
                    let label = f.severity.to_uppercase();
                    let bw = m.width(&label, 7.5, true) + 8.0;
                    let y = l.y;
                    l.page().push(Op::Rect {
                        x: MARGIN,
                        y,
                        w: bw,
                        h: 11.0,
                        paint: severity_paint(&f.severity),
                    });
                    l.page().push(Op::Text {
                        x: MARGIN + 4.0,
                        y: y + 8.5,
                        text: label,
                        size: 7.5,
                        bold: true,
                        paint: Paint::Rgb(0xff, 0xff, 0xff),
                    });
                    let first = m.wrap(&m.printable(&f.title), 10.0, true, CONTENT_W - bw - 6.0);
                    for (i, line) in first.iter().enumerate() {
                        let x = if i == 0 { MARGIN + bw + 6.0 } else { MARGIN };
                        l.ensure(13.0);
                        l.text(x, line, 10.0, true, Paint::Ink);
                        l.y += 13.0;
                    }
                    for line in &f.lines {
                        l.ensure(11.0);
                        l.text(MARGIN + 6.0, "•", 8.5, false, Paint::Muted);
                        l.wrapped(
                            MARGIN + 16.0,
                            line,
                            8.5,
                            false,
                            Paint::Ink,
                            CONTENT_W - 16.0,
                        );
                    }
                    l.y += 6.0;
                }
            }
        }
    }
    l
}

fn rgb_of(p: Paint) -> rgb::Color {
    let (r, g, b) = p.light_rgb();
    rgb::Color::new(r, g, b)
}

fn fill(p: Paint) -> Fill {
    Fill {
        paint: rgb_of(p).into(),
        opacity: NormalizedF32::ONE,
        rule: Default::default(),
    }
}

fn stroke(p: Paint, width: f32, dashed: bool) -> Stroke {
    Stroke {
        paint: rgb_of(p).into(),
        width,
        dash: dashed.then(|| StrokeDash {
            array: vec![4.0, 3.0],
            offset: 0.0,
        }),
        ..Default::default()
    }
}

struct Fonts {
    regular: Font,
    bold: Font,
}

fn draw_rect(s: &mut Surface, x: f32, y: f32, w: f32, h: f32, p: Paint) {
    let Some(rect) = Rect::from_xywh(x, y, w.max(0.01), h.max(0.01)) else {
        return;
    };
    let mut pb = PathBuilder::new();
    pb.push_rect(rect);
    if let Some(path) = pb.finish() {
        s.set_stroke(None);
        s.set_fill(Some(fill(p)));
        s.draw_path(&path);
    }
}

fn draw_polyline(s: &mut Surface, pts: &[(f32, f32)], p: Paint, width: f32, dashed: bool) {
    let mut pb = PathBuilder::new();
    for (i, (x, y)) in pts.iter().enumerate() {
        if i == 0 {
            pb.move_to(*x, *y);
        } else {
            pb.line_to(*x, *y);
        }
    }
    if let Some(path) = pb.finish() {
        s.set_fill(None);
        s.set_stroke(Some(stroke(p, width, dashed)));
        s.draw_path(&path);
        s.set_stroke(None);
    }
}

fn draw_circle(s: &mut Surface, cx: f32, cy: f32, r: f32, p: Paint) {
    // Four cubic arcs (κ = 0.5523) make a circle.
    let k = 0.552_284_8 * r;
    let mut pb = PathBuilder::new();
    pb.move_to(cx + r, cy);
    pb.cubic_to(cx + r, cy + k, cx + k, cy + r, cx, cy + r);
    pb.cubic_to(cx - k, cy + r, cx - r, cy + k, cx - r, cy);
    pb.cubic_to(cx - r, cy - k, cx - k, cy - r, cx, cy - r);
    pb.cubic_to(cx + k, cy - r, cx + r, cy - k, cx + r, cy);
    pb.close();
    if let Some(path) = pb.finish() {
        s.set_stroke(None);
        s.set_fill(Some(fill(p)));
        s.draw_path(&path);
    }
}

#[allow(clippy::too_many_arguments)]
fn draw_text(
    s: &mut Surface,
    fonts: &Fonts,
    x: f32,
    y: f32,
    text: &str,
    size: f32,
    bold: bool,
    p: Paint,
) {
    if text.trim().is_empty() {
        return;
    }
    s.set_stroke(None);
    s.set_fill(Some(fill(p)));
    let font = if bold { &fonts.bold } else { &fonts.regular };
    s.draw_text(
        Point::from_xy(x, y),
        font.clone(),
        size,
        text,
        false,
        TextDirection::Auto,
    );
}

fn draw_scene(s: &mut Surface, fonts: &Fonts, m: &Metrics, sc: &Scene, x: f32, y: f32, scale: f32) {
    s.push_transform(&Transform::from_row(scale, 0.0, 0.0, scale, x, y));
    for item in &sc.items {
        match item {
            Item::Rect {
                x, y, w, h, fill, ..
            } => draw_rect(s, *x, *y, *w, *h, *fill),
            Item::Line {
                x1,
                y1,
                x2,
                y2,
                stroke,
                width,
                dashed,
            } => draw_polyline(s, &[(*x1, *y1), (*x2, *y2)], *stroke, *width, *dashed),
            Item::Polyline {
                points,
                stroke,
                width,
            } => draw_polyline(s, points, *stroke, *width, false),
            Item::Circle {
                cx, cy, r, fill, ..
            } => draw_circle(s, *cx, *cy, *r, *fill),
            Item::Text {
                x,
                y,
                text,
                size,
                anchor,
                bold,
                fill,
            } => {
                let t = m.printable(text);
                let w = m.width(&t, *size, *bold);
                let dx = match anchor {
                    Anchor::Start => 0.0,
                    Anchor::Middle => -w / 2.0,
                    Anchor::End => -w,
                };
                draw_text(s, fonts, x + dx, *y, &t, *size, *bold, *fill);
            }
        }
    }
    s.pop();
}

/// The report as PDF bytes and the page count.
pub fn render(r: &Report) -> Result<(Vec<u8>, u32)> {
    let m = Metrics::new()?;
    let l = layout(r, &m);
    let fonts = Fonts {
        regular: Font::new(REGULAR.into(), 0)
            .ok_or_else(|| ReportError::Pdf("cannot load the regular font".into()))?,
        bold: Font::new(BOLD.into(), 0)
            .ok_or_else(|| ReportError::Pdf("cannot load the bold font".into()))?,
    };
    let total = l.pages.len();
    let mut doc = Document::new();
    let footer_title = m.fit(&m.printable(&r.title), 7.5, false, CONTENT_W - 80.0);
    for (i, ops) in l.pages.iter().enumerate() {
        let settings = PageSettings::from_wh(PAGE_W, PAGE_H)
            .ok_or_else(|| ReportError::Pdf("bad page size".into()))?;
        let mut page = doc.start_page_with(settings);
        let mut s = page.surface();
        for op in ops {
            match op {
                Op::Text {
                    x,
                    y,
                    text,
                    size,
                    bold,
                    paint,
                } => draw_text(&mut s, &fonts, *x, *y, text, *size, *bold, *paint),
                Op::Rect { x, y, w, h, paint } => draw_rect(&mut s, *x, *y, *w, *h, *paint),
                Op::Line { a, b, paint, width } => {
                    draw_polyline(&mut s, &[*a, *b], *paint, *width, false)
                }
                Op::Chart { index, x, y, scale } => {
                    draw_scene(&mut s, &fonts, &m, l.charts[*index], *x, *y, *scale)
                }
            }
        }
        let foot_y = PAGE_H - MARGIN + 6.0;
        draw_text(
            &mut s,
            &fonts,
            MARGIN,
            foot_y,
            &footer_title,
            7.5,
            false,
            Paint::Muted,
        );
        let num = format!("Page {} of {}", i + 1, total);
        let w = m.width(&num, 7.5, false);
        draw_text(
            &mut s,
            &fonts,
            PAGE_W - MARGIN - w,
            foot_y,
            &num,
            7.5,
            false,
            Paint::Muted,
        );
        s.finish();
        page.finish();
    }
    doc.set_metadata(
        Metadata::new()
            .title(r.title.clone())
            .description(r.subtitle.clone())
            .creator(format!("aisp {}", env!("CARGO_PKG_VERSION")))
            .producer("aisp (krilla)".into()),
    );
    let bytes = doc
        .finish()
        .map_err(|e| ReportError::Pdf(format!("{e:?}")))?;
    Ok((bytes, total as u32))
}
