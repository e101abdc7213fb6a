//! `profile ranks`: a set of Nsight Systems exports (one per rank or node) as
//! one run. The work lives in [`aisp_profile::ranks`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::profile_lean::Lead;
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{Hints, OpSpec, Operation};
use aisp_profile::ranks::{self, RankSet, store};
use aisp_profile::rules::{Finding, Rules, Severity};

pub struct ProfileRanks;

/// Arguments of `ranks`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RanksInput {
    /// A folder of exports (one per rank or node), a glob in the file name (`run/rank_*.sqlite`), one multi-process export, or a folder of digests.
    #[serde(default)]
    pub path: String,
    /// More exports of the same run (or all of them, without `path`).
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// Write each export's digest (Parquet) into this folder. Over MCP/HTTP: under the output roots.
    #[serde(default)]
    pub write_digests: Option<String>,
    /// Replace digest files that exist (default false: refuse).
    #[serde(default)]
    pub overwrite: bool,
    /// Digest only, no merge (the per-node step of a cluster run).
    #[serde(default)]
    pub digest_only: bool,
    /// Digest worker threads (default: the cores).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Also run this profile operation (e.g. "kernels", "gaps", "utilization", "nccl") on every export of the set.
    #[serde(default)]
    pub each: Option<String>,
    /// That operation's other arguments (all but path), e.g. {"limit": 5}.
    #[serde(default)]
    pub each_args: Option<serde_json::Map<String, serde_json::Value>>,
    /// Also the per-rank rows, collectives (skew vs transfer), imbalance, arrivals and ledger, the rank
    /// identities, each export's clock domain, the heat map and each finding in full: about 6.8× the characters.
    /// The default already carries the verdict, the findings' stakes, predicted steps and gists, the stragglers
    /// and the clock residual.
    #[serde(default)]
    pub detail: bool,
}

/// The set's answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RanksOutput {
    /// The verdict, the cross-rank findings (straggler, skew-dominated collectives, slow node, slow link, and
    /// the ranks' own read on the critical path; 3 in brief by default), the call to make next.
    #[serde(flatten)]
    pub lead: Lead,
    pub path: String,
    /// `exports` or `digests`.
    pub source: String,
    /// Digest folders written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub digests_written: Vec<String>,
    /// Wall time of the digest and merge steps.
    pub digest_ms: u64,
    pub merge_ms: u64,
    /// files, identities, rank_note, alignment {reference_file, domains [{file, ranks, offset_ns, residual_ns,
    /// method, ...}], residual_ns}, cross_rank {ranks, collectives (skew, transfer, algbw/busbw when sizes are
    /// recorded), stragglers, slow_nodes, links, slow_links, link_basis, imbalance, heat_map, resolution_ns, notes},
    /// arrivals, ledger, skipped (see README "Many ranks"); by default the residual, stragglers, slow nodes and
    /// links and notes (`left_out` names the rest). Null with digest_only.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub set: Option<RankSet>,
    /// Each collective kind called more than once in one line: instances on every rank, the share of its time spent waiting for the last
    /// rank, and the bytes and bus bandwidth when NCCL recorded sizes (`detail` adds the rows, in `set`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<String>,
    /// With `each`: that operation's answer (or error) for every export, with the ranks it holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub each: Vec<EachAnswer>,
    /// What this default answer leaves out, and the argument that brings it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// One export's answer to the `each` operation.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct EachAnswer {
    pub file: String,
    /// The ranks this export holds (see `set.identities`); empty with digest_only.
    pub ranks: Vec<u32>,
    /// The operation's answer, in the export's own timebase (`set.alignment` gives each export's offset).
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub answer: Option<serde_json::Value>,
    /// Why the operation failed on this export: kind and message.
    pub error: Option<String>,
}

/// The profile operation `each` names, checked: it must read one export by `path` and change nothing.
fn each_tool(name: &str) -> Result<&'static crate::registry::ToolDef, OpError> {
    let bare = name.trim().trim_start_matches("aisp_profile_");
    let tool = crate::registry::find_op("profile", bare).filter(|t| {
        let spec = t.spec();
        spec.domain == "profile"
            && spec.hints.read_only
            && !spec.executes_commands
            && spec.name != "ranks"
            && t.input_schema
                .get("properties")
                .is_some_and(|p| p.get("path").is_some())
    });
    tool.ok_or_else(|| {
        OpError::invalid_input(
            format!("`each`: `{name}` is not a read-only profile operation that reads one export by path"),
            "Name one such as \"kernels\", \"gaps\", \"utilization\", \"nccl\", \"iterations\", \"summary\" or \"rules\".",
        )
    })
}

