//! The dashboard over real HTTP: page shells and assets, the guards (Host,
//! token), the thin views (a tool's schema, profile sections, upload), and
//! `aisp_profile_events` — the timeline's data — checked against independent
//! SQL over the same export. The browser tests are `.ci/dashboard.sh`.

use crate::common;
use crate::profile_common;

use std::path::PathBuf;

use common::HttpServer;
use serde_json::{Value, json};

fn train_good() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/train_good.sqlite")
        .display()
        .to_string()
}

/// A GET as the dashboard's own pages make it (a browser says `Sec-Fetch-Site: same-origin`).
async fn get(url: String, token: Option<&str>) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::new()
        .get(url)
        .header("sec-fetch-site", "same-origin");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap())
}

async fn events(server: &HttpServer, args: Value) -> Value {
    let r = reqwest::Client::new()
        .post(server.url("/api/profile/events"))
        .json(&args)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

/// (device, stream) → GPU operations overlapping `[s, e)`, by SQL.
fn sql_gpu_counts(s: i64, e: i64) -> Vec<(i64, i64, u64)> {
    let conn = rusqlite::Connection::open_with_flags(
        train_good(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let sql = "SELECT deviceId, streamId, count(*) FROM (
        SELECT deviceId, streamId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL
        UNION ALL SELECT deviceId, streamId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY
        UNION ALL SELECT deviceId, streamId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET)
      WHERE start < ?2 AND max(end, start + 1) > ?1 GROUP BY deviceId, streamId ORDER BY 1, 2";
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([s, e], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn gpu_counts(v: &Value) -> Vec<(i64, i64, u64)> {
    v["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "gpu" && t["in_window"].as_u64().unwrap() > 0)
        .map(|t| {
            (
                t["device"].as_i64().unwrap(),
                t["stream"].as_i64().unwrap(),
                t["in_window"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_events_match_sql_and_stay_small() {
    let server = HttpServer::start(&[], &[]);
    let path = train_good();
    // Default window: the kernels' span.
    let v = events(&server, json!({"path": path, "buckets": 1000})).await;
    assert_eq!(v["start_ns"], 7_554_058_424_i64, "first kernel start");
    assert_eq!(v["end_ns"], 8_151_033_731_i64, "last kernel end");
    // The whole extent: every GPU operation once.
    let (xs, xe) = (
        v["extent_start_ns"].as_i64().unwrap(),
        v["extent_end_ns"].as_i64().unwrap(),
    );
    let all = events(
        &server,
        json!({"path": path, "start_ns": xs, "end_ns": xe, "buckets": 2000}),
    )
    .await;
    assert_eq!(gpu_counts(&all), sql_gpu_counts(xs, xe));
    // Every event is drawn once: singly or inside one cluster.
    for t in all["tracks"].as_array().unwrap() {
        let drawn: u64 = t["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["count"].as_u64().unwrap())
            .sum();
        assert_eq!(drawn, t["in_window"].as_u64().unwrap(), "{}", t["label"]);
    }
    // A narrow window (a typical step) agrees with SQL too, and kernels carry their launch.
    let (s, e) = (7_784_516_463_i64, 7_794_516_463_i64);
    let step = events(
        &server,
        json!({"path": path, "start_ns": s, "end_ns": e, "buckets": 4000}),
    )
    .await;
    assert_eq!(gpu_counts(&step), sql_gpu_counts(s, e));
    let gpu = &step["tracks"][0];
    let single = gpu["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["count"] == 1 && e.get("launch").is_some())
        .expect("a kernel drawn singly with its launch");
    let launch = &single["launch"];
    assert!(launch["t_ns"].as_i64().unwrap() < single["t_ns"].as_i64().unwrap());
    let name = step["names"][launch["name"].as_u64().unwrap() as usize]
        .as_str()
        .unwrap();
    assert!(name.contains("Launch"), "launch call name: {name}");
    // Few slices: events are clustered, the answer stays small.
    let coarse = events(
        &server,
        json!({"path": path, "start_ns": xs, "end_ns": xe, "buckets": 20}),
    )
    .await;
    for t in coarse["tracks"].as_array().unwrap() {
        let lanes = t["lanes"].as_u64().unwrap();
        assert!(
            t["events"].as_array().unwrap().len() as u64 <= lanes * 2 * 20 + lanes,
            "{} returned {} entries for 20 slices",
            t["label"],
            t["events"].as_array().unwrap().len()
        );
    }
    assert!(coarse["returned"].as_u64().unwrap() < 200);
    assert!(coarse["in_window"].as_u64().unwrap() > 13_000);

    // Bad input is an error with a hint.
    let r = reqwest::Client::new()
        .post(server.url("/api/profile/events"))
        .json(&json!({"path": path, "buckets": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_sections_and_tool_schemas_are_served() {
    let server = HttpServer::start(&[], &[]);
    for page in [
        "/",
        "/profiles",
        "/compare",
        "/benchmarks",
        "/planner",
        "/ask",
        "/tools",
        "/tools/aisp_profile_info",
        "/login",
    ] {
        let (code, headers, body) = get(server.url(page), None).await;
        assert_eq!(code, 200, "{page}");
        assert!(body.starts_with("<!doctype html>"), "{page}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{page}: {csp}");
    }
    for asset in [
        "overview.js",
        "compare.js",
        "benchmarks.js",
        "planner.js",
        "ask.js",
        "common.js",
        "timeline.js",
        "profile.js",
        "tools.js",
        "style.css",
    ] {
        let (code, _, body) = get(server.url(&format!("/assets/{asset}")), None).await;
        assert_eq!(code, 200, "{asset}");
        assert!(body.len() > 500, "{asset}");
    }
    let (code, _, _) = get(server.url("/assets/nope.js"), None).await;
    assert_eq!(code, 404);

    let (code, _, body) = get(server.url("/api/tools/aisp_profile_events"), None).await;
    assert_eq!(code, 200);
    let tool: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(tool["path"], "/api/profile/events");
    assert_eq!(tool["input_schema"]["required"], json!(["path"]));
    assert!(tool["input_schema"]["properties"]["buckets"].is_object());
    let (code, _, body) = get(server.url("/api/tools/aisp_nope"), None).await;
    assert_eq!(code, 404);
    assert!(body.contains("not_found"));

    let q = format!("?path={}", train_good());
    let (code, _, overview) =
        get(server.url(&format!("/dashboard/profile/overview{q}")), None).await;
    assert_eq!(code, 200);
    // Steady-state busy % of train_good over the steady window on the GPU timeline (the step ledger's:
    // 7,789,729,648 → 8,142,734,358; kernels' union there 31,172,796 ns, scripts/ledger_sql.py).
    assert!(overview.contains(">8.83 %<"), "{overview}");
    let (code, _, findings) =
        get(server.url(&format!("/dashboard/profile/findings{q}")), None).await;
    assert_eq!(code, 200);
    assert!(findings.contains(r#"data-rule="host_os_wait" data-rank="0""#));
    // The top finding (the sleep) points at its largest stretch with a quarter of its length around it; the
    // second (launch-bound) at the steady window (7789729648..8142734358).
    let (start, len) = (7_795_273_390_i64, 5_037_137_i64);
    assert!(findings.contains(&format!(
        r#"data-start="{}" data-end="{}""#,
        start - len / 4,
        start + len + len / 4
    )));
    assert!(findings.contains(r#"data-start="7701478471" data-end="8230985535""#));
    // The idle-gaps panel lists a limited number of rows, but never hides the largest gaps behind the
    // steady ones, and says what it left out.
    let (code, _, panel) = get(server.url(&format!("/dashboard/profile/gaps{q}")), None).await;
    assert_eq!(code, 200);
    let all = api(
        &server,
        "/api/profile/gaps",
        json!({"path": train_good(), "limit": 10000}),
    )
    .await;
    let dev = &all["devices"][0];
    let largest = dev["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["length_ns"].as_i64().unwrap())
        .max()
        .unwrap();
    let shown = format!("{:.2} ms", largest as f64 / 1e6);
    assert!(
        panel.contains(&shown),
        "the largest gap ({shown}) is listed:\n{panel}"
    );
    let total = dev["gaps_total"].as_i64().unwrap();
    if total > 15 {
        assert!(
            panel.contains("15 listed") && panel.contains("Not listed: more gaps"),
            "{panel}"
        );
    }
    let (code, _, missing) = get(
        server.url("/dashboard/profile/overview?path=/nonexistent.sqlite"),
        None,
    )
    .await;
    assert_eq!(code, 404);
    assert!(missing.contains(r#"class="error" data-kind="not_found""#));
    let (code, _, _) = get(server.url(&format!("/dashboard/profile/nope{q}")), None).await;
    assert_eq!(code, 404);
    // The cross-rank section: nothing for one export (the page keeps its sections), the set's view with the
    // rank × step heat map for a folder of exports (here one export, one rank).
    let (code, _, none) = get(server.url(&format!("/dashboard/profile/ranks{q}")), None).await;
    assert_eq!((code, none.as_str()), (200, ""));
    let set = tempfile::tempdir().unwrap();
    std::fs::copy(train_good(), set.path().join("rank_0.sqlite")).unwrap();
    let (code, _, view) = get(
        server.url(&format!(
            "/dashboard/profile/ranks?path={}",
            set.path().display()
        )),
        None,
    )
    .await;
    assert_eq!(code, 200, "{view}");
    assert!(view.contains(r#"data-set="1" data-ranks="1""#), "{view}");
    assert!(view.contains(r#"<div class="heat-map"><svg"#), "{view}");
    assert!(view.contains("GPU-projected step time per rank and step (ms)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_data_but_not_page_shells() {
    let server = HttpServer::start(&["--token", "t0k"], &[]);
    let (code, _, body) = get(server.url("/profiles"), None).await;
    assert_eq!(code, 200, "the shell holds no data and shows the login");
    assert!(!body.contains("8.83"));
    let q = format!("?path={}", train_good());
    for url in [
        "/api/tools".to_string(),
        "/api/tools/aisp_profile_info".to_string(),
        format!("/dashboard/profile/overview{q}"),
        "/dashboard/download/x.json".to_string(),
    ] {
        let (code, _, _) = get(server.url(&url), None).await;
        assert_eq!(code, 401, "{url}");
        let (code, _, _) = get(server.url(&url), Some("wrong")).await;
        assert_eq!(code, 401, "{url}");
    }
    let (code, _, body) = get(
        server.url(&format!("/dashboard/profile/overview{q}")),
        Some("t0k"),
    )
    .await;
    assert_eq!(code, 200);
    assert!(body.contains("8.83 %"));
    // Host checks apply to the shells too (DNS rebinding).
    let r = reqwest::Client::new()
        .get(server.url("/"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_capped_and_kept_under_aisp_home() {
    let server = HttpServer::start(&[], &[("AISP_UPLOAD_MAX_MB", "3")]);
    let bytes = std::fs::read(train_good()).unwrap(); // 2.3 MB, under the 3 MiB cap
    let r = reqwest::Client::new()
        .post(server.url("/dashboard/upload?name=../my run.sqlite"))
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    let stored = PathBuf::from(v["path"].as_str().unwrap());
    assert!(
        stored.starts_with(server.home.path().join("uploads")),
        "{stored:?}"
    );
    assert!(stored.to_str().unwrap().ends_with("-my_run.sqlite"));
    assert_eq!(std::fs::read(&stored).unwrap(), bytes);
    // The stored copy opens like any export.
    let r = reqwest::Client::new()
        .post(server.url("/api/profile/info"))
        .json(&json!({"path": stored}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    let mut big = bytes.clone();
    big.extend_from_slice(&bytes);
    let r = reqwest::Client::new()
        .post(server.url("/dashboard/upload?name=big.sqlite"))
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("3 MiB"));
    let r = reqwest::Client::new()
        .post(server.url("/dashboard/upload?name=notes.txt"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Nothing half-written is left behind.
    let left: Vec<_> = std::fs::read_dir(server.home.path().join("uploads"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aisp_dashboard_serves_and_prints_its_url() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let home = tempfile::tempdir().unwrap();
    let mut child = common::aisp(home.path())
        .args(["dashboard", "--no-open", "--bind", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("aisp: dashboard at ") {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("aisp dashboard printed its URL");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with('/'),
        "{url}"
    );
    let (code, _, body) = get(url, None).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 200);
    assert!(body.contains("aisp dashboard"));
}

async fn post_view(server: &HttpServer, view: &str, args: Value) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(server.url(&format!("/dashboard/view/{view}")))
        .json(&args)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn api(server: &HttpServer, path: &str, args: Value) -> Value {
    let r = reqwest::Client::new()
        .post(server.url(path))
        .json(&args)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{path}");
    r.json().await.unwrap()
}

/// The `(x, y)` of every attribute `name="..."` in `html`, in order.
fn attrs<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let key = format!("{name}=\"");
    html.match_indices(&key)
        .map(|(at, _)| {
            let rest = &html[at + key.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_view_shows_the_verdict_with_its_basis_and_deltas() {
    let server = HttpServer::start(&[], &[]);
    // The planted elementwise chain and its fix (tests/data/planted): the verdict leads, with the step change,
    // its interval and the finding's predicted vs measured step (BENCHMARKS.md, "Predicted vs measured").
    let before = profile_common::fixture("planted/elementwise_chain.sqlite");
    let after = profile_common::fixture("planted/elementwise_chain.fixed.sqlite");
    let (code, html) = post_view(
        &server,
        "compare",
        json!({"before": before, "after": after}),
    )
    .await;
    assert_eq!(code, 200, "{html}");
    let verdict_at = html.find(r#"id="verdict""#).unwrap();
    assert!(
        verdict_at < html.find(r#"id="comparability""#).unwrap()
            && verdict_at < html.find(r#"id="kernel-deltas""#).unwrap(),
        "the verdict comes first"
    );
    assert!(
        html.contains(r#"data-verdict="improved" data-basis="per_step" data-change-pct="-78.34""#),
        "{html}"
    );
    assert!(
        html.contains("step 6.130 ms → 1.327 ms: -78.34 %"),
        "{html}"
    );
    let pred = &html[html
        .find(r#"<tr data-finding="elementwise_unfused" data-applied="true""#)
        .expect("prediction row")..];
    let pred = &pred[..pred.find("</tr>").unwrap()];
    assert!(
        pred.contains("1.328 ms") && pred.contains("1.327 ms") && pred.contains("gone"),
        "{pred}"
    );
    assert!(html.contains(r#"<tr data-fact="gpu_model" data-same="yes" data-effect="none">"#));
    assert!(html.contains(r#"<tr data-finding="elementwise_unfused" data-status="gone">"#));
    let kernels =
        &html[html.find(r#"id="kernel-deltas""#).unwrap()..html.find(r#"id="steps""#).unwrap()];
    assert!(
        kernels.contains("<svg")
            && kernels.contains(r#"<tr data-kernel="vectorized_elementwise_kernel">"#),
        "{kernels}"
    );
    assert!(html.contains(r#"<tr data-basis="per_step">"#));

    // Two windows of one run (tests/data/README.md, "Cut windows"): no change per step.
    let b = profile_common::fixture("cut/train_good_steady_nvtx.sqlite");
    let a = profile_common::fixture("cut/train_good_warmup_nvtx.sqlite");
    let (code, html) = post_view(&server, "compare", json!({"before": b, "after": a})).await;
    assert_eq!(code, 200, "{html}");
    assert!(
        html.contains(r#"data-verdict="no_change" data-basis="per_step""#),
        "{html}"
    );

    // A view always renders the answer: `async` (a job ticket) is left to the tool pages.
    let (code, html) = post_view(
        &server,
        "compare",
        json!({"before": before, "after": after, "async": true, "limit": 3}),
    )
    .await;
    assert_eq!(code, 200, "{html}");
    assert!(html.contains(r#"data-verdict="improved""#));
    assert!(
        html.matches("<tr data-kernel=").count() <= 3,
        "limit reaches the tool"
    );

    // Errors keep kind, message and hint.
    let (code, html) = post_view(
        &server,
        "compare",
        json!({"before": "/nonexistent/a.sqlite", "after": after}),
    )
    .await;
    assert_eq!(code, 404);
    assert!(html.contains(r#"data-kind="not_found""#) && html.contains(r#"class="hint""#));
    let (code, html) = post_view(&server, "compare", json!({"before": before})).await;
    assert_eq!(code, 400, "{html}");
    let (code, _) = post_view(&server, "nope", json!({})).await;
    assert_eq!(code, 404);
    let r = reqwest::Client::new()
        .post(server.url("/dashboard/view/compare"))
        .body("[1]")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benchmarks_view_shows_imported_history() {
    let server = HttpServer::start(&[], &[]);
    let (code, html) = post_view(&server, "benchmarks", json!({})).await;
    assert_eq!(code, 200);
    assert!(html.contains(r#"id="no-history""#), "{html}");
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/benchmark");
    let imported = api(&server, "/api/benchmark/import", json!({"path": examples})).await;
    assert_eq!(imported["rows_added"], 47);
    let (code, html) = post_view(&server, "benchmarks", json!({})).await;
    assert_eq!(code, 200);
    // examples/benchmark/h100/run.json: cuBLASLt FP8 GEMM 1345.54 TFLOP/s, 248.88x the naive kernel.
    let row = html
        .find(r#"<tr data-target="gemm" data-variant="cublaslt_fp8" data-rank="1">"#)
        .map(|at| &html[at..at + html[at..].find("</tr>").unwrap()])
        .expect("gemm leaderboard row 1");
    assert!(
        row.contains("1345.5 TFLOP/s") && row.contains("248.88×"),
        "{row}"
    );
    // The roofline: the measured memory roof and one point per GEMM variant (9 in the run).
    let roof = &html[html.find(r#"id="roofline""#).unwrap()..html.find(r#"id="pareto""#).unwrap()];
    assert!(roof.contains(r#"data-memory-gb-per-s="3065.5""#));
    assert_eq!(roof.matches("<circle").count(), 9, "{roof}");
    assert!(roof.contains("cublaslt_fp8: 1346 TFLOP/s at 2048 FLOP/B"));
    for id in ["pareto", "power", "history"] {
        let at = html.find(&format!(r#"id="{id}""#)).unwrap();
        assert!(html[at..].contains("<svg") || id == "history", "{id}");
    }
    // The history answer carries the intensity (2·4096³ / ((2·4096²)·1 B + 4096²·2 B) = 2048 for FP8 in, BF16 out).
    let hist = api(
        &server,
        "/api/benchmark/history",
        json!({"target": "gemm", "variant": "cublaslt_fp8"}),
    )
    .await;
    assert_eq!(hist["rows"][0]["intensity_flop_per_byte"], 2048.0);
    // Filters reach the analyses.
    let (_, html) = post_view(&server, "benchmarks", json!({"target": "reduction"})).await;
    assert!(!html.contains(r#"data-target="gemm""#));
    assert!(html.contains(r#"data-target="reduction""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planner_views_show_memory_per_gpu_and_rejections() {
    let server = HttpServer::start(&[], &[]);
    let args = json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 64, "nodes": 8, "seq_len": 4096});
    let (code, html) = post_view(&server, "plan", args.clone()).await;
    assert_eq!(code, 200, "{html}");
    let plan = api(&server, "/api/distributed/plan", args).await;
    let cands = plan["candidates"].as_array().unwrap();
    let shown = attrs(&html, "data-rank");
    assert_eq!(shown.len(), cands.len());
    let memory: Vec<String> = html
        .match_indices(r#"data-col="memory-per-gpu">"#)
        .map(|(at, k)| {
            let rest = &html[at + k.len()..];
            rest[..rest.find('<').unwrap()].to_string()
        })
        .collect();
    for (c, m) in cands.iter().zip(&memory) {
        assert_eq!(
            m,
            &format!(
                "{:.2} GB of {:.1} GB",
                c["memory"]["total_gb"].as_f64().unwrap(),
                c["memory"]["usable_gb"].as_f64().unwrap()
            )
        );
    }
    // Memory breakdown as stacked bars: one row label per layout, the usable line.
    assert!(html.contains("Memory per GPU of each ranked layout"));
    assert!(html.contains(&format!(
        "{:.1} GB",
        cands[0]["memory"]["total_gb"].as_f64().unwrap()
    )));
    for (kind, n) in plan["rejected_by_kind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k[0].as_str().unwrap(), k[1].as_i64().unwrap()))
    {
        assert!(
            html.contains(&format!("<li><b>{kind}</b>: {n} layouts</li>")),
            "{kind}"
        );
    }
    let est_args = json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_tokens": 1024, "output_tokens": 256});
    let (code, html) = post_view(&server, "estimate", est_args.clone()).await;
    assert_eq!(code, 200, "{html}");
    let est = api(&server, "/api/inference/estimate", est_args).await;
    assert!(html.contains(&format!(
        r#"data-metric="weights-per-gpu">{:.2} GB<"#,
        est["weights_per_gpu_gb"].as_f64().unwrap()
    )));
    // The compute-bound tile agrees with the sweep under it: the first compute-bound batch of the
    // sweep, or "not up to <largest batch swept>" when every swept batch is memory-bound.
    let sweep = est["batch_sweep"].as_array().unwrap();
    let tile = html
        .split(r#"data-metric="compute-bound-batch">"#)
        .nth(1)
        .unwrap()
        .split("</div>")
        .next()
        .unwrap()
        .to_string();
    match sweep.iter().find(|b| b["bound"] == "compute") {
        Some(b) => assert!(
            tile.starts_with(&format!("{} ", b["batch"])),
            "{tile} vs the sweep's first compute-bound batch {}",
            b["batch"]
        ),
        None => {
            let max = sweep
                .iter()
                .map(|b| b["batch"].as_i64().unwrap())
                .max()
                .unwrap();
            assert!(
                tile.starts_with(&format!("not up to {max}: memory-bound")),
                "{tile}"
            );
        }
    }
    // A long context: KV reads keep every swept batch memory-bound although the weights-only
    // crossover is ~230; the tile must not name the crossover as the turning point.
    let long = json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_tokens": 8192, "output_tokens": 1024});
    let (_, html) = post_view(&server, "estimate", long.clone()).await;
    let est = api(&server, "/api/inference/estimate", long).await;
    if est["first_compute_bound_batch"].is_null() {
        assert!(html.contains("memory-bound <span"), "{html}");
        assert!(!html.contains("decode turns compute-bound at batch"));
    }
    let (code, html) = post_view(&server, "plan", json!({"model": "nope"})).await;
    assert_eq!(code, 400);
    assert!(html.contains(r#"data-kind="invalid_input""#) && html.contains("class=\"hint\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_view_lists_next_steps_and_stack_problems_behind_the_token() {
    let server = HttpServer::start(&["--token", "t0k"], &[]);
    let (code, _) = post_view(&server, "overview", json!({})).await;
    assert_eq!(code, 401, "views need the token");
    let r = reqwest::Client::new()
        .post(server.url("/dashboard/view/overview"))
        .header("authorization", "Bearer t0k")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let html = r.text().await.unwrap();
    let triage: Value = reqwest::Client::new()
        .post(server.url("/api/triage"))
        .header("authorization", "Bearer t0k")
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let steps: Vec<&str> = triage["next_steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tool"].as_str().unwrap())
        .collect();
    assert!(!steps.is_empty());
    assert_eq!(attrs(&html, "data-tool"), steps, "{html}");
    assert!(html.contains(r#"id="stack""#) && html.contains("data-overall="));
}

async fn get_with(
    server: &HttpServer,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(server.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_reads_and_off_site_redirects_are_refused() {
    let server = HttpServer::start(&[], &[]);
    let origin = format!("http://{}", server.addr);
    let q = format!("/dashboard/profile/overview?path={}", train_good());
    // A page elsewhere making the browser fetch a section (no token configured).
    for headers in [
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
        vec![("referer", "http://evil.example/page")],
        vec![],
    ] {
        let (code, _, body) = get_with(&server, &q, &headers).await;
        assert_eq!(code, 403, "{headers:?}: {body:.200}");
        assert!(!body.contains("8.83"), "{headers:?}");
    }
    // The dashboard's own requests.
    let own_referer = format!("{origin}/profiles");
    for headers in [
        vec![("sec-fetch-site", "same-origin")],
        vec![("referer", own_referer.as_str())],
    ] {
        let (code, _, body) = get_with(&server, &q, &headers).await;
        assert_eq!(code, 200, "{headers:?}: {body:.300}");
        assert!(body.contains("8.83 %"));
    }
    // `next` after sign-in is a local path only.
    for next in [
        "/%5Cevil.example",
        "//evil.example",
        "https://evil.example",
        "/\\evil.example",
        "/%2F%2Fevil.example",
        "%2F%5Cevil",
    ] {
        let (code, headers, _) = get_with(&server, &format!("/login?next={next}"), &[]).await;
        assert_eq!(code, 303, "{next}");
        assert_eq!(headers["location"], "/login", "{next}");
    }
    let (code, _, body) = get_with(&server, "/login?next=/profiles%3Fpath%3Dx", &[]).await;
    assert_eq!(code, 200);
    assert!(body.starts_with("<!doctype html>"));
    let common_js = get_with(&server, "/assets/common.js", &[]).await.2;
    assert!(
        common_js.contains("localNext"),
        "the page checks `next` too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_uploads_keep_their_own_bytes_and_old_ones_make_room() {
    let server = HttpServer::start(&[], &[("AISP_UPLOADS_TOTAL_MIB", "6")]);
    let bytes = std::fs::read(train_good()).unwrap(); // 2.3 MB
    // Same name, same moment: each upload keeps its own content.
    let calls: Vec<_> = (0..8u8)
        .map(|i| {
            let url = server.url("/dashboard/upload?name=run.sqlite");
            let mut body = bytes.clone();
            body.extend_from_slice(&[i; 64]);
            tokio::spawn(async move {
                let r = reqwest::Client::new()
                    .post(url)
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                let code = r.status().as_u16();
                let v: Value = r.json().await.unwrap();
                (code, v, body)
            })
        })
        .collect();
    let mut paths = std::collections::BTreeSet::new();
    for c in calls {
        let (code, v, body) = c.await.unwrap();
        assert_eq!(code, 200, "{v}");
        let p = v["path"].as_str().unwrap().to_string();
        if let Ok(kept) = std::fs::read(&p) {
            assert_eq!(kept, body, "{p} holds another upload's bytes");
        }
        paths.insert(p);
    }
    assert_eq!(paths.len(), 8, "each upload has its own file");
    // The quota (6 MiB) keeps the newest two: older ones were removed to make room.
    let dir = server.home.path().join("uploads");
    let total: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(total <= 6 << 20, "{total} bytes kept");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.len() <= 2 && !left.is_empty(), "{left:?}");
    // A name too long for a file system: a clear 400. The name is refused before the body is read, so the body is
    // small: a large one may still be on its way when the answer closes the connection (a broken pipe, in release).
    let long = format!("{}.sqlite", "n".repeat(300));
    let r = reqwest::Client::new()
        .post(server.url(&format!("/dashboard/upload?name={long}")))
        .body(b"SQLite format 3\0".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["kind"], "invalid_input", "{v}");
}
