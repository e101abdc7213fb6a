//! OS runtime calls (`OSRT_API`, eventClass 27) in a compact in-memory form.
//! The table is the largest of an export (23 M rows, about 800 MB of a 966 MB
//! file), so it is decoded once into variable-length bytes of about 6 per
//! row instead of 32, and kept by [`super::loaded`] like the other tables.
//!
//! Rows keep the file's order (the order the reports fold them in, so every
//! answer is the one a scan of the file gives), in chunks of [`CHUNK_ROWS`]
//! rows. Each row is the zigzag varint of its start minus the previous row's
//! start, of its duration, and of the chunk-local index of its thread and of
//! its name id. A chunk records its earliest start and latest end, so a fold
//! over a window skips the chunks outside it.

use rustc_hash::FxHashMap;

/// Rows per chunk: big enough that the per-chunk dictionaries are noise, small
/// enough that folds split evenly over threads and windows skip most chunks.
pub const CHUNK_ROWS: u32 = 16_384;

/// eventClass of an OS runtime call (other classes share the table in some versions).
pub const OSRT_CLASS: i64 = 27;

#[derive(Debug, Default)]
struct Chunk {
    min_start: i64,
    max_end: i64,
    rows: u32,
    threads: Vec<i64>,
    names: Vec<i64>,
    bytes: Vec<u8>,
}

/// The OS runtime calls of an export.
#[derive(Debug, Default)]
pub struct OsrtCalls {
    chunks: Vec<Chunk>,
    /// Every row of the table (any eventClass), as `COUNT(*)` gives.
    pub table_rows: u64,
    /// The OS runtime calls kept (eventClass 27, or every row without that column).
    pub calls: u64,
    /// Per name id: count, sums, extremes and histogram of the durations.
    name_acc: FxHashMap<i64, NameAcc>,
}

