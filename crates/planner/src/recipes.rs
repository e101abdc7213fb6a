//! Ready-to-use artifacts derived from a plan: NCCL environment settings,
//! Slurm batch scripts, and PyTorch FSDP2 / tensor-parallel / pipelining
//! snippets, each setting with the reason and source behind it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::links::Links;
use super::model::round;
use aisp_knowledge::gpus::Gpu;
use aisp_knowledge::models::Architecture;

pub const NCCL_ENV_URL: &str = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html";
pub const NCCL_TESTS_URL: &str = "https://github.com/NVIDIA/nccl-tests";
pub const MEGATRON_URL: &str = "https://github.com/NVIDIA/Megatron-LM";
pub const TORCHRUN_URL: &str = "https://pytorch.org/docs/stable/elastic/run.html";
pub const SLURM_SRUN_URL: &str = "https://slurm.schedmd.com/srun.html";
pub const FSDP2_URL: &str = "https://pytorch.org/docs/stable/distributed.fsdp.fully_shard.html";
pub const TP_URL: &str = "https://pytorch.org/docs/stable/distributed.tensor.parallel.html";
pub const PIPELINING_URL: &str = "https://pytorch.org/docs/stable/distributed.pipelining.html";

/// The network between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    Infiniband,
    Roce,
    Ethernet,
}

/// One environment variable with why and where it is documented.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EnvSetting {
    pub name: String,
    /// The value; placeholders in angle brackets name what to look up, with `find_with`.
    pub value: String,
    pub why: String,
    /// A command that finds the right value on your machine, when it is site-specific.
    pub find_with: Option<String>,
    pub source_url: String,
}

fn env(name: &str, value: &str, why: &str, find_with: Option<&str>, source: &str) -> EnvSetting {
    EnvSetting {
        name: name.into(),
        value: value.into(),
        why: why.into(),
        find_with: find_with.map(String::from),
        source_url: source.into(),
    }
}

/// NCCL settings for a topology, the bus bandwidth to expect, and how to check.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NcclAdvice {
    pub settings: Vec<EnvSetting>,
    /// Peak bus bandwidth inside a node (per GPU, per direction), GB/s: what nccl-tests busbw approaches.
    pub expected_intra_node_busbw_gb_per_s: f64,
    /// Peak bus bandwidth across nodes, GB/s (null for one node).
    pub expected_inter_node_busbw_gb_per_s: Option<f64>,
    /// Commands that verify the settings.
    pub checks: Vec<String>,
    /// Settings deliberately not recommended, and why.
    pub not_recommended: Vec<String>,
}

