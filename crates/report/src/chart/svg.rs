//! A [`Scene`] as an inline SVG element. Theme roles carry a class
//! (`ink`, `muted`, `grid`) so a page's stylesheet can recolour them for dark
//! mode; the attribute colour is the light one, so the SVG also stands alone.

use std::fmt::Write;

use super::{Anchor, Item, Paint, Scene};

/// Escape text for XML content and attributes.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // A character reference: the same whitespace to a browser, but no
            // text from a profile can start a line of the file.
            '\n' => o.push_str("&#10;"),
            c if (c as u32) < 0x20 && c != '\t' => {}
            c => o.push(c),
        }
    }
    o
}

fn n(v: f32) -> String {
    let r = (v * 100.0).round() / 100.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

fn fill_attr(p: Paint) -> String {
    match p.role_class() {
        Some(c) => format!("fill=\"{}\" class=\"f-{c}\"", p.hex()),
        None => format!("fill=\"{}\"", p.hex()),
    }
}

fn stroke_attr(p: Paint) -> String {
    match p.role_class() {
        Some(c) => format!("stroke=\"{}\" class=\"s-{c}\"", p.hex()),
        None => format!("stroke=\"{}\"", p.hex()),
    }
}

/// The scene as `<svg>…</svg>` (scalable: width 100%, fixed aspect ratio).
pub fn render(scene: &Scene) -> String {
    let mut s = String::with_capacity(256 + scene.items.len() * 80);
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\" \
font-family=\"Liberation Sans, Arial, Helvetica, sans-serif\" class=\"chart\"><title>{}</title>",
        n(scene.width),
        n(scene.height),
        esc(&scene.title),
        esc(&scene.title)
    );
    for item in &scene.items {
        match item {
            Item::Rect {
                x,
                y,
                w,
                h,
                fill,
                title,
            } => {
                let _ = write!(
                    s,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" {}",
                    n(*x),
                    n(*y),
                    n(*w),
                    n(*h),
                    fill_attr(*fill)
                );
                match title {
                    Some(t) => {
                        let _ = write!(s, "><title>{}</title></rect>", esc(t));
                    }
                    None => s.push_str("/>"),
                }
            }
            Item::Line {
                x1,
                y1,
                x2,
                y2,
                stroke,
                width,
                dashed,
            } => {
                let _ = write!(
                    s,
                    "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {} stroke-width=\"{}\"{}/>",
                    n(*x1),
                    n(*y1),
                    n(*x2),
                    n(*y2),
                    stroke_attr(*stroke),
                    n(*width),
                    if *dashed {
                        " stroke-dasharray=\"4 3\""
                    } else {
                        ""
                    }
                );
            }
            Item::Polyline {
                points,
                stroke,
                width,
            } => {
                let pts: Vec<String> = points
                    .iter()
                    .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
                    .collect();
                let _ = write!(
                    s,
                    "<polyline points=\"{}\" fill=\"none\" {} stroke-width=\"{}\" stroke-linejoin=\"round\"/>",
                    pts.join(" "),
                    stroke_attr(*stroke),
                    n(*width)
                );
            }
            Item::Circle {
                cx,
                cy,
                r,
                fill,
                title,
            } => {
                let _ = write!(
                    s,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" {}",
                    n(*cx),
                    n(*cy),
                    n(*r),
                    fill_attr(*fill)
                );
                match title {
                    Some(t) => {
                        let _ = write!(s, "><title>{}</title></circle>", esc(t));
                    }
                    None => s.push_str("/>"),
                }
            }
            Item::Text {
                x,
                y,
                text,
                size,
                anchor,
                bold,
                fill,
            } => {
                let a = match anchor {
                    Anchor::Start => "",
                    Anchor::Middle => " text-anchor=\"middle\"",
                    Anchor::End => " text-anchor=\"end\"",
                };
                let _ = write!(
                    s,
                    "<text x=\"{}\" y=\"{}\" font-size=\"{}\"{}{} {}>{}</text>",
                    n(*x),
                    n(*y),
                    n(*size),
                    a,
                    if *bold { " font-weight=\"bold\"" } else { "" },
                    fill_attr(*fill),
                    esc(text)
                );
            }
        }
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_well_formed_svg_with_escaped_text() {
        let mut sc = Scene::new("a <b> & c", 100.0, 50.0);
        sc.rect(1.0, 2.0, 3.0, 4.0, Paint::Rgb(1, 2, 3), Some("t<".into()));
        sc.text(5.0, 6.0, "x & y", 9.0, Anchor::End);
        sc.line((0.0, 0.0), (1.0, 1.0), Paint::Grid, 0.5);
        let s = render(&sc);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("x &amp; y") && s.contains("a &lt;b&gt; &amp; c"));
        assert!(s.contains("fill=\"#010203\"") && s.contains("class=\"s-grid\""));
        assert!(s.contains("text-anchor=\"end\""));
    }
}
