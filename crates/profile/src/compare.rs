//! `compare`: two runs (one export each, or a set of per-rank exports each)
//! compared on the **step ledger** (`profile::ledger`), so that the verdict
//! can be trusted:
//!
//! - **The unit is a step on the GPU timeline.** Each side's steady steps
//!   (after warm-up, but the last: it has no next step to end its period)
//!   give one period each: NVTX step ranges (`per_step`), or,
//!   without them, the iterations of a kernel that runs once per iteration
//!   (`per_unit`: a window cut from a longer run holds a whole number of such
//!   units, and a unit of identical work is what can be compared). Never a
//!   total, never a second of capture window: a window's length says how long
//!   the profiler ran, not how much work it saw. With several devices or ranks
//!   the slowest device's steps stand for the run (the others wait for it or
//!   run beside it).
//! - **The change and its interval.** change = median after / median before −
//!   1, with a 95 % percentile-bootstrap interval over the steps of each side
//!   (2,000 resamples, fixed seed: the same answer every time). `improved` /
//!   `regressed` need the whole interval on one side of zero and a change of
//!   at least 2 %; anything else is `no_change`.
//! - **Comparability, stated fact by fact**: GPU model (blocks when both are
//!   recorded and differ), the physical GPUs (UUIDs, recorded or inferred),
//!   host, driver, world size (blocks), how the steps were found, and the work
//!   per step: the kernel-name multiset of the typical steady step (per name,
//!   the median count over the steady steps; summed over the devices or ranks).
//!   The work is the same when the matrix-multiply skeleton is (the number of
//!   GEMM kernels per step, which fusion, precision, copies, overlap and
//!   rebalancing leave alone) or when 80 % of the kernels per step are shared;
//!   otherwise the runs are `not_comparable` (a different model, batch
//!   structure or world size). The kernels whose count per step changed are
//!   listed, with the findings of the before run whose ledger columns they
//!   belong to (the fix's own kernels).
//! - **What moved**: per ledger column the mean ns per steady step on each
//!   side; per kernel name the count and time per step; findings that are
//!   gone, new, shrank or grew.
//! - **Predicted vs measured**: each finding of the before run states the step
//!   its fix alone would leave (`predicted_step_ns`, the ledger's what-if);
//!   compare puts the after run's measured step beside it, with the error, and
//!   says whether that finding's fix is the one applied (the finding is gone
//!   or shrank by half).
//!
//! Without steps on a side (one span), the fallback basis is `per_call`: the
//! time per call of identical launches (same kernel, grid and block), weighted
//! by the before side's calls — kernel speed only, said so.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use aisp_base::Cancel;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::classify::{self, bare_kernel_name};
use super::info;
use super::ledger::{self, Column, DeviceLedger, StepSource};
use super::ranks;
use super::rules::{self, Finding, Severity, Stake};
use super::stats;
use super::{ExportVersion, FileIdentity, Profile, Result, Scope};

/// Smallest change that counts, %: steps of one run vary by about this much between captures.
pub const MIN_CHANGE_PCT: f64 = 2.0;
/// Bootstrap resamples for the interval of the change.
const RESAMPLES: usize = 2000;
/// Steady steps (or units) a side needs for a per-step verdict.
const MIN_STEPS: usize = 3;
/// Kernels per step shared by both sides, %, above which the work counts as the same whatever the GEMMs do.
const SHARED_KERNELS_SAME_PCT: f64 = 80.0;
/// A finding's share of the before run's steady window (%) from which its disappearance is read as its fix
/// applied: smaller ones come and go with the run-to-run spread.
const APPLIED_MIN_SHARE_PCT: f64 = 5.0;
/// Before-side kernel time covered by identical launches for the per-call fallback, %.
const PER_CALL_MIN_COVERAGE_PCT: f64 = 50.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The step got shorter: the whole interval of the change is below zero and the change is at least 2 %.
    Improved,
    /// The step got longer, by the same test.
    Regressed,
    /// The interval holds zero, or the change is under 2 %.
    NoChange,
    /// Different GPU models, world sizes or work per step; or no unit of work to compare.
    NotComparable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no change",
            Verdict::NotComparable => "not comparable",
        }
    }
}

/// What the verdict rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// NVTX steps on both sides: the median GPU step period.
    PerStep,
    /// Detected iterations (a kernel that runs once per iteration) on a side: the median period of a unit of
    /// identical work; step time itself is not recorded.
    PerUnit,
    /// No steps on a side: time per call of identical launches (kernel speed only).
    PerCall,
    /// Not comparable.
    None,
}

/// The change of the step (or unit) period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepChange {
    pub before_median_ns: f64,
    pub after_median_ns: f64,
    pub before_steps: usize,
    pub after_steps: usize,
    /// (after − before) / before × 100.
    pub change_pct: f64,
    /// 95 % interval of change_pct (percentile bootstrap over the steps of each side).
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// The smallest change that counts, %.
    pub min_change_pct: f64,
}

/// One side's figure on a basis, and what it alone says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// `per_step`, `per_unit` or `per_call`.
    pub basis: Basis,
    /// What is measured, with its unit.
    pub metric: String,
    pub before: f64,
    pub after: f64,
    /// (after − before) / before × 100.
    pub change_pct: f64,
    /// 95 % interval of change_pct.
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// What this basis alone says.
    pub says: Verdict,
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Side {
    /// The export, or the folder/glob of a set of ranks.
    pub path: String,
    pub export: ExportVersion,
    /// Devices (one export) or ranks (a set) with GPU work: the world size.
    pub world_size: usize,
    /// Ranks of a set; null for one export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<usize>,
    /// GPU model per device or rank with work ("unknown" when not recorded).
    pub gpus: Vec<String>,
    /// GPU UUID per device or rank; an inferred one ends in " (inferred)"; empty when none is known.
    pub gpu_uuids: Vec<String>,
    pub hosts: Vec<String>,
    pub driver: Option<String>,
    /// How the steps were found on the device that stands for the run.
    pub steps_from: StepSource,
    /// What one step is: `NVTX step` ranges, or `iteration of <anchor kernel>`.
    pub unit: String,
    /// The device (and rank) whose steps stand for the run: the one with the longest median steady period.
    pub device: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub warmup_steps: usize,
    /// Steady steps compared: those after warm-up but the last (it has no next step to end its period).
    pub steady_steps: usize,
    /// Median period of those steps.
    pub step_median_ns: i64,
    /// Coefficient of variation of its steady periods, %.
    pub step_cv_pct: f64,
    /// Its steady periods, in order.
    pub step_periods_ns: Vec<i64>,
    /// Kernels per typical steady step, all devices or ranks.
    pub kernels_per_step: f64,
    /// GEMM kernels per typical steady step, all devices or ranks.
    pub gemms_per_step: f64,
}

