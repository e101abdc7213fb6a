//! Flame graphs: call stacks aggregated into folded text (`a;b;c <count>`,
//! the format of Brendan Gregg's `stackcollapse` tools) and rendered as an
//! interactive SVG by the `inferno` crate, plus the frames with the most self
//! time.
//!
//! Two sources:
//! - a PyTorch profiler (Kineto) trace recorded `with_stack=True`: every
//!   `python_function` event is a Python call with its start and duration;
//!   calls, operators (`cpu_op`) and `record_function` ranges on one thread
//!   nest by time, so each event's self time is its duration minus its
//!   children's. Counts are nanoseconds of wall time on the thread.
//! - an Nsight Systems export with CPU sampling: each sample's call chain
//!   (`SAMPLING_CALLCHAINS`, leaf first) is one stack. Counts are samples.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rusqlite::OptionalExtension;
use schemars::JsonSchema;
use serde::Serialize;

use crate::kineto::Trace;
use crate::kineto::trace::CpuOp;

#[derive(Debug, thiserror::Error)]
pub enum FlameError {
    #[error(
        "the trace has no Python stacks (no `python_function` events): it was not recorded with `with_stack=True`"
    )]
    NoKinetoStacks,
    #[error(
        "the export has no CPU samples (no SAMPLING_CALLCHAINS rows): the capture ran without CPU sampling"
    )]
    NoSamples,
    #[error("cannot read the export: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("cannot render the flame graph: {0}")]
    Render(String),
}

/// What one stack count means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CountUnit {
    /// Nanoseconds of wall time on the thread (Kineto).
    Ns,
    /// CPU samples (Nsight Systems).
    Samples,
}

/// Stacks, root first, with their self counts.
#[derive(Debug, Clone, Default)]
pub struct Stacks {
    /// Folded stack (`root;child;leaf`) → self count.
    pub folded: BTreeMap<String, u64>,
    /// Frame → (self count, calls or samples as leaf).
    pub self_by_frame: HashMap<String, (u64, u64)>,
    /// Frame → inclusive count (each stack counted once per frame, so
    /// recursion does not double count).
    pub total_by_frame: HashMap<String, u64>,
    /// nsys: samples whose call chain holds the leaf frame alone (the
    /// unwinder stopped there), so their callers are unknown.
    pub leaf_only: u64,
    /// nsys: samples of Nsight Systems' own threads (`[NSys]`, `NSys
    /// PySampling`, ...) in the profiled process, left out of the stacks.
    pub profiler_samples: u64,
}

/// Threads that Nsight Systems injects into the profiled process: their
/// samples are the profiler's overhead, not the program's.
pub fn is_profiler_thread(name: &str) -> bool {
    name.starts_with("[NSys") || name.starts_with("NSys ")
}

