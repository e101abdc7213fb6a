//! Nsight Compute: the `ncu` command lines (a capture into `.ncu-rep`, the CSV
//! pages of an existing report), the capture that runs them ([`capture`]) and
//! the import of a report made elsewhere ([`import_report`]).

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod capture;
pub use capture::{NcuCapture, capture, import_report};

/// Which metric sections to collect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NcuSet {
    /// Speed of light, launch statistics, occupancy (ncu's default set; the fastest).
    #[default]
    Basic,
    /// Basic plus compute and memory workload analysis, source counters, workload distribution.
    Detailed,
    /// Everything, including warp state (stall reasons) and the roofline: the most replay passes.
    Full,
    /// Speed of light and the roofline charts (arithmetic intensity).
    Roofline,
}

impl NcuSet {
    pub fn as_str(self) -> &'static str {
        match self {
            NcuSet::Basic => "basic",
            NcuSet::Detailed => "detailed",
            NcuSet::Full => "full",
            NcuSet::Roofline => "roofline",
        }
    }
}

/// How kernels are replayed to collect all passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplayMode {
    /// Save and restore memory around each kernel (ncu's default).
    Kernel,
    /// Run the whole application once per pass (needs a deterministic program).
    Application,
    /// Replay ranges (cudaProfilerStart/Stop or NVTX) as a whole.
    Range,
    /// Application replay of ranges.
    AppRange,
}

impl ReplayMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayMode::Kernel => "kernel",
            ReplayMode::Application => "application",
            ReplayMode::Range => "range",
            ReplayMode::AppRange => "app-range",
        }
    }
}

/// Whether ncu locks clocks while profiling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClockControl {
    /// Leave the GPU's clocks alone (aisp's default: never change clocks unasked).
    #[default]
    None,
    /// Lock to base clocks for repeatable numbers (ncu's own default).
    Base,
}

/// Options of one `ncu` capture.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NcuOptions {
    pub set: NcuSet,
    /// Sections (`--section`), in addition to the set's (or alone with `set` basic).
    pub sections: Vec<String>,
    /// Metrics (`--metrics`), in addition.
    pub metrics: Vec<String>,
    /// Profile only kernels whose (function) name matches this regex.
    pub kernel_regex: Option<String>,
    pub launch_skip: Option<u64>,
    pub launch_count: Option<u64>,
    /// NVTX include filters (`--nvtx --nvtx-include`), e.g. `step_5/`.
    pub nvtx_include: Vec<String>,
    pub replay_mode: Option<ReplayMode>,
    pub clock_control: ClockControl,
}

fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

impl NcuOptions {
    /// Exactly the counters the memory-pattern analysis reads
    /// ([`aisp_profile::ncu::patterns::METRICS`]), with the sections of ncu's
    /// rules for the same problems (uncoalesced accesses, thread divergence).
    pub fn memory_patterns(
        kernel_regex: Option<String>,
        launch_skip: Option<u64>,
        launch_count: u64,
    ) -> NcuOptions {
        NcuOptions {
            set: NcuSet::Basic,
            sections: vec!["SourceCounters".into(), "WarpStateStats".into()],
            metrics: aisp_profile::ncu::patterns::METRICS
                .iter()
                .map(|m| m.to_string())
                .collect(),
            kernel_regex,
            launch_skip,
            launch_count: Some(launch_count),
            nvtx_include: Vec::new(),
            replay_mode: None,
            clock_control: ClockControl::None,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        for s in &self.sections {
            if !plain_name(s) {
                return Err(format!(
                    "section `{s}` is not a section identifier (e.g. SpeedOfLight, MemoryWorkloadAnalysis, WarpStateStats)"
                ));
            }
        }
        for m in &self.metrics {
            if !plain_name(m) {
                return Err(format!(
                    "metric `{m}` is not a metric name (e.g. dram__bytes.sum.per_second)"
                ));
            }
        }
        if let Some(r) = &self.kernel_regex {
            regex::Regex::new(r).map_err(|e| format!("kernel_regex does not compile: {e}"))?;
        }
        if self.launch_count == Some(0) {
            return Err("`launch_count` must be at least 1".into());
        }
        if self.nvtx_include.iter().any(|n| n.trim().is_empty()) {
            return Err("an `nvtx_include` filter is empty".into());
        }
        Ok(())
    }

    /// Arguments of `ncu` writing `<out_base>.ncu-rep`, followed by the command.
    pub fn profile_args(&self, out_base: &Path, command: &[String]) -> Vec<String> {
        let mut a = vec![
            "--set".to_string(),
            self.set.as_str().to_string(),
            "--clock-control".into(),
            match self.clock_control {
                ClockControl::None => "none".into(),
                ClockControl::Base => "base".into(),
            },
            // Launchers (python -m torch.distributed.run, shells) start the
            // process that runs the kernels.
            "--target-processes".into(),
            "all".into(),
        ];
        for s in &self.sections {
            a.push("--section".into());
            a.push(s.clone());
        }
        if !self.metrics.is_empty() {
            a.push("--metrics".into());
            a.push(self.metrics.join(","));
        }
        if let Some(r) = &self.kernel_regex {
            a.push("--kernel-name".into());
            a.push(format!("regex:{r}"));
        }
        if let Some(n) = self.launch_skip {
            a.push("--launch-skip".into());
            a.push(n.to_string());
        }
        if let Some(n) = self.launch_count {
            a.push("--launch-count".into());
            a.push(n.to_string());
        }
        if !self.nvtx_include.is_empty() {
            a.push("--nvtx".into());
            for n in &self.nvtx_include {
                a.push("--nvtx-include".into());
                a.push(n.clone());
            }
        }
        if let Some(m) = self.replay_mode {
            a.push("--replay-mode".into());
            a.push(m.as_str().into());
        }
        a.push("--force-overwrite".into());
        a.push("--export".into());
        a.push(out_base.display().to_string());
        a.extend(command.iter().cloned());
        a
    }
}

/// A CSV page of an existing report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// One row per kernel, one column per metric (`--page raw`).
    Raw,
    /// One row per metric and per rule result (`--page details`).
    Details,
}