/// One fact of comparability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Fact {
    /// `gpu_model`, `gpu_uuids`, `host`, `driver`, `world_size`, `steps_from` or `work_per_step`.
    pub fact: String,
    pub before: String,
    pub after: String,
    /// Null when a side does not record it.
    pub same: Option<bool>,
    /// `blocks` (a difference makes the runs not comparable), `noted` (stated beside the verdict) or `none`.
    pub effect: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// A kernel name whose count per typical step differs between the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelCount {
    pub name: String,
    /// Its ledger column.
    pub column: String,
    pub before: f64,
    pub after: f64,
}

/// Work per step: whether the two runs do the same work in a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkMatch {
    pub same: bool,
    /// Share of the kernels of the typical step that both runs launch (Σ min / larger side), %.
    pub shared_kernels_pct: f64,
    /// Share of calls that are identical launches (same kernel, grid, block) on both sides, smaller side, %.
    pub identical_launch_calls_pct: f64,
    /// Kernel names whose count per step changed most.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<KernelCount>,
    /// Findings of the before run whose ledger columns hold the changed kernels: the fixes' own kernels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explained_by: Vec<String>,
    /// Why the work per step matches or not (the summary repeats it when the runs compare).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Comparability {
    pub comparable: bool,
    pub facts: Vec<Fact>,
    pub work: WorkMatch,
}

/// A finding of the before run: the step its fix alone predicts, and the step the after run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Prediction {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<i64>,
    pub severity: Severity,
    pub share_pct: f64,
    /// The before run's median steady step.
    pub step_ns: i64,
    /// The step the fix alone would leave (the finding's `predicted_step_ns`).
    pub predicted_step_ns: i64,
    /// The after run's median steady step (same device, else the run's).
    pub measured_step_ns: i64,
    /// (predicted − measured) / measured × 100.
    pub error_pct: f64,
    /// What the finding said would then limit the step, and the after run's largest ledger column.
    pub then_limited_by: Option<String>,
    pub measured_limited_by: Option<String>,
    /// This finding in the after run: `gone`, `shrank`, `same` or `grew`.
    pub after: String,
    pub after_share_pct: f64,
    /// Its fix is what changed: a finding of 5 % or more of the steady window that is gone, or whose share fell
    /// by more than half.
    pub applied: bool,
    /// The finding's measured numbers in the before run, in one line (its `gist`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gist: String,
    /// The same finding's line in the after run, where it is still found.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub after_gist: String,
}

/// A finding present in either run (low severity or above on one side).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FindingChange {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<i64>,
    /// `gone`, `new`, `shrank`, `grew` or `same`.
    pub status: String,
    pub before_share_pct: f64,
    pub after_share_pct: f64,
}

/// A ledger column's mean ns per steady step on each side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ColumnChange {
    pub column: String,
    pub before_ns: i64,
    pub after_ns: i64,
    pub change_ns: i64,
}

/// A kernel name per steady step on each side (all devices or ranks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelChange {
    pub name: String,
    pub column: String,
    pub before_count: f64,
    pub after_count: f64,
    pub before_ns: i64,
    pub after_ns: i64,
    pub change_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Compare {
    pub verdict: Verdict,
    pub basis: Basis,
    /// Why, in one sentence with its numbers.
    pub verdict_reason: String,
    /// The verdict, the step change with its interval, comparability and the predictions, in a few lines.
    pub summary: String,
    /// Whether the after run still has a finding above info (the summary's `After, still:` clause names them).
    pub after_limited: bool,
    /// The step (or unit) change; null without a per-step basis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepChange>,
    pub comparability: Comparability,
    /// Per finding of the before run with a prediction: predicted vs measured step.
    pub predictions: Vec<Prediction>,
    /// Findings gone, new, shrunk or grown.
    pub findings: Vec<FindingChange>,
    /// Ledger columns that moved most, per steady step (the device or rank that stands for each run).
    pub columns: Vec<ColumnChange>,
    /// Kernels whose time per step moved most.
    pub kernels: Vec<KernelChange>,
    /// Every basis that could be computed.
    pub evidence: Vec<Evidence>,
    pub before: Side,
    pub after: Side,
}

/// What still limits the after run, in one clause: its findings above info (the first three, as its rules rank them),
/// the first with the numbers it rests on (its gist), so that what bounds the after run needs no second call.
fn what_is_left(after: &[Finding]) -> String {
    findings_clause("After, still:", "After", after)
}

/// What limited the before run, in one clause, where no prediction that the change applied says it: so that what
/// the change was made against needs no second call either.
fn what_was_there(before: &[Finding]) -> String {
    findings_clause("Before:", "Before", before)
}

/// A run's findings above info in one clause (`lead id severity share% ...`, `lead` ending in its colon), or `none:
/// no finding above info`.
fn findings_clause(lead: &str, none: &str, findings: &[Finding]) -> String {
    let listed: Vec<String> = findings
        .iter()
        .filter(|f| f.severity > Severity::Info)
        .take(3)
        .enumerate()
        .map(|(i, f)| {
            let device = f
                .device
                .map_or(String::new(), |d| format!(" on device {d}"));
            let gist = match (i, f.gist.is_empty()) {
                (0, false) => format!(" ({})", f.gist),
                _ => String::new(),
            };
            format!(
                "{} {} {}%{device}{gist}",
                f.id,
                f.severity.as_str(),
                f.share_pct
            )
        })
        .collect();
    if listed.is_empty() {
        format!("{none}: no finding above info (nothing would save 1% of a steady step)")
    } else {
        format!("{lead} {}", listed.join("; "))
    }
}

/// Where the after run's steady step goes, in one clause (the device or rank that stands for the run): the period,
/// the groups above 1 % largest first, and the largest columns, so that "what bounds it now" needs no second call.
fn after_split(a: &Run) -> Option<String> {
    let d = a.lead()?;
    let s = crate::rules::summary(&d.ledger);
    let mut groups: Vec<(&String, &f64)> =
        s.groups_pct.iter().filter(|(_, v)| **v >= 1.0).collect();
    groups.sort_by(|x, y| y.1.total_cmp(x.1).then(x.0.cmp(y.0)));
    let groups: Vec<String> = groups.iter().map(|(g, v)| format!("{g} {v}%")).collect();
    let columns: Vec<String> = s
        .top_columns
        .iter()
        .map(|(c, v)| format!("{c} {v}%"))
        .collect();
    Some(format!(
        "After, the steady window is {}; largest columns: {} (median step {}){}",
        groups.join(", "),
        columns.join(", "),
        ms(d.median_ns() as f64),
        lead_kernels(a)
            .map(|k| format!("; led by {k}"))
            .unwrap_or_default()
    ))
}

