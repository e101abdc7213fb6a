//! The links a parallel group talks over: NVLink (switched or bridged) or
//! PCIe inside a node, the network between nodes. Bandwidths are per GPU and
//! per direction, from the GPU catalog or the caller.

use schemars::JsonSchema;
use serde::Serialize;

use aisp_knowledge::gpus::Gpu;

/// Default network bandwidth per GPU between nodes: one 400 Gb/s NIC per GPU
/// (= 50 GB/s per direction), as in DGX H100 (8 ConnectX-7 400G ports for 8
/// GPUs). Override with `inter_node_gb_per_s`.
pub const DEFAULT_INTER_NODE_GB_PER_S: f64 = 50.0;
pub const DGX_H100_URL: &str =
    "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html";

/// Per-GPU, per-direction bandwidths of the two link levels.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Links {
    /// GPU-to-GPU inside a node, GB/s per direction.
    pub intra_node_gb_per_s: f64,
    /// What the intra-node figure is (NVLink, NVLink bridge or PCIe) and where it comes from.
    pub intra_node_kind: String,
    /// GPU-to-GPU across nodes, GB/s per direction.
    pub inter_node_gb_per_s: f64,
    pub inter_node_kind: String,
    /// GPUs in one node.
    pub gpus_per_node: u32,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkError {
    #[error("the catalog has no NVLink or PCIe bandwidth for {0}; pass intra_node_gb_per_s")]
    NoIntraNode(String),
}

impl Links {
    /// Links for `gpus_per_node` GPUs of `gpu`: NVLink when the part has it
    /// (a 2-GPU bridge only helps groups of 2), else PCIe; the network figure
    /// from the caller or the default above.
    pub fn for_gpu(
        gpu: &Gpu,
        gpus_per_node: u32,
        intra_override: Option<f64>,
        inter_override: Option<f64>,
    ) -> Result<Links, LinkError> {
        let (intra, kind) = match intra_override {
            Some(v) => (v, "given in the call".to_string()),
            None => {
                let nvlink = gpu.nvlink_per_direction_gb_per_s();
                let bridged = nvlink.is_some() && !gpu.has_switched_nvlink();
                match (nvlink, gpu.pcie_per_direction_gb_per_s()) {
                    (Some(nv), _) if !bridged || gpus_per_node <= 2 => (
                        nv,
                        format!(
                            "{}: {} GB/s total NVLink / 2 per direction ({})",
                            gpu.id,
                            gpu.nvlink_gb_per_s.value.unwrap_or(0.0),
                            gpu.nvlink_gb_per_s
                                .source_url
                                .as_deref()
                                .unwrap_or("catalog")
                        ),
                    ),
                    (_, Some(pcie)) => (
                        pcie,
                        format!(
                            "{}: PCIe {} GB/s total / 2 per direction ({}){}",
                            gpu.id,
                            gpu.pcie_gb_per_s.value.unwrap_or(0.0),
                            gpu.pcie_gb_per_s.source_url.as_deref().unwrap_or("catalog"),
                            if bridged {
                                "; the NVLink bridge pairs only 2 GPUs"
                            } else {
                                ""
                            }
                        ),
                    ),
                    (Some(nv), None) => (nv, format!("{}: NVLink bridge per direction", gpu.id)),
                    (None, None) => return Err(LinkError::NoIntraNode(gpu.id.clone())),
                }
            }
        };
        let (inter, inter_kind) = match inter_override {
            Some(v) => (v, "given in the call".to_string()),
            None => (
                DEFAULT_INTER_NODE_GB_PER_S,
                format!(
                    "assumed one 400 Gb/s NIC per GPU = 50 GB/s per direction, as in DGX H100 ({DGX_H100_URL}); pass inter_node_gb_per_s for your fabric"
                ),
            ),
        };
        Ok(Links {
            intra_node_gb_per_s: intra,
            intra_node_kind: kind,
            inter_node_gb_per_s: inter.min(intra),
            inter_node_kind: inter_kind,
            gpus_per_node: gpus_per_node.max(1),
        })
    }

    /// Bandwidth (bytes/s per direction) of a group of `size` ranks whose
    /// neighbours are `stride` ranks apart, with ranks numbered node by node.
    pub fn group_bytes_per_s(&self, size: u32, stride: u32) -> f64 {
        if size.saturating_mul(stride) > self.gpus_per_node {
            self.inter_node_gb_per_s * 1e9
        } else {
            self.intra_node_gb_per_s * 1e9
        }
    }

    /// Whether such a group crosses nodes.
    pub fn crosses_nodes(&self, size: u32, stride: u32) -> bool {
        size > 1 && size.saturating_mul(stride) > self.gpus_per_node
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aisp_knowledge::gpus;

    #[test]
    fn links_come_from_the_catalog() {
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let l = Links::for_gpu(h100, 8, None, None).unwrap();
        assert_eq!(l.intra_node_gb_per_s, 450.0);
        assert_eq!(l.inter_node_gb_per_s, 50.0);
        assert_eq!(l.group_bytes_per_s(8, 1), 450e9);
        assert_eq!(l.group_bytes_per_s(4, 4), 50e9);
        assert!(!l.crosses_nodes(8, 1) && l.crosses_nodes(2, 8));
        // L40S has no NVLink: PCIe Gen4 64 GB/s total, 32 per direction.
        let l40s = Links::for_gpu(gpus::by_id("l40s").unwrap(), 4, None, None).unwrap();
        assert_eq!(l40s.intra_node_gb_per_s, 32.0);
        // H100 PCIe's NVLink bridge pairs 2 GPUs: groups of 8 use PCIe.
        let pcie = Links::for_gpu(gpus::by_id("h100-pcie").unwrap(), 8, None, None).unwrap();
        assert_eq!(pcie.intra_node_gb_per_s, 64.0);
    }
}
