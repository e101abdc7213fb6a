//! The README's tool table, generated from the registry, with the Python
//! reference implementation's tool names mapped to ours.

use std::fmt::Write;

use crate::registry;

/// Reference tool name → the aisp tool that covers it (`None`: no equivalent).
/// Names from the reference's newest version (unprefixed; older releases
/// prefixed them with `aisp_`).
pub const REFERENCE_NAMES: &[(&str, Option<&str>)] = &[
    ("gpu_bandwidth", Some("aisp_gpu_bandwidth")),
    ("gpu_info", Some("aisp_gpu_info")),
    ("gpu_power", Some("aisp_gpu_power")),
    ("gpu_topology", Some("aisp_gpu_topology")),
    ("gpu_topology_matrix", Some("aisp_gpu_topology")),
    ("clock_lock_check", Some("aisp_gpu_clocks")),
    ("system_capabilities", Some("aisp_system_capabilities")),
    ("system_container", Some("aisp_system_container")),
    ("system_context", Some("aisp_system_context")),
    ("system_cpu_memory", Some("aisp_system_cpu_memory")),
    ("system_dependencies", Some("aisp_system_dependencies")),
    ("system_env", Some("aisp_system_env")),
    ("system_full", Some("aisp_system_context")),
    ("system_network", Some("aisp_system_network")),
    ("system_parameters", Some("aisp_system_parameters")),
    ("system_software", Some("aisp_system_software")),
    ("compare_ncu", Some("aisp_profile_ncu_compare")),
    ("compare_nsys", Some("aisp_profile_compare")),
    ("ncu_summary", Some("aisp_profile_ncu_summary")),
    ("nsys_summary", Some("aisp_profile_summary")),
    ("profile_compare", Some("aisp_profile_compare")),
    ("profile_compile_analysis", Some("aisp_profile_compile")),
    ("profile_flame", Some("aisp_profile_flame")),
    ("profile_hta", Some("aisp_profile_trace")),
    ("profile_kernels", Some("aisp_profile_kernels")),
    ("profile_list_profiles", Some("aisp_profile_list")),
    ("profile_memory", Some("aisp_profile_memory")),
    ("profile_ncu", Some("aisp_profile_ncu")),
    ("profile_nsys", Some("aisp_profile_nsys")),
    ("profile_roofline", Some("aisp_hw_roofline")),
    ("profile_torch", Some("aisp_profile_torch")),
    ("analyze_bottlenecks", Some("aisp_analyze_bottlenecks")),
    ("analyze_comm_overlap", Some("aisp_profile_overlap")),
    ("analyze_dataloader", Some("aisp_analyze_dataloader")),
    ("analyze_energy", Some("aisp_analyze_power")),
    (
        "analyze_memory_patterns",
        Some("aisp_analyze_memory_patterns"),
    ),
    ("analyze_pareto", Some("aisp_analyze_pareto")),
    ("analyze_scaling", Some("aisp_analyze_scaling")),
    ("analyze_stacking", Some("aisp_analyze_stacking")),
    ("analyze_whatif", Some("aisp_analyze_whatif")),
    ("predict_scaling", Some("aisp_analyze_scaling")),
    ("optimize", Some("aisp_recommend")),
    ("optimize_roi", Some("aisp_optimize_roi")),
    ("optimize_techniques", Some("aisp_optimize_techniques")),
    ("recommend", Some("aisp_recommend")),
    ("distributed_nccl", Some("aisp_distributed_nccl")),
    ("distributed_plan", Some("aisp_distributed_plan")),
    ("launch_plan", Some("aisp_distributed_slurm")),
    ("inference_deploy", Some("aisp_inference_deploy")),
    ("inference_estimate", Some("aisp_inference_estimate")),
    (
        "inference_quantization",
        Some("aisp_inference_quantization"),
    ),
    ("inference_vllm", Some("aisp_inference_vllm")),
    ("benchmark_compare", Some("aisp_benchmark_compare")),
    ("benchmark_compare_runs", Some("aisp_benchmark_compare")),
    ("benchmark_contracts", None),
    ("benchmark_data", Some("aisp_benchmark_history")),
    (
        "benchmark_deep_dive_compare",
        Some("aisp_benchmark_compare"),
    ),
    ("benchmark_explore", Some("aisp_benchmark_history")),
    ("benchmark_export", Some("aisp_export_csv")),
    ("benchmark_history", Some("aisp_benchmark_history")),
    (
        "benchmark_llm_patch_loop",
        Some("aisp_benchmark_kernel_improve"),
    ),
    ("benchmark_overview", Some("aisp_analyze_leaderboards")),
    ("benchmark_report", Some("aisp_export_pdf")),
    ("benchmark_targets", Some("aisp_benchmark_targets")),
    ("benchmark_trends", Some("aisp_benchmark_history")),
    ("benchmark_triage", Some("aisp_analyze_bottlenecks")),
    ("benchmark_variants", Some("aisp_benchmark_run")),
    ("list_chapters", Some("aisp_benchmark_targets")),
    ("run_benchmarks", Some("aisp_benchmark_run")),
    ("ai_status", Some("aisp_ai_status")),
    ("ai_troubleshoot", Some("aisp_ai_troubleshoot")),
    ("ask", Some("aisp_ask")),
    ("explain", Some("aisp_explain")),
    ("suggest_tools", Some("aisp_suggest_tools")),
    ("export_csv", Some("aisp_export_csv")),
    ("export_html", Some("aisp_export_html")),
    ("export_pdf", Some("aisp_export_pdf")),
    ("hw_cache", Some("aisp_hw_cache")),
    ("hw_disk", Some("aisp_hw_disk")),
    ("hw_ib", Some("aisp_hw_network")),
    ("hw_nccl", Some("aisp_hw_nccl")),
    ("hw_network", Some("aisp_hw_network")),
    ("hw_p2p", Some("aisp_hw_p2p")),
    ("hw_pcie", Some("aisp_hw_pcie")),
    ("hw_roofline", Some("aisp_hw_roofline")),
    ("hw_speed", Some("aisp_benchmark_speed_test")),
    ("hw_tc", Some("aisp_hw_tensor_cores")),
    ("hf", Some("aisp_hf_model")),
    ("cluster_build_canonical_package", None),
    ("cluster_common_eval", None),
    ("cluster_eval_suite", None),
    ("cluster_promote_run", None),
    ("cluster_slurm", Some("aisp_distributed_slurm")),
    ("cluster_validate_field_report", None),
    ("cost_estimate", Some("aisp_distributed_cost_estimate")),
    (
        "tools_compare_precision",
        Some("aisp_inference_quantization"),
    ),
    (
        "tools_cost_per_token",
        Some("aisp_inference_cost_per_token"),
    ),
    ("tools_detect_cutlass", Some("aisp_profile_kernels")),
    ("tools_dump_hw", Some("aisp_gpu_info")),
    ("tools_kv_cache", Some("aisp_inference_kv_cache")),
    ("tools_probe_hw", Some("aisp_system_capabilities")),
    ("context_full", Some("aisp_system_context")),
    ("context_summary", Some("aisp_system_context")),
    ("job_status", Some("aisp_job_status")),
    ("status", Some("aisp_status")),
    ("triage", Some("aisp_triage")),
    ("info_features", Some("aisp_system_capabilities")),
    ("render_benchmark_run", Some("aisp_export_html")),
];

