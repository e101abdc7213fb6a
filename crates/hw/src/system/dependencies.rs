//! Health of the GPU software stack: does the driver run the CUDA that torch
//! (and nvcc, NVRTC, jax) were built for, is NCCL there, do installed packages'
//! exact pins hold, is anything missing — each finding with a fix.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::software::SoftwareReport;

const REQUIREMENTS: &str = include_str!("../../../../data/system/cuda_driver_requirements.toml");

#[derive(Debug, Deserialize)]
struct Requirements {
    cuda_major: Vec<MajorRequirement>,
}

#[derive(Debug, Deserialize, Clone)]
struct MajorRequirement {
    major: u32,
    min_driver: String,
}

fn requirements() -> &'static [MajorRequirement] {
    static R: OnceLock<Vec<MajorRequirement>> = OnceLock::new();
    R.get_or_init(|| match toml::from_str::<Requirements>(REQUIREMENTS) {
        Ok(r) => r.cuda_major,
        Err(e) => {
            tracing::error!("cuda_driver_requirements.toml does not parse: {e}");
            Vec::new()
        }
    })
}

/// The minimum driver for any application of a CUDA major version.
pub fn min_driver_for_major(major: u32) -> Option<&'static str> {
    requirements()
        .iter()
        .find(|r| r.major == major)
        .map(|r| r.min_driver.as_str())
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Error,
    Warning,
    Info,
    Ok,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Check {
    /// What was checked (driver, torch, nccl, vllm, nvcc, ...).
    pub component: String,
    pub status: Health,
    pub message: String,
    /// What to do; null when nothing needs doing.
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DependenciesReport {
    /// error, warning, info or ok: the worst status among the checks.
    pub overall: Health,
    /// Errors and warnings first.
    pub checks: Vec<Check>,
    /// NCCL libraries found (pip package or system library), with versions.
    pub nccl: Vec<String>,
    /// The software probe these checks rest on.
    pub software_elapsed_ms: u64,
}

/// Facts about the GPUs that some checks need.
#[derive(Debug, Clone, Default)]
pub struct GpuFacts {
    /// NVIDIA GPUs on the PCI bus (visible even without a driver).
    pub pci_gpus: usize,
    /// Compute capabilities of the GPUs NVML reports.
    pub compute_capabilities: Vec<String>,
}

/// `12.4` → (12, 4); `2.5.1+cu124` → (2, 5, 1) as a vector.
pub fn version_parts(v: &str) -> Vec<u32> {
    v.split(['+', '-', ' '])
        .next()
        .unwrap_or("")
        .split('.')
        .map_while(|p| {
            let digits: String = p.chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse().ok()
        })
        .collect()
}

fn cmp_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (version_parts(a), version_parts(b));
    let n = a.len().max(b.len());
    for i in 0..n {
        let (x, y) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    std::cmp::Ordering::Equal
}

/// Can a driver that supports CUDA `driver_cuda` (and has version
/// `driver_version`) run code built for CUDA `built_for`?
pub fn cuda_compat(
    built_for: &str,
    driver_cuda: &str,
    driver_version: Option<&str>,
) -> (Health, String) {
    let b = version_parts(built_for);
    let d = version_parts(driver_cuda);
    let (bmaj, dmaj) = (
        b.first().copied().unwrap_or(0),
        d.first().copied().unwrap_or(0),
    );
    if cmp_versions(built_for, driver_cuda) != std::cmp::Ordering::Greater {
        return (
            Health::Ok,
            format!("built for CUDA {built_for}; the driver supports CUDA {driver_cuda}"),
        );
    }
    if bmaj > dmaj {
        let need = min_driver_for_major(bmaj).unwrap_or("a newer driver");
        return (
            Health::Error,
            format!(
                "built for CUDA {built_for}, but the driver supports only CUDA {driver_cuda}: it will fail with \
                 'CUDA driver version is insufficient' (a CUDA {bmaj}.x build needs driver >= {need})"
            ),
        );
    }
    // Same major, newer minor: minor version compatibility.
    let min = min_driver_for_major(bmaj);
    let ok = match (min, driver_version) {
        (Some(m), Some(v)) => cmp_versions(v, m) != std::cmp::Ordering::Less,
        _ => true,
    };
    if ok {
        (
            Health::Warning,
            format!(
                "built for CUDA {built_for}, newer than the driver's CUDA {driver_cuda}: it runs through minor version \
                 compatibility, but PTX compiled for {built_for} cannot be JIT-compiled by this driver and APIs \
                 added after {driver_cuda} fail"
            ),
        )
    } else {
        (
            Health::Error,
            format!(
                "built for CUDA {built_for}; the driver {} is older than {} needed for CUDA {bmaj}.x minor version compatibility",
                driver_version.unwrap_or("?"),
                min.unwrap_or("?")
            ),
        )
    }
}

/// NCCL shared libraries in the usual system folders (file names carry the version).
pub fn system_nccl_libraries() -> Vec<String> {
    let dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/sbsa-linux-gnu",
        "/usr/lib64",
        "/usr/local/cuda/lib64",
        "/usr/local/nccl/lib",
    ];
    let mut out = Vec::new();
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(d) {
            let mut names: Vec<String> = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("libnccl.so."))
                .collect();
            // The most specific name (libnccl.so.2.21.5) carries the full version.
            names.sort_by_key(|n| std::cmp::Reverse(n.len()));
            if let Some(n) = names.first() {
                out.push(format!("{d}/{n}"));
            }
        }
    }
    out
}

