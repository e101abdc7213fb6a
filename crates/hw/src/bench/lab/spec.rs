//! What a kernel-lab call asks for (candidates, reference, arguments, launch,
//! sizes), and its resolution for one point of the size sweep: every shape,
//! scalar, grid and work count evaluated, every rule checked, before any GPU
//! work starts.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::expr::{self, Vars};
use super::tolerance::{Dtype, Tolerance};

/// An integer, or an expression of the sizes (`"cdiv(N,256)"`, `"2*M*N*K"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expr {
    Int(i64),
    Float(f64),
    Text(String),
}

/// A number or a string, with no description of its own (the tool's
/// description explains expressions once; repeating it per field would cost
/// the tool-listing budget).
impl JsonSchema for Expr {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Expr".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"anyOf": [{"type": "number"}, {"type": "string"}]})
    }
}

impl Expr {
    pub fn eval(&self, vars: &Vars) -> Result<i64, String> {
        match self {
            Expr::Int(n) => Ok(*n),
            Expr::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => Ok(*f as i64),
            Expr::Float(f) => Err(format!("{f} is not an integer")),
            Expr::Text(t) => expr::eval(t, vars),
        }
    }

    /// The value of a scalar of type `dtype`: floats take numbers as given.
    pub fn scalar(&self, dtype: Dtype, vars: &Vars) -> Result<f64, String> {
        match (self, dtype.is_float()) {
            (Expr::Float(f), true) => Ok(*f),
            (Expr::Text(t), true) => match t.trim().parse::<f64>() {
                Ok(f) => Ok(f),
                Err(_) => expr::eval(t, vars).map(|v| v as f64),
            },
            _ => self.eval(vars).map(|v| v as f64),
        }
    }
}

/// Grid and block (1 to 3 dimensions each) and dynamic shared memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// Blocks, 1-3 dims.
    pub grid: Vec<Expr>,
    /// Threads, 1-3 dims.
    pub block: Vec<Expr>,
    /// Dynamic shared bytes.
    #[serde(default)]
    pub shared_bytes: Option<Expr>,
}

/// A CUDA C++ kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Kernel {
    /// Label (default entry).
    #[serde(default)]
    pub name: Option<String>,
    /// CUDA C++ (NVRTC, no host code).
    #[schemars(length(max = 200000))]
    pub source: String,
    /// __global__ function name.
    pub entry: String,
    /// Default: top-level launch.
    #[serde(default)]
    pub launch: Option<Launch>,
    /// NVRTC options: -D.., -maxrregcount=, --use_fast_math
    #[serde(default)]
    pub options: Vec<String>,
}

impl Kernel {
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.entry)
    }
}

/// A built-in reference. Buffers bind in argument order: the `in` buffers,
/// then the first `out` buffer; all f32 except copy (any) and gemm (f32/bf16/f16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinOp {
    Copy,
    Transpose,
    ReduceSum,
    Softmax,
    Layernorm,
    Gemm,
}

impl BuiltinOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BuiltinOp::Copy => "copy",
            BuiltinOp::Transpose => "transpose",
            BuiltinOp::ReduceSum => "reduce_sum",
            BuiltinOp::Softmax => "softmax",
            BuiltinOp::Layernorm => "layernorm",
            BuiltinOp::Gemm => "gemm",
        }
    }
}

/// What counts as correct: a built-in op or one of the kernels.
#[derive(Debug, Clone, PartialEq)]
pub enum Reference {
    Op(BuiltinOp),
    Kernel(Kernel),
}

impl Reference {
    pub fn label(&self) -> String {
        match self {
            Reference::Op(op) => format!("ref_{}", op.as_str()),
            Reference::Kernel(k) => k.label().to_string(),
        }
    }
}

impl BuiltinOp {
    pub const ALL: [BuiltinOp; 6] = [
        BuiltinOp::Copy,
        BuiltinOp::Transpose,
        BuiltinOp::ReduceSum,
        BuiltinOp::Softmax,
        BuiltinOp::Layernorm,
        BuiltinOp::Gemm,
    ];

