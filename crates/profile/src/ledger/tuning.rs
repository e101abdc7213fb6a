//! An autotuner benchmarking inside the loop: one kernel launched again and
//! again with one launch configuration, then again and again with another
//! (Triton's `@autotune` on a key that changes every batch, `do_bench` timing
//! each configuration; a tuner of any kind). Between the timed launches the
//! benchmark clears the L2 cache with a fill kernel, so fills are passed over.
//! A model launches a kernel once per use; runs of identical launches in two
//! configurations or more are the tuner's, not the model's work.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::super::Profile;
use super::super::model::Kernel;

/// Identical launches in a row that make a benchmark run.
pub const MIN_RUN: usize = 8;

/// Launch configurations of one kernel, each timed in a run, that make it a tuner's.
pub const MIN_CONFIGS: usize = 2;

/// A launch configuration: grid and block.
pub type Config = ([u32; 3], [u32; 3]);

/// One benchmark run: a kernel launched [`MIN_RUN`] times or more in a row with one configuration.
#[derive(Debug, Clone)]
pub struct TuningRun {
    /// The kernel's demangled name (string id).
    pub name: i64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub start: i64,
    /// Indices into the profile's kernels: the run's launches and the fills between them.
    pub kernels: Vec<usize>,
    pub launches: usize,
    /// Its launches' time and the fills' between them.
    pub time_ns: i64,
    /// The last launch's time: what the chosen configuration costs once.
    pub last_ns: i64,
}

/// The benchmark runs among `kernels` (in start order) of `device` that start in `[lo, hi)`: runs of kernels
/// whose runs come in [`MIN_CONFIGS`] configurations or more.
pub fn tuning_runs(
    p: &Profile,
    kernels: &[Kernel],
    device: i64,
    lo: i64,
    hi: i64,
) -> Vec<TuningRun> {
    // `vectorized_elementwise_kernel<4, FillFunctor<int>, ...>`: the fill is in the demangled name, told once a name.
    let mut fills: HashMap<i64, bool> = HashMap::new();
    let mut is_fill = |k: &Kernel| {
        *fills.entry(k.demangled_name).or_insert_with(|| {
            p.string(k.demangled_name)
                .to_ascii_lowercase()
                .contains("fill")
        })
    };
    runs_of(kernels, device, lo, hi, &mut is_fill)
}

/// [`tuning_runs`] with `is_fill` telling the fills.
fn runs_of(
    kernels: &[Kernel],
    device: i64,
    lo: i64,
    hi: i64,
    is_fill: &mut dyn FnMut(&Kernel) -> bool,
) -> Vec<TuningRun> {
    let first = kernels.partition_point(|k| k.start < lo);
    let mut runs: Vec<TuningRun> = Vec::new();
    let mut current: Option<TuningRun> = None;
    // Fills seen since the current run's last launch: the run's if it goes on.
    let mut pending: Vec<usize> = Vec::new();
    let mut pending_ns = 0i64;
    let close = |run: Option<TuningRun>, runs: &mut Vec<TuningRun>| {
        if let Some(r) = run.filter(|r| r.launches >= MIN_RUN) {
            runs.push(r);
        }
    };
    for (i, k) in kernels[first..]
        .iter()
        .enumerate()
        .take_while(|(_, k)| k.start < hi)
        .filter(|(_, k)| k.device == device)
        .map(|(i, k)| (first + i, k))
    {
        if is_fill(k) {
            pending.push(i);
            pending_ns += k.dur();
            continue;
        }
        let same = current
            .as_ref()
            .is_some_and(|r| r.name == k.demangled_name && r.grid == k.grid && r.block == k.block);
        if same {
            let r = current.as_mut().expect("checked above");
            r.kernels.append(&mut pending);
            r.kernels.push(i);
            r.launches += 1;
            r.time_ns += pending_ns + k.dur();
            r.last_ns = k.dur();
        } else {
            close(current.take(), &mut runs);
            current = Some(TuningRun {
                name: k.demangled_name,
                grid: k.grid,
                block: k.block,
                start: k.start,
                kernels: vec![i],
                launches: 1,
                time_ns: k.dur(),
                last_ns: k.dur(),
            });
        }
        pending.clear();
        pending_ns = 0;
    }
    close(current, &mut runs);
    let mut configs: HashMap<i64, BTreeSet<Config>> = HashMap::new();
    for r in &runs {
        configs.entry(r.name).or_default().insert((r.grid, r.block));
    }
    runs.retain(|r| configs[&r.name].len() >= MIN_CONFIGS);
    runs
}

/// The kernels of `runs`, launches and fills: a chain passes them over.
pub fn tuned_kernels(runs: &[TuningRun]) -> HashSet<usize> {
    runs.iter()
        .flat_map(|r| r.kernels.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(start: i64, name: i64, grid: u32) -> Kernel {
        Kernel {
            start,
            end: start + 100,
            device: 0,
            stream: 7,
            correlation: start,
            global_pid: 0,
            short_name: name,
            demangled_name: name,
            grid: [grid, 1, 1],
            block: [128, 1, 1],
            registers: 32,
            static_smem: 0,
            dynamic_smem: 0,
        }
    }

    /// A tuner: kernel 1 in 8 launches of one grid, then 8 of another, a fill (kernel 9) before each launch; the
    /// model's own kernel 2 runs between. Runs of one configuration only (an optimizer's chunks) are not a tuner's.
    #[test]
    fn runs_in_two_configurations_are_a_tuners_and_one_configuration_is_not() {
        let mut ks = Vec::new();
        let mut t = 0;
        for grid in [64, 128] {
            for _ in 0..MIN_RUN {
                ks.push(launch(t, 9, 65_536));
                ks.push(launch(t + 200, 1, grid));
                t += 1_000;
            }
        }
        ks.push(launch(t, 2, 32));
        let runs = runs_of(&ks, 0, 0, i64::MAX, &mut |k: &Kernel| k.short_name == 9);
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| r.name == 1 && r.launches == MIN_RUN));
        // The fills between a run's launches are its (the first, before its first launch, is not).
        assert_eq!(runs[0].kernels.len(), 2 * MIN_RUN - 1);
        assert_eq!(runs[0].time_ns, (2 * MIN_RUN as i64 - 1) * 100);
        assert_eq!(runs[1].grid, [128, 1, 1]);
        // One configuration, however many launches: no tuner.
        let chunks: Vec<Kernel> = (0..40).map(|i| launch(i * 1_000, 3, 320)).collect();
        assert!(runs_of(&chunks, 0, 0, i64::MAX, &mut |_: &Kernel| false).is_empty());
        // Runs too short in each configuration: no tuner.
        let short: Vec<Kernel> = (0..14)
            .map(|i| launch(i * 1_000, 4, if i < 7 { 64 } else { 128 }))
            .collect();
        assert!(runs_of(&short, 0, 0, i64::MAX, &mut |_: &Kernel| false).is_empty());
    }
}
