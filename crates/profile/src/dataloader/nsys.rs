//! DataLoader waits from an Nsight Systems export (`-t osrt,nvtx` and
//! context switches, the default `--cpuctxsw=process-tree`).
//!
//! What a real capture of a PyTorch loop holds (H100, PyTorch 2.11, Nsight
//! Systems 2025.3.1; `tests/data/capture/README.md`):
//! - the worker processes' threads are named `pt_data_worker`, the
//!   pin-memory thread `pt_data_pin` (PyTorch names them);
//! - with `torch.autograd.profiler.emit_nvtx()` every `next()` is an NVTX
//!   range `enumerate(DataLoader)#<iterator>.__next__, op_id = N` on the
//!   loop's thread: the wait, exactly;
//! - without it, the loop thread blocks in the OS runtime while the queue is
//!   empty: `sem_clockwait` (Python's lock with a timeout, under
//!   `queue.Queue.get` when pin_memory=True) or `poll` (the worker pipe's
//!   `multiprocessing` queue when pin_memory=False). The other waits on that
//!   thread are not data: `pthread_cond_*wait` is the GIL changing hands or
//!   `backward()` waiting for the autograd thread, and calls inside a CUDA
//!   API call belong to CUDA.
//! - `SCHED_EVENTS` (context switches) give each thread's time on a CPU, so
//!   the workers' utilisation is measured rather than inferred.
//!
//! Steps are NVTX `step_N` / `ProfilerStep#N` ranges on the loop's thread,
//! each spanning to the next step's start (so a `next()` between two ranges
//! still counts), or, without them, the intervals between consecutive
//! DataLoader `next()` ranges.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{Connection, OptionalExtension, params};

use super::{Evidence, LoaderAnalysis, LoaderError, StepWait, ThreadUse, assemble, copies_from};
use crate::db::has_table;

/// OS runtime calls in which the loop thread waits on the DataLoader's queue.
pub const QUEUE_WAITS: &[&str] = &[
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "poll",
    "ppoll",
    "select",
    "pselect",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
];

/// Which evidence of the waits to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsysOptions {
    /// Use DataLoader NVTX ranges when the export has them (else OS runtime).
    pub nvtx_ranges: bool,
}

impl Default for NsysOptions {
    fn default() -> Self {
        NsysOptions { nvtx_ranges: true }
    }
}