    pub fn parse(s: &str) -> Option<BuiltinOp> {
        BuiltinOp::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    In,
    Out,
    Inout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    #[default]
    Uniform,
    Zeros,
    Ones,
    Arange,
}

/// A buffer (`shape`) or a scalar (`value`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arg {
    pub name: String,
    pub dtype: Dtype,
    /// Buffer dims, row-major.
    #[serde(default)]
    pub shape: Option<Vec<Expr>>,
    /// Default in; out is poisoned, inout restored, before each run.
    #[serde(default)]
    pub role: Option<Role>,
    /// Default uniform.
    #[serde(default)]
    pub init: Option<Init>,
    /// Uniform [lo, hi) (default [-1,1), ints [0,100)).
    #[serde(default)]
    pub range: Option<[f64; 2]>,
    /// Scalar value.
    #[serde(default)]
    pub value: Option<Expr>,
}

/// Which measured roof the percentages use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoofChoice {
    Memory,
    Fp32,
    Tf32,
    Bf16,
    Fp16,
}

impl RoofChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            RoofChoice::Memory => "memory",
            RoofChoice::Fp32 => "fp32",
            RoofChoice::Tf32 => "tf32",
            RoofChoice::Bf16 => "bf16",
            RoofChoice::Fp16 => "fp16",
        }
    }
}

/// Everything one experiment needs (the worker receives exactly this).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabSpec {
    /// Results go to target kernel_<name> (default lab).
    #[serde(default)]
    pub name: Option<String>,
    /// All but the reference are candidates.
    pub kernels: Vec<Kernel>,
    /// Built-in op or a kernel's name.
    pub reference: String,
    /// Kernel parameters in order.
    pub args: Vec<Arg>,
    /// Default launch.
    #[serde(default)]
    pub launch: Option<Launch>,
    /// Size sweep: [{"N": 4096}, ...].
    #[serde(default)]
    pub sizes: Vec<BTreeMap<String, i64>>,
    /// Bytes per launch (default: all buffers, inout twice).
    #[serde(default)]
    pub bytes: Option<Expr>,
    /// FLOPs per launch (gemm: 2*M*N*K).
    #[serde(default)]
    pub flops: Option<Expr>,
    /// Default memory; with flops fp32 (gemm: its dtype).
    #[serde(default)]
    pub roof: Option<RoofChoice>,
    #[serde(default)]
    pub tolerance: Option<Tolerance>,
    /// Timing seconds per kernel (0.5).
    #[serde(default)]
    #[schemars(range(min = 0.05, max = 30))]
    pub time_budget_s: Option<f64>,
    /// Kill a kernel after this many seconds (30).
    #[serde(default)]
    #[schemars(range(min = 2, max = 600))]
    pub time_limit_s: Option<f64>,
    /// Compile only; no GPU needed.
    #[serde(default)]
    pub compile_only: bool,
    /// compile_only target (sm_90).
    #[serde(default)]
    pub arch: Option<String>,
    /// CUDA device (0).
    #[serde(default)]
    pub device: Option<u32>,
    /// true, or extra ncu section names.
    #[serde(default)]
    pub ncu: Option<NcuRequest>,
}

/// `ncu: true` (the default sections) or a list of extra section identifiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NcuRequest {
    On(bool),
    Sections(Vec<String>),
}

/// Sections profiled for `ncu: true`, on top of ncu's basic set (speed of
/// light, launch statistics, occupancy): memory traffic and warp stall reasons.
pub const NCU_DEFAULT_SECTIONS: &[&str] = &[
    "SpeedOfLight",
    "MemoryWorkloadAnalysis",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
];

