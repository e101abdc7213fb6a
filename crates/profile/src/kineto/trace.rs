//! Loading a PyTorch profiler (Kineto) trace: the Chrome-trace JSON that
//! `torch.profiler` exports, plain or `.xz`-compressed.
//!
//! Times are microseconds with three decimals in the file; they are read from
//! the JSON text itself into integer nanoseconds (an f64 of a steady-clock µs
//! timestamp would round to the nearest ~1 ns and drift across a trace).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::input_file::{CappedBuffer, InputKind, InputLimits};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Not a regular file, missing, or over the size cap.
    #[error(transparent)]
    Input(#[from] crate::input_file::InputFileError),
    #[error("{path} is gzip-compressed; decompress it first (`gunzip -k {path}`)")]
    Gzip { path: PathBuf },
    #[error("cannot decompress {path}: {message}")]
    Decompress { path: PathBuf, message: String },
    #[error("{path} is not a Chrome/Kineto trace JSON: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// What a GPU operation is, in HTA's three kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpClass {
    /// A kernel that is not communication.
    Compute,
    /// An NCCL kernel (name contains `nccl`, any case).
    Communication,
    /// A memcpy or memset.
    Memory,
}

/// A kernel, memcpy or memset on a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuOp {
    pub name: String,
    pub class: OpClass,
    pub device: i64,
    pub stream: i64,
    pub start_ns: i64,
    pub dur_ns: i64,
    pub correlation: Option<i64>,
    pub external_id: Option<i64>,
    pub bytes: Option<f64>,
}

impl GpuOp {
    pub fn end_ns(&self) -> i64 {
        self.start_ns + self.dur_ns
    }
}

/// A CUDA runtime or driver call on the CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeCall {
    pub name: String,
    pub pid: i64,
    pub tid: i64,
    pub start_ns: i64,
    pub dur_ns: i64,
    pub correlation: Option<i64>,
}

impl RuntimeCall {
    pub fn end_ns(&self) -> i64 {
        self.start_ns + self.dur_ns
    }
}

/// A PyTorch operator (or a user annotation) on the CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuOp {
    pub name: String,
    pub pid: i64,
    pub tid: i64,
    pub start_ns: i64,
    pub dur_ns: i64,
    pub external_id: Option<i64>,
    pub flops: Option<f64>,
}

/// A torch.distributed (c10d) call as its `record_param_comms` CPU op records it: what PyTorch says it asked
/// NCCL to move. `In/Out msg nelems` are whole tensors (all-gather: the input is one rank's part and the output
/// the gathered whole; reduce-scatter the reverse), so [`CommOp::bytes`] (the larger side) is the nccl-tests
/// message size `S` of every collective.
#[derive(Debug, Clone, PartialEq)]
pub struct CommOp {
    pub pid: i64,
    pub tid: i64,
    pub start_ns: i64,
    pub dur_ns: i64,
    /// `Collective name` (`allreduce`, `_allgather_base`, `send`, ...).
    pub collective: String,
    pub in_nelems: Option<i64>,
    pub out_nelems: Option<i64>,
    /// `dtype` (`Float`, `BFloat16`, ...).
    pub dtype: Option<String>,
    pub group_size: Option<i64>,
    /// `Rank`: the caller's rank in the group for collectives, the peer's for `send`/`recv`.
    pub rank_arg: Option<i64>,
    /// `Process Group Ranks`: group rank → global rank.
    pub group_ranks: Vec<i64>,
}

impl CommOp {
    /// Bytes of one element of `dtype`, when the name is known.
    pub fn element_bytes(&self) -> Option<i64> {
        Some(match self.dtype.as_deref()? {
            "Double" | "Long" | "ComplexFloat" | "UInt64" => 8,
            "Float" | "Int" | "ComplexHalf" | "UInt32" => 4,
            "Half" | "BFloat16" | "Short" | "UInt16" => 2,
            "Byte" | "Char" | "Bool" | "Float8_e4m3fn" | "Float8_e5m2" | "Float8_e4m3fnuz"
            | "Float8_e5m2fnuz" => 1,
            "ComplexDouble" => 16,
            _ => return None,
        })
    }

