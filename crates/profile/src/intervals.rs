//! Interval arithmetic on `[start, end)` nanosecond intervals: unions (touching
//! intervals merge), clipping, intersections and gaps. Utilization is always a
//! union length, never a sum of durations (concurrent streams would exceed 100 %).

/// A half-open interval `[start, end)` in ns.
pub type Interval = (i64, i64);

/// Merge intervals into a sorted, disjoint union. Touching intervals merge.
pub fn union(mut v: Vec<Interval>) -> Vec<Interval> {
    v.sort_unstable();
    union_sorted(v)
}

/// Merge intervals already sorted by start.
pub fn union_sorted(v: Vec<Interval>) -> Vec<Interval> {
    let mut out: Vec<Interval> = Vec::with_capacity(v.len().min(1 << 16));
    for (s, e) in v {
        let e = e.max(s);
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Total length of a union.
pub fn length(u: &[Interval]) -> i64 {
    u.iter().map(|(s, e)| e - s).sum()
}

/// The part of a union inside `w`.
pub fn clip(u: &[Interval], w: Interval) -> Vec<Interval> {
    let first = u.partition_point(|&(_, e)| e <= w.0);
    u[first..]
        .iter()
        .take_while(|&&(s, _)| s < w.1)
        .map(|&(s, e)| (s.max(w.0), e.min(w.1)))
        .filter(|(s, e)| e > s)
        .collect()
}

/// Length of the part of a union inside `w`.
pub fn clipped_length(u: &[Interval], w: Interval) -> i64 {
    let first = u.partition_point(|&(_, e)| e <= w.0);
    u[first..]
        .iter()
        .take_while(|&&(s, _)| s < w.1)
        .map(|&(s, e)| (e.min(w.1) - s.max(w.0)).max(0))
        .sum()
}

/// Intersection of two unions (two-pointer sweep).
pub fn intersect(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let s = a[i].0.max(b[j].0);
        let e = a[i].1.min(b[j].1);
        if e > s {
            out.push((s, e));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Gaps of `w` not covered by the union, longer than `min_len` (strictly),
/// including a leading or trailing stretch inside the window.
pub fn gaps_in_window(u: &[Interval], w: Interval, min_len: i64) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut cursor = w.0;
    for (s, e) in clip(u, w) {
        if s - cursor > min_len {
            out.push((cursor, s));
        }
        cursor = cursor.max(e);
    }
    if w.1 - cursor > min_len {
        out.push((cursor, w.1));
    }
    out
}

/// Gaps between consecutive islands of a union, longer than `min_len`.
pub fn gaps_between(u: &[Interval], min_len: i64) -> Vec<Interval> {
    u.windows(2)
        .filter_map(|p| {
            let g = (p[0].1, p[1].0);
            (g.1 - g.0 > min_len).then_some(g)
        })
        .collect()
}

/// The exact union length of intervals that arrive in start order, in O(1)
/// memory: rows of an export come nearly in time order, so a scan can sum the
/// union as it goes instead of keeping millions of intervals to sort. An
/// interval that starts before the one being merged makes the result unknown
/// ([`StreamingUnion::length`] is `None`); the caller then computes it from the
/// intervals themselves. Never approximate.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamingUnion {
    /// Union length of the merged intervals that end before `open` starts.
    covered: i64,
    /// The interval being merged (everything before it is in `covered`).
    open: Option<Interval>,
    /// Start of the first interval (all later ones start at or after it).
    first: i64,
    out_of_order: bool,
}

impl StreamingUnion {
    pub fn push(&mut self, s: i64, e: i64) {
        let e = e.max(s);
        match &mut self.open {
            None => {
                self.open = Some((s, e));
                self.first = s;
            }
            Some((os, _)) if s < *os => self.out_of_order = true,
            Some((os, oe)) if s >= *oe => {
                self.covered += *oe - *os;
                *os = s;
                *oe = e;
            }
            Some((_, oe)) => *oe = (*oe).max(e),
        }
    }

    /// This stream followed by `later` (e.g. the next scan thread's rows):
    /// exact when `later` starts at or after everything here has ended.
    pub fn then(self, later: StreamingUnion) -> StreamingUnion {
        match (self.open, later.open) {
            (None, _) => later,
            (_, None) => self,
            (Some((os, oe)), Some(_)) => StreamingUnion {
                covered: self.covered + (oe - os) + later.covered,
                open: later.open,
                first: self.first,
                out_of_order: self.out_of_order || later.out_of_order || oe > later.first,
            },
        }
    }

    /// The union length, or `None` when an interval came out of start order.
    pub fn length(&self) -> Option<i64> {
        if self.out_of_order {
            return None;
        }
        Some(self.covered + self.open.map_or(0, |(s, e)| e - s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unions_merge_touching_and_nested_intervals() {
        let u = union(vec![
            (5, 7),
            (0, 2),
            (2, 3),
            (1, 2),
            (6, 6),
            (10, 20),
            (12, 13),
        ]);
        assert_eq!(u, vec![(0, 3), (5, 7), (10, 20)]);
        assert_eq!(length(&u), 15);
    }

    #[test]
    fn clipping_intersection_and_gaps() {
        let u = vec![(0, 3), (5, 7), (10, 20)];
        assert_eq!(clip(&u, (2, 11)), vec![(2, 3), (5, 7), (10, 11)]);
        assert_eq!(clipped_length(&u, (2, 11)), 4);
        assert_eq!(clipped_length(&u, (3, 5)), 0);
        assert_eq!(
            intersect(&u, &[(1, 6), (15, 30)]),
            vec![(1, 3), (5, 6), (15, 20)]
        );
        assert_eq!(
            gaps_in_window(&u, (-5, 25), 1),
            vec![(-5, 0), (3, 5), (7, 10), (20, 25)]
        );
        assert_eq!(
            gaps_in_window(&u, (-5, 25), 2),
            vec![(-5, 0), (7, 10), (20, 25)]
        );
        assert_eq!(gaps_between(&u, 2), vec![(7, 10)]);
        assert_eq!(gaps_in_window(&[], (0, 10), 0), vec![(0, 10)]);
    }

    /// The streaming union equals the sorted union whenever it gives an
    /// answer, and gives one for any input in start order, split anywhere.
    #[test]
    fn streaming_union_is_exact_or_says_it_cannot_be() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m) as i64
        };
        let (mut answered, mut refused) = (0, 0);
        for round in 0..400 {
            let n = 1 + next(60) as usize;
            let mut v: Vec<Interval> = (0..n)
                .map(|_| {
                    let s = next(1000);
                    (s, s + next(80))
                })
                .collect();
            v.sort_unstable();
            // A quarter of the rounds get a few rows out of order.
            if round % 4 == 0 && n > 2 {
                for _ in 0..1 + next(3) {
                    let a = next(n as u64) as usize;
                    let b = next(n as u64) as usize;
                    v.swap(a, b);
                }
            }
            let exact = length(&union(v.clone()));
            let cut = next(n as u64 + 1) as usize;
            let mut a = StreamingUnion::default();
            let mut b = StreamingUnion::default();
            v[..cut].iter().for_each(|&(s, e)| a.push(s, e));
            v[cut..].iter().for_each(|&(s, e)| b.push(s, e));
            let mut whole = StreamingUnion::default();
            v.iter().for_each(|&(s, e)| whole.push(s, e));
            let sorted = v.windows(2).all(|w| w[0].0 <= w[1].0);
            match whole.length() {
                Some(len) => {
                    assert_eq!(len, exact, "{v:?}");
                    answered += 1;
                }
                None => {
                    assert!(!sorted, "sorted input must be answered: {v:?}");
                    refused += 1;
                }
            }
            if let Some(len) = a.then(b).length() {
                assert_eq!(len, exact, "split at {cut}: {v:?}");
            }
        }
        assert!(answered > 250 && refused > 10, "{answered} {refused}");
    }
}
