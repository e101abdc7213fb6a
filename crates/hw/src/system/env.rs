//! Environment variables that change how GPU jobs behave, with secrets
//! redacted and the well-known ones explained.

use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct EnvVar {
    pub name: String,
    /// The value, or `<redacted>` for names that suggest a secret.
    pub value: String,
    pub redacted: bool,
    /// What the variable does, for the well-known ones.
    pub meaning: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EnvReport {
    /// The variables that matter for GPU work, sorted by name.
    pub variables: Vec<EnvVar>,
    /// Settings that slow things down or hide problems, each with why.
    pub warnings: Vec<String>,
    /// The process's working directory.
    pub working_directory: Option<String>,
}

/// Prefixes of variables that matter for GPU work.
const PREFIXES: &[&str] = &[
    "CUDA_",
    "NCCL_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "PYTORCH_",
    "NVIDIA_",
    "OMP_",
    "MKL_",
    "KMP_",
    "UCX_",
    "NVSHMEM_",
    "CUBLAS_",
    "CUBLASLT_",
    "CUDNN_",
    "TRITON_",
    "VLLM_",
    "HF_",
    "TRANSFORMERS_",
    "XLA_",
    "JAX_",
    "TF_",
    "DEEPSPEED_",
    "ACCELERATE_",
    "MEGATRON_",
    "SLURM_",
    "OMPI_",
    "PMI_",
    "PMIX_",
    "MALLOC_",
    "GLIBC_",
    "NVTE_",
    "WANDB_",
];

/// Whole names that matter.
const NAMES: &[&str] = &[
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "TOKENIZERS_PARALLELISM",
    "CC",
    "CXX",
    "PATH",
];

/// Parts of a name that suggest its value is a secret.
const SECRET_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "API_KEY",
    "APIKEY",
    "_KEY",
    "AUTH",
    "COOKIE",
    "PRIVATE",
];