impl super::loaded::Footprint for OsrtCalls {
    fn footprint(&self) -> u64 {
        let per_chunk = std::mem::size_of::<Chunk>() as u64;
        self.chunks
            .iter()
            .map(|c| {
                per_chunk
                    + c.bytes.capacity() as u64
                    + 8 * (c.threads.capacity() + c.names.capacity()) as u64
            })
            .sum::<u64>()
            + (self.chunks.capacity() as u64) * per_chunk
            + self
                .name_acc
                .values()
                .map(|a| (std::mem::size_of::<(i64, NameAcc)>() + 8 * a.hist.capacity()) as u64)
                .sum::<u64>()
    }
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zig(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzig(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Read a varint at `*at`; `None` past the end (never happens for bytes this
/// module wrote, but a fold must not panic).
#[inline]
fn get(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Builds [`OsrtCalls`] from rows in file order; one per scan thread, joined in order.
#[derive(Debug, Default)]
pub struct Encoder {
    done: Vec<Chunk>,
    cur: Chunk,
    prev_start: i64,
    thread_ix: FxHashMap<i64, u32>,
    name_ix: FxHashMap<i64, u32>,
    table_rows: u64,
    calls: u64,
    /// Per-name duration aggregates ([`name_stats`]' first half, made while
    /// decoding: the rows pass by anyway), by slot.
    acc: Vec<NameAcc>,
    acc_names: Vec<i64>,
    acc_ix: FxHashMap<i64, u32>,
    /// The slot of each name of the current chunk, by chunk-local index.
    cur_slots: Vec<u32>,
    /// The previous row's thread and name with their chunk-local indices: nsys writes
    /// each thread's calls together, so nearly every row repeats the previous thread
    /// (99.99 % in the DDP fixture) and most repeat its name (97 %), and the hash maps
    /// are then not consulted.
    last_thread: Option<(i64, u32)>,
    last_name: Option<(i64, u32)>,
}

impl Encoder {
    /// One row of the table; `class` is its eventClass (`None` without that column).
    pub fn row(&mut self, start: i64, end: i64, global_tid: i64, name: i64, class: Option<i64>) {
        self.table_rows += 1;
        if class.is_some_and(|c| c != OSRT_CLASS) {
            return;
        }
        self.calls += 1;
        let c = &mut self.cur;
        if c.rows == 0 {
            c.min_start = start;
            c.max_end = end;
            self.prev_start = 0;
        }
        c.min_start = c.min_start.min(start);
        c.max_end = c.max_end.max(end);
        let t = match self.last_thread {
            Some((tid, t)) if tid == global_tid => t,
            _ => {
                let t = *self.thread_ix.entry(global_tid).or_insert_with(|| {
                    c.threads.push(global_tid);
                    (c.threads.len() - 1) as u32
                });
                self.last_thread = Some((global_tid, t));
                t
            }
        };
        let n = match self.last_name {
            Some((id, n)) if id == name => n,
            _ => {
                let n = *self.name_ix.entry(name).or_insert_with(|| {
                    c.names.push(name);
                    let slot = *self.acc_ix.entry(name).or_insert_with(|| {
                        self.acc.push(NameAcc::default());
                        self.acc_names.push(name);
                        (self.acc.len() - 1) as u32
                    });
                    self.cur_slots.push(slot);
                    (c.names.len() - 1) as u32
                });
                self.last_name = Some((name, n));
                n
            }
        };
        if let Some(a) = self
            .cur_slots
            .get(n as usize)
            .and_then(|&slot| self.acc.get_mut(slot as usize))
        {
            a.add(end.wrapping_sub(start));
        }
        put(&mut c.bytes, zig(start.wrapping_sub(self.prev_start)));
        put(&mut c.bytes, zig(end.wrapping_sub(start)));
        put(&mut c.bytes, t as u64);
        put(&mut c.bytes, n as u64);
        self.prev_start = start;
        c.rows += 1;
        if c.rows == CHUNK_ROWS {
            self.seal();
        }
    }

    fn seal(&mut self) {
        if self.cur.rows > 0 {
            let mut c = std::mem::take(&mut self.cur);
            c.bytes.shrink_to_fit();
            c.threads.shrink_to_fit();
            c.names.shrink_to_fit();
            self.done.push(c);
        }
        self.thread_ix.clear();
        self.name_ix.clear();
        self.cur_slots.clear();
        // Chunk-local indices start again in the next chunk.
        self.last_thread = None;
        self.last_name = None;
    }

    /// Join the encoders of consecutive parts of the table, in order.
    pub fn finish(parts: Vec<Encoder>) -> OsrtCalls {
        let mut out = OsrtCalls::default();
        for mut e in parts {
            e.seal();
            out.table_rows += e.table_rows;
            out.calls += e.calls;
            out.chunks.append(&mut e.done);
            for (name, a) in e.acc_names.into_iter().zip(e.acc) {
                out.name_acc.entry(name).or_default().merge(a);
            }
        }
        out.chunks.shrink_to_fit();
        out
    }
}

impl Chunk {
    /// Each row as `(start, end, chunk-local thread, chunk-local name)`.
    #[inline]
    fn each(&self, mut f: impl FnMut(i64, i64, u32, u32)) {
        let b = &self.bytes;
        let mut at = 0;
        let mut start = 0i64;
        for _ in 0..self.rows {
            let (Some(ds), Some(dur), Some(t), Some(n)) = (
                get(b, &mut at),
                get(b, &mut at),
                get(b, &mut at),
                get(b, &mut at),
            ) else {
                break;
            };
            start = start.wrapping_add(unzig(ds));
            f(start, start.wrapping_add(unzig(dur)), t as u32, n as u32);
        }
    }
}

impl OsrtCalls {
    /// Fold whole chunks on up to `threads` threads, one accumulator per
    /// thread in no particular order (for folds whose parts merge in any order).
    fn fold_chunks<A, I, F>(&self, threads: usize, init: I, f: F) -> Vec<A>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, &Chunk) + Sync,
    {
        let all: Vec<&Chunk> = self.chunks.iter().collect();
        fold_runs(&all, threads, Order::Any, init, f)
    }

    /// Fold the calls as `(start, end, globalTid, nameId)`, optionally only
    /// those overlapping `[lo, hi)`, on up to `threads` threads. Each thread
    /// folds a consecutive run of rows into its own accumulator; they come
    /// back in row order (merge them afterwards).
    pub fn fold<A, I, F>(
        &self,
        bounds: Option<(i64, i64)>,
        threads: usize,
        init: I,
        row: F,
    ) -> Vec<A>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, i64, i64, i64, i64) + Sync,
    {
        self.fold_near(bounds, None, threads, init, row)
    }

    /// [`OsrtCalls::fold`], skipping whole chunks whose time span meets none
    /// of `windows` (sorted by start, not overlapping): for callers that
    /// only use rows overlapping those windows (gap attribution), the same
    /// answer from a fraction of the rows.
    pub fn fold_near<A, I, F>(
        &self,
        bounds: Option<(i64, i64)>,
        windows: Option<&[(i64, i64)]>,
        threads: usize,
        init: I,
        row: F,
    ) -> Vec<A>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, i64, i64, i64, i64) + Sync,
    {
        let near = |c: &Chunk| windows.is_none_or(|w| meets(w, c.min_start, c.max_end));
        let wanted: Vec<&Chunk> = self
            .chunks
            .iter()
            .filter(|c| bounds.is_none_or(|(lo, hi)| c.max_end > lo && c.min_start < hi))
            .filter(|c| near(c))
            .collect();
        fold_rows(
            &wanted,
            threads,
            init,
            |acc: &mut A, start, end, gtid, name| {
                if bounds.is_none_or(|(lo, hi)| end > lo && start < hi) {
                    row(acc, start, end, gtid, name);
                }
            },
        )
    }

    /// The name ids of the calls (each once, in no particular order).
    pub fn name_ids(&self) -> Vec<i64> {
        self.name_acc.keys().copied().collect()
    }

    /// [`OsrtCalls::fold_near`] with windows per thread (each thread's sorted, not overlapping), for the
    /// calls whose name `wanted` accepts: only those calls of those threads are folded, and whole chunks
    /// without any are skipped. nsys writes each thread's calls together, so a chunk nearly always holds one
    /// thread: the busy threads of a process (NCCL's proxy, a TCPStore's poll) are never decoded.
    pub fn fold_threads_near<A, I, F, N>(
        &self,
        windows: &FxHashMap<i64, Vec<(i64, i64)>>,
        wanted: N,
        threads: usize,
        init: I,
        row: F,
    ) -> Vec<A>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, i64, i64, i64, i64) + Sync,
        N: Fn(i64) -> bool + Sync,
    {
        let wanted_chunks: Vec<&Chunk> = self
            .chunks
            .iter()
            .filter(|c| {
                c.threads.iter().any(|t| {
                    windows
                        .get(t)
                        .is_some_and(|w| meets(w, c.min_start, c.max_end))
                })
            })
            .collect();
        fold_runs(
            &wanted_chunks,
            threads,
            Order::Rows,
            init,
            |acc: &mut A, c: &Chunk| {
                let names: Vec<bool> = c.names.iter().map(|&n| wanted(n)).collect();
                let mine: Vec<bool> = c.threads.iter().map(|t| windows.contains_key(t)).collect();
                if !names.contains(&true) {
                    return;
                }
                c.each(|start, end, t, n| {
                    if names.get(n as usize) == Some(&true) && mine.get(t as usize) == Some(&true) {
                        row(acc, start, end, c.threads[t as usize], c.names[n as usize]);
                    }
                });
            },
        )
    }
}

/// Whether any of `windows` (sorted, not overlapping) meets `[lo, hi)`: the first window ending after `lo`
/// must start before `hi`.
fn meets(windows: &[(i64, i64)], lo: i64, hi: i64) -> bool {
    let i = windows.partition_point(|&(_, e)| e <= lo);
    windows.get(i).is_some_and(|&(s, _)| s < hi)
}

/// Fold the rows of `chunks` as `(start, end, globalTid, nameId)`, one accumulator per run, in row order.
fn fold_rows<A, I, F>(chunks: &[&Chunk], threads: usize, init: I, row: F) -> Vec<A>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, i64, i64, i64, i64) + Sync,
{
    fold_runs(
        chunks,
        threads,
        Order::Rows,
        init,
        |acc: &mut A, c: &Chunk| {
            c.each(|start, end, t, n| {
                let gtid = c.threads.get(t as usize).copied().unwrap_or(0);
                let name = c.names.get(n as usize).copied().unwrap_or(0);
                row(acc, start, end, gtid, name);
            });
        },
    )
}

