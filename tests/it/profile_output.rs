//! What every profile operation's default answer looks like to its two
//! readers, through the real binary on real fixtures:
//!
//! - a person at a terminal: the rendered table (`--format table`, 100
//!   columns) must match the committed snapshot in `tests/snapshots/table/`.
//!   After an intended change, regenerate them and review the diff:
//!   `UPDATE_SNAPSHOTS=1 cargo test --test profile_output`.
//! - a model: the default JSON result stays near 4,000 characters counted as
//!   the MCP budgets count (`len(json.dumps(result))` in Python): each at most
//!   4,500 and 4,000 on average, on the single-GPU `train_good` and the two-GPU
//!   `ddp` fixtures (the rest is one argument away, named in `left_out`).

use crate::common;
use crate::profile_common;

use std::path::{Path, PathBuf};

use profile_common::{data_dir, fixture};
use serde_json::Value;

/// Most characters a default profile answer may take.
const RESULT_BUDGET: usize = 4_500;
/// Answers held to a larger budget, and why.
const ALLOWANCES: &[(&str, usize, &str)] = &[
    // Kineto traces name kernels by their whole demangled signature (hundreds of characters each), and
    // several ranks each get their own section.
    ("trace_", 8_000, "Kineto kernel names are whole signatures"),
    // Each finding carries one line of the numbers its stake rests on and each device its step in short (what an
    // assistant otherwise asked `detail` for), the top finding's device its largest kernels and NVTX ranges a line
    // each (what it otherwise asked the kernel and NVTX tables for) and the top finding its first lines of evidence
    // (what it asked a reader for): ddp's two devices hold five findings above info. Over MCP the answer cap holds
    // it to 4,500 (the kernels past the fourth go first).
    (
        "rules_",
        8_500,
        "each finding's gist, each device's step in short and the top device's kernels",
    ),
];
/// Most characters a default profile answer takes on average over the cases.
const MEAN_BUDGET: usize = aisp::ops::profile_lean::LEAN_BUDGET;

struct Case {
    /// Snapshot file name (without `.txt`).
    name: &'static str,
    /// Arguments after `aisp profile`.
    args: Vec<String>,
}

fn capture_file(name: &str) -> String {
    data_dir().join("capture").join(name).display().to_string()
}

fn cases(home: &Path) -> Vec<Case> {
    let train = fixture("train_good.sqlite").display().to_string();
    let ddp = fixture("ddp.sqlite").display().to_string();
    let mut out = Vec::new();
    let nsys_ops = [
        "info",
        "summary",
        "kernels",
        "utilization",
        "gaps",
        "memory",
        "nvtx",
        "iterations",
        "nccl",
        "overlap",
        "timeline",
        "rules",
        "ledger",
    ];
    for (fx, path) in [("train_good", &train), ("ddp", &ddp)] {
        for op in nsys_ops {
            out.push(Case {
                name: Box::leak(format!("{op}_{fx}").into_boxed_str()),
                args: vec![op.into(), path.clone()],
            });
        }
        out.push(Case {
            name: Box::leak(format!("search_{fx}").into_boxed_str()),
            args: vec![
                "search".into(),
                path.clone(),
                "--pattern".into(),
                "elementwise".into(),
            ],
        });
    }
    out.push(Case {
        name: "compare_train_good_ddp",
        args: vec!["compare".into(), train.clone(), ddp.clone()],
    });
    out.push(Case {
        name: "export_train_good_csv",
        args: vec![
            "export".into(),
            train.clone(),
            "--kind".into(),
            "csv".into(),
            "--output".into(),
            home.join("kern.csv").display().to_string(),
        ],
    });
    out.push(Case {
        name: "ncu_summary_train_good",
        args: vec!["ncu-summary".into(), capture_file("train_good.ncu-raw.csv")],
    });
    out.push(Case {
        name: "trace_train_good",
        args: vec!["trace".into(), capture_file("train_good.kineto.json.xz")],
    });
    out.push(Case {
        name: "trace_ddp",
        args: vec![
            "trace".into(),
            capture_file("ddp.rank0.kineto.json.xz"),
            capture_file("ddp.rank1.kineto.json.xz"),
        ],
    });
    out.push(Case {
        name: "list_empty",
        args: vec!["list".into()],
    });
    out
}

fn run(home: &Path, format: &str, args: &[String]) -> String {
    let out = common::aisp(home)
        .env("COLUMNS", "100")
        .args(["--format", format, "profile"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "aisp profile {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Machine-specific paths replaced by stable names.
fn normalize(text: &str, home: &Path) -> String {
    let decompressed = fixture("ddp.sqlite")
        .parent()
        .unwrap()
        .display()
        .to_string();
    text.replace(&home.display().to_string(), "<home>")
        .replace(&decompressed, "<tests/data>")
        .replace(&data_dir().display().to_string(), "<tests/data>")
}

/// `text` with the home, fixture and test-data folders replaced by one 60-character folder,
/// about as deep as a user's project.
pub(crate) fn at_a_standard_place(text: &str, home: &Path) -> String {
    let place = format!("/home/user/{}", "p".repeat(49));
    normalize(text, home)
        .replace("<home>", &place)
        .replace("<tests/data>", &place)
}

/// Length of `json.dumps(v)` in Python: `", "` and `": "` separators, non-ASCII escaped.
fn python_len(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => string_len(s),
        Value::Array(items) => {
            2 + items.iter().map(python_len).sum::<usize>() + 2 * items.len().saturating_sub(1)
        }
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, x)| string_len(k) + 2 + python_len(x))
                .sum::<usize>()
                + 2 * m.len().saturating_sub(1)
        }
    }
}

