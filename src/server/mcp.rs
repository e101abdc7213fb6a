//! The MCP face of the registry: `tools/list`, `tools/call` (with progress and
//! cancellation), and prompts, over any rmcp transport.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult, ListResourcesResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam, Prompt,
    PromptArgument, PromptMessage, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResultType, Role,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::stdio::EncodedListing;
use crate::app::AppState;
use crate::context::{Progress, ProgressSink};
use crate::dispatch::{self, CallOptions};
use crate::error::OpError;
use crate::registry::{self, ToolDef};
use crate::toolset::Toolset;

/// What the server tells a model about where to start.
pub const INSTRUCTIONS: &str = "aisp is a GPU performance engineer's toolkit. \
Start with aisp_triage for an overview of this machine and the next steps, or aisp_suggest_tools with your task \
in plain words to find the right tool. The tool list starts with the everyday tools: aisp_list_domains gives \
the map of every tool, {\"domain\": \"<domain>\"} their input schemas, enable: [\"<domain>\"] lists them \
(notifications/tools/list_changed); every tool answers tools/call, listed or not. \
To explain a slow training or inference run from an Nsight Systems export (.sqlite or .nsys-rep), call \
aisp_profile_rules with its path, then aisp_profile_kernels, aisp_profile_gaps or aisp_profile_nvtx for detail. \
Long-running tools accept async: true and return a job_id to poll with aisp_job_status. \
Every failure is a result with isError: true and {error: {kind, message, hint}}: follow the hint. \
Prompts: slow_training_step, out_of_memory, multi_gpu_scaling, inference_latency, compare_before_after. \
Resource aisp://guide/getting-started: this guidance in one page.";

/// The MCP server. Clones share the session; [`AispServer::new_session`]
/// starts another (the HTTP transport makes one per MCP session).
#[derive(Clone)]
pub struct AispServer {
    app: Arc<AppState>,
    session: Arc<SessionTools>,
    /// Served over streamable HTTP, where protocol 2026-07-28 has no session:
    /// there a listing cannot change between requests.
    http: bool,
}

/// What one MCP session lists: the configured toolset plus the domains the
/// session enabled with `aisp_list_domains` and `enable`, plus each tool the
/// session called by name (so that a client that checks results against the
/// listing knows it: the Python SDK lists again and warns "not listed by
/// server" otherwise).
pub struct SessionTools {
    toolset: Toolset,
    enabled: Mutex<BTreeSet<String>>,
    called: Mutex<BTreeSet<String>>,
    listing: Mutex<Arc<EncodedListing>>,
}

impl SessionTools {
    pub fn new(toolset: Toolset) -> SessionTools {
        let listing = listing_for(&toolset, &BTreeSet::new(), &BTreeSet::new());
        SessionTools {
            toolset,
            enabled: Mutex::new(BTreeSet::new()),
            called: Mutex::new(BTreeSet::new()),
            listing: Mutex::new(listing),
        }
    }