/// Run the `each` operation on every export, on `threads` workers, through the same checks as a direct call.
fn run_each(
    ctx: &OpContext,
    input: &RanksInput,
    files: &[String],
    set: Option<&RankSet>,
    threads: usize,
) -> Result<Vec<EachAnswer>, OpError> {
    let Some(name) = &input.each else {
        return Ok(Vec::new());
    };
    let tool = each_tool(name)?;
    let args = input.each_args.clone().unwrap_or_default();
    if args.contains_key("path") {
        return Err(OpError::invalid_input(
            "`each_args` must not hold `path`: the set's exports are the paths",
            "Leave path out of each_args.",
        ));
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let answers: std::sync::Mutex<Vec<(usize, EachAnswer)>> = Default::default();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, files.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(file) = files.get(i) else { break };
                    if ctx.is_cancelled() {
                        break;
                    }
                    let mut a = args.clone();
                    a.insert("path".into(), serde_json::Value::String(file.clone()));
                    let (answer, error) =
                        match ctx.call_tool(&tool.name, serde_json::Value::Object(a)) {
                            Ok(v) => (Some(v), None),
                            Err(e) => (None, Some(format!("{}: {}", e.kind, e.message))),
                        };
                    let ranks = set
                        .map(|s| {
                            s.identities
                                .iter()
                                .filter(|id| id.file == *file)
                                .map(|id| id.rank)
                                .collect()
                        })
                        .unwrap_or_default();
                    let mut guard = answers.lock().unwrap_or_else(|p| p.into_inner());
                    guard.push((
                        i,
                        EachAnswer {
                            file: file.clone(),
                            ranks,
                            answer,
                            error,
                        },
                    ));
                }
            });
        }
    });
    ctx.check_cancelled()?;
    let mut answers = answers.into_inner().unwrap_or_else(|p| p.into_inner());
    answers.sort_by_key(|(i, _)| *i);
    Ok(answers.into_iter().map(|(_, a)| a).collect())
}

/// Digest and merge the set named by `path` (+ `paths`), or read digests.
pub fn analyse_set(ctx: &OpContext, input: &RanksInput) -> Result<RanksOutput, OpError> {
    let t0 = Instant::now();
    // Where digests go, checked before any work.
    let digest_root = match &input.write_digests {
        Some(out) => Some(crate::outputs::folder(ctx, "write_digests", out)?),
        None => None,
    };
    let folders = if Path::new(&input.path).is_dir() {
        store::digest_folders(Path::new(&input.path))
    } else {
        Vec::new()
    };
    let mut written = Vec::new();
    let (mut digests, files, skipped, source) = if !folders.is_empty() {
        let mut d = Vec::new();
        for f in &folders {
            ctx.check_cancelled()?;
            d.extend(store::read(f)?);
        }
        let files: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
        (d, files, Vec::new(), "digests")
    } else {
        let mut files = ranks::expand(&input.path)?;
        for p in input.paths.iter().flatten() {
            files.extend(ranks::expand(p)?);
        }
        files.sort();
        files.dedup();
        let files: Vec<PathBuf> = files
            .into_iter()
            .map(|f| {
                super::profile_capture::profile_ref(ctx, &f.display().to_string())
                    .map(PathBuf::from)
            })
            .collect::<Result<_, _>>()?;
        let threads = input
            .threads
            .unwrap_or_else(|| ranks::default_threads(files.len()))
            .clamp(1, 64);
        let total = files.len() as f64;
        let options = super::profile::open_options(ctx);
        let (d, skipped) = ranks::digest::digest_files_with(
            &files,
            threads,
            &options,
            &|| ctx.is_cancelled(),
            &|done| ctx.progress(done as f64, Some(total), "digesting exports"),
        )
        .map_err(|e| match e {
            aisp_profile::ProfileError::Cancelled => ctx.stop_error(),
            e => e.into(),
        })?;
        let names = files.iter().map(|f| f.display().to_string()).collect();
        (d, names, skipped, "exports")
    };
    if let Some(root) = &digest_root {
        let mut by_file: Vec<(String, Vec<&ranks::RankDigest>)> = Vec::new();
        for d in &digests {
            match by_file.iter_mut().find(|(f, _)| *f == d.identity.file) {
                Some((_, v)) => v.push(d),
                None => by_file.push((d.identity.file.clone(), vec![d])),
            }
        }
        for (file, ds) in by_file {
            let dir = root
                .subdir(std::ffi::OsStr::new(&store::digest_name(&file)), true)
                .map_err(|e| crate::outputs::write_error("write_digests", e))?;
            store::write(&dir, &ds, input.overwrite)?;
            written.push(dir.path().display().to_string());
        }
    }
    let digest_ms = t0.elapsed().as_millis() as u64;
    let t1 = Instant::now();
    let exports: Vec<String> = if source == "exports" {
        files.clone()
    } else {
        Vec::new()
    };
    let (set, findings) = if input.digest_only {
        (None, Vec::new())
    } else {
        let set = ranks::merge(&mut digests, files, skipped)?;
        let findings = ranks::set_findings(&set, &digests);
        (Some(set), findings)
    };
    let merge_ms = t1.elapsed().as_millis() as u64;
    if input.each.is_some() && exports.is_empty() {
        return Err(OpError::invalid_input(
            "`each` needs the exports themselves, and this path names digests",
            "Point path at the exports (a folder or glob of .sqlite / .nsys-rep) to run an operation on each.",
        ));
    }
    let threads = input
        .threads
        .unwrap_or_else(|| ranks::default_threads(exports.len()))
        .clamp(1, 64);
    let each = run_each(ctx, input, &exports, set.as_ref(), threads)?;
    let (highest, verdict) = if input.digest_only {
        (
            Severity::Info,
            "digest only: the exports were digested, not merged (no cross-rank analysis)".into(),
        )
    } else {
        set_verdict(&findings, set.as_ref())
    };
    Ok(RanksOutput {
        lead: Lead {
            verdict,
            highest,
            findings,
            ranked: None,
            minor: Vec::new(),
            next: Vec::new(),
        },
        path: input.path.clone(),
        source: source.into(),
        digests_written: written,
        digest_ms,
        merge_ms,
        set,
        collectives: Vec::new(),
        each,
        left_out: Vec::new(),
    })
}

