//! `aisp_hf_model` and `model: "hf:org/name"` in the planners, through the
//! real binary, against a local mock of the Hugging Face Hub that follows its
//! documented API (`GET /api/models?search=`, `GET /{repo}/resolve/{rev}/config.json`
//! with `Authorization: Bearer`, the `X-Repo-Commit` header), a local HF cache,
//! a folder, and an unreachable endpoint. The live Hub is never contacted.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

const TOKEN: &str = "hf_testtoken";
const COMMIT: &str = "d04e592bb4f6aa9cfee91e2e20afa771667e1d4b";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hf")
        .join(name)
}

/// A Hub that knows two models; meta-llama is gated (needs the token).
struct MockHub {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl MockHub {
    fn start() -> MockHub {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in l.incoming() {
                let Ok(mut s) = stream else { continue };
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    continue;
                }
                let mut auth = None;
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).is_err() || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':')
                        && k.eq_ignore_ascii_case("authorization")
                    {
                        auth = Some(v.trim().to_string());
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock()
                    .unwrap()
                    .push(format!("{path} auth={}", auth.is_some()));
                let authed = auth.as_deref() == Some(&format!("Bearer {TOKEN}"));
                let (status, body, commit) = if path.starts_with("/api/models?") {
                    let body = serde_json::json!([
                        {"_id": "1", "id": "meta-llama/Llama-3.1-8B", "modelId": "meta-llama/Llama-3.1-8B",
                         "downloads": 1234567, "likes": 1500, "pipeline_tag": "text-generation",
                         "library_name": "transformers", "gated": "manual", "createdAt": "2024-07-14T00:00:00.000Z"},
                        {"_id": "2", "id": "mistralai/Mixtral-8x7B-v0.1", "downloads": 234567, "likes": 4000,
                         "pipeline_tag": "text-generation", "gated": false}
                    ]);
                    (200, body.to_string(), None)
                } else if path == "/meta-llama/Llama-3.1-8B/resolve/main/config.json" {
                    if authed {
                        (
                            200,
                            std::fs::read_to_string(data("Llama-3.1-8B.config.json")).unwrap(),
                            Some(COMMIT),
                        )
                    } else {
                        (401, "{\"error\":\"Access to model meta-llama/Llama-3.1-8B is restricted.\"}".into(), None)
                    }
                } else if path == "/mistralai/Mixtral-8x7B-v0.1/resolve/main/config.json" {
                    (
                        200,
                        std::fs::read_to_string(data("Mixtral-8x7B-v0.1.config.json")).unwrap(),
                        Some(COMMIT),
                    )
                } else {
                    (404, "{\"error\":\"Repository not found\"}".into(), None)
                };
                let reason = match status {
                    200 => "OK",
                    401 => "Unauthorized",
                    _ => "Not Found",
                };
                let extra = commit
                    .map(|c| format!("X-Repo-Commit: {c}\r\n"))
                    .unwrap_or_default();
                let _ = write!(
                    s,
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        MockHub { url, requests }
    }
}

fn run(home: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, Value) {
    let mut cmd = common::aisp(home);
    for k in [
        "HF_ENDPOINT",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_OFFLINE",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_TOKEN_PATH",
    ] {
        cmd.env_remove(k);
    }
    // A private HF_HOME unless the test gives one: no developer cache or token leaks in.
    cmd.env("HF_HOME", home.join("hf"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).args(["--format", "json"]).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn search_reads_the_hub_api() {
    let hub = MockHub::start();
    let home = tempfile::tempdir().unwrap();
    let (rc, v) = run(
        home.path(),
        &[("HF_ENDPOINT", &hub.url)],
        &["hf", "model", "--search", "llama 3.1", "--limit", "5"],
    );
    assert_eq!(rc, 0, "{v}");
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["id"], "meta-llama/Llama-3.1-8B");
    assert_eq!(r[0]["downloads"], 1234567);
    assert_eq!(r[0]["gated"], true);
    assert_eq!(r[1]["gated"], false);
    assert_eq!(r[0]["last_modified"], "2024-07-14T00:00:00.000Z");
    let reqs = hub.requests.lock().unwrap().clone();
    assert_eq!(
        reqs,
        vec!["/api/models?search=llama%203.1&limit=5&sort=downloads&direction=-1 auth=false"]
    );
}

#[test]
fn config_from_the_hub_needs_the_token_for_gated_models() {
    let hub = MockHub::start();
    let home = tempfile::tempdir().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_TOKEN", TOKEN)];
    let (rc, v) = run(
        home.path(),
        &env,
        &["hf", "model", "meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(rc, 0, "{v}");
    let m = &v["model"];
    assert_eq!(m["planner_model"], "hf:meta-llama/Llama-3.1-8B");
    assert_eq!(m["source"], "hub");
    assert_eq!(m["revision"], COMMIT);
    assert_eq!(
        m["location"],
        format!(
            "{}/meta-llama/Llama-3.1-8B/resolve/main/config.json",
            hub.url
        )
    );
    assert_eq!(m["summary"]["total_params_b"], 8.03);
    assert_eq!(m["summary"]["architecture"]["kv_heads"], 8);
    assert_eq!(m["config"]["rope_theta"], 500000.0);
    // Without the token: the Hub's 401 becomes an error that says what to set.
    let (rc, v) = run(
        home.path(),
        &[("HF_ENDPOINT", &hub.url)],
        &["hf", "model", "meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(rc, 1);
    assert_eq!(v["error"]["kind"], "invalid_input", "{v}");
    assert!(v["error"]["hint"].as_str().unwrap().contains("HF_TOKEN"));
    // A token file under HF_HOME works like HF_TOKEN.
    std::fs::create_dir_all(home.path().join("hf")).unwrap();
    std::fs::write(home.path().join("hf/token"), format!("{TOKEN}\n")).unwrap();
    let (rc, v) = run(
        home.path(),
        &[("HF_ENDPOINT", &hub.url)],
        &["hf", "model", "hf:meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(rc, 0, "{v}");
    // Unknown repos are not_found.
    let (rc, v) = run(
        home.path(),
        &[("HF_ENDPOINT", &hub.url)],
        &["hf", "model", "nobody/nothing"],
    );
    assert_eq!(rc, 1);
    assert_eq!(v["error"]["kind"], "not_found", "{v}");
    let reqs = hub.requests.lock().unwrap().clone();
    assert_eq!(
        reqs[0],
        "/meta-llama/Llama-3.1-8B/resolve/main/config.json auth=true"
    );
    assert_eq!(
        reqs[1],
        "/meta-llama/Llama-3.1-8B/resolve/main/config.json auth=false"
    );
}

/// Every planner that takes `model` gives the same figures for `hf:meta-llama/Llama-3.1-8B`
/// (read from the Hub) as for the catalog's `llama-3.1-8b` (same published shape).
#[test]
fn planners_take_hf_models_and_match_the_catalog() {
    let hub = MockHub::start();
    let home = tempfile::tempdir().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_TOKEN", TOKEN)];
    let calls: &[&[&str]] = &[
        &["inference", "kv-cache", "--seq-len", "8192", "--batch", "4"],
        &["inference", "estimate", "--gpu", "h100-sxm"],
        &["inference", "vllm", "--gpu", "h100-sxm"],
        &["distributed", "plan", "--gpus", "8", "--gpu", "h100-sxm"],
        &["distributed", "fsdp", "--gpus", "8", "--gpu", "h100-sxm"],
        &["optimize", "recommend", "--gpu", "h100-sxm"],
    ];
    for call in calls {
        let mut with_hf = call.to_vec();
        with_hf.extend(["--model", "hf:meta-llama/Llama-3.1-8B"]);
        let (rc, a) = run(home.path(), &env, &with_hf);
        assert_eq!(rc, 0, "{call:?}: {a}");
        let mut with_catalog = call.to_vec();
        with_catalog.extend(["--model", "llama-3.1-8b"]);
        let (rc, b) = run(home.path(), &env, &with_catalog);
        assert_eq!(rc, 0, "{call:?}: {b}");
        let text = a.to_string();
        assert!(
            text.contains("meta-llama/Llama-3.1-8B"),
            "{call:?} does not name the model: {text}"
        );
        // Same numbers everywhere (strings name the model and its source differently).
        let (na, nb) = (numbers(&a), numbers(&b));
        assert!(na.len() > 5, "{call:?}");
        assert_eq!(na, nb, "{call:?}: figures differ");
    }
    // vLLM's command names the same repo.
    let (_, v) = run(
        home.path(),
        &env,
        &[
            "inference",
            "vllm",
            "--gpu",
            "h100-sxm",
            "--model",
            "hf:meta-llama/Llama-3.1-8B",
        ],
    );
    assert!(
        v.to_string().contains("vllm serve meta-llama/Llama-3.1-8B"),
        "{v}"
    );
}

/// Every number in a JSON value, in document order.
fn numbers(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Number(n) => out.push(n.as_f64().unwrap_or(f64::NAN)),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(v, &mut out);
    out
}

#[test]
fn the_local_cache_and_folders_work_offline() {
    let home = tempfile::tempdir().unwrap();
    let hf_home = home.path().join("hfhome");
    let base = hf_home.join("hub/models--mistralai--Mixtral-8x7B-v0.1");
    let snap = base.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(base.join("refs")).unwrap();
    std::fs::write(base.join("refs/main"), COMMIT).unwrap();
    std::fs::copy(
        data("Mixtral-8x7B-v0.1.config.json"),
        snap.join("config.json"),
    )
    .unwrap();
    let env = [
        ("HF_HOME", hf_home.to_str().unwrap()),
        ("HF_HUB_OFFLINE", "1"),
    ];
    let (rc, v) = run(
        home.path(),
        &env,
        &["hf", "model", "mistralai/Mixtral-8x7B-v0.1"],
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["model"]["source"], "cache");
    assert_eq!(v["model"]["revision"], COMMIT);
    assert_eq!(v["model"]["summary"]["architecture"]["experts"], 8);
    // The planner reads the same cache; MoE active parameters come from the config.
    let (rc, v) = run(
        home.path(),
        &env,
        &[
            "inference",
            "kv-cache",
            "--model",
            "hf:mistralai/Mixtral-8x7B-v0.1",
        ],
    );
    assert_eq!(rc, 0, "{v}");
    let (_, c) = run(
        home.path(),
        &env,
        &["inference", "kv-cache", "--model", "mixtral-8x7b"],
    );
    assert_eq!(v["total_bytes"], c["total_bytes"]);
    assert_eq!(v["model"]["active_params_b"], c["model"]["active_params_b"]);
    // Offline and not cached: said so, with the cache path.
    let (rc, v) = run(
        home.path(),
        &env,
        &["hf", "model", "meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(rc, 1);
    assert_eq!(v["error"]["kind"], "unsupported");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("offline: HF_HUB_OFFLINE is set") && msg.contains("hfhome/hub"),
        "{msg}"
    );
    // A folder holding config.json.
    let folder = home.path().join("my-model");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(data("Llama-3.1-8B.config.json"), folder.join("config.json")).unwrap();
    let spec = format!("hf:{}", folder.display());
    let (rc, v) = run(
        home.path(),
        &env,
        &["inference", "kv-cache", "--model", &spec],
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["model"]["total_params_b"], 8.03);
    assert!(
        v["model"]["source"]
            .as_str()
            .unwrap()
            .contains("config.json from the folder")
    );
}

#[test]
fn an_unreachable_hub_is_reported_as_offline() {
    let home = tempfile::tempdir().unwrap();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let env = [("HF_ENDPOINT", format!("http://127.0.0.1:{port}"))];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for args in [
        &["hf", "model", "meta-llama/Llama-3.1-8B"][..],
        &["hf", "model", "--search", "llama"][..],
        &[
            "inference",
            "kv-cache",
            "--model",
            "hf:meta-llama/Llama-3.1-8B",
        ][..],
    ] {
        let (rc, v) = run(home.path(), &env, args);
        assert_eq!(rc, 1, "{args:?}");
        assert_eq!(v["error"]["kind"], "unsupported", "{args:?}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.starts_with("offline: the Hugging Face Hub at http://127.0.0.1:"),
            "{msg}"
        );
        assert!(v["error"]["hint"].as_str().unwrap().contains("cache"));
    }
}
