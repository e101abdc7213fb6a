//! Digests on disk: one folder per export (`<name>.digest/`) holding four
//! Parquet files, so that the digest step can run where the files are (a
//! Slurm job array, torchrun's ranks) and the merge reads only these, and so
//! that DuckDB, Polars or Spark can query a thousand ranks' digests directly
//! (`SELECT * FROM 'digests/*.digest/collectives.parquet'`).
//!
//! Every file has the rank key columns `file`, `pid`, `device`; times are ns
//! in the export's own clock (the merge aligns them). Columns:
//!
//! - `ranks.parquet`: `hostname`, `gpu`, `env_rank`, `local_rank`,
//!   `world_size`, `utc_epoch_ns`, `kernels`, `kernel_sum_ns`, then for each
//!   window `W` of `span`, `steps`, `steady` (null when the rank has none):
//!   `W_start_ns`, `W_end_ns`, `W_busy_ns`, `W_compute_ns`,
//!   `W_communication_ns`, `W_overlap_ns`, `W_exposed_communication_ns`;
//!   and `ledger_json`: the rank's step ledger, its exposed collective pieces
//!   and its findings as JSON text (null for Kineto digests).
//! - `steps.parquet`: `index`, `name`, `cpu_start_ns`, `cpu_end_ns`,
//!   `gpu_union_ns`, `compute_ns`, `communication_ns`,
//!   `exposed_communication_ns`, `kernels`.
//! - `collectives.parquet`: `kind` (`all_reduce`, ...), `seq`, `start_ns`,
//!   `end_ns`, `stream`, `compute_overlap_ns`, `bytes` (message size S), `peer` (send/recv),
//!   `kernel` (the kernel's index in its export, which ties the row to its wait/transfer split).
//! - `classes.parquet`: `class`, `kernels`, `total_ns`.
//!
//! All integer columns are INT64, strings are UTF-8 BYTE_ARRAY, all OPTIONAL.
//! Files are uncompressed (a digest is kilobytes) with dictionary encoding.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::record::Field;

use super::digest::{ClassRow, CollectiveRow, RankDigest, RankIdentity, StepRow, WindowFigures};
use crate::nccl::Collective;
use crate::windows::{Window, WindowKind};
use crate::{ProfileError, Result};

/// One column of values.
enum Col {
    Int(Vec<Option<i64>>),
    Str(Vec<Option<String>>),
}

/// A table to write: named columns of equal length.
struct Table {
    cols: Vec<(String, Col)>,
}

impl Table {
    fn new() -> Table {
        Table { cols: Vec::new() }
    }
    fn int(&mut self, name: &str, v: Vec<Option<i64>>) {
        self.cols.push((name.to_string(), Col::Int(v)));
    }
    fn str(&mut self, name: &str, v: Vec<Option<String>>) {
        self.cols.push((name.to_string(), Col::Str(v)));
    }
}

fn pq_err(path: &Path, e: impl std::fmt::Display) -> ProfileError {
    ProfileError::invalid(path, format!("Parquet: {e}"))
}

fn write_table(path: &Path, t: &Table) -> Result<()> {
    let fields: Vec<String> = t
        .cols
        .iter()
        .map(|(n, c)| match c {
            Col::Int(_) => format!("OPTIONAL INT64 {n};"),
            Col::Str(_) => format!("OPTIONAL BYTE_ARRAY {n} (UTF8);"),
        })
        .collect();
    let schema = parquet::schema::parser::parse_message_type(&format!(
        "message digest {{ {} }}",
        fields.join(" ")
    ))
    .map_err(|e| pq_err(path, e))?;
    let file = File::create(path).map_err(|e| ProfileError::Io {
        what: "writing the digest",
        path: path.to_path_buf(),
        source: e,
    })?;
    let props = Arc::new(WriterProperties::builder().build());
    let mut w =
        SerializedFileWriter::new(file, Arc::new(schema), props).map_err(|e| pq_err(path, e))?;
    let mut rg = w.next_row_group().map_err(|e| pq_err(path, e))?;
    for (_, c) in &t.cols {
        let Some(mut cw) = rg.next_column().map_err(|e| pq_err(path, e))? else {
            break;
        };
        match c {
            Col::Int(v) => {
                let vals: Vec<i64> = v.iter().flatten().copied().collect();
                let defs: Vec<i16> = v.iter().map(|x| x.is_some() as i16).collect();
                cw.typed::<Int64Type>()
                    .write_batch(&vals, Some(&defs), None)
                    .map_err(|e| pq_err(path, e))?;
            }
            Col::Str(v) => {
                let vals: Vec<ByteArray> = v
                    .iter()
                    .flatten()
                    .map(|s| ByteArray::from(s.as_str()))
                    .collect();
                let defs: Vec<i16> = v.iter().map(|x| x.is_some() as i16).collect();
                cw.typed::<ByteArrayType>()
                    .write_batch(&vals, Some(&defs), None)
                    .map_err(|e| pq_err(path, e))?;
            }
        }
        cw.close().map_err(|e| pq_err(path, e))?;
    }
    rg.close().map_err(|e| pq_err(path, e))?;
    w.close().map_err(|e| pq_err(path, e))?;
    Ok(())
}

