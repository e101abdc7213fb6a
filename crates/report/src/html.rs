//! A report as one self-contained HTML file: inline CSS, inline SVG charts,
//! no script and no external resource, light and dark themes
//! (`prefers-color-scheme`), and print rules (light colours, charts kept
//! whole on a page).

use std::fmt::Write;

use super::{Block, Report};
use crate::chart::svg::{self, esc};

const STYLE: &str = "\
:root{--fg:#1d2330;--muted:#5f6778;--bg:#ffffff;--panel:#f3f5f9;--line:#d5d9e2}\
@media (prefers-color-scheme: dark){:root{--fg:#e6e9ef;--muted:#a3abbb;--bg:#14171d;--panel:#1d222b;--line:#394150}}\
body{font:14px/1.5 'Liberation Sans',Arial,Helvetica,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:1000px;padding:1.5em}\
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid var(--line);padding-bottom:.2em}\
.sub{color:var(--muted)}.headline{font-size:1.1em;background:var(--panel);padding:.6em .9em;border-radius:6px}\
table{border-collapse:collapse;width:100%;margin:.6em 0;font-size:.92em}th,td{border:1px solid var(--line);padding:.25em .5em;vertical-align:top;text-align:left}\
th{background:var(--panel)}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}\
figure{margin:1em 0;break-inside:avoid;page-break-inside:avoid}figure svg{width:100%;height:auto;display:block}\
.note{color:var(--muted);font-size:.88em}.finding{border-left:4px solid var(--line);padding:.2em .9em;margin:.8em 0;break-inside:avoid}\
.sev{font-weight:bold;text-transform:uppercase;font-size:.8em;padding:.1em .4em;border-radius:3px;color:#fff}\
.critical{background:#a01818}.high{background:#d2551e}.medium{background:#a67c00}.low{background:#3b7dd8}.info{background:#7a8494}\
svg .f-ink{fill:var(--fg)}svg .f-muted{fill:var(--muted)}svg .f-grid{fill:var(--line)}\
svg .s-ink{stroke:var(--fg)}svg .s-muted{stroke:var(--muted)}svg .s-grid{stroke:var(--line)}\
@media print{:root{--fg:#000;--muted:#444;--bg:#fff;--panel:#eee;--line:#bbb}body{max-width:none;padding:0;font-size:11pt}h2{break-after:avoid}}";

/// The report as an HTML document.
pub fn render(r: &Report) -> String {
    let mut h = String::with_capacity(64 << 10);
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<meta name=\"color-scheme\" content=\"light dark\"><meta name=\"generator\" content=\"aisp {}\">\
<title>{}</title><style>{STYLE}</style></head><body>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&r.title)
    );
    let _ = write!(
        h,
        "<header><h1>{}</h1><p class=\"sub\">{}</p><p class=\"headline\">{}</p><dl class=\"facts\">",
        esc(&r.title),
        esc(&r.subtitle),
        esc(&r.headline)
    );
    for (k, v) in &r.facts {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    h.push_str("</dl></header>\n");
    for s in &r.sections {
        let _ = writeln!(h, "<section><h2>{}</h2>", esc(&s.heading));
        for b in &s.blocks {
            match b {
                Block::Para(t) => {
                    let _ = writeln!(h, "<p>{}</p>", esc(t));
                }
                Block::Note(t) => {
                    let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(t));
                }
                Block::Chart(c) => {
                    let _ = writeln!(h, "<figure>{}</figure>", svg::render(c));
                }
                Block::Finding(f) => {
                    let _ = write!(
                        h,
                        "<div class=\"finding\"><p><span class=\"sev {0}\">{0}</span> <b>{1}</b></p><ul>",
                        esc(&f.severity),
                        esc(&f.title)
                    );
                    for l in &f.lines {
                        let _ = write!(h, "<li>{}</li>", esc(l));
                    }
                    h.push_str("</ul></div>\n");
                }
                Block::Table(t) => {
                    h.push_str("<table><thead><tr>");
                    for (i, c) in t.headers.iter().enumerate() {
                        let cls = if t.numeric.get(i) == Some(&true) {
                            " class=\"n\""
                        } else {
                            ""
                        };
                        let _ = write!(h, "<th{cls}>{}</th>", esc(c));
                    }
                    h.push_str("</tr></thead><tbody>");
                    for row in &t.rows {
                        h.push_str("<tr>");
                        for (i, c) in row.iter().enumerate() {
                            let cls = if t.numeric.get(i) == Some(&true) {
                                " class=\"n\""
                            } else {
                                ""
                            };
                            let _ = write!(h, "<td{cls}>{}</td>", esc(c));
                        }
                        h.push_str("</tr>");
                    }
                    h.push_str("</tbody></table>\n");
                }
            }
        }
        h.push_str("</section>\n");
    }
    let _ = writeln!(
        h,
        "<footer class=\"note\"><p>Generated by aisp {}. Busy and idle times are unions of intervals, never sums of durations; \
times are in the export's own timebase.</p></footer></body></html>",
        env!("CARGO_PKG_VERSION")
    );
    h
}