    /// The message size `S` in bytes (the larger of input and output), when recorded.
    pub fn bytes(&self) -> Option<i64> {
        let n = self.in_nelems.max(self.out_nelems)?;
        Some(n * self.element_bytes()?)
    }

    /// Point-to-point (`send`, `recv`): `rank_arg` is then the peer.
    pub fn is_p2p(&self) -> bool {
        matches!(self.collective.as_str(), "send" | "recv" | "recv_anysource")
    }

    /// The peer's global rank of a send or recv (group rank mapped through the group's ranks).
    pub fn peer(&self) -> Option<i64> {
        if !self.is_p2p() {
            return None;
        }
        let r = self.rank_arg?;
        Some(
            usize::try_from(r)
                .ok()
                .and_then(|i| self.group_ranks.get(i).copied())
                .unwrap_or(r),
        )
    }
}

/// A loaded trace (one rank).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub path: PathBuf,
    /// `distributedInfo.rank`, when the trace records it.
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    /// `baseTimeNanoseconds`: the wall-clock time `ts` counts from (cross-rank clock alignment).
    pub base_time_ns: Option<i64>,
    /// Device id → name (`deviceProperties`).
    pub device_names: BTreeMap<i64, String>,
    pub gpu_ops: Vec<GpuOp>,
    pub runtime: Vec<RuntimeCall>,
    /// `cpu_op` events.
    pub cpu_ops: Vec<CpuOp>,
    /// torch.distributed calls (`record_param_comms`), in time order.
    pub comms: Vec<CommOp>,
    /// `ProfilerStep#N` annotations, in time order.
    pub steps: Vec<CpuOp>,
    /// Other `user_annotation` events (record_function ranges such as
    /// `enumerate(DataLoader)#...__next__` or a script's own `step_N`).
    pub annotations: Vec<CpuOp>,
    /// `python_function` events (traces recorded `with_stack=True`): one per
    /// Python call, nested by time on their thread.
    pub python_frames: Vec<CpuOp>,
    /// Thread names from the `thread_name` metadata events, by (pid, tid).
    pub thread_names: BTreeMap<(i64, i64), String>,
    /// Peak (allocated, reserved) bytes per CUDA device from `[memory]` events.
    pub memory_peaks: BTreeMap<i64, (i64, i64)>,
    /// Events read, by category (for the summary).
    pub events: u64,
}