impl NcuRequest {
    /// The sections to collect, or None when profiling is off (`false`).
    pub fn sections(&self) -> Option<Vec<String>> {
        match self {
            NcuRequest::On(false) => None,
            NcuRequest::Sections(v) if !v.is_empty() => Some(v.clone()),
            _ => Some(NCU_DEFAULT_SECTIONS.iter().map(|s| s.to_string()).collect()),
        }
    }
}

/// Resolved for one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolved {
    pub vars: Vars,
    pub args: Vec<ResolvedArg>,
    pub bytes: f64,
    pub flops: Option<f64>,
    pub roof: RoofChoice,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ResolvedArg {
    Buffer {
        name: String,
        dtype: Dtype,
        shape: Vec<u64>,
        role: Role,
        init: Init,
        range: (f64, f64),
    },
    Scalar {
        name: String,
        dtype: Dtype,
        value: f64,
    },
}

impl ResolvedArg {
    pub fn elements(&self) -> u64 {
        match self {
            ResolvedArg::Buffer { shape, .. } => shape.iter().product(),
            ResolvedArg::Scalar { .. } => 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedLaunch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

pub const MAX_CANDIDATES: usize = 8;
pub const MAX_SIZES: usize = 8;
pub const MAX_ARGS: usize = 32;
/// Device memory all buffers of one size may take together.
pub const MAX_TOTAL_BYTES: u64 = 32 << 30;

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Entries may name C++ functions and template instances (`kern<float, 4>`).
fn is_entry(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_:<>, *&".contains(c))
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
}

/// NVRTC options a kernel may add (no include paths, output files or host options).
pub fn option_allowed(o: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "-D",
        "-U",
        "-maxrregcount=",
        "--maxrregcount=",
        "--use_fast_math",
        "-use_fast_math",
        "--ftz=",
        "-ftz=",
        "--prec-div=",
        "-prec-div=",
        "--prec-sqrt=",
        "-prec-sqrt=",
        "--fmad=",
        "-fmad=",
        "--extra-device-vectorization",
        "-extra-device-vectorization",
        "--ptxas-options=",
        "-Xptxas=",
        "-std=",
        "--std=",
        "--restrict",
        "-restrict",
        "--dopt=",
    ];
    o.len() <= 200 && PREFIXES.iter().any(|p| o.starts_with(p)) && !o.contains('\0')
}

fn check_kernel(k: &Kernel, what: &str, has_default_launch: bool) -> Result<(), String> {
    if k.source.trim().is_empty() {
        return Err(format!("{what}: source is empty"));
    }
    if !is_entry(&k.entry) {
        return Err(format!(
            "{what}: entry `{}` is not a kernel name (letters, digits, _, ::, template arguments)",
            k.entry
        ));
    }
    if let Some(n) = &k.name
        && !is_ident(n)
    {
        return Err(format!(
            "{what}: name `{n}` must be an identifier (letters, digits, _)"
        ));
    }
    if k.launch.is_none() && !has_default_launch {
        return Err(format!(
            "{what}: no launch: give `launch` at the top level or in the kernel"
        ));
    }
    if let Some(bad) = k.options.iter().find(|o| !option_allowed(o)) {
        return Err(format!(
            "{what}: option `{bad}` is not allowed (allowed: -D, -U, -maxrregcount=, --use_fast_math, --ftz=, --prec-div=, --prec-sqrt=, --fmad=, --extra-device-vectorization, --ptxas-options=, -std=, --restrict)"
        ));
    }
    Ok(())
}

impl LabSpec {
    /// The store's target name for these results.
    pub fn target(&self) -> String {
        format!("kernel_{}", self.name.as_deref().unwrap_or("lab"))
    }

    /// The size points (one empty point when none are given).
    pub fn points(&self) -> Vec<Vars> {
        if self.sizes.is_empty() {
            vec![Vars::new()]
        } else {
            self.sizes.clone()
        }
    }

    /// The reference: a kernel of that name, else a built-in op.
    pub fn reference(&self) -> Result<Reference, String> {
        if let Some(k) = self.kernels.iter().find(|k| k.label() == self.reference) {
            return Ok(Reference::Kernel(k.clone()));
        }
        BuiltinOp::parse(&self.reference).map(Reference::Op).ok_or_else(|| {
            let names: Vec<&str> = self.kernels.iter().map(|k| k.label()).collect();
            format!(
                "reference `{}` is neither a built-in op (copy, transpose, reduce_sum, softmax, layernorm, gemm) nor a kernel name ({})",
                self.reference,
                names.join(", ")
            )
        })
    }

    /// The candidates: every kernel but the reference.
    pub fn candidates(&self) -> Vec<&Kernel> {
        self.kernels
            .iter()
            .filter(|k| k.label() != self.reference)
            .collect()
    }

    /// Check everything that needs no GPU; resolve every size point.
    pub fn validate(&self) -> Result<Vec<Resolved>, String> {
        if let Some(n) = &self.name
            && (!is_ident(n) || n.len() > 64)
        {
            return Err(format!(
                "name `{n}` must be an identifier of at most 64 characters"
            ));
        }
        if self.kernels.is_empty() || self.kernels.len() > MAX_CANDIDATES + 1 {
            return Err(format!(
                "kernels: give 1 to {} kernels, not {}",
                MAX_CANDIDATES + 1,
                self.kernels.len()
            ));
        }
        let reference = self.reference()?;
        if self.candidates().is_empty() {
            return Err("kernels: every kernel is the reference; add a candidate".into());
        }
        if self.args.is_empty() || self.args.len() > MAX_ARGS {
            return Err(format!("args: give 1 to {MAX_ARGS} arguments"));
        }
        if self.sizes.len() > MAX_SIZES {
            return Err(format!("sizes: at most {MAX_SIZES} points"));
        }
        let has_launch = self.launch.is_some();
        let mut labels = Vec::new();
        for (i, k) in self.kernels.iter().enumerate() {
            check_kernel(k, &format!("kernels[{i}]"), has_launch)?;
            labels.push(k.label().to_string());
        }
        if let Reference::Op(_) = reference {
            labels.push(reference.label());
        }
        let mut sorted = labels.clone();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != labels.len() {
            return Err(format!(
                "kernel labels must differ (set `name` on kernels that share an entry): {}",
                labels.join(", ")
            ));
        }
        let mut names: Vec<&str> = Vec::new();
        for a in &self.args {
            if !is_ident(&a.name) {
                return Err(format!("args: `{}` is not an identifier", a.name));
            }
            if names.contains(&a.name.as_str()) {
                return Err(format!("args: `{}` appears twice", a.name));
            }
            names.push(&a.name);
            match (&a.shape, &a.value) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "args.{}: give `shape` (buffer) or `value` (scalar), not both",
                        a.name
                    ));
                }
                (None, None) => {
                    return Err(format!(
                        "args.{}: give `shape` for a buffer or `value` for a scalar",
                        a.name
                    ));
                }
                (None, Some(_)) if a.role.is_some() || a.init.is_some() || a.range.is_some() => {
                    return Err(format!(
                        "args.{}: role, init and range are for buffers (this one has a value)",
                        a.name
                    ));
                }
                _ => {}
            }
        }
        if !self
            .args
            .iter()
            .any(|a| a.shape.is_some() && matches!(a.role, Some(Role::Out) | Some(Role::Inout)))
        {
            return Err(
                "args: no buffer has role out or inout, so there is nothing to check".into(),
            );
        }
        self.points()
            .into_iter()
            .map(|vars| {
                self.resolve(&vars).map_err(|e| {
                    if vars.is_empty() {
                        e
                    } else {
                        format!("at sizes {vars:?}: {e}")
                    }
                })
            })
            .collect()
    }

    fn resolve(&self, vars: &Vars) -> Result<Resolved, String> {
        let mut args = Vec::new();
        let mut total: u64 = 0;
        let mut moved: f64 = 0.0;
        for a in &self.args {
            if let Some(shape) = &a.shape {
                if shape.is_empty() || shape.len() > 8 {
                    return Err(format!("args.{}: shape needs 1 to 8 dimensions", a.name));
                }
                let mut dims = Vec::new();
                for (i, d) in shape.iter().enumerate() {
                    let v = d
                        .eval(vars)
                        .map_err(|e| format!("args.{}.shape[{i}]: {e}", a.name))?;
                    if v <= 0 {
                        return Err(format!(
                            "args.{}.shape[{i}] is {v}; dimensions must be positive",
                            a.name
                        ));
                    }
                    dims.push(v as u64);
                }
                let n = dims
                    .iter()
                    .try_fold(1u64, |acc, d| acc.checked_mul(*d))
                    .ok_or_else(|| format!("args.{}: too many elements", a.name))?;
                let bytes = n.saturating_mul(a.dtype.bytes() as u64);
                total = total.saturating_add(bytes);
                let role = a.role.unwrap_or_default();
                moved += bytes as f64 * if role == Role::Inout { 2.0 } else { 1.0 };
                let default_range = if a.dtype.is_float() {
                    (-1.0, 1.0)
                } else {
                    (0.0, 100.0)
                };
                let range = a.range.map(|[l, h]| (l, h)).unwrap_or(default_range);
                if !(range.0.is_finite() && range.1.is_finite() && range.0 < range.1) {
                    return Err(format!(
                        "args.{}.range must be [lo, hi) with lo < hi",
                        a.name
                    ));
                }
                args.push(ResolvedArg::Buffer {
                    name: a.name.clone(),
                    dtype: a.dtype,
                    shape: dims,
                    role,
                    init: a.init.unwrap_or_default(),
                    range,
                });
            } else if let Some(v) = &a.value {
                let value = v
                    .scalar(a.dtype, vars)
                    .map_err(|e| format!("args.{}.value: {e}", a.name))?;
                if matches!(a.dtype, Dtype::F16 | Dtype::Bf16) {
                    return Err(format!("args.{}: scalars are f32, f64 or integers", a.name));
                }
                args.push(ResolvedArg::Scalar {
                    name: a.name.clone(),
                    dtype: a.dtype,
                    value,
                });
            }
        }
        if total > MAX_TOTAL_BYTES {
            return Err(format!(
                "the buffers take {:.1} GiB, more than the {} GiB limit",
                total as f64 / (1u64 << 30) as f64,
                MAX_TOTAL_BYTES >> 30
            ));
        }
        let mut default_flops = None;
        let mut gemm_dtype = None;
        if let Ok(Reference::Op(op)) = self.reference() {
            let (m, n, k, d) = check_builtin(op, &args)?;
            if op == BuiltinOp::Gemm {
                default_flops = Some(2.0 * m as f64 * n as f64 * k as f64);
                gemm_dtype = Some(d);
            }
        }
        for k in &self.kernels {
            let l = k.launch.as_ref().or(self.launch.as_ref());
            if let Some(l) = l {
                resolve_launch(l, vars).map_err(|e| format!("{}: launch: {e}", k.label()))?;
            }
        }
        let bytes = match &self.bytes {
            Some(e) => e.eval(vars).map_err(|e| format!("bytes: {e}"))? as f64,
            None => moved,
        };
        let flops = match &self.flops {
            Some(e) => Some(e.eval(vars).map_err(|e| format!("flops: {e}"))? as f64),
            None => default_flops,
        };
        let roof = self.roof.unwrap_or(match (flops, gemm_dtype) {
            (Some(_), Some(Dtype::Bf16)) => RoofChoice::Bf16,
            (Some(_), Some(Dtype::F16)) => RoofChoice::Fp16,
            (Some(_), _) => RoofChoice::Fp32,
            (None, _) => RoofChoice::Memory,
        });
        if roof != RoofChoice::Memory && flops.is_none() {
            return Err(format!(
                "roof `{}` is compared with FLOP/s: give `flops` (e.g. \"2*M*N*K\"), or use roof memory",
                roof.as_str()
            ));
        }
        Ok(Resolved {
            vars: vars.clone(),
            args,
            bytes,
            flops,
            roof,
        })
    }
}

