//! The tool-listing budgets, measured over real MCP transports the way the
//! issue counts them (Python's default `json.dumps`, ASCII-escaped):
//! - the default `tools/list`: at most 20,000 characters of names,
//!   descriptions and input schemas;
//! - `--tools core`: at most 12,000;
//! - every tool's whole definition (output schema included): at most 8,192;
//! - every operation reachable: a client that follows
//!   `notifications/tools/list_changed` after `aisp_list_domains` with
//!   `enable` sees every tool listed, and unlisted tools answer `tools/call`.
//!
//! Generic over the registry: a tool added later is held to the same numbers.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aisp::registry::schema::python_json_len;
use aisp::registry::{CORE_LISTING_BUDGET, DEFAULT_LISTING_BUDGET, TOOL_DEFINITION_BUDGET};
use aisp_profile::rules::printed_numbers;
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

/// `max_chars` that holds any answer of the fixtures whole.
const WHOLE: usize = 10_000_000;

/// Counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Client {
    list_changed: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }
}

/// A tool's structured answer (the call must succeed).
async fn structured(
    client: &RunningService<RoleClient, Client>,
    tool: &'static str,
    args: Value,
) -> Value {
    let r = client
        .call_tool(
            CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{tool} {r:?}");
    r.structured_content.unwrap()
}

async fn stdio(args: &[&str], modern: bool) -> (RunningService<RoleClient, Client>, Client) {
    let home = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("aisp-budgets-{}", std::process::id()));
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let cmd = tokio::process::Command::new(common::aisp_bin()).configure(|c| {
        c.arg("serve").args(&args);
        common::isolate_tokio(c, &home);
    });
    let transport = TokioChildProcess::new(cmd).expect("spawn aisp serve");
    let handler = Client::default();
    let client = if modern {
        handler
            .clone()
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .expect("discover")
    } else {
        handler.clone().serve(transport).await.expect("initialize")
    };
    (client, handler)
}

/// The tool as it came over the wire, as JSON.
fn wire(tool: &Tool) -> Value {
    serde_json::to_value(tool).unwrap()
}

/// `len(json.dumps({"name", "description", "input_schema"}))`.
fn listed_len(tool: &Value) -> usize {
    let mut m = Map::new();
    m.insert("name".into(), tool["name"].clone());
    m.insert("description".into(), tool["description"].clone());
    m.insert("input_schema".into(), tool["inputSchema"].clone());
    python_json_len(&Value::Object(m))
}

fn listing_len(tools: &[Tool]) -> usize {
    tools.iter().map(|t| listed_len(&wire(t))).sum()
}

