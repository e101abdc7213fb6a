//! Make a large test profile from a real one by replicating its event rows
//! with shifted timestamps and correlation ids, for speed and memory tests.
//!
//! ```text
//! cargo run --release --example inflate_profile -- SRC.sqlite DST.sqlite --target-mb 1000
//! cargo run --release --example inflate_profile -- SRC.sqlite DST.sqlite --copies 18
//! ```
//!
//! Every table with `start` and `end` columns (kernels, CUDA API, memcpy,
//! memset, synchronization, NVTX, OS runtime, GPU memory events, ...) gets
//! `copies - 1` more copies of its original rows. Copy `k` is shifted by
//! `k × (capture length + 1 ms)` and its correlation ids by `k × (max id + 1)`,
//! so copies follow each other in time and every kernel still joins exactly one
//! launch call of its own process. Names, devices, processes and threads are
//! unchanged: the result reads like one long capture of the same program.

use std::path::PathBuf;
use std::time::Instant;

use rusqlite::Connection;

fn usage() -> ! {
    eprintln!("usage: inflate_profile SRC.sqlite DST.sqlite (--copies N | --target-mb MB)");
    std::process::exit(2);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        usage();
    }
    let src = PathBuf::from(&args[0]);
    let dst = PathBuf::from(&args[1]);
    let value: f64 = args[3].parse().unwrap_or_else(|_| usage());
    let src_bytes = std::fs::metadata(&src)?.len() as f64;
    let copies = match args[2].as_str() {
        "--copies" => value.max(1.0) as i64,
        "--target-mb" => ((value * 1e6) / src_bytes).ceil().max(1.0) as i64,
        _ => usage(),
    };
    if dst.exists() {
        return Err(format!("{} exists; remove it first", dst.display()).into());
    }
    let t0 = Instant::now();
    std::fs::copy(&src, &dst)?;
    let conn = Connection::open(&dst)?;
    conn.execute_batch(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;",
    )?;
    // Tables with start/end timestamps, and which of them carry correlation ids.
    let tables: Vec<String> = {
        let mut stmt =
            conn.prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut timed: Vec<(String, Vec<String>)> = Vec::new();
    for t in &tables {
        let cols: Vec<String> = {
            let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{t}')"))?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<_, _>>()?
        };
        if cols.iter().any(|c| c == "start") {
            timed.push((t.clone(), cols));
        }
    }
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    let mut max_corr = 0i64;
    for (t, cols) in &timed {
        let (a, b): (Option<i64>, Option<i64>) = if cols.iter().any(|c| c == "end") {
            conn.query_row(
                &format!("SELECT MIN(start), MAX(\"end\") FROM \"{t}\""),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
        } else {
            conn.query_row(
                &format!("SELECT MIN(start), MAX(start) FROM \"{t}\""),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
        };
        if let (Some(a), Some(b)) = (a, b) {
            lo = lo.min(a);
            hi = hi.max(b);
        }
        if cols.iter().any(|c| c == "correlationId") {
            let m: Option<i64> = conn.query_row(
                &format!("SELECT MAX(correlationId) FROM \"{t}\""),
                [],
                |r| r.get(0),
            )?;
            max_corr = max_corr.max(m.unwrap_or(0));
        }
    }
    let shift = (hi - lo) + 1_000_000;
    let corr_shift = max_corr + 1;
    eprintln!(
        "{} -> {}: {copies} copies, time shift {shift} ns, correlation shift {corr_shift}, {} timed tables",
        src.display(),
        dst.display(),
        timed.len()
    );
    conn.execute_batch("BEGIN")?;
    for (t, cols) in &timed {
        let n: i64 = conn
            .query_row(&format!("SELECT MAX(rowid) FROM \"{t}\""), [], |r| {
                r.get::<_, Option<i64>>(0)
            })?
            .unwrap_or(0);
        if n == 0 {
            continue;
        }
        let list: Vec<String> = cols.iter().map(|c| format!("\"{c}\"")).collect();
        for k in 1..copies {
            let select: Vec<String> = cols
                .iter()
                .map(|c| match c.as_str() {
                    "start" | "end" => format!("\"{c}\" + {}", k * shift),
                    "correlationId" => format!("correlationId + {}", k * corr_shift),
                    _ => format!("\"{c}\""),
                })
                .collect();
            conn.execute(
                &format!(
                    "INSERT INTO \"{t}\" ({}) SELECT {} FROM \"{t}\" WHERE rowid <= {n}",
                    list.join(", "),
                    select.join(", ")
                ),
                [],
            )?;
        }
    }
    conn.execute_batch("COMMIT")?;
    drop(conn);
    let size = std::fs::metadata(&dst)?.len();
    eprintln!(
        "wrote {} ({:.1} MB) in {:.1} s",
        dst.display(),
        size as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