/// The two kernels a run's step spends most in (the device or rank that stands for the run): `` `name` 5.40 ms a
/// step (83.3% of the median step) ``, so that which kernels a step is made of needs no kernel listing.
fn lead_kernels(r: &Run) -> Option<String> {
    let d = r.lead()?;
    let median = d.median_ns().max(1) as f64;
    let mut kernels: Vec<(&String, f64)> =
        d.per_step.iter().map(|(n, &(_, t, _))| (n, t)).collect();
    kernels.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(y.0)));
    let lines: Vec<String> = kernels
        .iter()
        .take(2)
        .filter(|(_, t)| *t > 0.0)
        .map(|(n, t)| {
            format!(
                "`{n}` {} a step ({:.1}% of the median step)",
                ms(*t),
                t / median * 100.0
            )
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join(", "))
}

// ---------------------------------------------------------------------------------------------
// What compare reads of one run

/// One device (one export) or rank (a set) of a run.
struct RunDevice {
    rank: Option<u32>,
    ledger: DeviceLedger,
    /// The periods compare reads: the steady steps' but the device's last step, which has no next step to end
    /// its period (the ledger ends it at its own last operation, short of a whole period, and a window that
    /// cuts a step leaves a fragment there).
    periods: Vec<i64>,
    gpu: Option<String>,
    uuid: Option<String>,
    /// Per kernel name: (median count, mean ns) per steady step, and its ledger column.
    per_step: BTreeMap<String, (f64, f64, Column)>,
    gemms: f64,
}

impl RunDevice {
    fn median_ns(&self) -> i64 {
        median_of(&self.periods).round() as i64
    }
}

/// An identical launch: demangled name, grid, block.
type LaunchKey = (String, [u32; 3], [u32; 3]);

/// Calls, Σ ns and Σ ns² of one launch key.
#[derive(Default, Clone, Copy)]
struct LaunchStats {
    n: u64,
    sum: f64,
    sumsq: f64,
}

impl LaunchStats {
    fn mean(&self) -> f64 {
        self.sum / self.n as f64
    }
    fn var(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        ((self.sumsq - self.sum * self.sum / n) / (n - 1.0)).max(0.0)
    }
}

/// A run as compare reads it: its devices' ledgers and work, its findings, its identity.
pub struct Run {
    path: String,
    export: ExportVersion,
    identity: Vec<FileIdentity>,
    set: bool,
    devices: Vec<RunDevice>,
    findings: Vec<Finding>,
    hosts: Vec<String>,
    driver: Option<String>,
    launches: HashMap<LaunchKey, LaunchStats>,
}

impl Run {
    /// One export: its ledger per device and its rules' findings.
    pub fn of_export(p: &Profile) -> Result<Run> {
        let scope = p.resolve(&Scope::default())?;
        let l = ledger::build(p, &scope, None)?;
        let findings = rules::run_on(p, &l)?.findings;
        let gpus = info::gpus(p)?;
        let env = info::environment(p)?;
        let mut devices = Vec::new();
        let mut launches = HashMap::new();
        for d in l.devices {
            let g = gpus.iter().find(|g| g.device == d.device);
            let rd = device_work(p, d, None, g, &mut launches)?;
            devices.push(rd);
        }
        Ok(Run {
            path: p.source().display().to_string(),
            export: p.version().clone(),
            identity: vec![p.identity().clone()],
            set: false,
            devices,
            findings,
            hosts: env.hostname.into_iter().collect(),
            driver: env.driver_version,
            launches,
        })
    }

    /// A set of per-rank exports: every rank's ledger with its collective time split into wait and transfer,
    /// and the set's findings (the straggler and, per rule, the ranks' findings read on the critical path).
    pub fn of_set(path: &str, threads: usize, cancelled: Cancel<'_>) -> Result<Run> {
        let files = ranks::expand(path)?;
        let (set, digests) = ranks::analyse(&files, threads, cancelled, &|_| {})?;
        let findings = ranks::set_findings(&set, &digests);
        let mut devices = Vec::new();
        let mut launches = HashMap::new();
        let mut hosts = BTreeSet::new();
        let mut driver = None;
        let mut identity = Vec::new();
        let mut export = None;
        for d in digests {
            let Some(rl) = d.ledger else {
                continue;
            };
            let p = super::open(Path::new(&d.identity.file))?;
            if let Some(h) = &d.identity.hostname {
                hosts.insert(h.clone());
            }
            let env = info::environment(&p)?;
            driver = driver.or(env.driver_version);
            identity.push(p.identity().clone());
            export.get_or_insert_with(|| p.version().clone());
            let gpus = info::gpus(&p)?;
            let g = gpus.iter().find(|g| g.device == rl.ledger.device);
            devices.push(device_work(
                &p,
                rl.ledger,
                Some(d.identity.rank),
                g,
                &mut launches,
            )?);
        }
        Ok(Run {
            path: path.to_string(),
            export: export.unwrap_or(ExportVersion {
                product: None,
                product_version: None,
                schema_version: None,
            }),
            identity,
            set: true,
            devices,
            findings,
            hosts: hosts.into_iter().collect(),
            driver,
            launches,
        })
    }

    /// The device whose steps stand for the run: the longest median steady period.
    fn lead(&self) -> Option<&RunDevice> {
        self.devices
            .iter()
            .filter(|d| !d.periods.is_empty())
            .max_by_key(|d| (d.median_ns(), std::cmp::Reverse(d.ledger.device)))
    }

    /// Per kernel name over all devices: (count, ns, column) per typical step.
    fn work(&self) -> BTreeMap<String, (f64, f64, Column)> {
        let mut out: BTreeMap<String, (f64, f64, Column)> = BTreeMap::new();
        for d in &self.devices {
            for (n, &(c, t, col)) in &d.per_step {
                let e = out.entry(n.clone()).or_insert((0.0, 0.0, col));
                e.0 += c;
                e.1 += t;
            }
        }
        out
    }

    fn gemms(&self) -> f64 {
        self.devices.iter().map(|d| d.gemms).sum()
    }
}