fn has_column(conn: &Connection, t: &str, c: &str) -> Result<bool, rusqlite::Error> {
    conn.query_row(
        &format!("SELECT 1 FROM pragma_table_info('{t}') WHERE name=?1"),
        [c],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
}

const fn pid_of(global_tid: i64) -> i64 {
    (global_tid >> 24) & 0xFF_FFFF
}

const fn tid_of(global_tid: i64) -> i64 {
    global_tid & 0xFF_FFFF
}

struct Range {
    start: i64,
    end: i64,
    gtid: i64,
    name: String,
}

fn step_number(name: &str) -> Option<u64> {
    name.strip_prefix("step_")
        .or_else(|| name.strip_prefix("ProfilerStep#"))
        .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
}

/// The step and DataLoader NVTX ranges (filtered in SQL: only these are read).
fn ranges(conn: &Connection) -> Result<(Vec<Range>, Vec<Range>), rusqlite::Error> {
    if !has_table(conn, "NVTX_EVENTS")? {
        return Ok((Vec::new(), Vec::new()));
    }
    let name = if has_column(conn, "NVTX_EVENTS", "textId")? && has_table(conn, "StringIds")? {
        "COALESCE(n.text, (SELECT value FROM StringIds s WHERE s.id = n.textId))"
    } else {
        "n.text"
    };
    let sql = format!(
        "SELECT start, end, globalTid, name FROM (SELECT n.start, n.end, n.globalTid, {name} AS name \
         FROM NVTX_EVENTS n WHERE n.end IS NOT NULL AND n.end > n.start AND n.eventType IN (59, 60)) \
         WHERE name GLOB 'step_[0-9]*' OR name GLOB 'ProfilerStep#[0-9]*' OR name GLOB 'enumerate(DataLoader)#*' \
         ORDER BY start"
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map([], |r| {
        Ok(Range {
            start: r.get(0)?,
            end: r.get(1)?,
            gtid: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
            name: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
        })
    })?;
    let (mut steps, mut nexts) = (Vec::new(), Vec::new());
    for r in rows {
        let r = r?;
        if r.name.starts_with("enumerate(DataLoader)#") {
            nexts.push(r);
        } else if step_number(&r.name).is_some() {
            steps.push(r);
        }
    }
    Ok((steps, nexts))
}

/// globalTid → thread name.
fn thread_names(conn: &Connection) -> Result<HashMap<i64, String>, rusqlite::Error> {
    if !has_table(conn, "ThreadNames")? || !crate::db::has_table(conn, "StringIds")? {
        return Ok(HashMap::new());
    }
    let mut st = conn.prepare(
        "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId",
    )?;
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
}

/// Queue-wait intervals, and per call name (calls, ns within the window).
type QueueWaits = (Vec<(i64, i64)>, BTreeMap<String, (u64, i64)>);

/// The loop thread's OS runtime queue waits in `[w0, w1)`, less those inside
/// a CUDA API call of the same thread.
fn osrt_waits(
    conn: &Connection,
    gtid: i64,
    w0: i64,
    w1: i64,
) -> Result<Option<QueueWaits>, rusqlite::Error> {
    if !has_table(conn, "OSRT_API")? || !crate::db::has_table(conn, "StringIds")? {
        return Ok(None);
    }
    let names = QUEUE_WAITS
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(",");
    let mut st = conn.prepare(&format!(
        "SELECT o.start, o.end, s.value FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId \
         WHERE o.globalTid = ?1 AND o.end > ?2 AND o.start < ?3 AND s.value IN ({names}) ORDER BY o.start"
    ))?;
    let calls: Vec<(i64, i64, String)> = st
        .query_map(params![gtid, w0, w1], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    let mut cuda: Vec<(i64, i64)> = Vec::new();
    if has_table(conn, "CUPTI_ACTIVITY_KIND_RUNTIME")? {
        let mut st = conn.prepare(
            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = ?1 AND end > ?2 AND start < ?3 \
             ORDER BY start",
        )?;
        cuda = st
            .query_map(params![gtid, w0, w1], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
    }
    let inside_cuda = |s: i64, e: i64| {
        // API calls on one thread do not overlap: the last one starting at or
        // before `s` is the only candidate.
        let i = cuda.partition_point(|c| c.0 <= s);
        i > 0 && cuda[i - 1].1 >= e
    };
    let mut by_name: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    let mut out = Vec::with_capacity(calls.len());
    for (s, e, name) in calls {
        if inside_cuda(s, e) {
            continue;
        }
        let v = by_name.entry(name).or_insert((0, 0));
        v.0 += 1;
        v.1 += e.min(w1) - s.max(w0);
        out.push((s, e));
    }
    Ok(Some((out, by_name)))
}

/// Running time of each thread in `gtids` within `[w0, w1)` from the
/// context switches: each schedule-in to the thread's next event.
fn running_ns(
    conn: &Connection,
    gtids: &[i64],
    w0: i64,
    w1: i64,
) -> Result<Option<HashMap<i64, i64>>, rusqlite::Error> {
    if !has_table(conn, "SCHED_EVENTS")? || gtids.is_empty() {
        return Ok(None);
    }
    let list = gtids
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut st = conn.prepare(&format!(
        "SELECT globalTid, start, isSchedIn FROM SCHED_EVENTS WHERE globalTid IN ({list}) \
         ORDER BY globalTid, start, rowid"
    ))?;
    let mut rows = st.query([])?;
    let mut out: HashMap<i64, i64> = gtids.iter().map(|g| (*g, 0)).collect();
    let mut open: Option<(i64, i64)> = None;
    while let Some(r) = rows.next()? {
        let (g, t, inn): (i64, i64, bool) = (r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? != 0);
        if let Some((og, s)) = open.take()
            && og == g
        {
            let (a, b) = (s.max(w0), t.min(w1));
            if b > a {
                *out.entry(g).or_insert(0) += b - a;
            }
        }
        if inn {
            open = Some((g, t));
        }
    }
    Ok(Some(out))
}

/// Analyse the DataLoader waits of an Nsight Systems export.
pub fn analyze(conn: &Connection, opts: NsysOptions) -> Result<LoaderAnalysis, LoaderError> {
    let (step_ranges, nexts) = ranges(conn)?;
    let names = thread_names(conn)?;
    let workers: Vec<i64> = {
        let mut pids: Vec<i64> = names
            .iter()
            .filter(|(_, n)| n.as_str() == "pt_data_worker")
            .map(|(g, _)| *g >> 24)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        // The worker's main thread (tid = pid) runs __getitem__ and collate.
        pids.into_iter()
            .map(|p| (p << 24) | (p & 0xFF_FFFF))
            .collect()
    };
    // The loop's thread: the one with the most steps, else the one calling next().
    let mut per_thread: HashMap<i64, usize> = HashMap::new();
    for s in &step_ranges {
        *per_thread.entry(s.gtid).or_insert(0) += 1;
    }
    let loop_tid = per_thread
        .iter()
        .max_by_key(|(g, n)| (**n, std::cmp::Reverse(**g)))
        .map(|(g, _)| *g)
        .or_else(|| nexts.first().map(|r| r.gtid));
    let Some(loop_tid) = loop_tid else {
        return Err(if workers.is_empty() {
            LoaderError::NoLoader
        } else {
            LoaderError::NoSteps
        });
    };
    let loop_nexts: Vec<&Range> = nexts.iter().filter(|r| r.gtid == loop_tid).collect();
    if loop_nexts.is_empty() && workers.is_empty() {
        return Err(LoaderError::NoLoader);
    }
    // Steps as (name, start, end): each spans to the next step's start.
    let mut steps: Vec<(String, i64, i64)> = Vec::new();
    let own: Vec<&Range> = step_ranges.iter().filter(|r| r.gtid == loop_tid).collect();
    if !own.is_empty() {
        for (i, r) in own.iter().enumerate() {
            let end = own.get(i + 1).map(|n| n.start.max(r.end)).unwrap_or(r.end);
            steps.push((r.name.clone(), r.start, end));
        }
    } else {
        for (i, w) in loop_nexts.windows(2).enumerate() {
            steps.push((format!("iteration_{i}"), w[0].start, w[1].start));
        }
    }
    if steps.is_empty() {
        return Err(LoaderError::NoSteps);
    }
    let exclude_first = steps.len() >= 3;
    let counted = if exclude_first {
        &steps[1..]
    } else {
        &steps[..]
    };
    let (w0, w1) = (counted[0].1, counted[counted.len() - 1].2);
    let (waits, wait_basis): (Vec<(i64, i64)>, String) = if opts.nvtx_ranges
        && !loop_nexts.is_empty()
    {
        (
            loop_nexts.iter().map(|r| (r.start, r.end)).collect(),
            format!(
                "NVTX `enumerate(DataLoader)#...__next__` ranges on the loop's thread ({} of them, from \
                 torch.autograd.profiler.emit_nvtx or record_function)",
                loop_nexts.len()
            ),
        )
    } else {
        let (first, last) = (steps[0].1, steps[steps.len() - 1].2);
        match osrt_waits(conn, loop_tid, first, last)? {
            Some((w, by_name)) => {
                let calls = by_name
                    .iter()
                    .map(|(n, (c, ns))| format!("{n} {c} calls {:.1} ms", *ns as f64 / 1e6))
                    .collect::<Vec<_>>()
                    .join(", ");
                (
                    w,
                    format!(
                        "OS runtime: the loop thread blocked on the loader's queue ({} over all {} steps; \
                         pthread_cond waits are the GIL or the autograd thread and are not counted)",
                        if calls.is_empty() {
                            "no such calls".to_string()
                        } else {
                            calls
                        },
                        steps.len()
                    ),
                )
            }
            None => return Err(LoaderError::NoWaitSignal),
        }
    };
    let mk =
        |(name, s, e): &(String, i64, i64)| -> StepWait { super::step_wait(name, *s, *e, &waits) };
    let per_step: Vec<StepWait> = counted.iter().map(mk).collect();
    let excluded_first_step = exclude_first.then(|| mk(&steps[0]));
    let iterator = loop_nexts
        .first()
        .map(|r| {
            let rest = r.name.trim_start_matches("enumerate(DataLoader)#");
            rest.split(".__next__").next().unwrap_or(rest).to_string()
        })
        .unwrap_or_else(|| "_MultiProcessingDataLoaderIter".into());
    let multi = !workers.is_empty() || iterator.contains("MultiProcessing");
    // Threads whose running time tells who is busy.
    let pin: Option<i64> = names
        .iter()
        .filter(|(g, n)| n.as_str() == "pt_data_pin" && pid_of(**g) == pid_of(loop_tid))
        .map(|(g, _)| *g)
        .min();
    // The export does not say which process started a worker: with several
    // training processes (one per rank) every worker is counted for this loop.
    let mut loops: Vec<i64> = names
        .iter()
        .filter(|(_, n)| n.as_str() == "pt_data_pin")
        .map(|(g, _)| pid_of(*g))
        .chain(step_ranges.iter().map(|r| pid_of(r.gtid)))
        .collect();
    loops.sort_unstable();
    loops.dedup();
    let mut notes = Vec::new();
    if loops.len() > 1 {
        notes.push(format!(
            "this export holds {} processes with a training loop or pin-memory thread (pids {}); the figures are \
             of the loop in pid {}, but the worker processes counted ({}) may include other processes' workers (Nsight \
             Systems does not record which process started a worker): export one rank per file for exact \
             worker figures",
            loops.len(),
            loops.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "),
            pid_of(loop_tid),
            workers.len(),
        ));
    }
    let mut ids: Vec<i64> = workers.clone();
    ids.extend(pin);
    ids.push(loop_tid);
    let span = (w1 - w0).max(1);
    let threads = match running_ns(conn, &ids, w0, w1)? {
        Some(run) => {
            let use_of = |role: &str, g: i64| ThreadUse {
                role: role.into(),
                pid: pid_of(g),
                tid: tid_of(g),
                name: names.get(&g).cloned().unwrap_or_default(),
                running_ns: run.get(&g).copied().unwrap_or(0),
                running_pct: 100.0 * run.get(&g).copied().unwrap_or(0) as f64 / span as f64,
            };
            let mut t: Vec<ThreadUse> = workers.iter().map(|g| use_of("worker", *g)).collect();
            t.extend(pin.map(|g| use_of("pin_memory", g)));
            t.push(use_of("loop", loop_tid));
            t
        }
        None => Vec::new(),
    };
    let (mut pinned, mut pageable) = (0u64, 0u64);
    if has_table(conn, "CUPTI_ACTIVITY_KIND_MEMCPY")? {
        let mut st = conn.prepare(
            "SELECT srcKind, COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND start >= ?1 AND start < ?2 \
             GROUP BY srcKind",
        )?;
        let mut rows = st.query(params![w0, w1])?;
        while let Some(r) = rows.next()? {
            match r.get::<_, Option<i64>>(0)? {
                Some(0) => pageable += r.get::<_, i64>(1)? as u64,
                Some(1) => pinned += r.get::<_, i64>(1)? as u64,
                _ => {}
            }
        }
    }
    Ok(assemble(Evidence {
        iterator,
        multi,
        per_step,
        excluded_first_step,
        h2d_copies_from: copies_from(pinned, pageable),
        wait_basis,
        threads,
        prefetch_unseen: "not derivable from this export: batches cross from the worker processes through pipes \
                          and shared memory, not as events",
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: i64 = (100 << 24) | 100; // pid 100, its main thread
    const PIN: i64 = (100 << 24) | 101;
    const W: i64 = (200 << 24) | 200; // a worker process

    /// A minimal export: three `next()` waits on the loop thread, one of them
    /// inside a CUDA API call; a worker running half the time.
    fn export(step_ranges: bool) -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
             CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
                 text TEXT, globalTid INTEGER, textId INTEGER);
             CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
                 globalTid INTEGER, nameId INTEGER NOT NULL);
             CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
                 globalTid INTEGER);
             CREATE TABLE SCHED_EVENTS (start INTEGER NOT NULL, cpu INTEGER NOT NULL, isSchedIn INTEGER NOT NULL,
                 globalTid INTEGER);
             INSERT INTO StringIds VALUES (1, 'sem_clockwait'), (2, 'pthread_cond_wait'), (3, 'pt_data_worker'),
                 (4, 'pt_data_pin'), (5, 'python3');",
        )
        .unwrap();
        c.execute(
            "INSERT INTO ThreadNames VALUES (3, 0, ?1), (4, 0, ?2), (5, 0, ?3)",
            params![W, PIN, G],
        )
        .unwrap();
        for (i, s) in [0i64, 1000, 2000, 3000].iter().enumerate() {
            if step_ranges {
                c.execute(
                    "INSERT INTO NVTX_EVENTS VALUES (?1, ?2, 59, ?3, ?4, NULL)",
                    params![s, s + 900, format!("step_{i}"), G],
                )
                .unwrap();
            }
        }
        // Waits: 500 in step 1 (sem), 300 in step 2 inside cudaDeviceSynchronize,
        // 400 of GIL handoff in step 3 (not data), 200 in step 3 (sem).
        c.execute_batch(&format!(
            "INSERT INTO OSRT_API VALUES (1000, 1500, 27, {G}, 1), (2100, 2400, 27, {G}, 1),
                 (3000, 3400, 27, {G}, 2), (3500, 3700, 27, {G}, 1);
             INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (2050, 2450, {G});
             INSERT INTO SCHED_EVENTS VALUES (1000, 0, 1, {W}), (1500, 0, 0, {W}), (2000, 0, 1, {W}),
                 (2500, 0, 0, {W}), (3000, 0, 1, {W}), (3500, 0, 0, {W}), (1000, 1, 1, {PIN}), (1100, 1, 0, {PIN});"
        ))
        .unwrap();
        c
    }

    #[test]
    fn osrt_waits_skip_cuda_calls_and_gil_handoffs() {
        let a = analyze(&export(true), NsysOptions::default()).unwrap();
        let waits: Vec<i64> = a.per_step.iter().map(|s| s.wait_ns).collect();
        assert_eq!(waits, [500, 0, 200]);
        let first = a.excluded_first_step.as_ref().unwrap();
        assert_eq!((first.step.as_str(), first.step_ns), ("step_0", 1000));
        // Steps span to the next one's start; the last ends with its range.
        let spans: Vec<i64> = a.per_step.iter().map(|s| s.step_ns).collect();
        assert_eq!(spans, [1000, 1000, 900]);
        assert!(
            a.wait_basis.contains("sem_clockwait 2 calls"),
            "{}",
            a.wait_basis
        );
        // Window 1000..3900: the worker ran 1500 ns of 2900, the pin thread 100.
        let w = &a.threads[0];
        assert_eq!(
            (w.role.as_str(), w.pid, w.running_ns),
            ("worker", 200, 1500)
        );
        assert_eq!(a.threads[1].role, "pin_memory");
        assert_eq!(a.threads[1].running_ns, 100);
        // 700 of 2900 ns waiting (24 %) with the worker half idle: bound, but more
        // workers will not help.
        assert_eq!(a.verdict, "loader_bound");
        assert!(
            a.workers.starts_with("not the bottleneck:"),
            "{}",
            a.workers
        );
        assert!(
            a.fix[0].starts_with("More workers will not help: they idle 48 %"),
            "{}",
            a.fix[0]
        );
    }

    #[test]
    fn a_second_training_process_is_said_not_folded_in_silently() {
        let one = analyze(&export(true), NsysOptions::default()).unwrap();
        assert!(one.notes.is_empty(), "{:?}", one.notes);
        // A second rank (pid 300) with its own pin-memory thread in the same export.
        let c = export(true);
        c.execute(
            "INSERT INTO ThreadNames VALUES (4, 0, ?1)",
            params![(300i64 << 24) | 301],
        )
        .unwrap();
        let two = analyze(&c, NsysOptions::default()).unwrap();
        assert_eq!(two.notes.len(), 1);
        assert!(
            two.notes[0].starts_with(
                "this export holds 2 processes with a training loop or pin-memory thread (pids 100, 300); \
                 the figures are of the loop in pid 100, but the worker processes counted (1) may include"
            ),
            "{}",
            two.notes[0]
        );
        // The figures themselves are those of the one loop.
        assert_eq!(two.per_step.len(), one.per_step.len());
        assert_eq!(two.total_wait_ns, one.total_wait_ns);
    }

    #[test]
    fn without_step_ranges_nothing_is_guessed() {
        let c = export(false);
        assert!(matches!(
            analyze(&c, NsysOptions::default()),
            Err(LoaderError::NoSteps)
        ));
        let empty = Connection::open_in_memory().unwrap();
        assert!(matches!(
            analyze(&empty, NsysOptions::default()),
            Err(LoaderError::NoLoader)
        ));
    }
}
