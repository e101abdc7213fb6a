//! Where /proc, /sys and /etc are read from: `/` on a live host, or a tree
//! captured by `scripts/capture-host-samples.sh` (tests/data/host/<name>/) in
//! tests. Every system reader takes a [`HostRoot`] so that the same code runs
//! on both.
//!
//! A captured tree cannot hold sysfs symbolic links (they point outside the
//! tree), so the capture script writes the resolved target of a link `L` to a
//! file `L.link`; [`HostRoot::resolve`] reads it.

pub mod pci;

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoot {
    root: PathBuf,
    live: bool,
}

impl HostRoot {
    /// The running host.
    pub fn live() -> HostRoot {
        HostRoot {
            root: PathBuf::from("/"),
            live: true,
        }
    }

    /// A captured tree (its directories mirror `/`).
    pub fn at(root: impl Into<PathBuf>) -> HostRoot {
        HostRoot {
            root: root.into(),
            live: false,
        }
    }

    /// True for the running host (values that only exist live, such as
    /// `statvfs` or the environment, may be read).
    pub fn is_live(&self) -> bool {
        self.live
    }

    fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// The file's text, or `None` when it is missing or unreadable (sysfs
    /// files such as a down interface's `speed` fail on read).
    pub fn read(&self, abs: &str) -> Option<String> {
        std::fs::read_to_string(self.path(abs)).ok()
    }

    /// The file's text with surrounding whitespace removed; `None` when
    /// missing, unreadable or empty.
    pub fn read_trim(&self, abs: &str) -> Option<String> {
        self.read(abs)
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
    }

    /// The file's content parsed as a number (`None` when missing or not a number).
    pub fn read_num<T: std::str::FromStr>(&self, abs: &str) -> Option<T> {
        self.read_trim(abs)?.parse().ok()
    }

    pub fn exists(&self, abs: &str) -> bool {
        let p = self.path(abs);
        p.exists() || (!self.live && self.path(&format!("{abs}.link")).exists())
    }

    /// Names in a directory, sorted (empty when it does not exist). In a
    /// captured tree the `.link` side files are listed under the link's name.
    pub fn list(&self, abs: &str) -> Vec<String> {
        let mut names: Vec<String> = match std::fs::read_dir(self.path(abs)) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .map(|n| match (self.live, n.strip_suffix(".link")) {
                    (false, Some(base)) => base.to_string(),
                    _ => n,
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort_by(|a, b| natural_cmp(a, b));
        names.dedup();
        names
    }

    /// Where a path resolves (following symbolic links), as an absolute path
    /// on the host (e.g. `/sys/devices/pci0000:00/0000:00:03.0`).
    pub fn resolve(&self, abs: &str) -> Option<String> {
        if self.live {
            return std::fs::canonicalize(self.path(abs))
                .ok()
                .map(|p| p.display().to_string());
        }
        if let Some(target) = self.read_trim(&format!("{abs}.link")) {
            return Some(target);
        }
        let p = self.path(abs);
        p.exists().then(|| abs.to_string())
    }

    /// The root this reads from.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Compare names so that `cpu2` sorts before `cpu10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> (&str, Option<u64>) {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head, tail.parse().ok())
    }
    let (ha, na) = split(a);
    let (hb, nb) = split(b);
    ha.cmp(hb).then(na.cmp(&nb)).then(a.cmp(b))
}

/// Parse a kernel CPU list such as `0-3,8-11,16` (sysfs `cpulist` files,
/// `Cpus_allowed_list`). `None` when the text is not a CPU list.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Some(cpus);
    }
    for part in text.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 20 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Write CPUs as the kernel does: `0-3,8-11,16`.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Parse sizes as sysfs and /proc write them: `32K`, `1024K`, `36608K`,
/// `2048 kB`, `1G`, a bare number of bytes.
pub fn parse_size_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..digits_end].parse().ok()?;
    let unit = t[digits_end..].trim().to_ascii_lowercase();
    let mult: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("0-1"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
        let big: Vec<u32> = (0..56).chain(112..168).collect();
        assert_eq!(format_cpu_list(&big), "0-55,112-167");
    }

    #[test]
    fn sizes_parse_in_sysfs_units() {
        assert_eq!(parse_size_bytes("32K"), Some(32 * 1024));
        assert_eq!(parse_size_bytes("2048 kB"), Some(2048 * 1024));
        assert_eq!(parse_size_bytes("1G"), Some(1 << 30));
        assert_eq!(parse_size_bytes("4096"), Some(4096));
        assert_eq!(parse_size_bytes("12 furlongs"), None);
    }

    #[test]
    fn names_sort_naturally() {
        let mut v = vec!["cpu10", "cpu2", "cpu1", "cpufreq"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["cpu1", "cpu2", "cpu10", "cpufreq"]);
    }

    #[test]
    fn captured_trees_resolve_links_through_side_files() {
        let host = HostRoot::at(concat!(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../.."),
            "/tests/data/host/container-vm-2cpu"
        ));
        assert!(!host.is_live());
        assert_eq!(
            host.resolve("/sys/class/net/eth0/device").as_deref(),
            Some("/sys/devices/pci0000:00/0000:00:03.0/virtio2")
        );
        assert!(host.list("/sys/class/net").contains(&"eth0".to_string()));
        assert_eq!(host.read_num::<u32>("/sys/class/net/eth0/mtu"), Some(1400));
        assert_eq!(host.read("/nonexistent"), None);
    }
}
