//! Storage throughput of a directory: sequential and random reads and writes
//! through a temporary file, with the page cache kept out of the figures, and
//! whether GPUDirect Storage (cuFile) could be used there.
//!
//! The page cache is bypassed with `O_DIRECT` where the filesystem accepts it
//! (aligned buffers, offsets and sizes); where it does not (tmpfs, some FUSE
//! and network filesystems) the file is opened buffered, every write phase
//! ends with `fdatasync` inside the timed span, and `posix_fadvise(DONTNEED)`
//! drops the file's cached pages before each read phase. The report says which.
//!
//! Queue depth is the number of threads issuing synchronous `pread`/`pwrite`
//! at once on the one file (fio's `psync` engine with `numjobs`): it loads a
//! device the way a multi-worker data loader does, without io_uring.
//!
//! The file is unlinked right after it is created: it disappears when the
//! descriptor closes, whether the run ends normally, is cancelled, fails, or
//! the process is killed.

use aisp_base::Cancel;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

use crate::host::HostRoot;

/// Alignment for `O_DIRECT` buffers, offsets and sizes (covers 512-byte and 4 KiB sectors).
pub const ALIGN: usize = 4096;

/// What to measure.
#[derive(Debug, Clone)]
pub struct DiskOptions {
    pub dir: PathBuf,
    pub file_bytes: u64,
    /// Block size of the sequential phases.
    pub block_bytes: usize,
    /// Block size of the random phases.
    pub random_block_bytes: usize,
    /// Threads issuing I/O at once.
    pub queue_depth: u32,
    /// The whole run (four phases) stops at this time; each phase gets a quarter.
    pub time_limit: Duration,
    /// Try O_DIRECT first (false: buffered with fdatasync + DONTNEED, as on filesystems without it).
    pub allow_direct: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("{0}")]
    BadOption(String),
    #[error("`{}` is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("`{}` does not exist", .0.display())]
    NotFound(PathBuf),
    #[error(
        "not enough free space in `{}`: the test file needs {need} bytes and {free} are available",
        .dir.display()
    )]
    NoSpace { dir: PathBuf, need: u64, free: u64 },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("cancelled")]
    Cancelled,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DiskError {
    let what = what.into();
    move |source| DiskError::Io { what, source }
}

/// One phase's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DiskResult {
    /// `seq_write`, `seq_read`, `rand_write` or `rand_read`.
    pub test: String,
    pub block_bytes: usize,
    pub queue_depth: u32,
    /// Bytes moved in the timed span.
    pub bytes: u64,
    pub seconds: f64,
    /// Decimal megabytes (1e6 bytes) per second.
    pub mb_per_s: f64,
    pub iops: f64,
    /// Per-request latency percentiles, microseconds.
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    /// The phase stopped at its share of the time limit before covering the file.
    pub time_limited: bool,
}

/// Whether GPUDirect Storage could move data between this directory and GPU memory.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GdsStatus {
    /// `libcufile.so` found (paths searched are in the notes).
    pub libcufile: Option<String>,
    /// The `nvidia_fs` kernel module is loaded (needed for true peer-to-peer DMA).
    pub nvidia_fs_loaded: bool,
    /// `/proc/driver/nvidia-fs/version`, when present.
    pub nvidia_fs_version: Option<String>,
    /// `/etc/cufile.json` (or `CUFILE_ENV_PATH_JSON`) exists.
    pub cufile_json: Option<String>,
    /// The filesystem is one GDS can do peer-to-peer DMA on (ext4, xfs, lustre, wekafs, gpfs, beegfs, nfs over RDMA).
    pub filesystem_supported: Option<bool>,
    /// `p2p` (all present), `compat` (cuFile works through its POSIX fallback, no DMA) or `unavailable`.
    pub mode: String,
    pub usable: bool,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DiskReport {
    pub path: String,
    /// Filesystem type from the mount table (ext4, xfs, tmpfs, overlay, nfs, ...).
    pub filesystem: Option<String>,
    pub mount_point: Option<String>,
    pub device: Option<String>,
    pub file_bytes: u64,
    /// `o_direct`, or `fadvise_dontneed` (buffered I/O; fdatasync timed, cached pages dropped before reads).
    pub cache_bypass: String,
    pub results: Vec<DiskResult>,
    pub gds: GdsStatus,
    pub notes: Vec<String>,
}

