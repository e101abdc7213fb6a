//! The small vocabulary every aisp library crate may share, and nothing else:
//! cancellation and progress of long work ([`Cancel`], [`Progress`]), fresh
//! ids ([`random_u64`], [`new_id`]), where aisp keeps its files
//! ([`default_home`]) and how it writes the files a caller names
//! ([`safe_write`]: no link followed, nothing replaced unasked, no debris). It has no heavy dependencies and knows nothing of the
//! application above it: the application's `OpContext` adapts to these types.

use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;

pub mod safe_write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether the caller has given up: long work (profile scans, captures,
/// benchmarks, disk and network measurements) checks it between units of work
/// and stops with its own `Cancelled` error.
pub type Cancel<'a> = &'a (dyn Fn() -> bool + Sync);

/// `(what, done, total)`.
type ProgressReport = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

/// Receives progress of long work: after `after` has passed, about four
/// reports a second of `(what, done, total)` (a profile scan reports
/// `(table, pages read, pages in all)`).
#[derive(Clone)]
pub struct Progress {
    pub after: Duration,
    report: ProgressReport,
    last: Arc<Mutex<Option<Instant>>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}

impl Progress {
    pub fn new(after: Duration, report: impl Fn(&str, u64, u64) + Send + Sync + 'static) -> Self {
        Progress {
            after,
            report: Arc::new(report),
            last: Arc::new(Mutex::new(None)),
        }
    }

    /// Report `done` of `total` for `what`, at most about four times a second
    /// (the last report, `done == total`, always goes through).
    pub fn tick(&self, what: &str, done: u64, total: u64) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < Duration::from_millis(250)) && done < total {
            return;
        }
        *last = Some(Instant::now());
        drop(last);
        (self.report)(what, done, total);
    }
}

/// A fresh, unpredictable random number for ids (jobs, conversations, capture
/// and benchmark runs, upload and temporary file names): the process's random
/// hash keys (from the OS's randomness) over a process-wide counter, the time
/// and the process id, so two calls in the same nanosecond, in one process or
/// two, still differ.
pub fn random_u64() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// A fresh id `<prefix>_<16 hex digits>` (`job_…`, `conv_…`).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", random_u64())
}

/// The platform data directory, e.g. `~/.local/share/aisp`.
pub fn default_home() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("aisp"))
        .unwrap_or_else(|| std::env::temp_dir().join("aisp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_prefix_and_differ() {
        let a = new_id("job");
        let b = new_id("job");
        assert!(a.starts_with("job_") && a.len() == 4 + 16, "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn progress_is_throttled_but_the_end_goes_through() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let p = Progress::new(Duration::ZERO, move |w, d, t| {
            s.lock().unwrap().push((w.to_string(), d, t))
        });
        p.tick("t", 1, 10);
        p.tick("t", 2, 10);
        p.tick("t", 10, 10);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.first(), Some(&("t".to_string(), 1, 10)));
        assert_eq!(seen.last(), Some(&("t".to_string(), 10, 10)));
        assert_eq!(seen.len(), 2);
    }
}
