//! `export`: a profile as a Chrome/Perfetto trace (JSON) or as CSV of a report.
//!
//! - Perfetto: GPUs are processes (`GPU <device>: <name>`) with one thread per
//!   stream (kernels, memcpys, memsets); CPU processes keep their pids with one
//!   track per thread (NVTX ranges, CUDA API calls); flow arrows join each
//!   launch call to its kernel. Timestamps are µs from the first event, so the
//!   file loads in ui.perfetto.dev and chrome://tracing. Events are streamed to
//!   disk, never held in memory.
//! - CSV: any `summary` report (all rows), or the kernel trace (`kernels`).
//!
//! Reports with charts (HTML, PDF) are the `export` domain's (`aisp_report`).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calls;
use super::model;
use super::summary::{self, NameKey, SummaryOptions, TimeReport};
use super::{Profile, ProfileError, ResolvedScope, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Perfetto,
    Csv,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Exported {
    pub format: Format,
    pub output: String,
    pub bytes: u64,
    /// Trace events (perfetto) or rows (csv) written.
    pub records: u64,
    /// How to open it.
    pub open_with: String,
}

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl Fn(std::io::Error) -> ProfileError + 'a {
    move |source| ProfileError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Where an export goes: an open folder and a name ([`aisp_base::safe_write`]).
pub type Output = aisp_base::safe_write::Target;

type Sink = std::io::BufWriter<aisp_base::safe_write::PendingFile>;

fn write_err(e: aisp_base::safe_write::SafeWriteError) -> ProfileError {
    use aisp_base::safe_write::SafeWriteError as W;
    match e {
        W::Exists(path) => ProfileError::OutputExists { path },
        W::Io { what, path, source } => ProfileError::Io { what, path, source },
        other => ProfileError::BadOutput(other.to_string()),
    }
}

/// Start the output: a temporary file beside it (no link followed, nothing
/// replaced unless `overwrite`), put in place by [`finish`].
fn create(output: &Output, overwrite: bool) -> Result<Sink> {
    let f = output.create(overwrite).map_err(write_err)?;
    Ok(std::io::BufWriter::with_capacity(1 << 20, f))
}

fn finish(w: Sink, output: &Path) -> Result<u64> {
    let f = w.into_inner().map_err(|e| ProfileError::Io {
        what: "cannot write",
        path: output.to_path_buf(),
        source: e.into_error(),
    })?;
    f.commit().map_err(write_err)
}

/// JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Perfetto/Chrome trace of the scope.
pub fn perfetto(
    p: &Profile,
    scope: &ResolvedScope,
    target: &Output,
    overwrite: bool,
) -> Result<Exported> {
    let mut w = create(target, overwrite)?;
    let path = target.path();
    let output = path.as_path();
    let e = io_err(output, "cannot write");
    let kernels = p.kernels()?;
    let api = p.api()?;
    let launches = &p.launch_index()?.kernel_launch;
    let (origin, _) = p.activity_bounds()?;
    let us = |t: i64| (t - origin) as f64 / 1000.0;
    let gpus = super::info::gpus(p)?;
    // GPU "processes" get pids far above OS pids.
    let gpu_pid = |d: i64| 100_000_000 + d;
    let mut n = 0u64;
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
        .map_err(&e)?;
    let mut first = true;
    let mut emit = |w: &mut Sink, line: String| -> std::io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        n += 1;
        w.write_all(line.as_bytes())
    };
    let mut gpu_tracks: BTreeSet<(i64, i64)> = BTreeSet::new();
    let mut cpu_threads: BTreeSet<i64> = BTreeSet::new();
    for (i, k) in kernels.iter().enumerate() {
        if !scope.admits(k.device, k.global_pid, k.start, k.end) {
            continue;
        }
        gpu_tracks.insert((k.device, k.stream));
        let name = p.string(k.short_name);
        emit(
            &mut w,
            format!(
                "{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"demangled\":{},\"grid\":\"{}x{}x{}\",\"block\":\"{}x{}x{}\",\"correlation\":{}}}}}",
                js(name),
                gpu_pid(k.device),
                k.stream,
                us(k.start),
                k.dur() as f64 / 1000.0,
                js(p.string(k.demangled_name)),
                k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
                k.correlation
            ),
        )
        .map_err(&e)?;
        if let Some(ai) = launches[i] {
            let a = &api[ai as usize];
            // Flow: launch call → kernel.
            let id = i as u64 + 1;
            emit(&mut w, format!(
                "{{\"ph\":\"s\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{id},\"pid\":{},\"tid\":{},\"ts\":{:.3}}}",
                model::pid_of(a.global_tid), model::tid_of(a.global_tid), us(a.start)
            )).map_err(&e)?;
            emit(&mut w, format!(
                "{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{id},\"pid\":{},\"tid\":{},\"ts\":{:.3}}}",
                gpu_pid(k.device), k.stream, us(k.start)
            )).map_err(&e)?;
        }
    }
    let opers = p.memcpy_oper_labels()?;
    for m in p.memcpys()? {
        if !scope.admits(m.device, m.global_pid, m.start, m.end) {
            continue;
        }
        gpu_tracks.insert((m.device, m.stream));
        let label = opers.get(&m.copy_kind).cloned().unwrap_or_default();
        emit(&mut w, format!(
            "{{\"ph\":\"X\",\"cat\":\"memcpy\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"bytes\":{}}}}}",
            js(&format!("[CUDA memcpy {label}]")), gpu_pid(m.device), m.stream, us(m.start), (m.end - m.start) as f64 / 1000.0, m.bytes
        )).map_err(&e)?;
    }
    for m in p.memsets()? {
        if !scope.admits(m.device, m.global_pid, m.start, m.end) {
            continue;
        }
        gpu_tracks.insert((m.device, m.stream));
        emit(&mut w, format!(
            "{{\"ph\":\"X\",\"cat\":\"memset\",\"name\":\"[CUDA memset]\",\"pid\":{},\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"bytes\":{}}}}}",
            gpu_pid(m.device), m.stream, us(m.start), (m.end - m.start) as f64 / 1000.0, m.bytes
        )).map_err(&e)?;
    }
    for r in &p.nvtx()?.ranges {
        if !scope.admits_thread(r.global_tid, r.start, r.end) {
            continue;
        }
        cpu_threads.insert(r.global_tid);
        emit(&mut w, format!(
            "{{\"ph\":\"X\",\"cat\":\"nvtx\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{:.3},\"dur\":{:.3}}}",
            js(&r.name), model::pid_of(r.global_tid), model::tid_of(r.global_tid), us(r.start), r.dur() as f64 / 1000.0
        )).map_err(&e)?;
    }
    for a in api {
        if !scope.admits_thread(a.global_tid, a.start, a.end) {
            continue;
        }
        cpu_threads.insert(a.global_tid);
        emit(&mut w, format!(
            "{{\"ph\":\"X\",\"cat\":\"cuda_api\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"correlation\":{}}}}}",
            js(calls::api_display_name(p.string(a.name))), model::pid_of(a.global_tid), model::tid_of(a.global_tid), us(a.start), a.dur() as f64 / 1000.0, a.correlation
        )).map_err(&e)?;
    }
    // Metadata: names of processes and threads.
    let devices: BTreeSet<i64> = gpu_tracks.iter().map(|t| t.0).collect();
    for d in devices {
        let name = super::info::gpu_name(&gpus, d).unwrap_or_else(|| "unknown GPU".into());
        emit(
            &mut w,
            format!(
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":{}}}}}",
                gpu_pid(d),
                js(&format!("GPU {d}: {name}"))
            ),
        )
        .map_err(&e)?;
        emit(&mut w, format!("{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}", gpu_pid(d), d)).map_err(&e)?;
    }
    for (d, s) in &gpu_tracks {
        emit(&mut w, format!(
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}",
            gpu_pid(*d), s, js(&format!("stream {s}"))
        )).map_err(&e)?;
    }
    let tnames = super::info::thread_names(p)?;
    let pnames = super::info::process_names(p)?;
    let pids: BTreeSet<i64> = cpu_threads.iter().map(|g| model::pid_of(*g)).collect();
    for pid in pids {
        let name = pnames
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| "process".into());
        emit(
            &mut w,
            format!(
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"args\":{{\"name\":{}}}}}",
                js(&format!("{name} (pid {pid})"))
            ),
        )
        .map_err(&e)?;
    }
    for g in cpu_threads {
        let name = tnames
            .get(&g)
            .cloned()
            .unwrap_or_else(|| format!("thread {}", model::tid_of(g)));
        emit(&mut w, format!(
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}",
            model::pid_of(g), model::tid_of(g), js(&name)
        )).map_err(&e)?;
    }
    w.write_all(b"\n]}\n").map_err(&e)?;
    let bytes = finish(w, output)?;
    Ok(Exported {
        format: Format::Perfetto,
        output: output.display().to_string(),
        bytes,
        records: n,
        open_with: "https://ui.perfetto.dev (Open trace file) or chrome://tracing".into(),
    })
}

