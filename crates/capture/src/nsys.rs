//! Nsight Systems: the `nsys profile` and `nsys export` command lines, and
//! the capture that runs them ([`capture`], [`capture_per_rank`]).

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod capture;
pub use capture::{NsysCapture, RankCaptures, capture, capture_per_rank};

/// What to trace, as a named preset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NsysPreset {
    /// CUDA API, kernels, copies and NVTX ranges; CPU sampling and context
    /// switches off: the smallest overhead and report.
    #[default]
    Light,
    /// Light plus OS runtime calls (osrt), cuBLAS and cuDNN, and CUDA memory
    /// usage. NCCL shows through its CUDA kernels and the NVTX ranges NCCL emits.
    Full,
}

impl NsysPreset {
    pub fn trace(self) -> &'static [&'static str] {
        match self {
            NsysPreset::Light => &["cuda", "nvtx"],
            NsysPreset::Full => &["cuda", "nvtx", "osrt", "cublas", "cudnn"],
        }
    }
}

/// When to start collecting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaptureRange {
    /// The whole run.
    #[default]
    None,
    /// Only inside the NVTX range named by `nvtx_range` (the first one, by default).
    Nvtx,
    /// Between `cudaProfilerStart()` and `cudaProfilerStop()` (torch.cuda.profiler.start/stop).
    CudaProfilerApi,
}

/// Options of one `nsys profile` run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NsysOptions {
    pub preset: NsysPreset,
    /// Explicit `--trace` list; replaces the preset's.
    pub trace: Option<Vec<String>>,
    pub capture_range: CaptureRange,
    /// NVTX range name for `capture_range = nvtx`.
    pub nvtx_range: Option<String>,
    /// Stop collecting after this many seconds (`--duration`).
    pub duration_s: Option<u32>,
    /// Start collecting after this many seconds (`--delay`).
    pub delay_s: Option<u32>,
    pub force_overwrite: bool,
}

impl NsysOptions {
    /// Check the options (a message saying what is wrong).
    pub fn validate(&self) -> Result<(), String> {
        if let Some(t) = &self.trace {
            if t.is_empty() {
                return Err("`trace` is empty; leave it out to use the preset".into());
            }
            // nsys names its trace APIs in lower case with dashes (cuda, nvtx,
            // osrt, cublas-verbose, ...); anything else would be an argument
            // injection or a typo. Which names exist depends on the nsys version,
            // so unknown names are left to nsys to refuse.
            for v in t {
                if v.is_empty()
                    || !v
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                {
                    return Err(format!(
                        "trace `{v}` is not a trace name (lower-case letters, digits and dashes, e.g. cuda, nvtx, osrt, cublas)"
                    ));
                }
            }
        }
        match (self.capture_range, &self.nvtx_range) {
            (CaptureRange::Nvtx, Some(r)) if r.trim().is_empty() => {
                return Err("`nvtx_range` is empty".into());
            }
            (CaptureRange::None | CaptureRange::CudaProfilerApi, Some(_)) => {
                return Err("`nvtx_range` needs \"capture_range\": \"nvtx\"".into());
            }
            _ => {}
        }
        if self.capture_range == CaptureRange::Nvtx && !self.traces().contains(&"nvtx".into()) {
            return Err("an NVTX capture range needs `nvtx` in `trace`".into());
        }
        if self.duration_s == Some(0) {
            return Err("`duration_s` must be at least 1".into());
        }
        Ok(())
    }