/// Rows of a Parquet file as name → value maps.
type Row = BTreeMap<String, Field>;

fn read_table(path: &Path) -> Result<Vec<Row>> {
    // A digest path is the user's: never block on a FIFO or read a device.
    let (file, _) = crate::input_file::open_regular(path)?;
    let reader = SerializedFileReader::new(file).map_err(|e| pq_err(path, e))?;
    let iter = reader.get_row_iter(None).map_err(|e| pq_err(path, e))?;
    let mut out = Vec::new();
    for row in iter {
        let row = row.map_err(|e| pq_err(path, e))?;
        out.push(
            row.get_column_iter()
                .map(|(n, f)| (n.clone(), f.clone()))
                .collect(),
        );
    }
    Ok(out)
}

fn int(r: &Row, name: &str) -> Option<i64> {
    match r.get(name) {
        Some(Field::Long(v)) => Some(*v),
        Some(Field::Int(v)) => Some(*v as i64),
        _ => None,
    }
}

fn text(r: &Row, name: &str) -> Option<String> {
    match r.get(name) {
        Some(Field::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

const WINDOWS: [(&str, WindowKind); 3] = [
    ("span", WindowKind::Span),
    ("steps", WindowKind::Steps),
    ("steady", WindowKind::Steady),
];

/// The digest folder of an export: `<out>/<file name>.digest`.
pub fn digest_dir(out: &Path, export: &str) -> PathBuf {
    let name = Path::new(export)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("export");
    out.join(format!("{name}.digest"))
}

/// Write the digests of one export into `dir` (created).
pub fn write(dir: &Path, digests: &[&RankDigest]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| ProfileError::Io {
        what: "creating the digest folder",
        path: dir.to_path_buf(),
        source: e,
    })?;
    let key = |t: &mut Table, rows: &[(&RankDigest, usize)]| {
        t.str(
            "file",
            rows.iter()
                .map(|(d, _)| Some(d.identity.file.clone()))
                .collect(),
        );
        t.int(
            "pid",
            rows.iter().map(|(d, _)| Some(d.identity.pid)).collect(),
        );
        t.int(
            "device",
            rows.iter().map(|(d, _)| Some(d.identity.device)).collect(),
        );
    };
    // ranks
    let rows: Vec<(&RankDigest, usize)> = digests.iter().map(|d| (*d, 0)).collect();
    let mut t = Table::new();
    key(&mut t, &rows);
    let id = |f: fn(&RankIdentity) -> Option<i64>| digests.iter().map(|d| f(&d.identity)).collect();
    t.str(
        "hostname",
        digests
            .iter()
            .map(|d| d.identity.hostname.clone())
            .collect(),
    );
    t.str(
        "gpu",
        digests.iter().map(|d| d.identity.gpu.clone()).collect(),
    );
    t.int("env_rank", id(|i| i.env_rank.map(i64::from)));
    t.int("local_rank", id(|i| i.local_rank.map(i64::from)));
    t.int("world_size", id(|i| i.world_size.map(i64::from)));
    t.int("utc_epoch_ns", id(|i| i.utc_epoch_ns));
    t.int(
        "kernels",
        digests.iter().map(|d| Some(d.kernels as i64)).collect(),
    );
    t.int(
        "kernel_sum_ns",
        digests.iter().map(|d| Some(d.kernel_sum_ns)).collect(),
    );
    for (w, _) in WINDOWS {
        let get = |f: fn(&WindowFigures) -> i64| -> Vec<Option<i64>> {
            digests.iter().map(|d| d.window(w).map(f)).collect()
        };
        t.int(&format!("{w}_start_ns"), get(|x| x.window.start_ns));
        t.int(&format!("{w}_end_ns"), get(|x| x.window.end_ns));
        t.int(&format!("{w}_busy_ns"), get(|x| x.busy_ns));
        t.int(&format!("{w}_compute_ns"), get(|x| x.compute_ns));
        t.int(
            &format!("{w}_communication_ns"),
            get(|x| x.communication_ns),
        );
        t.int(&format!("{w}_overlap_ns"), get(|x| x.overlap_ns));
        t.int(
            &format!("{w}_exposed_communication_ns"),
            get(|x| x.exposed_communication_ns),
        );
    }
    // The rank's step ledger and its findings, as JSON text (DuckDB and Polars parse JSON columns).
    t.str(
        "ledger_json",
        digests
            .iter()
            .map(|d| {
                d.ledger
                    .as_ref()
                    .and_then(|l| serde_json::to_string(l).ok())
            })
            .collect(),
    );
    write_table(&dir.join("ranks.parquet"), &t)?;
    // steps
    let rows: Vec<(&RankDigest, usize)> = digests
        .iter()
        .flat_map(|d| (0..d.steps.len()).map(move |i| (*d, i)))
        .collect();
    let s = |f: fn(&StepRow) -> i64| -> Vec<Option<i64>> {
        rows.iter().map(|(d, i)| Some(f(&d.steps[*i]))).collect()
    };
    let mut t = Table::new();
    key(&mut t, &rows);
    t.int("index", s(|x| x.index as i64));
    t.str(
        "name",
        rows.iter()
            .map(|(d, i)| Some(d.steps[*i].name.clone()))
            .collect(),
    );
    t.int("cpu_start_ns", s(|x| x.cpu_start_ns));
    t.int("cpu_end_ns", s(|x| x.cpu_end_ns));
    t.int("gpu_union_ns", s(|x| x.gpu_union_ns));
    t.int("compute_ns", s(|x| x.compute_ns));
    t.int("communication_ns", s(|x| x.communication_ns));
    t.int(
        "exposed_communication_ns",
        s(|x| x.exposed_communication_ns),
    );
    t.int("kernels", s(|x| x.kernels as i64));
    write_table(&dir.join("steps.parquet"), &t)?;
    // collectives
    let rows: Vec<(&RankDigest, usize)> = digests
        .iter()
        .flat_map(|d| (0..d.collectives.len()).map(move |i| (*d, i)))
        .collect();
    let c = |f: fn(&CollectiveRow) -> Option<i64>| -> Vec<Option<i64>> {
        rows.iter().map(|(d, i)| f(&d.collectives[*i])).collect()
    };
    let mut t = Table::new();
    key(&mut t, &rows);
    t.str(
        "kind",
        rows.iter()
            .map(|(d, i)| {
                serde_json::to_value(d.collectives[*i].kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
            })
            .collect(),
    );
    t.int("seq", c(|x| Some(x.seq as i64)));
    t.int("start_ns", c(|x| Some(x.start_ns)));
    t.int("end_ns", c(|x| Some(x.end_ns)));
    t.int("stream", c(|x| Some(x.stream)));
    t.int("compute_overlap_ns", c(|x| Some(x.compute_overlap_ns)));
    t.int("bytes", c(|x| x.bytes));
    t.int("peer", c(|x| x.peer.map(i64::from)));
    t.int("kernel", c(|x| x.kernel.map(i64::from)));
    write_table(&dir.join("collectives.parquet"), &t)?;
    // classes
    let rows: Vec<(&RankDigest, usize)> = digests
        .iter()
        .flat_map(|d| (0..d.classes.len()).map(move |i| (*d, i)))
        .collect();
    let mut t = Table::new();
    key(&mut t, &rows);
    t.str(
        "class",
        rows.iter()
            .map(|(d, i)| Some(d.classes[*i].class.clone()))
            .collect(),
    );
    t.int(
        "kernels",
        rows.iter()
            .map(|(d, i)| Some(d.classes[*i].kernels as i64))
            .collect(),
    );
    t.int(
        "total_ns",
        rows.iter()
            .map(|(d, i)| Some(d.classes[*i].total_ns))
            .collect(),
    );
    write_table(&dir.join("classes.parquet"), &t)?;
    Ok(())
}

type Key = (String, i64, i64);

fn key_of(r: &Row) -> Key {
    (
        text(r, "file").unwrap_or_default(),
        int(r, "pid").unwrap_or(0),
        int(r, "device").unwrap_or(0),
    )
}

/// Read the digests of one `<name>.digest` folder.
pub fn read(dir: &Path) -> Result<Vec<RankDigest>> {
    let mut by_key: BTreeMap<Key, RankDigest> = BTreeMap::new();
    let mut order = Vec::new();
    for r in read_table(&dir.join("ranks.parquet"))? {
        let k = key_of(&r);
        let u32_of = |n: &str| int(&r, n).and_then(|v| u32::try_from(v).ok());
        let mut windows = Vec::new();
        for (w, kind) in WINDOWS {
            let g = |c: &str| int(&r, &format!("{w}_{c}"));
            if let (Some(s), Some(e)) = (g("start_ns"), g("end_ns")) {
                windows.push(WindowFigures {
                    window: Window::new(kind, s, e),
                    busy_ns: g("busy_ns").unwrap_or(0),
                    compute_ns: g("compute_ns").unwrap_or(0),
                    communication_ns: g("communication_ns").unwrap_or(0),
                    overlap_ns: g("overlap_ns").unwrap_or(0),
                    exposed_communication_ns: g("exposed_communication_ns").unwrap_or(0),
                });
            }
        }
        order.push(k.clone());
        by_key.insert(
            k.clone(),
            RankDigest {
                identity: RankIdentity {
                    rank: 0,
                    rank_source: "order".into(),
                    env_rank: u32_of("env_rank"),
                    local_rank: u32_of("local_rank"),
                    world_size: u32_of("world_size"),
                    file: k.0.clone(),
                    pid: k.1,
                    device: k.2,
                    hostname: text(&r, "hostname"),
                    gpu: text(&r, "gpu"),
                    utc_epoch_ns: int(&r, "utc_epoch_ns"),
                },
                kernels: int(&r, "kernels").unwrap_or(0) as u64,
                kernel_sum_ns: int(&r, "kernel_sum_ns").unwrap_or(0),
                windows,
                steps: Vec::new(),
                collectives: Vec::new(),
                classes: Vec::new(),
                // Absent in digests written before the ledger; unreadable JSON reads as absent too.
                ledger: text(&r, "ledger_json").and_then(|j| serde_json::from_str(&j).ok()),
            },
        );
    }
    for r in read_table(&dir.join("steps.parquet"))? {
        if let Some(d) = by_key.get_mut(&key_of(&r)) {
            let g = |n: &str| int(&r, n).unwrap_or(0);
            d.steps.push(StepRow {
                index: g("index") as u32,
                name: text(&r, "name").unwrap_or_default(),
                cpu_start_ns: g("cpu_start_ns"),
                cpu_end_ns: g("cpu_end_ns"),
                gpu_union_ns: g("gpu_union_ns"),
                compute_ns: g("compute_ns"),
                communication_ns: g("communication_ns"),
                exposed_communication_ns: g("exposed_communication_ns"),
                kernels: g("kernels") as u32,
            });
        }
    }
    for r in read_table(&dir.join("collectives.parquet"))? {
        if let Some(d) = by_key.get_mut(&key_of(&r)) {
            let g = |n: &str| int(&r, n).unwrap_or(0);
            let kind: Collective = text(&r, "kind")
                .and_then(|k| serde_json::from_value(serde_json::Value::String(k)).ok())
                .unwrap_or(Collective::Other);
            d.collectives.push(CollectiveRow {
                kind,
                seq: g("seq") as u32,
                start_ns: g("start_ns"),
                end_ns: g("end_ns"),
                stream: g("stream"),
                compute_overlap_ns: g("compute_overlap_ns"),
                bytes: int(&r, "bytes"),
                // Absent in digests written before peers were recorded.
                peer: int(&r, "peer").and_then(|p| u32::try_from(p).ok()),
                // Absent in digests written before the ledger.
                kernel: int(&r, "kernel").and_then(|k| u32::try_from(k).ok()),
            });
        }
    }
    for r in read_table(&dir.join("classes.parquet"))? {
        if let Some(d) = by_key.get_mut(&key_of(&r)) {
            d.classes.push(ClassRow {
                class: text(&r, "class").unwrap_or_default(),
                kernels: int(&r, "kernels").unwrap_or(0) as u64,
                total_ns: int(&r, "total_ns").unwrap_or(0),
            });
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|k| by_key.remove(&k))
        .collect())
}

/// The `.digest` folders under `dir` (or `dir` itself when it is one), sorted.
pub fn digest_folders(dir: &Path) -> Vec<PathBuf> {
    if dir.join("ranks.parquet").is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir() && p.join("ranks.parquet").is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