/// Evaluate a launch and check CUDA's limits.
pub fn resolve_launch(l: &Launch, vars: &Vars) -> Result<ResolvedLaunch, String> {
    let dims = |v: &[Expr], what: &str, max: [i64; 3]| -> Result<[u32; 3], String> {
        if v.is_empty() || v.len() > 3 {
            return Err(format!("{what} needs 1 to 3 dimensions"));
        }
        let mut out = [1u32; 3];
        for (i, e) in v.iter().enumerate() {
            let x = e.eval(vars).map_err(|e| format!("{what}[{i}]: {e}"))?;
            if x < 1 || x > max[i] {
                return Err(format!("{what}[{i}] is {x}; it must be 1..={}", max[i]));
            }
            out[i] = x as u32;
        }
        Ok(out)
    };
    let grid = dims(&l.grid, "grid", [i32::MAX as i64, 65535, 65535])?;
    let block = dims(&l.block, "block", [1024, 1024, 64])?;
    let threads = block.iter().map(|&b| b as u64).product::<u64>();
    if threads > 1024 {
        return Err(format!("block has {threads} threads; at most 1024"));
    }
    let shared = match &l.shared_bytes {
        Some(e) => e.eval(vars).map_err(|e| format!("shared_bytes: {e}"))?,
        None => 0,
    };
    if !(0..=(256 << 10)).contains(&shared) {
        return Err(format!("shared_bytes is {shared}; it must be 0..=262144"));
    }
    Ok(ResolvedLaunch {
        grid,
        block,
        shared_bytes: shared as u32,
    })
}