/// A number that may also arrive as a string, or be something else entirely
/// (then it reads as absent rather than failing the whole trace).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Lenient(Option<f64>);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Lenient;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Lenient, E> {
                Ok(Lenient(v.trim().parse().ok()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Lenient, D2::Error> {
                Lenient::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Lenient, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Lenient, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl Lenient {
    fn int(self) -> Option<i64> {
        self.0.filter(|v| v.fract() == 0.0).map(|v| v as i64)
    }
}

#[derive(Deserialize, Default)]
struct RawArgs {
    #[serde(rename = "External id", default)]
    external_id: Lenient,
    #[serde(default)]
    correlation: Lenient,
    #[serde(default)]
    device: Lenient,
    #[serde(default)]
    stream: Lenient,
    #[serde(default)]
    bytes: Lenient,
    #[serde(default)]
    flops: Lenient,
    #[serde(rename = "Total Allocated", default)]
    total_allocated: Lenient,
    #[serde(rename = "Total Reserved", default)]
    total_reserved: Lenient,
    #[serde(rename = "Device Type", default)]
    device_type: Lenient,
    #[serde(rename = "Device Id", default)]
    device_id: Lenient,
    #[serde(rename = "Collective name", default)]
    collective_name: Option<serde_json::Value>,
    #[serde(rename = "In msg nelems", default)]
    in_nelems: Lenient,
    #[serde(rename = "Out msg nelems", default)]
    out_nelems: Lenient,
    #[serde(default)]
    dtype: Option<serde_json::Value>,
    #[serde(rename = "Group size", default)]
    group_size: Lenient,
    #[serde(rename = "Rank", default)]
    rank: Lenient,
    #[serde(rename = "Process Group Ranks", default)]
    group_ranks: Option<serde_json::Value>,
    /// `thread_name` metadata: the thread's name.
    #[serde(default)]
    name: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default, borrow)]
    ph: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cat: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    pid: Lenient,
    #[serde(default)]
    tid: Lenient,
    #[serde(default, borrow)]
    ts: Option<&'a RawValue>,
    #[serde(default, borrow)]
    dur: Option<&'a RawValue>,
    #[serde(default)]
    args: Option<RawArgs>,
}

#[derive(Deserialize)]
struct RawDevice {
    #[serde(default)]
    id: Lenient,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct RawDistributed {
    #[serde(default)]
    rank: Lenient,
    #[serde(default)]
    world_size: Lenient,
}

#[derive(Deserialize)]
struct RawTrace<'a> {
    #[serde(rename = "traceEvents", borrow)]
    trace_events: Vec<RawEvent<'a>>,
    #[serde(rename = "deviceProperties", default)]
    device_properties: Vec<RawDevice>,
    #[serde(rename = "distributedInfo", default)]
    distributed_info: Option<RawDistributed>,
    /// Wall-clock ns the trace's `ts` count from (read as an exact integer).
    #[serde(rename = "baseTimeNanoseconds", default)]
    base_time_ns: Option<serde_json::Value>,
}

/// Microseconds as JSON text (`4461650758935.304`) → integer ns, exactly.
pub fn us_text_to_ns(text: &str) -> Option<i64> {
    let t = text.trim().trim_matches('"');
    if t.contains(['e', 'E']) {
        let v: f64 = t.parse().ok()?;
        return Some((v * 1000.0).round() as i64);
    }
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let int: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    if !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Three decimals are ns; further digits round half up.
    let mut digits: Vec<u8> = frac.bytes().map(|b| b - b'0').collect();
    let round_up = digits.len() > 3 && digits[3] >= 5;
    digits.resize(3, 0);
    let ns_frac = digits[0] as i64 * 100 + digits[1] as i64 * 10 + digits[2] as i64;
    let ns = int
        .checked_mul(1000)?
        .checked_add(ns_frac + round_up as i64)?;
    Some(if neg { -ns } else { ns })
}

/// Decode a file's bytes (plain, or xz by magic number).
/// Both the file and its decompressed text are capped at the Kineto limit.
fn read_text(path: &Path, limits: &InputLimits) -> Result<String, TraceError> {
    let kind = InputKind::KinetoTrace;
    // A file that does not start like JSON (or xz) is refused before it is read whole.
    let bytes =
        crate::input_file::read_capped_sniffed(path, kind, limits, crate::input_file::Sniff::Json)?;
    let bytes = if bytes.starts_with(&[0xFD, b'7', b'z', b'X', b'Z', 0x00]) {
        let mut out = CappedBuffer::json(limits.for_kind(kind));
        if let Err(e) = lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out) {
            if out.exceeded {
                return Err(out.error(path, kind).into());
            }
            if let Some(wrong) = out.wrong_start_error(path) {
                return Err(wrong.into());
            }
            return Err(TraceError::Decompress {
                path: path.to_path_buf(),
                message: e.to_string(),
            });
        }
        out.buf
    } else if bytes.starts_with(&[0x1F, 0x8B]) {
        return Err(TraceError::Gzip {
            path: path.to_path_buf(),
        });
    } else {
        bytes
    };
    String::from_utf8(bytes).map_err(|e| TraceError::Invalid {
        path: path.to_path_buf(),
        message: format!("not UTF-8 text ({e})"),
    })
}

/// Load and index one trace file.
pub fn load(path: &Path, limits: &InputLimits) -> Result<Trace, TraceError> {
    let text = read_text(path, limits)?;
    parse(path, &text)
}

