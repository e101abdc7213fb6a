//! Edit COPIES of Nsight Systems SQLite exports, to make test sets that a real
//! capture would produce: a time window, one file per rank, shifted clocks and
//! a planted straggler. The source is never modified: every command copies it
//! first and edits the copy.
//!
//! ```text
//! cargo run --example export_edit -- cut SRC DST --from-ns A --to-ns B
//! cargo run --example export_edit -- split SRC OUT_DIR [--slim]
//! cargo run --example export_edit -- shift SRC DST --ns N [--utc-ns U]
//! cargo run --example export_edit -- identity SRC DST --rank R [--local-rank L] [--world W] [--hostname H] [--device D]
//! cargo run --example export_edit -- stretch --rank R --ns D FILE...   (edits the files in place: pass copies)
//! cargo run --example export_edit -- scale SRC DST --factor F [--origin-ns O]
//! cargo run --example export_edit -- gpus SRC DST --uuid-prefix P
//! ```
//!
//! - `cut` keeps what an `nsys profile --delay/--duration` capture of the window
//!   [A, B) would hold: ranges that start and end inside it, instants inside it,
//!   and GPU activity (kernels, copies, sets, syncs, CUDA events, memory events)
//!   only when its launching CUDA API call (correlationId + process) was kept.
//!   `ANALYSIS_DETAILS` and the capture metadata (`START_DELAY_MS`,
//!   `RUN_DURATION_MS`) describe the window; `utcEpochNs` is unchanged because
//!   timestamps stay relative to the same session start.
//! - `split` writes `rank_<r>.sqlite` per process that ran kernels, ranks in
//!   device order (torchrun's default placement). Each file holds only that
//!   process's rows (events, threads, streams, contexts), its own GPU rows in
//!   `TARGET_INFO_GPU`, and `RANK`/`LOCAL_RANK`/`WORLD_SIZE` in the recorded
//!   environment, as `nsys profile -o rank_%q{RANK}` inside torchrun would.
//!   `--slim` also empties the OS-runtime tables (`-t cuda,nvtx` captures).
//! - `shift` adds N ns to every timestamp (`start`, `end`, `timestamp`,
//!   `ANALYSIS_DETAILS` times) and U ns to the session start `utcEpochNs`. A
//!   rank whose session started Δ later than the reference, with its
//!   wall-clock start wrong by ε, is `shift --ns -Δ --utc-ns Δ+ε`.
//! - `identity` sets a rank file's rank, local rank, world size, hostname and
//!   CUDA device (every `deviceId` column and the GPU/device tables).
//! - `stretch` plants a straggler in a set of rank files of one job: before
//!   each all-reduce, rank R's work is stretched by D ns (the last compute
//!   kernel that ends after the previous all-reduce, or the gap when there is
//!   none), so R arrives D later; every other rank's matching all-reduce kernel
//!   ends D later (it waits for R). Every later timestamp of every file moves
//!   with it, so the set stays consistent.
//! - `scale` runs the same work F times slower (or faster): every timestamp t
//!   becomes O + (t − O) × F (O: the first GPU activity by default), so each
//!   kernel, gap and range lasts F times as long — what the same program does
//!   on a slower GPU or with a slower library, for tests of per-unit verdicts.
//! - `gpus` makes the capture's GPUs other physical GPUs of the same model:
//!   every recorded GPU UUID (`TARGET_INFO_GPU.uuid`, the UUIDs listed in the
//!   recorded `NVIDIA_VISIBLE_DEVICES`) gets its first characters replaced by P.
//!
//! The functions are public so that tests build their sets with the same code
//! (`#[path = "../examples/export_edit.rs"] mod export_edit;`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

/// The process part of a globalTid (`globalTid & 0xFFFFFFFFFF000000`).
const PID_MASK: i64 = 0xFFFF_FFFF_FF00_0000u64 as i64;

