//! Operations of the `core` domain: this server and the map of its tools.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{self, DynOperation, OpSpec, Operation};
use aisp_hw::gpu::DeviceSummary;

pub const OPERATIONS: &[&dyn DynOperation] = &[&Status, &ListDomains];

/// The tool whose `enable` argument adds domains to an MCP session's listing.
pub const LIST_DOMAINS_TOOL: &str = "aisp_list_domains";

/// No arguments.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

pub struct Status;

#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusOutput {
    /// aisp version.
    pub version: String,
    pub gpu: GpuStatus,
    /// NVIDIA driver version, when a driver is loaded.
    pub driver_version: Option<String>,
    /// Highest CUDA version the driver supports (`major.minor`).
    pub cuda_driver_version: Option<String>,
    /// The SQLite store holding jobs, benchmark history and captures.
    pub store_path: String,
    pub store: StoreStatus,
    pub llm: LlmStatus,
    /// Whether tools that run user-supplied commands (profiler captures) may run.
    pub exec_allowed: bool,
    /// The config file read at start, if any.
    pub config_file: Option<String>,
    /// Number of tools this server offers (all of them answer tools/call).
    pub tool_count: usize,
    /// Decoded profile tables kept in memory between calls, per file, under the budget.
    pub profile_tables: aisp_profile::loaded::CacheStatus,
}

/// Whether the store opened sound, and what was done if it was damaged.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StoreStatus {
    /// True when the store opened and passed its integrity check (after a repair, if one was needed).
    pub ok: bool,
    /// Why the store cannot be used, when it cannot.
    pub error: Option<String>,
    /// Set when the store was found damaged at start: where the damaged file
    /// went, which rows were kept, which tables lost rows.
    pub repaired: Option<aisp_store::StoreRecovery>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct GpuStatus {
    pub available: bool,
    /// Why no GPU is usable, when none is.
    pub reason: Option<String>,
    pub devices: Vec<DeviceSummary>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LlmStatus {
    pub configured: bool,
    pub base_url: Option<String>,
    pub model: Option<String>,
}

impl Operation for Status {
    type Input = NoInput;
    type Output = StatusOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "aisp status",
        summary: "Version, GPUs found (or why none), driver and CUDA versions, store path, LLM and execution settings.",
        description: "This server and machine: aisp version, whether a GPU is usable (and why not), its devices, driver and CUDA versions, the store path, LLM and command-execution settings. Use when a tool reports gpu_unavailable or exec_not_allowed. Instant.",
        intents: &[
            "status",
            "is there a gpu",
            "what version",
            "server health",
            "check setup",
            "configuration",
            "is execution allowed",
        ],
        tier: crate::registry::Tier::Core,
        ..OpSpec::new("core", "status")
    };

    fn run(&self, ctx: &OpContext, _input: NoInput) -> Result<StatusOutput, OpError> {
        let app = ctx.app();
        let gpu = app.gpu();
        let llm = &app.config.llm;
        Ok(StatusOutput {
            version: env!("CARGO_PKG_VERSION").to_string(),
            gpu: GpuStatus {
                available: gpu.available,
                reason: gpu.reason.clone(),
                devices: gpu.devices.clone(),
            },
            driver_version: gpu.driver_version.clone(),
            cuda_driver_version: gpu.cuda_driver_version.clone(),
            store_path: app.config.store_path().display().to_string(),
            store: {
                let opened = app.store();
                StoreStatus {
                    ok: opened.is_ok(),
                    error: opened.err().map(|e| e.message),
                    repaired: app.store_recovery().cloned(),
                }
            },
            llm: LlmStatus {
                configured: llm.configured(),
                base_url: llm.base_url.clone(),
                model: llm.model.clone(),
            },
            exec_allowed: app.config.allow_exec,
            config_file: app.config.file.as_ref().map(|p| p.display().to_string()),
            tool_count: registry::tools().len(),
            profile_tables: ctx.app().profile_tables.status(),
        })
    }
}

pub struct ListDomains;

/// At most this many characters (Python `json.dumps`) for the map `aisp_list_domains` answers by default.
pub const DOMAIN_MAP_BUDGET: usize = 5_000;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDomainsInput {
    /// A domain (e.g. "profile") or a tool name: its tools with descriptions and input schemas.
    #[serde(default)]
    pub domain: Option<String>,
    /// Domains to list in this MCP session from now on (the server sends
    /// notifications/tools/list_changed), e.g. ["profile"]; "all" for every domain.
    #[serde(default)]
    pub enable: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListDomainsOutput {
    /// Every domain in a line: what it covers and its tools (the map; left out with `domain`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainLine>,
    /// With `domain`: its tools, each with its description and input schema.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSchema>,
    /// The domains `enable` named, now listed in this MCP session (empty without `enable`, and where the
    /// session cannot change its listing: see `note`).
    pub enabled: Vec<String>,
    /// What to do next: how to see a domain's schemas, list its tools, or call them.
    pub note: String,
}

/// One domain of the map.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DomainLine {
    pub domain: String,
    pub about: String,
    /// Its tools, comma-separated; `*` marks those in the default listing.
    pub tools: String,
}