/// Index a trace already in memory.
pub fn parse(path: &Path, text: &str) -> Result<Trace, TraceError> {
    let raw: RawTrace<'_> = serde_json::from_str(text).map_err(|e| TraceError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut t = Trace {
        path: path.to_path_buf(),
        rank: raw.distributed_info.as_ref().and_then(|d| d.rank.int()),
        world_size: raw
            .distributed_info
            .as_ref()
            .and_then(|d| d.world_size.int()),
        base_time_ns: raw.base_time_ns.as_ref().and_then(|v| {
            v.as_i64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        }),
        ..Trace::default()
    };
    for d in raw.device_properties {
        if let (Some(id), Some(name)) = (d.id.int(), d.name) {
            t.device_names.insert(id, name);
        }
    }
    let mut peaks: HashMap<i64, (i64, i64)> = HashMap::new();
    for e in raw.trace_events {
        t.events += 1;
        let ph = e.ph.as_deref().unwrap_or("");
        let cat = e.cat.as_deref().unwrap_or("");
        let name = e.name.as_deref().unwrap_or("");
        let args = e.args.unwrap_or_default();
        if ph == "i" && name == "[memory]" {
            // Device Type 1 is CUDA (c10::DeviceType); 0 is the CPU.
            if args.device_type.int() == Some(1)
                && let Some(dev) = args.device_id.int()
            {
                let p = peaks.entry(dev).or_insert((0, 0));
                p.0 = p.0.max(args.total_allocated.int().unwrap_or(0));
                p.1 = p.1.max(args.total_reserved.int().unwrap_or(0));
            }
            continue;
        }
        if ph == "M" && name == "thread_name" {
            if let (Some(pid), Some(tid), Some(serde_json::Value::String(n))) =
                (e.pid.int(), e.tid.int(), args.name)
            {
                t.thread_names.insert((pid, tid), n);
            }
            continue;
        }
        if ph != "X" {
            continue;
        }
        let (Some(start_ns), Some(dur_ns)) = (
            e.ts.and_then(|v| us_text_to_ns(v.get())),
            e.dur.and_then(|v| us_text_to_ns(v.get())),
        ) else {
            continue;
        };
        let pid = e.pid.int().unwrap_or(-1);
        let tid = e.tid.int().unwrap_or(-1);
        match cat {
            "kernel" | "gpu_memcpy" | "gpu_memset" => {
                let class = if cat != "kernel" {
                    OpClass::Memory
                } else if name.to_ascii_lowercase().contains("nccl") {
                    OpClass::Communication
                } else {
                    OpClass::Compute
                };
                t.gpu_ops.push(GpuOp {
                    name: name.to_string(),
                    class,
                    device: args.device.int().unwrap_or(pid),
                    stream: args.stream.int().unwrap_or(tid),
                    start_ns,
                    dur_ns,
                    correlation: args.correlation.int(),
                    external_id: args.external_id.int(),
                    bytes: args.bytes.0,
                });
            }
            "cuda_runtime" | "cuda_driver" => t.runtime.push(RuntimeCall {
                name: name.to_string(),
                pid,
                tid,
                start_ns,
                dur_ns,
                correlation: args.correlation.int(),
            }),
            "cpu_op" | "user_annotation" | "python_function" => {
                if cat == "cpu_op" && name == "record_param_comms" {
                    t.comms.push(comm_op(&args, pid, tid, start_ns, dur_ns));
                }
                let op = CpuOp {
                    name: name.to_string(),
                    pid,
                    tid,
                    start_ns,
                    dur_ns,
                    external_id: args.external_id.int(),
                    flops: args.flops.0,
                };
                if cat == "user_annotation" && name.starts_with("ProfilerStep#") {
                    t.steps.push(op);
                } else if cat == "cpu_op" {
                    t.cpu_ops.push(op);
                } else if cat == "user_annotation" {
                    t.annotations.push(op);
                } else {
                    t.python_frames.push(op);
                }
            }
            _ => {}
        }
    }
    t.memory_peaks = peaks.into_iter().collect();
    t.gpu_ops.sort_by_key(|o| (o.start_ns, o.end_ns()));
    t.steps.sort_by_key(|s| s.start_ns);
    t.comms.sort_by_key(|c| (c.start_ns, c.dur_ns));
    t.annotations.sort_by_key(|s| s.start_ns);
    Ok(t)
}