/// The work of one device's steady steps, and its launches for the per-call basis.
fn device_work(
    p: &Profile,
    l: DeviceLedger,
    rank: Option<u32>,
    g: Option<&info::GpuInfo>,
    launches: &mut HashMap<LaunchKey, LaunchStats>,
) -> Result<RunDevice> {
    let steady: Vec<(i64, i64)> = l
        .steady_steps()
        .map(|s| (s.start_ns, s.start_ns + s.period_ns))
        .collect();
    let n = steady.len();
    let starts: Vec<i64> = steady.iter().map(|s| s.0).collect();
    // Per short name: count per steady step, ns, and its ledger column (from its first demangled variant).
    let mut per: HashMap<i64, (Vec<u32>, i64, Column)> = HashMap::new();
    let mut class: HashMap<i64, (Column, bool)> = HashMap::new();
    let mut gemm_counts = vec![0u32; n];
    for k in p.kernels()?.iter().filter(|k| k.device == l.device) {
        let i = starts.partition_point(|&s| s <= k.start);
        let Some(i) = i.checked_sub(1).filter(|&i| k.start < steady[i].1) else {
            continue;
        };
        let (col, gemm) = *class.entry(k.demangled_name).or_insert_with(|| {
            let short = p.string(k.short_name);
            if super::nccl::is_nccl(short) {
                return (Column::Comm, false);
            }
            let c = classify::classify(p.string(k.demangled_name), short, k.grid, k.block);
            (
                ledger::compute_column(c.class, p.string(k.demangled_name)),
                c.class.is_gemm(),
            )
        });
        let e = per
            .entry(k.short_name)
            .or_insert_with(|| (vec![0; n], 0, col));
        e.0[i] += 1;
        e.1 += k.dur();
        if gemm {
            gemm_counts[i] += 1;
        }
        // A collective's duration includes waiting for the other ranks: not kernel speed.
        if col == Column::Comm {
            continue;
        }
        let s = launches
            .entry((p.string(k.demangled_name).to_string(), k.grid, k.block))
            .or_default();
        let d = k.dur() as f64;
        s.n += 1;
        s.sum += d;
        s.sumsq += d * d;
    }
    let per_step: BTreeMap<String, (f64, f64, Column)> = per
        .into_iter()
        .map(|(name, (mut counts, ns, col))| {
            (
                p.string(name).to_string(),
                (stats::median(&mut counts), ns as f64 / n.max(1) as f64, col),
            )
        })
        .collect();
    let gemms = stats::median(&mut gemm_counts);
    let (gpu, uuid) = match g {
        Some(g) => (
            g.name.clone(),
            g.uuid
                .clone()
                .or_else(|| g.inferred_uuid.as_ref().map(|u| format!("{u} (inferred)"))),
        ),
        None => (None, None),
    };
    let last = l.steps.last().map(|x| x.index);
    let mut periods: Vec<i64> = l
        .steady_steps()
        .filter(|x| Some(x.index) != last)
        .map(|x| x.period_ns)
        .collect();
    if periods.is_empty() {
        periods = l.steady_steps().map(|x| x.period_ns).collect();
    }
    Ok(RunDevice {
        rank,
        periods,
        ledger: l,
        gpu,
        uuid,
        per_step,
        gemms,
    })
}

// ---------------------------------------------------------------------------------------------
// The comparison

/// Compare two exports.
pub fn compare(before: &Profile, after: &Profile, limit: usize) -> Result<Compare> {
    let b = Run::of_export(before)?;
    let a = Run::of_export(after)?;
    Ok(compare_runs(&b, &a, limit))
}