/// The buffers a built-in op binds: (in buffers, first out buffer).
pub fn builtin_binding(args: &[ResolvedArg]) -> (Vec<&ResolvedArg>, Option<&ResolvedArg>) {
    let ins = args
        .iter()
        .filter(|a| matches!(a, ResolvedArg::Buffer { role: Role::In, .. }))
        .collect();
    let out = args.iter().find(|a| {
        matches!(
            a,
            ResolvedArg::Buffer {
                role: Role::Out | Role::Inout,
                ..
            }
        )
    });
    (ins, out)
}

fn shape_dtype(a: &ResolvedArg) -> (&[u64], Dtype) {
    match a {
        ResolvedArg::Buffer { shape, dtype, .. } => (shape, *dtype),
        ResolvedArg::Scalar { dtype, .. } => (&[], *dtype),
    }
}

/// Rows and columns of a shape read as [..., C].
pub fn rows_cols(shape: &[u64]) -> (u64, u64) {
    let c = *shape.last().unwrap_or(&1);
    let r = shape.iter().rev().skip(1).product::<u64>();
    (r, c)
}

/// Check that a built-in op's buffers fit it; returns (M, N, K, dtype) for gemm.
pub fn check_builtin(
    op: BuiltinOp,
    args: &[ResolvedArg],
) -> Result<(u64, u64, u64, Dtype), String> {
    let (ins, out) = builtin_binding(args);
    let out = out.ok_or("the reference op needs an out buffer")?;
    let want_ins = if op == BuiltinOp::Gemm { 2 } else { 1 };
    if ins.len() < want_ins {
        return Err(format!(
            "reference op {} needs {want_ins} in buffer(s) before its out buffer",
            op.as_str()
        ));
    }
    let (xs, xd) = shape_dtype(ins[0]);
    let (ys, yd) = shape_dtype(out);
    let (xn, yn) = (xs.iter().product::<u64>(), ys.iter().product::<u64>());
    let f32_only = |what: &str| -> Result<(), String> {
        if xd != Dtype::F32 || yd != Dtype::F32 {
            return Err(format!(
                "reference op {what} is built in for f32 buffers; give a reference kernel for {} -> {}",
                xd.as_str(),
                yd.as_str()
            ));
        }
        Ok(())
    };
    let (r, c) = rows_cols(xs);
    match op {
        BuiltinOp::Copy => {
            if xn != yn || xd != yd {
                return Err(format!(
                    "copy needs in and out of the same dtype and element count ({xn} {} vs {yn} {})",
                    xd.as_str(),
                    yd.as_str()
                ));
            }
        }
        BuiltinOp::Transpose => {
            if xs.len() != 2 || ys != [xs[1], xs[0]] || xd != yd {
                return Err(format!(
                    "transpose needs in [R, C] and out [C, R] of one dtype (got {xs:?} and {ys:?})"
                ));
            }
        }
        BuiltinOp::ReduceSum => {
            f32_only("reduce_sum")?;
            if yn != r {
                return Err(format!(
                    "reduce_sum of in {xs:?} sums each row of {c}: out needs {r} elements, not {yn}"
                ));
            }
        }
        BuiltinOp::Softmax | BuiltinOp::Layernorm => {
            f32_only(op.as_str())?;
            if xs != ys {
                return Err(format!(
                    "{} needs out of in's shape {xs:?}, not {ys:?}",
                    op.as_str()
                ));
            }
        }
        BuiltinOp::Gemm => {
            let (bs, bd) = shape_dtype(ins[1]);
            if xs.len() != 2 || bs.len() != 2 || ys.len() != 2 {
                return Err("gemm needs 2-D A [M,K], B [K,N] and C [M,N]".into());
            }
            let (m, k, n) = (xs[0], xs[1], bs[1]);
            if bs[0] != k || ys != [m, n] {
                return Err(format!(
                    "gemm shapes do not chain: A {xs:?} @ B {bs:?} -> C {ys:?} (need A [M,K], B [K,N], C [M,N])"
                ));
            }
            if xd != bd || !matches!(xd, Dtype::F32 | Dtype::Bf16 | Dtype::F16) {
                return Err("gemm needs A and B of one dtype: f32, bf16 or f16".into());
            }
            if !(yd == xd || yd == Dtype::F32) {
                return Err("gemm's C is A's dtype or f32".into());
            }
            return Ok((m, n, k, xd));
        }
    }
    Ok((0, 0, 0, xd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transpose_spec() -> LabSpec {
        serde_json::from_value(serde_json::json!({
            "kernels": [{"source": "extern \"C\" __global__ void t(const float*x,float*y,int R,int C){}", "entry": "t"}],
            "reference": "transpose",
            "args": [
                {"name": "x", "dtype": "f32", "shape": ["R", "C"]},
                {"name": "y", "dtype": "f32", "shape": ["C", "R"], "role": "out"},
                {"name": "R", "dtype": "i32", "value": "R"},
                {"name": "C", "dtype": "i32", "value": "C"}
            ],
            "launch": {"grid": ["cdiv(C,32)", "cdiv(R,32)"], "block": [32, 8]},
            "sizes": [{"R": 1024, "C": 2048}, {"R": 100, "C": 50}]
        }))
        .unwrap()
    }

    /// Found by a call written from the description alone: a compute roof
    /// needs FLOPs (a memory roof with flops given stays a GB/s comparison).
    #[test]
    fn a_compute_roof_needs_flops() {
        let mut s = transpose_spec();
        s.roof = Some(RoofChoice::Fp32);
        let e = s.validate().unwrap_err();
        assert!(
            e.contains("roof `fp32` is compared with FLOP/s: give `flops`"),
            "{e}"
        );
        s.flops = Some(Expr::Text("R*C".into()));
        assert_eq!(s.validate().unwrap()[0].roof, RoofChoice::Fp32);
        s.roof = Some(RoofChoice::Memory);
        let r = s.validate().unwrap();
        assert_eq!(
            (r[0].roof, r[0].flops),
            (RoofChoice::Memory, Some(1024.0 * 2048.0))
        );
    }

    #[test]
    fn a_valid_spec_resolves_every_size() {
        let s = transpose_spec();
        let r = s.validate().unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].bytes, 2.0 * 1024.0 * 2048.0 * 4.0);
        assert_eq!(r[0].roof, RoofChoice::Memory);
        assert!(
            matches!(&r[1].args[1], ResolvedArg::Buffer { shape, .. } if shape == &vec![50, 100])
        );
        let l = resolve_launch(s.launch.as_ref().unwrap(), &r[1].vars).unwrap();
        assert_eq!((l.grid, l.block), ([2, 4, 1], [32, 8, 1]));
        assert_eq!(s.target(), "kernel_lab");
    }

    #[test]
    fn invalid_specs_are_refused_with_the_reason() {
        let bad = |f: &dyn Fn(&mut LabSpec), want: &str| {
            let mut s = transpose_spec();
            f(&mut s);
            let e = s.validate().unwrap_err();
            assert!(e.contains(want), "expected `{want}` in: {e}");
        };
        bad(&|s| s.kernels.clear(), "kernels: give 1 to 9");
        bad(&|s| s.reference = "t".into(), "add a candidate");
        bad(&|s| s.reference = "matmul".into(), "neither a built-in op");
        bad(
            &|s| s.args[1].shape = Some(vec![Expr::Text("R".into()), Expr::Text("C".into())]),
            "transpose needs",
        );
        bad(&|s| s.args[1].role = None, "nothing to check");
        bad(
            &|s| s.args[2].value = Some(Expr::Text("K".into())),
            "unknown name `K`",
        );
        bad(
            &|s| s.launch.as_mut().unwrap().block = vec![Expr::Int(64), Expr::Int(32)],
            "2048 threads",
        );
        bad(
            &|s| s.launch.as_mut().unwrap().grid = vec![Expr::Int(0)],
            "grid[0] is 0",
        );
        bad(&|s| s.launch = None, "no launch");
        bad(
            &|s| s.kernels[0].options = vec!["-I/etc".into()],
            "not allowed",
        );
        bad(
            &|s| s.kernels[0].entry = "t; system(\"x\")".into(),
            "not a kernel name",
        );
        bad(
            &|s| s.kernels.push(s.kernels[0].clone()),
            "labels must differ",
        );
        bad(&|s| s.args[0].name = "y".into(), "appears twice");
        bad(
            &|s| s.args[0].shape = Some(vec![Expr::Int(1 << 20), Expr::Int(1 << 20)]),
            "GiB limit",
        );
        bad(
            &|s| s.args[2].role = Some(Role::Out),
            "role, init and range are for buffers",
        );
        bad(&|s| s.reference = "gemm".into(), "needs 2 in buffer");
        bad(&|s| s.args[0].range = Some([1.0, 1.0]), "lo < hi");
    }

    #[test]
    fn gemm_reference_derives_flops_and_the_roof() {
        let s: LabSpec = serde_json::from_value(serde_json::json!({
            "name": "sgemm",
            "kernels": [{"source": "x", "entry": "g"}],
            "reference": "gemm",
            "args": [
                {"name": "A", "dtype": "bf16", "shape": ["M", "K"]},
                {"name": "B", "dtype": "bf16", "shape": ["K", "N"]},
                {"name": "C", "dtype": "f32", "shape": ["M", "N"], "role": "out"}
            ],
            "launch": {"grid": ["cdiv(N,16)", "cdiv(M,16)"], "block": [16, 16]},
            "sizes": [{"M": 256, "N": 512, "K": 128}]
        }))
        .unwrap();
        let r = s.validate().unwrap();
        assert_eq!(r[0].flops, Some(2.0 * 256.0 * 512.0 * 128.0));
        assert_eq!(r[0].roof, RoofChoice::Bf16);
        assert_eq!(s.target(), "kernel_sgemm");
    }
}