pub fn nccl_advice(
    gpu: &Gpu,
    links: &Links,
    nodes: u32,
    network: Option<Network>,
    tensor_parallel: bool,
) -> NcclAdvice {
    let mut s = vec![env(
        "NCCL_DEBUG",
        "WARN",
        "Quiet by default; run once with INFO to see which transport (NVLink P2P, NVLS, NET/IB, NET/Socket) each channel uses.",
        None,
        NCCL_ENV_URL,
    )];
    if tensor_parallel {
        s.push(env(
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "1",
            "Megatron-style tensor/sequence parallelism relies on kernels being issued in order so communication overlaps compute as scheduled.",
            None,
            MEGATRON_URL,
        ));
    }
    let mut not = vec![
        "NCCL_P2P_DISABLE=1: only as a diagnosis when peer-to-peer hangs (IOMMU/ACS on some PCIe hosts); it forces traffic through host memory.".to_string(),
        "NCCL_ALGO / NCCL_PROTO: NCCL's tuner picks per message size; pin them only to reproduce a measurement.".to_string(),
    ];
    if nodes > 1 {
        s.push(env(
            "NCCL_SOCKET_IFNAME",
            "<bootstrap interface>",
            "Interface NCCL uses for bootstrap and, without RDMA, for data; pick the cluster network, not docker0 or lo.",
            Some("ip -br addr"),
            NCCL_ENV_URL,
        ));
        match network.unwrap_or(Network::Infiniband) {
            Network::Infiniband | Network::Roce => {
                s.push(env(
                    "NCCL_IB_HCA",
                    "<HCAs next to the GPUs, e.g. mlx5_0,mlx5_1,...>",
                    "Restrict NCCL to the RDMA adapters that carry GPU traffic (one per GPU on DGX-class nodes); storage or management HCAs slow rings down.",
                    Some("ibv_devices; nvidia-smi topo -m"),
                    NCCL_ENV_URL,
                ));
                if network == Some(Network::Roce) {
                    s.push(env(
                        "NCCL_IB_GID_INDEX",
                        "<RoCE v2 GID index, often 3>",
                        "RoCE needs the GID of the RoCE v2 address; the wrong index fails or falls back to v1.",
                        Some("show_gids"),
                        NCCL_ENV_URL,
                    ));
                }
                not.push("NCCL_NET_GDR_LEVEL: leave automatic; confirm GPUDirect RDMA is used in the NCCL_DEBUG=INFO log instead.".into());
            }
            Network::Ethernet => {
                s.push(env(
                    "NCCL_SOCKET_NTHREADS",
                    "4",
                    "TCP transport: more threads per connection help reach high-bandwidth NICs (NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD must stay ≤ 64).",
                    None,
                    NCCL_ENV_URL,
                ));
                s.push(env(
                    "NCCL_NSOCKS_PERTHREAD",
                    "4",
                    "TCP transport: several sockets per thread spread traffic over NIC queues.",
                    None,
                    NCCL_ENV_URL,
                ));
            }
        }
    }
    let gpn = links.gpus_per_node;
    let mut checks = vec![format!(
        "all_reduce_perf -b 8M -e 8G -f 2 -g {gpn}   # nccl-tests, one node: busbw should approach {:.0} GB/s",
        links.intra_node_gb_per_s
    )];
    if nodes > 1 {
        checks.push(format!(
            "srun --nodes={nodes} --ntasks-per-node={gpn} --gpus-per-task=1 all_reduce_perf -b 8M -e 8G -f 2 -g 1   # busbw should approach {:.0} GB/s",
            links.inter_node_gb_per_s
        ));
    }
    checks.push("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET <your launch> 2>&1 | grep -E 'via (P2P|NET|SHM)|NVLS'".into());
    let _ = gpu;
    NcclAdvice {
        settings: s,
        expected_intra_node_busbw_gb_per_s: links.intra_node_gb_per_s,
        expected_inter_node_busbw_gb_per_s: (nodes > 1).then_some(links.inter_node_gb_per_s),
        checks,
        not_recommended: not,
    }
}

/// How ranks are launched under Slurm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    /// One torchrun per node spawning one process per GPU.
    Torchrun,
    /// One srun task per GPU, bound to the CPU cores nearest its GPU.
    Srun,
}

/// What a Slurm script needs.
#[derive(Debug, Clone)]
pub struct SlurmJob<'a> {
    pub job_name: &'a str,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub cpus_per_gpu: Option<u32>,
    pub time_limit: &'a str,
    pub partition: Option<&'a str>,
    pub account: Option<&'a str>,
    pub script: &'a str,
    pub script_args: &'a [String],
    pub launcher: Launcher,
    pub env: &'a [EnvSetting],
    /// Capture one Nsight Systems report per rank into this folder (shared storage) and digest each
    /// node's reports on that node (`aisp profile ranks --digest-only`), for `aisp profile ranks DIR/digests`.
    pub profile_dir: Option<&'a str>,
}