/// Open a run: a set of ranks when `path` names a folder or glob, else one export.
pub fn open_run(path: &Path, threads: usize, cancelled: Cancel<'_>) -> Result<Run> {
    let s = path.display().to_string();
    if ranks::is_set(&s) {
        Run::of_set(&s, threads, cancelled)
    } else {
        Run::of_export(&super::open(path)?)
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

/// A deterministic generator for the bootstrap (SplitMix64).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn median_of(v: &[i64]) -> f64 {
    let mut x = v.to_vec();
    stats::median(&mut x)
}

/// The change of the median (after / before − 1, %) and its 95 % percentile-bootstrap interval.
pub fn change_with_interval(before: &[i64], after: &[i64]) -> (f64, f64, f64) {
    let (mb, ma) = (median_of(before), median_of(after));
    if before.is_empty() || after.is_empty() || mb <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let mut rng = SplitMix(32);
    let mut out = Vec::with_capacity(RESAMPLES);
    let (mut xb, mut xa) = (vec![0i64; before.len()], vec![0i64; after.len()]);
    for _ in 0..RESAMPLES {
        for x in xb.iter_mut() {
            *x = before[rng.below(before.len())];
        }
        for x in xa.iter_mut() {
            *x = after[rng.below(after.len())];
        }
        let (b, a) = (stats::median(&mut xb), stats::median(&mut xa));
        if b > 0.0 {
            out.push(a / b - 1.0);
        }
    }
    out.sort_by(f64::total_cmp);
    let q = |p: f64| out[((p * out.len() as f64) as usize).min(out.len() - 1)];
    (
        round2((ma / mb - 1.0) * 100.0),
        round2(q(0.025) * 100.0),
        round2(q(0.975) * 100.0),
    )
}

fn says(change: f64, lo: f64, hi: f64) -> Verdict {
    if hi < 0.0 && change <= -MIN_CHANGE_PCT {
        Verdict::Improved
    } else if lo > 0.0 && change >= MIN_CHANGE_PCT {
        Verdict::Regressed
    } else {
        Verdict::NoChange
    }
}

fn unit_of(d: &DeviceLedger) -> String {
    match d.source {
        StepSource::Nvtx => format!("NVTX step (`{}_N`)", d.family.as_deref().unwrap_or("step")),
        StepSource::KernelPattern => {
            format!(
                "iteration of `{}`",
                bare_kernel_name(d.family.as_deref().unwrap_or("?"))
            )
        }
        StepSource::KernelSequence => format!(
            "repetition of the kernel sequence opened by `{}`",
            bare_kernel_name(d.family.as_deref().unwrap_or("?"))
        ),
        StepSource::Span => "none (no steps: the device's span)".into(),
    }
}

fn side(r: &Run) -> Side {
    let lead = r.lead();
    let work = r.work();
    let (periods, source, unit, device, rank, warm, steady, med, cv) = match lead {
        Some(d) => {
            let l = &d.ledger;
            (
                d.periods.clone(),
                l.source.clone(),
                unit_of(l),
                l.device,
                d.rank,
                l.warmup_steps,
                d.periods.len(),
                d.median_ns(),
                super::iterations::spread(&d.periods).map_or(0.0, |x| x.cv_pct),
            )
        }
        None => (
            Vec::new(),
            StepSource::Span,
            "none".to_string(),
            0,
            None,
            0,
            0,
            0,
            0.0,
        ),
    };
    let mut uuids: Vec<String> = r.devices.iter().filter_map(|d| d.uuid.clone()).collect();
    if uuids.len() != r.devices.len() {
        uuids.clear();
    }
    Side {
        path: r.path.clone(),
        export: r.export.clone(),
        world_size: r.devices.len(),
        ranks: r.set.then_some(r.devices.len()),
        gpus: r
            .devices
            .iter()
            .map(|d| d.gpu.clone().unwrap_or_else(|| "unknown".into()))
            .collect(),
        gpu_uuids: uuids,
        hosts: r.hosts.clone(),
        driver: r.driver.clone(),
        steps_from: source,
        unit,
        device,
        rank,
        warmup_steps: warm,
        steady_steps: steady,
        step_median_ns: med,
        step_cv_pct: cv,
        step_periods_ns: periods,
        kernels_per_step: round2(work.values().map(|v| v.0).sum()),
        gemms_per_step: round2(r.gemms()),
    }
}

fn set_of(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v.dedup();
    v
}

fn fact(name: &str, before: &[String], after: &[String], blocks: bool, note_differs: &str) -> Fact {
    let known = |v: &[String]| !v.is_empty() && v.iter().all(|x| x != "unknown");
    let same = (known(before) && known(after)).then(|| set_of(before) == set_of(after));
    let show = |v: &[String]| {
        if v.is_empty() {
            "not recorded".to_string()
        } else {
            let s = set_of(v);
            if s.len() == 1 && v.len() > 1 {
                format!("{} × {}", v.len(), s[0])
            } else {
                s.join(", ")
            }
        }
    };
    Fact {
        fact: name.into(),
        before: show(before),
        after: show(after),
        same,
        effect: match same {
            Some(false) if blocks => "blocks",
            Some(false) => "noted",
            None => "noted",
            Some(true) => "none",
        }
        .into(),
        note: match same {
            Some(false) => note_differs.to_string(),
            None => {
                "not recorded on both sides: the same hardware or software is not verified".into()
            }
            Some(true) => String::new(),
        },
    }
}

/// Share of calls in identical launches (smaller side), %.
fn identical_launch_pct(b: &Run, a: &Run) -> f64 {
    let calls = |x: &Run| x.launches.values().map(|v| v.n).sum::<u64>() as f64;
    let (cb, ca) = (calls(b), calls(a));
    if cb == 0.0 || ca == 0.0 {
        return 0.0;
    }
    let shared = |x: &Run, y: &Run| {
        x.launches
            .iter()
            .filter(|(k, _)| y.launches.contains_key(*k))
            .map(|(_, v)| v.n)
            .sum::<u64>() as f64
    };
    round2((shared(b, a) / cb).min(shared(a, b) / ca) * 100.0)
}

/// The per-call evidence over identical launches, and the before side's kernel time they cover (%).
fn per_call(b: &Run, a: &Run) -> (Option<Evidence>, f64) {
    let shared: Vec<(&LaunchStats, &LaunchStats)> = b
        .launches
        .iter()
        .filter_map(|(k, x)| a.launches.get(k).map(|y| (x, y)))
        .collect();
    let total: f64 = b.launches.values().map(|x| x.sum).sum();
    let den: f64 = shared.iter().map(|(x, _)| x.sum).sum();
    let coverage = if total > 0.0 {
        100.0 * den / total
    } else {
        0.0
    };
    let num: f64 = shared.iter().map(|(x, y)| x.n as f64 * y.mean()).sum();
    if shared.is_empty() || den <= 0.0 || num <= 0.0 {
        return (None, coverage);
    }
    let var_num: f64 = shared
        .iter()
        .map(|(x, y)| (x.n as f64).powi(2) * y.var() / y.n as f64)
        .sum();
    let var_den: f64 = shared.iter().map(|(x, _)| x.n as f64 * x.var()).sum();
    let se = 100.0 * (var_num / (num * num) + var_den / (den * den)).sqrt();
    let change = round2((num / den - 1.0) * 100.0);
    let (lo, hi) = (round2(change - 1.96 * se), round2(change + 1.96 * se));
    (
        Some(Evidence {
            basis: Basis::PerCall,
            metric: "kernel time of identical launches (same kernel, grid, block) at the before side's calls, ns; \
                     interval from the per-launch spread"
                .into(),
            before: den.round(),
            after: num.round(),
            change_pct: change,
            ci_low_pct: lo,
            ci_high_pct: hi,
            says: says(change, lo, hi),
        }),
        round2(coverage),
    )
}

/// Whether the two runs do the same work per step, and what changed.
fn work_match(b: &Run, a: &Run, sb: &Side, sa: &Side) -> WorkMatch {
    let (wb, wa) = (b.work(), a.work());
    let names: BTreeSet<&String> = wb.keys().chain(wa.keys()).collect();
    let mut shared = 0.0;
    let mut changed: Vec<KernelCount> = Vec::new();
    for n in &names {
        let (cb, _, colb) = wb
            .get(*n)
            .copied()
            .unwrap_or((0.0, 0.0, Column::OtherKernel));
        let (ca, _, cola) = wa
            .get(*n)
            .copied()
            .unwrap_or((0.0, 0.0, Column::OtherKernel));
        shared += cb.min(ca);
        if (cb - ca).abs() >= 0.5 {
            changed.push(KernelCount {
                name: (*n).clone(),
                column: if wb.contains_key(*n) { colb } else { cola }
                    .as_str()
                    .into(),
                before: cb,
                after: ca,
            });
        }
    }
    let larger = sb.kernels_per_step.max(sa.kernels_per_step);
    let shared_pct = if larger > 0.0 {
        round2(100.0 * shared / larger)
    } else {
        0.0
    };
    changed.sort_by(|x, y| {
        (y.before - y.after)
            .abs()
            .total_cmp(&(x.before - x.after).abs())
            .then(x.name.cmp(&y.name))
    });
    // The before run's findings whose columns hold the changed kernels.
    let mut explained: Vec<String> = Vec::new();
    let mut covered: std::collections::BTreeSet<String> = Default::default();
    for f in &b.findings {
        if f.severity < Severity::Low {
            continue;
        }
        let mut cols: Vec<&str> = f.columns.iter().map(String::as_str).collect();
        // A precision fix moves GEMMs between the GEMM columns.
        if cols.contains(&"gemm_fp32_simt") {
            cols.extend(["gemm_tensor_core", "gemm_other"]);
        }
        // Overlap and rebalancing change the collectives and the bucket copies beside them.
        if cols.iter().any(|c| c.starts_with("comm")) {
            cols.extend(["comm", "copy_kernel", "elementwise"]);
        }
        if changed.iter().any(|k| cols.contains(&k.column.as_str())) && !explained.contains(&f.id) {
            explained.push(f.id.clone());
        }
        covered.extend(cols.into_iter().map(str::to_string));
    }
    // The findings explain the change only when their columns hold the kernels that changed most: a fix of
    // something no finding named (float32 attention made bf16) also changes an elementwise count or two.
    if changed.iter().take(3).any(|k| !covered.contains(&k.column)) {
        explained.clear();
    }
    let ident = identical_launch_pct(b, a);
    let (gb, ga) = (sb.gemms_per_step, sa.gemms_per_step);
    let skeleton = if gb == 0.0 && ga == 0.0 {
        None
    } else {
        Some((gb - ga).abs() <= 0.5f64.max(0.02 * gb.max(ga)))
    };
    let (same, reason) = if sb.steady_steps == 0 || sa.steady_steps == 0 {
        (
            ident >= 50.0,
            format!(
                "no steps on {}: work per step is unknown; {ident}% of calls are identical launches",
                if sb.steady_steps == 0 {
                    "the before side"
                } else {
                    "the after side"
                }
            ),
        )
    } else if skeleton == Some(true) {
        (
            true,
            format!(
                "the same matrix-multiply skeleton: {gb} GEMM kernels per step on both sides; {shared_pct}% of the \
                 kernels per step shared"
            ),
        )
    } else if shared_pct >= SHARED_KERNELS_SAME_PCT {
        (
            true,
            format!("{shared_pct}% of the kernels per step shared (GEMMs per step {gb} vs {ga})"),
        )
    } else if let Some(removed) = removed_work(shared, sb, sa) {
        (true, removed)
    } else {
        (
            false,
            match skeleton {
                Some(false) => format!(
                    "different work per step: {gb} vs {ga} GEMM kernels per step and only {shared_pct}% of the \
                     kernels per step shared (a different model, batch structure or code path)"
                ),
                _ => format!(
                    "different work per step: only {shared_pct}% of the kernels per step shared (under \
                     {SHARED_KERNELS_SAME_PCT}%)"
                ),
            },
        )
    };
    changed.truncate(8);
    WorkMatch {
        same,
        shared_kernels_pct: shared_pct,
        identical_launch_calls_pct: ident,
        changed,
        explained_by: explained,
        reason,
    }
}

/// Kernels of the after run's step that must be the before run's (%) for the after run to count as the before
/// run's work with some removed.
const SUBSET_PCT: f64 = 95.0;

/// When the after run's step is the before run's with work taken out — its kernels (nearly) all the before run's,
/// fewer of them, its GEMMs no more — the change removed work (a merged adapter, a redundant pass, a dropped
/// copy) and the steps compare: why, with what was removed. A different model or code path launches kernels of its
/// own and is not this.
fn removed_work(shared: f64, sb: &Side, sa: &Side) -> Option<String> {
    let (kb, ka) = (sb.kernels_per_step, sa.kernels_per_step);
    let (gb, ga) = (sb.gemms_per_step, sa.gemms_per_step);
    let subset_pct = if ka > 0.0 { 100.0 * shared / ka } else { 0.0 };
    (ka > 0.0 && ka < kb && ga <= gb && (ga > 0.0 || gb == 0.0) && subset_pct >= SUBSET_PCT).then(|| {
        format!(
            "the before run's work with some removed: {} of the after run's {ka} kernels per step are the before \
             run's, which launched {kb} ({gb} GEMMs, {ga} after); the change took out {} kernels per step",
            round2(shared),
            round2(kb - ka)
        )
    })
}

/// The findings of a run keyed by (id, device).
fn finding_map(r: &Run) -> BTreeMap<(String, Option<i64>), &Finding> {
    let mut m = BTreeMap::new();
    for f in &r.findings {
        m.entry((f.id.clone(), f.device)).or_insert(f);
    }
    m
}

fn status(before: f64, after: f64) -> &'static str {
    if before >= 1.0 && after < 1.0 {
        "gone"
    } else if before < 1.0 && after >= 1.0 {
        "new"
    } else if after < before * 0.67 {
        "shrank"
    } else if after > before * 1.5 {
        "grew"
    } else {
        "same"
    }
}

