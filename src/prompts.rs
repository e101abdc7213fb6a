//! MCP prompts: ready-made starting points for common investigations that a
//! client can offer its user. Each renders to one user message that tells the
//! model which aisp tools to call, in what order.

use serde_json::{Map, Value};

use crate::error::OpError;

pub struct PromptArg {
    pub name: &'static str,
    pub description: &'static str,
    pub required: bool,
}

pub struct PromptDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub arguments: &'static [PromptArg],
    /// The message text with `{name}` placeholders for the arguments.
    pub template: &'static str,
}

impl PromptDef {
    /// Fill the template; a missing required argument is an error.
    pub fn render(&self, args: &Map<String, Value>) -> Result<String, OpError> {
        let mut text = self.template.to_string();
        for arg in self.arguments {
            let value = match args.get(arg.name) {
                Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
                Some(Value::Null) | None if !arg.required => "(not given)".to_string(),
                Some(Value::String(_)) | Some(Value::Null) | None => {
                    return Err(OpError::invalid_input(
                        format!("prompt `{}` needs the argument `{}`", self.name, arg.name),
                        format!("Pass {}: {}", arg.name, arg.description),
                    ));
                }
                Some(other) => other.to_string(),
            };
            text = text.replace(&format!("{{{}}}", arg.name), &value);
        }
        let domains = self.domains_to_enable();
        if !domains.is_empty() {
            let list = domains
                .iter()
                .map(|d| format!("\"{d}\""))
                .collect::<Vec<_>>()
                .join(", ");
            text.push_str(&format!(
                "\n\nSome of these tools may not be in your tool list yet: call aisp_list_domains with \
                 {{\"enable\": [{list}]}} first, or call them by name."
            ));
        }
        Ok(text)
    }

    /// The domains of the tools this prompt names that the default listing
    /// leaves out, in registry order: derived, so a prompt stays right when
    /// tools move between tiers.
    pub fn domains_to_enable(&self) -> Vec<&'static str> {
        let named: Vec<&str> = self
            .template
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("aisp_"))
            .collect();
        crate::registry::domain_names()
            .into_iter()
            .filter(|d| {
                named.iter().any(|n| {
                    crate::registry::find(n).is_some_and(|t| {
                        t.spec().domain == *d && t.spec().tier == crate::registry::Tier::Domain
                    })
                })
            })
            .collect()
    }
}

/// Every prompt the server offers.
pub fn all() -> &'static [PromptDef] {
    PROMPTS
}

pub fn find(name: &str) -> Option<&'static PromptDef> {
    PROMPTS.iter().find(|p| p.name == name)
}

const PROFILE_ARG: PromptArg = PromptArg {
    name: "profile",
    description: "Path to an Nsight Systems export (.sqlite) or report (.nsys-rep) of the run, if you have one.",
    required: false,
};