    /// The listing `tools/list` answers with now.
    pub fn current(&self) -> Arc<EncodedListing> {
        Arc::clone(&self.listing.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// List these domains' tools too; true when the listing changed.
    pub fn enable(&self, domains: &[String]) -> bool {
        let mut enabled = self.enabled.lock().unwrap_or_else(|e| e.into_inner());
        enabled.extend(domains.iter().cloned());
        self.relist(
            &enabled,
            &self.called.lock().unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// List one tool the session called by name; true when the listing changed.
    pub fn list_called(&self, tool: &str) -> bool {
        if self.current().names().contains(&tool) {
            return false;
        }
        let mut called = self.called.lock().unwrap_or_else(|e| e.into_inner());
        called.insert(tool.to_string());
        self.relist(
            &self.enabled.lock().unwrap_or_else(|e| e.into_inner()),
            &called,
        )
    }

    fn relist(&self, enabled: &BTreeSet<String>, called: &BTreeSet<String>) -> bool {
        let next = listing_for(&self.toolset, enabled, called);
        let mut listing = self.listing.lock().unwrap_or_else(|e| e.into_inner());
        let changed = next.names() != listing.names();
        *listing = next;
        changed
    }

    /// Whether this session's listing can change (it cannot once everything is listed).
    fn can_change(&self) -> bool {
        self.toolset != Toolset::All
    }
}

/// The listing for a toolset plus enabled domains and tools called by name,
/// made once per combination and shared by every session that has it (its
/// JSON is encoded once too).
fn listing_for(
    toolset: &Toolset,
    enabled: &BTreeSet<String>,
    called: &BTreeSet<String>,
) -> Arc<EncodedListing> {
    type Key = (String, Vec<String>, Vec<String>);
    type Cache = Mutex<HashMap<Key, Arc<EncodedListing>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (
        format!("{toolset:?}"),
        enabled.iter().cloned().collect::<Vec<_>>(),
        called.iter().cloned().collect::<Vec<_>>(),
    );
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    Arc::clone(cache.entry(key).or_insert_with(|| {
        let listed = registry::tools()
            .iter()
            .filter(|t| {
                toolset.includes(t) || enabled.contains(t.spec().domain) || called.contains(&t.name)
            })
            .map(mcp_tool)
            .collect::<Vec<Tool>>();
        Arc::new(EncodedListing::new(listed))
    }))
}

impl AispServer {
    pub fn new(app: Arc<AppState>) -> AispServer {
        let session = Arc::new(SessionTools::new(app.config.tools.clone()));
        AispServer {
            app,
            session,
            http: false,
        }
    }

    /// The server of the streamable HTTP transport (one per MCP session).
    pub fn for_http(app: Arc<AppState>) -> AispServer {
        AispServer {
            http: true,
            ..AispServer::new(app)
        }
    }

    /// A server for another MCP session: same process state, its own listing.
    pub fn new_session(&self) -> AispServer {
        AispServer {
            http: self.http,
            ..AispServer::new(Arc::clone(&self.app))
        }
    }

    /// What this session lists, for transports that send the listing pre-encoded.
    pub fn session_tools(&self) -> Arc<SessionTools> {
        Arc::clone(&self.session)
    }

    pub fn app(&self) -> &Arc<AppState> {
        &self.app
    }
}

/// The MCP view of one tool.
pub fn mcp_tool(tool: &ToolDef) -> Tool {
    let spec = tool.spec();
    let annotations = ToolAnnotations::with_title(spec.title)
        .read_only(spec.hints.read_only)
        .destructive(spec.hints.destructive)
        .idempotent(spec.hints.idempotent)
        .open_world(spec.hints.open_world);
    let meta = json!({
        "io.github.aisp/needs_gpu": spec.needs_gpu,
        "io.github.aisp/long_running": spec.long_running,
        "io.github.aisp/executes_commands": spec.executes_commands,
        "io.github.aisp/domain": spec.domain,
    });
    let meta = match meta {
        Value::Object(m) => MetaObject(m),
        _ => MetaObject(Default::default()),
    };
    Tool::new(
        tool.name.clone(),
        spec.description,
        Arc::clone(&tool.input_schema),
    )
    .with_title(spec.title)
    .with_raw_output_schema(Arc::clone(tool.output_schema()))
    .with_annotations(annotations)
    .with_meta(meta)
}

/// The MCP result for an operation's outcome: structured content plus the same
/// JSON as text; failures are `isError: true` with `{error: {kind, message, hint}}`.
pub fn call_tool_result(outcome: Result<Value, OpError>) -> CallToolResult {
    match outcome {
        Ok(value) => CallToolResult::structured(value),
        Err(err) => CallToolResult::structured_error(err.to_json()),
    }
}

/// Forwards progress from the operation's thread to the client, and stops
/// once the call has been answered (the spec forbids later notifications).
struct ProgressForwarder {
    sink: ProgressSink,
    done: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl ProgressForwarder {
    fn start(context: &RequestContext<RoleServer>) -> Option<ProgressForwarder> {
        let token = context.meta.get_progress_token()?;
        let peer = context.peer.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        let done = Arc::new(AtomicBool::new(false));
        let done2 = Arc::clone(&done);
        let task = tokio::spawn(async move {
            let mut last = f64::NEG_INFINITY;
            while let Some(p) = rx.recv().await {
                if done2.load(Ordering::SeqCst) {
                    break;
                }
                // Progress must increase; drop reports that do not.
                if p.progress <= last {
                    continue;
                }
                last = p.progress;
                let mut param = ProgressNotificationParam::new(token.clone(), p.progress);
                if let Some(total) = p.total {
                    param = param.with_total(total);
                }
                if let Some(message) = p.message {
                    param = param.with_message(message);
                }
                if peer.notify_progress(param).await.is_err() {
                    break;
                }
            }
        });
        let sink: ProgressSink = Arc::new(move |p| {
            let _ = tx.send(p);
        });
        Some(ProgressForwarder { sink, done, task })
    }

    /// Flush what was reported before the answer, then stop.
    async fn finish(self, cancelled: bool) {
        if cancelled {
            self.done.store(true, Ordering::SeqCst);
            self.task.abort();
            return;
        }
        drop(self.sink);
        // The channel closes once the operation's context is gone; do not wait
        // on an operation still winding down after a timeout.
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), self.task).await;
        self.done.store(true, Ordering::SeqCst);
    }
}

impl ServerHandler for AispServer {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        if !crate::prompts::all().is_empty() {
            caps.prompts = Some(Default::default());
        }
        if !crate::resources::all().is_empty() {
            caps.resources = Some(Default::default());
        }
        ServerConfig::new(caps)
            .with_server_info(
                Implementation::new("aisp", env!("CARGO_PKG_VERSION"))
                    .with_title("aisp: GPU performance engineering toolkit"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let mut result = ListToolsResult::with_all_items(self.session.current().tools().to_vec());
        result.result_type = Some(ResultType::COMPLETE);
        if modern {
            result = if self.session.can_change() {
                // This session's list grows when it enables a domain.
                result.with_cache_scope(CacheScope::Private)
            } else {
                // Everything is listed: the same for everyone while the process lives.
                result
                    .with_ttl_ms(3_600_000)
                    .with_cache_scope(CacheScope::Public)
            };
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        registry::find(name).map(mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = registry::find(&request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "tool not found: {} (aisp_list_domains lists every tool)",
                    request.name
                ),
                None,
            ));
        };
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let forwarder = ProgressForwarder::start(&context);
        let opts = CallOptions {
            cancel: context.ct.clone(),
            progress: forwarder.as_ref().map(|f| Arc::clone(&f.sink)),
            // A model may follow instructions planted in a file: writes stay under the output roots.
            writes: crate::outputs::WriteScope::Roots,
            // A model pays for every character it reads: answers stop at a size, `left_out` says what is cut.
            answer_cap: Some(crate::answer_cap::MCP_ANSWER_CAP),
        };
        let mut outcome = dispatch::invoke(&self.app, tool, args, opts).await;
        let cancelled = context.ct.is_cancelled();
        if let Some(f) = forwarder {
            f.finish(cancelled).await;
        }
        if let Err(e) = &outcome {
            tracing::info!(tool = %tool.name, kind = %e.kind, "call failed: {}", e.message);
        }
        // Streamable HTTP at 2026-07-28 serves every request on its own: no session keeps a listing.
        let stateless = self.http
            && context
                .protocol_version()
                .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let mut changed = false;
        if let Ok(value) = &mut outcome
            && let Some(domains) = crate::ops::core::domains_to_enable(&tool.name, value)
        {
            if stateless || !self.session.can_change() {
                if stateless {
                    crate::ops::core::cannot_enable(value);
                }
            } else {
                changed |= self.session.enable(&domains);
            }
        }
        if !stateless && self.session.can_change() && outcome.is_ok() {
            // A tool called by name joins this session's listing, so that the client knows its schemas.
            changed |= self.session.list_called(&tool.name);
        }
        if changed {
            // Clients that follow list_changed fetch tools/list again.
            if let Err(e) = context.peer.notify_tool_list_changed().await {
                tracing::debug!("could not send tools/list_changed: {e}");
            }
        }
        Ok(call_tool_result(outcome).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let prompts = crate::prompts::all()
            .iter()
            .map(|p| {
                let args = p
                    .arguments
                    .iter()
                    .map(|a| {
                        PromptArgument::new(a.name)
                            .with_description(a.description)
                            .with_required(a.required)
                    })
                    .collect();
                Prompt::new(p.name, Some(p.description), Some(args)).with_title(p.title)
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let Some(prompt) = crate::prompts::find(&request.name) else {
            return Err(McpError::invalid_params(
                format!("prompt not found: {}", request.name),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let text = prompt
            .render(&args)
            .map_err(|e| McpError::invalid_params(format!("{}: {}", e.message, e.hint), None))?;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(prompt.description)
                .into(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let resources = crate::resources::all()
            .iter()
            .map(|r| {
                Resource::new(r.uri, r.name)
                    .with_title(r.title)
                    .with_description(r.description)
                    .with_mime_type(r.mime_type)
                    .with_size(r.text.len() as u64)
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let Some(r) = crate::resources::find(&request.uri) else {
            return Err(McpError::resource_not_found(
                format!(
                    "resource not found: {} (resources/list names them; the guide is {})",
                    request.uri,
                    crate::resources::GUIDE_URI
                ),
                None,
            ));
        };
        let contents = ResourceContents::TextResourceContents {
            uri: r.uri.to_string(),
            mime_type: Some(r.mime_type.to_string()),
            text: r.text.to_string(),
            meta: None,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instructions name only real tools, every prompt and the guide.
    #[test]
    fn the_instructions_stay_true() {
        for word in INSTRUCTIONS.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("aisp_") {
                assert!(registry::find(word).is_some(), "unknown tool {word}");
            }
        }
        for p in crate::prompts::all() {
            assert!(INSTRUCTIONS.contains(p.name), "prompt {} is named", p.name);
        }
        for r in crate::resources::all() {
            assert!(INSTRUCTIONS.contains(r.uri), "resource {} is named", r.uri);
        }
        assert!(INSTRUCTIONS.contains(crate::ops::core::LIST_DOMAINS_TOOL));
    }
}
