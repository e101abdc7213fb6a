//! The per-rank **digest**: everything the cross-rank answers need from one
//! rank's events, a few hundred rows instead of millions. A rank is one
//! (process, CUDA device) that ran kernels; one export may hold several (a
//! per-node capture, or the two-GPU DDP fixture), a per-rank capture holds one.
//!
//! Timestamps stay in the export's own clock (ns since its session start);
//! [`super::align`] maps them onto one clock. Every figure is computed by the
//! same code as the single-export operations (unions over the device's span,
//! steps and steady windows; kernels attributed to steps by launch call and
//! process), so a rank digested from a per-rank file equals the same rank
//! digested from the combined export.

use aisp_base::Cancel;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::classify::{self, KernelClass};
use crate::intervals::{self, Interval};
use crate::ledger::{self, CommPiece, DeviceLedger};
use crate::model::{self, NvtxRange};
use crate::nccl::{Collective, is_nccl};
use crate::rules::{self, Finding};
use crate::windows::{self, Window};
use crate::{Profile, ProfileError, Result, Scope, attribution, iterations};

/// Who a rank is and where its clock comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankIdentity {
    /// Global rank (resolved over the set; see `rank_source`).
    pub rank: u32,
    /// `env RANK` (the capture's recorded environment), `file name`, or `order`
    /// (files by name, then devices ascending).
    pub rank_source: String,
    /// RANK recorded in the capture's environment, when there is one.
    pub env_rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    /// The export the rank was read from.
    pub file: String,
    pub pid: i64,
    /// CUDA device id (`deviceId`).
    pub device: i64,
    pub hostname: Option<String>,
    pub gpu: Option<String>,
    /// Session start (`TARGET_INFO_SESSION_START_TIME.utcEpochNs`): the first
    /// clock estimate, which can be wrong by milliseconds.
    pub utc_epoch_ns: Option<i64>,
}

/// Totals over one window of the rank's device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowFigures {
    pub window: Window,
    /// Union of all kernels.
    pub busy_ns: i64,
    /// Union of non-communication kernels.
    pub compute_ns: i64,
    /// Union of NCCL kernels.
    pub communication_ns: i64,
    /// Communication hidden behind compute (|C ∩ N|).
    pub overlap_ns: i64,
    /// Communication not hidden (|N| − |C ∩ N|).
    pub exposed_communication_ns: i64,
}

/// One step (NVTX step range) of the rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepRow {
    pub index: u32,
    pub name: String,
    pub cpu_start_ns: i64,
    pub cpu_end_ns: i64,
    /// Union of the kernels launched inside the step (any thread of the process).
    pub gpu_union_ns: i64,
    pub compute_ns: i64,
    pub communication_ns: i64,
    pub exposed_communication_ns: i64,
    pub kernels: u32,
}

/// One collective kernel of the rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectiveRow {
    pub kind: Collective,
    /// Occurrence of this kind on this rank, from 0: instance `seq` of every rank is the same collective.
    pub seq: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub stream: i64,
    /// Compute kernels of the rank overlapping this kernel (ns).
    pub compute_overlap_ns: i64,
    /// Message size `S` in bytes (nccl-tests' definition: the whole gathered/reduced buffer) when the export
    /// records it: Kineto `record_param_comms` args, or NCCL's NVTX payloads in an Nsight Systems export.
    pub bytes: Option<i64>,
    /// The other rank of a point-to-point transfer (send/recv), when recorded.
    #[serde(default)]
    pub peer: Option<u32>,
    /// Index of the kernel in its export (`Profile::kernels`), for splitting its time into wait and transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<u32>,
}

/// Kernel time of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClassRow {
    pub class: String,
    pub kernels: u64,
    pub total_ns: i64,
}

/// One rank, reduced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankDigest {
    pub identity: RankIdentity,
    pub kernels: u64,
    pub kernel_sum_ns: i64,
    /// span, steps and steady windows that exist.
    pub windows: Vec<WindowFigures>,
    pub steps: Vec<StepRow>,
    pub collectives: Vec<CollectiveRow>,
    pub classes: Vec<ClassRow>,
    /// The rank's step ledger and the findings of its own export (Nsight Systems exports; not Kineto traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<RankLedger>,
}