/// One tool as `tools/list` would show it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    /// `core` or `default` (in the default listing) or `domain` (listed once its domain is enabled).
    pub listed: &'static str,
    /// Needs a GPU, runs long (takes timeout_s and async) or runs a command you supply.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<&'static str>,
    #[serde(rename = "inputSchema")]
    pub input_schema: serde_json::Map<String, serde_json::Value>,
}

/// The domains a successful `aisp_list_domains` call asked to list: what the
/// MCP front end adds to the session (the operation itself has no session).
pub fn domains_to_enable(tool: &str, output: &serde_json::Value) -> Option<Vec<String>> {
    if tool != LIST_DOMAINS_TOOL {
        return None;
    }
    let enabled: Vec<String> = output
        .get("enabled")?
        .as_array()?
        .iter()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect();
    (!enabled.is_empty()).then_some(enabled)
}

/// The answer to `enable` where the session cannot keep a listing (streamable HTTP at protocol
/// 2026-07-28 is stateless: every request is served on its own): nothing was enabled, and how to get
/// the tools instead.
pub fn cannot_enable(output: &mut serde_json::Value) {
    let Some(enabled) = output.get("enabled").and_then(|e| e.as_array()) else {
        return;
    };
    let asked: Vec<String> = enabled
        .iter()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect();
    if asked.is_empty() {
        return;
    }
    let all = asked.len() == registry::domain_names().len();
    let toolset = if all {
        "all".to_string()
    } else {
        format!("default,{}", asked.join(","))
    };
    output["enabled"] = serde_json::json!([]);
    output["note"] = serde_json::Value::String(format!(
        "Not enabled: this connection is stateless (streamable HTTP at MCP 2026-07-28 keeps no session), so its \
         tool listing cannot change. Every tool still answers tools/call by name ({{\"domain\": \"{}\"}} gives their \
         input schemas). To have them listed, start the server with that toolset: \
         `aisp serve --transport http --tools {toolset}` (or AISP_TOOLS={toolset}), or connect at an earlier protocol \
         version, which keeps a session.",
        asked[0]
    ));
}