/// Copy `src` to `dst` (which must not exist) and open the copy for writing.
pub fn copy_for_edit(src: &Path, dst: &Path) -> Result<Connection> {
    if dst.exists() {
        return Err(format!("{} exists; remove it first", dst.display()).into());
    }
    std::fs::copy(src, dst)?;
    open_for_edit(dst)
}

/// Open an export copy for editing (journal off: a failed edit leaves a copy to delete).
pub fn open_for_edit(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-131072; PRAGMA temp_store=MEMORY;",
    )?;
    Ok(conn)
}

fn tables(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt =
        conn.prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

fn columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// Every (table, columns) of the file.
fn layout(conn: &Connection) -> Result<Vec<(String, Vec<String>)>> {
    tables(conn)?
        .into_iter()
        .map(|t| {
            let c = columns(conn, &t)?;
            Ok((t, c))
        })
        .collect()
}

fn has(cols: &[String], name: &str) -> bool {
    cols.iter().any(|c| c == name)
}

/// The timestamp columns of a table (session-relative ns).
fn time_columns(table: &str, cols: &[String]) -> Vec<&'static str> {
    let mut out = Vec::new();
    if table == "ANALYSIS_DETAILS" {
        out.extend(["startTime", "stopTime"]);
        return out;
    }
    for c in ["start", "end", "timestamp"] {
        if has(cols, c) {
            out.push(c);
        }
    }
    out
}

fn set_meta(conn: &Connection, name: &str, value: &str) -> Result<()> {
    if !tables(conn)?.iter().any(|t| t == "META_DATA_CAPTURE") {
        return Ok(());
    }
    let n = conn.execute(
        "UPDATE META_DATA_CAPTURE SET value = ?2 WHERE name = ?1",
        params![name, value],
    )?;
    if n == 0 {
        conn.execute(
            "INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?1, ?2)",
            params![name, value],
        )?;
    }
    Ok(())
}

/// What `cut` kept.
#[derive(Debug, Clone, Default)]
pub struct CutReport {
    pub from_ns: i64,
    pub to_ns: i64,
    /// (table, rows before, rows after) for every table that lost rows.
    pub tables: Vec<(String, i64, i64)>,
}

/// Cut the window [from_ns, to_ns) of `src` into `dst`.
pub fn cut(src: &Path, dst: &Path, from_ns: i64, to_ns: i64) -> Result<CutReport> {
    if to_ns <= from_ns {
        return Err(format!("empty window: --to-ns {to_ns} <= --from-ns {from_ns}").into());
    }
    let conn = copy_for_edit(src, dst)?;
    let report = cut_in_place(&conn, from_ns, to_ns)?;
    conn.execute_batch("VACUUM")?;
    Ok(report)
}

fn count(conn: &Connection, table: &str) -> Result<i64> {
    Ok(
        conn.query_row(&format!("SELECT COUNT(*) FROM \"{table}\""), [], |r| {
            r.get(0)
        })?,
    )
}

