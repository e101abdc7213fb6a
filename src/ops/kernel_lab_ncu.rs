//! The kernel lab's optional Nsight Compute section: after timing, the
//! fastest correct candidate is launched once more, by a worker in profile
//! mode, under `ncu`. Discovery, the capture (its run folder and record, the
//! counter-permission diagnosis, the CSV import) and the parsers are those of
//! `aisp_profile_ncu`, `aisp_profile_ncu_summary` and
//! `aisp_analyze_memory_patterns`; this module only picks the numbers that
//! say why the kernel runs at its speed. Any failure here is a partial
//! answer (the timings stand), never the call's failure.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::errors::BenchErrorExt;
use super::profile_capture::{capture_error, discover, finish, start};
use crate::context::OpContext;
use crate::error::{ErrorKind, OpError};
use aisp_capture::UserCommand;
use aisp_capture::ncu::{self as ncu_cmd, ClockControl, NcuOptions, NcuSet};
use aisp_capture::record::CaptureKind;
use aisp_capture::tools::Profiler;
use aisp_hw::bench::fresh_seed;
use aisp_hw::bench::lab::runner;
use aisp_hw::bench::lab::spec::LabSpec;
use aisp_hw::bench::lab::worker::{JOB_FILE_ENV, Job};
use aisp_profile::ncu;

/// The most one profile may take: one launch replayed for a few dozen passes
/// takes seconds to a minute; a longer one is stopped and reported.
pub const CAPTURE_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// What ncu says about one kernel launch.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct NcuFindings {
    pub kernel: String,
    /// The function ncu profiled.
    pub profiled: String,
    /// ok, or unavailable (`why`; the timings stand).
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// ncu run (aisp_profile_ncu_summary reads it again) and its .ncu-rep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// duration_ns, sm/memory/dram_throughput_pct (% of peak), achieved/theoretical_occupancy_pct, dram_bytes, ...
    pub metrics: BTreeMap<String, f64>,
    /// compute, memory, compute_and_memory or latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// Top warp stall reasons, largest first.
    pub stalls: Vec<String>,
    /// ncu's rules and memory-pattern problems, largest estimated saving first.
    pub advice: Vec<String>,
}

/// The kernel-name filter for `entry`: ncu matches its function name (no
/// parameters), which may carry a namespace or template arguments.
pub fn entry_regex(entry: &str) -> String {
    let base = entry.split('<').next().unwrap_or(entry);
    let base = base.rsplit("::").next().unwrap_or(base).trim();
    format!("(^|::){}(<.*>)?$", regex::escape(base))
}

/// The ncu options for one launch of `entry`: the sections, plus the
/// memory-pattern analysis's counters and the DRAM byte count.
pub fn options(entry: &str, sections: Vec<String>) -> NcuOptions {
    let mut metrics: Vec<String> = ncu::patterns::METRICS
        .iter()
        .map(|m| m.to_string())
        .collect();
    metrics.push("dram__bytes.sum".into());
    NcuOptions {
        set: NcuSet::Basic,
        sections,
        metrics,
        // The worker's own kernels (input fill) run first: filter by name.
        kernel_regex: Some(entry_regex(entry)),
        launch_skip: None,
        launch_count: Some(1),
        nvtx_include: Vec::new(),
        replay_mode: None,
        clock_control: ClockControl::None,
    }
}

/// Check the requested sections before any GPU work.
pub fn validate(sections: &[String]) -> Result<(), String> {
    if sections.len() > 24 {
        return Err(format!("ncu lists {} sections; at most 24", sections.len()));
    }
    options("k", sections.to_vec()).validate()
}

/// Profile kernel `label` of `spec` at its last size. Errors only when the
/// call was cancelled or ran out of time; anything else is in `status`/`why`.
pub fn profile(
    ctx: &OpContext,
    spec: &LabSpec,
    label: &str,
    sections: Vec<String>,
) -> Result<NcuFindings, OpError> {
    let mut f = NcuFindings {
        kernel: label.to_string(),
        status: "ok".into(),
        ..Default::default()
    };
    if let Err(e) = capture(ctx, spec, label, sections, &mut f) {
        // The caller's stop or deadline ends the call; the capture's own limit does not.
        if matches!(e.kind, ErrorKind::Cancelled | ErrorKind::Timeout)
            && (ctx.is_cancelled() || ctx.timed_out())
        {
            return Err(e);
        }
        f.status = "unavailable".into();
        f.metrics.clear();
        f.stalls.clear();
        f.advice.clear();
        f.bound = None;
        f.why = Some(if e.hint.is_empty() {
            e.message
        } else {
            format!("{} {}", e.message, e.hint)
        });
    }
    Ok(f)
}