impl Operation for ListDomains {
    type Input = ListDomainsInput;
    type Output = ListDomainsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "List domains and tools",
        summary: "The map of every domain and its tools; one domain's tools with their input schemas; enable a domain's tools in this session.",
        description: "The map of aisp: every domain in a line with its tools (* = listed by default). With domain (e.g. \"profile\", or a tool name) that domain's tools with descriptions and input schemas. With enable (e.g. [\"profile\"] or [\"all\"]) this MCP session lists those tools too (notifications/tools/list_changed). Every tool answers tools/call, listed or not. Instant.",
        intents: &[
            "list tools",
            "what tools",
            "what tools are there",
            "what can you do",
            "domains",
            "capabilities of aisp",
            "help",
            "all tools",
            "enable more tools",
            "input schema of a tool",
        ],
        example: r#"{"domain": "profile"}"#,
        tier: crate::registry::Tier::Core,
        ..OpSpec::new("core", "list_domains")
    };

    fn run(&self, _ctx: &OpContext, input: ListDomainsInput) -> Result<ListDomainsOutput, OpError> {
        let known = registry::domain_names();
        let mut enabled = Vec::new();
        for d in &input.enable {
            if d == "all" {
                enabled = known.iter().map(|k| k.to_string()).collect();
                break;
            }
            if !known.contains(&d.as_str()) {
                return Err(OpError::invalid_input(
                    format!("unknown domain `{d}`"),
                    format!("Enable one of: {}, or all.", known.join(", ")),
                ));
            }
            if !enabled.contains(d) {
                enabled.push(d.clone());
            }
        }
        let listed = |tier: registry::Tier| match tier {
            registry::Tier::Core => "core",
            registry::Tier::Default => "default",
            registry::Tier::Domain => "domain",
        };
        if let Some(wanted) = input.domain.as_deref().map(str::trim) {
            let tools: Vec<&registry::ToolDef> = if let Some(t) = registry::find(wanted) {
                vec![t]
            } else if known.contains(&wanted) {
                registry::tools()
                    .iter()
                    .filter(|t| t.spec().domain == wanted)
                    .collect()
            } else {
                return Err(OpError::invalid_input(
                    format!("`{wanted}` is neither a domain nor a tool"),
                    format!(
                        "Pass one of the domains ({}) or a tool name such as aisp_profile_ranks; \
                         aisp_list_domains without arguments gives the map.",
                        known.join(", ")
                    ),
                ));
            };
            let tools = tools
                .into_iter()
                .map(|t| {
                    let spec = t.spec();
                    ToolSchema {
                        name: t.name.clone(),
                        description: spec.description.to_string(),
                        listed: listed(spec.tier),
                        flags: spec.flags(["needs_gpu", "long_running", "executes_commands"]),
                        input_schema: (*t.input_schema).clone(),
                    }
                })
                .collect();
            return Ok(ListDomainsOutput {
                domains: Vec::new(),
                tools,
                enabled,
                note: "Call these by name (tools/call), listed or not; enable: [domain] lists a domain's tools in this session.".into(),
            });
        }
        let domains = crate::ops::DOMAINS
            .iter()
            .filter(|d| !d.operations.is_empty())
            .map(|d| DomainLine {
                domain: d.name.to_string(),
                about: d.description.to_string(),
                tools: d
                    .operations
                    .iter()
                    .map(|op| {
                        let spec = op.spec();
                        let star = if spec.tier == registry::Tier::Domain {
                            ""
                        } else {
                            "*"
                        };
                        format!("{}{star}", spec.tool_name())
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            })
            .collect();
        Ok(ListDomainsOutput {
            domains,
            tools: Vec::new(),
            enabled,
            note: "Every tool answers tools/call by name. {\"domain\": \"<domain or tool>\"} gives input schemas; \
                   {\"enable\": [\"<domain>\"]} lists a domain's tools in this session."
                .into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;

    #[test]
    fn status_reports_this_build_and_no_gpu_reason() {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(aisp_hw::gpu::GpuAvailability::unavailable(
            "test host",
            false,
        ));
        let out = Status
            .run(&OpContext::detached(app.clone()), NoInput {})
            .unwrap();
        assert_eq!(out.version, env!("CARGO_PKG_VERSION"));
        assert!(!out.gpu.available);
        assert_eq!(out.gpu.reason.as_deref(), Some("test host"));
        assert!(out.store_path.ends_with("aisp.sqlite"));
        assert!(!out.exec_allowed);
        assert_eq!(out.tool_count, registry::tools().len());
    }

    #[test]
    fn list_domains_covers_every_tool_once() {
        let ctx = OpContext::detached(AppState::for_tests());
        let out = ListDomains.run(&ctx, ListDomainsInput::default()).unwrap();
        assert!(out.enabled.is_empty());
        assert_eq!(
            domains_to_enable(LIST_DOMAINS_TOOL, &serde_json::to_value(&out).unwrap()),
            None
        );
        let input = ListDomainsInput {
            domain: None,
            enable: vec!["profile".into(), "hw".into(), "profile".into()],
        };
        let some = ListDomains.run(&ctx, input).unwrap();
        assert_eq!(some.enabled, ["profile", "hw"]);
        assert_eq!(
            domains_to_enable(LIST_DOMAINS_TOOL, &serde_json::to_value(&some).unwrap()),
            Some(vec!["profile".to_string(), "hw".to_string()])
        );
        let input = ListDomainsInput {
            domain: None,
            enable: vec!["nonsense".into()],
        };
        let err = ListDomains.run(&ctx, input).unwrap_err();
        assert!(err.hint.contains("profile"), "{}", err.hint);
        let listed: usize = out
            .domains
            .iter()
            .map(|d| d.tools.split(", ").count())
            .sum();
        assert_eq!(listed, registry::tools().len());
        assert!(out.domains.iter().any(|d| d.domain == "job"));
        // The map stays small: a line per domain.
        let map = registry::schema::python_json_len(&serde_json::to_value(&out).unwrap());
        assert!(
            map <= DOMAIN_MAP_BUDGET,
            "the domain map is {map} characters"
        );
        // One domain, or one tool, with input schemas.
        let one = ListDomains
            .run(
                &ctx,
                ListDomainsInput {
                    domain: Some("profile".into()),
                    enable: vec![],
                },
            )
            .unwrap();
        assert!(one.domains.is_empty());
        let ranks = one
            .tools
            .iter()
            .find(|t| t.name == "aisp_profile_ranks")
            .unwrap();
        assert!(ranks.input_schema["properties"].get("path").is_some());
        let tool = ListDomains
            .run(
                &ctx,
                ListDomainsInput {
                    domain: Some("aisp_profile_ranks".into()),
                    enable: vec![],
                },
            )
            .unwrap();
        assert_eq!(tool.tools.len(), 1);
        let err = ListDomains
            .run(
                &ctx,
                ListDomainsInput {
                    domain: Some("gpus".into()),
                    enable: vec![],
                },
            )
            .unwrap_err();
        assert!(err.hint.contains("profile"));
        // Where a session cannot change, enabling says so and how to start the server instead.
        let mut v = serde_json::to_value(&some).unwrap();
        cannot_enable(&mut v);
        assert_eq!(v["enabled"], serde_json::json!([]));
        let note = v["note"].as_str().unwrap();
        assert!(note.contains("--tools default,profile,hw"), "{note}");
    }
}
