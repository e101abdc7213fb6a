//! Kernel → NVTX range attribution by an interval sweep.
//!
//! A kernel belongs to a range when its launching CUDA call (joined by
//! correlationId **and** process) lies inside the range
//! (`range.start <= call.start && call.end <= range.end`) and comes from the
//! same process, **any thread**: PyTorch launches backward kernels from an
//! autograd thread that pushes no ranges. The same-thread figure (the rule of
//! nsys and nsys-ai) is kept beside it.
//!
//! The sweep sorts ranges and launch calls by start per process and keeps the
//! set of open ranges, so it is linear in events times nesting depth, where an
//! SQL range join is quadratic.

use rustc_hash::FxHashMap as HashMap;

use super::model::{self, NvtxRange};
use super::{Profile, Result};

/// The kernels attributed to one range.
#[derive(Debug, Clone, Default)]
pub struct RangeKernels {
    /// Kernel indices (into `Profile::kernels`) launched inside the range by any thread of its process.
    pub any_thread: Vec<u32>,
    /// The subset launched by the range's own thread.
    pub same_thread: Vec<u32>,
}

/// Attribute kernels to each of `ranges` (any order). Returns one entry per range.
pub fn attribute(p: &Profile, ranges: &[&NvtxRange]) -> Result<Vec<RangeKernels>> {
    let kernels = p.kernels()?;
    let api = p.api()?;
    let launches = &p.launch_index()?.kernel_launch;
    // Launch calls per process: (call start, call end, call thread, kernel index).
    let mut by_process: HashMap<i64, Vec<(i64, i64, i64, u32)>> = HashMap::default();
    for (ki, launch) in launches.iter().enumerate() {
        if let Some(ai) = launch {
            let a = &api[*ai as usize];
            by_process
                .entry(model::process_key(a.global_tid))
                .or_default()
                .push((a.start, a.end, a.global_tid, ki as u32));
        }
    }
    let _ = kernels;
    let mut ranges_by_process: HashMap<i64, Vec<usize>> = HashMap::default();
    for (i, r) in ranges.iter().enumerate() {
        ranges_by_process
            .entry(model::process_key(r.global_tid))
            .or_default()
            .push(i);
    }
    let mut out = vec![RangeKernels::default(); ranges.len()];
    for (process, mut idx) in ranges_by_process {
        let Some(calls) = by_process.get_mut(&process) else {
            continue;
        };
        calls.sort_unstable();
        idx.sort_by_key(|&i| (ranges[i].start, std::cmp::Reverse(ranges[i].end)));
        let mut next = 0;
        let mut active: Vec<usize> = Vec::new();
        for &(cs, ce, tid, ki) in calls.iter() {
            while next < idx.len() && ranges[idx[next]].start <= cs {
                active.push(idx[next]);
                next += 1;
            }
            active.retain(|&ri| ranges[ri].end >= cs);
            for &ri in &active {
                let r = ranges[ri];
                if r.end >= ce {
                    out[ri].any_thread.push(ki);
                    if r.global_tid == tid {
                        out[ri].same_thread.push(ki);
                    }
                }
            }
        }
    }
    Ok(out)
}
