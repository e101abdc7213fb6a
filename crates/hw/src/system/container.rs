//! Is this process in a container, and what do its cgroups allow? CPU quota,
//! memory limit, pids limit, cpuset, /dev/shm and locked-memory limits, and
//! the mismatches that bite GPU jobs (DataLoader workers sized from the host's
//! CPU count, a 64 MiB /dev/shm, a locked-memory limit that breaks RDMA).

use schemars::JsonSchema;
use serde::Serialize;

use crate::host::{HostRoot, parse_cpu_list};

/// A v1 memory limit at or above this means "no limit" (the kernel writes
/// `PAGE_COUNTER_MAX` pages as 9223372036854771712 bytes).
const V1_UNLIMITED_BYTES: u64 = 1 << 62;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ContainerReport {
    /// True when any sign of a container runtime was found.
    pub in_container: bool,
    /// docker, podman, kubernetes, containerd, lxc or `unknown` (null on bare hosts).
    pub runtime: Option<String>,
    /// What the verdict rests on (files and cgroup paths found).
    pub evidence: Vec<String>,
    /// `v1`, `v2` or `hybrid` (v1 controllers with a v2 hierarchy mounted too); null without cgroups.
    pub cgroup_version: Option<String>,
    /// CPU time the cgroup may use, in CPUs (quota / period); null when unlimited.
    pub cpu_quota_cpus: Option<f64>,
    /// CPUs online on the host.
    pub host_cpus: Option<u32>,
    /// CPUs this process may run on (its affinity mask, `Cpus_allowed_list`).
    pub affinity_cpus: Option<u32>,
    /// CPUs in the cgroup's cpuset.
    pub cpuset_cpus: Option<u32>,
    /// The CPUs work can really use: the smallest of quota (rounded down, at least 1), affinity and cpuset.
    pub effective_cpus: Option<u32>,
    /// Memory limit of the cgroup (smallest along its ancestors); null when unlimited.
    pub memory_limit_bytes: Option<u64>,
    /// Host memory (MemTotal).
    pub host_memory_bytes: Option<u64>,
    /// Maximum number of tasks (processes and threads) in the cgroup; null when unlimited.
    pub pids_limit: Option<u64>,
    /// Size of /dev/shm, where PyTorch DataLoader workers pass batches.
    pub shm_size_bytes: Option<u64>,
    /// Locked-memory limit of this process (`ulimit -l`); null when unlimited.
    pub memlock_limit_bytes: Option<u64>,
    /// Open-files limit of this process (`ulimit -n`); null when unlimited.
    pub open_files_limit: Option<u64>,
    /// Limits that will hurt GPU work here, each with a fix.
    pub mismatches: Vec<Mismatch>,
    /// What could not be read, and why.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Mismatch {
    /// What is wrong, with the numbers.
    pub issue: String,
    /// What it breaks or slows.
    pub impact: String,
    /// How to fix it.
    pub fix: String,
}

/// One line of /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mounted subtree of the filesystem (`/` for a whole filesystem).
    pub root: String,
    pub mount_point: String,
    pub fs_type: String,
    pub super_options: String,
}

/// Parse /proc/self/mountinfo (fields before ` - `, then type, source, options).
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            Some(Mount {
                root: unescape_mount(l.get(3)?),
                mount_point: unescape_mount(l.get(4)?),
                fs_type: r.first()?.to_string(),
                super_options: r.get(2).copied().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// mountinfo escapes spaces and a few other bytes as `\040`-style octal.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = |j: usize| b.get(j).is_some_and(|c| (b'0'..=b'7').contains(c));
        if b[i] == b'\\' && octal(i + 1) && octal(i + 2) && octal(i + 3) {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of /proc/<pid>/cgroup: hierarchy id, controllers, path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLine {
    pub controllers: Vec<String>,
    pub path: String,
}

pub fn parse_proc_cgroup(text: &str) -> Vec<CgroupLine> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?.trim().to_string();
            Some(CgroupLine {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(|c| c.trim_start_matches("name=").to_string())
                    .collect(),
                path,
            })
        })
        .collect()
}