    pub fn traces(&self) -> Vec<String> {
        match &self.trace {
            Some(t) => t.clone(),
            None => self.preset.trace().iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Arguments of `nsys profile` writing `<out_base>.nsys-rep`, followed by the command.
    pub fn profile_args(&self, out_base: &Path, command: &[String]) -> Vec<String> {
        let mut a = vec![
            "profile".to_string(),
            format!("--trace={}", self.traces().join(",")),
            "--sample=none".into(),
            "--cpuctxsw=none".into(),
            // CUDA graphs traced per node: aisp analyses kernels, and at the
            // default (`graph`) a replayed graph's kernels are absent from the
            // kernel table, so a decode loop under CUDA graphs would read as idle.
            "--cuda-graph-trace=node".into(),
        ];
        if self.preset == NsysPreset::Full && self.trace.is_none() {
            a.push("--cuda-memory-usage=true".into());
        }
        match self.capture_range {
            CaptureRange::None => {}
            CaptureRange::Nvtx => {
                a.push("--capture-range=nvtx".into());
                if let Some(r) = &self.nvtx_range {
                    a.push(format!("--nvtx-capture={r}"));
                }
                a.push("--capture-range-end=stop".into());
            }
            CaptureRange::CudaProfilerApi => {
                a.push("--capture-range=cudaProfilerApi".into());
                a.push("--capture-range-end=stop".into());
            }
        }
        if let Some(d) = self.duration_s {
            a.push(format!("--duration={d}"));
        }
        if let Some(d) = self.delay_s {
            a.push(format!("--delay={d}"));
        }
        a.push(format!("--force-overwrite={}", self.force_overwrite));
        a.push(format!("--output={}", out_base.display()));
        a.extend(command.iter().cloned());
        a
    }

    /// Environment the run needs: NVTX capture ranges match PyTorch's
    /// (unregistered) range names only with this set.
    pub fn env(&self) -> Vec<(String, String)> {
        if self.capture_range == CaptureRange::Nvtx {
            vec![("NSYS_NVTX_PROFILER_REGISTER_ONLY".into(), "0".into())]
        } else {
            Vec::new()
        }
    }
}

pub use aisp_profile::nsysrep::export_args;

/// How a launcher starts one process per rank, and the variable holding the rank there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// `torchrun`, `srun`, `mpirun` or `other`.
    pub kind: &'static str,
    /// The environment variable each rank's process sees its global rank in.
    pub rank_var: &'static str,
}

/// Recognise a launcher command (`torchrun ...`, `python -m torch.distributed.run ...`, `srun ...`, `mpirun ...`).
pub fn launcher_of(launcher: &[String]) -> Launcher {
    let base = |s: &str| {
        Path::new(s)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string()
    };
    let first = launcher.first().map(|s| base(s)).unwrap_or_default();
    if first == "torchrun"
        || launcher
            .iter()
            .any(|a| a == "torch.distributed.run" || a == "torch.distributed.launch")
    {
        Launcher {
            kind: "torchrun",
            rank_var: "RANK",
        }
    } else if first == "srun" {
        Launcher {
            kind: "srun",
            rank_var: "SLURM_PROCID",
        }
    } else if first == "mpirun" || first == "mpiexec" {
        Launcher {
            kind: "mpirun",
            rank_var: "OMPI_COMM_WORLD_RANK",
        }
    } else {
        Launcher {
            kind: "other",
            rank_var: "RANK",
        }
    }
}

/// Per-rank capture: nsys runs inside the launcher, once per rank, each
/// writing `<dir>/rank_<rank>.nsys-rep` (`%q{VAR}` is expanded by nsys in each
/// rank's environment). torchrun runs its "script" with `--no-python` so that
/// the script can be nsys itself. Returns the argv (launcher first).
pub fn per_rank_argv(
    launcher: &[String],
    nsys: &Path,
    opts: &NsysOptions,
    dir: &Path,
    command: &[String],
) -> Vec<String> {
    let l = launcher_of(launcher);
    let mut argv: Vec<String> = launcher.to_vec();
    if l.kind == "torchrun"
        && !launcher
            .iter()
            .any(|a| a == "--no-python" || a == "--no_python")
    {
        argv.push("--no-python".into());
    }
    argv.push(nsys.display().to_string());
    let base = dir.join(format!("rank_%q{{{}}}", l.rank_var));
    argv.extend(opts.profile_args(&base, command));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_rank_capture_puts_nsys_inside_the_launcher() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let opts = NsysOptions {
            preset: NsysPreset::Light,
            trace: None,
            capture_range: CaptureRange::None,
            nvtx_range: None,
            duration_s: None,
            delay_s: None,
            force_overwrite: true,
        };
        let argv = per_rank_argv(
            &v(&["torchrun", "--nproc_per_node=2"]),
            Path::new("/opt/nsys"),
            &opts,
            Path::new("/runs/r1"),
            &v(&["python3", "train.py"]),
        );
        assert_eq!(
            &argv[..4],
            &v(&["torchrun", "--nproc_per_node=2", "--no-python", "/opt/nsys"])[..]
        );
        assert!(
            argv.contains(&"--output=/runs/r1/rank_%q{RANK}".to_string()),
            "{argv:?}"
        );
        assert_eq!(&argv[argv.len() - 2..], &v(&["python3", "train.py"])[..]);
        let srun = per_rank_argv(
            &v(&["srun", "-n", "16"]),
            Path::new("nsys"),
            &opts,
            Path::new("/r"),
            &v(&["python3", "t.py"]),
        );
        assert_eq!(&srun[..4], &v(&["srun", "-n", "16", "nsys"])[..]);
        assert!(srun.contains(&"--output=/r/rank_%q{SLURM_PROCID}".to_string()));
        assert_eq!(
            launcher_of(&v(&["python3", "-m", "torch.distributed.run"])).rank_var,
            "RANK"
        );
    }