/// Filesystems GDS supports for peer-to-peer DMA (cuFile release notes).
const GDS_FILESYSTEMS: &[&str] = &[
    "ext4", "xfs", "lustre", "wekafs", "gpfs", "beegfs", "nfs", "nfs4",
];

/// The mount entry holding `path`: (device, mount point, fs type), by longest prefix.
pub fn mount_of(mounts: &str, path: &Path) -> Option<(String, String, String)> {
    let unescape = |s: &str| s.replace("\\040", " ").replace("\\011", "\t");
    let mut best: Option<(String, String, String)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        let mp = unescape(f[1]);
        if path.starts_with(&mp) && best.as_ref().is_none_or(|b| mp.len() >= b.1.len()) {
            best = Some((unescape(f[0]), mp, f[2].to_string()));
        }
    }
    best
}

/// Where libcufile may live: LD_LIBRARY_PATH, the CUDA toolkits, the system library folders.
fn cufile_candidates(ld_library_path: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::split_paths(ld_library_path).collect();
    dirs.extend(
        [
            "/usr/local/cuda/lib64",
            "/usr/local/cuda/targets/x86_64-linux/lib",
            "/usr/local/cuda/targets/sbsa-linux/lib",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
        ]
        .map(PathBuf::from),
    );
    dirs.extend(super::exec::glob_prefix("/usr/local/cuda-*/lib64"));
    dirs
}

/// GDS readiness from the library, the kernel module, the config file and the filesystem.
pub fn gds_status(host: &HostRoot, fs: Option<&str>, ld_library_path: &str) -> GdsStatus {
    let mut reasons = Vec::new();
    let libcufile = if host.is_live() {
        cufile_candidates(ld_library_path)
            .into_iter()
            .flat_map(|d| ["libcufile.so.0", "libcufile.so"].map(|n| d.join(n)))
            .find(|p| p.exists())
            .map(|p| p.display().to_string())
    } else {
        None
    };
    let modules = host.read("/proc/modules");
    let nvidia_fs_loaded = modules
        .as_deref()
        .map(super::network::loaded_modules)
        .unwrap_or_default()
        .contains(&"nvidia_fs");
    let nvidia_fs_version = host.read_trim("/proc/driver/nvidia-fs/version");
    let json_path = std::env::var("CUFILE_ENV_PATH_JSON")
        .ok()
        .filter(|_| host.is_live())
        .unwrap_or_else(|| "/etc/cufile.json".into());
    let cufile_json = host.exists(&json_path).then_some(json_path);
    let filesystem_supported = fs.map(|f| GDS_FILESYSTEMS.contains(&f));
    if libcufile.is_none() {
        reasons.push(
            "libcufile.so not found (LD_LIBRARY_PATH, /usr/local/cuda*/lib64, system library folders): install the CUDA toolkit's GDS package (nvidia-gds)".into(),
        );
    }
    if !nvidia_fs_loaded {
        reasons.push(if modules.is_none() {
            "/proc/modules is not readable: nvidia_fs state unknown".to_string()
        } else {
            "the nvidia_fs kernel module is not loaded (modprobe nvidia_fs): without it cuFile only runs in compatibility mode (POSIX reads through host memory)".to_string()
        });
    }
    if cufile_json.is_none() {
        reasons.push("/etc/cufile.json not found: cuFile uses built-in defaults".into());
    }
    match (fs, filesystem_supported) {
        (Some(f), Some(false)) => reasons.push(format!(
            "filesystem {f} is not one GDS does peer-to-peer DMA on (ext4, xfs on local NVMe; lustre, wekafs, gpfs, beegfs, nfs over RDMA)"
        )),
        (None, _) => reasons.push("filesystem type unknown".into()),
        _ => {}
    }
    let p2p = libcufile.is_some() && nvidia_fs_loaded && filesystem_supported == Some(true);
    let mode = if p2p {
        "p2p"
    } else if libcufile.is_some() {
        "compat"
    } else {
        "unavailable"
    };
    if p2p {
        reasons.push(
            "library, nvidia_fs and filesystem are in place; the NVMe/NIC must also sit under a PCIe switch shared with the GPU for full speed (gdscheck -p checks it)".into(),
        );
    }
    GdsStatus {
        libcufile,
        nvidia_fs_loaded,
        nvidia_fs_version,
        cufile_json,
        filesystem_supported,
        mode: mode.into(),
        usable: p2p,
        reasons,
    }
}

