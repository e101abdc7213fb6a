//! How a loop without step ranges repeats on a device: the period of its kernel sequence.
//!
//! The kernel-pattern detection looks for one kernel that runs once per iteration. Many loops have
//! none: an eager model whose final norm runs the same kernels as every layer's norm, or a stack of
//! identical blocks with no distinct head. Every kernel of such a loop repeats several times per
//! iteration, yet the sequence of kernel names still repeats with the iteration's length. This module
//! finds that length and where each repetition begins, without assuming which kernel opens it.
//!
//! - **Candidate lengths** come from the rarest kernels that span the loop: if a kernel runs `k`
//!   times per iteration, the distance between an occurrence and the `k`-th next one is the
//!   iteration's length in kernels, for most occurrences.
//! - **The length** is the candidate at which the sequence matches itself best, shifted by that many
//!   kernels; a sub-period (one of `n` identical layers) matches slightly worse, because the kernels
//!   between the last layer and the next iteration's first do not repeat at it. Among lengths that
//!   match equally well (multiples of the period), the shortest wins.
//! - **The starts**: the loop begins where a whole period first matches the next one (start-up work
//!   before it is not an iteration); each later start is one period on, where the kernels after it open
//!   an iteration or those before it close one, re-aligned by a small search where an extra or missing
//!   kernel shifted the sequence, until the loop ends.

use std::collections::HashMap;

/// Fewest repetitions that make a loop.
const MIN_ITERATIONS: usize = 3;
/// Shortest iteration, in kernels (a loop of one or two kernels is a kernel, not an iteration).
const MIN_LENGTH: usize = 4;
/// Rarest kernels tried as sources of candidate lengths.
const SOURCES: usize = 8;
/// Most occurrences of one kernel per iteration that a candidate is looked for at.
const MAX_PER_ITERATION: usize = 512;
/// Positions compared when scoring one candidate length.
const SCORE_SAMPLES: usize = 100_000;
/// A period must match itself at least this well (share of kernels with the same name one period on).
const MIN_MATCH: f64 = 0.8;
/// Lengths that match within this of the best one are equally good; the shortest of them wins.
const TIE: f64 = 0.001;
/// One period matches the reference period when this share of its kernels agree.
const PERIOD_MATCH: f64 = 0.9;
/// Kernels on each side of an iteration boundary compared with the reference period.
const BOUNDARY_KERNELS: usize = 16;
/// Comparisons the re-alignment search may spend over the whole sequence.
const SEARCH_BUDGET: usize = 50_000_000;

/// A loop's iterations in a device's kernel sequence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Repetition {
    /// Iteration length, in kernels.
    pub length: usize,
    /// Where each iteration begins (positions in the sequence); the last one closes the one before.
    pub starts: Vec<usize>,
}

/// The iterations of the loop in `names` (one kernel name id per launch, in time order), if the
/// sequence repeats over at least half its length.
pub(crate) fn repetition(names: &[i64]) -> Option<Repetition> {
    let n = names.len();
    if n < MIN_LENGTH * MIN_ITERATIONS {
        return None;
    }
    let length = period(names)?;
    let starts = starts(names, length)?;
    let covered = starts.last()? - starts.first()?;
    (starts.len() > MIN_ITERATIONS && covered * 2 >= n).then_some(Repetition { length, starts })
}

/// The iteration length: the best-matching candidate, the shortest among ties.
fn period(names: &[i64]) -> Option<usize> {
    let scored: Vec<(usize, f64)> = candidates(names)
        .into_iter()
        .map(|l| (l, self_match(names, l)))
        .collect();
    let best = scored.iter().map(|s| s.1).fold(f64::NAN, f64::max);
    if best.is_nan() || best < MIN_MATCH {
        return None;
    }
    let length = scored
        .iter()
        .filter(|s| s.1 >= best - TIE)
        .map(|s| s.0)
        .min()?;
    // A sequence that repeats at fewer kernels than an iteration may have (one kernel over and over, two
    // alternating) has no iteration to find: every multiple of that repeat would fit as well.
    let too_short = (1..MIN_LENGTH).any(|d| length % d == 0 && self_match(names, d) >= best - TIE);
    (!too_short).then_some(length)
}