fn capture(
    ctx: &OpContext,
    spec: &LabSpec,
    label: &str,
    sections: Vec<String>,
    f: &mut NcuFindings,
) -> Result<(), OpError> {
    let entry = spec
        .kernels
        .iter()
        .find(|k| k.label() == label)
        .map(|k| k.entry.clone())
        .ok_or_else(|| OpError::internal(format!("no kernel named {label}")))?;
    let opts = options(&entry, sections);
    opts.validate()
        .map_err(|m| OpError::invalid_input(m, "ncu takes true or section identifiers."))?;
    let (program, args) = runner::worker_command().map_err(|e| e.into_op_error(ctx.tool()))?;
    let argv: Vec<String> = std::iter::once(program)
        .chain(args)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let tool = discover(ctx, Profiler::Ncu, &[])?;
    let plain = UserCommand {
        argv: argv.clone(),
        cwd: None,
        env: Vec::new(),
    };
    let mut s = start(ctx, CaptureKind::Ncu, &plain, Some(&tool))?;
    s.deadline = Some(std::time::Instant::now() + CAPTURE_LIMIT);
    f.run_id = Some(s.rec.run_id.clone());
    let job = Job {
        spec: LabSpec {
            ncu: None,
            ..spec.clone()
        },
        seed: fresh_seed(),
        time_budget_s: 0.05,
        device: spec.device.unwrap_or(0) as usize,
        cache_root: ctx.app().config.cache_dir(),
        start_at: 0,
        measure_roofs: false,
        profile: Some(label.to_string()),
    };
    let job_file = s.dir.join("kernel-lab-job.json");
    let written = serde_json::to_string(&job)
        .map_err(|e| e.to_string())
        .and_then(|j| std::fs::write(&job_file, j).map_err(|e| e.to_string()))
        .map_err(|e| OpError::internal(format!("cannot write {}: {e}", job_file.display())));
    let cmd = UserCommand {
        argv,
        cwd: None,
        env: vec![(JOB_FILE_ENV.into(), job_file.display().to_string())],
    };
    let result = written.and_then(|()| {
        ncu_cmd::capture(&mut s, &cmd, &opts, &tool, 1).map_err(|e| capture_error(ctx, e))
    });
    finish(ctx, &mut s, &result);
    result?;
    f.report = s.rec.artifacts.get("ncu_rep").cloned();
    let page = |name: &str| std::fs::read_to_string(s.dir.join(format!("profile.{name}.csv"))).ok();
    let (raw, details) = (page("raw"), page("details"));
    if raw.is_none() && details.is_none() {
        return Err(OpError::internal(format!(
            "ncu wrote a report but its pages could not be imported: {}",
            s.notes.join("; ")
        )));
    }
    let found = read_pages(raw.as_deref(), details.as_deref(), &entry, f)
        .map_err(|e| OpError::internal(format!("the report's CSV could not be read: {e}")))?;
    if !found {
        return Err(OpError::internal(format!(
            "ncu profiled `{}`, not `{entry}`",
            f.profiled
        )));
    }
    Ok(())
}