impl Stacks {
    fn add(&mut self, stack: &[String], count: u64) {
        if stack.is_empty() || count == 0 {
            return;
        }
        *self.folded.entry(stack.join(";")).or_insert(0) += count;
        let leaf = stack.last().expect("non-empty");
        let e = self.self_by_frame.entry(leaf.clone()).or_insert((0, 0));
        e.0 += count;
        let mut seen: Vec<&String> = Vec::with_capacity(stack.len());
        for f in stack {
            if !seen.contains(&f) {
                seen.push(f);
                *self.total_by_frame.entry(f.clone()).or_insert(0) += count;
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.folded.values().sum()
    }

    /// The folded text, one stack a line, sorted by stack.
    pub fn folded_text(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.folded {
            s.push_str(k);
            s.push(' ');
            s.push_str(&v.to_string());
            s.push('\n');
        }
        s
    }
}

/// A frame with its self and total counts.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FrameTime {
    pub frame: String,
    /// Count spent in the frame itself (not in what it called).
    pub self_count: u64,
    /// Share of all counted time (or samples), %.
    pub self_pct: f64,
    /// Count spent in the frame and everything it called.
    pub total_count: u64,
    pub total_pct: f64,
    /// Calls that ended in this frame (Kineto: its events; nsys: samples with it as leaf).
    pub calls: u64,
}

/// The frames with the most self time, largest first.
pub fn top_self(stacks: &Stacks, n: usize) -> Vec<FrameTime> {
    let all = stacks.total().max(1) as f64;
    let mut v: Vec<FrameTime> = stacks
        .self_by_frame
        .iter()
        .map(|(f, (s, c))| {
            let t = stacks.total_by_frame.get(f).copied().unwrap_or(*s);
            FrameTime {
                frame: f.clone(),
                self_count: *s,
                self_pct: 100.0 * *s as f64 / all,
                total_count: t,
                total_pct: 100.0 * t as f64 / all,
                calls: *c,
            }
        })
        .collect();
    v.sort_by(|a, b| {
        b.self_count
            .cmp(&a.self_count)
            .then_with(|| a.frame.cmp(&b.frame))
    });
    v.truncate(n);
    v
}

/// A frame name fit for folded text: no `;` (the separator), no line breaks,
/// and no object addresses (`<built-in method get of dict object at 0x7f..>`
/// → `<built-in method get of dict object>`), so that calls on different
/// objects aggregate.
pub fn clean_frame(name: &str) -> String {
    let mut s = name.replace([';', '\n', '\r'], ":");
    if let Some(i) = s.find(" at 0x") {
        let rest = &s[i + 6..];
        let hex = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        s.replace_range(i..i + 6 + hex, "");
    }
    s.trim().to_string()
}

/// Which Kineto events become frames besides Python calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KinetoFrames {
    /// PyTorch operators (`aten::...`) and their record_function ranges.
    pub operators: bool,
}

/// Stacks from a Kineto trace's Python calls (and, if asked, operators),
/// per thread: the root frame names the thread.
pub fn from_kineto(trace: &Trace, frames: KinetoFrames) -> Result<Stacks, FlameError> {
    if trace.python_frames.is_empty() {
        return Err(FlameError::NoKinetoStacks);
    }
    let mut by_thread: BTreeMap<(i64, i64), Vec<&CpuOp>> = BTreeMap::new();
    for e in &trace.python_frames {
        by_thread.entry((e.pid, e.tid)).or_default().push(e);
    }
    if frames.operators {
        for e in trace.cpu_ops.iter().chain(&trace.annotations) {
            // Only threads that have Python frames: operators on the autograd
            // thread have no Python caller to hang from.
            if let Some(v) = by_thread.get_mut(&(e.pid, e.tid)) {
                v.push(e);
            }
        }
    }
    let mut out = Stacks::default();
    for ((pid, tid), mut events) in by_thread {
        // Parents first: earlier start, then longer.
        events.sort_by_key(|e| (e.start_ns, std::cmp::Reverse(e.dur_ns)));
        let root = match trace.thread_names.get(&(pid, tid)) {
            Some(n) => clean_frame(n),
            None => format!("thread {tid}"),
        };
        // Open frames: (name, end, duration, time covered by children).
        let mut open: Vec<(String, i64, i64, i64)> = Vec::new();
        let mut names: Vec<String> = vec![root];
        let close =
            |open: &mut Vec<(String, i64, i64, i64)>, names: &mut Vec<String>, out: &mut Stacks| {
                let (_, _, dur, children) = open.pop().expect("open frame");
                out.add(names, (dur - children).max(0) as u64);
                let name = names.pop().expect("frame name");
                let e = out.self_by_frame.entry(name).or_insert((0, 0));
                e.1 += 1;
                if let Some(parent) = open.last_mut() {
                    parent.3 += dur;
                }
            };
        for e in events {
            let end = e.start_ns + e.dur_ns;
            while let Some(top) = open.last() {
                if e.start_ns >= top.1 {
                    close(&mut open, &mut names, &mut out);
                } else {
                    break;
                }
            }
            // A child that overruns its parent (timestamps of two clocks) is
            // clipped to it, so that self times never go negative.
            let (end, dur) = match open.last() {
                Some(top) if end > top.1 => (top.1, top.1 - e.start_ns),
                _ => (end, e.dur_ns),
            };
            open.push((String::new(), end, dur, 0));
            names.push(clean_frame(&e.name));
        }
        while !open.is_empty() {
            close(&mut open, &mut names, &mut out);
        }
    }
    Ok(out)
}