/// `cut` on an open copy.
pub fn cut_in_place(conn: &Connection, from_ns: i64, to_ns: i64) -> Result<CutReport> {
    let layout = layout(conn)?;
    let before: BTreeMap<String, i64> = layout
        .iter()
        .map(|(t, _)| Ok((t.clone(), count(conn, t)?)))
        .collect::<Result<_>>()?;
    conn.execute_batch("BEGIN")?;
    // 1. Timed rows: ranges wholly inside, instants inside.
    for (t, cols) in &layout {
        if t == "ANALYSIS_DETAILS" {
            continue;
        }
        let sql = if has(cols, "start") && has(cols, "end") {
            format!(
                "DELETE FROM \"{t}\" WHERE NOT (start >= ?1 AND start < ?2 AND COALESCE(\"end\", start) <= ?2)"
            )
        } else if has(cols, "start") {
            format!("DELETE FROM \"{t}\" WHERE NOT (start >= ?1 AND start < ?2)")
        } else if has(cols, "timestamp") {
            format!(
                "DELETE FROM \"{t}\" WHERE timestamp IS NOT NULL AND NOT (timestamp >= ?1 AND timestamp < ?2)"
            )
        } else {
            continue;
        };
        conn.execute(&sql, params![from_ns, to_ns])?;
    }
    // 2. GPU-side rows follow their launching call (correlationId + process).
    let runtime = layout
        .iter()
        .find(|(t, _)| t.starts_with("CUPTI_ACTIVITY_KIND_RUNTIME"))
        .map(|(t, _)| t.clone());
    if let Some(rt) = &runtime {
        conn.execute_batch(&format!(
            "CREATE TEMP TABLE kept_calls AS SELECT DISTINCT correlationId AS c, globalTid & {PID_MASK} AS p FROM \"{rt}\";
             CREATE INDEX temp.kept_calls_cp ON kept_calls(c, p);"
        ))?;
        for (t, cols) in &layout {
            if t == rt || !has(cols, "correlationId") || !has(cols, "globalPid") {
                continue;
            }
            conn.execute(
                &format!(
                    "DELETE FROM \"{t}\" WHERE correlationId IS NOT NULL AND NOT EXISTS \
                     (SELECT 1 FROM kept_calls k WHERE k.c = \"{t}\".correlationId AND k.p = \"{t}\".globalPid)"
                ),
                [],
            )?;
        }
        conn.execute_batch("DROP TABLE temp.kept_calls")?;
    }
    // 3. The capture's own description of its window.
    if layout.iter().any(|(t, _)| t == "ANALYSIS_DETAILS") {
        conn.execute(
            "UPDATE ANALYSIS_DETAILS SET startTime = MAX(startTime, ?1), stopTime = MIN(stopTime, ?2)",
            params![from_ns, to_ns],
        )?;
        conn.execute(
            "UPDATE ANALYSIS_DETAILS SET duration = stopTime - startTime",
            [],
        )?;
    }
    set_meta(
        conn,
        "START_DELAY_MS",
        &(from_ns.max(0) / 1_000_000).to_string(),
    )?;
    set_meta(
        conn,
        "RUN_DURATION_MS",
        &((to_ns - from_ns) / 1_000_000).to_string(),
    )?;
    conn.execute_batch("COMMIT")?;
    let mut report = CutReport {
        from_ns,
        to_ns,
        tables: Vec::new(),
    };
    for (t, _) in &layout {
        let after = count(conn, t)?;
        let b = before.get(t).copied().unwrap_or(0);
        if after != b {
            report.tables.push((t.clone(), b, after));
        }
    }
    Ok(report)
}

/// A process of a multi-process export that ran kernels: one rank.
#[derive(Debug, Clone)]
pub struct RankProcess {
    pub global_pid: i64,
    pub pid: i64,
    /// The CUDA devices its kernels ran on, ascending.
    pub devices: Vec<i64>,
}

/// The processes that ran kernels, ordered by their first device (torchrun places rank r on device r).
pub fn rank_processes(conn: &Connection) -> Result<Vec<RankProcess>> {
    let kernel_table = tables(conn)?
        .into_iter()
        .find(|t| t.starts_with("CUPTI_ACTIVITY_KIND_KERNEL"))
        .ok_or("no kernel table: nothing ran on a GPU")?;
    let mut stmt = conn.prepare(&format!(
        "SELECT globalPid, deviceId FROM \"{kernel_table}\" GROUP BY globalPid, deviceId ORDER BY globalPid, deviceId"
    ))?;
    let mut by_pid: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (p, d) = row?;
        by_pid.entry(p).or_default().push(d);
    }
    let mut out: Vec<RankProcess> = by_pid
        .into_iter()
        .map(|(global_pid, devices)| RankProcess {
            global_pid,
            pid: (global_pid >> 24) & 0xFF_FFFF,
            devices,
        })
        .collect();
    out.sort_by_key(|p| (p.devices.first().copied().unwrap_or(i64::MAX), p.global_pid));
    Ok(out)
}

