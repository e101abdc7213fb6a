//! The CLI: exit codes (0 ok, 1 operation error, 2 usage), JSON on a pipe,
//! tables on request, positional and `--json` arguments, timeouts.

use crate::common;

use serde_json::Value;

fn run(args: &[&str]) -> (i32, Value, String) {
    let home = tempfile::tempdir().unwrap();
    let out = common::aisp(home.path()).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::String(stdout));
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn status_prints_json_when_piped_and_exits_zero() {
    let (code, v, _) = run(&["status"]);
    assert_eq!(code, 0);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    // The domain spelling works for short-named operations too.
    let (code, v2, _) = run(&["core", "status"]);
    assert_eq!(code, 0);
    assert_eq!(v2["version"], v["version"]);
}

#[test]
fn operation_errors_exit_one_with_the_error_object() {
    let (code, v, err) = run(&["job", "status", "job_missing"]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["kind"], "not_found");
    assert!(err.contains("hint:"), "{err}");
    let (code, v, _) = run(&["job", "list", "--limit", "0"]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["kind"], "invalid_input");
}

#[test]
fn usage_errors_exit_two() {
    assert_eq!(run(&["job", "list", "--bogus"]).0, 2);
    assert_eq!(run(&["job", "status"]).0, 2, "missing required argument");
    assert_eq!(run(&["job", "list", "--state", "sideways"]).0, 2);
    assert_eq!(run(&["nosuchdomain"]).0, 2);
    assert_eq!(run(&["job", "list", "--json", "{broken"]).0, 2);
    let (code, _, err) = run(&["system", "monitor", "--json", r#"{"async": true}"#]);
    assert_eq!(code, 2);
    assert!(err.contains("aisp serve"));
    assert_eq!(run(&["--help"]).0, 0);
}

#[test]
fn json_arguments_and_flags_combine() {
    let (code, v, _) = run(&[
        "suggest-tools",
        "--json",
        r#"{"task": "list recent jobs", "limit": 7}"#,
        "--limit",
        "1",
    ]);
    assert_eq!(code, 0);
    assert_eq!(v["suggestions"].as_array().unwrap().len(), 1);
    assert_eq!(v["suggestions"][0]["tool"], "aisp_job_list");
}

#[test]
fn tables_render_on_request() {
    let (code, v, _) = run(&["status", "--format", "table"]);
    assert_eq!(code, 0);
    let text = v.as_str().unwrap();
    assert!(text.contains("version") && text.contains(env!("CARGO_PKG_VERSION")));
    assert!(text.contains("gpu:"));
}

#[test]
fn tools_lists_every_operation_with_its_command() {
    let (code, v, _) = run(&["tools"]);
    assert_eq!(code, 0);
    assert_eq!(
        v["count"].as_u64().unwrap() as usize,
        aisp::registry::tools().len()
    );
    let rows = v["tools"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["tool"] == "aisp_job_list" && r["cli"] == "aisp job list")
    );
    assert!(
        rows.iter()
            .any(|r| r["tool"] == "aisp_status" && r["cli"] == "aisp status")
    );
}

#[test]
fn long_operations_honour_timeout_s() {
    let started = std::time::Instant::now();
    let (code, v, _) = run(&[
        "system",
        "monitor",
        "--duration-s",
        "30",
        "--timeout-s",
        "0.3",
    ]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["kind"], "timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let (code, v, _) = run(&[
        "system",
        "monitor",
        "--duration-s",
        "0.2",
        "--interval-ms",
        "50",
    ]);
    assert_eq!(code, 0);
    assert!(v["samples"].as_array().unwrap().len() >= 4);
}

#[test]
fn cli_spellings_are_consistent() {
    let train = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/train_good.sqlite");
    // ask takes --path like every profile tool; --profile still works.
    for flag in ["--path", "--profile"] {
        let (code, v, err) = run(&["ask", "why is this training slow?", flag, train]);
        assert_eq!(code, 0, "{flag}: {err}");
        assert!(
            v["citations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["arguments"]["path"] == train),
            "{flag}: {v}"
        );
    }
    // export's own choice is --kind, so the global --format still picks JSON.
    let out = tempfile::tempdir().unwrap();
    let csv = out.path().join("k.csv");
    let (code, v, err) = run(&[
        "--format",
        "json",
        "profile",
        "export",
        train,
        "--kind",
        "csv",
        "--output",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["format"], "csv", "{v}");
    assert!(csv.exists());
    // Bounds and enum choices in plain words, not <JSON>.
    let (code, _, err) = run(&["profile", "gaps", train, "--limit", "-1"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--limit takes an integer (0 or more)"),
        "{err}"
    );
    let (code, _, err) = run(&["profile", "kernels", train, "--names", "long"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("[possible values: operation, short, demangled]"),
        "{err}"
    );
    // 16 GPUs at 8 per node are 2 nodes.
    let (code, v, err) = run(&[
        "distributed",
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "16",
        "--gpus-per-node",
        "8",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["nodes"], 2, "{v}");
    // Hints name flags and commands at the command line.
    let (code, _, err) = run(&["distributed", "plan", "--model", "llama-3.1-8b"]);
    if code == 1 && err.contains("no local GPU") {
        assert!(err.contains("`--gpu`"), "{err}");
    }
}

#[test]
fn tools_lists_every_tool_in_table_mode() {
    let (code, v, _) = run(&["tools", "--format", "table"]);
    assert_eq!(code, 0);
    let text = v.as_str().unwrap();
    for tool in aisp::registry::tools() {
        assert!(
            text.contains(&aisp::registry::documents::cli_usage(tool)),
            "{} missing",
            tool.name
        );
    }
}

/// `aisp profile search ... | head -1`: the reader goes away after one line of a ~1 MB answer (past any pipe
/// buffer); aisp ends quietly (no panic on EPIPE).
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let home = tempfile::tempdir().unwrap();
    let mut child = common::aisp(home.path())
        .args(["--format", "json", "profile", "search"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/train_good.sqlite"
        ))
        .args(["*", "--limit", "5000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here: the rest of the answer meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(first.trim(), "{");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