/// A byte count as a reader says it: GB, MB or bytes.
fn bytes_in_words(b: i64) -> String {
    match b {
        b if b >= 1_000_000_000 => format!("{:.2} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{b} bytes"),
    }
}

/// A collective kind in one line, as a default answer gives it.
fn collective_line(c: &aisp_profile::ranks::CollectiveSkew) -> String {
    let kind = serde_json::to_value(c.kind)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let sized = match (c.bytes, c.bus_gb_per_s) {
        (Some(b), Some(bw)) if c.sized_instances > 0 => format!(
            "; {} sized: {} at {bw:.1} GB/s bus",
            c.sized_instances,
            bytes_in_words(b)
        ),
        _ => String::new(),
    };
    format!(
        "{kind}: {} calls, {}% waiting for the last rank{sized}",
        c.instances, c.skew_share_pct
    )
}

impl RanksInput {
    /// The whole analysis of the set at `path`, nothing written.
    pub fn for_set(path: &str) -> RanksInput {
        RanksInput {
            path: path.into(),
            paths: None,
            write_digests: None,
            overwrite: false,
            digest_only: false,
            threads: None,
            each: None,
            each_args: None,
            detail: false,
        }
    }
}

/// `rules` over a set: the cross-rank findings in the `rules` answer shape.
pub fn rules_for_set(ctx: &OpContext, path: &str) -> Result<Rules, OpError> {
    let out = analyse_set(ctx, &RanksInput::for_set(path))?;
    let Lead {
        findings,
        highest,
        verdict,
        ..
    } = out.lead;
    Ok(Rules {
        findings,
        // Cross-rank stakes are per-collective estimates on every device, not per-device idle unions.
        overlaps: Vec::new(),
        highest,
        verdict,
        ledger: out.set.map(|s| s.ledger).unwrap_or_default(),
        windows: Vec::new(),
        checked: Vec::new(),
    })
}

/// The highest severity of a set's findings and the verdict: the top finding with its stake, or why there is none.
fn set_verdict(findings: &[Finding], set: Option<&RankSet>) -> (Severity, String) {
    let highest = findings
        .iter()
        .map(|f| f.severity)
        .max()
        .unwrap_or(Severity::Info);
    let verdict = match findings.first() {
        Some(f) => format!(
            "{} ({:.1} % of the median rank's window at stake)",
            f.title, f.share_pct
        ),
        None => match set.and_then(|s| s.alignment.residual_ns) {
            Some(r) => format!(
                "no cross-rank problem above the clock residual ({r} ns): no straggler, no skew-dominated collective"
            ),
            None => {
                "insufficient signal: the clocks of the set could not be aligned by collectives"
                    .into()
            }
        },
    };
    (highest, verdict)
}

/// Where to look next from a set of exports: the straggler's own export when a finding above info names it
/// (its findings say why it arrives late), else each rank's ledger. A folder of digests has no exports to read.
fn ranks_next(out: &RanksOutput) -> Vec<String> {
    let Some(set) = out.set.as_ref().filter(|_| out.source == "exports") else {
        return Vec::new();
    };
    // A straggler named by a finding above info (one under 1 % of the window is not worth a call).
    let named = out
        .lead
        .findings
        .iter()
        .any(|f| f.id == "cross_rank_straggler" && f.severity > Severity::Info);
    let straggler = set
        .cross_rank
        .stragglers
        .first()
        .filter(|_| named)
        .and_then(|s| {
            set.cross_rank
                .ranks
                .iter()
                .find(|r| r.rank == s.rank && !r.file.is_empty())
        });
    vec![match straggler {
        Some(r) => format!(
            "aisp_profile_rules {{\"path\": {}, \"device\": {}}}: why rank {} arrives late (its own findings)",
            serde_json::Value::from(r.file.as_str()),
            r.device,
            r.rank
        ),
        None => format!(
            "aisp_profile_ledger {}: each rank's steady step, column by column",
            super::profile_lean::path_arg(&out.path)
        ),
    }]
}