/// One file written by `split`.
#[derive(Debug, Clone)]
pub struct SplitFile {
    pub rank: usize,
    pub path: PathBuf,
    pub process: RankProcess,
}

/// Split `src` into `out_dir/rank_<r>.sqlite`, one per process that ran kernels.
pub fn split(src: &Path, out_dir: &Path, slim: bool) -> Result<Vec<SplitFile>> {
    std::fs::create_dir_all(out_dir)?;
    let procs = {
        let conn = Connection::open_with_flags(src, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        rank_processes(&conn)?
    };
    let world = procs.len();
    let mut out = Vec::new();
    for (rank, p) in procs.into_iter().enumerate() {
        let path = out_dir.join(format!("rank_{rank}.sqlite"));
        let conn = copy_for_edit(src, &path)?;
        keep_process(&conn, &p, slim)?;
        set_rank_env(&conn, rank, rank, world)?;
        conn.execute_batch("VACUUM")?;
        out.push(SplitFile {
            rank,
            path,
            process: p,
        });
    }
    Ok(out)
}

/// Delete every row that belongs to another process (or another GPU).
pub fn keep_process(conn: &Connection, p: &RankProcess, slim: bool) -> Result<()> {
    let layout = layout(conn)?;
    let gp = p.global_pid;
    let devices = p
        .devices
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",");
    conn.execute_batch("BEGIN")?;
    for (t, cols) in &layout {
        let sql = match t.as_str() {
            "TARGET_INFO_CUDA_DEVICE" => format!("DELETE FROM \"{t}\" WHERE pid != {}", p.pid),
            "TARGET_INFO_CUDA_CONTEXT_INFO" | "TARGET_INFO_CUDA_STREAM"
                if has(cols, "processId") =>
            {
                format!("DELETE FROM \"{t}\" WHERE processId != {}", p.pid)
            }
            "TARGET_INFO_GPU" => format!("DELETE FROM \"{t}\" WHERE id NOT IN ({devices})"),
            "OSRT_API" | "OSRT_CALLCHAINS" if slim => format!("DELETE FROM \"{t}\""),
            _ if has(cols, "globalPid") => {
                format!("DELETE FROM \"{t}\" WHERE globalPid IS NOT NULL AND globalPid != {gp}")
            }
            _ if has(cols, "globalTid") => format!(
                "DELETE FROM \"{t}\" WHERE globalTid IS NOT NULL AND (globalTid & {PID_MASK}) != {gp}"
            ),
            _ => continue,
        };
        conn.execute(&sql, [])?;
    }
    // Call chains nothing points at any more.
    if !slim && layout.iter().any(|(t, _)| t == "OSRT_CALLCHAINS") {
        let mut users = Vec::new();
        for (t, cols) in &layout {
            if has(cols, "callchainId") {
                users.push(format!(
                    "SELECT callchainId FROM \"{t}\" WHERE callchainId IS NOT NULL"
                ));
            }
        }
        if !users.is_empty() {
            conn.execute(
                &format!(
                    "DELETE FROM OSRT_CALLCHAINS WHERE id NOT IN ({})",
                    users.join(" UNION ")
                ),
                [],
            )?;
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// Record RANK/LOCAL_RANK/WORLD_SIZE in the capture's environment, as a per-rank capture's would be.
pub fn set_rank_env(conn: &Connection, rank: usize, local_rank: usize, world: usize) -> Result<()> {
    if !tables(conn)?.iter().any(|t| t == "META_DATA_CAPTURE") {
        return Ok(());
    }
    for name in ["RANK", "LOCAL_RANK", "WORLD_SIZE"] {
        conn.execute(
            "DELETE FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE' AND value LIKE ?1",
            params![format!("{name}=%")],
        )?;
    }
    for (name, v) in [
        ("RANK", rank),
        ("LOCAL_RANK", local_rank),
        ("WORLD_SIZE", world),
    ] {
        conn.execute(
            "INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?1)",
            params![format!("{name}=\"{v}\"")],
        )?;
    }
    Ok(())
}

/// Set a rank file's identity: rank, local rank, world size, hostname and (optionally) its CUDA device.
pub fn set_identity(
    conn: &Connection,
    rank: usize,
    local_rank: usize,
    world: usize,
    hostname: Option<&str>,
    device: Option<i64>,
) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    set_rank_env(conn, rank, local_rank, world)?;
    let layout = layout(conn)?;
    if let Some(h) = hostname {
        if layout.iter().any(|(t, _)| t == "TARGET_INFO_SYSTEM_ENV") {
            conn.execute(
                "UPDATE TARGET_INFO_SYSTEM_ENV SET value = ?1 WHERE name = 'Hostname'",
                params![h],
            )?;
        }
        set_meta(conn, "DEVICE_DISPLAY_NAME", h)?;
    }
    if let Some(d) = device {
        for (t, cols) in &layout {
            let sets: Vec<String> = match t.as_str() {
                "TARGET_INFO_GPU" => vec![format!("id = {d}"), format!("cuDevice = {d}")]
                    .into_iter()
                    .filter(|s| has(cols, s.split(' ').next().unwrap_or("")))
                    .collect(),
                "TARGET_INFO_CUDA_DEVICE" => vec![format!("gpuId = {d}"), format!("cudaId = {d}")],
                _ => ["deviceId", "srcDeviceId", "dstDeviceId"]
                    .iter()
                    .filter(|c| has(cols, c))
                    .map(|c| format!("{c} = {d}"))
                    .collect(),
            };
            if !sets.is_empty() {
                conn.execute(&format!("UPDATE \"{t}\" SET {}", sets.join(", ")), [])?;
            }
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// Shift every timestamp by `ns` and the session start `utcEpochNs` by `utc_ns`.
pub fn shift_in_place(conn: &Connection, ns: i64, utc_ns: i64) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    for (t, cols) in layout(conn)? {
        let sets: Vec<String> = time_columns(&t, &cols)
            .into_iter()
            .map(|c| format!("\"{c}\" = \"{c}\" + {ns}"))
            .collect();
        if !sets.is_empty() && ns != 0 {
            conn.execute(&format!("UPDATE \"{t}\" SET {}", sets.join(", ")), [])?;
        }
        if t == "TARGET_INFO_SESSION_START_TIME" && utc_ns != 0 {
            conn.execute(
                "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?1",
                params![utc_ns],
            )?;
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// `shift` into a copy.
pub fn shift(src: &Path, dst: &Path, ns: i64, utc_ns: i64) -> Result<()> {
    let conn = copy_for_edit(src, dst)?;
    shift_in_place(&conn, ns, utc_ns)
}

/// Every timestamp t becomes `origin + (t − origin) × factor` (`ANALYSIS_DETAILS` too).
pub fn scale_in_place(conn: &Connection, origin: i64, factor: f64) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    for (t, cols) in layout(conn)? {
        let sets: Vec<String> = time_columns(&t, &cols)
            .into_iter()
            .map(|c| {
                format!(
                    "\"{c}\" = {origin} + CAST(ROUND((\"{c}\" - {origin}) * {factor}) AS INTEGER)"
                )
            })
            .collect();
        if !sets.is_empty() {
            conn.execute(&format!("UPDATE \"{t}\" SET {}", sets.join(", ")), [])?;
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// The first GPU activity (kernel, copy or memset start) of an export.
pub fn first_activity(conn: &Connection) -> Result<i64> {
    let mut first = i64::MAX;
    for t in tables(conn)? {
        if t.starts_with("CUPTI_ACTIVITY_KIND_KERNEL")
            || t.starts_with("CUPTI_ACTIVITY_KIND_MEMCPY")
            || t.starts_with("CUPTI_ACTIVITY_KIND_MEMSET")
        {
            let v: Option<i64> =
                conn.query_row(&format!("SELECT MIN(start) FROM \"{t}\""), [], |r| r.get(0))?;
            first = first.min(v.unwrap_or(i64::MAX));
        }
    }
    Ok(first)
}

/// `scale` into a copy; `origin` defaults to the first GPU activity.
pub fn scale(src: &Path, dst: &Path, factor: f64, origin: Option<i64>) -> Result<()> {
    let conn = copy_for_edit(src, dst)?;
    let origin = match origin {
        Some(o) => o,
        None => first_activity(&conn)?,
    };
    scale_in_place(&conn, origin, factor)
}

/// Other physical GPUs of the same model: the first characters of every recorded GPU UUID become `prefix`.
pub fn set_gpu_uuids(conn: &Connection, prefix: &str) -> Result<()> {
    let n = prefix.len() as i64;
    let all = tables(conn)?;
    if all.iter().any(|t| t == "TARGET_INFO_GPU") {
        conn.execute(
            "UPDATE TARGET_INFO_GPU SET uuid = ?1 || substr(uuid, ?2 + 1) WHERE uuid IS NOT NULL AND uuid != ''",
            params![prefix, n],
        )?;
    }
    if all.iter().any(|t| t == "TARGET_INFO_SYSTEM_ENV") {
        let env: Option<String> = conn
            .query_row(
                "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'",
                [],
                |r| r.get(0),
            )
            .ok();
        if let Some(env) = env {
            let edited: Vec<String> = env
                .split(';')
                .map(|kv| match kv.strip_prefix("NVIDIA_VISIBLE_DEVICES=") {
                    Some(list) => format!(
                        "NVIDIA_VISIBLE_DEVICES={}",
                        list.split(',')
                            .map(|u| match u.strip_prefix("GPU-") {
                                Some(id) if id.len() > prefix.len() =>
                                    format!("GPU-{prefix}{}", &id[prefix.len()..]),
                                _ => u.to_string(),
                            })
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    None => kv.to_string(),
                })
                .collect();
            conn.execute(
                "UPDATE TARGET_INFO_SYSTEM_ENV SET value = ?1 WHERE name = 'DeviceEnvironment'",
                params![edited.join(";")],
            )?;
        }
    }
    Ok(())
}

/// Move every timestamp t of the file by `delay_ns × #(breakpoints ≤ t)`.
pub fn apply_breakpoints(conn: &Connection, breakpoints: &[i64], delay_ns: i64) -> Result<()> {
    let mut bps = breakpoints.to_vec();
    bps.sort_unstable();
    conn.execute_batch("BEGIN; CREATE TEMP TABLE bp(t INTEGER PRIMARY KEY, n INTEGER NOT NULL);")?;
    {
        let mut ins = conn.prepare("INSERT OR REPLACE INTO bp(t, n) VALUES (?1, ?2)")?;
        for (i, t) in bps.iter().enumerate() {
            ins.execute(params![t, (i + 1) as i64])?;
        }
    }
    let moved = |c: &str, t: &str| {
        format!(
            "\"{c}\" = \"{c}\" + {delay_ns} * COALESCE((SELECT n FROM bp WHERE bp.t <= \"{t}\".\"{c}\" ORDER BY bp.t DESC LIMIT 1), 0)"
        )
    };
    for (t, cols) in layout(conn)? {
        let sets: Vec<String> = time_columns(&t, &cols)
            .into_iter()
            .map(|c| moved(c, &t))
            .collect();
        if !sets.is_empty() {
            conn.execute(&format!("UPDATE \"{t}\" SET {}", sets.join(", ")), [])?;
        }
    }
    conn.execute_batch("DROP TABLE temp.bp; COMMIT;")?;
    Ok(())
}

/// A kernel as `stretch` sees it: (start, end, device, is the collective, is any NCCL kernel).
type StretchKernel = (i64, i64, i64, bool, bool);

/// The kernels of a file, by start.
fn kernels_for_stretch(conn: &Connection, collective: &str) -> Result<Vec<StretchKernel>> {
    let kt = tables(conn)?
        .into_iter()
        .find(|t| t.starts_with("CUPTI_ACTIVITY_KIND_KERNEL"))
        .ok_or("no kernel table")?;
    let mut stmt = conn.prepare(&format!(
        "SELECT k.start, k.\"end\", k.deviceId, s.value FROM \"{kt}\" k LEFT JOIN StringIds s ON s.id = k.shortName ORDER BY k.start"
    ))?;
    let rows = stmt.query_map([], |r| {
        let name: String = r.get::<_, Option<String>>(3)?.unwrap_or_default();
        let lower = name.to_ascii_lowercase();
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            lower.contains("nccl") && lower.contains(&collective.to_ascii_lowercase()),
            lower.contains("nccl"),
        ))
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// What `stretch` planted.
#[derive(Debug, Clone)]
pub struct StretchReport {
    pub straggler: usize,
    pub delay_ns: i64,
    /// Collective instances delayed (the smallest count over the files).
    pub collectives: usize,
    /// How many of them stretched a compute kernel (the rest stretched the idle gap).
    pub kernels_stretched: usize,
}

/// Plant a straggler: `files[straggler]` arrives `delay_ns` late at each `collective` (e.g. "AllReduce").
pub fn stretch(
    files: &[PathBuf],
    straggler: usize,
    delay_ns: i64,
    collective: &str,
) -> Result<StretchReport> {
    if straggler >= files.len() {
        return Err(format!("--rank {straggler}: the set has {} files", files.len()).into());
    }
    let conns: Vec<Connection> = files
        .iter()
        .map(|f| open_for_edit(f))
        .collect::<Result<_>>()?;
    let kernels: Vec<_> = conns
        .iter()
        .map(|c| kernels_for_stretch(c, collective))
        .collect::<Result<_>>()?;
    let count = kernels
        .iter()
        .map(|k| k.iter().filter(|x| x.3).count())
        .min()
        .unwrap_or(0);
    if count == 0 {
        return Err(
            format!("no {collective} NCCL kernels in every file: nothing to stretch").into(),
        );
    }
    let mut stretched = 0;
    for (i, (conn, ks)) in conns.iter().zip(&kernels).enumerate() {
        let colls: Vec<&StretchKernel> = ks.iter().filter(|x| x.3).take(count).collect();
        let mut bps = Vec::with_capacity(count);
        if i == straggler {
            let mut prev_end = i64::MIN;
            for c in &colls {
                let (start, end, device) = (c.0, c.1, c.2);
                // The compute kernel that finishes last before the collective starts.
                let pre = ks
                    .iter()
                    .filter(|k| !k.4 && k.2 == device && k.1 > prev_end && k.1 <= start)
                    .map(|k| k.1)
                    .max();
                if pre.is_some() {
                    stretched += 1;
                }
                bps.push(pre.unwrap_or(start));
                prev_end = end;
            }
        } else {
            bps.extend(colls.iter().map(|c| c.1));
        }
        apply_breakpoints(conn, &bps, delay_ns)?;
    }
    Ok(StretchReport {
        straggler,
        delay_ns,
        collectives: count,
        kernels_stretched: stretched,
    })
}

fn usage() -> ! {
    eprintln!(
        "usage:\n  export_edit cut SRC DST --from-ns A --to-ns B\n  export_edit split SRC OUT_DIR [--slim]\n  \
         export_edit shift SRC DST --ns N [--utc-ns U]\n  \
         export_edit identity SRC DST --rank R [--local-rank L] [--world W] [--hostname H] [--device D]\n  \
         export_edit stretch --rank R --ns D [--collective AllReduce] FILE... (edits in place)\n  \
         export_edit scale SRC DST --factor F [--origin-ns O]\n  \
         export_edit gpus SRC DST --uuid-prefix P"
    );
    std::process::exit(2);
}

/// `--name value` from the argument list.
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn int_flag(args: &[String], name: &str) -> Option<i64> {
    flag(args, name).map(|v| v.parse().unwrap_or_else(|_| usage()))
}

/// Positional arguments (those not a flag or a flag's value).
fn positional(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--slim" {
            i += 1;
        } else if args[i].starts_with("--") {
            i += 2;
        } else {
            out.push(args[i].clone());
            i += 1;
        }
    }
    out
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first().cloned() else {
        usage()
    };
    let rest = &args[1..];
    let pos = positional(rest);
    let t0 = std::time::Instant::now();
    match cmd.as_str() {
        "cut" => {
            let [src, dst] = &pos[..] else { usage() };
            let from = int_flag(rest, "--from-ns").unwrap_or_else(|| usage());
            let to = int_flag(rest, "--to-ns").unwrap_or_else(|| usage());
            let r = cut(Path::new(src), Path::new(dst), from, to)?;
            for (t, b, a) in &r.tables {
                eprintln!("{t}: {b} -> {a} rows");
            }
        }
        "split" => {
            let [src, out] = &pos[..] else { usage() };
            let slim = rest.iter().any(|a| a == "--slim");
            for f in split(Path::new(src), Path::new(out), slim)? {
                eprintln!(
                    "rank {}: pid {} devices {:?} -> {}",
                    f.rank,
                    f.process.pid,
                    f.process.devices,
                    f.path.display()
                );
            }
        }
        "shift" => {
            let [src, dst] = &pos[..] else { usage() };
            let ns = int_flag(rest, "--ns").unwrap_or_else(|| usage());
            shift(
                Path::new(src),
                Path::new(dst),
                ns,
                int_flag(rest, "--utc-ns").unwrap_or(0),
            )?;
        }
        "identity" => {
            let [src, dst] = &pos[..] else { usage() };
            let rank = int_flag(rest, "--rank").unwrap_or_else(|| usage()) as usize;
            let conn = copy_for_edit(Path::new(src), Path::new(dst))?;
            set_identity(
                &conn,
                rank,
                int_flag(rest, "--local-rank")
                    .map(|v| v as usize)
                    .unwrap_or(rank),
                int_flag(rest, "--world")
                    .map(|v| v as usize)
                    .unwrap_or(rank + 1),
                flag(rest, "--hostname").as_deref(),
                int_flag(rest, "--device"),
            )?;
        }
        "scale" => {
            let [src, dst] = &pos[..] else { usage() };
            let factor: f64 = flag(rest, "--factor")
                .and_then(|f| f.parse().ok())
                .unwrap_or_else(|| usage());
            scale(
                Path::new(src),
                Path::new(dst),
                factor,
                int_flag(rest, "--origin-ns"),
            )?;
        }
        "gpus" => {
            let [src, dst] = &pos[..] else { usage() };
            let prefix = flag(rest, "--uuid-prefix").unwrap_or_else(|| usage());
            let conn = copy_for_edit(Path::new(src), Path::new(dst))?;
            set_gpu_uuids(&conn, &prefix)?;
        }
        "stretch" => {
            let rank = int_flag(rest, "--rank").unwrap_or_else(|| usage()) as usize;
            let ns = int_flag(rest, "--ns").unwrap_or_else(|| usage());
            let coll = flag(rest, "--collective").unwrap_or_else(|| "AllReduce".into());
            let files: Vec<PathBuf> = pos.iter().map(PathBuf::from).collect();
            let r = stretch(&files, rank, ns, &coll)?;
            eprintln!(
                "rank {} delayed {} ns before each of {} {coll} ({} compute kernels stretched, the rest idle gaps)",
                r.straggler, r.delay_ns, r.collectives, r.kernels_stretched
            );
        }
        _ => usage(),
    }
    eprintln!("done in {:.2} s", t0.elapsed().as_secs_f64());
    Ok(())
}
