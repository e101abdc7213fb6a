//! Code regions: which NVTX range a process is in at a given moment, so a
//! finding can say *where* its time goes (`optimizer`, `token_*`) rather than
//! only what pattern it is.
//!
//! The region of a CPU-side event is the innermost push/pop range open at that
//! moment on any thread of its process. Any thread, because PyTorch launches
//! backward kernels from an autograd thread that pushes no range while the
//! main thread sits inside `backward` (see the attribution module). Numbered
//! ranges fold into one region (`token_17` → `token_*`), so a decode loop's
//! 96 token ranges are one region with 96 occurrences. Nothing here knows
//! what any name means: detection never keys on range names.

use rustc_hash::FxHashMap;

use super::model::{self, NvtxRange};
use super::{Profile, Result};

/// `token_17` → `token_*`, `layer.3` → `layer.*`, `step 2` → `step *`;
/// names without a trailing number stay as they are.
pub fn fold_name(name: &str) -> String {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.len() == name.len() || trimmed.is_empty() {
        return name.to_string();
    }
    match trimmed.chars().last() {
        Some('_' | '.' | ' ' | '-' | '#' | ':') => format!("{trimmed}*"),
        _ => name.to_string(),
    }
}

/// Push/pop ranges per thread with each range's parent, for innermost-range lookups.
pub struct RegionIndex<'a> {
    /// process key → its threads' ranges: (ranges sorted by start, parent index per range).
    by_process: FxHashMap<i64, Vec<ThreadRanges<'a>>>,
}

struct ThreadRanges<'a> {
    ranges: Vec<&'a NvtxRange>,
    parent: Vec<Option<usize>>,
}

impl<'a> ThreadRanges<'a> {
    /// The innermost range of this thread containing `t`.
    fn innermost(&self, t: i64) -> Option<&'a NvtxRange> {
        let i = self.ranges.partition_point(|r| r.start <= t);
        let mut cur = i.checked_sub(1);
        while let Some(c) = cur {
            let r = self.ranges[c];
            if r.end >= t {
                return Some(r);
            }
            cur = self.parent[c];
        }
        None
    }
}

impl<'a> RegionIndex<'a> {
    pub fn new(p: &'a Profile) -> Result<RegionIndex<'a>> {
        let nvtx = p.nvtx()?;
        let mut threads: FxHashMap<i64, Vec<&'a NvtxRange>> = FxHashMap::default();
        for r in nvtx.ranges.iter().filter(|r| r.is_push_pop()) {
            threads.entry(r.global_tid).or_default().push(r);
        }
        let mut by_process: FxHashMap<i64, Vec<ThreadRanges<'a>>> = FxHashMap::default();
        for (tid, mut ranges) in threads {
            ranges.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
            // Push/pop ranges nest per thread: a stack gives each its parent.
            let mut parent = Vec::with_capacity(ranges.len());
            let mut stack: Vec<usize> = Vec::new();
            for (i, r) in ranges.iter().enumerate() {
                while stack.last().is_some_and(|&s| ranges[s].end <= r.start) {
                    stack.pop();
                }
                parent.push(stack.last().copied());
                stack.push(i);
            }
            by_process
                .entry(model::process_key(tid))
                .or_default()
                .push(ThreadRanges { ranges, parent });
        }
        Ok(RegionIndex { by_process })
    }

    /// The innermost range open at `t` on any thread of the process of `global_tid`
    /// (the latest-starting one when threads disagree).
    pub fn innermost(&self, global_tid: i64, t: i64) -> Option<&'a NvtxRange> {
        self.by_process
            .get(&model::process_key(global_tid))?
            .iter()
            .filter_map(|th| th.innermost(t))
            .max_by_key(|r| (r.start, std::cmp::Reverse(r.end)))
    }

    /// The folded name of the innermost range at `t` (`None` outside every range).
    pub fn region(&self, global_tid: i64, t: i64) -> Option<String> {
        self.innermost(global_tid, t).map(|r| fold_name(&r.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names_fold_and_others_stay() {
        assert_eq!(fold_name("token_17"), "token_*");
        assert_eq!(fold_name("step_0"), "step_*");
        assert_eq!(fold_name("layer.3"), "layer.*");
        assert_eq!(fold_name("optimizer"), "optimizer");
        assert_eq!(fold_name("fp16"), "fp16");
        assert_eq!(fold_name("42"), "42");
    }
}
