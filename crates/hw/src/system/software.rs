//! The software stack: OS and kernel, NVIDIA driver, CUDA driver API, NVRTC
//! and cuBLAS found by the loader, nvcc/nsys/ncu (on PATH and in the usual
//! install folders), and Python with the ML packages that matter — read with
//! one Python subprocess through `importlib.metadata`, never importing them.
//!
//! Programs run in parallel with time limits so that the whole probe stays
//! under a second.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::exec::{self, ProbeError};
use crate::host::HostRoot;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SoftwareReport {
    pub os: OsInfo,
    pub driver: DriverInfo,
    /// CUDA libraries the dynamic loader finds for this process.
    pub libraries: Vec<LibraryInfo>,
    /// nvcc, nsys and ncu.
    pub tools: Vec<ToolInfo>,
    /// The Python interpreter found and its ML packages; null when no interpreter was found.
    pub python: Option<PythonInfo>,
    /// What each finding means for performance work.
    pub findings: Vec<String>,
    /// What could not be probed, and why.
    pub notes: Vec<String>,
    /// How long the probe took.
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OsInfo {
    /// PRETTY_NAME from /etc/os-release.
    pub name: Option<String>,
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// CPU architecture of this build (x86_64, aarch64).
    pub arch: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DriverInfo {
    /// NVIDIA driver version (e.g. `550.54.15`); null without a driver.
    pub version: Option<String>,
    /// `open` (open GPU kernel modules) or `proprietary`, from /proc/driver/nvidia/version.
    pub kernel_module: Option<String>,
    /// Highest CUDA version the driver supports (`major.minor`).
    pub cuda_driver_version: Option<String>,
    /// Where the version was read (nvml, /proc/driver/nvidia/version, libcuda).
    pub source: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LibraryInfo {
    /// libcuda, libnvrtc or libcublas.
    pub name: String,
    /// The loader can open it (it is on the default search path or LD_LIBRARY_PATH).
    pub loadable: bool,
    pub version: Option<String>,
    /// The file the loader opened (from /proc/self/maps).
    pub path: Option<String>,
    /// Which aisp tools need it.
    pub used_for: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolInfo {
    /// nvcc, nsys or ncu.
    pub name: String,
    pub found: bool,
    /// The one that runs when you type the name (first on PATH), else the newest install found.
    pub path: Option<String>,
    pub version: Option<String>,
    /// Whether `path` is on PATH.
    pub on_path: bool,
    /// Other installations found in the usual folders.
    pub other_installs: Vec<ToolInstall>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolInstall {
    pub path: String,
    pub version: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PythonInfo {
    pub executable: String,
    pub version: Option<String>,
    /// Installed packages among those that matter for GPU work, with versions.
    pub packages: Vec<PackageInfo>,
    /// The CUDA version torch was built for (from torch/version.py); null for CPU-only or ROCm builds.
    pub torch_cuda: Option<String>,
    /// The ROCm/HIP version of a ROCm torch build.
    pub torch_hip: Option<String>,
    /// Exact pins of installed packages on torch/triton/xformers (e.g. vllm requires torch==2.5.1).
    pub pins: Vec<Pin>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PackageInfo {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Pin {
    /// The package that pins.
    pub package: String,
    /// The requirement as written in its metadata (`torch==2.5.1`).
    pub requirement: String,
}

/// What the caller already knows (from NVML) and how the probe should run.
#[derive(Debug, Clone, Default)]
pub struct SoftwareOptions {
    pub nvml_driver_version: Option<String>,
    pub nvml_cuda_driver_version: Option<String>,
    /// Skip the Python subprocess.
    pub skip_python: bool,
    /// Skip loading CUDA libraries into this process (tests on captured trees).
    pub skip_libraries: bool,
    /// Time limit of each program run.
    pub timeout: Option<Duration>,
}

/// Python packages reported when installed (distribution names).
pub const PACKAGES: &[&str] = &[
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "pytorch-triton",
    "transformers",
    "accelerate",
    "vllm",
    "sglang",
    "flash-attn",
    "flash_attn",
    "flashinfer-python",
    "xformers",
    "deepspeed",
    "megatron-core",
    "transformer-engine",
    "transformer_engine",
    "apex",
    "jax",
    "jaxlib",
    "jax-cuda12-plugin",
    "jax-cuda13-plugin",
    "tensorrt",
    "tensorrt-llm",
    "tensorrt_llm",
    "bitsandbytes",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "nvidia-cublas-cu12",
    "nvidia-cublas",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-nvrtc-cu12",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "numpy",
    "nvidia-ml-py",
    "onnxruntime-gpu",
    "tensorflow",
    "nvtx",
];

/// Packages whose pins on these are reported.
const PINNED: &[&str] = &["torch", "triton", "xformers", "flash-attn", "flash_attn"];

/// The one Python program run: prints JSON with the interpreter version, the
/// versions of the packages named in argv, torch's CUDA version read from
/// torch/version.py as text, and exact pins. Imports nothing but the standard
/// library.
const PYTHON_PROBE: &str = r#"
import json, platform, re, sys
from importlib import metadata as md
names = sys.argv[1].split(",")
pinned = set(sys.argv[2].split(","))
out = {"version": platform.python_version(), "executable": sys.executable, "packages": [], "pins": []}
seen = set()
for n in names:
    try:
        d = md.distribution(n)
    except Exception:
        continue
    key = (d.metadata.get("Name") or n).lower().replace("_", "-")
    if key in seen:
        continue
    seen.add(key)
    out["packages"].append({"name": key, "version": d.version})
    for r in d.requires or []:
        if "extra ==" in r:
            continue
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(\[[^\]]*\])?\s*==\s*([^\s;,]+)", r)
        if m and m.group(1).lower() in pinned:
            out["pins"].append({"package": key, "requirement": m.group(1).lower() + "==" + m.group(3)})
try:
    p = md.distribution("torch").locate_file("torch/version.py")
    text = open(str(p)).read()
    for field in ("cuda", "hip"):
        m = re.search(r"^" + field + r"\s*(?::[^=]*)?=\s*'([^']*)'", text, re.M)
        out["torch_" + field] = m.group(1) if m else None
except Exception:
    pass
print(json.dumps(out))
"#;

#[derive(Debug, Deserialize)]
struct PythonProbeJson {
    version: Option<String>,
    executable: Option<String>,
    #[serde(default)]
    packages: Vec<PackageInfo>,
    #[serde(default)]
    pins: Vec<Pin>,
    #[serde(default)]
    torch_cuda: Option<String>,
    #[serde(default)]
    torch_hip: Option<String>,
}

/// Parse the probe's JSON output.
pub fn parse_python_probe(stdout: &str) -> Option<PythonInfo> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))?;
    let j: PythonProbeJson = serde_json::from_str(line).ok()?;
    Some(PythonInfo {
        executable: j.executable.unwrap_or_default(),
        version: j.version,
        packages: j.packages,
        torch_cuda: j.torch_cuda.filter(|s| !s.is_empty()),
        torch_hip: j.torch_hip.filter(|s| !s.is_empty()),
        pins: j.pins,
    })
}

/// Parse `/proc/driver/nvidia/version`: the version and the module flavour.
pub fn parse_driver_proc(text: &str) -> Option<(String, String)> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let version = line
        .split_whitespace()
        .find(|t| {
            t.split('.').count() >= 2
                && t.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })?
        .to_string();
    let flavour = if line.contains("Open Kernel Module") {
        "open"
    } else {
        "proprietary"
    };
    Some((version, flavour.to_string()))
}

/// Version from `nvcc --version`: `Cuda compilation tools, release 12.4, V12.4.131` → `12.4.131`.
pub fn parse_nvcc_version(out: &str) -> Option<String> {
    let line = out.lines().find(|l| l.contains("Cuda compilation tools"))?;
    if let Some(v) = line.split(", V").nth(1) {
        return Some(v.trim().to_string());
    }
    let rel = line.split("release ").nth(1)?;
    Some(rel.split(',').next()?.trim().to_string())
}

/// Version from `nsys --version`: `NVIDIA Nsight Systems version 2024.2.1.106-242134037904v0`.
pub fn parse_nsys_version(out: &str) -> Option<String> {
    let line = out.lines().find(|l| l.contains("Nsight Systems version"))?;
    Some(line.split("version").nth(1)?.trim().to_string())
}

/// Version from `ncu --version`: a line `Version 2024.1.1.0 (build 33998838) (public-release)`.
pub fn parse_ncu_version(out: &str) -> Option<String> {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("Version "))?;
    Some(
        line.trim_start()["Version ".len()..]
            .split_whitespace()
            .next()?
            .to_string(),
    )
}

fn parse_tool_version(name: &str, out: &str) -> Option<String> {
    match name {
        "nvcc" => parse_nvcc_version(out),
        "nsys" => parse_nsys_version(out),
        "ncu" => parse_ncu_version(out),
        _ => None,
    }
}

/// Folders where NVIDIA installs the tools besides PATH. Components ending in
/// `*` match by prefix.
fn install_patterns(name: &str) -> &'static [&'static str] {
    match name {
        "nvcc" => &["/usr/local/cuda*/bin", "/opt/cuda*/bin"],
        "nsys" => &[
            "/opt/nvidia/nsight-systems*/*/bin",
            "/opt/nvidia/nsight-systems*/*/target-linux-x64",
            "/opt/nvidia/nsight-systems*/*/target-linux-sbsa-armv8",
            "/usr/local/cuda*/bin",
            "/usr/local/cuda*/nsight-systems*/bin",
            "/usr/lib/nsight-systems/bin",
        ],
        "ncu" => &[
            "/opt/nvidia/nsight-compute/*",
            "/opt/nvidia/nsight-compute/*/host/target-linux-x64",
            "/opt/nvidia/nsight-compute/*/target/linux-desktop-glibc_2_11_3-x64",
            "/opt/nvidia/nsight-compute/*/target/linux-v4l_l4t-t210-a64",
            "/usr/local/cuda*/bin",
            "/usr/local/cuda*/nsight-compute*",
            "/usr/lib/nsight-compute",
        ],
        _ => &[],
    }
}

/// Every distinct installation of `name`: PATH's first, then the folders.
/// Installations that resolve to the same file are listed once.
pub fn find_installs(
    name: &str,
    path_var: &str,
    extra_dirs: &[PathBuf],
) -> (Option<PathBuf>, Vec<PathBuf>) {
    let on_path = exec::which(name, path_var);
    let mut seen: Vec<PathBuf> = Vec::new();
    if let Some(p) = &on_path {
        seen.push(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
    }
    let mut others = Vec::new();
    let dirs = install_patterns(name)
        .iter()
        .flat_map(|p| exec::glob_prefix(p))
        .chain(extra_dirs.iter().cloned());
    for dir in dirs {
        let p = dir.join(name);
        if !exec::is_executable(&p) {
            continue;
        }
        let canon = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if seen.contains(&canon) {
            continue;
        }
        seen.push(canon);
        others.push(p);
    }
    (on_path, others)
}

/// Run `tool --version` and parse it.
fn tool_version(name: &str, path: &Path, timeout: Duration) -> Result<Option<String>, ProbeError> {
    let out = exec::run_with_timeout(path, &["--version"], timeout)?;
    Ok(parse_tool_version(
        name,
        &format!("{}\n{}", out.stdout, out.stderr),
    ))
}

/// Probe nvcc, nsys and ncu: every install found, versions run in parallel.
pub fn probe_tools(
    path_var: &str,
    extra_dirs: &[PathBuf],
    timeout: Duration,
    notes: &mut Vec<String>,
) -> Vec<ToolInfo> {
    const TOOLS: [&str; 3] = ["nvcc", "nsys", "ncu"];
    // At most this many installs per tool are run for a version.
    const MAX_RUNS: usize = 3;
    let found: Vec<(&str, Option<PathBuf>, Vec<PathBuf>)> = TOOLS
        .iter()
        .map(|t| {
            let (p, o) = find_installs(t, path_var, extra_dirs);
            (*t, p, o)
        })
        .collect();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = found
            .iter()
            .map(|(name, on_path, others)| {
                s.spawn(move || {
                    // The newest installs sort last.
                    let mut to_run: Vec<&PathBuf> = on_path.iter().collect();
                    to_run.extend(others.iter().rev().take(MAX_RUNS));
                    let versions: Vec<(PathBuf, Result<Option<String>, String>)> =
                        std::thread::scope(|s2| {
                            let hs: Vec<_> = to_run
                                .into_iter()
                                .map(|p| {
                                    s2.spawn(move || {
                                        (
                                            p.clone(),
                                            tool_version(name, p, timeout)
                                                .map_err(|e| e.to_string()),
                                        )
                                    })
                                })
                                .collect();
                            hs.into_iter().filter_map(|h| h.join().ok()).collect()
                        });
                    versions
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect::<Vec<_>>()
    });
    let mut tools = Vec::new();
    for ((name, on_path, others), versions) in found.into_iter().zip(results) {
        let version_of = |p: &Path, notes: &mut Vec<String>| -> Option<String> {
            match versions.iter().find(|(q, _)| q == p).map(|(_, v)| v) {
                Some(Ok(v)) => v.clone(),
                Some(Err(e)) => {
                    notes.push(format!("{name}: {e}"));
                    None
                }
                None => None,
            }
        };
        let primary = on_path.clone().or_else(|| others.last().cloned());
        let other_installs = others
            .iter()
            .filter(|p| Some(*p) != primary.as_ref())
            .map(|p| ToolInstall {
                path: p.display().to_string(),
                version: version_of(p, notes),
            })
            .collect();
        tools.push(ToolInfo {
            name: name.to_string(),
            found: primary.is_some(),
            version: primary.as_deref().and_then(|p| version_of(p, notes)),
            path: primary.as_ref().map(|p| p.display().to_string()),
            on_path: on_path.is_some(),
            other_installs,
        });
    }
    tools
}

/// The Python interpreter to ask: the active virtualenv or conda env first, then PATH.
pub fn find_python(env: &[(String, String)], path_var: &str) -> Option<PathBuf> {
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = get(var) {
            for exe in ["bin/python3", "bin/python"] {
                let p = Path::new(&prefix).join(exe);
                if exec::is_executable(&p) {
                    return Some(p);
                }
            }
        }
    }
    exec::which("python3", path_var).or_else(|| exec::which("python", path_var))
}

/// Run the one Python probe. The interpreter runs as the user would run it
/// (site-packages, user site and PYTHONPATH included), from `/` so that files
/// in the working directory cannot shadow the standard library.
pub fn probe_python(python: &Path, timeout: Duration) -> Result<PythonInfo, String> {
    let packages = PACKAGES.join(",");
    let pinned = PINNED.join(",");
    let out = exec::run_with_timeout(python, &["-c", PYTHON_PROBE, &packages, &pinned], timeout)
        .map_err(|e| e.to_string())?;
    parse_python_probe(&out.stdout).ok_or_else(|| {
        format!(
            "{} printed no result (exit {:?}): {}",
            python.display(),
            out.status,
            out.stderr.lines().last().unwrap_or("")
        )
    })
}

/// The path of a loaded shared library whose file name starts with `stem`, from /proc/self/maps.
fn loaded_library_path(stem: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let path = l.split_whitespace().nth(5)?;
        let file = path.rsplit('/').next()?;
        file.starts_with(stem).then(|| path.to_string())
    })
}

/// Probe libcuda, libnvrtc and libcublas through cudarc, each guarded (cudarc
/// panics when a library is missing).
pub fn probe_libraries() -> Vec<LibraryInfo> {
    let mut libs = Vec::new();
    let cuda = crate::gpu::cuda_driver_present();
    let cuda_version = cuda.then(crate::gpu::cuda_driver_api_version).flatten();
    libs.push(LibraryInfo {
        name: "libcuda".into(),
        loadable: cuda,
        version: cuda_version,
        path: cuda.then(|| loaded_library_path("libcuda.so")).flatten(),
        used_for:
            "every CUDA program; aisp's device attributes, bandwidth test and microbenchmarks"
                .into(),
    });
    let nvrtc = crate::gpu::nvrtc_present();
    libs.push(LibraryInfo {
        name: "libnvrtc".into(),
        loadable: nvrtc,
        version: nvrtc.then(crate::gpu::nvrtc_version).flatten(),
        path: nvrtc.then(|| loaded_library_path("libnvrtc.so")).flatten(),
        used_for: "compiling aisp's CUDA microbenchmark kernels at run time (aisp_hw_*, aisp_gpu_bandwidth)".into(),
    });
    let cublas = crate::gpu::cublas_present();
    libs.push(LibraryInfo {
        name: "libcublas".into(),
        loadable: cublas,
        version: cublas.then(crate::gpu::cublas_version).flatten(),
        path: cublas
            .then(|| loaded_library_path("libcublas.so"))
            .flatten(),
        used_for: "aisp's GEMM peak measurements (aisp_hw_* tensor-core tests)".into(),
    });
    libs
}

/// Read the whole software stack. `env` is the process environment.
pub fn inspect(
    host: &HostRoot,
    env: &[(String, String)],
    opts: &SoftwareOptions,
) -> SoftwareReport {
    let start = Instant::now();
    let timeout = opts.timeout.unwrap_or(Duration::from_millis(800));
    let mut notes = Vec::new();
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();

    let os = OsInfo {
        name: host.read("/etc/os-release").and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        }),
        kernel: host.read_trim("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
    };

    let proc_driver = host
        .read("/proc/driver/nvidia/version")
        .as_deref()
        .and_then(parse_driver_proc);
    let (version, source) = match (&opts.nvml_driver_version, &proc_driver) {
        (Some(v), _) => (Some(v.clone()), Some("nvml".to_string())),
        (None, Some((v, _))) => (
            Some(v.clone()),
            Some("/proc/driver/nvidia/version".to_string()),
        ),
        (None, None) => match host.read_trim("/sys/module/nvidia/version") {
            Some(v) => (Some(v), Some("/sys/module/nvidia/version".to_string())),
            None => (None, None),
        },
    };

    // Libraries, tools and Python run concurrently.
    let (libraries, tools, python) = std::thread::scope(|s| {
        let libs = s.spawn(|| {
            if opts.skip_libraries {
                Vec::new()
            } else {
                probe_libraries()
            }
        });
        let tools = s.spawn(|| {
            let mut n = Vec::new();
            let t = probe_tools(&path_var, &[], timeout, &mut n);
            (t, n)
        });
        let python = s.spawn(|| {
            if opts.skip_python {
                return (None, None);
            }
            match find_python(env, &path_var) {
                None => (
                    None,
                    Some("no Python interpreter (python3/python) on PATH".to_string()),
                ),
                Some(py) => match probe_python(&py, timeout) {
                    Ok(info) => (Some(info), None),
                    Err(e) => (None, Some(format!("Python probe failed: {e}"))),
                },
            }
        });
        let libraries = libs.join().unwrap_or_default();
        let (tools, tool_notes) = tools.join().unwrap_or_default();
        let (python, py_note) = python.join().unwrap_or((None, None));
        (libraries, (tools, tool_notes), (python, py_note))
    });
    let (tools, tool_notes) = tools;
    notes.extend(tool_notes);
    let (python, py_note) = python;
    notes.extend(py_note);

    let cuda_driver_version = opts.nvml_cuda_driver_version.clone().or_else(|| {
        libraries
            .iter()
            .find(|l| l.name == "libcuda")
            .and_then(|l| l.version.clone())
    });
    let driver = DriverInfo {
        version,
        kernel_module: proc_driver.map(|(_, f)| f),
        cuda_driver_version,
        source,
    };
    let findings = findings(&driver, &libraries, &tools, python.as_ref());
    SoftwareReport {
        os,
        driver,
        libraries,
        tools,
        python,
        findings,
        notes,
        elapsed_ms: start.elapsed().as_millis() as u64,
    }
}