fn string_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c if c.is_ascii() => 1,
            c if (c as u32) > 0xFFFF => 12,
            _ => 6,
        })
        .sum::<usize>()
}

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/table")
}

#[test]
fn every_profile_operation_renders_its_key_numbers_as_a_table() {
    let home = tempfile::tempdir().unwrap();
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let dir = snapshot_dir();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut failures = Vec::new();
    for case in cases(home.path()) {
        let text = normalize(&run(home.path(), "table", &case.args), home.path());
        assert!(
            !text.contains("use --format json"),
            "{}: the table sends the reader to JSON instead of showing the numbers:\n{text}",
            case.name
        );
        let file = dir.join(format!("{}.txt", case.name));
        if update {
            std::fs::write(&file, &text).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&file).unwrap_or_default();
        // Compared word by word: the fixtures' absolute paths (replaced after rendering) have another length on
        // every checkout, and the table wraps long lines and pads columns to what they hold.
        if !expected.split_whitespace().eq(text.split_whitespace()) {
            let line = expected
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(expected.lines().count().min(text.lines().count()));
            failures.push(format!(
                "{}: differs from {} at line {}:\n  expected: {}\n  got:      {}",
                case.name,
                file.display(),
                line + 1,
                expected.lines().nth(line).unwrap_or("<end>"),
                text.lines().nth(line).unwrap_or("<end>"),
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is intended: UPDATE_SNAPSHOTS=1 cargo test --test profile_output, then review `git diff tests/snapshots`.",
        failures.join("\n")
    );
}

#[test]
fn default_results_stay_within_the_context_budget() {
    let home = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    let mut over = Vec::new();
    let mut sizes = Vec::new();
    for case in cases(home.path()) {
        if case.name.starts_with("export") {
            // Writes a file; its answer is a path and a size.
            continue;
        }
        // Counted with every folder of a fixture spelled the same length, so the size does not
        // depend on where the checkout sits (a CI clone's path is longer than a developer's).
        let text = at_a_standard_place(&run(home.path(), "json", &case.args), home.path());
        let v: Value = serde_json::from_str(&text).unwrap();
        let n = python_len(&v);
        sizes.push(n);
        report.push(format!("{:<28} {n:>6}", case.name));
        let budget = ALLOWANCES
            .iter()
            .find(|(prefix, _, _)| case.name.starts_with(prefix))
            .map_or(RESULT_BUDGET, |a| a.1);
        if n > budget {
            over.push(format!("{}: {n} characters (budget {budget})", case.name));
        }
    }
    eprintln!("{}", report.join("\n"));
    let mean = sizes.iter().sum::<usize>() / sizes.len().max(1);
    assert!(
        mean <= MEAN_BUDGET,
        "default results take {mean} characters on average (budget {MEAN_BUDGET})"
    );
    assert!(
        over.is_empty(),
        "default results over {RESULT_BUDGET} characters (trim the default and say in left_out how to get the rest):\n{}",
        over.join("\n")
    );
}

#[test]
fn a_first_look_chain_on_one_profile_stays_lean() {
    // info → summary → rules → gaps → nvtx, as an assistant's first look at a run.
    let home = tempfile::tempdir().unwrap();
    let train = fixture("train_good.sqlite").display().to_string();
    let total: usize = ["info", "summary", "rules", "gaps", "nvtx"]
        .iter()
        .map(|op| {
            let text = run(home.path(), "json", &[op.to_string(), train.clone()]);
            python_len(&serde_json::from_str(&text).unwrap())
        })
        .sum();
    // It was ~57,000 characters before defaults were first trimmed, ~38,000 before they led with the
    // verdict and left the rest behind `detail`, under 16,000 before the rules answer held the top finding's first
    // lines of evidence and the step's NVTX ranges (what the chain's gaps and nvtx calls are made for: ~900
    // characters more in `rules`, so that an assistant needs neither).
    assert!(total < 17_500, "the chain returns {total} characters");
}

#[test]
fn python_length_matches_json_dumps() {
    // json.dumps({"a": [1, 2.5, "µs"], "b": null}) == '{"a": [1, 2.5, "\\u00b5s"], "b": null}'
    let v: Value = serde_json::from_str(r#"{"a": [1, 2.5, "µs"], "b": null}"#).unwrap();
    assert_eq!(
        python_len(&v),
        r#"{"a": [1, 2.5, "\u00b5s"], "b": null}"#.len()
    );
}