/// `nsys profile` for one rank: reports named `<host>_rank_<RANK>` (nsys expands `%h` and `%q{RANK}`).
fn nsys_per_rank(dir: &str) -> String {
    format!(
        "nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true --output={}",
        shell_quote(&format!("{}/%h_rank_%q{{RANK}}", dir.trim_end_matches('/')))
    )
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn slurm_script(j: &SlurmJob) -> String {
    let mut out = String::from("#!/bin/bash\n");
    let mut sb = |k: &str, v: &str| out.push_str(&format!("#SBATCH --{k}={v}\n"));
    sb("job-name", &shell_quote(j.job_name));
    sb("nodes", &j.nodes.to_string());
    sb("gpus-per-node", &j.gpus_per_node.to_string());
    match j.launcher {
        Launcher::Torchrun => sb("ntasks-per-node", "1"),
        Launcher::Srun => sb("ntasks-per-node", &j.gpus_per_node.to_string()),
    }
    if let Some(c) = j.cpus_per_gpu {
        match j.launcher {
            Launcher::Torchrun => sb("cpus-per-task", &(c * j.gpus_per_node).to_string()),
            Launcher::Srun => sb("cpus-per-task", &c.to_string()),
        }
    }
    sb("time", j.time_limit);
    if let Some(p) = j.partition {
        sb("partition", &shell_quote(p));
    }
    if let Some(a) = j.account {
        sb("account", &shell_quote(a));
    }
    out.push_str("#SBATCH --exclusive\n\nset -euo pipefail\n\n");
    out.push_str("# Rendezvous on the first node of the allocation.\n");
    out.push_str(
        "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n",
    );
    out.push_str("export MASTER_PORT=29500\n");
    if let Some(c) = j.cpus_per_gpu {
        out.push_str(&format!("export OMP_NUM_THREADS={c}\n"));
    }
    out.push_str("\n# NCCL settings (aisp_distributed_nccl explains each).\n");
    for e in j.env {
        if e.value.starts_with('<') {
            out.push_str(&format!(
                "# export {}={}   # find with: {}\n",
                e.name,
                e.value,
                e.find_with.as_deref().unwrap_or("see the NCCL docs")
            ));
        } else {
            out.push_str(&format!("export {}={}\n", e.name, shell_quote(&e.value)));
        }
    }
    let args: Vec<String> = j.script_args.iter().map(|a| shell_quote(a)).collect();
    let cmd = format!("{} {}", shell_quote(j.script), args.join(" "));
    out.push('\n');
    match j.launcher {
        Launcher::Torchrun => {
            out.push_str("srun torchrun \\\n");
            out.push_str("  --nnodes=\"$SLURM_NNODES\" \\\n");
            out.push_str(&format!("  --nproc-per-node={} \\\n", j.gpus_per_node));
            out.push_str("  --rdzv-id=\"$SLURM_JOB_ID\" \\\n");
            out.push_str("  --rdzv-backend=c10d \\\n");
            out.push_str("  --rdzv-endpoint=\"$MASTER_ADDR:$MASTER_PORT\" \\\n");
            match j.profile_dir {
                Some(d) => out.push_str(&format!(
                    "  --no-python {} \\\n  python3 {}\n",
                    nsys_per_rank(d),
                    cmd.trim_end()
                )),
                None => out.push_str(&format!("  {}\n", cmd.trim_end())),
            }
        }
        Launcher::Srun => {
            out.push_str(
                "# One task per GPU; Slurm binds each to the cores nearest its GPU (NUMA).\n",
            );
            out.push_str("srun --gpus-per-task=1 --cpu-bind=cores --gpu-bind=closest \\\n");
            out.push_str("  bash -c 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS; exec ");
            let program = match j.profile_dir {
                Some(d) => format!("{} python {}", nsys_per_rank(d), cmd.trim_end()),
                None => format!("python {}", cmd.trim_end()),
            };
            out.push_str(&program.replace('\'', "'\\''"));
            out.push_str("'\n");
        }
    }
    if let Some(d) = j.profile_dir {
        let d = d.trim_end_matches('/');
        out.push_str(&format!(
            "\n# Export and digest each node's rank reports on that node, all in parallel (aisp profile ranks\n\
             # --digest-only writes Parquet digests); then merge anywhere from the digests alone:\n\
             #   aisp profile ranks {merge}\n\
             srun --ntasks-per-node=1 --gpus-per-node=0 bash -c 'for f in {dir}/\"$(hostname)\"_rank_*.nsys-rep; do\n\
             \x20 (nsys export --type=sqlite --include-blobs=true --force-overwrite=true --output=\"${{f%.nsys-rep}}.sqlite\" \"$f\" >/dev/null \\\n\
             \x20  && aisp profile ranks \"${{f%.nsys-rep}}.sqlite\" --digest-only --write-digests {digests} >/dev/null) &\n\
             done\n\
             wait'\n",
            dir = shell_quote(d).replace('\'', "'\\''"),
            digests = shell_quote(&format!("{d}/digests")).replace('\'', "'\\''"),
            merge = shell_quote(&format!("{d}/digests")),
        ));
    }
    out
}

/// A pipeline stage: which layers it holds.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Stage {
    pub stage: u32,
    /// First and last transformer layer (inclusive); null when the stage holds none.
    pub first_layer: Option<u32>,
    pub last_layer: Option<u32>,
    pub holds_embedding: bool,
    pub holds_lm_head: bool,
    pub params_b: f64,
    /// Share of forward FLOPs per token, 0–100.
    pub compute_pct: f64,
}