/// The default listing as the agent-eval harness prints and counts it (`json.dumps(indent=1)`: one key or item a
/// line). The budgets count without that whitespace (14 % more on the default listing): a client hands a model the
/// schemas as data, not pretty-printed. Printed beside the budget's count.
fn harness_len(tools: &[Tool]) -> usize {
    let listed: Vec<Value> = tools
        .iter()
        .map(wire)
        .map(|t| json!({"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]}))
        .collect();
    aisp::answer_cap::printed_len(&Value::Array(listed))
}

fn check_definitions(tools: &[Tool]) {
    let mut over = Vec::new();
    for t in tools {
        let whole = python_json_len(&wire(t));
        if whole > TOOL_DEFINITION_BUDGET {
            over.push(format!("{} {whole}", t.name));
        }
        assert!(
            t.output_schema.is_some(),
            "{} keeps its output schema",
            t.name
        );
    }
    assert!(
        over.is_empty(),
        "tool definitions over {TOOL_DEFINITION_BUDGET} characters: {over:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_fit_their_budgets_and_every_tool_fits_its_own() {
    let all_ops = aisp::registry::tools().len();

    let (client, _) = stdio(&[], false).await;
    let default = client.list_all_tools().await.unwrap();
    let default_len = listing_len(&default);
    assert!(
        default_len <= DEFAULT_LISTING_BUDGET,
        "default listing is {default_len} characters (budget {DEFAULT_LISTING_BUDGET})"
    );
    assert!(default.len() < all_ops);
    let names: Vec<&str> = default.iter().map(|t| t.name.as_ref()).collect();
    for needed in ["aisp_list_domains", "aisp_suggest_tools", "aisp_triage"] {
        assert!(names.contains(&needed), "the default listing has {needed}");
    }
    client.cancel().await.unwrap();

    let (client, _) = stdio(&["--tools", "core"], false).await;
    let core = client.list_all_tools().await.unwrap();
    let core_len = listing_len(&core);
    assert!(
        core_len <= CORE_LISTING_BUDGET,
        "core listing is {core_len} characters (budget {CORE_LISTING_BUDGET})"
    );
    client.cancel().await.unwrap();

    let (client, _) = stdio(&["--tools", "all"], false).await;
    let all = client.list_all_tools().await.unwrap();
    assert_eq!(all.len(), all_ops);
    check_definitions(&all);
    // The listed size of each tool as the registry computes it is what went over the wire.
    for t in &all {
        let def = aisp::registry::find(&t.name).unwrap();
        assert_eq!(def.listed_len(), listed_len(&wire(t)), "{}", t.name);
    }
    client.cancel().await.unwrap();
    eprintln!(
        "listing sizes: default {default_len} ({} tools; {} as the agent-eval harness prints it), core {core_len} ({} tools), all {} ({} tools)",
        default.len(),
        harness_len(&default),
        core.len(),
        listing_len(&all),
        all.len()
    );
}

/// Enable every domain and wait for the list to grow, the way a client that
/// follows list_changed does; then every operation is listed.
async fn enable_everything_and_relist(
    client: &RunningService<RoleClient, Client>,
    handler: &Client,
) -> Vec<Tool> {
    let before = client.list_all_tools().await.unwrap();
    let domains: Vec<&str> = aisp::registry::domain_names();
    let r = client
        .call_tool(
            CallToolRequestParams::new("aisp_list_domains")
                .with_arguments(json!({"enable": domains}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let got = common::eventually(Duration::from_secs(5), || async {
        (handler.list_changed.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    assert!(got.is_some(), "notifications/tools/list_changed arrived");
    let after = client.list_all_tools().await.unwrap();
    assert!(after.len() > before.len());
    after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_is_reachable_over_stdio_by_enabling_its_domain() {
    for modern in [false, true] {
        let (client, handler) = stdio(&[], modern).await;
        // An unlisted tool answers tools/call directly.
        let default = client.list_all_tools().await.unwrap();
        let hidden = aisp::registry::tools()
            .iter()
            .find(|t| !default.iter().any(|d| d.name == t.name) && t.name == "aisp_system_env")
            .expect("aisp_system_env is not in the default listing");
        let r = client
            .call_tool(CallToolRequestParams::new(hidden.name.clone()))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false), "{r:?}");

        let after = enable_everything_and_relist(&client, &handler).await;
        let mut listed: Vec<String> = after.iter().map(|t| t.name.to_string()).collect();
        let mut expected: Vec<String> = aisp::registry::tools()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        listed.sort();
        expected.sort();
        assert_eq!(
            listed, expected,
            "every operation is listed (modern: {modern})"
        );
        check_definitions(&after);

        // Enabling again changes nothing and sends nothing more.
        let count = handler.list_changed.load(Ordering::SeqCst);
        let r = client
            .call_tool(
                CallToolRequestParams::new("aisp_list_domains")
                    .with_arguments(json!({"enable": ["profile"]}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(handler.list_changed.load(Ordering::SeqCst), count);
        // An unknown domain is a clear error.
        let r = client
            .call_tool(
                CallToolRequestParams::new("aisp_list_domains")
                    .with_arguments(json!({"enable": ["gpus"]}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_each_session_enables_domains_for_itself() {
    let server = common::HttpServer::start(&[], &[]);
    let connect = || async {
        let handler = Client::default();
        let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp"));
        let client = handler
            .clone()
            .serve(StreamableHttpClientTransport::from_config(config))
            .await
            .unwrap();
        (client, handler)
    };
    let (first, first_handler) = connect().await;
    let (second, _) = connect().await;
    let default = second.list_all_tools().await.unwrap();
    assert!(listing_len(&default) <= DEFAULT_LISTING_BUDGET);
    let after = enable_everything_and_relist(&first, &first_handler).await;
    assert_eq!(after.len(), aisp::registry::tools().len());
    check_definitions(&after);
    // The other session still has the default listing.
    let still = second.list_all_tools().await.unwrap();
    assert_eq!(still.len(), default.len());
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
    let _ = ClientConfig::default();
}

/// The guide and the prompts the instructions point at are served, in both
/// protocol generations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_getting_started_guide_and_the_prompts_are_served() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams, ResourceContents};
    for modern in [false, true] {
        let (client, _) = stdio(&[], modern).await;
        let info = serde_json::to_value(client.peer_info().unwrap()).unwrap();
        let instructions = info["instructions"].as_str().unwrap().to_string();
        let resources = client.list_all_resources().await.unwrap();
        assert_eq!(resources.len(), 1);
        let uri = resources[0].uri.clone();
        assert!(instructions.contains(&uri), "the instructions name {uri}");
        let read = client
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await
            .unwrap();
        let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
            panic!("text contents");
        };
        assert!(text.contains("aisp_triage") && text.contains("enable"));
        let prompts = client.list_all_prompts().await.unwrap();
        assert!(prompts.len() >= 5);
        for p in &prompts {
            assert!(
                instructions.contains(p.name.as_str()),
                "the instructions name {}",
                p.name
            );
        }
        let got = client
            .get_prompt(GetPromptRequestParams::new("slow_training_step"))
            .await
            .unwrap();
        let text = serde_json::to_string(&got.messages).unwrap();
        assert!(text.contains("aisp_profile_rules"));
        client.cancel().await.unwrap();
    }
}

/// The map of domains is small, one domain's tools come with their input schemas, and a tool called by
/// name joins the session's listing (a client that checks results against its listing, like the Python
/// SDK, knows its schemas; it warns "not listed by server" otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_domain_map_is_small_and_a_tool_called_by_name_joins_the_listing() {
    let (client, handler) = stdio(&[], false).await;
    let list_domains = |args: Value| {
        CallToolRequestParams::new("aisp_list_domains")
            .with_arguments(args.as_object().unwrap().clone())
    };
    let map = client.call_tool(list_domains(json!({}))).await.unwrap();
    let map = map.structured_content.unwrap();
    let map_len = python_json_len(&map);
    assert!(
        map_len <= aisp::ops::core::DOMAIN_MAP_BUDGET,
        "the domain map is {map_len} characters"
    );
    let named: usize = map["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["tools"].as_str().unwrap().split(", ").count())
        .sum();
    assert_eq!(
        named,
        aisp::registry::tools().len(),
        "the map names every tool"
    );
    let one = client
        .call_tool(list_domains(json!({"domain": "aisp_profile_ranks"})))
        .await
        .unwrap();
    let one = one.structured_content.unwrap();
    assert!(
        one["tools"][0]["inputSchema"]["properties"]["path"].is_object(),
        "{one}"
    );

    let before = client.list_all_tools().await.unwrap();
    assert!(!before.iter().any(|t| t.name == "aisp_system_env"));
    let r = client
        .call_tool(CallToolRequestParams::new("aisp_system_env"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    let got = common::eventually(Duration::from_secs(5), || async {
        (handler.list_changed.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    assert!(got.is_some(), "notifications/tools/list_changed arrived");
    let after = client.list_all_tools().await.unwrap();
    assert_eq!(after.len(), before.len() + 1);
    assert!(after.iter().any(|t| t.name == "aisp_system_env"));
    client.cancel().await.unwrap();
}

/// Streamable HTTP at protocol 2026-07-28 keeps no session: enabling cannot change the listing, so the
/// answer says so (and how to start the server with that toolset) instead of claiming it enabled them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stateless_http_enabling_says_it_cannot_and_how_to_start_the_server() {
    let server = common::HttpServer::start(&[], &[]);
    let handler = Client::default();
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp"));
    let client = handler
        .clone()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover");
    let before = client.list_all_tools().await.unwrap();
    let r = client
        .call_tool(
            CallToolRequestParams::new("aisp_list_domains")
                .with_arguments(json!({"enable": ["hw"]}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let v = r.structured_content.unwrap();
    assert_eq!(v["enabled"], json!([]), "{v}");
    let note = v["note"].as_str().unwrap();
    assert!(
        note.contains("stateless") && note.contains("--tools default,hw"),
        "{note}"
    );
    let after = client.list_all_tools().await.unwrap();
    assert_eq!(after.len(), before.len());
    // Every tool still answers by name.
    let r = client
        .call_tool(CallToolRequestParams::new("aisp_system_env"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    client.cancel().await.unwrap();
}

/// The runs compared and the sets read by the lean-answer budget: the planted fixes (one GPU, and 4-rank sets),
/// the two-H100 capture before and after its planted straggler, two different workloads, and two windows of one
/// run.
fn compare_cases() -> Vec<(String, String)> {
    use crate::profile_common::{fixture, planted};
    let path = |p: std::path::PathBuf| p.display().to_string();
    let ranks2 = |set: &str| {
        fixture(&format!("capture/ranks2/{set}/rank_0.sqlite"));
        let f = fixture(&format!("capture/ranks2/{set}/rank_1.sqlite"));
        path(f.parent().unwrap().to_path_buf())
    };
    let mut cases: Vec<(String, String)> =
        ["copy_bound", "elementwise_chain", "fp32_gemm", "gpu_ahead"]
            .iter()
            .map(|c| (path(planted(c, 1)), path(planted(&format!("{c}.fixed"), 1))))
            .collect();
    for c in ["ddp_exposed", "ddp_straggler"] {
        cases.push((path(planted(c, 4)), path(planted(&format!("{c}.fixed"), 4))));
    }
    cases.push((ranks2("plain"), ranks2("straggler")));
    cases.push((
        path(fixture("train_good.sqlite")),
        path(fixture("ddp.sqlite")),
    ));
    cases.push((
        path(fixture("cut/train_good_steady_nvtx.sqlite")),
        path(fixture("cut/train_good_warmup_nvtx.sqlite")),
    ));
    cases
}

/// Every leaf of `v` as (its key, the value), for checking that a lean answer's figures are the detailed
/// answer's. `next`, `left_out` and `minor` exist only to point at the rest; a fix said once already is
/// "as for device N".
fn leaves(v: &Value, key: &str, out: &mut std::collections::BTreeSet<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if !["next", "left_out", "minor"].contains(&k.as_str()) {
                    leaves(x, k, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| leaves(x, key, out)),
        Value::String(s) if key == "fix" && s.starts_with("as for device") => {}
        leaf => {
            out.insert((key.to_string(), leaf.to_string()));
        }
    }
}

/// `aisp_profile_compare` and `aisp_profile_ranks` answer in about [`LEAN_BUDGET`] characters by default (counted
/// as the listing is, with the fixtures' folders spelled at a standard length; each at most [`LEAN_MAX`]): verdict
/// first, the next call, and `left_out` naming `detail`; every figure of the lean answer is the detailed answer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_ranks_answer_lean_by_default_with_the_detailed_figures() {
    use aisp::ops::profile_lean::{LEAN_BUDGET, LEAN_MAX};
    let (client, _) = stdio(&[], false).await;
    let call = |tool: &'static str, args: Value| structured(&client, tool, args);
    let home = std::path::Path::new("/nonexistent-home");
    let mut calls: Vec<(&str, Value)> = compare_cases()
        .into_iter()
        .map(|(b, a)| ("aisp_profile_compare", json!({"before": b, "after": a})))
        .collect();
    for set in ["ddp_balanced", "ddp_exposed", "ddp_straggler"] {
        let dir = crate::profile_common::planted(set, 4);
        calls.push((
            "aisp_profile_ranks",
            json!({"path": dir.display().to_string()}),
        ));
    }
    // The two-H100 captures (folders of 2 exports) and one export holding 2 ranks.
    let (plain, straggler) = compare_cases().swap_remove(6);
    let ddp = crate::profile_common::fixture("ddp.sqlite")
        .display()
        .to_string();
    for path in [plain, straggler, ddp] {
        calls.push(("aisp_profile_ranks", json!({ "path": path })));
    }
    let (mut sizes, mut total, answers) = (Vec::new(), 0, calls.len());
    for (tool, args) in calls {
        // The operation's default whole (the MCP cap counts indented characters and may shed from a default near
        // this budget; what it sheds, its note names).
        let mut lean_args = args.clone();
        lean_args["max_chars"] = json!(WHOLE);
        let lean = call(tool, lean_args).await;
        let mut full_args = args.clone();
        full_args["detail"] = json!(true);
        // Complete on request: a detailed answer whole, past the MCP answer cap.
        full_args["max_chars"] = json!(WHOLE);
        let full = call(tool, full_args).await;
        let text = crate::profile_output::at_a_standard_place(&lean.to_string(), home);
        let n = python_json_len(&serde_json::from_str(&text).unwrap());
        let what = format!("{tool} {args}");
        sizes.push(format!("{n:>6} {what}"));
        total += n;
        assert!(n <= LEAN_MAX, "{what}: {n} characters (at most {LEAN_MAX})");
        let first = lean.as_object().unwrap().keys().next().unwrap();
        assert_eq!(first, "verdict", "{what}: the verdict leads");
        // A comparison names a next call only where the after run still has a finding above info: its summary
        // names each run's findings with the first one's numbers, so with none left there is none to make.
        let next = lean["next"].as_array().map_or(0, Vec::len);
        let nothing_left = lean["summary"]
            .as_str()
            .is_some_and(|s| s.contains("After: no finding above info"));
        // Predicted-vs-measured is the default answer's only where the change applied a fix; with none applied the
        // summary names each run's findings instead.
        if let Some(predictions) = lean["predictions"].as_array().filter(|p| !p.is_empty()) {
            assert!(
                predictions.iter().any(|p| p["applied"] == true),
                "{what}: predictions with no fix applied"
            );
        }
        if tool == "aisp_profile_compare" && nothing_left {
            assert_eq!(next, 0, "{what}: nothing left to call for");
        } else {
            assert!(next > 0, "{what}: names the next call");
        }
        let left_out = lean["left_out"].as_array().unwrap();
        assert!(
            left_out
                .iter()
                .all(|l| l.as_str().unwrap().ends_with("pass \"detail\": true")),
            "{what}: {left_out:?}"
        );
        assert!(
            full.get("left_out").is_none(),
            "{what}: detail leaves nothing out"
        );
        let (mut lean_leaves, mut full_leaves) = Default::default();
        leaves(&lean, "", &mut lean_leaves);
        leaves(&full, "", &mut full_leaves);
        let strays: Vec<_> = lean_leaves
            .difference(&full_leaves)
            .filter(|(k, _)| !k.ends_with("_ms"))
            .collect();
        assert!(
            strays.is_empty(),
            "{what}: not in the detailed answer: {strays:?}"
        );
    }
    eprintln!("default answers (characters):\n{}", sizes.join("\n"));
    assert!(
        total / answers <= LEAN_BUDGET,
        "the default answers take {} characters on average (budget {LEAN_BUDGET})",
        total / answers
    );
    client.cancel().await.unwrap();
}

/// The exports, sets and pairs the answer sizes are measured on: those of [`compare_cases`], each export and set
/// once.
fn size_cases() -> (Vec<String>, Vec<String>, Vec<(String, String)>) {
    let pairs = compare_cases();
    let (mut files, mut sets) = (Vec::new(), Vec::new());
    for (b, a) in &pairs {
        for p in [b, a] {
            let list = if std::path::Path::new(p).is_dir() {
                &mut sets
            } else {
                &mut files
            };
            if !list.contains(p) {
                list.push(p.clone());
            }
        }
    }
    (files, sets, pairs)
}

/// What the default and the detailed answers of every profile tool with `detail` cost on the fixtures of the lean
/// budget ([`size_cases`]), counted as the budgets count (`json.dumps`, the fixtures' folders at a standard length)
/// and as the agent-eval harness prints a result (`json.dumps(indent=1)`): the figures of BENCHMARKS.md's issue-34
/// table. Each tool's `detail` description states its cost as a multiple of the default answer; the measured mean
/// ratio must round to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detail_costs_what_its_description_says() {
    let (client, _) = stdio(&["--tools", "all"], false).await;
    let listed = client.list_all_tools().await.unwrap();
    let home = std::path::Path::new("/nonexistent-home");
    let (files, sets, pairs) = size_cases();
    let mut calls: Vec<(&str, Value)> = Vec::new();
    for tool in [
        "aisp_profile_rules",
        "aisp_profile_kernels",
        "aisp_profile_gaps",
        "aisp_profile_memory",
        "aisp_profile_nvtx",
        "aisp_profile_iterations",
    ] {
        calls.extend(files.iter().map(|f| (tool, json!({ "path": f }))));
    }
    for s in &sets {
        calls.push(("aisp_profile_rules", json!({ "path": s })));
        calls.push(("aisp_profile_ranks", json!({ "path": s })));
    }
    for (b, a) in &pairs {
        calls.push(("aisp_profile_compare", json!({"before": b, "after": a})));
    }
    // Kineto traces: one rank, and the two ranks of ddp.
    let capture = |name: &str| {
        crate::profile_common::data_dir()
            .join("capture")
            .join(name)
            .display()
            .to_string()
    };
    calls.push((
        "aisp_profile_trace",
        json!({"paths": [capture("train_good.kineto.json.xz")]}),
    ));
    calls.push((
        "aisp_profile_trace",
        json!({"paths": [capture("ddp.rank0.kineto.json.xz"), capture("ddp.rank1.kineto.json.xz")]}),
    ));
    // tool → (cases, Σ default, Σ detail, Σ default indented, Σ detail indented)
    let mut sums: std::collections::BTreeMap<&str, [usize; 5]> = Default::default();
    for (tool, mut args) in calls {
        // Both answers whole, past the MCP answer cap: what `detail` adds to the default, not what the cap keeps.
        args["max_chars"] = json!(WHOLE);
        let mut full_args = args.clone();
        full_args["detail"] = json!(true);
        let mut both = Vec::new();
        for a in [args.clone(), full_args] {
            let r = client
                .call_tool(
                    CallToolRequestParams::new(tool).with_arguments(a.as_object().unwrap().clone()),
                )
                .await
                .unwrap();
            if r.is_error == Some(true) {
                break;
            }
            let text = crate::profile_output::at_a_standard_place(
                &r.structured_content.unwrap().to_string(),
                home,
            );
            let v: Value = serde_json::from_str(&text).unwrap();
            both.push((python_json_len(&v), aisp::answer_cap::printed_len(&v)));
        }
        // An export a tool has nothing to say of (no NVTX, no steps) is not counted.
        let [(lean, lean_i), (full, full_i)] = both[..] else {
            continue;
        };
        let s = sums.entry(tool).or_default();
        for (i, n) in [1, lean, full, lean_i, full_i].into_iter().enumerate() {
            s[i] += n;
        }
    }
    let mut report = Vec::new();
    let mut wrong = Vec::new();
    for (tool, [n, lean, full, lean_i, full_i]) in &sums {
        let ratio = *full as f64 / *lean as f64;
        report.push(format!(
            "| `{tool}` | {n} | {} | {} | {ratio:.1}× | {} | {} |",
            lean / n,
            full / n,
            lean_i / n,
            full_i / n
        ));
        let t = listed.iter().find(|t| t.name == *tool).unwrap();
        let said = wire(t)["inputSchema"]["properties"]["detail"]["description"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let stated = said
            .split("about ")
            .nth(1)
            .and_then(|s| s.split('×').next())
            .and_then(|s| s.trim().parse::<f64>().ok());
        if stated.is_none_or(|x| (x - ratio).abs() > 0.5) {
            wrong.push(format!(
                "{tool}: measured {ratio:.1}×, the description says {said:?}"
            ));
        }
    }
    eprintln!(
        "| tool | cases | default | detail | detail/default | default (indent=1) | detail (indent=1) |\n|---|---|---|---|---|---|---|\n{}",
        report.join("\n")
    );
    client.cancel().await.unwrap();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every number and string of `v` (a detailed finding: its fields, window and data).
fn figures(v: &Value, nums: &mut Vec<f64>, strings: &mut Vec<String>) {
    match v {
        Value::Number(n) => nums.extend(n.as_f64()),
        Value::String(s) => strings.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| figures(x, nums, strings)),
        Value::Object(m) => m.values().for_each(|x| figures(x, nums, strings)),
        _ => {}
    }
}

/// The figures of `line` that are not the detailed finding `full`'s (its fields, window and data, in ns, µs or
/// ms at the decimals printed, or inside one of its names); a line that is not `full`'s gist word for word is a
/// problem too.
fn line_problems(what: &str, line: &str, full: &Value) -> Vec<String> {
    // The thresholds a line names: kernels under 5 us, launches over 1 ms.
    const THRESHOLDS: [f64; 2] = [1.0, 5.0];
    let mut out = Vec::new();
    if full["gist"].as_str() != Some(line) {
        out.push(format!(
            "{what}: {line:?} is not the detailed gist {}",
            full["gist"]
        ));
    }
    let (mut nums, mut strings) = (Vec::new(), Vec::new());
    let mut without_gist = full.clone();
    without_gist.as_object_mut().map(|m| m.remove("gist"));
    figures(&without_gist, &mut nums, &mut strings);
    for (x, d, tok) in printed_numbers(line) {
        let scale = 10f64.powi(d as i32);
        let at = |v: f64| (((v * scale).round() / scale) - x).abs() < 1e-9;
        let found = THRESHOLDS.contains(&x)
            || nums.iter().any(|&v| at(v) || at(v / 1e6) || at(v / 1e3))
            || strings.iter().any(|s| s.contains(&tok));
        if !found {
            out.push(format!(
                "{what}: `{tok}` in {line:?} is not the detailed answer's"
            ));
        }
    }
    out
}

/// The detailed finding of `full` that `f` (a default answer's) is: same id, device and title.
fn detailed<'a>(full: &'a Value, key: &str, f: &Value) -> Option<&'a Value> {
    full[key]
        .as_array()?
        .iter()
        .find(|g| g["id"] == f["id"] && g["device"] == f["device"] && g["title"] == f["title"])
}

/// Each finding's line of numbers (`gist`) in a default answer — of `aisp_profile_rules` (exports and sets),
/// `aisp_profile_ranks` and the predictions of `aisp_profile_compare` — is the detailed answer's line, and every
/// figure in it is one of the detailed finding's (its data, fields and window): built from the same numbers, not
/// computed again. A prediction's lines are its finding's in the detailed rules answer of each run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_figure_of_a_findings_line_is_the_detailed_answers() {
    let (client, _) = stdio(&[], false).await;
    let call = |tool: &'static str, args: Value| structured(&client, tool, args);
    let (files, sets, pairs) = size_cases();
    let mut problems = Vec::new();
    let (mut lines, mut numbers) = (0, 0);
    let mut check = |what: String, line: &str, full: Option<&Value>| match full {
        None => problems.push(format!("{what}: no detailed finding")),
        Some(full) => {
            lines += 1;
            numbers += printed_numbers(line).len();
            problems.extend(line_problems(&what, line, full));
        }
    };
    let mut detailed_rules = std::collections::BTreeMap::new();
    let mut runs: Vec<(&str, &String)> = files.iter().map(|f| ("aisp_profile_rules", f)).collect();
    runs.extend(sets.iter().map(|s| ("aisp_profile_rules", s)));
    runs.extend(sets.iter().map(|s| ("aisp_profile_ranks", s)));
    for (tool, path) in runs {
        let lean = call(tool, json!({ "path": path })).await;
        let full = call(
            tool,
            json!({"path": path, "detail": true, "max_chars": WHOLE}),
        )
        .await;
        for f in lean["findings"].as_array().unwrap() {
            let line = f["gist"].as_str().unwrap_or_default();
            assert!(
                !line.is_empty() || f["severity"] == "info",
                "{tool} {path}: {} has no gist",
                f["id"]
            );
            if !line.is_empty() {
                check(
                    format!("{tool} {path} {}", f["id"]),
                    line,
                    detailed(&full, "findings", f),
                );
            }
        }
        if tool == "aisp_profile_rules" {
            detailed_rules.insert(path.clone(), full);
        }
    }
    for (before, after) in &pairs {
        let lean = call(
            "aisp_profile_compare",
            json!({"before": before, "after": after}),
        )
        .await;
        let full = call(
            "aisp_profile_compare",
            json!({"before": before, "after": after, "detail": true, "max_chars": WHOLE}),
        )
        .await;
        for p in lean["predictions"].as_array().unwrap() {
            let same = full["predictions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["id"] == p["id"] && q["device"] == p["device"])
                .unwrap();
            for (key, run) in [("gist", before), ("after_gist", after)] {
                let Some(line) = p[key].as_str() else {
                    continue;
                };
                assert_eq!(p[key], same[key], "compare {before}: {key} of {}", p["id"]);
                // The finding in that run's detailed rules answer.
                let finding = detailed_rules[run]["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|f| {
                        f["id"] == p["id"] && f["device"] == p["device"] && f["gist"] == line
                    });
                check(format!("compare {before} {key} {}", p["id"]), line, finding);
            }
        }
    }
    client.cancel().await.unwrap();
    // The checker itself: a figure the detailed finding does not hold is caught, as is a line not its gist.
    let f = json!({"gist": "1.23 ms per step", "data": {"x_ns": 1_230_000}});
    assert!(line_problems("self", "1.23 ms per step", &f).is_empty());
    assert_eq!(line_problems("self", "1.24 ms per step", &f).len(), 2);
    eprintln!("{lines} lines, {numbers} figures checked");
    assert!(
        lines >= 40 && numbers >= 200,
        "only {lines} lines, {numbers} figures"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Over MCP every answer that says what it leaves out stops at [`MCP_ANSWER_CAP`] characters as a client shows it
/// (`json.dumps(indent=1)`), the cut named in `left_out` with the `max_chars` that brings it whole; the rows kept
/// are the whole answer's first rows, unchanged; the CLI answers whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_stop_at_the_cap_and_max_chars_brings_them_whole() {
    use crate::profile_common::{fixture, planted};
    use aisp::answer_cap::{MCP_ANSWER_CAP, printed_len};
    let (client, _) = stdio(&["--tools", "all"], false).await;
    let ranks = planted("ddp_straggler", 4).display().to_string();
    let one = fixture("train_good.sqlite").display().to_string();
    // A detailed comparison: each side's steady periods are a list of numbers no cut shortens; the sides shed them.
    let (before, after) = compare_cases().into_iter().next().unwrap();
    let calls = [
        ("aisp_profile_ledger", json!({"path": ranks, "steps": 50})),
        ("aisp_profile_rules", json!({"path": ranks, "detail": true})),
        (
            "aisp_profile_compare",
            json!({"before": before, "after": after, "detail": true}),
        ),
        (
            "aisp_profile_kernels",
            json!({"path": one, "detail": true, "limit": 40}),
        ),
        // A window: its [start, end] is a pair the output schema requires whole (the Python SDK rejected a cut one).
        (
            "aisp_profile_kernels",
            json!({"path": one, "detail": true, "limit": 40, "start_ns": 7_600_000_000i64, "end_ns": 8_100_000_000i64}),
        ),
    ];
    for (tool, args) in calls {
        let capped = structured(&client, tool, args.clone()).await;
        let mut whole_args = args.clone();
        whole_args["max_chars"] = json!(WHOLE);
        let whole = structured(&client, tool, whole_args).await;
        let whole_len = printed_len(&whole);
        assert!(
            whole_len > MCP_ANSWER_CAP,
            "{tool}: the case must be over the cap ({whole_len})"
        );
        // The answer without the cap's own note fits.
        let notes = capped["left_out"].as_array().unwrap();
        let note = notes.last().unwrap().as_str().unwrap();
        assert!(
            note.contains(&format!("({whole_len} whole)")) && note.contains("`max_chars: "),
            "{tool}: {note}"
        );
        let mut body = capped.clone();
        body["left_out"].as_array_mut().unwrap().pop();
        if body["left_out"].as_array().unwrap().is_empty() {
            body.as_object_mut().unwrap().remove("left_out");
        }
        assert!(
            printed_len(&body) <= MCP_ANSWER_CAP,
            "{tool}: {}",
            printed_len(&body)
        );
        // Every kept row is the whole answer's, in place: only the last rows of lists went.
        assert!(
            is_prefix(&body, &whole),
            "{tool}: a kept value differs from the whole answer's"
        );
        if let Some(trim) = capped["scope"]["trim"].as_array() {
            assert_eq!(trim.len(), 2, "{tool}: the window is cut");
        }
        // The CLI answers whole.
        let out = std::process::Command::new(common::aisp_bin())
            .args([
                "--format",
                "json",
                "profile",
                tool.trim_start_matches("aisp_profile_"),
                "--json",
                &args.to_string(),
            ])
            .env(
                "AISP_HOME",
                std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
                    .join(format!("aisp-cap-{}", std::process::id())),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            printed_len(&cli),
            whole_len,
            "{tool}: the CLI answers whole"
        );
    }
    client.cancel().await.unwrap();
}

/// Under the cap a detailed rules answer parts first with what an assistant can best spare (findings under 1 %, each
/// finding's `data`, `why` and `verify`, ...): every finding above low keeps its stake, basis, gist, fix and first
/// line of evidence, as the whole answer gives them. `finding` gives one finding whole, and a rule that raised
/// nothing is told with the findings there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_detailed_answer_keeps_every_significant_finding_and_finding_gives_one_whole() {
    use crate::profile_common::{fixture, planted};
    let (client, _) = stdio(&[], false).await;
    // The path is printed in the answer, so a long one leaves less room under the cap: CI's clone sits deeper than a
    // developer's, and a user's home deeper still.
    let deep = tempfile::tempdir().unwrap();
    let deep_dir = deep
        .path()
        .join("a-user-home-folder/projects/some-training-run/profiles/2026-11-29");
    std::fs::create_dir_all(&deep_dir).unwrap();
    let deep_copy = deep_dir.join("train_good.sqlite");
    std::fs::copy(fixture("train_good.sqlite"), &deep_copy).unwrap();
    for path in [
        planted("ddp_straggler", 4).display().to_string(),
        fixture("train_good.sqlite").display().to_string(),
        deep_copy.display().to_string(),
    ] {
        let capped = structured(
            &client,
            "aisp_profile_rules",
            json!({"path": path, "detail": true}),
        )
        .await;
        let whole = structured(
            &client,
            "aisp_profile_rules",
            json!({"path": path, "detail": true, "max_chars": WHOLE}),
        )
        .await;
        let kept = capped["findings"].as_array().unwrap();
        let significant: Vec<&Value> = whole["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| !matches!(f["severity"].as_str(), Some("info" | "low")))
            .collect();
        assert!(!significant.is_empty(), "{path}: no finding above low");
        for f in &significant {
            let k = detailed(&capped, "findings", f)
                .unwrap_or_else(|| panic!("{path}: {} ({}) was cut", f["id"], f["device"]));
            for field in ["time_at_stake_ns", "share_pct", "basis", "gist", "fix"] {
                assert_eq!(k[field], f[field], "{path} {} {field}", f["id"]);
            }
            assert_eq!(k["evidence"][0], f["evidence"][0], "{path} {}", f["id"]);
        }
        // Only what had to go went: a finding's data stays unless every finding under 1 % went first.
        let note = capped["left_out"].as_array().unwrap().last().unwrap();
        assert!(
            note.as_str().unwrap().starts_with("Held to"),
            "{path}: {note}"
        );
        if kept.iter().any(|f| f.get("data").is_none()) {
            assert!(kept.iter().all(|f| f["severity"] != "info"), "{path}");
        }
        // One finding whole: the whole answer's findings of that rule, field for field.
        let id = significant[0]["id"].as_str().unwrap();
        let one = structured(
            &client,
            "aisp_profile_rules",
            json!({"path": path, "finding": id}),
        )
        .await;
        let mine: Vec<&Value> = whole["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["id"] == id)
            .collect();
        let got: Vec<&Value> = one["findings"].as_array().unwrap().iter().collect();
        assert_eq!(got, mine, "{path}: finding {id}");
        assert!(aisp::answer_cap::printed_len(&one) < aisp::answer_cap::printed_len(&whole));
    }
    let r = client
        .call_tool(CallToolRequestParams::new("aisp_profile_rules").with_arguments(
            json!({"path": fixture("train_good.sqlite").display().to_string(), "finding": "fp64_gemm"})
                .as_object()
                .unwrap()
                .clone(),
        ))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let text = serde_json::to_string(&r.content).unwrap();
    assert!(
        text.contains("invalid_input")
            && text.contains("raised no finding here")
            && text.contains("Pass one of"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

/// `part` is `whole` with some lists shortened at their ends (and `left_out` aside).
fn is_prefix(part: &Value, whole: &Value) -> bool {
    match (part, whole) {
        (Value::Array(p), Value::Array(w)) => {
            p.len() <= w.len() && p.iter().zip(w).all(|(a, b)| is_prefix(a, b))
        }
        (Value::Object(p), Value::Object(w)) => p
            .iter()
            .all(|(k, v)| k == "left_out" || w.get(k).is_some_and(|x| is_prefix(v, x))),
        (a, b) => a == b,
    }
}