/// The cgroup directories of this process: one per v1 controller, and the v2 one.
#[derive(Debug, Clone, Default)]
pub struct CgroupDirs {
    /// (controller, directory, mount point) for v1 hierarchies.
    pub v1: Vec<(String, String, String)>,
    /// (directory, mount point) of the v2 group.
    pub v2: Option<(String, String)>,
}

impl CgroupDirs {
    pub fn locate(proc_cgroup: &[CgroupLine], mounts: &[Mount]) -> CgroupDirs {
        let mut dirs = CgroupDirs::default();
        for line in proc_cgroup {
            if line.controllers.is_empty() {
                if let Some(m) = mounts.iter().find(|m| m.fs_type == "cgroup2") {
                    dirs.v2 = Some((join_cgroup(m, &line.path), m.mount_point.clone()));
                }
                continue;
            }
            for c in &line.controllers {
                let mount = mounts.iter().find(|m| {
                    m.fs_type == "cgroup"
                        && m.super_options
                            .split(',')
                            .any(|o| o == c || o.strip_prefix("name=") == Some(c))
                });
                if let Some(m) = mount {
                    dirs.v1
                        .push((c.clone(), join_cgroup(m, &line.path), m.mount_point.clone()));
                }
            }
        }
        dirs
    }

    fn v1_dir(&self, controller: &str) -> Option<(&str, &str)> {
        self.v1
            .iter()
            .find(|(c, _, _)| c == controller)
            .map(|(_, d, m)| (d.as_str(), m.as_str()))
    }

    pub fn version(&self) -> Option<&'static str> {
        match (self.v1.is_empty(), &self.v2) {
            (true, None) => None,
            (true, Some(_)) => Some("v2"),
            (false, None) => Some("v1"),
            (false, Some(_)) => Some("hybrid"),
        }
    }
}

/// The directory of a group: its path made relative to the mount's root.
fn join_cgroup(m: &Mount, path: &str) -> String {
    let rel = if m.root != "/" {
        path.strip_prefix(m.root.as_str()).unwrap_or(path)
    } else {
        path
    };
    let rel = rel.trim_matches('/');
    if rel.is_empty() {
        m.mount_point.clone()
    } else {
        format!("{}/{}", m.mount_point.trim_end_matches('/'), rel)
    }
}

/// `dir` and its ancestors up to (and including) `mount`, innermost first.
fn ancestors(dir: &str, mount: &str) -> Vec<String> {
    let mut out = vec![dir.to_string()];
    let mut d = dir.to_string();
    while d.len() > mount.len() {
        match d.rfind('/') {
            Some(i) if i >= mount.len() => {
                d.truncate(i);
                out.push(d.clone());
            }
            _ => break,
        }
    }
    out
}

/// The smallest limit along the group's ancestors, read with `parse`.
fn min_limit(
    host: &HostRoot,
    dir: &str,
    mount: &str,
    file: &str,
    parse: impl Fn(&str) -> Option<Option<u64>>,
) -> (bool, Option<u64>) {
    let mut found = false;
    let mut best: Option<u64> = None;
    for d in ancestors(dir, mount) {
        if let Some(v) = host
            .read_trim(&format!("{d}/{file}"))
            .and_then(|t| parse(&t))
        {
            found = true;
            if let Some(v) = v {
                best = Some(best.map_or(v, |b| b.min(v)));
            }
        }
    }
    (found, best)
}

/// `max` → unlimited (`Some(None)`), a number → `Some(Some(n))`.
fn parse_max_or_number(text: &str) -> Option<Option<u64>> {
    if text == "max" {
        Some(None)
    } else {
        text.parse().ok().map(Some)
    }
}