/// A block-aligned buffer filled with incompressible bytes.
struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize, seed: u64) -> AlignedBuf {
        let mut raw = vec![0u8; len + ALIGN];
        let start = (ALIGN - (raw.as_ptr() as usize % ALIGN)) % ALIGN;
        let mut x = seed | 1;
        for chunk in raw[start..start + len].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        AlignedBuf { raw, start, len }
    }
    fn slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
    fn slice_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Pattern {
    Sequential,
    Random,
}

struct Phase<'a> {
    file: &'a File,
    write: bool,
    pattern: Pattern,
    block: usize,
    /// Bytes of the file this phase may touch (what the sequential write covered).
    extent: u64,
    qd: u32,
    budget: Duration,
    cancelled: Cancel<'a>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Run one phase: `qd` threads, each with its own buffer, until the extent is
/// covered once (sequential: every block; random: as many requests as blocks)
/// or the budget is spent.
fn run_phase(p: &Phase, name: &str) -> Result<DiskResult, DiskError> {
    let blocks = p.extent / p.block as u64;
    if blocks == 0 {
        return Err(DiskError::BadOption(format!(
            "{name}: the file holds no whole block of {} bytes",
            p.block
        )));
    }
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let deadline = started + p.budget;
    let outcomes: Vec<Result<Vec<f64>, std::io::Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..p.qd)
            .map(|t| {
                let (next, stop) = (&next, &stop);
                s.spawn(move || {
                    let mut buf = AlignedBuf::new(p.block, 0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1));
                    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ ((t as u64 + 1) << 32);
                    let mut lat = Vec::new();
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= blocks {
                            break;
                        }
                        if i % 64 == 0 && (Instant::now() >= deadline || (p.cancelled)()) {
                            stop.store(true, Ordering::Relaxed);
                            break;
                        }
                        let block_index = match p.pattern {
                            Pattern::Sequential => i,
                            Pattern::Random => {
                                rng ^= rng << 13;
                                rng ^= rng >> 7;
                                rng ^= rng << 17;
                                rng % blocks
                            }
                        };
                        let off = block_index * p.block as u64;
                        let t0 = Instant::now();
                        let r = if p.write {
                            p.file.write_all_at(buf.slice(), off)
                        } else {
                            p.file.read_exact_at(buf.slice_mut(), off)
                        };
                        if let Err(e) = r {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        lat.push(t0.elapsed().as_secs_f64() * 1e6);
                    }
                    Ok(lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("an I/O thread panicked")))
            })
            .collect()
    });
    let mut lat = Vec::new();
    for o in outcomes {
        lat.extend(o.map_err(io(format!("{name} on the test file")))?);
    }
    if (p.cancelled)() {
        return Err(DiskError::Cancelled);
    }
    if p.write {
        // Data on the device, not in a cache, is what a write costs.
        p.file
            .sync_data()
            .map_err(io(format!("{name}: fdatasync")))?;
    }
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    let requests = lat.len() as u64;
    let bytes = requests * p.block as u64;
    lat.sort_by(|a, b| a.total_cmp(b));
    Ok(DiskResult {
        test: name.to_string(),
        block_bytes: p.block,
        queue_depth: p.qd,
        bytes,
        seconds: (seconds * 1e4).round() / 1e4,
        mb_per_s: r1(bytes as f64 / seconds / 1e6),
        iops: r1(requests as f64 / seconds),
        latency_p50_us: r1(percentile(&lat, 0.5)),
        latency_p99_us: r1(percentile(&lat, 0.99)),
        time_limited: requests < blocks,
    })
}