fn finding_changes(b: &Run, a: &Run) -> Vec<FindingChange> {
    let (mb, ma) = (finding_map(b), finding_map(a));
    let keys: BTreeSet<&(String, Option<i64>)> = mb.keys().chain(ma.keys()).collect();
    let share = |f: Option<&&Finding>| {
        f.filter(|f| f.stake != Stake::None)
            .map_or(0.0, |f| f.share_pct)
    };
    let mut out: Vec<FindingChange> = keys
        .into_iter()
        .filter_map(|k| {
            let (x, y) = (share(mb.get(k)), share(ma.get(k)));
            (x >= 1.0 || y >= 1.0).then(|| FindingChange {
                id: k.0.clone(),
                device: k.1,
                status: status(x, y).into(),
                before_share_pct: x,
                after_share_pct: y,
            })
        })
        .collect();
    out.sort_by(|x, y| {
        (y.before_share_pct - y.after_share_pct)
            .abs()
            .total_cmp(&(x.before_share_pct - x.after_share_pct).abs())
            .then(x.id.cmp(&y.id))
    });
    out
}

fn predictions(b: &Run, a: &Run) -> Vec<Prediction> {
    let ma = finding_map(a);
    let lead_a = a.lead();
    let mut out = Vec::new();
    for f in &b.findings {
        let (Some(step), Some(pred)) = (f.step_ns, f.predicted_step_ns) else {
            continue;
        };
        if f.severity < Severity::Low || f.stake == Stake::None {
            continue;
        }
        // The same device in the after run, else the run's lead device.
        let dev = f
            .device
            .and_then(|d| {
                a.devices
                    .iter()
                    .find(|x| x.rank.is_none() && x.ledger.device == d)
            })
            .or(lead_a);
        let Some(dev) = dev else {
            continue;
        };
        let measured = dev.median_ns();
        if measured <= 0 {
            continue;
        }
        let after = ma
            .get(&(f.id.clone(), f.device))
            .filter(|g| g.stake != Stake::None);
        let after_share = after.map_or(0.0, |g| g.share_pct);
        let st = status(f.share_pct, after_share);
        out.push(Prediction {
            id: f.id.clone(),
            device: f.device,
            severity: f.severity,
            share_pct: f.share_pct,
            step_ns: step,
            predicted_step_ns: pred,
            measured_step_ns: measured,
            error_pct: round2((pred - measured) as f64 / measured as f64 * 100.0),
            then_limited_by: f.then_limited_by.clone(),
            measured_limited_by: dev
                .ledger
                .steady
                .columns
                .largest(None)
                .map(|(c, _)| c.as_str().to_string()),
            after: if st == "new" {
                "same".into()
            } else {
                st.into()
            },
            after_share_pct: after_share,
            applied: f.share_pct >= APPLIED_MIN_SHARE_PCT && after_share < f.share_pct * 0.5,
            gist: f.gist.clone(),
            after_gist: after.map_or(String::new(), |g| g.gist.clone()),
        });
    }
    out
}