/// A rank's step ledger, with what the set needs to split its collective time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankLedger {
    pub ledger: DeviceLedger,
    /// Exposed collective time by kernel (kept apart from `ledger`, whose answers leave it out).
    #[serde(default)]
    #[schemars(skip)]
    pub comm: Vec<CommPiece>,
    /// The rules' findings on the rank's own export (the ledger-only ones are made again once the set is split).
    pub findings: Vec<Finding>,
    /// The kernels with the most time per steady step (the rules' step summary of the rank).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_kernels: Vec<rules::StepKernel>,
    /// The NVTX ranges with the most time per steady step (the rules' step summary of the rank).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_regions: Vec<rules::StepRegion>,
    /// The launching thread's host calls with the most time per steady step (the rules' step summary of the rank).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_calls: Vec<rules::StepCall>,
}

impl RankDigest {
    /// The figures of one window kind (`span`, `steps`, `steady`).
    pub fn window(&self, kind: &str) -> Option<&WindowFigures> {
        self.windows.iter().find(|w| w.window.kind.as_str() == kind)
    }
}

/// What an export says about the job it belongs to.
#[derive(Debug, Clone, Default)]
struct CaptureFacts {
    env_rank: Option<u32>,
    local_rank: Option<u32>,
    world_size: Option<u32>,
    utc_epoch_ns: Option<i64>,
}