/// v2 `cpu.max`: `max 100000` or `200000 100000` → CPUs.
pub fn parse_cpu_max(text: &str) -> Option<Option<f64>> {
    let mut it = text.split_whitespace();
    let quota = it.next()?;
    let period: f64 = it.next().unwrap_or("100000").parse().ok()?;
    if quota == "max" {
        return Some(None);
    }
    let q: f64 = quota.parse().ok()?;
    (period > 0.0).then_some(Some(q / period))
}

/// A limit from /proc/self/limits (`Max locked memory`, `Max open files`): soft value.
pub fn parse_limits(text: &str, name: &str) -> Option<Option<u64>> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let soft = line[name.len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        Some(None)
    } else {
        soft.parse().ok().map(Some)
    }
}

/// The `size=` option of a tmpfs mount, in bytes.
pub fn tmpfs_size_bytes(mount: &Mount) -> Option<u64> {
    mount
        .super_options
        .split(',')
        .find_map(|o| o.strip_prefix("size="))
        .and_then(crate::host::parse_size_bytes)
}

/// Read the container facts of the host. `env` is the process environment
/// (pass `std::env::vars()` live, or nothing for captured trees); `gpu_count`
/// is used to size the per-GPU checks.
pub fn inspect(
    host: &HostRoot,
    env: &[(String, String)],
    gpu_count: Option<u32>,
) -> ContainerReport {
    let mut notes = Vec::new();
    let mut evidence = Vec::new();
    let mut runtime: Option<&str> = None;

    if host.exists("/.dockerenv") {
        evidence.push("/.dockerenv exists".to_string());
        runtime = Some("docker");
    }
    if host.exists("/run/.containerenv") {
        evidence.push("/run/.containerenv exists".to_string());
        runtime = Some("podman");
    }
    let env_get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if env_get("KUBERNETES_SERVICE_HOST").is_some() {
        evidence.push("KUBERNETES_SERVICE_HOST is set".to_string());
        runtime = Some("kubernetes");
    }
    if let Some(c) = env_get("container") {
        evidence.push(format!("container={c} is set"));
        runtime = runtime.or(Some(match c {
            "podman" => "podman",
            "docker" => "docker",
            "lxc" => "lxc",
            _ => "unknown",
        }));
    }
    let pid1_cgroup = host.read("/proc/1/cgroup").unwrap_or_default();
    for (needle, name) in [
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("containerd", "containerd"),
        ("libpod", "podman"),
        ("lxc", "lxc"),
    ] {
        if pid1_cgroup.contains(needle) {
            evidence.push(format!("/proc/1/cgroup mentions {needle}"));
            runtime = runtime.or(Some(name));
        }
    }

    let proc_cgroup = parse_proc_cgroup(&host.read("/proc/self/cgroup").unwrap_or_default());
    let mounts = parse_mountinfo(&host.read("/proc/self/mountinfo").unwrap_or_default());
    let dirs = CgroupDirs::locate(&proc_cgroup, &mounts);
    if proc_cgroup.is_empty() {
        notes.push("/proc/self/cgroup could not be read: cgroup limits unknown".to_string());
    }

    // CPU quota.
    let mut cpu_quota_cpus = None;
    if let Some((dir, mount)) = &dirs.v2 {
        for d in ancestors(dir, mount) {
            if let Some(Some(q)) = host
                .read_trim(&format!("{d}/cpu.max"))
                .and_then(|t| parse_cpu_max(&t))
            {
                cpu_quota_cpus = Some(cpu_quota_cpus.map_or(q, |b: f64| b.min(q)));
            }
        }
    }
    if let Some((dir, mount)) = dirs.v1_dir("cpu") {
        for d in ancestors(dir, mount) {
            let quota: Option<i64> = host.read_num(&format!("{d}/cpu.cfs_quota_us"));
            let period: Option<i64> = host.read_num(&format!("{d}/cpu.cfs_period_us"));
            if let (Some(q), Some(p)) = (quota, period)
                && q > 0
                && p > 0
            {
                let c = q as f64 / p as f64;
                cpu_quota_cpus = Some(cpu_quota_cpus.map_or(c, |b: f64| b.min(c)));
            }
        }
    }

    // Memory limit.
    let mut memory_limit_bytes = None;
    if let Some((dir, mount)) = &dirs.v2 {
        let (_, v) = min_limit(host, dir, mount, "memory.max", parse_max_or_number);
        memory_limit_bytes = v;
    }
    if let Some((dir, mount)) = dirs.v1_dir("memory") {
        let (_, v) = min_limit(host, dir, mount, "memory.limit_in_bytes", |t| {
            t.parse::<u64>()
                .ok()
                .map(|n| (n < V1_UNLIMITED_BYTES).then_some(n))
        });
        if let Some(v) = v {
            memory_limit_bytes = Some(memory_limit_bytes.map_or(v, |b: u64| b.min(v)));
        }
    }

    // Pids limit.
    let mut pids_limit = None;
    for (dir, mount) in dirs
        .v2
        .iter()
        .map(|(d, m)| (d.as_str(), m.as_str()))
        .chain(dirs.v1_dir("pids"))
    {
        let (_, v) = min_limit(host, dir, mount, "pids.max", parse_max_or_number);
        if let Some(v) = v {
            pids_limit = Some(pids_limit.map_or(v, |b: u64| b.min(v)));
        }
    }

    // CPU sets.
    let mut cpuset_cpus = None;
    if let Some((dir, mount)) = &dirs.v2 {
        // A leaf without the cpuset controller has no cpuset.cpus.effective;
        // the nearest ancestor's set applies (the H100 device VM's layout).
        let mut d = dir.as_str();
        loop {
            cpuset_cpus = host
                .read(&format!("{d}/cpuset.cpus.effective"))
                .and_then(|t| parse_cpu_list(&t))
                .filter(|c| !c.is_empty())
                .map(|c| c.len() as u32);
            if cpuset_cpus.is_some() || d.len() <= mount.len() {
                break;
            }
            match d.rfind('/') {
                Some(i) if i >= mount.len() => d = &d[..i],
                _ => break,
            }
        }
    }
    if cpuset_cpus.is_none()
        && let Some((dir, _)) = dirs.v1_dir("cpuset")
    {
        cpuset_cpus = host
            .read(&format!("{dir}/cpuset.effective_cpus"))
            .or_else(|| host.read(&format!("{dir}/cpuset.cpus")))
            .and_then(|t| parse_cpu_list(&t))
            .filter(|c| !c.is_empty())
            .map(|c| c.len() as u32);
    }
    // Some sandboxes (the H100 device VM) have no cpu/online: count the
    // processors /proc/cpuinfo lists instead.
    let host_cpus = host
        .read("/sys/devices/system/cpu/online")
        .and_then(|t| parse_cpu_list(&t))
        .map(|c| c.len() as u32)
        .or_else(|| {
            host.read("/proc/cpuinfo")
                .map(|t| t.lines().filter(|l| l.starts_with("processor")).count() as u32)
                .filter(|&n| n > 0)
        });
    let status = host.read("/proc/self/status").unwrap_or_default();
    let affinity_cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(parse_cpu_list)
        .map(|c| c.len() as u32);
    let effective_cpus = [
        cpu_quota_cpus.map(|q| (q.floor() as u32).max(1)),
        affinity_cpus,
        cpuset_cpus,
        host_cpus,
    ]
    .into_iter()
    .flatten()
    .min();

    let host_memory_bytes = host
        .read("/proc/meminfo")
        .and_then(|t| super::procfs::meminfo_kib(&t, "MemTotal"))
        .map(|k| k * 1024);
    let shm_size_bytes = mounts
        .iter()
        .rev()
        .find(|m| m.mount_point == "/dev/shm")
        .and_then(|m| {
            if m.fs_type == "tmpfs" {
                tmpfs_size_bytes(m).or_else(|| host_memory_bytes.map(|b| b / 2))
            } else {
                None
            }
        });
    let limits = host.read("/proc/self/limits");
    let memlock_limit_bytes = limits
        .as_deref()
        .and_then(|t| parse_limits(t, "Max locked memory"))
        .flatten();
    let memlock_unlimited = limits
        .as_deref()
        .and_then(|t| parse_limits(t, "Max locked memory"))
        .is_some_and(|v| v.is_none());
    let open_files_limit = limits
        .as_deref()
        .and_then(|t| parse_limits(t, "Max open files"))
        .flatten();
    if limits.is_none() {
        notes.push("/proc/self/limits could not be read: ulimits unknown".to_string());
    }

    let in_container = !evidence.is_empty();
    let mut report = ContainerReport {
        in_container,
        runtime: runtime
            .map(str::to_string)
            .or_else(|| in_container.then(|| "unknown".to_string())),
        evidence,
        cgroup_version: dirs.version().map(str::to_string),
        cpu_quota_cpus: cpu_quota_cpus.map(|c| (c * 100.0).round() / 100.0),
        host_cpus,
        affinity_cpus,
        cpuset_cpus,
        effective_cpus,
        memory_limit_bytes,
        host_memory_bytes,
        pids_limit,
        shm_size_bytes,
        memlock_limit_bytes,
        open_files_limit,
        mismatches: Vec::new(),
        notes,
    };
    report.mismatches = mismatches(&report, memlock_unlimited, env, gpu_count);
    report
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

fn mismatches(
    r: &ContainerReport,
    memlock_unlimited: bool,
    env: &[(String, String)],
    gpu_count: Option<u32>,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    if let (Some(eff), Some(host)) = (r.effective_cpus, r.host_cpus)
        && eff < host
    {
        out.push(Mismatch {
            issue: format!("{eff} usable CPUs of the host's {host} (quota, cpuset or affinity)"),
            impact: "os.cpu_count() and many libraries see all host CPUs: OpenMP, PyTorch intra-op threads and \
                     DataLoader worker counts sized from it oversubscribe the CPUs this process may use."
                .to_string(),
            fix: format!(
                "Size workers and threads from the usable CPUs: OMP_NUM_THREADS={} (or fewer per rank), \
                 num_workers from len(os.sched_getaffinity(0)).",
                (eff / gpu_count.unwrap_or(1).max(1)).max(1)
            ),
        });
    }
    if let (Some(eff), Some(g)) = (r.effective_cpus, gpu_count)
        && g > 0
    {
        // One rank process per GPU plus 4 DataLoader workers each (a common default).
        let need = g * 5;
        if eff < need {
            out.push(Mismatch {
                issue: format!("{eff} usable CPUs for {g} GPUs ({:.1} per GPU)", eff as f64 / g as f64),
                impact: format!(
                    "A rank per GPU with 4 DataLoader workers each needs about {need} CPUs; with fewer, input \
                     pipelines starve the GPUs."
                ),
                fix: "Give the container more CPUs (--cpus / resources.limits.cpu), reduce num_workers, or move \
                      preprocessing to the GPU (DALI, torchvision.transforms.v2 on CUDA tensors)."
                    .to_string(),
            });
        }
    }
    let omp: Option<u32> = env
        .iter()
        .find(|(k, _)| k == "OMP_NUM_THREADS")
        .and_then(|(_, v)| v.trim().parse().ok());
    if let (Some(omp), Some(eff)) = (omp, r.effective_cpus)
        && omp > eff
    {
        out.push(Mismatch {
            issue: format!("OMP_NUM_THREADS={omp} exceeds the {eff} usable CPUs"),
            impact: "Threads time-share CPUs: CPU-side ops and data loading slow down.".to_string(),
            fix: format!("Set OMP_NUM_THREADS to at most {eff} divided by the ranks on this host."),
        });
    }
    if let Some(shm) = r.shm_size_bytes
        && shm < (1 << 30)
    {
        out.push(Mismatch {
            issue: format!("/dev/shm is only {} MiB", shm >> 20),
            impact: "PyTorch DataLoader workers pass batches through shared memory: with a small /dev/shm they \
                     fail with 'bus error' or 'No space left on device', and NCCL's shared-memory transport can \
                     fail too."
                .to_string(),
            fix: "Start the container with --ipc=host or --shm-size=16g (Kubernetes: an emptyDir with \
                  medium: Memory mounted at /dev/shm)."
                .to_string(),
        });
    }
    if let (Some(limit), Some(host)) = (r.memory_limit_bytes, r.host_memory_bytes)
        && limit < host
    {
        out.push(Mismatch {
            issue: format!("memory limit {} of the host's {}", gib(limit), gib(host)),
            impact: "Tools that read /proc/meminfo see the host's memory; pinned host buffers, DataLoader workers \
                     and checkpoint loading beyond the limit are OOM-killed without a Python traceback."
                .to_string(),
            fix: "Size host-side buffers and workers to the limit, or raise it (--memory / resources.limits.memory)."
                .to_string(),
        });
    }
    if let Some(p) = r.pids_limit
        && p < 4096
    {
        out.push(Mismatch {
            issue: format!("pids limit {p}"),
            impact: "Every thread counts: PyTorch, NCCL and DataLoader workers can hit it and fail with \
                     'Resource temporarily unavailable' when creating threads."
                .to_string(),
            fix: "Raise it (--pids-limit=-1 or a larger value / the pod's pids limit).".to_string(),
        });
    }
    if !memlock_unlimited
        && let Some(m) = r.memlock_limit_bytes
        && m < (1 << 30)
    {
        out.push(Mismatch {
            issue: format!("locked-memory limit (ulimit -l) is {} KiB", m >> 10),
            impact: "InfiniBand/RoCE verbs and GPUDirect RDMA register (pin) memory: NCCL over IB fails or falls \
                     back to sockets, and large pinned host buffers fail."
                .to_string(),
            fix: "Run with --ulimit memlock=-1 (or `ulimit -l unlimited` / limits.conf memlock unlimited)."
                .to_string(),
        });
    }
    if let Some(n) = r.open_files_limit
        && n < 65536
    {
        out.push(Mismatch {
            issue: format!("open-files limit (ulimit -n) is {n}"),
            impact: "DataLoader workers sharing tensors through file descriptors and datasets with many files can \
                     fail with 'Too many open files'."
                .to_string(),
            fix: "Raise it (--ulimit nofile=1048576) or use torch.multiprocessing.set_sharing_strategy('file_system')."
                .to_string(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> HostRoot {
        HostRoot::at(format!(
            "{}/tests/data/host/{name}",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ))
    }

    /// The H100 device machine (scripts/gpu-verify.sh, 2026-11-22): a
    /// cgroup v2 container with all 16 CPUs (cpuset from an ancestor), a 128 GiB
    /// memory limit set on an ancestor, and two
    /// /dev/shm mounts where the later one (128 GiB) hides the first.
    #[test]
    fn the_h100_host_sample_reads_exactly() {
        let r = inspect(&sample("h100-80gb-hbm3-x1-container"), &[], None);
        assert!(r.in_container);
        assert_eq!(r.cgroup_version.as_deref(), Some("v2"));
        assert_eq!(r.host_cpus, Some(16));
        assert_eq!(r.affinity_cpus, Some(16));
        assert_eq!(r.cpuset_cpus, Some(16));
        assert_eq!(r.effective_cpus, Some(16));
        assert_eq!(r.cpu_quota_cpus, None);
        // process_api/memory.max (the leaf says "max"): 128 GiB.
        assert_eq!(r.memory_limit_bytes, Some(137_438_953_472));
        assert_eq!(r.shm_size_bytes, Some(134_217_728 * 1024));
        assert_eq!(r.open_files_limit, Some(20_000));
    }

    #[test]
    fn the_captured_container_sample_reads_exactly() {
        let r = inspect(&sample("container-vm-2cpu"), &[], None);
        assert!(r.in_container);
        assert_eq!(r.runtime.as_deref(), Some("docker"));
        assert_eq!(r.evidence, vec!["/.dockerenv exists".to_string()]);
        assert_eq!(r.cgroup_version.as_deref(), Some("hybrid"));
        assert_eq!(r.cpu_quota_cpus, None);
        assert_eq!(r.host_cpus, Some(2));
        assert_eq!(r.affinity_cpus, Some(2));
        assert_eq!(r.cpuset_cpus, Some(2));
        assert_eq!(r.effective_cpus, Some(2));
        assert_eq!(r.memory_limit_bytes, None);
        assert_eq!(r.pids_limit, None);
        assert_eq!(r.shm_size_bytes, Some(24_683_656 * 1024));
        assert_eq!(r.memlock_limit_bytes, Some(8_388_608));
        assert_eq!(r.open_files_limit, Some(20_000));
        let issues: Vec<&str> = r.mismatches.iter().map(|m| m.issue.as_str()).collect();
        assert_eq!(
            issues,
            vec![
                "locked-memory limit (ulimit -l) is 8192 KiB",
                "open-files limit (ulimit -n) is 20000"
            ]
        );
        // With 8 GPUs the 2 CPUs are far too few.
        let r8 = inspect(
            &sample("container-vm-2cpu"),
            &[("OMP_NUM_THREADS".into(), "8".into())],
            Some(8),
        );
        assert!(
            r8.mismatches
                .iter()
                .any(|m| m.issue == "2 usable CPUs for 8 GPUs (0.2 per GPU)")
        );
        assert!(
            r8.mismatches
                .iter()
                .any(|m| m.issue == "OMP_NUM_THREADS=8 exceeds the 2 usable CPUs")
        );
    }

    #[test]
    fn cgroup_v1_paths_join_the_mount_and_walk_ancestors() {
        let mounts = parse_mountinfo(
            "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
             40 31 0:37 /docker/abc /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n",
        );
        let lines = parse_proc_cgroup("4:memory:/a/b\n1:name=systemd:/docker/abc/x\n0::/\n");
        let dirs = CgroupDirs::locate(&lines, &mounts);
        assert_eq!(dirs.version(), Some("hybrid"));
        assert_eq!(
            dirs.v1_dir("memory"),
            Some(("/sys/fs/cgroup/memory/a/b", "/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            dirs.v1_dir("systemd"),
            Some(("/sys/fs/cgroup/systemd/x", "/sys/fs/cgroup/systemd"))
        );
        assert_eq!(
            dirs.v2,
            Some((
                "/sys/fs/cgroup/unified".into(),
                "/sys/fs/cgroup/unified".into()
            ))
        );
        assert_eq!(
            ancestors("/sys/fs/cgroup/memory/a/b", "/sys/fs/cgroup/memory"),
            vec![
                "/sys/fs/cgroup/memory/a/b",
                "/sys/fs/cgroup/memory/a",
                "/sys/fs/cgroup/memory"
            ]
        );
    }

    #[test]
    fn v2_limits_parse() {
        assert_eq!(parse_cpu_max("max 100000"), Some(None));
        assert_eq!(parse_cpu_max("400000 100000"), Some(Some(4.0)));
        assert_eq!(parse_cpu_max("150000 100000\n".trim()), Some(Some(1.5)));
        assert_eq!(parse_max_or_number("max"), Some(None));
        assert_eq!(parse_max_or_number("1024"), Some(Some(1024)));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max locked memory         unlimited            unlimited            bytes     \n";
        assert_eq!(parse_limits(limits, "Max locked memory"), Some(None));
        assert_eq!(parse_limits(limits, "Max open files"), None);
        let m = parse_mountinfo("100 90 0:50 / /dev/shm rw,nosuid - tmpfs shm rw,size=65536k\n");
        assert_eq!(tmpfs_size_bytes(&m[0]), Some(64 << 20));
        assert_eq!(unescape_mount("/mnt/my\\040disk"), "/mnt/my disk");
    }
}
