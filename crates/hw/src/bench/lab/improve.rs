//! The pieces of the kernel-improvement loop that need neither a GPU nor a
//! model: the prompt that carries a kernel's source and measurements, and
//! reading the model's reply (one CUDA code block and a `CHANGE:` line).

/// What the model is told each round.
pub const SYSTEM_PROMPT: &str = "You optimize CUDA C++ kernels. You get a kernel, how it is launched, its parameters and what was measured on the GPU (time, bandwidth or FLOP/s, percent of the hardware roof, registers, occupancy, correctness, and Nsight Compute findings when it was profiled). Answer with the complete new kernel source in one ```cuda code block: same entry name, same parameters in the same order, same launch (grid and block are fixed), no host code. After the block write one line `CHANGE: <what you changed and why it should be faster>`. Correctness comes first: an incorrect kernel is discarded.";

/// A model's proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub source: String,
    pub change: String,
}

/// Read the first fenced code block and the `CHANGE:` line of a reply.
pub fn parse_reply(text: &str) -> Result<Proposal, String> {
    let start = text
        .find("```")
        .ok_or("the reply has no ``` code block with the kernel")?;
    let after = &text[start + 3..];
    // Skip the info string (cuda, c++, cpp, ...).
    let body_start = after.find('\n').ok_or("the code block never starts")? + 1;
    let body = &after[body_start..];
    let end = body.find("```").ok_or("the code block is not closed")?;
    let source = body[..end].trim_end().to_string();
    if source.trim().is_empty() {
        return Err("the code block is empty".into());
    }
    let rest = format!("{}{}", &text[..start], &body[end + 3..]);
    let change = rest
        .lines()
        .find_map(|l| {
            let l = l.trim().trim_start_matches(['*', '-', ' ']);
            l.strip_prefix("CHANGE:")
                .or_else(|| l.strip_prefix("Change:"))
                .map(|c| c.trim().to_string())
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "the model did not say (no CHANGE: line)".into());
    Ok(Proposal { source, change })
}

/// The user message for one round.
pub fn round_prompt(
    source: &str,
    entry: &str,
    context: &str,
    measurements: &str,
    last_attempt: Option<&str>,
    goal: Option<&str>,
) -> String {
    let mut p = format!(
        "Entry: {entry}\n{context}\n\nCurrent best kernel:\n```cuda\n{source}\n```\n\nMeasured:\n{measurements}\n"
    );
    if let Some(last) = last_attempt {
        p.push_str(&format!("\nYour previous attempt: {last}\n"));
    }
    if let Some(g) = goal {
        p.push_str(&format!("\nGoal: {g}\n"));
    }
    p.push_str("\nWrite a faster correct version.");
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read() {
        let r = parse_reply("Here it is:\n```cuda\n__global__ void k() {}\n```\nCHANGE: tiled through shared memory.\n").unwrap();
        assert_eq!(r.source, "__global__ void k() {}");
        assert_eq!(r.change, "tiled through shared memory.");
        let r = parse_reply("**CHANGE:** x\n```\nint a;\n```").unwrap();
        assert_eq!(r.source, "int a;");
        assert!(parse_reply("no code").unwrap_err().contains("no ```"));
        assert!(
            parse_reply("```cuda\nint a;")
                .unwrap_err()
                .contains("not closed")
        );
        assert!(parse_reply("```cuda\n\n```").unwrap_err().contains("empty"));
        assert!(
            parse_reply("```cuda\nint a;\n```")
                .unwrap()
                .change
                .contains("did not say")
        );
    }
}
