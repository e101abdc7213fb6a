//! Small parsers for /proc files. Each takes the file's text so that tests can
//! feed captured samples.

/// Aggregate CPU time counters from the first `cpu ` line of /proc/stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Time spent doing anything but idling or waiting for I/O (jiffies).
    pub busy: u64,
    /// Total time (jiffies).
    pub total: u64,
}

impl CpuTimes {
    /// Busy percentage between two readings (0–100), `None` if no time passed.
    pub fn util_pct_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let busy = self.busy.checked_sub(earlier.busy)?;
        (total > 0).then(|| 100.0 * busy as f64 / total as f64)
    }
}

pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    if fields.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is already in user).
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    Some(CpuTimes {
        busy: total - idle,
        total,
    })
}

/// A value in kB from /proc/meminfo (e.g. `MemTotal`).
pub fn meminfo_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The 1-minute load average from /proc/loadavg.
pub fn loadavg_1m(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\nintr 1\n";
    const STAT_B: &str = "cpu  160 0 90 900 50 0 0 0 0 0\n";

    #[test]
    fn cpu_utilization_is_busy_over_total_between_readings() {
        let a = parse_proc_stat(STAT_A).unwrap();
        let b = parse_proc_stat(STAT_B).unwrap();
        assert_eq!(
            a,
            CpuTimes {
                busy: 150,
                total: 1000
            }
        );
        // 100 busy jiffies out of 200 elapsed.
        assert_eq!(b.util_pct_since(&a), Some(50.0));
        assert_eq!(a.util_pct_since(&a), None);
        assert!(parse_proc_stat("intr 1\n").is_none());
    }

    #[test]
    fn meminfo_and_loadavg_parse() {
        let mem =
            "MemTotal:       24568436 kB\nMemFree:        1 kB\nMemAvailable:   23000000 kB\n";
        assert_eq!(meminfo_kib(mem, "MemTotal"), Some(24_568_436));
        assert_eq!(meminfo_kib(mem, "MemAvailable"), Some(23_000_000));
        assert_eq!(meminfo_kib(mem, "Mem"), None);
        assert_eq!(loadavg_1m("0.52 0.58 0.59 1/189 12345\n"), Some(0.52));
    }
}
