//! The host measurements through the real binary: disk throughput on a real
//! directory (bounded in time, temp file gone even when killed), TCP loopback,
//! the two-process peer path (`aisp hw network-listen` + `aisp hw network`),
//! and `aisp gpu clocks` saying what it checked where there is no GPU.

use crate::common;

use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

fn run(home: &std::path::Path, args: &[&str]) -> (i32, Value) {
    let out = common::aisp(home)
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

/// A scratch folder on the repository's own disk (not tmpfs), removed afterwards.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn disk_measures_a_real_directory_and_leaves_it_empty() {
    let home = tempfile::tempdir().unwrap();
    let dir = scratch();
    let d = dir.path().to_str().unwrap();
    let (rc, v) = run(
        home.path(),
        &["hw", "disk", d, "--file-mib", "16", "--queue-depth", "2"],
    );
    assert_eq!(rc, 0, "{v}");
    assert!(["o_direct", "fadvise_dontneed"].contains(&v["cache_bypass"].as_str().unwrap()));
    let results = v["results"].as_array().unwrap();
    let tests: Vec<&str> = results
        .iter()
        .map(|r| r["test"].as_str().unwrap())
        .collect();
    assert_eq!(tests, ["seq_write", "seq_read", "rand_read", "rand_write"]);
    for r in results {
        assert_eq!(r["bytes"], 16u64 << 20, "{r}");
        assert_eq!(r["queue_depth"], 2);
        // MB/s is bytes over seconds, as printed.
        let mbps = r["bytes"].as_f64().unwrap() / r["seconds"].as_f64().unwrap() / 1e6;
        assert!(
            (r["mb_per_s"].as_f64().unwrap() - mbps).abs() / mbps < 0.02,
            "{r}"
        );
    }
    assert_eq!(results[2]["block_bytes"], 4096);
    assert!(v["gds"]["mode"].is_string() && v["gds"]["reasons"].is_array());
    assert!(v["filesystem"].is_string());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn disk_stops_at_its_time_limit_and_when_killed_leaves_no_file() {
    let home = tempfile::tempdir().unwrap();
    let dir = scratch();
    let d = dir.path().to_str().unwrap();
    // 4 s call: 2 s for the phases, half a second each; 4 GiB cannot be written in that.
    let t = Instant::now();
    let (rc, v) = run(
        home.path(),
        &["hw", "disk", d, "--file-mib", "4096", "--timeout-s", "4"],
    );
    assert!(t.elapsed() < Duration::from_secs(15));
    if v["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("not enough free space"))
    {
        eprintln!("skipped: {v}");
        return;
    }
    if rc == 0 {
        assert_eq!(v["results"][0]["time_limited"], true, "{v}");
        assert!(v["results"][0]["bytes"].as_u64().unwrap() < 4096 << 20);
        assert!(v["notes"].to_string().contains("sequential write covered"));
    } else {
        assert_eq!(v["error"]["kind"], "timeout", "{v}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Killed mid-write: the file was unlinked when it was created.
    let mut child = common::aisp(home.path())
        .args(["hw", "disk", d, "--file-mib", "4096", "--format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn network_loopback_measures_throughput_and_latency() {
    let home = tempfile::tempdir().unwrap();
    let (rc, v) = run(
        home.path(),
        &["hw", "network", "--seconds", "1", "--streams", "2"],
    );
    assert_eq!(rc, 0, "{v}");
    let tcp = &v["tcp"];
    assert_eq!(tcp["target"], "loopback");
    assert_eq!(tcp["throughput"]["streams"], 2);
    let bytes = tcp["throughput"]["bytes"].as_f64().unwrap();
    let secs = tcp["throughput"]["seconds"].as_f64().unwrap();
    assert!(bytes > 0.0 && secs >= 1.0, "{tcp}");
    let gbit = bytes * 8.0 / secs / 1e9;
    assert!((tcp["throughput"]["gbit_per_s"].as_f64().unwrap() - gbit).abs() < 0.01 * gbit + 0.001);
    assert_eq!(tcp["latency"]["round_trips"], 2000);
    let (p50, p99) = (
        tcp["latency"]["p50_us"].as_f64().unwrap(),
        tcp["latency"]["p99_us"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p50 <= p99);
    assert!(tcp["link_gbit_per_s"].is_null());
    assert!(v["notes"].to_string().contains("loopback has no link rate"));
}

#[test]
fn network_peer_in_another_process_counts_what_the_client_sent() {
    let home = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let listener = common::aisp(home.path())
        .args([
            "hw",
            "network-listen",
            "--bind",
            &addr,
            "--duration-s",
            "30",
            "--max-sessions",
            "4",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it accepts (this probe is one session, turned away without a header).
    let t = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "listener never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (rc, v) = run(
        home.path(),
        &["hw", "network", &addr, "--seconds", "1", "--streams", "2"],
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["tcp"]["target"], addr);
    assert_eq!(v["tcp"]["interface"], "lo");
    let out = listener.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let served: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(served["ended_by"], "session_limit");
    let sessions = served["sessions"].as_array().unwrap();
    let sunk: u64 = sessions
        .iter()
        .filter(|s| s["mode"] == "sink")
        .map(|s| s["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sunk, v["tcp"]["throughput"]["bytes"].as_u64().unwrap());
    let echoed: u64 = sessions
        .iter()
        .filter(|s| s["mode"] == "echo")
        .map(|s| s["bytes"].as_u64().unwrap())
        .sum();
    // 2000 timed round trips plus 10 warm-up ones, 64 bytes each.
    assert_eq!(echoed, 2010 * 64);
    assert_eq!(
        sessions.iter().filter(|s| s["mode"] == "refused").count(),
        1
    );
}

#[test]
fn network_errors_name_the_missing_peer_and_the_policy() {
    let home = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (rc, v) = run(
        home.path(),
        &[
            "hw",
            "network",
            &format!("127.0.0.1:{port}"),
            "--seconds",
            "1",
        ],
    );
    assert_eq!(rc, 1);
    assert_eq!(v["error"]["kind"], "not_found", "{v}");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("network-listen")
    );
    let (rc, v) = run(
        home.path(),
        &[
            "hw",
            "network-listen",
            "--bind",
            "0.0.0.0:0",
            "--duration-s",
            "1",
        ],
    );
    assert_eq!(rc, 1);
    assert_eq!(v["error"]["kind"], "exec_not_allowed", "{v}");
}

#[test]
fn gpu_clocks_without_a_gpu_says_not_present_and_what_was_checked() {
    let home = tempfile::tempdir().unwrap();
    let (rc, v) = run(home.path(), &["gpu", "clocks", "--load-s", "0"]);
    assert_eq!(rc, 0, "{v}");
    if v["present"] == false {
        let checked = v["checked"].as_array().unwrap();
        assert_eq!(checked.len(), 3);
        assert!(checked[0].as_str().unwrap().starts_with("NVML: "));
        assert!(checked[1].as_str().unwrap().contains("PCI bus"));
        assert!(v["gpus"].as_array().unwrap().is_empty());
        assert!(v["stability"].is_null());
    } else {
        // On a GPU host: every GPU read, nothing locked.
        assert!(!v["gpus"].as_array().unwrap().is_empty());
        assert!(v["lock"].is_null());
    }
}