fn capture_facts(p: &Profile) -> CaptureFacts {
    let mut f = CaptureFacts::default();
    let conn = p.conn();
    if p.schema().exact("META_DATA_CAPTURE").is_some()
        && let Ok(mut stmt) = conn.prepare(
            "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE' \
             AND (value LIKE 'RANK=%' OR value LIKE 'LOCAL_RANK=%' OR value LIKE 'WORLD_SIZE=%' \
             OR value LIKE 'SLURM_PROCID=%' OR value LIKE 'SLURM_LOCALID=%' OR value LIKE 'SLURM_NTASKS=%')",
        )
        && let Ok(rows) = stmt.query_map([], |r| r.get::<_, String>(0))
    {
        let mut slurm = CaptureFacts::default();
        for v in rows.flatten() {
            let Some((k, val)) = v.split_once('=') else {
                continue;
            };
            let n = val.trim_matches('"').trim().parse::<u32>().ok();
            match k {
                "RANK" => f.env_rank = n,
                "LOCAL_RANK" => f.local_rank = n,
                "WORLD_SIZE" => f.world_size = n,
                "SLURM_PROCID" => slurm.env_rank = n,
                "SLURM_LOCALID" => slurm.local_rank = n,
                "SLURM_NTASKS" => slurm.world_size = n,
                _ => {}
            }
        }
        f.env_rank = f.env_rank.or(slurm.env_rank);
        f.local_rank = f.local_rank.or(slurm.local_rank);
        f.world_size = f.world_size.or(slurm.world_size);
    }
    if p.schema().exact("TARGET_INFO_SESSION_START_TIME").is_some() {
        f.utc_epoch_ns = conn
            .query_row(
                "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .ok()
            .flatten();
    }
    f
}

/// The rank number in a file name: `rank_12`, `rank12`, `rank-12`, `r12`, or a trailing `_12`.
pub fn rank_from_file_name(path: &Path) -> Option<u32> {
    let stem = path.file_name()?.to_str()?;
    let stem = stem.split('.').next().unwrap_or(stem).to_ascii_lowercase();
    let re = regex::Regex::new(r"(?:rank|^r)[_\-.]?(\d{1,7})|[_\-.](\d{1,7})$").ok()?;
    let caps = re.captures_iter(&stem).last()?;
    caps.get(1)
        .or_else(|| caps.get(2))
        .and_then(|m| m.as_str().parse().ok())
}

/// Digest every rank (process × device that ran kernels) of one export.
/// Ranks get provisional numbers; [`resolve_ranks`] settles them over the set.
pub fn digest_profile(p: &Profile, file: &Path) -> Result<Vec<RankDigest>> {
    let facts = capture_facts(p);
    let env = crate::info::environment(p)?;
    let gpus = crate::info::gpus(p)?;
    let kernels = p.kernels()?;
    // NCCL's own record of each call's size and peer (NVTX payloads), by kernel.
    let messages = crate::nccl_payloads::kernel_messages(p)?;
    // Rank units: (device, globalPid) with kernels, in device order.
    let mut units: BTreeMap<(i64, i64), ()> = BTreeMap::new();
    for k in kernels {
        units.insert((k.device, k.global_pid & model::PID_MASK), ());
    }
    let single = units.len() == 1;
    let mut out = Vec::new();
    for (i, &(device, gpid)) in units.keys().enumerate() {
        let pid = model::pid_of(gpid);
        let scope = p.resolve(&Scope {
            device: Some(device),
            process: Some(pid),
            ..Scope::default()
        })?;
        let mine: Vec<u32> = kernels
            .iter()
            .enumerate()
            .filter(|(_, k)| k.device == device && k.global_pid & model::PID_MASK == gpid)
            .map(|(i, _)| i as u32)
            .collect();
        let mut compute: Vec<Interval> = Vec::new();
        let mut comm: Vec<Interval> = Vec::new();
        let mut classes: BTreeMap<KernelClass, (u64, i64)> = BTreeMap::new();
        let mut coll: Vec<CollSpan> = Vec::new();
        let mut sum = 0i64;
        for &ki in &mine {
            let k = &kernels[ki as usize];
            sum += k.dur();
            let short = p.string(k.short_name);
            if is_nccl(short) {
                comm.push((k.start, k.end));
                let m = messages.get(&ki);
                coll.push(CollSpan {
                    kernel: Some(ki),
                    start: k.start,
                    end: k.end,
                    stream: k.stream,
                    kind: p2p_direction(Collective::of(short), m.and_then(|m| m.collective)),
                    bytes: m.and_then(|m| m.bytes),
                    peer: m.and_then(|m| m.peer),
                });
            } else {
                compute.push((k.start, k.end));
            }
            let class =
                classify::classify(p.string(k.demangled_name), short, k.grid, k.block).class;
            let e = classes.entry(class).or_default();
            e.0 += 1;
            e.1 += k.dur();
        }
        let compute_u = intervals::union(compute);
        let comm_u = intervals::union(comm);
        let all_u = intervals::union(compute_u.iter().chain(&comm_u).copied().collect());
        let dw = windows::device_windows(p, &scope)?
            .into_iter()
            .find(|w| w.device == device);
        let mut figures = Vec::new();
        if let Some(dw) = &dw {
            for w in [dw.span, dw.steps, dw.steady].into_iter().flatten() {
                let b = w.bounds();
                let c = intervals::clip(&compute_u, b);
                let n = intervals::clip(&comm_u, b);
                let both = intervals::length(&intervals::intersect(&c, &n));
                let nl = intervals::length(&n);
                figures.push(WindowFigures {
                    window: w,
                    busy_ns: intervals::clipped_length(&all_u, b),
                    compute_ns: intervals::length(&c),
                    communication_ns: nl,
                    overlap_ns: both,
                    exposed_communication_ns: nl - both,
                });
            }
        }
        // Steps of this process, kernels attributed by launch call (any thread), restricted to this device.
        let mut steps = Vec::new();
        if let Some(sr) = iterations::detect_steps(p, Some(&[gpid]), None)? {
            let mut ranges: Vec<&NvtxRange> = sr.ranges.iter().collect();
            ranges.sort_by_key(|r| (r.start, r.end));
            let attributed = attribution::attribute(p, &ranges)?;
            for (idx, (r, a)) in ranges.iter().zip(&attributed).enumerate() {
                let (mut c, mut n) = (Vec::new(), Vec::new());
                let mut count = 0u32;
                for &ki in &a.any_thread {
                    let k = &kernels[ki as usize];
                    if k.device != device {
                        continue;
                    }
                    count += 1;
                    if is_nccl(p.string(k.short_name)) {
                        n.push((k.start, k.end));
                    } else {
                        c.push((k.start, k.end));
                    }
                }
                let c = intervals::union(c);
                let n = intervals::union(n);
                let both = intervals::length(&intervals::intersect(&c, &n));
                let (cl, nl) = (intervals::length(&c), intervals::length(&n));
                steps.push(StepRow {
                    index: idx as u32,
                    name: r.name.clone(),
                    cpu_start_ns: r.start,
                    cpu_end_ns: r.end,
                    gpu_union_ns: cl + nl - both,
                    compute_ns: cl,
                    communication_ns: nl,
                    exposed_communication_ns: nl - both,
                    kernels: count,
                });
            }
        }
        let collectives = collective_rows(coll, &compute_u);
        let mut classes: Vec<ClassRow> = classes
            .into_iter()
            .map(|(c, (n, t))| ClassRow {
                class: c.as_str().to_string(),
                kernels: n,
                total_ns: t,
            })
            .collect();
        classes.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.class.cmp(&b.class)));
        let rank_ledger = rank_ledger(p, &scope, device)?;
        out.push(RankDigest {
            identity: RankIdentity {
                rank: i as u32,
                rank_source: "order".into(),
                env_rank: if single { facts.env_rank } else { None },
                local_rank: if single {
                    facts.local_rank
                } else {
                    Some(i as u32)
                },
                world_size: facts.world_size,
                file: file.display().to_string(),
                pid,
                device,
                hostname: env.hostname.clone(),
                gpu: crate::info::gpu_name(&gpus, device),
                utc_epoch_ns: facts.utc_epoch_ns,
            },
            kernels: mine.len() as u64,
            kernel_sum_ns: sum,
            windows: figures,
            steps,
            collectives,
            classes,
            ledger: rank_ledger,
        });
    }
    Ok(out)
}