/// Whether a fold's accumulators must come back in row order.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// One accumulator per run, in row order (a streaming union chains them).
    Rows,
    /// One accumulator per thread, in any order (sums and counts).
    Any,
}

/// Fold `chunks` on up to `threads` threads. The chunks are cut into
/// consecutive runs, several per thread, that idle threads take in turn (the
/// rows a fold does real work on cluster in time, so equal shares per thread
/// would leave most threads waiting on one). With [`Order::Rows`] each run has
/// its own accumulator and they come back in row order (merge them
/// afterwards); with [`Order::Any`] a thread folds all its runs into one, so
/// memory grows with the threads, not the runs.
fn fold_runs<A, I, F>(chunks: &[&Chunk], threads: usize, order: Order, init: I, f: F) -> Vec<A>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, &Chunk) + Sync,
{
    let threads = threads.clamp(1, 16).min(chunks.len().max(1));
    if threads == 1 {
        let mut acc = init();
        for c in chunks {
            f(&mut acc, c);
        }
        return vec![acc];
    }
    let runs: Vec<&[&Chunk]> = chunks.chunks(chunks.len().div_ceil(threads * 8)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, A)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine: Vec<(usize, A)> = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(run) = runs.get(i) else { break };
                        if order == Order::Rows || mine.is_empty() {
                            mine.push((i, init()));
                        }
                        if let Some((_, acc)) = mine.last_mut() {
                            for c in run.iter() {
                                f(acc, c);
                            }
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, a)| a).collect()
}

