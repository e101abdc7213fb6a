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
}
