//! Running a Python script under `torch.profiler` through the wrapper script
//! shipped with aisp (`torch_profile.py`, written into the run folder): the
//! command line, and the capture that runs it and analyses its traces
//! ([`capture`]).

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod capture;
pub use capture::{TorchCapture, capture};

/// The wrapper, compiled into aisp.
pub const WRAPPER: &str = include_str!("torch_profile.py");
/// Its file name in the run folder.
pub const WRAPPER_NAME: &str = "aisp_torch_profile.py";

/// What advances the profiler schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepOn {
    /// Every optimizer step (a global optimizer hook): training scripts need no change.
    #[default]
    Optimizer,
    /// No schedule: record the whole run (inference scripts, short programs).
    None,
}

/// Options of the wrapper.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchOptions {
    pub wait: u32,
    pub warmup: u32,
    pub active: u32,
    pub step_on: StepOn,
    pub record_shapes: bool,
    pub profile_memory: bool,
    pub with_stack: bool,
    pub with_flops: bool,
}

impl Default for TorchOptions {
    fn default() -> Self {
        TorchOptions {
            wait: 1,
            warmup: 1,
            active: 3,
            step_on: StepOn::Optimizer,
            record_shapes: true,
            profile_memory: true,
            with_stack: false,
            with_flops: true,
        }
    }
}

impl TorchOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.active == 0 {
            return Err("`active` must be at least 1 step".into());
        }
        if self.wait > 10_000 || self.warmup > 10_000 || self.active > 10_000 {
            return Err("wait, warmup and active must each be at most 10000 steps".into());
        }
        Ok(())
    }

    fn args(&self, out_dir: &Path) -> Vec<String> {
        let mut a = vec![
            "--out".to_string(),
            out_dir.display().to_string(),
            "--wait".into(),
            self.wait.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--active".into(),
            self.active.to_string(),
            "--step-on".into(),
            match self.step_on {
                StepOn::Optimizer => "optimizer".into(),
                StepOn::None => "none".into(),
            },
        ];
        for (on, flag) in [
            (self.record_shapes, "--record-shapes"),
            (self.profile_memory, "--profile-memory"),
            (self.with_stack, "--with-stack"),
            (self.with_flops, "--with-flops"),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        a
    }
}

/// Insert the wrapper in front of the user's script: the first argument
/// ending in `.py` is the script; what comes before it (the interpreter, or a
/// launcher such as `torchrun --nproc_per_node=2`) stays in front.
pub fn wrap_command(
    command: &[String],
    wrapper: &Path,
    out_dir: &Path,
    opts: &TorchOptions,
) -> Result<Vec<String>, String> {
    if command.iter().any(|a| a == "-m" || a == "-c") && !command.iter().any(|a| a.ends_with(".py"))
    {
        return Err(
            "the PyTorch profiler capture runs a script file; `python -m module` and `python -c` are not supported"
                .into(),
        );
    }
    let Some(i) = command.iter().position(|a| a.ends_with(".py")) else {
        return Err("no Python script (an argument ending in .py) in `command`".into());
    };
    let mut out: Vec<String> = if i == 0 {
        vec!["python3".into()]
    } else {
        command[..i].to_vec()
    };
    out.push(wrapper.display().to_string());
    out.extend(opts.args(out_dir));
    out.push("--".into());
    out.extend(command[i..].iter().cloned());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_wrapper_goes_in_front_of_the_script() {
        let o = TorchOptions::default();
        let w = Path::new("/r/aisp_torch_profile.py");
        let out = Path::new("/r");
        assert_eq!(
            wrap_command(
                &s(&["python3", "-u", "train.py", "--lr", "0.1"]),
                w,
                out,
                &o
            )
            .unwrap()
            .join(" "),
            "python3 -u /r/aisp_torch_profile.py --out /r --wait 1 --warmup 1 --active 3 --step-on optimizer \
--record-shapes --profile-memory --with-flops -- train.py --lr 0.1"
        );
        let o2 = TorchOptions {
            step_on: StepOn::None,
            record_shapes: false,
            profile_memory: false,
            with_flops: false,
            with_stack: true,
            ..TorchOptions::default()
        };
        assert_eq!(
            wrap_command(
                &s(&["torchrun", "--standalone", "--nproc_per_node=2", "ddp.py"]),
                w,
                out,
                &o2
            )
            .unwrap()
            .join(" "),
            "torchrun --standalone --nproc_per_node=2 /r/aisp_torch_profile.py --out /r --wait 1 --warmup 1 \
--active 3 --step-on none --with-stack -- ddp.py"
        );
        assert_eq!(
            wrap_command(&s(&["train.py"]), w, out, &o).unwrap()[..2],
            s(&["python3", "/r/aisp_torch_profile.py"])[..]
        );
    }

    #[test]
    fn commands_without_a_script_are_refused() {
        let o = TorchOptions::default();
        let w = Path::new("w.py");
        assert!(
            wrap_command(&s(&["python3", "-m", "mod"]), w, w, &o)
                .unwrap_err()
                .contains("-m module")
        );
        assert!(
            wrap_command(&s(&["./train"]), w, w, &o)
                .unwrap_err()
                .contains("no Python script")
        );
        assert!(
            TorchOptions {
                active: 0,
                ..TorchOptions::default()
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn the_wrapper_is_valid_python_that_imports_torch_lazily() {
        assert!(WRAPPER.contains("register_optimizer_step_post_hook"));
        // torch is imported inside main(), after argument parsing.
        let first_torch = WRAPPER.find("import torch").unwrap();
        assert!(first_torch > WRAPPER.find("def main").unwrap());
    }
}