/// Arguments of `ncu --import <report> --csv --page raw|details`.
pub fn import_args(report: &Path, page: Page) -> Vec<String> {
    vec![
        "--import".into(),
        report.display().to_string(),
        "--csv".into(),
        "--page".into(),
        match page {
            Page::Raw => "raw".into(),
            Page::Details => "details".into(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_leave_clocks_alone_and_follow_child_processes() {
        let o = NcuOptions::default();
        o.validate().unwrap();
        assert_eq!(
            o.profile_args(Path::new("/r/profile"), &["python3".into(), "t.py".into()]),
            vec![
                "--set",
                "basic",
                "--clock-control",
                "none",
                "--target-processes",
                "all",
                "--force-overwrite",
                "--export",
                "/r/profile",
                "python3",
                "t.py"
            ]
        );
    }

    #[test]
    fn filters_sections_metrics_and_replay() {
        let o = NcuOptions {
            set: NcuSet::Full,
            sections: vec!["WarpStateStats".into()],
            metrics: vec![
                "dram__bytes.sum.per_second".into(),
                "gpu__time_duration.sum".into(),
            ],
            kernel_regex: Some("gemm|nvjet".into()),
            launch_skip: Some(10),
            launch_count: Some(5),
            nvtx_include: vec!["step_5/".into()],
            replay_mode: Some(ReplayMode::Application),
            clock_control: ClockControl::Base,
        };
        o.validate().unwrap();
        let a = o.profile_args(Path::new("p"), &["./app".into()]);
        let joined = a.join(" ");
        assert_eq!(
            joined,
            "--set full --clock-control base --target-processes all --section WarpStateStats \
--metrics dram__bytes.sum.per_second,gpu__time_duration.sum --kernel-name regex:gemm|nvjet --launch-skip 10 \
--launch-count 5 --nvtx --nvtx-include step_5/ --replay-mode application --force-overwrite --export p ./app"
        );
    }

    #[test]
    fn bad_options_are_refused() {
        let bad = |o: NcuOptions| o.validate().unwrap_err();
        assert!(
            bad(NcuOptions {
                kernel_regex: Some("(".into()),
                ..NcuOptions::default()
            })
            .contains("does not compile")
        );
        assert!(
            bad(NcuOptions {
                sections: vec!["Speed Of Light".into()],
                ..NcuOptions::default()
            })
            .contains("not a section identifier")
        );
        assert!(
            bad(NcuOptions {
                metrics: vec!["a,b".into()],
                ..NcuOptions::default()
            })
            .contains("not a metric name")
        );
        assert!(
            bad(NcuOptions {
                launch_count: Some(0),
                ..NcuOptions::default()
            })
            .contains("launch_count")
        );
    }

    #[test]
    fn import_pages() {
        assert_eq!(
            import_args(Path::new("r.ncu-rep"), Page::Raw).join(" "),
            "--import r.ncu-rep --csv --page raw"
        );
        assert_eq!(
            import_args(Path::new("r.ncu-rep"), Page::Details).join(" "),
            "--import r.ncu-rep --csv --page details"
        );
    }
}
