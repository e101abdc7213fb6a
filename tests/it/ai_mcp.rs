//! The AI domain through the real MCP server over stdio: the investigation
//! prompts are listed and render with the tools to call, and `aisp_ask`
//! answers a profile question (with progress) without an LLM.

use crate::common;

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

async fn start(home: &std::path::Path) -> (RunningService<RoleClient, Client>, Client) {
    let home = home.to_path_buf();
    let cmd = tokio::process::Command::new(common::aisp_bin()).configure(|c| {
        c.arg("serve");
        c.env("AISP_HOME", &home)
            .env("AISP_CONFIG", home.join("none.toml"))
            .env_remove("AISP_TOOLS")
            .env_remove("AISP_ALLOW_EXEC")
            .env_remove("OPENAI_API_KEY")
            .env_remove("AISP_LLM_API_KEY")
            .env_remove("AISP_LLM_BASE_URL")
            .env_remove("AISP_LLM_MODEL")
            .env("RUST_LOG", "warn");
    });
    let transport = TokioChildProcess::new(cmd).expect("spawn aisp serve");
    let handler = Client::default();
    let client = handler.clone().serve(transport).await.expect("initialize");
    (client, handler)
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn prompt_text(r: &rmcp::model::GetPromptResult) -> String {
    r.messages
        .iter()
        .filter_map(|m| m.content.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn investigation_prompts_are_listed_and_name_the_tools_in_order() {
    let home = tempfile::tempdir().unwrap();
    let (client, _) = start(home.path()).await;
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "slow_training_step",
            "out_of_memory",
            "multi_gpu_scaling",
            "inference_latency",
            "compare_before_after"
        ]
    );
    let oom = prompts.iter().find(|p| p.name == "out_of_memory").unwrap();
    let args = oom.arguments.as_ref().unwrap();
    assert!(
        args.iter()
            .any(|a| a.name == "error" && a.required == Some(true))
    );

    let r = client
        .get_prompt(
            GetPromptRequestParams::new("out_of_memory").with_arguments(obj(json!({
                "error": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                "setup": "llama-3.1-8b, seq 8192, batch 8, bf16, 1x H100"
            }))),
        )
        .await
        .unwrap();
    let text = prompt_text(&r);
    assert!(text.contains("Tried to allocate 2.00 GiB"));
    assert!(text.contains("llama-3.1-8b, seq 8192"));
    let order: Vec<usize> = [
        "aisp_ai_troubleshoot",
        "aisp_gpu_info",
        "aisp_distributed_plan",
    ]
    .iter()
    .map(|t| {
        text.find(t)
            .unwrap_or_else(|| panic!("{t} missing: {text}"))
    })
    .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "tools in the order to call them"
    );

    let r = client
        .get_prompt(
            GetPromptRequestParams::new("slow_training_step").with_arguments(obj(json!({
                "profile": "runs/train.sqlite"
            }))),
        )
        .await
        .unwrap();
    let text = prompt_text(&r);
    assert!(text.contains("Profile: runs/train.sqlite"));
    assert!(text.contains("Details: (not given)"));
    assert!(
        text.find("aisp_profile_rules").unwrap() < text.find("aisp_profile_utilization").unwrap()
    );

    let r = client
        .get_prompt(
            GetPromptRequestParams::new("compare_before_after").with_arguments(obj(json!({
                "before": "a.sqlite", "after": "b.sqlite"
            }))),
        )
        .await
        .unwrap();
    assert!(prompt_text(&r).contains("aisp_profile_compare"));

    // A missing required argument and an unknown prompt are errors.
    assert!(
        client
            .get_prompt(GetPromptRequestParams::new("out_of_memory"))
            .await
            .is_err()
    );
    assert!(
        client
            .get_prompt(GetPromptRequestParams::new("no_such_prompt"))
            .await
            .is_err()
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_over_mcp_answers_a_profile_question_with_progress() {
    let home = tempfile::tempdir().unwrap();
    let (client, handler) = start(home.path()).await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/train_good.sqlite")
        .display()
        .to_string();
    let mut params = CallToolRequestParams::new("aisp_ask").with_arguments(obj(json!({
        "question": "why is this training slow?",
        "profile": path,
    })));
    params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(
        rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(7)),
    ));
    let r = client.call_tool(params).await.unwrap();
    assert_eq!(r.is_error, Some(false));
    let v = r.structured_content.unwrap();
    assert_eq!(v["llm_used"], false);
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["host_os_wait", "launch_bound_tiny_kernels"]);
    assert!(v["conversation_id"].as_str().unwrap().starts_with("conv_"));
    let progress = handler.progress.lock().unwrap().clone();
    assert!(
        progress.iter().any(|p| p
            .message
            .as_deref()
            .is_some_and(|m| m.contains("aisp_profile_rules"))),
        "{progress:?}"
    );
    client.cancel().await.unwrap();
}