pub const BEGIN: &str = "<!-- tools:begin -->";
pub const END: &str = "<!-- tools:end -->";

/// The markdown between the README's markers.
pub fn tool_table() -> String {
    let mut out = String::new();
    let tools = registry::tools();
    let _ = writeln!(
        out,
        "{} tools. GPU = needs an NVIDIA GPU; long = takes `timeout_s`/`async`, reports progress; exec = runs a command you supply (off unless allowed). \"Reference\" lists the Python reference implementation's tool names that this tool covers.\n",
        tools.len()
    );
    for domain in crate::ops::DOMAINS
        .iter()
        .filter(|d| !d.operations.is_empty())
    {
        let _ = writeln!(out, "**{}** — {}\n", domain.name, domain.description);
        let _ = writeln!(out, "| tool | CLI | what it does | flags | reference |");
        let _ = writeln!(out, "|---|---|---|---|---|");
        for op in domain.operations {
            let spec = op.spec();
            let name = spec.tool_name();
            let Some(tool) = registry::find(&name) else {
                continue;
            };
            let flags = spec.flags(["GPU", "long", "exec"]);
            let refs: Vec<String> = REFERENCE_NAMES
                .iter()
                .filter(|(_, ours)| *ours == Some(name.as_str()))
                .map(|(r, _)| format!("`{r}`"))
                .collect();
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} | {} | {} |",
                name,
                crate::registry::documents::cli_usage(tool),
                spec.summary.replace('|', "\\|"),
                flags.join(", "),
                refs.join(" ")
            );
        }
        out.push('\n');
    }
    let missing: Vec<String> = REFERENCE_NAMES
        .iter()
        .filter(|(_, ours)| ours.is_none_or(|o| registry::find(o).is_none()))
        .map(|(r, _)| format!("`{r}`"))
        .collect();
    let _ = writeln!(
        out,
        "Reference tools with no aisp equivalent: {}.",
        missing.join(", ")
    );
    out
}

/// Replace the block between the markers in `readme`; `None` if the markers are missing.
pub fn with_tool_table(readme: &str) -> Option<String> {
    let start = readme.find(BEGIN)? + BEGIN.len();
    let end = readme.find(END)?;
    if end < start {
        return None;
    }
    Some(format!(
        "{}\n{}{}",
        &readme[..start],
        tool_table(),
        &readme[end..]
    ))
}