/// The ledger of one rank (device × process) of an export, and the rules' findings on it.
fn rank_ledger(
    p: &Profile,
    scope: &crate::ResolvedScope,
    device: i64,
) -> Result<Option<RankLedger>> {
    let mut l = ledger::build(p, scope, None)?;
    let Some(i) = l.devices.iter().position(|d| d.device == device) else {
        return Ok(None);
    };
    let rules = rules::run_on(p, &l)?;
    let (step_kernels, step_regions, step_calls) = rules
        .ledger
        .into_iter()
        .find(|s| s.device == device)
        .map(|s| (s.top_kernels, s.top_regions, s.top_calls))
        .unwrap_or_default();
    let mut dl = l.devices.swap_remove(i);
    let comm = std::mem::take(&mut dl.comm);
    Ok(Some(RankLedger {
        ledger: dl,
        comm,
        findings: rules.findings,
        step_kernels,
        step_regions,
        step_calls,
    }))
}

/// Settle rank numbers over the whole set: the recorded `RANK` when every
/// rank has a distinct one, else numbers in file names when they are distinct
/// and each file holds one rank, else order (files by name, devices ascending).
/// Returns a note when a source was rejected.
pub fn resolve_ranks(digests: &mut [RankDigest]) -> Option<String> {
    digests.sort_by(|a, b| {
        (a.identity.file.as_str(), a.identity.device, a.identity.pid).cmp(&(
            b.identity.file.as_str(),
            b.identity.device,
            b.identity.pid,
        ))
    });
    let distinct = |v: &[Option<u32>]| {
        let mut s: Vec<u32> = v.iter().flatten().copied().collect();
        let n = s.len();
        s.sort_unstable();
        s.dedup();
        n == v.len() && s.len() == n
    };
    let env: Vec<Option<u32>> = digests.iter().map(|d| d.identity.env_rank).collect();
    if distinct(&env) {
        for d in digests.iter_mut() {
            d.identity.rank = d.identity.env_rank.unwrap_or(0);
            d.identity.rank_source = "env RANK".into();
        }
        digests.sort_by_key(|d| d.identity.rank);
        return None;
    }
    let mut per_file: BTreeMap<&str, usize> = BTreeMap::new();
    for d in digests.iter() {
        *per_file.entry(d.identity.file.as_str()).or_default() += 1;
    }
    let one_per_file = per_file.values().all(|&n| n == 1);
    let names: Vec<Option<u32>> = digests
        .iter()
        .map(|d| rank_from_file_name(Path::new(&d.identity.file)))
        .collect();
    let note = if env.iter().any(Option::is_some) {
        Some("RANK in the recorded environments is missing or repeated: not used".to_string())
    } else {
        None
    };
    if one_per_file && distinct(&names) {
        for (d, n) in digests.iter_mut().zip(names) {
            d.identity.rank = n.unwrap_or(0);
            d.identity.rank_source = "file name".into();
        }
        digests.sort_by_key(|d| d.identity.rank);
        return note;
    }
    for (i, d) in digests.iter_mut().enumerate() {
        d.identity.rank = i as u32;
        d.identity.rank_source = "order".into();
    }
    note
}

/// A file of the set that could not be digested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkippedFile {
    pub file: String,
    pub error: String,
}

/// One file's digests, or why it could not be read.
type FileResult = std::result::Result<Vec<RankDigest>, ProfileError>;