/// Count, sums, extremes and histogram of one name's durations: exact
/// integers, so the parts of a parallel decode merge into the same answer.
#[derive(Debug, Default)]
struct NameAcc {
    count: u64,
    total: i128,
    squares: i128,
    min: i64,
    max: i64,
    overflow: bool,
    hist: Vec<u64>,
}

impl NameAcc {
    #[inline]
    fn add(&mut self, d: i64) {
        if self.count == 0 {
            self.min = d;
            self.max = d;
            self.hist = vec![0; BUCKETS];
        }
        self.count += 1;
        self.total += d as i128;
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        match (d as i128)
            .checked_mul(d as i128)
            .and_then(|q| self.squares.checked_add(q))
        {
            Some(q) => self.squares = q,
            None => self.overflow = true,
        }
        if let Some(h) = self.hist.get_mut(bucket(d)) {
            *h += 1;
        }
    }

    fn merge(&mut self, o: NameAcc) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = o;
            return;
        }
        self.count += o.count;
        self.total += o.total;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        match self.squares.checked_add(o.squares) {
            Some(q) => self.squares = q,
            None => self.overflow = true,
        }
        self.overflow |= o.overflow;
        for (a, b) in self.hist.iter_mut().zip(o.hist) {
            *a += b;
        }
    }
}