/// Drop the file's cached pages (buffered mode) so reads come from the device.
fn drop_cache(f: &File) -> Result<(), DiskError> {
    f.sync_data()
        .map_err(io("fdatasync before dropping the cache"))?;
    // SAFETY: a valid descriptor; posix_fadvise only advises the kernel.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(DiskError::Io {
            what: "posix_fadvise(DONTNEED)".into(),
            source: std::io::Error::from_raw_os_error(rc),
        });
    }
    Ok(())
}

fn advise(f: &File, advice: libc::c_int) {
    // SAFETY: as above; failure only loses a hint.
    let _ = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, advice) };
}

/// Free bytes for unprivileged users on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into a zeroed struct we own; c is NUL-terminated.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    (rc == 0).then(|| s.f_bavail as u64 * s.f_frsize as u64)
}

/// Create the test file, unlinked at once; `O_DIRECT` when the filesystem takes it.
fn create_test_file(
    dir: &Path,
    allow_direct: bool,
    notes: &mut Vec<String>,
) -> Result<(File, bool), DiskError> {
    if !allow_direct {
        return create_test_file_buffered(dir);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = dir.join(format!(".aisp-disk-{}-{nanos}.tmp", std::process::id()));
    let open = |direct: bool| {
        let mut o = OpenOptions::new();
        o.read(true).write(true).create_new(true);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&path)
    };
    let (file, direct) = match open(true) {
        Ok(f) => (f, true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            // Linux creates the file before it refuses the flag (tmpfs).
            let _ = std::fs::remove_file(&path);
            (
                open(false).map_err(io(format!("creating {}", path.display())))?,
                false,
            )
        }
        Err(e) => return Err(io(format!("creating {}", path.display()))(e)),
    };
    // Gone from the directory now; the space is freed when `file` closes.
    std::fs::remove_file(&path).map_err(io(format!("unlinking {}", path.display())))?;
    if direct {
        // Some filesystems accept the flag at open and refuse the I/O.
        let probe = AlignedBuf::new(ALIGN, 7);
        match file.write_all_at(probe.slice(), 0) {
            Ok(()) => {
                file.set_len(0).map_err(io("truncating the test file"))?;
                return Ok((file, true));
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                notes.push("the filesystem accepted O_DIRECT at open but refused aligned direct writes; fell back to buffered I/O".into());
                drop(file);
                return create_test_file_buffered(dir);
            }
            Err(e) => return Err(io("first direct write")(e)),
        }
    }
    Ok((file, false))
}

fn create_test_file_buffered(dir: &Path) -> Result<(File, bool), DiskError> {
    let path = dir.join(format!(".aisp-disk-{}-b.tmp", std::process::id()));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io(format!("creating {}", path.display())))?;
    std::fs::remove_file(&path).map_err(io(format!("unlinking {}", path.display())))?;
    Ok((f, false))
}

