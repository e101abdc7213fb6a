//! Planning arithmetic for training and serving, with every formula's source
//! in its module: memory (ZeRO, Korthikanti), collectives (nccl-tests bus
//! factors), links, training layouts and step time (6·N·D), the inference
//! roofline (KV cache, prefill, decode, batch sweep), serving plans (vLLM,
//! quantization, replicas, cost per token) and peaks (datasheet or measured).
//!
//! No MCP knowledge here: operations in `crate::ops` call these functions.

pub mod advice;
pub mod collectives;
pub mod inference;
pub mod links;
pub mod memory;
mod model;
pub mod peaks;
pub mod recipes;
pub mod serving;
pub mod training;
pub mod vllm;
pub mod whatif;

/// Hugging Face model references, config.json from a folder, the HF cache or
/// the Hub (through a client the application supplies), mapped onto
/// [`aisp_knowledge::models::Architecture`].
pub mod hf;

pub use model::{ModelError, ModelSpec, ModelSummary, round};