/// Exact `nsys stats` statistics of every name's call durations over the
/// whole table (`osrt_sum` without a time window or process filter), with no
/// per-call list: 23 M durations held as a list cost more in fresh memory
/// pages than the statistics themselves.
///
/// - count, total, min, max and the sums for the standard deviation are exact
///   integers gathered while the table was decoded; the standard deviation is
///   `sqrt((n·Σd² − (Σd)²) / (n·(n − 1)))`, the exact sample variance;
/// - the median comes from the histogram gathered with them: one fold keeps
///   only the durations in the one or two buckets that hold the middle
///   rank(s), and those are selected exactly.
///
/// `None` when a sum would overflow 128 bits (the caller then lists durations).
pub fn name_stats(calls: &OsrtCalls, threads: usize) -> Option<NameStats> {
    if calls.name_acc.values().any(|a| a.overflow) {
        return None;
    }
    // Per name: the middle rank(s) (0-based, ascending), the bucket of each
    // and the values before it.
    struct Middle {
        ranks: [u64; 2],
        buckets: [usize; 2],
        before: [u64; 2],
    }
    let middles: FxHashMap<i64, Middle> = calls
        .name_acc
        .iter()
        .filter(|(_, a)| a.count > 0)
        .map(|(&name, a)| {
            let hi = a.count / 2;
            let lo = if a.count % 2 == 0 { hi - 1 } else { hi };
            let find = |rank: u64| {
                let mut seen = 0u64;
                for (b, &c) in a.hist.iter().enumerate() {
                    if seen + c > rank {
                        return (b, seen);
                    }
                    seen += c;
                }
                (BUCKETS - 1, seen)
            };
            let (b0, s0) = find(lo);
            let (b1, s1) = find(hi);
            (
                name,
                Middle {
                    ranks: [lo, hi],
                    buckets: [b0, b1],
                    before: [s0, s1],
                },
            )
        })
        .collect();
    let parts = calls.fold_chunks(threads, FxHashMap::<(i64, usize), Held>::default, |m, c| {
        // The chunk's names resolved once, not per row.
        let local: Vec<Option<(i64, [usize; 2])>> = c
            .names
            .iter()
            .map(|n| middles.get(n).map(|mid| (*n, mid.buckets)))
            .collect();
        c.each(|s, e, _, n| {
            if let Some(Some((name, b))) = local.get(n as usize) {
                let d = e.wrapping_sub(s);
                let k = bucket(d);
                if k == b[0] || k == b[1] {
                    m.entry((*name, k)).or_insert_with(|| Held::new(k)).add(d);
                }
            }
        });
    });
    let mut held: FxHashMap<(i64, usize), Held> = FxHashMap::default();
    for part in parts {
        for (k, v) in part {
            match held.get_mut(&k) {
                Some(h) => h.merge(v),
                None => {
                    held.insert(k, v);
                }
            }
        }
    }
    let mut out = NameStats::default();
    for (&name, a) in calls.name_acc.iter().filter(|(_, a)| a.count > 0) {
        let mid = &middles[&name];
        let mut at = |k: usize| -> i64 {
            let r = mid.ranks[k] - mid.before[k];
            match held.get_mut(&(name, mid.buckets[k])) {
                Some(h) => h.nth(r),
                None => 0, // cannot happen: the decode and the fold see the same rows
            }
        };
        let n = a.count as i128;
        let med = if a.count % 2 == 1 {
            at(1) as f64
        } else {
            let (lo, hi) = (at(0), at(1));
            super::stats::round_ratio(lo as i128 + hi as i128, 2, 10)
        };
        let stddev = if a.count > 1 {
            // n·Σd² − (Σd)² = n(n−1)·variance, exactly (never negative).
            let num = n
                .checked_mul(a.squares)
                .and_then(|x| a.total.checked_mul(a.total).and_then(|t| x.checked_sub(t)))?;
            super::stats::round1((num.max(0) as f64 / (n * (n - 1)) as f64).sqrt())
        } else {
            0.0
        };
        out.by_name.insert(
            name,
            super::stats::Stats {
                count: a.count,
                total: a.total as i64,
                avg: super::stats::round1_ratio(a.total, n),
                med,
                min: a.min,
                max: a.max,
                stddev,
            },
        );
    }
    Some(out)
}

/// The durations of one name that fall in its median's histogram bucket.
/// A narrow bucket (at most [`DENSE_WIDTH`] values wide: every duration
/// under about 131 µs) is counted per value, so the few hot names with
/// millions of calls in one bucket (`accept`, `poll`) cost no list; a wide
/// one keeps the values themselves.
enum Held {
    Dense { lo: i64, counts: Vec<u64> },
    Values(Vec<i64>),
}

/// The widest bucket counted per value (32 KiB of counts per fold thread).
const DENSE_WIDTH: i64 = 4096;

impl Held {
    fn new(k: usize) -> Held {
        match bucket_bounds(k) {
            Some((lo, width)) if width <= DENSE_WIDTH => Held::Dense {
                lo,
                counts: vec![0; width as usize],
            },
            _ => Held::Values(Vec::new()),
        }
    }