/// Measure the four phases in `opts.dir`.
pub fn measure(
    opts: &DiskOptions,
    host: &HostRoot,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(&str),
) -> Result<DiskReport, DiskError> {
    for (name, b) in [
        ("block size", opts.block_bytes),
        ("random block size", opts.random_block_bytes),
    ] {
        if b == 0 || !b.is_multiple_of(ALIGN) {
            return Err(DiskError::BadOption(format!(
                "{name} must be a positive multiple of 4 KiB, got {b} bytes"
            )));
        }
    }
    if opts.file_bytes < opts.block_bytes.max(opts.random_block_bytes) as u64 {
        return Err(DiskError::BadOption(
            "the file must hold at least one block".into(),
        ));
    }
    if opts.queue_depth == 0 {
        return Err(DiskError::BadOption(
            "queue depth must be at least 1".into(),
        ));
    }
    let dir = match std::fs::metadata(&opts.dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(DiskError::NotFound(opts.dir.clone()));
        }
        Err(e) => return Err(io(format!("reading {}", opts.dir.display()))(e)),
        Ok(m) if !m.is_dir() => return Err(DiskError::NotADirectory(opts.dir.clone())),
        Ok(_) => std::fs::canonicalize(&opts.dir).map_err(io("resolving the path"))?,
    };
    let file_bytes = opts.file_bytes / opts.block_bytes as u64 * opts.block_bytes as u64;
    let free = free_bytes(&dir).unwrap_or(u64::MAX);
    // Leave the filesystem at least 10% of what was free, and 64 MiB.
    let need = file_bytes + (64 << 20);
    if need > free || file_bytes > free / 10 * 9 {
        return Err(DiskError::NoSpace { dir, need, free });
    }
    let mut notes = Vec::new();
    let mounts = host.read("/proc/self/mounts").unwrap_or_default();
    let mount = mount_of(&mounts, &dir);
    let fs = mount.as_ref().map(|m| m.2.clone());
    let (file, direct) = create_test_file(&dir, opts.allow_direct, &mut notes)?;
    if !direct {
        notes.push(format!(
            "O_DIRECT {} on {} here: buffered I/O, each write phase ends with fdatasync inside the timing, and posix_fadvise(DONTNEED) drops the cached pages before each read phase",
            if opts.allow_direct { "is not supported" } else { "was not asked for" },
            fs.as_deref().unwrap_or("this filesystem")
        ));
    }
    if matches!(fs.as_deref(), Some("tmpfs" | "ramfs")) {
        notes.push(
            "tmpfs lives in RAM: these are memory-copy speeds, not a storage device's".into(),
        );
    }
    if fs.as_deref() == Some("overlay") {
        notes.push("overlay filesystem (a container layer): the figures are those of the upper layer's backing filesystem; mount a volume to measure the data disk".into());
    }
    let budget = opts.time_limit / 4;
    let phase = |write, pattern, block, extent| Phase {
        file: &file,
        write,
        pattern,
        block,
        extent,
        qd: opts.queue_depth,
        budget,
        cancelled,
    };
    let mut results = Vec::new();
    progress("sequential write");
    let w = run_phase(
        &phase(true, Pattern::Sequential, opts.block_bytes, file_bytes),
        "seq_write",
    )?;
    let extent = w.bytes;
    results.push(w);
    if !direct {
        drop_cache(&file)?;
    }
    progress("sequential read");
    advise(&file, libc::POSIX_FADV_SEQUENTIAL);
    results.push(run_phase(
        &phase(false, Pattern::Sequential, opts.block_bytes, extent),
        "seq_read",
    )?);
    if !direct {
        drop_cache(&file)?;
    }
    advise(&file, libc::POSIX_FADV_RANDOM);
    progress("random read");
    results.push(run_phase(
        &phase(false, Pattern::Random, opts.random_block_bytes, extent),
        "rand_read",
    )?);
    progress("random write");
    results.push(run_phase(
        &phase(true, Pattern::Random, opts.random_block_bytes, extent),
        "rand_write",
    )?);
    if extent < file_bytes {
        notes.push(format!(
            "the sequential write covered {extent} of {file_bytes} bytes within its {:.1} s share of the time limit; the other phases used that part",
            budget.as_secs_f64()
        ));
    }
    drop(file);
    let ld = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let gds = gds_status(host, fs.as_deref(), &ld);
    Ok(DiskReport {
        path: dir.display().to_string(),
        filesystem: fs,
        mount_point: mount.as_ref().map(|m| m.1.clone()),
        device: mount.map(|m| m.0),
        file_bytes,
        cache_bypass: if direct {
            "o_direct"
        } else {
            "fadvise_dontneed"
        }
        .into(),
        results,
        gds,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_lookup_takes_the_longest_prefix() {
        let m = "/dev/sda1 / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n/dev/nvme0n1 /data\\040x xfs rw 0 0\n";
        let (_, mp, fs) = mount_of(m, Path::new("/tmp/a")).unwrap();
        assert_eq!((mp.as_str(), fs.as_str()), ("/tmp", "tmpfs"));
        assert_eq!(mount_of(m, Path::new("/data x/y")).unwrap().2, "xfs");
        assert_eq!(mount_of(m, Path::new("/home")).unwrap().2, "ext4");
    }

    fn options(dir: &Path, allow_direct: bool) -> DiskOptions {
        DiskOptions {
            dir: dir.to_path_buf(),
            file_bytes: 16 << 20,
            block_bytes: 1 << 20,
            random_block_bytes: 4096,
            queue_depth: 2,
            time_limit: Duration::from_secs(60),
            allow_direct,
        }
    }

    #[test]
    fn both_cache_bypass_modes_measure_every_phase_and_leave_nothing() {
        let d = tempfile::tempdir().unwrap();
        for direct in [true, false] {
            let r = measure(
                &options(d.path(), direct),
                &HostRoot::live(),
                &|| false,
                &|_| {},
            )
            .unwrap();
            let names: Vec<&str> = r.results.iter().map(|x| x.test.as_str()).collect();
            assert_eq!(names, ["seq_write", "seq_read", "rand_read", "rand_write"]);
            for x in &r.results {
                // Each phase covers the 16 MiB file once: 16 blocks of 1 MiB or 4096 of 4 KiB.
                assert_eq!(x.bytes, 16 << 20, "{x:?}");
                assert!(!x.time_limited);
                assert!(
                    x.mb_per_s > 0.0 && x.latency_p50_us <= x.latency_p99_us,
                    "{x:?}"
                );
                let iops = x.bytes as f64 / x.block_bytes as f64 / x.seconds;
                assert!((x.iops - iops).abs() / iops < 0.05, "{x:?}");
            }
            if !direct {
                assert_eq!(r.cache_bypass, "fadvise_dontneed");
                assert!(
                    r.notes
                        .iter()
                        .any(|n| n.contains("posix_fadvise(DONTNEED)"))
                );
            }
            assert_eq!(
                std::fs::read_dir(d.path()).unwrap().count(),
                0,
                "test file left behind"
            );
        }
    }

    #[test]
    fn bad_options_and_cancellation_are_errors_that_leave_nothing() {
        let d = tempfile::tempdir().unwrap();
        let mut o = options(d.path(), true);
        o.block_bytes = 1000;
        assert!(matches!(
            measure(&o, &HostRoot::live(), &|| false, &|_| {}),
            Err(DiskError::BadOption(_))
        ));
        let o = options(&d.path().join("missing"), true);
        assert!(matches!(
            measure(&o, &HostRoot::live(), &|| false, &|_| {}),
            Err(DiskError::NotFound(_))
        ));
        let mut o = options(d.path(), true);
        o.file_bytes = u64::MAX / 2;
        assert!(matches!(
            measure(&o, &HostRoot::live(), &|| false, &|_| {}),
            Err(DiskError::NoSpace { .. })
        ));
        let e = measure(
            &options(d.path(), true),
            &HostRoot::live(),
            &|| true,
            &|_| {},
        )
        .unwrap_err();
        assert!(matches!(e, DiskError::Cancelled));
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn gds_needs_library_module_and_filesystem() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/driver/nvidia-fs")).unwrap();
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::write(
            d.path().join("proc/modules"),
            "nvidia_fs 1 0 - Live\nnvidia 2 0\n",
        )
        .unwrap();
        std::fs::write(d.path().join("proc/driver/nvidia-fs/version"), "2.17\n").unwrap();
        std::fs::write(d.path().join("etc/cufile.json"), "{}").unwrap();
        let host = HostRoot::at(d.path());
        let g = gds_status(&host, Some("tmpfs"), "");
        assert!(g.nvidia_fs_loaded);
        assert_eq!(g.nvidia_fs_version.as_deref(), Some("2.17"));
        assert_eq!(g.cufile_json.as_deref(), Some("/etc/cufile.json"));
        assert_eq!(g.filesystem_supported, Some(false));
        // A sample root never claims the live host's library.
        assert!(g.libcufile.is_none());
        assert!(!g.usable);
        assert_eq!(g.mode, "unavailable");
        assert!(g.reasons.iter().any(|r| r.contains("tmpfs")));
    }
}