/// Judge the stack.
pub fn check(sw: &SoftwareReport, gpus: &GpuFacts, system_nccl: &[String]) -> DependenciesReport {
    let mut checks = Vec::new();
    let mut add = |component: &str, status: Health, message: String, fix: Option<String>| {
        checks.push(Check {
            component: component.to_string(),
            status,
            message,
            fix,
        });
    };
    let driver_cuda = sw.driver.cuda_driver_version.as_deref();
    let driver_version = sw.driver.version.as_deref();

    // Driver.
    match (driver_version, gpus.pci_gpus) {
        (None, 0) => add(
            "driver",
            Health::Info,
            "No NVIDIA GPU or driver on this host: only GPU-free tools (profile analysis, planners) apply.".into(),
            None,
        ),
        (None, n) => add(
            "driver",
            Health::Error,
            format!("{n} NVIDIA GPU(s) are on the PCI bus but no NVIDIA driver is usable by this process."),
            Some(
                "Install or load the NVIDIA driver (nvidia-smi must work). In a container, start it with the \
                 NVIDIA Container Toolkit (docker run --gpus all, or the device plugin on Kubernetes)."
                    .into(),
            ),
        ),
        (Some(v), _) => add(
            "driver",
            Health::Ok,
            format!("driver {v}, CUDA {}", driver_cuda.unwrap_or("unknown")),
            None,
        ),
    }
    let blackwell = gpus
        .compute_capabilities
        .iter()
        .any(|cc| version_parts(cc).first().copied().unwrap_or(0) >= 10);
    if blackwell && sw.driver.kernel_module.as_deref() == Some("proprietary") {
        add(
            "driver",
            Health::Error,
            "Blackwell GPUs are driven by the proprietary kernel module, which does not support them.".into(),
            Some("Install the open GPU kernel modules (nvidia-open / nvidia-driver-XXX-open).".into()),
        );
    }

    // Python frameworks.
    match &sw.python {
        None => add(
            "python",
            Health::Info,
            "No Python interpreter found: framework checks skipped.".into(),
            None,
        ),
        Some(py) => {
            match (py.package("torch"), &py.torch_cuda, &py.torch_hip) {
                (None, _, _) => add("torch", Health::Info, format!("torch is not installed for {}.", py.executable), None),
                (Some(v), None, Some(h)) => add(
                    "torch",
                    if gpus.pci_gpus > 0 { Health::Error } else { Health::Info },
                    format!("torch {v} is a ROCm (HIP {h}) build: it cannot use NVIDIA GPUs."),
                    Some("Install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu12X".into()),
                ),
                (Some(v), None, None) => add(
                    "torch",
                    if gpus.pci_gpus > 0 { Health::Error } else { Health::Info },
                    format!("torch {v} is a CPU-only build: torch.cuda.is_available() is False."),
                    (gpus.pci_gpus > 0).then(|| {
                        format!(
                            "Install a CUDA build matching the driver (CUDA {}): pip install torch --index-url \
                             https://download.pytorch.org/whl/cu{}",
                            driver_cuda.unwrap_or("12.x"),
                            driver_cuda.map(|c| c.replace('.', "")).unwrap_or_else(|| "124".into())
                        )
                    }),
                ),
                (Some(v), Some(c), _) => match driver_cuda {
                    None => add(
                        "torch",
                        Health::Info,
                        format!("torch {v} is built for CUDA {c}; no driver to check it against."),
                        None,
                    ),
                    Some(d) => {
                        let (h, msg) = cuda_compat(c, d, driver_version);
                        let fix = (h != Health::Ok).then(|| {
                            format!(
                                "Upgrade the NVIDIA driver, or install torch built for CUDA <= {d} \
                                 (pip install torch --index-url https://download.pytorch.org/whl/cu{}).",
                                d.replace('.', "")
                            )
                        });
                        add("torch", h, format!("torch {v}: {msg}."), fix);
                    }
                },
            }
            // Exact pins of installed packages.
            for pin in &py.pins {
                let Some((dep, want)) = pin.requirement.split_once("==") else {
                    continue;
                };
                let Some(have) = py.package(dep) else {
                    continue;
                };
                let have_base = have.split('+').next().unwrap_or(have);
                let want_base = want.split('+').next().unwrap_or(want);
                if version_parts(have_base) != version_parts(want_base) {
                    add(
                        &pin.package,
                        Health::Error,
                        format!(
                            "{} {} requires {dep}=={want}, but {dep} {have} is installed: expect import errors or \
                             undefined-symbol crashes in its compiled kernels.",
                            pin.package,
                            py.package(&pin.package).unwrap_or("?")
                        ),
                        Some(format!(
                            "pip install {dep}=={want} (the build for your CUDA), or install the {} release built \
                             against {dep} {have_base}.",
                            pin.package
                        )),
                    );
                } else {
                    add(
                        &pin.package,
                        Health::Ok,
                        format!(
                            "{} pins {dep}=={want}; {dep} {have} is installed.",
                            pin.package
                        ),
                        None,
                    );
                }
            }
            if py.package("triton").is_some() && py.package("pytorch-triton").is_some() {
                add(
                    "triton",
                    Health::Warning,
                    format!(
                        "Both triton {} and pytorch-triton {} are installed; they provide the same module and the \
                         one imported may not be the one torch was tested with.",
                        py.package("triton").unwrap_or("?"),
                        py.package("pytorch-triton").unwrap_or("?")
                    ),
                    Some(
                        "Uninstall the one torch does not require (pip show torch lists it)."
                            .into(),
                    ),
                );
            }
            let fa = py.package("flash-attn");
            if let Some(v) = fa {
                let old = gpus
                    .compute_capabilities
                    .iter()
                    .filter(|cc| version_parts(cc).first().copied().unwrap_or(0) < 8)
                    .count();
                if old > 0 && version_parts(v).first().copied().unwrap_or(0) >= 2 {
                    add(
                        "flash-attn",
                        Health::Error,
                        format!(
                            "flash-attn {v} needs an Ampere or newer GPU (compute capability 8.0+); {old} GPU(s) here \
                             are older."
                        ),
                        Some("Use torch.nn.functional.scaled_dot_product_attention (memory-efficient backend) or xformers.".into()),
                    );
                }
            }
            for (pkg, major) in [("jax-cuda12-plugin", 12), ("jax-cuda13-plugin", 13)] {
                if let (Some(v), Some(d)) = (py.package(pkg), driver_cuda) {
                    let (h, msg) = cuda_compat(&format!("{major}.0"), d, driver_version);
                    if h == Health::Error {
                        add(
                            "jax",
                            h,
                            format!("{pkg} {v}: {msg}."),
                            Some("Upgrade the NVIDIA driver.".into()),
                        );
                    }
                }
            }
            // NCCL from pip.
            for pkg in ["nvidia-nccl-cu12", "nvidia-nccl-cu13"] {
                if let Some(v) = py.package(pkg) {
                    add(
                        "nccl",
                        Health::Ok,
                        format!("NCCL {v} from the pip package {pkg}."),
                        None,
                    );
                }
            }
        }
    }

    // NCCL overall.
    let pip_nccl: Vec<String> = sw
        .python
        .iter()
        .flat_map(|py| {
            ["nvidia-nccl-cu12", "nvidia-nccl-cu13"]
                .into_iter()
                .filter_map(|p| py.package(p).map(|v| format!("{p} {v}")))
        })
        .collect();
    let mut nccl = pip_nccl.clone();
    nccl.extend(system_nccl.iter().cloned());
    for lib in system_nccl {
        let version = lib.rsplit("libnccl.so.").next().unwrap_or("");
        add(
            "nccl",
            Health::Ok,
            format!("system NCCL {version} at {lib}."),
            None,
        );
    }
    if nccl.is_empty()
        && (gpus.pci_gpus > 1
            || sw
                .python
                .as_ref()
                .is_some_and(|p| p.package("torch").is_some()))
    {
        add(
            "nccl",
            Health::Warning,
            "No NCCL found (neither the pip package nor libnccl.so in the system library folders): multi-GPU \
             torch.distributed cannot use the nccl backend, unless torch was built with NCCL statically linked."
                .into(),
            Some("pip install nvidia-nccl-cu12 (pip torch wheels depend on it) or install libnccl2 from the CUDA repository.".into()),
        );
    }

    // Toolkit compilers and profilers.
    let nvcc = sw.tool("nvcc");
    if let Some(nv) = nvcc.and_then(|t| t.version.clone()) {
        if let Some(d) = driver_cuda {
            let (h, msg) = cuda_compat(&nv, d, driver_version);
            if h != Health::Ok {
                add(
                    "nvcc",
                    h,
                    format!("nvcc {nv}: binaries it builds are {msg}."),
                    Some(format!("Use a CUDA toolkit <= {d} or upgrade the driver.")),
                );
            } else {
                add(
                    "nvcc",
                    Health::Ok,
                    format!("nvcc {nv} matches the driver (CUDA {d})."),
                    None,
                );
            }
        }
        if let Some(tc) = sw.python.as_ref().and_then(|p| p.torch_cuda.clone()) {
            let (a, b) = (version_parts(&nv), version_parts(&tc));
            if a.first() != b.first() {
                add(
                    "nvcc",
                    Health::Warning,
                    format!(
                        "nvcc is CUDA {nv} but torch is built for CUDA {tc}: torch.utils.cpp_extension refuses to \
                         build extensions (flash-attn, apex, custom ops) across CUDA major versions."
                    ),
                    Some(format!(
                        "Put a CUDA {} toolkit first on PATH (CUDA_HOME) when building extensions.",
                        b.first().copied().unwrap_or(0)
                    )),
                );
            }
        }
    } else if nvcc.is_some_and(|t| !t.found) {
        add(
            "nvcc",
            Health::Info,
            "nvcc not found: CUDA extensions cannot be built from source here (prebuilt wheels still work; aisp's \
             benchmarks compile with NVRTC)."
                .into(),
            Some("Install the CUDA toolkit (apt install cuda-toolkit-12-x) if you build extensions.".into()),
        );
    }
    for (tool, what, fix) in [
        (
            "nsys",
            "Nsight Systems timelines (aisp profile captures)",
            "Install Nsight Systems: apt install nsight-systems-cli (CUDA repository) or the .run from developer.nvidia.com/nsight-systems.",
        ),
        (
            "ncu",
            "Nsight Compute kernel analysis",
            "Install Nsight Compute: apt install nsight-compute (CUDA repository) or from developer.nvidia.com/nsight-compute.",
        ),
    ] {
        if let Some(t) = sw.tool(tool) {
            match (t.found, t.on_path) {
                (false, _) => add(
                    tool,
                    Health::Info,
                    format!("{tool} not found: no {what}."),
                    Some(fix.into()),
                ),
                (true, false) => add(
                    tool,
                    Health::Warning,
                    format!(
                        "{tool} {} is installed at {} but not on PATH.",
                        t.version.as_deref().unwrap_or(""),
                        t.path.as_deref().unwrap_or("?")
                    ),
                    t.path
                        .as_deref()
                        .and_then(|p| p.rsplit_once('/'))
                        .map(|(d, _)| format!("export PATH={d}:$PATH")),
                ),
                (true, true) => add(
                    tool,
                    Health::Ok,
                    format!(
                        "{tool} {} on PATH.",
                        t.version.as_deref().unwrap_or("(version unknown)")
                    ),
                    None,
                ),
            }
        }
    }
    if let Some(l) = sw.library("libnvrtc") {
        match (&l.version, driver_cuda) {
            (None, _) if !l.loadable && driver_version.is_some() => add(
                "nvrtc",
                Health::Warning,
                "libnvrtc is not on the loader path: aisp's CUDA microbenchmarks and bandwidth test cannot compile kernels.".into(),
                Some("Install cuda-nvrtc (apt install cuda-nvrtc-12-x) or add the CUDA lib64 folder to LD_LIBRARY_PATH.".into()),
            ),
            (Some(v), Some(d)) => {
                let (h, msg) = cuda_compat(v, d, driver_version);
                add(
                    "nvrtc",
                    if h == Health::Error { Health::Warning } else { h },
                    format!("NVRTC {v}: kernels it compiles are {msg}."),
                    (h != Health::Ok).then(|| format!("Put an NVRTC <= CUDA {d} first on LD_LIBRARY_PATH, or upgrade the driver.")),
                );
            }
            _ => {}
        }
    }

    checks.sort_by_key(|c| c.status);
    let overall = checks.iter().map(|c| c.status).min().unwrap_or(Health::Ok);
    DependenciesReport {
        overall,
        checks,
        nccl,
        software_elapsed_ms: sw.elapsed_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::software::{DriverInfo, OsInfo, PackageInfo, Pin, PythonInfo, ToolInfo};

    fn report(
        driver: Option<&str>,
        cuda: Option<&str>,
        python: Option<PythonInfo>,
    ) -> SoftwareReport {
        SoftwareReport {
            os: OsInfo {
                name: None,
                kernel: None,
                arch: "x86_64".into(),
            },
            driver: DriverInfo {
                version: driver.map(String::from),
                kernel_module: Some("open".into()),
                cuda_driver_version: cuda.map(String::from),
                source: Some("nvml".into()),
            },
            libraries: vec![],
            tools: vec![ToolInfo {
                name: "nsys".into(),
                found: false,
                path: None,
                version: None,
                on_path: false,
                other_installs: vec![],
            }],
            python,
            findings: vec![],
            notes: vec![],
            elapsed_ms: 1,
        }
    }

    fn py(pkgs: &[(&str, &str)], torch_cuda: Option<&str>, pins: &[(&str, &str)]) -> PythonInfo {
        PythonInfo {
            executable: "/usr/bin/python3".into(),
            version: Some("3.11.7".into()),
            packages: pkgs
                .iter()
                .map(|(n, v)| PackageInfo {
                    name: n.to_string(),
                    version: v.to_string(),
                })
                .collect(),
            torch_cuda: torch_cuda.map(String::from),
            torch_hip: None,
            pins: pins
                .iter()
                .map(|(p, r)| Pin {
                    package: p.to_string(),
                    requirement: r.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn cuda_compatibility_follows_the_release_notes() {
        assert_eq!(cuda_compat("12.4", "12.4", Some("550.54.15")).0, Health::Ok);
        assert_eq!(cuda_compat("12.1", "12.4", Some("550.54.15")).0, Health::Ok);
        // Minor version compatibility: 12.8 code on a 12.4 driver (>= 525.60.13).
        assert_eq!(
            cuda_compat("12.8", "12.4", Some("550.54.15")).0,
            Health::Warning
        );
        // A new major needs a new driver.
        let (h, msg) = cuda_compat("13.0", "12.8", Some("570.124.06"));
        assert_eq!(h, Health::Error);
        assert!(msg.contains("driver >= 580.65.06"), "{msg}");
        assert_eq!(min_driver_for_major(12), Some("525.60.13"));
        assert_eq!(version_parts("2.5.1+cu124"), vec![2, 5, 1]);
        assert_eq!(version_parts("12.4.131"), vec![12, 4, 131]);
        assert_eq!(
            cmp_versions("550.54.15", "525.60.13"),
            std::cmp::Ordering::Greater
        );
    }

    #[test]
    fn stacks_are_judged_with_fixes() {
        let gpus = GpuFacts {
            pci_gpus: 8,
            compute_capabilities: vec!["9.0".into(); 8],
        };
        // torch built for a newer major than the driver, vllm pinned to another torch.
        let p = py(
            &[
                ("torch", "2.9.0+cu130"),
                ("vllm", "0.6.4"),
                ("nvidia-nccl-cu12", "2.21.5"),
            ],
            Some("13.0"),
            &[("vllm", "torch==2.5.1")],
        );
        let r = check(
            &report(Some("570.124.06"), Some("12.8"), Some(p)),
            &gpus,
            &[],
        );
        assert_eq!(r.overall, Health::Error);
        let torch = r.checks.iter().find(|c| c.component == "torch").unwrap();
        assert_eq!(torch.status, Health::Error);
        assert!(torch.fix.as_deref().unwrap().contains("whl/cu128"));
        let vllm = r.checks.iter().find(|c| c.component == "vllm").unwrap();
        assert_eq!(vllm.status, Health::Error);
        assert!(
            vllm.message.starts_with(
                "vllm 0.6.4 requires torch==2.5.1, but torch 2.9.0+cu130 is installed"
            )
        );
        assert_eq!(r.nccl, vec!["nvidia-nccl-cu12 2.21.5"]);
        // Errors sort first.
        assert_eq!(r.checks[0].status, Health::Error);

        // A CPU-only torch on a GPU host.
        let cpu = py(&[("torch", "2.5.1+cpu")], None, &[]);
        let r = check(
            &report(Some("550.54.15"), Some("12.4"), Some(cpu)),
            &gpus,
            &[],
        );
        let torch = r.checks.iter().find(|c| c.component == "torch").unwrap();
        assert_eq!(torch.status, Health::Error);
        assert!(torch.fix.as_deref().unwrap().ends_with("whl/cu124"));
        assert!(
            r.checks
                .iter()
                .any(|c| c.component == "nccl" && c.status == Health::Warning)
        );
        assert!(
            r.checks
                .iter()
                .any(|c| c.component == "nsys" && c.status == Health::Info)
        );

        // GPUs on the bus without a driver.
        let r = check(&report(None, None, None), &gpus, &[]);
        assert_eq!(r.checks[0].component, "driver");
        assert_eq!(r.checks[0].status, Health::Error);

        // A healthy stack.
        let ok = py(
            &[("torch", "2.5.1+cu124"), ("vllm", "0.6.4")],
            Some("12.4"),
            &[("vllm", "torch==2.5.1")],
        );
        let r = check(
            &report(Some("550.54.15"), Some("12.4"), Some(ok)),
            &gpus,
            &["/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5".into()],
        );
        assert!(
            r.checks
                .iter()
                .filter(|c| c.component != "nsys")
                .all(|c| c.status == Health::Ok),
            "{:#?}",
            r.checks
        );
        assert!(
            r.checks.iter().any(|c| c.message
                == "system NCCL 2.21.5 at /usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5.")
        );
    }
}