const PROMPTS: &[PromptDef] = &[
    PromptDef {
        name: "slow_training_step",
        title: "Why is my training step slow?",
        description: "Investigate a slow training step: where the time goes, what limits it, what to change.",
        arguments: &[
            PROFILE_ARG,
            PromptArg {
                name: "details",
                description: "Model, batch size, GPUs, framework and what you already tried.",
                required: false,
            },
        ],
        template: "My training step is slower than it should be. Investigate with aisp's tools, in this order, and \
answer from their results.\n\
Profile: {profile}\nDetails: {details}\n\n\
1. If there is a profile: call aisp_profile_rules on it first (findings ranked by the time at stake), then \
aisp_profile_utilization (busy % over the span, the steps and the steady state), aisp_profile_iterations (per-step CPU \
time vs GPU time, variance, the first step apart) and aisp_profile_gaps (idle gaps and what the CPU did meanwhile). \
If kernels dominate, aisp_profile_kernels (classes: tensor-core vs SIMT GEMMs, elementwise, launch-bound tiny kernels).\n\
2. If there is no profile: call aisp_triage for this machine, then tell me exactly how to capture one \
(aisp_profile_nsys, or `nsys profile -t cuda,nvtx,osrt` and `nsys export --type sqlite`) and stop guessing.\n\
3. Classify the step as host-bound, launch-bound, compute-bound, memory-bound or communication-bound, citing the numbers.\n\
4. For the top cause, get ranked fixes with aisp_recommend (pass the findings) and explain unfamiliar terms with aisp_explain.\n\
Separate facts (with the tool that showed each) from hypotheses, and end with how to verify the fix \
(capture again, then aisp_profile_compare before/after).",
    },
    PromptDef {
        name: "out_of_memory",
        title: "Out of memory",
        description: "Diagnose a CUDA out-of-memory error or a model that does not fit, and find the cheapest fix.",
        arguments: &[
            PromptArg {
                name: "error",
                description: "The error message or traceback (e.g. `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`).",
                required: true,
            },
            PromptArg {
                name: "setup",
                description: "Model (name or size), sequence length, batch size, precision, GPUs and parallelism.",
                required: false,
            },
        ],
        template: "I am running out of GPU memory.\nError: {error}\nSetup: {setup}\n\n\
1. Call aisp_ai_troubleshoot with the error text: it ranks the likely causes (fragmentation, activations, optimizer \
state, KV cache, leaks) with the checks for each.\n\
2. Call aisp_gpu_info to see each GPU's total, used and free memory and the processes holding it.\n\
3. If the setup names a model: for training call aisp_distributed_plan (per-GPU memory of weights, gradients, optimizer \
states and activations per layout, and why layouts do not fit); for inference call aisp_inference_kv_cache and \
aisp_inference_estimate.\n\
4. Explain the options with aisp_explain where useful (activation_checkpointing, zero, memory_fragmentation, mixed_precision).\n\
Answer with the memory arithmetic (which part is too big, in GB), the cheapest change that makes it fit, and its cost \
in speed. Say which numbers are measured and which are estimates.",
    },
    PromptDef {
        name: "multi_gpu_scaling",
        title: "Multi-GPU scaling",
        description: "Find out why a multi-GPU or multi-node run scales poorly and what to change.",
        arguments: &[
            PROFILE_ARG,
            PromptArg {
                name: "setup",
                description: "Model, GPU count and type, nodes, parallelism (DDP, FSDP, TP, PP) and the throughput you see per GPU count.",
                required: false,
            },
        ],
        template: "My multi-GPU training does not scale as it should.\nProfile: {profile}\nSetup: {setup}\n\n\
1. Call aisp_gpu_topology (NVLink vs PCIe paths, NUMA affinity) and aisp_system_network (NICs, RDMA) on the machine.\n\
2. If there is a profile: call aisp_profile_nccl (collectives per device, time, bus bandwidth, rank imbalance), \
aisp_profile_overlap (communication hidden behind compute, same-stream serialization) and aisp_profile_rules.\n\
3. Call aisp_distributed_plan with the model and GPUs to compare the layout in use with the planner's best, and \
aisp_distributed_nccl for the NCCL settings this topology wants.\n\
4. If links look slow, suggest measuring them with aisp_hw_p2p and aisp_hw_nccl (they need the GPUs).\n\
Say whether communication is exposed and how much of the step it costs, citing the numbers, then give the changes \
ranked by expected gain.",
    },
    PromptDef {
        name: "inference_latency",
        title: "Inference latency and throughput",
        description: "Explain where inference latency goes (prefill vs decode) and how to cut it or raise throughput.",
        arguments: &[
            PromptArg {
                name: "model",
                description: "Model name or size (e.g. llama-3.1-70b).",
                required: true,
            },
            PromptArg {
                name: "setup",
                description: "GPUs, serving engine and settings, prompt and output lengths, concurrency, and the latency targets.",
                required: false,
            },
            PROFILE_ARG,
        ],
        template: "Inference is too slow or serves too few requests.\nModel: {model}\nSetup: {setup}\nProfile: {profile}\n\n\
1. Call aisp_inference_estimate for the model and GPUs: prefill and decode latency and throughput from the roofline, \
and the batch size where decode turns compute-bound.\n\
2. Call aisp_inference_kv_cache for the context length and concurrency: bytes per token and how many sequences fit.\n\
3. If there is a profile: call aisp_profile_rules and aisp_profile_kernels (attention, GEMM and copy kernels; \
launch-bound decode steps).\n\
4. Call aisp_inference_vllm for a configuration that meets the target, and aisp_inference_quantization for the \
memory/speed/quality trade of FP8 or INT4.\n\
Separate time to first token from inter-token latency, state which is memory-bound, and rank the changes \
(batching, KV-cache dtype, quantization, tensor parallelism, speculative decoding) by expected effect.",
    },
    PromptDef {
        name: "compare_before_after",
        title: "Compare before and after",
        description: "Compare two captures of the same workload and say whether a change helped, with its noise.",
        arguments: &[
            PromptArg {
                name: "before",
                description: "Profile before the change (.sqlite or .nsys-rep).",
                required: true,
            },
            PromptArg {
                name: "after",
                description: "Profile after the change.",
                required: true,
            },
            PromptArg {
                name: "change",
                description: "What was changed between the two runs.",
                required: false,
            },
        ],
        template: "I changed my workload and captured it again.\nBefore: {before}\nAfter: {after}\nChange: {change}\n\n\
1. Call aisp_profile_compare with before and after: the verdict per step on the step ledger (improved, regressed, \
no_change, not_comparable) with the step change and its 95% interval, comparability fact by fact, each before \
finding's predicted step beside the measured one, and the findings, ledger columns and kernels that moved.\n\
2. If the verdict is no_change or not_comparable, say so plainly with its reason and what to capture so the \
comparison can decide (NVTX steps, the same work per step, the same GPUs, more steps).\n\
3. If the step is not what the fixed finding predicted, say what now limits it (measured_limited_by) and run \
aisp_profile_rules on the after run for the next fix.\n\
Report the step change with its interval, whether the fix did what it predicted, and the kernels and ledger columns \
that account for it.",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prompt_renders_and_names_only_known_tools() {
        let names: Vec<&str> = all().iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "slow_training_step",
                "out_of_memory",
                "multi_gpu_scaling",
                "inference_latency",
                "compare_before_after"
            ]
        );
        for p in all() {
            let mut args = Map::new();
            for a in p.arguments {
                args.insert(a.name.into(), Value::String(format!("<{}>", a.name)));
            }
            let text = p.render(&args).unwrap();
            assert!(
                !text.contains('{') || text.contains("{\""),
                "{}: unfilled placeholder",
                p.name
            );
            for a in p.arguments {
                assert!(
                    text.contains(&format!("<{}>", a.name)),
                    "{}: {} not used",
                    p.name,
                    a.name
                );
            }
            for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("aisp_") {
                    assert!(
                        crate::registry::find(word).is_some(),
                        "{}: names unknown tool {word}",
                        p.name
                    );
                }
            }
        }
        let oom = find("out_of_memory").unwrap();
        assert!(oom.render(&Map::new()).is_err(), "error is required");
        // slow_training_step names aisp_profile_iterations, outside the default listing.
        let slow = find("slow_training_step").unwrap();
        assert!(slow.domains_to_enable().contains(&"profile"));
        let text = slow.render(&Map::new()).unwrap();
        assert!(
            text.contains(r#"aisp_list_domains with {"enable": ["#),
            "{text}"
        );
    }
}