    #[inline]
    fn add(&mut self, d: i64) {
        match self {
            Held::Dense { lo, counts } => {
                if let Some(c) = counts.get_mut((d - *lo) as usize) {
                    *c += 1;
                }
            }
            Held::Values(v) => v.push(d),
        }
    }

    fn merge(&mut self, other: Held) {
        match (self, other) {
            (Held::Dense { counts, .. }, Held::Dense { counts: o, .. }) => {
                for (a, b) in counts.iter_mut().zip(o) {
                    *a += b;
                }
            }
            (Held::Values(v), Held::Values(o)) => v.extend(o),
            _ => {} // the same bucket always makes the same kind
        }
    }

    /// The `r`-th smallest (0-based) held duration.
    fn nth(&mut self, r: u64) -> i64 {
        match self {
            Held::Dense { lo, counts } => {
                let mut seen = 0u64;
                for (i, &c) in counts.iter().enumerate() {
                    seen += c;
                    if seen > r {
                        return *lo + i as i64;
                    }
                }
                0
            }
            Held::Values(v) => {
                if (r as usize) < v.len() {
                    *v.select_nth_unstable(r as usize).1
                } else {
                    0
                }
            }
        }
    }
}

/// [`name_stats`]' answer: per name id, the statistics of its calls' durations.
#[derive(Debug, Default)]
pub struct NameStats {
    pub by_name: FxHashMap<i64, super::stats::Stats>,
}

impl super::loaded::Footprint for NameStats {
    fn footprint(&self) -> u64 {
        let entry = std::mem::size_of::<(i64, super::stats::Stats)>() as u64 + 1;
        self.by_name.capacity() as u64 * entry
    }
}

/// Histogram buckets: one for negative durations (damaged rows), 32 exact
/// small values, then 16 per power of two (the median's bucket holds about a
/// sixteenth of its octave's calls, so the second fold keeps few).
const BUCKETS: usize = 1 + 32 + 59 * 16;

#[inline]
fn bucket(d: i64) -> usize {
    if d < 0 {
        return 0;
    }
    let v = d as u64;
    if v < 32 {
        return 1 + v as usize;
    }
    let e = 64 - v.leading_zeros() as usize; // 6..=63
    1 + 32 + (e - 6) * 16 + ((v >> (e - 5)) & 15) as usize
}

