//! Charts as vector scenes: the one chart module of aisp.
//!
//! A chart is built as a [`Scene`] (rectangles, lines, polylines, circles and
//! text in a fixed coordinate box) from numbers that the analysis modules
//! computed; the chart code only places them. A scene is written as SVG for
//! HTML reports and the dashboard ([`svg::render`]) and drawn as PDF vector
//! paths by the PDF writer (`crate::pdf`), so both show the same
//! picture. Colours that must change between light and dark themes (text,
//! axes, grid) are roles, not fixed colours; series colours are mid-tones that
//! read on both.

pub mod build;
pub mod svg;

/// A colour: a theme role or a fixed RGB series colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    /// Main text.
    Ink,
    /// Secondary text and axes.
    Muted,
    /// Grid lines.
    Grid,
    Rgb(u8, u8, u8),
}

impl Paint {
    /// The colour on a light background (PDF pages, printed HTML).
    pub fn light_rgb(self) -> (u8, u8, u8) {
        match self {
            Paint::Ink => (0x1d, 0x23, 0x30),
            Paint::Muted => (0x5f, 0x67, 0x78),
            Paint::Grid => (0xd5, 0xd9, 0xe2),
            Paint::Rgb(r, g, b) => (r, g, b),
        }
    }

    pub fn hex(self) -> String {
        let (r, g, b) = self.light_rgb();
        format!("#{r:02x}{g:02x}{b:02x}")
    }

    /// The CSS class that re-colours a theme role in dark mode.
    pub fn role_class(self) -> Option<&'static str> {
        match self {
            Paint::Ink => Some("ink"),
            Paint::Muted => Some("muted"),
            Paint::Grid => Some("grid"),
            Paint::Rgb(..) => None,
        }
    }
}

/// Series colours (Okabe–Ito-like, distinguishable in colour-blind vision).
pub const SERIES: &[Paint] = &[
    Paint::Rgb(0x1f, 0x77, 0xb4),
    Paint::Rgb(0xe6, 0x7e, 0x22),
    Paint::Rgb(0x2a, 0x9d, 0x5c),
    Paint::Rgb(0xc0, 0x39, 0x2b),
    Paint::Rgb(0x8e, 0x44, 0xad),
    Paint::Rgb(0x16, 0xa0, 0x85),
    Paint::Rgb(0xb7, 0x95, 0x0b),
    Paint::Rgb(0x7f, 0x8c, 0x8d),
];

pub const GOOD: Paint = Paint::Rgb(0x2a, 0x9d, 0x5c);
pub const BAD: Paint = Paint::Rgb(0xc0, 0x39, 0x2b);
pub const NEUTRAL: Paint = Paint::Rgb(0x7f, 0x8c, 0x8d);
/// Idle gaps on a timeline.
pub const IDLE: Paint = Paint::Rgb(0xd9, 0x3f, 0x3f);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// One drawing instruction. Coordinates are in points, y down.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Rect {
        x: f32,
        y: f32,
        w: f32,
        h: f32,
        fill: Paint,
        /// Tooltip (SVG `<title>`).
        title: Option<String>,
    },
    Line {
        x1: f32,
        y1: f32,
        x2: f32,
        y2: f32,
        stroke: Paint,
        width: f32,
        dashed: bool,
    },
    Polyline {
        points: Vec<(f32, f32)>,
        stroke: Paint,
        width: f32,
    },
    Circle {
        cx: f32,
        cy: f32,
        r: f32,
        fill: Paint,
        title: Option<String>,
    },
    Text {
        x: f32,
        y: f32,
        text: String,
        size: f32,
        anchor: Anchor,
        bold: bool,
        fill: Paint,
    },
}

/// A chart: a titled box of drawing instructions.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    /// What the chart shows (SVG `aria-label`, figure caption).
    pub title: String,
    pub width: f32,
    pub height: f32,
    pub items: Vec<Item>,
}

impl Scene {
    pub fn new(title: impl Into<String>, width: f32, height: f32) -> Scene {
        Scene {
            title: title.into(),
            width,
            height,
            items: Vec::new(),
        }
    }

    pub fn rect(&mut self, x: f32, y: f32, w: f32, h: f32, fill: Paint, title: Option<String>) {
        if w.is_finite() && h.is_finite() && w > 0.0 && h > 0.0 {
            self.items.push(Item::Rect {
                x,
                y,
                w,
                h,
                fill,
                title,
            });
        }
    }

    pub fn line(&mut self, (x1, y1): (f32, f32), (x2, y2): (f32, f32), stroke: Paint, width: f32) {
        self.items.push(Item::Line {
            x1,
            y1,
            x2,
            y2,
            stroke,
            width,
            dashed: false,
        });
    }

    pub fn dashed(
        &mut self,
        (x1, y1): (f32, f32),
        (x2, y2): (f32, f32),
        stroke: Paint,
        width: f32,
    ) {
        self.items.push(Item::Line {
            x1,
            y1,
            x2,
            y2,
            stroke,
            width,
            dashed: true,
        });
    }

    pub fn text(&mut self, x: f32, y: f32, text: impl Into<String>, size: f32, anchor: Anchor) {
        self.items.push(Item::Text {
            x,
            y,
            text: text.into(),
            size,
            anchor,
            bold: false,
            fill: Paint::Ink,
        });
    }

    pub fn muted_text(
        &mut self,
        x: f32,
        y: f32,
        text: impl Into<String>,
        size: f32,
        anchor: Anchor,
    ) {
        self.items.push(Item::Text {
            x,
            y,
            text: text.into(),
            size,
            anchor,
            bold: false,
            fill: Paint::Muted,
        });
    }

    pub fn bold_text(&mut self, x: f32, y: f32, text: impl Into<String>, size: f32) {
        self.items.push(Item::Text {
            x,
            y,
            text: text.into(),
            size,
            anchor: Anchor::Start,
            bold: true,
            fill: Paint::Ink,
        });
    }

    /// Every text string in the scene (tests check that numbers reach the picture).
    pub fn texts(&self) -> Vec<&str> {
        self.items
            .iter()
            .filter_map(|i| match i {
                Item::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}