/// Stacks from an Nsight Systems export's CPU samples (`COMPOSITE_EVENTS`
/// with `SAMPLING_CALLCHAINS`, symbols in `StringIds`), root frame the thread.
pub fn from_nsys(conn: &rusqlite::Connection) -> Result<Stacks, FlameError> {
    let has = |t: &str| crate::db::has_table(conn, t);
    if !has("SAMPLING_CALLCHAINS")? || !has("COMPOSITE_EVENTS")? {
        return Err(FlameError::NoSamples);
    }
    let threads: HashMap<i64, String> = if has("ThreadNames")? {
        let mut st = conn.prepare(
            "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId",
        )?;
        st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<_, _>>()?
    } else {
        HashMap::new()
    };
    // An unresolved frame's symbol is its instruction address: every sample
    // in a stripped binary would be a frame of its own. Such frames are named
    // by their module (`[python3.12]`) so that they aggregate.
    let unresolved = conn
        .query_row(
            "SELECT 1 FROM pragma_table_info('SAMPLING_CALLCHAINS') WHERE name = 'unresolved'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    let mut st = conn.prepare(&format!(
        "SELECT e.id, e.globalTid, c.stackDepth, s.value, {}, m.value \
         FROM COMPOSITE_EVENTS e JOIN SAMPLING_CALLCHAINS c ON c.id = e.id \
         JOIN StringIds s ON s.id = c.symbol LEFT JOIN StringIds m ON m.id = c.module \
         ORDER BY e.id, c.stackDepth",
        if unresolved {
            "COALESCE(c.unresolved, 0)"
        } else {
            "0"
        }
    ))?;
    let mut rows = st.query([])?;
    let mut out = Stacks::default();
    let mut cur: Option<(i64, i64)> = None;
    let mut leaf_first: Vec<String> = Vec::new();
    let flush = |cur: Option<(i64, i64)>, leaf_first: &mut Vec<String>, out: &mut Stacks| {
        if let Some((_, gtid)) = cur
            && threads.get(&gtid).is_some_and(|n| is_profiler_thread(n))
        {
            out.profiler_samples += 1;
        } else if let Some((_, gtid)) = cur
            && !leaf_first.is_empty()
        {
            let tid = gtid & 0xFF_FFFF;
            let root = threads
                .get(&gtid)
                .map(|n| format!("{n} ({tid})"))
                .unwrap_or_else(|| format!("thread {tid}"));
            if leaf_first.len() == 1 {
                out.leaf_only += 1;
            }
            let mut stack = vec![root];
            stack.extend(leaf_first.drain(..).rev());
            out.add(&stack, 1);
            let leaf = stack.last().expect("leaf").clone();
            out.self_by_frame.entry(leaf).or_insert((0, 0)).1 += 1;
        }
        leaf_first.clear();
    };
    while let Some(r) = rows.next()? {
        let (id, gtid): (i64, i64) = (r.get(0)?, r.get(1)?);
        if cur.map(|c| c.0) != Some(id) {
            flush(cur, &mut leaf_first, &mut out);
            cur = Some((id, gtid));
        }
        let symbol = r.get::<_, String>(3)?;
        let module = r.get::<_, Option<String>>(5)?;
        let frame = match module {
            Some(m) if r.get::<_, i64>(4)? != 0 => {
                format!("[{}]", m.rsplit('/').next().unwrap_or(&m))
            }
            _ => symbol,
        };
        leaf_first.push(clean_frame(&frame));
    }
    flush(cur, &mut leaf_first, &mut out);
    if out.folded.is_empty() {
        return Err(FlameError::NoSamples);
    }
    Ok(out)
}