/// Candidate lengths from the rarest kernels that span at least half the sequence: for each number `k`
/// of occurrences per iteration, the most common distance to the `k`-th next occurrence, where it is the
/// distance of at least half of them.
fn candidates(names: &[i64]) -> Vec<usize> {
    let n = names.len();
    let mut positions: HashMap<i64, Vec<usize>> = HashMap::new();
    for (i, &name) in names.iter().enumerate() {
        positions.entry(name).or_default().push(i);
    }
    let mut sources: Vec<Vec<usize>> = positions
        .into_values()
        .filter(|p| p.len() >= MIN_ITERATIONS && (p[p.len() - 1] - p[0]) * 2 >= n)
        .collect();
    sources.sort_by_key(|p| (p.len(), p[0]));
    sources.truncate(SOURCES);
    let mut out = Vec::new();
    for p in &sources {
        for k in 1..=(p.len() / MIN_ITERATIONS).min(MAX_PER_ITERATION) {
            if let Some(l) = common_distance(p, k)
                && l >= MIN_LENGTH
                && l * MIN_ITERATIONS <= n
            {
                out.push(l);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The distance from each occurrence to the `k`-th next, if one value holds for at least half of them.
fn common_distance(p: &[usize], k: usize) -> Option<usize> {
    let mut counts: HashMap<usize, usize> = HashMap::new();
    for w in p.windows(k + 1) {
        *counts.entry(w[k] - w[0]).or_default() += 1;
    }
    let total = p.len() - k;
    counts
        .into_iter()
        .max_by_key(|&(d, c)| (c, std::cmp::Reverse(d)))
        .filter(|&(_, c)| c * 2 >= total)
        .map(|(d, _)| d)
}

/// The share of kernels in the middle half of the sequence whose name recurs `l` kernels later.
fn self_match(names: &[i64], l: usize) -> f64 {
    let n = names.len();
    let (from, to) = (n / 4, (3 * n / 4).min(n - l));
    if to <= from {
        return 0.0;
    }
    let stride = ((to - from) / SCORE_SAMPLES).max(1);
    let (mut same, mut seen) = (0usize, 0usize);
    for i in (from..to).step_by(stride) {
        seen += 1;
        same += usize::from(names[i] == names[i + l]);
    }
    same as f64 / seen as f64
}

/// Where the iterations begin: from the first position at which a whole period matches the next,
/// one period at a time, re-aligned where the sequence shifted, until no period matches.
fn starts(names: &[i64], l: usize) -> Option<Vec<usize>> {
    let first = first_periodic(names, l)?;
    let reference = &names[first..first + l];
    let mut out = vec![first];
    let mut budget = SEARCH_BUDGET;
    let mut last_opens = true;
    while let Some((next, opens)) =
        next_start(names, reference, out[out.len() - 1] + l, &mut budget)
    {
        out.push(next);
        last_opens = opens;
    }
    // A last boundary found only because an iteration ends before it closes that iteration at the next
    // kernel after the loop: the period would take in whatever the program did after its loop.
    if !last_opens {
        out.pop();
    }
    Some(out)
}

/// Where the loop begins: the first position whose period matches the next period in at least
/// `PERIOD_MATCH` of its kernels, moved on to the best-matching position within the period after it (a
/// tolerant match would otherwise open the loop a few start-up kernels early).
fn first_periodic(names: &[i64], l: usize) -> Option<usize> {
    let n = names.len();
    if n < 2 * l {
        return None;
    }
    let need = (PERIOD_MATCH * l as f64).ceil() as usize;
    let same = |i: usize| usize::from(names[i] == names[i + l]);
    let mut window: usize = (0..l).map(same).sum();
    let mut found: Option<(usize, usize)> = None;
    for i in 0..=n - 2 * l {
        match found {
            Some((at, _)) if i >= at + l => break,
            Some((_, best)) if window > best => found = Some((i, window)),
            None if window >= need => found = Some((i, window)),
            _ => {}
        }
        if i + l < n - l {
            window = window + same(i + l) - same(i);
        }
    }
    found.map(|(at, _)| at)
}

/// The start of the iteration expected at `at`: there, or the nearest position within half a period
/// that looks like an iteration boundary; and whether an iteration opens there (or one only ends there).
fn next_start(
    names: &[i64],
    reference: &[i64],
    at: usize,
    budget: &mut usize,
) -> Option<(usize, bool)> {
    let l = reference.len();
    if at >= names.len() {
        return None;
    }
    if let Some(opens) = boundary(names, reference, at, budget) {
        return Some((at, opens));
    }
    for shift in 1..=l / 2 {
        for c in [at.checked_sub(shift), Some(at + shift)]
            .into_iter()
            .flatten()
        {
            if *budget == 0 {
                return None;
            }
            if c < names.len()
                && let Some(opens) = boundary(names, reference, c, budget)
            {
                return Some((c, opens));
            }
        }
    }
    None
}

/// Whether an iteration boundary lies at `at`: `Some(true)` when the kernels after it open an iteration as
/// the reference period does, `Some(false)` when only the kernels before it close one. Either side
/// suffices, so that an extra or missing kernel just after a boundary (or just before it) does not hide it.
fn boundary(names: &[i64], reference: &[i64], at: usize, budget: &mut usize) -> Option<bool> {
    let h = reference.len().min(BOUNDARY_KERNELS);
    if at + h <= names.len() && agree(&names[at..at + h], &reference[..h], budget) {
        return Some(true);
    }
    (at >= h
        && agree(
            &names[at - h..at],
            &reference[reference.len() - h..],
            budget,
        ))
    .then_some(false)
}

/// Whether two runs of kernels agree in at least `PERIOD_MATCH` of their positions.
fn agree(a: &[i64], b: &[i64], budget: &mut usize) -> bool {
    *budget = budget.saturating_sub(a.len());
    let allowed = a.len() - (PERIOD_MATCH * a.len() as f64).ceil() as usize;
    a.iter().zip(b).filter(|(x, y)| x != y).count() <= allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An eager inference loop: `layers` identical blocks (a norm of 3 kernels, two GEMMs, an add),
    /// then a final norm of the same kernels: no kernel runs once per iteration.
    fn layered_loop(startup: usize, layers: usize, iterations: usize) -> Vec<i64> {
        let mut out: Vec<i64> = (100..100 + startup as i64).collect();
        for _ in 0..iterations {
            for _ in 0..layers {
                out.extend([1, 2, 3, 10, 11, 20]);
            }
            out.extend([1, 2, 3]);
        }
        out
    }

    #[test]
    fn a_loop_without_a_once_per_iteration_kernel_repeats_at_its_iteration() {
        let names = layered_loop(7, 6, 30);
        let r = repetition(&names).expect("a loop");
        assert_eq!(r.length, 6 * 6 + 3);
        // Start-up is not an iteration: the first starts at the first layer's norm.
        assert_eq!(r.starts[0], 7);
        assert_eq!(r.starts.len(), 30);
        assert!(r.starts.windows(2).all(|w| w[1] - w[0] == 39));
    }

    #[test]
    fn many_identical_layers_are_not_the_iteration() {
        let names = layered_loop(5, 40, 6);
        assert_eq!(repetition(&names).map(|r| r.length), Some(40 * 6 + 3));
    }

    #[test]
    fn an_extra_kernel_shifts_the_following_iterations() {
        let mut names = layered_loop(4, 3, 20);
        // A stray memset inside iteration 10.
        names.insert(4 + 10 * 21 + 5, 99);
        let r = repetition(&names).expect("a loop");
        assert_eq!(r.length, 21);
        assert_eq!(r.starts.len(), 20);
        assert_eq!(r.starts[11] - r.starts[10], 22);
    }

    #[test]
    fn the_last_iteration_is_not_closed_by_work_after_the_loop() {
        let mut names = layered_loop(3, 2, 10);
        names.extend([50, 51, 52, 53, 54]);
        let r = repetition(&names).expect("a loop");
        // Iteration 9 opens the last period; no next iteration closes it, and the kernels after the loop
        // do not either (its period would take in what the program did after the loop).
        assert_eq!(r.starts.len(), 10);
        assert_eq!(*r.starts.last().unwrap(), 3 + 9 * 15);
    }

    #[test]
    fn no_loop_no_repetition() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let names: Vec<i64> = (0..2000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 40) as i64
            })
            .collect();
        assert_eq!(repetition(&names), None);
        assert_eq!(repetition(&[1, 2, 3]), None);
        // One repeated kernel is not an iteration.
        assert_eq!(repetition(&[5; 100]), None);
        assert_eq!(repetition(&[5, 6].repeat(50)), None);
    }
}