/// Explanations of the well-known variables.
const MEANINGS: &[(&str, &str)] = &[
    (
        "CUDA_VISIBLE_DEVICES",
        "Which GPUs CUDA programs see, renumbered from 0 in the order given.",
    ),
    (
        "CUDA_DEVICE_ORDER",
        "PCI_BUS_ID numbers GPUs as nvidia-smi does; the default FASTEST_FIRST may not.",
    ),
    (
        "CUDA_LAUNCH_BLOCKING",
        "1 makes every kernel launch synchronous: for debugging only, it serializes the GPU.",
    ),
    (
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "Hardware work queues per device; Megatron sets 1 so communication kernels are scheduled in issue order.",
    ),
    (
        "CUDA_MODULE_LOADING",
        "LAZY (default since CUDA 12.2) loads kernels on first use, saving memory and start-up time.",
    ),
    (
        "CUBLAS_WORKSPACE_CONFIG",
        "cuBLAS workspace size; :4096:8 or :16:8 is required for deterministic cuBLAS results.",
    ),
    (
        "NVIDIA_TF32_OVERRIDE",
        "0 disables TF32 in cuBLAS/cuDNN globally: FP32 matmuls run several times slower on Ampere and newer.",
    ),
    (
        "PYTORCH_CUDA_ALLOC_CONF",
        "PyTorch caching allocator options; expandable_segments:True reduces fragmentation for changing shapes.",
    ),
    (
        "PYTORCH_ALLOC_CONF",
        "PyTorch allocator options (newer spelling of PYTORCH_CUDA_ALLOC_CONF).",
    ),
    (
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "1 disables the caching allocator: every allocation calls cudaMalloc, which is slow.",
    ),
    (
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "How PyTorch reacts to NCCL errors and timeouts (tear down the process instead of hanging).",
    ),
    (
        "TORCH_NCCL_BLOCKING_WAIT",
        "1 makes collectives block the CPU until done: simpler timeouts, less overlap.",
    ),
    (
        "TORCH_DISTRIBUTED_DEBUG",
        "DETAIL adds checks and logging to every collective: slow, for debugging.",
    ),
    (
        "TORCH_COMPILE_DEBUG",
        "1 dumps torch.compile artifacts: slow compiles and much disk use.",
    ),
    (
        "TORCH_LOGS",
        "Selects torch.compile/dynamo logging (e.g. recompiles, graph_breaks).",
    ),
    (
        "TORCHINDUCTOR_MAX_AUTOTUNE",
        "1 makes Inductor benchmark kernel choices: slower compiles, faster kernels.",
    ),
    (
        "TORCHINDUCTOR_CACHE_DIR",
        "Where Inductor caches compiled kernels (keep it on fast, persistent storage).",
    ),
    (
        "OMP_NUM_THREADS",
        "CPU threads per process for OpenMP and PyTorch intra-op work; torchrun sets 1 by default.",
    ),
    (
        "NCCL_DEBUG",
        "NCCL logging (WARN, INFO, TRACE); INFO shows the chosen transports and rings, TRACE slows collectives.",
    ),
    (
        "NCCL_DEBUG_SUBSYS",
        "Which NCCL subsystems log (INIT, NET, GRAPH, ...).",
    ),
    (
        "NCCL_P2P_DISABLE",
        "1 disables NVLink/PCIe peer-to-peer between GPUs: intra-node collectives go through host memory.",
    ),
    (
        "NCCL_P2P_LEVEL",
        "The farthest topology level (NVL, PIX, PXB, PHB, SYS) at which NCCL uses peer-to-peer.",
    ),
    (
        "NCCL_SHM_DISABLE",
        "1 disables the shared-memory transport between processes.",
    ),
    (
        "NCCL_IB_DISABLE",
        "1 disables InfiniBand/RoCE: multi-node traffic falls back to TCP sockets.",
    ),
    (
        "NCCL_IB_HCA",
        "Which RDMA adapters (and ports) NCCL uses, e.g. mlx5_0:1,mlx5_1:1 or =mlx5_0 for an exact match.",
    ),
    (
        "NCCL_SOCKET_IFNAME",
        "Which network interfaces NCCL uses for bootstrap and socket transport.",
    ),
    (
        "NCCL_NET_GDR_LEVEL",
        "How close NIC and GPU must be (PIX, PXB, PHB, SYS) for GPUDirect RDMA.",
    ),
    (
        "NCCL_ALGO",
        "Forces collective algorithms (Ring, Tree, NVLS, CollNet); usually best left to NCCL's tuner.",
    ),
    (
        "NCCL_PROTO",
        "Forces protocols (LL, LL128, Simple); usually best left to NCCL.",
    ),
    (
        "NCCL_NVLS_ENABLE",
        "NVLink SHARP (in-switch reductions) on NVSwitch systems; 0 disables it.",
    ),
    (
        "NCCL_CUMEM_ENABLE",
        "Whether NCCL allocates buffers with cuMem* APIs (needed for NVLS).",
    ),
    ("NCCL_BUFFSIZE", "Size of NCCL's per-channel buffers."),
    (
        "NCCL_MIN_NCHANNELS",
        "Lower bound on NCCL channels (parallel rings/trees).",
    ),
    ("NCCL_MAX_NCHANNELS", "Upper bound on NCCL channels."),
    (
        "NCCL_TIMEOUT",
        "Not an NCCL variable: PyTorch's timeout is set in init_process_group(timeout=...).",
    ),
    (
        "TOKENIZERS_PARALLELISM",
        "Hugging Face tokenizers threads; false silences fork warnings in DataLoader workers.",
    ),
    (
        "LD_PRELOAD",
        "Libraries loaded into every process first (e.g. an allocator like jemalloc or tcmalloc).",
    ),
    (
        "LD_LIBRARY_PATH",
        "Where shared libraries are searched first: a stale CUDA path here can load the wrong libcudart/libnccl.",
    ),
    ("MASTER_ADDR", "Rendezvous host of torch.distributed."),
    ("WORLD_SIZE", "Total number of ranks in torch.distributed."),
];

/// True when the variable's name suggests a secret.
pub fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // TOKENIZERS_PARALLELISM configures Hugging Face tokenizers; it holds no token.
    if upper.starts_with("TOKENIZERS_") {
        return false;
    }
    SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

/// Hide a password inside a URL value (`https://user:pass@host` → `https://user:<redacted>@host`).
fn redact_url_credentials(value: &str) -> String {
    if let Some(scheme_end) = value.find("://") {
        let rest = &value[scheme_end + 3..];
        if let Some(at) = rest.find('@') {
            let creds = &rest[..at];
            if !creds.contains('/')
                && let Some(colon) = creds.find(':')
            {
                return format!(
                    "{}{}:<redacted>{}",
                    &value[..scheme_end + 3],
                    &creds[..colon],
                    &rest[at..]
                );
            }
        }
    }
    value.to_string()
}