impl PythonInfo {
    pub fn package(&self, name: &str) -> Option<&str> {
        let norm = name.to_ascii_lowercase().replace('_', "-");
        self.packages
            .iter()
            .find(|p| p.name == norm)
            .map(|p| p.version.as_str())
    }
}

impl SoftwareReport {
    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }
    pub fn library(&self, name: &str) -> Option<&LibraryInfo> {
        self.libraries.iter().find(|l| l.name == name)
    }
}

fn findings(
    driver: &DriverInfo,
    libraries: &[LibraryInfo],
    tools: &[ToolInfo],
    python: Option<&PythonInfo>,
) -> Vec<String> {
    let mut out = Vec::new();
    match (&driver.version, &driver.cuda_driver_version) {
        (Some(v), Some(c)) => out.push(format!(
            "NVIDIA driver {v} supports CUDA up to {c}: programs built for a newer CUDA major version will not run."
        )),
        (Some(v), None) => out.push(format!("NVIDIA driver {v} found; its CUDA version is unknown.")),
        (None, _) => out.push(
            "No NVIDIA driver found: GPU tools (aisp_gpu_*, profiling captures, benchmarks) cannot run here; \
             profile analysis and planners still work."
                .to_string(),
        ),
    }
    for l in libraries {
        // Without a driver the CUDA libraries could not be used anyway.
        if !l.loadable && l.name != "libcuda" && driver.version.is_some() {
            out.push(format!(
                "{} is not on the loader path: {} will be unavailable (install the CUDA {} package or add its \
                 lib folder to LD_LIBRARY_PATH).",
                l.name,
                l.used_for,
                l.name.trim_start_matches("lib")
            ));
        }
    }
    for t in tools {
        let what = match t.name.as_str() {
            "nvcc" => "building CUDA extensions (flash-attn, apex, custom ops) from source",
            "nsys" => "Nsight Systems timelines (aisp profile captures)",
            _ => "Nsight Compute kernel analysis (ncu captures)",
        };
        match (&t.found, t.on_path) {
            (false, _) => out.push(format!("{} not found: no {what}.", t.name)),
            (true, false) => out.push(format!(
                "{} {} is installed at {} but not on PATH: add its folder to PATH for {what}.",
                t.name,
                t.version.as_deref().unwrap_or("(version unknown)"),
                t.path.as_deref().unwrap_or("?")
            )),
            (true, true) => {}
        }
    }
    match python {
        None => out.push(
            "No Python found: the framework checks (torch, vllm, ...) were skipped.".to_string(),
        ),
        Some(py) => match (py.package("torch"), &py.torch_cuda, &py.torch_hip) {
            (Some(v), Some(c), _) => out.push(format!("torch {v} is built for CUDA {c}.")),
            (Some(v), None, Some(h)) => out.push(format!(
                "torch {v} is a ROCm build (HIP {h}): it cannot use NVIDIA GPUs."
            )),
            (Some(v), None, None) => out.push(format!(
                "torch {v} is a CPU-only build: it will not use the GPU."
            )),
            (None, _, _) => out.push(format!("torch is not installed for {}.", py.executable)),
        },
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings_parse() {
        let nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2024 NVIDIA Corporation\n\
                    Built on Thu_Mar_28_02:18:24_PDT_2024\nCuda compilation tools, release 12.4, V12.4.131\n\
                    Build cuda_12.4.r12.4/compiler.34097967_0\n";
        assert_eq!(parse_nvcc_version(nvcc).as_deref(), Some("12.4.131"));
        assert_eq!(
            parse_nsys_version("NVIDIA Nsight Systems version 2024.2.1.106-242134037904v0\n")
                .as_deref(),
            Some("2024.2.1.106-242134037904v0")
        );
        let ncu = "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2024 NVIDIA Corporation\n\
                   Version 2024.1.1.0 (build 33998838) (public-release)\n";
        assert_eq!(parse_ncu_version(ncu).as_deref(), Some("2024.1.1.0"));
        let proc_v = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  \
                      (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\nGCC version:  gcc version 12.3.0\n";
        assert_eq!(
            parse_driver_proc(proc_v),
            Some(("550.54.15".into(), "open".into()))
        );
        let proc_p = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.07  Sat Feb 17 22:55:48 UTC 2024\n";
        assert_eq!(
            parse_driver_proc(proc_p),
            Some(("535.161.07".into(), "proprietary".into()))
        );
    }

    #[test]
    fn fake_tools_are_found_and_versioned() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let script = "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n";
        let nvcc = bin.join("nvcc");
        std::fs::write(&nvcc, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut notes = Vec::new();
        let tools = probe_tools(
            &bin.display().to_string(),
            &[],
            Duration::from_secs(5),
            &mut notes,
        );
        let t = tools.iter().find(|t| t.name == "nvcc").unwrap();
        assert!(t.found && t.on_path);
        assert_eq!(t.version.as_deref(), Some("12.8.93"));
        assert_eq!(t.path.as_deref(), Some(nvcc.to_str().unwrap()));
    }

    #[test]
    fn the_python_probe_reads_metadata_without_imports() {
        // Runs the real probe on this machine's Python, if any; it must parse and
        // report the interpreter's version.
        let env = crate::system::env::process_env();
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let Some(py) = find_python(&env, &path) else {
            return;
        };
        let info = probe_python(&py, Duration::from_secs(10)).expect("probe runs");
        let v = info.version.clone().unwrap();
        assert!(v.starts_with('3'), "{v}");
        let parsed = parse_python_probe(
            r#"{"version": "3.11.7", "executable": "/usr/bin/python3", "packages": [{"name": "torch", "version": "2.5.1+cu124"}, {"name": "vllm", "version": "0.6.4"}], "pins": [{"package": "vllm", "requirement": "torch==2.5.1"}], "torch_cuda": "12.4", "torch_hip": null}"#,
        )
        .unwrap();
        assert_eq!(parsed.package("torch"), Some("2.5.1+cu124"));
        assert_eq!(parsed.torch_cuda.as_deref(), Some("12.4"));
        assert_eq!(parsed.pins[0].requirement, "torch==2.5.1");
    }

    #[test]
    fn the_captured_container_sample_reads_os_and_no_driver() {
        let host = HostRoot::at(format!(
            "{}/tests/data/host/container-vm-2cpu",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ));
        let r = inspect(
            &host,
            &[("PATH".into(), "/nonexistent".into())],
            &SoftwareOptions {
                skip_python: true,
                skip_libraries: true,
                ..Default::default()
            },
        );
        assert_eq!(r.os.name.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(r.os.kernel.as_deref(), Some("6.18.44-fc-v769"));
        assert_eq!(r.driver.version, None);
        assert!(r.findings[0].starts_with("No NVIDIA driver found"));
        assert!(r.python.is_none());
    }
}