    fn cmd() -> Vec<String> {
        vec![
            "python3".into(),
            "train.py".into(),
            "--steps".into(),
            "5".into(),
        ]
    }

    #[test]
    fn light_preset_traces_cuda_and_nvtx_without_sampling() {
        let o = NsysOptions {
            force_overwrite: true,
            ..NsysOptions::default()
        };
        o.validate().unwrap();
        assert_eq!(
            o.profile_args(Path::new("/runs/r/profile"), &cmd()),
            vec![
                "profile",
                "--trace=cuda,nvtx",
                "--sample=none",
                "--cpuctxsw=none",
                "--cuda-graph-trace=node",
                "--force-overwrite=true",
                "--output=/runs/r/profile",
                "python3",
                "train.py",
                "--steps",
                "5"
            ]
        );
        assert!(o.env().is_empty());
    }

    #[test]
    fn full_preset_with_an_nvtx_range_and_a_duration() {
        let o = NsysOptions {
            preset: NsysPreset::Full,
            capture_range: CaptureRange::Nvtx,
            nvtx_range: Some("step_5".into()),
            duration_s: Some(30),
            ..NsysOptions::default()
        };
        o.validate().unwrap();
        let a = o.profile_args(Path::new("p"), &cmd());
        assert_eq!(
            a[..10],
            [
                "profile",
                "--trace=cuda,nvtx,osrt,cublas,cudnn",
                "--sample=none",
                "--cpuctxsw=none",
                "--cuda-graph-trace=node",
                "--cuda-memory-usage=true",
                "--capture-range=nvtx",
                "--nvtx-capture=step_5",
                "--capture-range-end=stop",
                "--duration=30",
            ]
        );
        assert_eq!(
            o.env(),
            vec![(
                "NSYS_NVTX_PROFILER_REGISTER_ONLY".to_string(),
                "0".to_string()
            )]
        );
    }

    #[test]
    fn bad_options_are_refused_with_a_reason() {
        let bad = |o: NsysOptions| o.validate().unwrap_err();
        assert!(
            bad(NsysOptions {
                trace: Some(vec!["cuda".into(), "nvtx --sample=cpu".into()]),
                ..NsysOptions::default()
            })
            .starts_with("trace `nvtx --sample=cpu` is not a trace name")
        );
        assert!(
            bad(NsysOptions {
                nvtx_range: Some("step".into()),
                ..NsysOptions::default()
            })
            .contains("capture_range")
        );
        assert!(
            bad(NsysOptions {
                capture_range: CaptureRange::Nvtx,
                trace: Some(vec!["cuda".into()]),
                ..NsysOptions::default()
            })
            .contains("needs `nvtx`")
        );
        assert!(
            bad(NsysOptions {
                duration_s: Some(0),
                ..NsysOptions::default()
            })
            .contains("duration_s")
        );
    }

    #[test]
    fn export_writes_sqlite() {
        assert_eq!(
            export_args(
                Path::new("/r/profile.nsys-rep"),
                Path::new("/r/profile.sqlite")
            ),
            vec![
                "export",
                "--type=sqlite",
                "--include-blobs=true",
                "--force-overwrite=true",
                "--output=/r/profile.sqlite",
                "/r/profile.nsys-rep"
            ]
        );
    }
}