/// True when `name` matters for GPU work.
pub fn matters(name: &str) -> bool {
    NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The variables of `env` accepted by `keep`, redacted and explained, sorted by name.
pub fn select(env: &[(String, String)], keep: impl Fn(&str) -> bool) -> Vec<EnvVar> {
    let mut out: Vec<EnvVar> = env
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, v)| {
            let secret = is_secret(k);
            EnvVar {
                name: k.clone(),
                value: if secret {
                    "<redacted>".to_string()
                } else {
                    redact_url_credentials(v)
                },
                redacted: secret,
                meaning: MEANINGS
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, m)| m.to_string()),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The process environment as (name, value) pairs (values that are not UTF-8 are skipped).
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

pub fn inspect(env: &[(String, String)], working_directory: Option<String>) -> EnvReport {
    let variables = select(env, matters);
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.trim().to_string())
    };
    let mut warnings = Vec::new();
    let mut warn_if = |name: &str, bad: &dyn Fn(&str) -> bool, why: &str| {
        if let Some(v) = get(name)
            && bad(&v)
        {
            warnings.push(format!("{name}={v}: {why}"));
        }
    };
    let is_one = |v: &str| v == "1" || v.eq_ignore_ascii_case("true");
    warn_if(
        "CUDA_LAUNCH_BLOCKING",
        &is_one,
        "every kernel launch waits for the GPU; unset it for performance runs.",
    );
    warn_if(
        "NCCL_P2P_DISABLE",
        &is_one,
        "GPU-to-GPU traffic within the node goes through host memory instead of NVLink/PCIe P2P.",
    );
    warn_if(
        "NCCL_IB_DISABLE",
        &is_one,
        "multi-node NCCL traffic uses TCP sockets instead of RDMA.",
    );
    warn_if(
        "NCCL_SHM_DISABLE",
        &is_one,
        "NCCL cannot use shared memory between processes on this node.",
    );
    warn_if(
        "NVIDIA_TF32_OVERRIDE",
        &|v| v == "0",
        "TF32 tensor cores are disabled for FP32 matmuls and convolutions.",
    );
    warn_if(
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        &is_one,
        "every tensor allocation calls cudaMalloc/cudaFree.",
    );
    warn_if(
        "NCCL_DEBUG",
        &|v| v.eq_ignore_ascii_case("TRACE"),
        "TRACE logging slows every collective.",
    );
    warn_if(
        "TORCH_DISTRIBUTED_DEBUG",
        &|v| v.eq_ignore_ascii_case("DETAIL"),
        "adds consistency checks to every collective.",
    );
    warn_if(
        "TORCH_COMPILE_DEBUG",
        &is_one,
        "torch.compile writes debug artifacts for every graph.",
    );
    warn_if(
        "CUDA_VISIBLE_DEVICES",
        &|v| v.is_empty() || v == "-1",
        "no GPU is visible to CUDA programs.",
    );
    EnvReport {
        variables,
        warnings,
        working_directory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selects_explains_and_redacts() {
        let e = env(&[
            ("HOME", "/root"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("HF_TOKEN", "hf_abcdef"),
            ("WANDB_API_KEY", "123"),
            ("NCCL_DEBUG", "INFO"),
            ("HF_ENDPOINT", "https://me:hunter2@hub.example.com/x"),
            ("AWS_SECRET_ACCESS_KEY", "nope"),
            ("CUDA_LAUNCH_BLOCKING", "1"),
            ("TOKENIZERS_PARALLELISM", "false"),
        ]);
        let r = inspect(&e, Some("/work".into()));
        let names: Vec<&str> = r.variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "CUDA_LAUNCH_BLOCKING",
                "CUDA_VISIBLE_DEVICES",
                "HF_ENDPOINT",
                "HF_TOKEN",
                "NCCL_DEBUG",
                "TOKENIZERS_PARALLELISM",
                "WANDB_API_KEY"
            ]
        );
        let hf = r.variables.iter().find(|v| v.name == "HF_TOKEN").unwrap();
        assert_eq!((hf.value.as_str(), hf.redacted), ("<redacted>", true));
        let wandb = r
            .variables
            .iter()
            .find(|v| v.name == "WANDB_API_KEY")
            .unwrap();
        assert_eq!(wandb.value, "<redacted>");
        let ep = r
            .variables
            .iter()
            .find(|v| v.name == "HF_ENDPOINT")
            .unwrap();
        assert_eq!(ep.value, "https://me:<redacted>@hub.example.com/x");
        let cvd = r
            .variables
            .iter()
            .find(|v| v.name == "CUDA_VISIBLE_DEVICES")
            .unwrap();
        assert_eq!(cvd.value, "0,1");
        assert!(cvd.meaning.as_deref().unwrap().starts_with("Which GPUs"));
        let tok = r
            .variables
            .iter()
            .find(|v| v.name == "TOKENIZERS_PARALLELISM")
            .unwrap();
        assert_eq!((tok.value.as_str(), tok.redacted), ("false", false));
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].starts_with("CUDA_LAUNCH_BLOCKING=1:"));
        assert!(
            !r.variables
                .iter()
                .any(|v| v.value.contains("hunter2") || v.value.contains("hf_abc"))
        );
    }
}