fn column_changes(b: &Run, a: &Run) -> Vec<ColumnChange> {
    let (Some(db), Some(da)) = (b.lead(), a.lead()) else {
        return Vec::new();
    };
    let per = |d: &RunDevice, c: Column| {
        d.ledger.steady.columns.get(c) / d.ledger.steady.steps.max(1) as i64
    };
    let mut out: Vec<ColumnChange> = Column::ALL
        .iter()
        .filter_map(|&c| {
            let (x, y) = (per(db, c), per(da, c));
            (x != 0 || y != 0).then(|| ColumnChange {
                column: c.as_str().into(),
                before_ns: x,
                after_ns: y,
                change_ns: y - x,
            })
        })
        .collect();
    out.sort_by_key(|c| (std::cmp::Reverse(c.change_ns.abs()), c.column.clone()));
    out
}

fn kernel_changes(b: &Run, a: &Run, limit: usize) -> Vec<KernelChange> {
    let (wb, wa) = (b.work(), a.work());
    let names: BTreeSet<&String> = wb.keys().chain(wa.keys()).collect();
    let mut out: Vec<KernelChange> = names
        .into_iter()
        .map(|n| {
            let x = wb.get(n).copied();
            let y = wa.get(n).copied();
            let col = x.or(y).map_or(Column::OtherKernel, |v| v.2);
            let (bc, bt) = x.map_or((0.0, 0.0), |v| (v.0, v.1));
            let (ac, at) = y.map_or((0.0, 0.0), |v| (v.0, v.1));
            KernelChange {
                name: n.clone(),
                column: col.as_str().into(),
                before_count: bc,
                after_count: ac,
                before_ns: bt.round() as i64,
                after_ns: at.round() as i64,
                change_ns: (at - bt).round() as i64,
            }
        })
        .filter(|k| k.change_ns != 0)
        .collect();
    out.sort_by_key(|k| (std::cmp::Reverse(k.change_ns.abs()), k.name.clone()));
    out.truncate(limit);
    out
}