/// The SVG flame graph of the stacks (inferno's defaults: frames sorted
/// alphabetically within a parent, widths by count, search and zoom in the
/// browser).
pub fn svg(stacks: &Stacks, title: &str, unit: CountUnit) -> Result<Vec<u8>, FlameError> {
    let text = stacks.folded_text();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = match unit {
        CountUnit::Ns => "ns".into(),
        CountUnit::Samples => "samples".into(),
    };
    opts.min_width = 0.05;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, text.lines(), &mut out)
        .map_err(|e| FlameError::Render(e.to_string()))?;
    Ok(out)
}

/// Open an export read-only for [`from_nsys`].
pub fn open_export(path: &Path) -> Result<rusqlite::Connection, FlameError> {
    Ok(rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, tid: i64, start: i64, dur: i64) -> CpuOp {
        CpuOp {
            name: name.into(),
            pid: 1,
            tid,
            start_ns: start,
            dur_ns: dur,
            external_id: None,
            flops: None,
        }
    }

    #[test]
    fn nesting_by_time_gives_self_times() {
        let t = Trace {
            python_frames: vec![
                op("main", 1, 0, 100),
                op("a", 1, 10, 50),
                op("<built-in method get of dict object at 0x7fa7>", 1, 20, 10),
                op("b", 1, 70, 20),
            ],
            ..Trace::default()
        };
        let s = from_kineto(&t, KinetoFrames { operators: false }).unwrap();
        assert_eq!(
            s.folded_text(),
            "thread 1;main 30\nthread 1;main;a 40\nthread 1;main;a;<built-in method get of dict object> 10\nthread 1;main;b 20\n"
        );
        let top = top_self(&s, 2);
        assert_eq!(top[0].frame, "a");
        assert_eq!(top[0].self_count, 40);
        assert_eq!(top[0].total_count, 50);
        assert_eq!(top[0].calls, 1);
        assert!(svg(&s, "t", CountUnit::Ns).unwrap().starts_with(b"<?xml"));
    }

    /// The tables as Nsight Systems exports them (schema of the SQLite export:
    /// COMPOSITE_EVENTS, SAMPLING_CALLCHAINS with stackDepth 0 at the leaf,
    /// StringIds, ThreadNames). Not yet checked against a real export with CPU
    /// samples: none of the fixtures has them.
    #[test]
    fn nsys_callchains_fold_leaf_last() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
             CREATE TABLE COMPOSITE_EVENTS (id INTEGER PRIMARY KEY, start INTEGER NOT NULL, cpu INTEGER,
                 threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER NOT NULL);
             CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL,
                 unresolved INTEGER, originalIP INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));
             INSERT INTO StringIds VALUES (1, 'main'), (2, 'work'), (3, 'memcpy'), (4, 'python3');
             INSERT INTO ThreadNames VALUES (4, 0, 68719480881);
             INSERT INTO COMPOSITE_EVENTS VALUES (1, 10, 0, 1, 68719480881, 0), (2, 20, 0, 1, 68719480881, 0),
                 (3, 30, 0, 1, 68719480881, 0);
             INSERT INTO SAMPLING_CALLCHAINS VALUES (1, 3, 0, 0, 0, 0), (1, 2, 0, 0, 0, 1), (1, 1, 0, 0, 0, 2),
                 (2, 2, 0, 0, 0, 0), (2, 1, 0, 0, 0, 1), (3, 3, 0, 0, 0, 0), (3, 2, 0, 0, 0, 1), (3, 1, 0, 0, 0, 2);",
        )
        .unwrap();
        let s = from_nsys(&c).unwrap();
        // globalTid 68719480881 = pid 4096 << 24 | tid 4145.
        assert_eq!(
            s.folded_text(),
            "python3 (4145);main;work 1\npython3 (4145);main;work;memcpy 2\n"
        );
        let top = top_self(&s, 1);
        assert_eq!(
            (top[0].frame.as_str(), top[0].self_count, top[0].calls),
            ("memcpy", 2, 2)
        );
        let empty = rusqlite::Connection::open_in_memory().unwrap();
        assert!(matches!(from_nsys(&empty), Err(FlameError::NoSamples)));
    }
}
