//! The operations, one module per domain. Each module exports
//! `OPERATIONS`; [`DOMAINS`] lists the domains in the order `aisp tools`,
//! `aisp_list_domains` and the CLI help present them.
//!
//! Operations are thin: parse input, call a library module, return typed
//! output. The work lives in the library modules (`aisp_profile`,
//! `aisp_hw::gpu`, `aisp_hw::system`, ...), which know nothing of MCP.

pub mod advisor_inputs;
pub mod ai;
pub mod analyze;
pub mod benchmark;
pub mod core;
pub mod distributed;
pub mod errors;
pub mod export;
pub mod gpu;
pub mod gpu_clocks;
pub mod hf;
pub mod hw;
pub mod hw_host;
pub mod inference;
pub mod job;
pub mod kernel_lab;
pub mod kernel_lab_ncu;
pub mod optimize;
pub mod profile;
pub mod profile_analyses;
pub mod profile_capture;
pub mod profile_lean;
pub mod profile_ranks;
pub mod system;

use crate::registry::DynOperation;

/// A domain: a name, what it covers, and its operations.
pub struct Domain {
    pub name: &'static str,
    pub description: &'static str,
    pub operations: &'static [&'static dyn DynOperation],
}

pub const DOMAINS: &[Domain] = &[
    Domain {
        name: "core",
        description: "aisp itself: status of this server and machine, and the map of domains and tools.",
        operations: core::OPERATIONS,
    },
    Domain {
        name: "job",
        description: "Background jobs started by long-running operations with async: true.",
        operations: job::OPERATIONS,
    },
    Domain {
        name: "gpu",
        description: "NVIDIA GPU probes through NVML and CUDA: inventory, clocks, power, topology, NVLink, memory bandwidth.",
        operations: gpu::OPERATIONS,
    },
    Domain {
        name: "system",
        description: "The host around the GPUs: software stack, dependencies, capabilities, kernel parameters, containers, CPU/NUMA, network, environment, triage.",
        operations: system::OPERATIONS,
    },
    Domain {
        name: "profile",
        description: "Nsight Systems, Nsight Compute and PyTorch profiles: read them exactly, find what costs time, compare captures, and capture new ones.",
        operations: profile::OPERATIONS,
    },
    Domain {
        name: "benchmark",
        description: "CUDA microbenchmarks as baseline-vs-optimized lessons, with verified, repeatable timings and history.",
        operations: benchmark::OPERATIONS,
    },
    Domain {
        name: "hw",
        description: "Measured hardware roofs: memory bandwidth, compute peaks per precision, PCIe, caches, tensor cores, peer-to-peer and NCCL; the host's disk and network throughput.",
        operations: hw::OPERATIONS,
    },
    Domain {
        name: "analyze",
        description: "Bottleneck classification, what-if analysis, scaling, pareto fronts and retargeting a profile to another GPU.",
        operations: analyze::OPERATIONS,
    },
    Domain {
        name: "optimize",
        description: "Optimization techniques: recommendations ranked for a goal, details, ROI, compatibility of combinations, playbooks.",
        operations: optimize::OPERATIONS,
    },
    Domain {
        name: "distributed",
        description: "Distributed training plans: parallelism layouts with memory and step-time estimates, NCCL settings, FSDP/TP/PP configs, Slurm scripts, cost.",
        operations: distributed::OPERATIONS,
    },
    Domain {
        name: "inference",
        description: "Inference planning: KV cache sizing, latency and throughput estimates, vLLM configs, quantization, deployment sizing and cost per token.",
        operations: inference::OPERATIONS,
    },
    Domain {
        name: "hf",
        description: "Hugging Face models: search the Hub and read a model's config.json (Hub, local cache or folder) for the planners.",
        operations: hf::OPERATIONS,
    },
    Domain {
        name: "export",
        description: "Reports with charts for people: HTML and PDF of a profile, of two profiles before/after, or of benchmark history; benchmark history as CSV.",
        operations: export::OPERATIONS,
    },
    Domain {
        name: "ai",
        description: "Questions and answers backed by evidence from aisp's own tools, concept explanations, troubleshooting, and tool suggestions.",
        operations: ai::OPERATIONS,
    },
];