fn comm_op(args: &RawArgs, pid: i64, tid: i64, start_ns: i64, dur_ns: i64) -> CommOp {
    let text = |v: &Option<serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    // `Process Group Ranks` is a string ("[0, 1]") in current PyTorch; accept an array too.
    let group_ranks = match &args.group_ranks {
        Some(serde_json::Value::String(s)) => s
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter_map(|x| x.trim().parse().ok())
            .collect(),
        Some(serde_json::Value::Array(a)) => a.iter().filter_map(|x| x.as_i64()).collect(),
        _ => Vec::new(),
    };
    CommOp {
        pid,
        tid,
        start_ns,
        dur_ns,
        collective: text(&args.collective_name).unwrap_or_default(),
        in_nelems: args.in_nelems.int(),
        out_nelems: args.out_nelems.int(),
        dtype: text(&args.dtype),
        group_size: args.group_size.int(),
        rank_arg: args.rank.int(),
        group_ranks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_param_comms_give_sizes_and_global_peers() {
        // As PyTorch records them: a send to group rank 1 of the group [4, 5], and an all-gather of 3 × bf16.
        let text = r#"{"traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": 10.0, "dur": 5.0,
             "args": {"Collective name": "send", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float",
                      "Group size": 2, "Rank": 1, "Process Group Ranks": "[4, 5]"}},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": 20.0, "dur": 5.0,
             "args": {"Collective name": "_allgather_base", "In msg nelems": 3, "Out msg nelems": 6,
                      "dtype": "BFloat16", "Group size": 2, "Rank": 0, "Process Group Ranks": [4, 5]}},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": 30.0, "dur": 5.0,
             "args": {"Collective name": "allreduce", "dtype": {"odd": 1}, "In msg nelems": "x"}}
        ]}"#;
        let t = parse(Path::new("t.json"), text).unwrap();
        assert_eq!(t.comms.len(), 3);
        let send = &t.comms[0];
        assert_eq!(
            (send.bytes(), send.peer(), send.is_p2p()),
            (Some(4096), Some(5), true)
        );
        let ag = &t.comms[1];
        assert_eq!(
            (ag.bytes(), ag.peer(), ag.group_ranks.clone()),
            (Some(12), None, vec![4, 5])
        );
        // Odd values read as absent, not as a failed trace.
        assert_eq!((t.comms[2].bytes(), t.comms[2].dtype.clone()), (None, None));
    }

    #[test]
    fn microsecond_text_becomes_exact_nanoseconds() {
        assert_eq!(
            us_text_to_ns("4461650758935.304"),
            Some(4_461_650_758_935_304)
        );
        assert_eq!(us_text_to_ns("219.38"), Some(219_380));
        assert_eq!(us_text_to_ns("1"), Some(1000));
        assert_eq!(us_text_to_ns("0.0005"), Some(1));
        assert_eq!(us_text_to_ns("0.0004"), Some(0));
        assert_eq!(us_text_to_ns("-2.5"), Some(-2500));
        assert_eq!(us_text_to_ns("1.5e3"), Some(1_500_000));
        assert_eq!(us_text_to_ns("\"12.001\""), Some(12_001));
        assert_eq!(us_text_to_ns("abc"), None);
    }

    #[test]
    fn odd_values_do_not_fail_the_trace() {
        let text = r#"{"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2,
             "args": {"device": "1", "stream": 7, "correlation": 5, "External id": [1], "bytes": null}},
            {"ph": "X", "cat": "Trace", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1, "dur": 1, "name": "x"},
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python3"}}
        ], "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2}}"#;
        let t = parse(Path::new("t.json"), text).unwrap();
        assert_eq!(t.rank, Some(1));
        assert_eq!(t.world_size, Some(2));
        assert_eq!(t.gpu_ops.len(), 1);
        let k = &t.gpu_ops[0];
        assert_eq!(k.class, OpClass::Communication);
        assert_eq!(
            (k.device, k.stream, k.start_ns, k.dur_ns),
            (1, 7, 10_500, 2_000)
        );
        assert_eq!(k.external_id, None);
        assert_eq!(t.events, 3);
    }

    #[test]
    fn gzip_and_garbage_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let gz = dir.path().join("t.json.gz");
        std::fs::write(&gz, [0x1F, 0x8B, 8, 0]).unwrap();
        assert!(matches!(
            load(&gz, &InputLimits::default()),
            Err(TraceError::Gzip { .. })
        ));
        let bad = dir.path().join("t.json");
        std::fs::write(&bad, "{\"nope\": 1}").unwrap();
        let err = load(&bad, &InputLimits::default()).unwrap_err();
        assert!(
            err.to_string().contains("not a Chrome/Kineto trace JSON"),
            "{err}"
        );
        assert!(matches!(
            load(&dir.path().join("missing.json"), &InputLimits::default()),
            Err(TraceError::Input(
                crate::input_file::InputFileError::NotFound { .. }
            ))
        ));
    }
}
