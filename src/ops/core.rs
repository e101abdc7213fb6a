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
    pub repaired: Option<aisp_store::recover::StoreRecovery>,
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

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDomainsInput {
    /// Domains whose tools this MCP session should list from now on (the
    /// server sends notifications/tools/list_changed), e.g. ["profile"]; "all" for every domain.
    #[serde(default)]
    pub enable: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListDomainsOutput {
    pub domains: Vec<DomainInfo>,
    /// The domains `enable` named, now listed in this MCP session (empty without `enable`).
    pub enabled: Vec<String>,
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

#[derive(Debug, Serialize, JsonSchema)]
pub struct DomainInfo {
    pub name: String,
    pub description: String,
    pub operations: Vec<OperationInfo>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct OperationInfo {
    /// MCP tool name.
    pub tool: String,
    pub summary: String,
    /// Listed without `enable`: in the default listing (`core` or `default`), or only once its domain is enabled (`domain`).
    pub listed: &'static str,
    pub needs_gpu: bool,
    pub long_running: bool,
    pub executes_commands: bool,
}

impl Operation for ListDomains {
    type Input = ListDomainsInput;
    type Output = ListDomainsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "List domains and tools",
        summary: "Every domain with its tools: one-line summary, whether each needs a GPU, runs long or executes commands.",
        description: "Lists every domain and its tools with one-line summaries and which are listed by default. With enable (e.g. [\"profile\"], or [\"all\"]) this MCP session lists those domains' tools too and the server sends notifications/tools/list_changed. Use when the tool you need is not listed. Instant.",
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
        ],
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
        let domains = crate::ops::DOMAINS
            .iter()
            .filter(|d| !d.operations.is_empty())
            .map(|d| DomainInfo {
                name: d.name.to_string(),
                description: d.description.to_string(),
                operations: d
                    .operations
                    .iter()
                    .map(|op| {
                        let spec = op.spec();
                        OperationInfo {
                            tool: spec.tool_name(),
                            summary: spec.summary.to_string(),
                            listed: match spec.tier {
                                registry::Tier::Core => "core",
                                registry::Tier::Default => "default",
                                registry::Tier::Domain => "domain",
                            },
                            needs_gpu: spec.needs_gpu,
                            long_running: spec.long_running,
                            executes_commands: spec.executes_commands,
                        }
                    })
                    .collect(),
            })
            .collect();
        Ok(ListDomainsOutput { domains, enabled })
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
            enable: vec!["profile".into(), "hw".into(), "profile".into()],
        };
        let some = ListDomains.run(&ctx, input).unwrap();
        assert_eq!(some.enabled, ["profile", "hw"]);
        assert_eq!(
            domains_to_enable(LIST_DOMAINS_TOOL, &serde_json::to_value(&some).unwrap()),
            Some(vec!["profile".to_string(), "hw".to_string()])
        );
        let input = ListDomainsInput {
            enable: vec!["nonsense".into()],
        };
        let err = ListDomains.run(&ctx, input).unwrap_err();
        assert!(err.hint.contains("profile"), "{}", err.hint);
        let listed: usize = out.domains.iter().map(|d| d.operations.len()).sum();
        assert_eq!(listed, registry::tools().len());
        assert!(out.domains.iter().any(|d| d.name == "job"));
    }
}