/// Split layers over `p` stages balancing forward FLOPs per token: each layer
/// costs 2·(its parameters), the LM head 2·vocab·hidden on the last stage
/// (the embedding lookup costs no FLOPs but its memory sits on stage 0).
pub fn split_pipeline(a: &Architecture, p: u32) -> Vec<Stage> {
    let p = p.max(1).min(a.layers);
    let layer_params = a.params_per_layer();
    let embed_one = a.vocab as f64 * a.hidden as f64;
    let head_cost = 2.0 * embed_one;
    let layer_cost = 2.0 * layer_params;
    let total = a.layers as f64 * layer_cost + head_cost;
    // Layers cost the same, so choose how many the last stage (which also runs
    // the head) takes to minimize the most loaded stage, and spread the rest
    // evenly over the other stages.
    let counts: Vec<u32> = if p == 1 {
        vec![a.layers]
    } else {
        let others = p - 1;
        let best_last = (1..=a.layers - others)
            .min_by(|x, y| {
                let cost = |last: u32| {
                    let rest = a.layers - last;
                    let most = rest.div_ceil(others) as f64 * layer_cost;
                    (head_cost + last as f64 * layer_cost).max(most)
                };
                // Ties: give the last stage more layers, evening out the others.
                cost(*x).total_cmp(&cost(*y)).then(y.cmp(x))
            })
            .unwrap_or(1);
        let rest = a.layers - best_last;
        let mut v: Vec<u32> = (0..others)
            .map(|i| rest / others + u32::from(i < rest % others))
            .collect();
        v.push(best_last);
        v
    };
    let mut stages = Vec::new();
    let mut next = 0u32;
    for (s, count) in counts.into_iter().enumerate() {
        let s = s as u32;
        let last = s == p - 1;
        let cost = count as f64 * layer_cost + if last { head_cost } else { 0.0 };
        let params = count as f64 * layer_params
            + if s == 0 { embed_one } else { 0.0 }
            + if last && !(s == 0 && a.tied_embeddings.unwrap_or(false)) {
                embed_one
            } else {
                0.0
            };
        stages.push(Stage {
            stage: s,
            first_layer: (count > 0).then_some(next),
            last_layer: (count > 0).then(|| next + count - 1),
            holds_embedding: s == 0,
            holds_lm_head: last,
            params_b: round(params / 1e9, 3),
            compute_pct: round(cost / total * 100.0, 2),
        });
        next += count;
    }
    stages
}

