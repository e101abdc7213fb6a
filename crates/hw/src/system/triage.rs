//! `aisp_triage`: from the machine's context, the three most useful next
//! steps, each naming the tool to call and why. Rules are ordered by how much
//! they usually cost a GPU job; only tools this server offers are named.

use schemars::JsonSchema;
use serde::Serialize;

use super::context::ContextReport;
use super::dependencies::Health;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct NextStep {
    /// The MCP tool to call.
    pub tool: String,
    /// Arguments to call it with.
    pub arguments: serde_json::Value,
    /// Why this is worth doing on this machine, with the evidence.
    pub why: String,
}

/// Candidate steps in priority order; the first three whose tool exists are returned.
pub fn next_steps(ctx: &ContextReport, tool_exists: &dyn Fn(&str) -> bool) -> Vec<NextStep> {
    let mut c: Vec<NextStep> = Vec::new();
    let mut push = |tool: &str, arguments: serde_json::Value, why: String| {
        c.push(NextStep {
            tool: tool.to_string(),
            arguments,
            why,
        })
    };
    let g = &ctx.gpu;
    let h = &ctx.health;

    if !g.available && g.pci_gpus > 0 {
        push(
            "aisp_system_dependencies",
            serde_json::json!({}),
            format!(
                "{} NVIDIA GPU(s) are on the PCI bus but none is usable ({}): find the missing driver or container \
                 setting.",
                g.pci_gpus,
                g.reason.as_deref().unwrap_or("no driver")
            ),
        );
    }
    if h.dependencies == Health::Error {
        push(
            "aisp_system_dependencies",
            serde_json::json!({}),
            format!(
                "The software stack has errors: {}.",
                h.problems
                    .first()
                    .map(String::as_str)
                    .unwrap_or("see the checks")
            ),
        );
    }
    let throttled: Vec<String> = g
        .devices
        .iter()
        .filter(|d| d.throttled == Some(true))
        .map(|d| d.power.clone())
        .collect();
    if !throttled.is_empty() {
        push(
            "aisp_gpu_power",
            serde_json::json!({}),
            format!("GPU clocks are being held down: {}.", throttled.join("; ")),
        );
    }
    if !h.container_mismatches.is_empty() {
        push(
            "aisp_system_container",
            serde_json::json!({}),
            format!(
                "Container limits that hurt GPU jobs: {}.",
                h.container_mismatches.join("; ")
            ),
        );
    }
    if g.devices.len() > 1
        && let Some(t) = &g.topology
        && (t.contains("PCIe") || t.contains("peer-to-peer read on"))
    {
        push(
            "aisp_gpu_topology",
            serde_json::json!({}),
            format!(
                "Not every GPU pair has NVLink and peer-to-peer: {t} Check which ranks should share a node or tensor-parallel group."
            ),
        );
    }
    if g.available {
        if let Some(d) = g.devices.first() {
            push(
                "aisp_gpu_bandwidth",
                serde_json::json!({"device": d.index}),
                format!(
                    "Measure achieved memory bandwidth against the theoretical {} GB/s of {}: the baseline every \
                     memory-bound kernel is judged by.",
                    d.memory_bandwidth_theoretical_gb_per_s
                        .map(|b| format!("{b:.0}"))
                        .unwrap_or_else(|| "?".into()),
                    d.name.as_deref().unwrap_or("this GPU")
                ),
            );
        }
        let busy: Vec<String> = g
            .devices
            .iter()
            .filter(|d| d.processes > 0)
            .map(|d| {
                format!(
                    "GPU {} ({} processes, {}% busy)",
                    d.index,
                    d.processes,
                    d.utilization_gpu_pct.unwrap_or(0)
                )
            })
            .collect();
        if !busy.is_empty() {
            push(
                "aisp_system_monitor",
                serde_json::json!({"duration_s": 10, "interval_ms": 500}),
                format!(
                    "Work is running on {}: sample utilization for 10 s to see whether the GPUs stay busy or wait on \
                     the CPU.",
                    busy.join(", ")
                ),
            );
        }
    }
    if ctx.software.nsys.is_some() {
        push(
            "aisp_profile_summary",
            serde_json::json!({"path": "report.nsys-rep"}),
            format!(
                "Nsight Systems {} is installed: capture your workload (nsys profile -o report python train.py) and \
                 read where the time goes.",
                ctx.software.nsys.as_deref().unwrap_or("")
            ),
        );
    }
    if !h.parameters_differ.is_empty() {
        push(
            "aisp_system_parameters",
            serde_json::json!({}),
            format!(
                "Kernel settings differ from the GPU-host recommendations: {}.",
                h.parameters_differ.join("; ")
            ),
        );
    }
    if !h.env_warnings.is_empty() {
        push(
            "aisp_system_env",
            serde_json::json!({}),
            format!(
                "Environment settings that slow GPU work: {}",
                h.env_warnings.join(" ")
            ),
        );
    }
    if h.dependencies == Health::Warning {
        push(
            "aisp_system_dependencies",
            serde_json::json!({}),
            format!(
                "The software stack has warnings: {}.",
                h.problems
                    .first()
                    .map(String::as_str)
                    .unwrap_or("see the checks")
            ),
        );
    }
    if !g.available {
        push(
            "aisp_profile_summary",
            serde_json::json!({"path": "report.sqlite"}),
            "No GPU here: analyse a profile captured elsewhere (an Nsight Systems .nsys-rep or .sqlite export).".to_string(),
        );
    }
    // Always-available fallbacks.
    push(
        "aisp_system_context",
        serde_json::json!({"detail": "full"}),
        "Read every report behind this summary (software, kernel parameters, NUMA layout, network).".to_string(),
    );
    push(
        "aisp_suggest_tools",
        serde_json::json!({"query": "why is my training slow"}),
        "Find the tools for your question (profiling, planning, benchmarks).".to_string(),
    );
    push(
        "aisp_list_domains",
        serde_json::json!({}),
        "See the whole toolkit.".to_string(),
    );

    let mut out: Vec<NextStep> = Vec::new();
    for step in c {
        if out.len() == 3 {
            break;
        }
        if tool_exists(&step.tool) && !out.iter().any(|s| s.tool == step.tool) {
            out.push(step);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuAvailability;
    use crate::host::HostRoot;
    use crate::system::context::{self, Detail};

    fn ctx(gpu: &GpuAvailability) -> ContextReport {
        let host = HostRoot::at(format!(
            "{}/tests/data/host/container-vm-2cpu",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ));
        let g = context::gather(&host, &[("PATH".into(), "/nonexistent".into())], gpu);
        context::assemble(g, gpu, Detail::Summary, std::time::Instant::now())
    }

    #[test]
    fn a_gpu_free_container_gets_three_steps_from_its_evidence() {
        let gpu = GpuAvailability::unavailable("no NVIDIA driver", false);
        let c = ctx(&gpu);
        let all = |_: &str| true;
        let steps = next_steps(&c, &all);
        let tools: Vec<&str> = steps.iter().map(|s| s.tool.as_str()).collect();
        // Container limits (memlock, nofile), then kernel parameters, then profile analysis.
        assert_eq!(
            tools,
            vec![
                "aisp_system_container",
                "aisp_system_parameters",
                "aisp_profile_summary"
            ]
        );
        assert!(
            steps[0]
                .why
                .contains("locked-memory limit (ulimit -l) is 8192 KiB")
        );
        // Only tools the server has are named.
        let some = |t: &str| {
            t == "aisp_system_context" || t == "aisp_list_domains" || t == "aisp_system_container"
        };
        let steps = next_steps(&c, &some);
        let tools: Vec<&str> = steps.iter().map(|s| s.tool.as_str()).collect();
        assert_eq!(
            tools,
            vec![
                "aisp_system_container",
                "aisp_system_context",
                "aisp_list_domains"
            ]
        );
    }
}