impl Operation for ProfileRanks {
    type Input = RanksInput;
    type Output = RanksOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Cross-rank analysis of a set of exports",
        summary: "Many ranks as one run: per-rank identity, clock alignment, step time, busy, exposed communication, stragglers, arrival skew vs transfer, imbalance, rank x step heat map.",
        description: "Reads a set of Nsight Systems exports (one per rank or node: a folder, a glob, a list, or one \
multi-process export) as one run. Ranks come from RANK in the recorded environment, the file name, or order (the mapping \
is shown). Clocks are aligned by session start (utcEpochNs), refined by matching collective ends, and nothing finer \
than the residual is concluded. Answers the verdict, the findings (straggler, skew-dominated collectives, slow node or \
link, and the ranks' own on the critical path) with stake and predicted step, the stragglers with evidence, slow nodes, \
the residual and the call to make next; detail: true adds per rank step time, busy, compute, exposed communication, \
time waiting at collectives, arrivals and ledger; per collective kind arrival skew vs transfer and bus bandwidth (when \
sizes are recorded); imbalance; the heat map; identities and each export's offset. Exports are digested in \
parallel (one per worker); write_digests stores Parquet digests, and a folder of digests is merged without the exports \
(cluster runs: digest where the files are, merge anywhere). `each` also runs one profile operation (kernels, gaps, \
utilization, ...) on every export, with the ranks each holds. Seconds per GB.",
        hints: Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        long_running: true,
        positional: &["path"],
        intents: &[
            "which rank is the straggler",
            "compare ranks",
            "multi node profile",
            "per rank nsys reports",
            "arrival skew",
            "cross rank analysis",
            "align clocks across ranks",
        ],
        example: r#"{"path": "runs/job42/"}"#,
        leaves_out: true,
        sheds: super::profile_lean::RANKS_SHEDS,
        ..OpSpec::new("profile", "ranks")
    };

    fn run(&self, ctx: &OpContext, mut input: RanksInput) -> Result<Self::Output, OpError> {
        if input.path.trim().is_empty() {
            match input.paths.as_mut().filter(|p| !p.is_empty()) {
                Some(paths) => input.path = paths.remove(0),
                None => {
                    return Err(OpError::invalid_input(
                        "no exports named: pass path (a folder, a glob or an export) or paths",
                        "e.g. {\"path\": \"run/\"} for a folder of per-rank exports, or {\"paths\": [\"rank0.sqlite\", \"rank1.sqlite\"]}.",
                    ));
                }
            }
        }
        let mut out = analyse_set(ctx, &input)?;
        // A set's answer is about its ranks (alignment, stragglers, collectives); the kernels a rank's step runs
        // and the NVTX ranges it holds are the rules answer's, for the rank on the critical path.
        if let Some(set) = out.set.as_mut() {
            set.ledger.iter_mut().for_each(|s| {
                s.top_kernels.clear();
                s.top_regions.clear();
                s.top_calls.clear();
            });
        }
        out.lead.next = ranks_next(&out);
        out.collectives = out
            .set
            .as_ref()
            .map(|set| {
                // A kind called once (a setup all-gather, say) is not part of the step.
                set.cross_rank
                    .collectives
                    .iter()
                    .filter(|c| c.instances > 1)
                    .map(collective_line)
                    .collect()
            })
            .unwrap_or_default();
        if input.detail {
            super::profile_lean::said_once(&mut out.lead.findings);
        } else {
            // A straggler a listed finding names: its gist gives the figures the set's straggler row would repeat.
            let named: Vec<u64> = out
                .lead
                .findings
                .iter()
                .filter(|f| f.severity > Severity::Info)
                .take(super::profile_lean::DEFAULT_SET_FINDINGS)
                .filter(|f| f.id == "cross_rank_straggler")
                .filter_map(|f| f.data.get("rank").and_then(|r| r.as_u64()))
                .collect();
            let lean = super::profile_lean::lean_findings(
                std::mem::take(&mut out.lead.findings),
                super::profile_lean::DEFAULT_SET_FINDINGS,
            );
            let cut = out
                .set
                .as_mut()
                .map(|set| super::profile_lean::lean_set(set, &named))
                .unwrap_or_default();
            lean.left_out(&cut, &mut out.left_out);
            (out.lead.findings, out.lead.minor) = (lean.findings, lean.minor);
        }
        Ok(out)
    }
}