/// Fraction of a 1F1B step the pipeline idles: (p−1)/(v·m + p−1) with v
/// virtual stages per rank (v = 1: plain 1F1B; Narayanan et al. 2021).
pub fn bubble_fraction(p: u32, m: u32, v: u32) -> f64 {
    let (p, m, v) = (p as f64, m.max(1) as f64, v.max(1) as f64);
    (p - 1.0) / (v * m + p - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aisp_knowledge::{gpus, models};

    #[test]
    fn pipeline_split_covers_every_layer_once_and_balances() {
        let a = &models::by_id("llama-3.1-70b").unwrap().architecture;
        let st = split_pipeline(a, 4);
        assert_eq!(st.len(), 4);
        assert_eq!(st[0].first_layer, Some(0));
        assert_eq!(st[3].last_layer, Some(79));
        for w in st.windows(2) {
            assert_eq!(w[0].last_layer.unwrap() + 1, w[1].first_layer.unwrap());
        }
        // The last stage also runs the LM head, so it gets fewer layers.
        let n = |s: &Stage| s.last_layer.unwrap() - s.first_layer.unwrap() + 1;
        assert!(n(&st[3]) < n(&st[0]));
        let total: f64 = st.iter().map(|s| s.compute_pct).sum();
        assert!((total - 100.0).abs() < 0.05);
        assert!(
            st.iter().all(|s| (s.compute_pct - 25.0).abs() < 1.5),
            "{st:?}"
        );
    }

    #[test]
    fn bubble_fractions() {
        assert_eq!(bubble_fraction(4, 8, 1), 3.0 / 11.0);
        assert_eq!(bubble_fraction(4, 8, 2), 3.0 / 19.0);
        assert_eq!(bubble_fraction(1, 8, 1), 0.0);
    }

    #[test]
    fn nccl_advice_depends_on_topology() {
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let links = Links::for_gpu(h100, 8, None, None).unwrap();
        let one = nccl_advice(h100, &links, 1, None, false);
        assert!(one.settings.iter().all(|s| s.name != "NCCL_IB_HCA"));
        assert_eq!(one.expected_intra_node_busbw_gb_per_s, 450.0);
        assert_eq!(one.expected_inter_node_busbw_gb_per_s, None);
        let multi = nccl_advice(h100, &links, 4, Some(Network::Roce), true);
        let names: Vec<&str> = multi.settings.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&"NCCL_IB_HCA") && names.contains(&"NCCL_IB_GID_INDEX"));
        assert!(names.contains(&"CUDA_DEVICE_MAX_CONNECTIONS"));
        assert_eq!(multi.expected_inter_node_busbw_gb_per_s, Some(50.0));
    }

    #[test]
    fn slurm_script_profiles_each_rank_and_digests_on_each_node() {
        let job = |launcher| SlurmJob {
            job_name: "x",
            nodes: 2,
            gpus_per_node: 4,
            cpus_per_gpu: None,
            time_limit: "1:00:00",
            partition: None,
            account: None,
            script: "t.py",
            script_args: &[],
            launcher,
            env: &[],
            profile_dir: Some("/shared/prof/"),
        };
        let t = slurm_script(&job(Launcher::Torchrun));
        assert!(t.contains("  --no-python nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true --output='/shared/prof/%h_rank_%q{RANK}' \\\n  python3 t.py\n"), "{t}");
        assert!(
            t.contains("bash -c 'for f in /shared/prof/\"$(hostname)\"_rank_*.nsys-rep; do"),
            "{t}"
        );
        assert!(t.contains("aisp profile ranks \"${f%.nsys-rep}.sqlite\" --digest-only --write-digests /shared/prof/digests >/dev/null) &"), "{t}");
        assert!(t.contains("#   aisp profile ranks /shared/prof/digests\n"));
        let s = slurm_script(&job(Launcher::Srun));
        assert!(s.contains("exec nsys profile --trace=cuda,nvtx"), "{s}");
        assert!(
            s.contains("--output='\\''/shared/prof/%h_rank_%q{RANK}'\\'' python t.py'"),
            "{s}"
        );
    }

    #[test]
    fn slurm_script_launches_one_torchrun_per_node() {
        let e = vec![
            env("NCCL_DEBUG", "WARN", "", None, NCCL_ENV_URL),
            env("NCCL_IB_HCA", "<x>", "", Some("ibv_devices"), NCCL_ENV_URL),
        ];
        let args = vec!["--config".to_string(), "my cfg.yaml".to_string()];
        let s = slurm_script(&SlurmJob {
            job_name: "llama",
            nodes: 2,
            gpus_per_node: 8,
            cpus_per_gpu: Some(12),
            time_limit: "24:00:00",
            partition: Some("gpu"),
            account: None,
            script: "train.py",
            script_args: &args,
            launcher: Launcher::Torchrun,
            env: &e,
            profile_dir: None,
        });
        assert!(s.contains("#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=96\n"));
        assert!(s.contains(
            "export NCCL_DEBUG=WARN\n# export NCCL_IB_HCA=<x>   # find with: ibv_devices\n"
        ));
        assert!(s.contains("--nproc-per-node=8"));
        assert!(s.contains("train.py --config 'my cfg.yaml'"));
        let srun = slurm_script(&SlurmJob {
            launcher: Launcher::Srun,
            ..SlurmJob {
                job_name: "x",
                nodes: 1,
                gpus_per_node: 4,
                cpus_per_gpu: None,
                time_limit: "1:00:00",
                partition: None,
                account: None,
                script: "t.py",
                script_args: &[],
                launcher: Launcher::Srun,
                env: &[],
                profile_dir: None,
            }
        });
        assert!(
            srun.contains("--cpu-bind=cores --gpu-bind=closest")
                && srun.contains("#SBATCH --ntasks-per-node=4")
        );
    }
}