/// A text field from the profile, safe for line-based readers and spreadsheets.
fn csv_text(s: &str) -> String {
    aisp_base::safe_write::csv_text(s).into_owned()
}

/// The CSV reports: every summary report, plus the kernel trace.
pub const CSV_REPORTS: &[&str] = &[
    "kernels",
    "cuda_gpu_kern_sum",
    "cuda_api_sum",
    "cuda_gpu_mem_time_sum",
    "cuda_gpu_mem_size_sum",
    "nvtx_sum",
    "osrt_sum",
];

fn csv_err(output: &Path) -> impl Fn(csv::Error) -> ProfileError + '_ {
    move |e| ProfileError::Io {
        what: "cannot write CSV",
        path: output.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// A report as CSV (all rows).
pub fn csv(
    p: &Profile,
    scope: &ResolvedScope,
    report: &str,
    names: NameKey,
    target: &Output,
    overwrite: bool,
) -> Result<Exported> {
    let path = target.path();
    let output = path.as_path();
    if !CSV_REPORTS.contains(&report) {
        return Err(ProfileError::BadArgument(format!(
            "unknown CSV report `{report}`; available: {}",
            CSV_REPORTS.join(", ")
        )));
    }
    let w = create(target, overwrite)?;
    let mut out = csv::Writer::from_writer(w);
    let ce = csv_err(output);
    let mut rows = 0u64;
    if report == "kernels" {
        out.write_record([
            "start_ns",
            "end_ns",
            "duration_ns",
            "device",
            "stream",
            "pid",
            "correlation_id",
            "name",
            "demangled",
            "grid",
            "block",
            "registers_per_thread",
            "static_shared_bytes",
            "dynamic_shared_bytes",
        ])
        .map_err(&ce)?;
        for k in p.kernels()? {
            if !scope.admits(k.device, k.global_pid, k.start, k.end) {
                continue;
            }
            out.write_record([
                k.start.to_string(),
                k.end.to_string(),
                k.dur().to_string(),
                k.device.to_string(),
                k.stream.to_string(),
                model::pid_of(k.global_pid).to_string(),
                k.correlation.to_string(),
                csv_text(p.string(k.short_name)),
                csv_text(p.string(k.demangled_name)),
                format!("{}x{}x{}", k.grid[0], k.grid[1], k.grid[2]),
                format!("{}x{}x{}", k.block[0], k.block[1], k.block[2]),
                k.registers.to_string(),
                k.static_smem.to_string(),
                k.dynamic_smem.to_string(),
            ])
            .map_err(&ce)?;
            rows += 1;
        }
    } else {
        let s = summary::summary(
            p,
            scope,
            &SummaryOptions {
                reports: Some(vec![report.to_string()]),
                names,
                limit: Some(usize::MAX),
            },
        )?;
        if let Some(u) = s.unavailable.first() {
            return Err(ProfileError::Missing(format!("{}: {}", u.report, u.reason)));
        }
        if let Some(r) = s.cuda_gpu_mem_size_sum {
            out.write_record([
                "total_bytes",
                "count",
                "avg_bytes",
                "med_bytes",
                "min_bytes",
                "max_bytes",
                "stddev_bytes",
                "operation",
            ])
            .map_err(&ce)?;
            for x in r.rows {
                out.write_record([
                    x.total_bytes.to_string(),
                    x.count.to_string(),
                    x.avg_bytes.to_string(),
                    x.med_bytes.to_string(),
                    x.min_bytes.to_string(),
                    x.max_bytes.to_string(),
                    x.stddev_bytes.to_string(),
                    csv_text(&x.operation),
                ])
                .map_err(&ce)?;
                rows += 1;
            }
        } else {
            let t: Option<TimeReport> = s
                .cuda_gpu_kern_sum
                .or(s.cuda_api_sum)
                .or(s.cuda_gpu_mem_time_sum)
                .or(s.nvtx_sum)
                .or(s.osrt_sum);
            out.write_record([
                "time_pct",
                "total_ns",
                "instances",
                "avg_ns",
                "med_ns",
                "min_ns",
                "max_ns",
                "stddev_ns",
                "name",
                "style",
                "domain",
            ])
            .map_err(&ce)?;
            for x in t.map(|t| t.rows).unwrap_or_default() {
                out.write_record([
                    x.time_pct.to_string(),
                    x.total_ns.to_string(),
                    x.instances.to_string(),
                    x.avg_ns.to_string(),
                    x.med_ns.to_string(),
                    x.min_ns.to_string(),
                    x.max_ns.to_string(),
                    x.stddev_ns.to_string(),
                    csv_text(&x.name),
                    csv_text(&x.style.unwrap_or_default()),
                    csv_text(&x.domain.unwrap_or_default()),
                ])
                .map_err(&ce)?;
                rows += 1;
            }
        }
    }
    out.flush().map_err(io_err(output, "cannot write"))?;
    let w = out.into_inner().map_err(|e| ProfileError::Io {
        what: "cannot write",
        path: output.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let bytes = finish(w, output)?;
    Ok(Exported {
        format: Format::Csv,
        output: output.display().to_string(),
        bytes,
        records: rows,
        open_with: "any spreadsheet or pandas.read_csv".into(),
    })
}

/// Export in a format; `report` is for CSV.
pub fn export(
    p: &Profile,
    scope: &ResolvedScope,
    format: Format,
    output: &Output,
    report: Option<&str>,
    names: NameKey,
    overwrite: bool,
) -> Result<Exported> {
    match format {
        Format::Perfetto => perfetto(p, scope, output, overwrite),
        Format::Csv => csv(
            p,
            scope,
            report.unwrap_or("cuda_gpu_kern_sum"),
            names,
            output,
            overwrite,
        ),
    }
}

/// The default output path next to nothing the user owns: `<cache>/exports/<stem>.<ext>`.
pub fn default_output(
    cache_dir: &Path,
    source: &Path,
    format: Format,
    report: Option<&str>,
) -> PathBuf {
    let stem = source
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("profile");
    let name = match format {
        Format::Perfetto => format!("{stem}.perfetto.json"),
        Format::Csv => format!("{stem}.{}.csv", report.unwrap_or("cuda_gpu_kern_sum")),
    };
    cache_dir.join("exports").join(name)
}