/// The first value and the width of bucket `k` (`None` for the negative bucket).
fn bucket_bounds(k: usize) -> Option<(i64, i64)> {
    match k {
        0 => None,
        1..=32 => Some((k as i64 - 1, 1)),
        _ => {
            let j = k - 33;
            let (e, sub) = (j / 16 + 6, (j % 16) as i64);
            let shift = e - 5;
            Some(((16 + sub) << shift, 1 << shift))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_invert_bucket() {
        let mut x: u64 = 99;
        for i in 0..100_000i64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let d = if i < 5000 {
                i
            } else {
                (x >> (2 + x % 40)) as i64
            };
            let k = bucket(d);
            let (lo, w) = bucket_bounds(k).unwrap();
            assert!(
                lo <= d && d < lo + w,
                "{d}: bucket {k} = [{lo}, {})",
                lo + w
            );
            assert_eq!((bucket(lo), bucket(lo + w - 1)), (k, k), "{d}");
            assert_ne!(bucket(lo + w), k);
        }
        assert_eq!(bucket_bounds(bucket(-5)), None);
    }

    #[test]
    fn name_stats_equal_the_statistics_of_the_listed_durations() {
        // Names with odd and even counts, one call, ties, negative (damaged)
        // rows, huge and tiny durations, spread over many chunks.
        let mut e = Encoder::default();
        let mut by_name: std::collections::HashMap<i64, Vec<i64>> = Default::default();
        let mut x: u64 = 12345;
        for i in 0..200_000i64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let name = 1 + (x >> 60) as i64 % 7;
            let dur = match name {
                1 => (x >> 20) as i64 % 50,             // small, many ties
                2 => (x >> 11) as i64 % 10_000_000_000, // up to 10 s
                3 => 100_098_917,                       // all equal
                4 => (x >> 30) as i64 % 1000 - 3,       // a few negative
                5 => (1 << 45) + (x >> 40) as i64,      // hours
                7 => 1000 + (x >> 33) as i64 % 300,     // like `accept`: one narrow bucket
                _ => (x >> 33) as i64,
            };
            let start = 1_000_000 + i * 1000;
            e.row(start, start + dur, 7 << 24, name, Some(27));
            by_name.entry(name).or_default().push(dur);
        }
        e.row(5, 9, 7 << 24, 99, Some(27)); // a name with one call
        by_name.entry(99).or_default().push(4);
        let t = Encoder::finish(vec![e]);
        for threads in [1, 3] {
            let got = name_stats(&t, threads).expect("no overflow");
            assert_eq!(got.by_name.len(), by_name.len());
            for (name, v) in &by_name {
                let want = super::super::stats::stats(&mut v.clone());
                assert_eq!(got.by_name[name], want, "name {name}");
            }
        }
        // Sums past 128 bits: no answer (the caller lists durations instead).
        let mut e = Encoder::default();
        for i in 0..4 {
            e.row(i, i + i64::MAX / 2, 1, 1, None);
        }
        assert!(name_stats(&Encoder::finish(vec![e]), 2).is_none());
    }

    #[test]
    fn rows_come_back_exactly_in_order_and_windows_filter() {
        let rows: Vec<(i64, i64, i64, i64, Option<i64>)> = (0..50_000i64)
            .map(|i| {
                let start = 1_000_000_000 + i * 37 - (i % 5) * 1000; // not monotonic
                let end = start + (i % 7) * 1_000_000_007 + 3;
                // Threads and names in runs, as nsys writes them (the encoder's
                // previous-row shortcut), some runs across chunk boundaries.
                (
                    start,
                    end,
                    ((i / 700) % 9) << 24 | 77,
                    1000 + (i / 3) % 13,
                    Some(if i % 11 == 0 { 28 } else { 27 }),
                )
            })
            .collect();
        let mut parts = vec![Encoder::default(), Encoder::default()];
        for (k, r) in rows.iter().enumerate() {
            parts[usize::from(k >= 20_000)].row(r.0, r.1, r.2, r.3, r.4);
        }
        let t = Encoder::finish(parts);
        assert_eq!(t.table_rows, 50_000);
        let want: Vec<(i64, i64, i64, i64)> = rows
            .iter()
            .filter(|r| r.4 == Some(27))
            .map(|r| (r.0, r.1, r.2, r.3))
            .collect();
        assert_eq!(t.calls, want.len() as u64);
        for threads in [1, 3] {
            let got: Vec<(i64, i64, i64, i64)> = t
                .fold(None, threads, Vec::new, |v: &mut Vec<_>, s, e, g, n| {
                    v.push((s, e, g, n))
                })
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(got, want);
        }
        let (lo, hi) = (1_000_500_000, 1_001_000_000);
        let got: Vec<_> = t
            .fold(Some((lo, hi)), 2, Vec::new, |v: &mut Vec<_>, s, e, g, n| {
                v.push((s, e, g, n))
            })
            .into_iter()
            .flatten()
            .collect();
        let inside: Vec<_> = want
            .iter()
            .copied()
            .filter(|r| r.1 > lo && r.0 < hi)
            .collect();
        assert!(!inside.is_empty());
        assert_eq!(got, inside);
        assert!(super::super::loaded::Footprint::footprint(&t) < want.len() as u64 * 12);
        // Skipping chunks far from the windows keeps every row that meets one.
        let windows = [
            (1_000_100_000, 1_000_100_050),
            (1_001_500_000, 1_001_600_000),
        ];
        let meets = |s: i64, e: i64| windows.iter().any(|&(ws, we)| e > ws && s < we);
        let near: Vec<_> = t
            .fold_near(
                None,
                Some(&windows),
                2,
                Vec::new,
                |v: &mut Vec<_>, s, e, g, n| {
                    if meets(s, e) {
                        v.push((s, e, g, n))
                    }
                },
            )
            .into_iter()
            .flatten()
            .collect();
        let all: Vec<_> = want.iter().copied().filter(|r| meets(r.0, r.1)).collect();
        assert!(!all.is_empty());
        assert_eq!(near, all);
    }
}