/// Compare two runs.
pub fn compare_runs(b: &Run, a: &Run, limit: usize) -> Compare {
    let (sb, sa) = (side(b), side(a));
    let same_capture = !b.identity.is_empty() && b.identity == a.identity;
    let mut facts = vec![
        fact(
            "gpu_model",
            &sb.gpus,
            &sa.gpus,
            true,
            "different GPU models: a change would mix the code change with the hardware change",
        ),
        fact(
            "gpu_uuids",
            &sb.gpu_uuids,
            &sa.gpu_uuids,
            false,
            "different physical GPUs: clocks, thermals and silicon vary by a few % between GPUs of one model",
        ),
        fact(
            "host",
            &sb.hosts,
            &sa.hosts,
            false,
            "different hosts: CPU, PCIe and interconnect may differ",
        ),
        fact(
            "driver",
            &sb.driver.iter().cloned().collect::<Vec<_>>(),
            &sa.driver.iter().cloned().collect::<Vec<_>>(),
            false,
            "different drivers",
        ),
        {
            let mut f = fact(
                "world_size",
                &[sb.world_size.to_string()],
                &[sa.world_size.to_string()],
                true,
                "different numbers of devices or ranks: the work per device differs",
            );
            if f.same == Some(false) {
                f.before = format!("{} device(s) or rank(s)", sb.world_size);
                f.after = format!("{} device(s) or rank(s)", sa.world_size);
            }
            f
        },
        {
            let sf = |s: &Side| s.unit.clone();
            let same = sb.steps_from == sa.steps_from;
            Fact {
                fact: "steps_from".into(),
                before: sf(&sb),
                after: sf(&sa),
                same: Some(same),
                effect: if same { "none" } else { "noted" }.into(),
                note: if same {
                    String::new()
                } else {
                    "the steps are found differently on the two sides: the periods compare units of the same work \
                     only if the work per step matches (below)"
                        .into()
                },
            }
        },
    ];
    let work = work_match(b, a, &sb, &sa);
    facts.push(Fact {
        fact: "work_per_step".into(),
        before: format!(
            "{} kernels ({} GEMMs) per step",
            sb.kernels_per_step, sb.gemms_per_step
        ),
        after: format!(
            "{} kernels ({} GEMMs) per step",
            sa.kernels_per_step, sa.gemms_per_step
        ),
        same: Some(work.same),
        effect: if work.same { "none" } else { "blocks" }.into(),
        note: work.reason.clone(),
    });
    let blocking: Vec<&Fact> = facts.iter().filter(|f| f.effect == "blocks").collect();
    let comparable = blocking.is_empty();
    // Evidence.
    let mut evidence = Vec::new();
    let both_steps = sb.steady_steps >= MIN_STEPS
        && sa.steady_steps >= MIN_STEPS
        && sb.steps_from != StepSource::Span
        && sa.steps_from != StepSource::Span;
    let step = both_steps.then(|| {
        let (c, lo, hi) = change_with_interval(&sb.step_periods_ns, &sa.step_periods_ns);
        StepChange {
            before_median_ns: median_of(&sb.step_periods_ns),
            after_median_ns: median_of(&sa.step_periods_ns),
            before_steps: sb.steady_steps,
            after_steps: sa.steady_steps,
            change_pct: c,
            ci_low_pct: lo,
            ci_high_pct: hi,
            min_change_pct: MIN_CHANGE_PCT,
        }
    });
    let step_basis = if sb.steps_from == StepSource::Nvtx && sa.steps_from == StepSource::Nvtx {
        Basis::PerStep
    } else {
        Basis::PerUnit
    };
    if let Some(s) = &step {
        evidence.push(Evidence {
            basis: step_basis,
            metric: if step_basis == Basis::PerStep {
                "median GPU step period of the steady steps (first GPU operation to the next step's), ns".into()
            } else {
                "median GPU period of the steady units (one occurrence of the anchor kernel to the next), ns".into()
            },
            before: s.before_median_ns,
            after: s.after_median_ns,
            change_pct: s.change_pct,
            ci_low_pct: s.ci_low_pct,
            ci_high_pct: s.ci_high_pct,
            says: says(s.change_pct, s.ci_low_pct, s.ci_high_pct),
        });
    }
    let (pc, coverage) = per_call(b, a);
    if let Some(e) = &pc {
        evidence.push(e.clone());
    }
    let pct = |c: f64, lo: f64, hi: f64| format!("{c:+.2}% (95% CI {lo:+.2}% to {hi:+.2}%)");
    let (verdict, basis, reason) = if same_capture {
        (
            Verdict::NoChange,
            if both_steps {
                step_basis
            } else {
                Basis::PerCall
            },
            "the same capture on both sides".to_string(),
        )
    } else if !comparable {
        let why: Vec<String> = blocking
            .iter()
            .map(|f| match f.fact.as_str() {
                "work_per_step" => f.note.clone(),
                "gpu_model" => format!("different GPU models ({} vs {})", f.before, f.after),
                "world_size" => format!("different world sizes ({} vs {})", f.before, f.after),
                other => format!("{other} differs"),
            })
            .collect();
        (Verdict::NotComparable, Basis::None, why.join("; "))
    } else if let Some(s) = &step {
        let v = says(s.change_pct, s.ci_low_pct, s.ci_high_pct);
        let what = if step_basis == Basis::PerStep {
            "median step".to_string()
        } else {
            format!(
                "median period per unit of identical work ({}; step time itself is not recorded: no step ranges)",
                if sb.unit == sa.unit {
                    sb.unit.clone()
                } else {
                    format!("{} vs {}", sb.unit, sa.unit)
                }
            )
        };
        let mut r = format!(
            "{what} {} → {}: {}",
            ms(s.before_median_ns),
            ms(s.after_median_ns),
            pct(s.change_pct, s.ci_low_pct, s.ci_high_pct)
        );
        if v == Verdict::NoChange {
            r.push_str(&format!(
                "; {}",
                if s.change_pct.abs() < MIN_CHANGE_PCT {
                    format!("under the {MIN_CHANGE_PCT}% that counts as a change")
                } else {
                    "the interval holds zero: within the run-to-run spread".into()
                }
            ));
        }
        (v, step_basis, r)
    } else if let Some(e) = pc
        .as_ref()
        .filter(|_| coverage >= PER_CALL_MIN_COVERAGE_PCT)
    {
        (
            e.says,
            Basis::PerCall,
            format!(
                "no steps on {} (fewer than {MIN_STEPS} steady steps or units): kernel speed only — time per call of \
                 identical launches changed {}; step time is not comparable",
                if sb.steady_steps < MIN_STEPS {
                    "the before side"
                } else {
                    "the after side"
                },
                pct(e.change_pct, e.ci_low_pct, e.ci_high_pct)
            ),
        )
    } else {
        (
            Verdict::NotComparable,
            Basis::None,
            format!(
                "no unit of work on both sides: fewer than {MIN_STEPS} steady steps or units on a side, and identical \
                 launches cover {coverage:.0}% of the before side's kernel time (under {PER_CALL_MIN_COVERAGE_PCT}%); \
                 wrap each iteration in an NVTX range `step_N`"
            ),
        )
    };
    // Between runs of different work, a step change and predicted-vs-measured say nothing.
    let (step, evidence) = if verdict == Verdict::NotComparable {
        (None, Vec::new())
    } else {
        (step, evidence)
    };
    let predictions = if verdict == Verdict::NotComparable {
        Vec::new()
    } else {
        predictions(b, a)
    };
    let findings = finding_changes(b, a);
    let mut summary = format!("{}: {reason}", verdict.as_str());
    let noted: Vec<String> = facts
        .iter()
        .filter(|f| f.effect == "noted" && f.same == Some(false))
        .map(|f| {
            format!(
                "{} differs ({} vs {})",
                f.fact.replace('_', " "),
                f.before,
                f.after
            )
        })
        .collect();
    if verdict != Verdict::NotComparable {
        summary.push_str(&format!(". Comparable: {}", work.reason));
        if !work.explained_by.is_empty() && !work.changed.is_empty() {
            summary.push_str(&format!(
                " (the kernels that changed are those of {})",
                work.explained_by.join(", ")
            ));
        }
        if !noted.is_empty() {
            summary.push_str(&format!("; noted: {}", noted.join("; ")));
        }
        let applied: Vec<String> = predictions
            .iter()
            .filter(|p| p.applied)
            .map(|p| {
                format!(
                    "{} {} (predicted {}, measured {}, {:+.1}%)",
                    p.id,
                    p.after,
                    ms(p.predicted_step_ns as f64),
                    ms(p.measured_step_ns as f64),
                    p.error_pct
                )
            })
            .collect();
        if applied.is_empty() {
            summary.push_str(&format!(". {}", what_was_there(&b.findings)));
            if !b.findings.iter().any(|f| f.severity > Severity::Info) {
                summary.push_str(
                    &lead_kernels(b)
                        .map(|k| format!("; its step was led by {k}"))
                        .unwrap_or_default(),
                );
            }
        } else {
            summary.push_str(&format!(". Fixed: {}", applied.join("; ")));
        }
        summary.push_str(&format!(". {}", what_is_left(&a.findings)));
        if let Some(split) = after_split(a) {
            summary.push_str(&format!(". {split}"));
        }
    } else {
        // Each run still has its own step and its own limits: stated as facts of each run, not as a change.
        if sb.steady_steps > 0 && sa.steady_steps > 0 {
            summary.push_str(&format!(
                ". Each run on its own (the work differs, so not a like-for-like change): a median steady step of {} \
                 before and {} after",
                ms(sb.step_median_ns as f64),
                ms(sa.step_median_ns as f64)
            ));
        }
        summary.push_str(&format!(". {}", what_was_there(&b.findings)));
        summary.push_str(&format!(". {}", what_is_left(&a.findings)));
    }
    Compare {
        verdict,
        basis,
        verdict_reason: reason,
        summary,
        after_limited: a.findings.iter().any(|f| f.severity > Severity::Info),
        step,
        comparability: Comparability {
            comparable,
            facts,
            work,
        },
        predictions,
        findings,
        columns: {
            let mut c = column_changes(b, a);
            c.truncate(limit.max(1));
            c
        },
        kernels: kernel_changes(b, a, limit),
        evidence,
        before: sb,
        after: sa,
    }
}

/// The runs a compare reads, by path (for callers that hold paths, not profiles).
pub fn compare_paths(
    before: &Path,
    after: &Path,
    limit: usize,
    threads: usize,
    cancelled: Cancel<'_>,
) -> Result<Compare> {
    let b = open_run(before, threads, cancelled)?;
    let a = open_run(after, threads, cancelled)?;
    Ok(compare_runs(&b, &a, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_of_a_clear_change_excludes_zero_and_a_flat_one_holds_it() {
        let b: Vec<i64> = (0..30).map(|i| 10_000 + (i % 5) * 50).collect();
        let a: Vec<i64> = (0..30).map(|i| 8_000 + (i % 5) * 50).collect();
        let (c, lo, hi) = change_with_interval(&b, &a);
        assert!((c + 19.9).abs() < 0.2, "{c}");
        assert!(lo <= c && c <= hi && hi < 0.0, "{lo} {c} {hi}");
        assert_eq!(says(c, lo, hi), Verdict::Improved);
        let (c, lo, hi) = change_with_interval(&b, &b);
        assert_eq!(c, 0.0);
        assert!(lo <= 0.0 && hi >= 0.0);
        assert_eq!(says(c, lo, hi), Verdict::NoChange);
        // Deterministic.
        assert_eq!(change_with_interval(&b, &a), change_with_interval(&b, &a));
        // A real but small change is no change.
        assert_eq!(says(-1.0, -1.5, -0.5), Verdict::NoChange);
        assert_eq!(says(3.0, 1.0, 5.0), Verdict::Regressed);
    }
}