/// Fill `f` from the raw and details CSV pages of a report, with the first
/// launch of `entry`. False (and `f.profiled` naming the first launch, no
/// numbers) when the report has no launch of `entry`.
pub fn read_pages(
    raw: Option<&str>,
    details: Option<&str>,
    entry: &str,
    f: &mut NcuFindings,
) -> Result<bool, ncu::NcuError> {
    let pages: Vec<&str> = [raw, details].into_iter().flatten().collect();
    let summary = ncu::summarize(&pages, 64)?;
    let first = summary.kernels.first().ok_or(ncu::NcuError::Empty)?;
    let want =
        regex::Regex::new(&entry_regex(entry)).map_err(|e| ncu::NcuError::Csv(e.to_string()))?;
    let Some(k) = summary
        .kernels
        .iter()
        .find(|k| want.is_match(&k.kernel_name))
    else {
        f.profiled = first.kernel_name.clone();
        return Ok(false);
    };
    f.profiled = k.kernel_name.clone();
    let mut m = BTreeMap::new();
    for (key, v) in [
        ("duration_ns", k.duration_ns),
        ("sm_throughput_pct", k.sm_throughput_pct),
        ("memory_throughput_pct", k.memory_throughput_pct),
        ("dram_throughput_pct", k.dram_throughput_pct),
        ("achieved_occupancy_pct", k.achieved_occupancy_pct),
        ("theoretical_occupancy_pct", k.theoretical_occupancy_pct),
        ("registers_per_thread", k.registers_per_thread),
        ("dram_bytes", k.dram_bytes),
        ("dram_gb_per_s", k.dram_bandwidth_gb_per_s),
        ("l1_hit_rate_pct", k.l1_hit_rate_pct),
        ("l2_hit_rate_pct", k.l2_hit_rate_pct),
    ] {
        if let Some(v) = v {
            m.insert(key.to_string(), v);
        }
    }
    f.metrics = m;
    f.bound = k.sol_bound.clone();
    f.stalls = k
        .warp_stalls
        .iter()
        .map(|w| match w.cycles_per_instruction {
            Some(c) => format!(
                "{}: {:.1}% of stall cycles ({c:.2} cycles per instruction)",
                w.reason, w.share_pct
            ),
            None => format!("{}: {:.1}% of stall samples", w.reason, w.share_pct),
        })
        .collect();
    // (share of the kernel's time at stake, %, text): ncu's rules by their
    // estimate (without one: last), the memory-pattern problems by ncu's
    // estimate for the same problem, else their own upper bound.
    let mut advice: Vec<(f64, String)> = k
        .rules
        .iter()
        .filter(|r| r.kind != "INF" && !r.message.trim().is_empty())
        .map(|r| {
            let sp = r.estimated_speedup_pct.unwrap_or(-1.0);
            let est = r
                .estimated_speedup_pct
                .map(|p| format!(" (ncu estimates up to {p:.1}% faster)"))
                .unwrap_or_default();
            (sp, format!("{}: {}{est}", r.rule, one_line(&r.message)))
        })
        .collect();
    if let Some(raw) = raw
        && let Ok(report) = ncu::patterns::analyze(raw, details)
    {
        for kp in report.kernels.iter().filter(|kp| kp.id == k.id) {
            for p in &kp.problems {
                let own = match (p.stake_ns, kp.duration_ns) {
                    (Some(s), Some(d)) if d > 0.0 => 100.0 * s / d,
                    _ => 0.0,
                };
                advice.push((
                    p.ncu_estimated_speedup_pct.unwrap_or(own),
                    format!(
                        "{:?} ({}): {} Fix: {}",
                        p.pattern, p.severity, p.evidence, p.fix
                    ),
                ));
            }
        }
    }
    advice.sort_by(|a, b| b.0.total_cmp(&a.0));
    f.advice = advice.into_iter().map(|(_, t)| t).take(8).collect();
    Ok(true)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The findings as lines for a model's prompt.
pub fn prompt_text(f: &NcuFindings) -> String {
    if f.status != "ok" {
        return format!(
            "Nsight Compute: not available ({})",
            f.why.as_deref().unwrap_or("unknown")
        );
    }
    let m = |k: &str| f.metrics.get(k).copied();
    let mut parts = Vec::new();
    if let Some(d) = m("duration_ns") {
        parts.push(format!("duration {:.1} us", d / 1e3));
    }
    if let (Some(sm), Some(mem)) = (m("sm_throughput_pct"), m("memory_throughput_pct")) {
        parts.push(format!(
            "SM throughput {sm:.1}% and memory throughput {mem:.1}% of peak{}",
            f.bound
                .as_ref()
                .map(|b| format!(" ({b} bound)"))
                .unwrap_or_default()
        ));
    }
    if let Some(b) = m("dram_bytes") {
        parts.push(format!("DRAM traffic {:.3} MB", b / 1e6));
    }
    if let (Some(a), Some(t)) = (m("achieved_occupancy_pct"), m("theoretical_occupancy_pct")) {
        parts.push(format!("achieved occupancy {a:.1}% (theoretical {t:.1}%)"));
    }
    let mut text = format!(
        "Nsight Compute on one launch of {}: {}.",
        f.kernel,
        parts.join("; ")
    );
    if !f.stalls.is_empty() {
        text.push_str(&format!("\nTop warp stalls: {}.", f.stalls.join("; ")));
    }
    for a in f.advice.iter().take(5) {
        text.push_str(&format!("\n- {a}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_name_filter_matches_the_entry_with_namespace_or_template_and_nothing_else() {
        let re = |e: &str| regex::Regex::new(&entry_regex(e)).unwrap();
        let plain = re("transpose_tiled");
        assert!(plain.is_match("transpose_tiled"));
        // The worker's own input fill runs before the candidate in the same process.
        assert!(!plain.is_match("fill_uniform_f32"));
        assert!(!plain.is_match("transpose_tiled2"));
        assert!(!plain.is_match("my_transpose_tiled"));
        let templ = re("ns::kern<float, 4>");
        for name in ["kern", "ns::kern", "kern<float, 4>", "ns::kern<float, 4>"] {
            assert!(templ.is_match(name), "{name}");
        }
        assert!(!templ.is_match("kernel"));
        // Regex characters in a name are literal.
        assert_eq!(entry_regex("a.b"), "(^|::)a\\.b(<.*>)?$");
    }

    #[test]
    fn the_command_line_profiles_one_launch_with_the_sections_and_counters() {
        let secs: Vec<String> = aisp_hw::bench::lab::spec::NCU_DEFAULT_SECTIONS
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = options("tr", secs);
        o.validate().unwrap();
        let a = o
            .profile_args(
                Path::new("/r/profile"),
                &["/bin/aisp".into(), "__kernel-lab-worker".into()],
            )
            .join(" ");
        let metrics = format!("{},dram__bytes.sum", ncu::patterns::METRICS.join(","));
        assert_eq!(
            a,
            format!(
                "--set basic --clock-control none --target-processes all --section SpeedOfLight \
--section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
--metrics {metrics} --kernel-name regex:(^|::)tr(<.*>)?$ --launch-count 1 --force-overwrite \
--export /r/profile /bin/aisp __kernel-lab-worker"
            )
        );
    }

    #[test]
    fn sections_are_checked_before_any_work() {
        assert!(validate(&["SpeedOfLight".into(), "SourceCounters".into()]).is_ok());
        let e = validate(&["SpeedOfLight; rm -rf /".into()]).unwrap_err();
        assert!(e.contains("not a section identifier"), "{e}");
        let many: Vec<String> = (0..25).map(|i| format!("S{i}")).collect();
        assert!(validate(&many).unwrap_err().contains("at most 24"));
        use aisp_hw::bench::lab::spec::NcuRequest;
        assert_eq!(NcuRequest::On(false).sections(), None);
        assert_eq!(NcuRequest::On(true).sections().unwrap().len(), 5);
        assert_eq!(
            NcuRequest::Sections(vec![]).sections().unwrap().len(),
            5,
            "an empty list means the default sections"
        );
        assert_eq!(
            NcuRequest::Sections(vec!["SourceCounters".into()]).sections(),
            Some(vec!["SourceCounters".to_string()])
        );
    }
}

#[cfg(test)]
mod real_report {
    use super::*;

    fn page(name: &str) -> String {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/capture")
                .join(name),
        )
        .unwrap()
    }

    /// One launch of the 32x33-tile transpose at 8192^2 on an H100 (ncu
    /// 2025.3.1, the default sections): the numbers are the report's.
    #[test]
    fn the_findings_are_the_reports_numbers() {
        let (raw, details) = (
            page("kernel_lab_tiled.ncu-raw.csv"),
            page("kernel_lab_tiled.ncu-details.csv"),
        );
        let mut f = NcuFindings {
            kernel: "tiled".into(),
            status: "ok".into(),
            ..Default::default()
        };
        assert!(read_pages(Some(&raw), Some(&details), "transpose_tiled", &mut f).unwrap());
        assert_eq!(f.profiled, "transpose_tiled");
        let m = &f.metrics;
        assert_eq!(m["duration_ns"], 193952.0);
        // 519.008512 Mbyte: 17.9 MB under the 536.9 MB the kernel reads and writes
        // (written lines may still sit in the 50 MB L2 when it ends).
        assert_eq!(m["dram_bytes"], 519_008_512.0);
        assert_eq!(m["sm_throughput_pct"], 59.882867);
        assert_eq!(m["memory_throughput_pct"], 79.835091);
        assert_eq!(m["achieved_occupancy_pct"], 94.575768);
        assert_eq!(m["theoretical_occupancy_pct"], 100.0);
        assert_eq!(m["registers_per_thread"], 32.0);
        assert_eq!(f.bound.as_deref(), Some("memory"));
        assert!(
            f.stalls[0].starts_with("long_scoreboard: 49.7% of stall cycles (12.30"),
            "{:?}",
            f.stalls
        );
        assert!(f.stalls[1].starts_with("barrier: 20.7%"), "{:?}", f.stalls);
        // Rules with an estimate first, largest first; none without one ahead of them.
        assert!(
            f.advice[0]
                .starts_with("CPIStall: On average, each warp of this workload spends 12.3 cycles"),
            "{:?}",
            f.advice
        );
        assert!(
            f.advice[0].ends_with("(ncu estimates up to 49.5% faster)"),
            "{}",
            f.advice[0]
        );
        let text = prompt_text(&f);
        assert!(
            text.starts_with("Nsight Compute on one launch of tiled: duration 194.0 us; SM throughput 59.9% and memory throughput 79.8% of peak (memory bound); DRAM traffic 519.009 MB; achieved occupancy 94.6% (theoretical 100.0%)."),
            "{text}"
        );
        assert!(
            text.contains("\nTop warp stalls: long_scoreboard: 49.7%"),
            "{text}"
        );
    }

    fn xz_page(name: &str) -> String {
        let bytes = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/capture")
                .join(name),
        )
        .unwrap();
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A report of several kernels (the lessons' naive transpose among them,
    /// with the memory-pattern counters): the entry's launch is the one read,
    /// and its uncoalesced accesses come with the advice, ranked by time.
    #[test]
    fn the_entrys_launch_is_read_and_its_memory_problems_ranked() {
        let raw = xz_page("lesson_pair_before.ncu-raw.csv.xz");
        let details = xz_page("lesson_pair_before.ncu-details.csv.xz");
        let mut f = NcuFindings::default();
        assert!(read_pages(Some(&raw), Some(&details), "lesson_transpose", &mut f).unwrap());
        assert_eq!(f.profiled, "lesson_transpose");
        let patterns = ncu::patterns::analyze(&raw, Some(&details)).unwrap();
        let kp = patterns
            .kernels
            .iter()
            .find(|k| k.kernel_name == "lesson_transpose")
            .unwrap();
        assert!(!kp.problems.is_empty(), "{kp:?}");
        for p in &kp.problems {
            assert!(
                f.advice.iter().any(|a| a.contains(&p.evidence)),
                "{} not in {:?}",
                p.evidence,
                f.advice
            );
        }
        // Ordered by the share of the kernel's time at stake (ncu's estimate, else the problem's own bound).
        let pos = |needle: &str| f.advice.iter().position(|a| a.contains(needle));
        assert!(f.advice.len() <= 8);
        // ncu puts 78% of the sectors in excess; its rule estimate ranks the problem above the stall rule.
        let stores = pos("UncoalescedGlobal (high): global stores: 32.1 sectors per request, 12.5 % of the fetched bytes used").unwrap();
        assert!(stores < 5, "the model sees the first five: {:?}", f.advice);
        assert!(stores < pos("CPIStall").unwrap(), "{:?}", f.advice);
        // No launch of the entry: said, with the name ncu did profile.
        let mut g = NcuFindings::default();
        assert!(!read_pages(Some(&raw), None, "other", &mut g).unwrap());
        assert_eq!(g.profiled, "lesson_copy");
        assert!(g.metrics.is_empty());
    }

    #[test]
    fn a_failed_profile_tells_the_model_why() {
        let f = NcuFindings {
            kernel: "k".into(),
            status: "unavailable".into(),
            why: Some("ncu may not read the GPU performance counters".into()),
            ..Default::default()
        };
        assert_eq!(
            prompt_text(&f),
            "Nsight Compute: not available (ncu may not read the GPU performance counters)"
        );
    }
}