/// Digest files in parallel on `threads` workers. Each worker holds one export
/// at a time, so memory is bounded by `threads` × the largest export's events;
/// results come back in input order.
pub fn digest_files(
    files: &[PathBuf],
    threads: usize,
    cancelled: Cancel<'_>,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<(Vec<RankDigest>, Vec<SkippedFile>)> {
    digest_files_with(
        files,
        threads,
        &crate::OpenOptions::default(),
        cancelled,
        progress,
    )
}

/// [`digest_files`], opening each export with `options` (cache folder,
/// `nsys` and how it runs for `.nsys-rep` files).
pub fn digest_files_with(
    files: &[PathBuf],
    threads: usize,
    options: &crate::OpenOptions,
    cancelled: Cancel<'_>,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<(Vec<RankDigest>, Vec<SkippedFile>)> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<FileResult>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    let threads = threads.clamp(1, files.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= files.len() {
                        break;
                    }
                    let r = if cancelled() {
                        Err(ProfileError::Cancelled)
                    } else {
                        crate::open_with(&files[i], options)
                            .and_then(|p| digest_profile(&p, &files[i]))
                    };
                    if let Ok(mut g) = results.lock() {
                        g[i] = Some(r);
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                }
            });
        }
    });
    if cancelled() {
        return Err(ProfileError::Cancelled);
    }
    let mut digests = Vec::new();
    let mut skipped = Vec::new();
    let results = results.into_inner().unwrap_or_default();
    for (f, r) in files.iter().zip(results) {
        match r {
            Some(Ok(d)) if d.is_empty() => skipped.push(SkippedFile {
                file: f.display().to_string(),
                error: "no kernels: not a GPU rank".into(),
            }),
            Some(Ok(d)) => digests.extend(d),
            Some(Err(e)) => skipped.push(SkippedFile {
                file: f.display().to_string(),
                error: e.to_string(),
            }),
            None => skipped.push(SkippedFile {
                file: f.display().to_string(),
                error: "not digested".into(),
            }),
        }
    }
    Ok((digests, skipped))
}

/// A `SendRecv` kernel is a send or a receive: the recorded call says which (NCCL runs both as one kernel).
pub(crate) fn p2p_direction(kernel: Collective, call: Option<Collective>) -> Collective {
    match (kernel, call) {
        (Collective::SendRecv, Some(c @ (Collective::Send | Collective::Recv))) => c,
        _ => kernel,
    }
}

/// One communication kernel before numbering.
pub(crate) struct CollSpan {
    pub kernel: Option<u32>,
    pub start: i64,
    pub end: i64,
    pub stream: i64,
    pub kind: Collective,
    pub bytes: Option<i64>,
    pub peer: Option<u32>,
}

/// Collective rows from spans: numbered per kind in start order (the instance
/// index the cross-rank alignment matches on), each with its overlap with the compute union.
pub(crate) fn collective_rows(
    mut coll: Vec<CollSpan>,
    compute_u: &[(i64, i64)],
) -> Vec<CollectiveRow> {
    coll.sort_by_key(|c| (c.start, c.end));
    let mut seqs: BTreeMap<Collective, u32> = BTreeMap::new();
    coll.into_iter()
        .map(|c| {
            let seq = seqs.entry(c.kind).or_default();
            let row = CollectiveRow {
                kind: c.kind,
                seq: *seq,
                start_ns: c.start,
                end_ns: c.end,
                stream: c.stream,
                compute_overlap_ns: intervals::clipped_length(compute_u, (c.start, c.end)),
                bytes: c.bytes,
                peer: c.peer,
                kernel: c.kernel,
            };
            *seq += 1;
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sendrecv_kernel_takes_its_direction_from_the_call() {
        use Collective::*;
        assert_eq!(p2p_direction(SendRecv, Some(Recv)), Recv);
        assert_eq!(p2p_direction(SendRecv, Some(Send)), Send);
        assert_eq!(p2p_direction(SendRecv, None), SendRecv);
        assert_eq!(p2p_direction(AllReduce, Some(Send)), AllReduce);
    }

    #[test]
    fn rank_numbers_in_file_names() {
        let r = |s: &str| rank_from_file_name(Path::new(s));
        assert_eq!(r("/runs/x/rank_12.sqlite"), Some(12));
        assert_eq!(r("rank3.nsys-rep"), Some(3));
        assert_eq!(r("job_node7_rank-5.sqlite"), Some(5));
        assert_eq!(r("profile_9.sqlite"), Some(9));
        assert_eq!(r("profile.sqlite"), None);
    }
}
