//! Input handling shared by the advisor domains (optimize, distributed,
//! inference, analyze): resolving `model`/`architecture`/`params_b` and
//! `gpu`, and turning library errors into `OpError`s with hints.

use crate::context::OpContext;
use crate::error::OpError;
use aisp_knowledge::Dtype;
use aisp_knowledge::dtype::Precision;
use aisp_knowledge::gpus::{self, Gpu};
use aisp_knowledge::models::Architecture;
use aisp_planner::peaks::{self, PeakError, Peaks};
use aisp_planner::{ModelError, ModelSpec};

pub fn model_error(e: ModelError) -> OpError {
    if let ModelError::Hf(h) = &e {
        return super::hf::hf_error(h);
    }
    let hint = match &e {
        ModelError::Unknown { .. } => {
            "Use one of the listed catalog ids, hf:org/name for a Hugging Face model's config.json, \
             or describe the model with `architecture` (layers, hidden, heads, kv_heads, ffn, vocab) or `params_b`."
        }
        ModelError::NeedsShape { .. } => {
            "Pass `model` with a catalog id (e.g. llama-3.1-8b) or an `architecture` object: {\"layers\": 32, \"hidden\": 4096, \"heads\": 32, \"kv_heads\": 8, \"ffn\": 14336, \"vocab\": 128256}."
        }
        _ => {
            "Give exactly one of `model` (catalog id), `architecture` (object) or `params_b` (billions)."
        }
    };
    OpError::invalid_input(e.to_string(), hint)
}

/// Resolve the three ways of naming a model.
pub fn resolve_model(
    model: Option<&str>,
    architecture: Option<&Architecture>,
    params_b: Option<f64>,
) -> Result<ModelSpec, OpError> {
    ModelSpec::resolve(model, architecture, params_b).map_err(model_error)
}

/// A catalog GPU by id or device name; unknown ids list the known ones.
pub fn resolve_gpu(id: &str) -> Result<&'static Gpu, OpError> {
    gpus::lookup(id).map_err(|e| {
        OpError::invalid_input(
            e.to_string(),
            "Use a catalog id such as h100-sxm, a100-80gb, h200, b200 or l40s (aisp_optimize_details with a GPU id shows its figures).",
        )
    })
}

/// The named GPU, or the first local GPU the catalog knows, or an error.
pub fn gpu_or_local(ctx: &OpContext, id: Option<&str>) -> Result<&'static Gpu, OpError> {
    if let Some(id) = id {
        return resolve_gpu(id);
    }
    let local = ctx.app().gpu();
    for d in &local.devices {
        if let Some(g) = gpus::match_device_name(&d.name) {
            return Ok(g);
        }
    }
    let why = if local.devices.is_empty() {
        "no `gpu` was given and no local GPU was found".to_string()
    } else {
        format!(
            "no `gpu` was given and the local GPU ({}) is not in the catalog",
            local.devices[0].name
        )
    };
    Err(OpError::invalid_input(
        why,
        format!("Pass `gpu` with a catalog id: {}.", gpus::ids().join(", ")),
    ))
}

pub fn peak_error(e: PeakError) -> OpError {
    OpError::invalid_input(
        e.to_string(),
        "Pick a GPU whose datasheet figure is public, or measure this one with the hw domain's roofs \
         (measured roofs in benchmark history replace the datasheet automatically).",
    )
}

/// Roofs for `gpu` at the precision `dtype` computes in, measured ones first.
pub fn peaks_for(
    ctx: &OpContext,
    gpu: &Gpu,
    dtype: Dtype,
    use_measured: bool,
) -> Result<Peaks, OpError> {
    let (mut precision, _) = dtype.compute_precision();
    // Turing has no BF16: bf16 work runs as fp16 there.
    if precision == Precision::Bf16
        && gpu.peak_tflops(Precision::Bf16).is_none()
        && gpu.peak_tflops(Precision::Fp16).is_some()
    {
        precision = Precision::Fp16;
    }
    let store = if use_measured {
        ctx.app().store().ok().map(|s| s.as_ref())
    } else {
        None
    };
    peaks::resolve(gpu, precision, store).map_err(peak_error)
}

/// A number in (0, 1], or an invalid-input error naming the field.
pub fn fraction(name: &str, v: Option<f64>, default: f64) -> Result<f64, OpError> {
    let v = v.unwrap_or(default);
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(OpError::invalid_input(
            format!("{name} must be a fraction in (0, 1], got {v}"),
            format!("Pass {name} like 0.5 (50%)."),
        ))
    }
}

/// A positive integer, or an invalid-input error naming the field.
pub fn positive(name: &str, v: u32) -> Result<u32, OpError> {
    if v == 0 {
        Err(OpError::invalid_input(
            format!("{name} must be at least 1"),
            format!("Pass a positive {name}."),
        ))
    } else {
        Ok(v)
    }
}

/// Split a GPU count over nodes: (nodes, gpus_per_node).
pub fn topology(
    gpus: Option<u32>,
    nodes: Option<u32>,
    gpus_per_node: Option<u32>,
) -> Result<(u32, u32), OpError> {
    // gpus and gpus_per_node without nodes: the nodes follow (16 GPUs at 8 per node are 2 nodes).
    let nodes = match (nodes, gpus, gpus_per_node) {
        (None, Some(g), Some(p)) if p > 0 && g > 0 => {
            if !g.is_multiple_of(p) {
                return Err(OpError::invalid_input(
                    format!("{g} GPUs do not fill whole nodes of {p} GPUs"),
                    "Pass gpus as a multiple of gpus_per_node, or pass nodes as well.",
                ));
            }
            g / p
        }
        (n, _, _) => n.unwrap_or(1),
    };
    let nodes = positive("nodes", nodes)?;
    let per = match (gpus, gpus_per_node) {
        (_, Some(p)) => positive("gpus_per_node", p)?,
        (Some(g), None) => {
            let g = positive("gpus", g)?;
            if !g.is_multiple_of(nodes) {
                return Err(OpError::invalid_input(
                    format!("{g} GPUs do not split evenly over {nodes} nodes"),
                    "Pass gpus as the total over all nodes, a multiple of nodes, or pass gpus_per_node.",
                ));
            }
            g / nodes
        }
        (None, None) => 8,
    };
    if let Some(g) = gpus
        && g != nodes * per
    {
        return Err(OpError::invalid_input(
            format!("gpus = {g} but nodes × gpus_per_node = {}", nodes * per),
            "Give gpus (total) or gpus_per_node, consistently.",
        ));
    }
    Ok((nodes, per))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn unknown_models_and_gpus_are_invalid_input_listing_known_ones() {
        let e = resolve_model(Some("llama-9"), None, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert!(e.message.contains("llama-3.1-70b"));
        let e = resolve_gpu("v100").unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert!(e.message.contains("h100-sxm"));
    }

    #[test]
    fn topology_splits_consistently() {
        assert_eq!(topology(Some(16), Some(2), None).unwrap(), (2, 8));
        assert_eq!(topology(None, None, None).unwrap(), (1, 8));
        assert_eq!(topology(Some(4), None, None).unwrap(), (1, 4));
        assert!(topology(Some(10), Some(3), None).is_err());
        assert!(topology(Some(16), Some(2), Some(4)).is_err());
        assert_eq!(topology(Some(16), None, Some(8)).unwrap(), (2, 8));
        assert!(topology(Some(12), None, Some(8)).is_err());
    }
}
