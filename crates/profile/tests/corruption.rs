//! Seeded corruption of real inputs: about 2,000 mutations of the `mock` and
//! `train_good` exports (flipped bytes, truncated pages, swapped pages, wrong
//! page types, b-tree and overflow-chain loops, a lying header) read by the
//! hand-written b-tree reader (`profile::fastscan`) next to SQLite, plus
//! mutated Kineto traces and ncu CSV pages through their parsers.
//!
//! Each case must give SQLite's answer or a clean error, within a time bound,
//! without a panic (counted by a panic hook, since the scan's worker threads
//! would otherwise turn one into an error) and without growing memory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use aisp_profile::fastscan;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(name)
}

/// xorshift64*: the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A table the fast path reads: its root page and column count.
struct Table {
    name: String,
    root: u32,
    columns: usize,
}

fn event_tables(path: &Path) -> Vec<Table> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, rootpage FROM sqlite_master WHERE type = 'table' AND rootpage > 0")
        .unwrap();
    let rows: Vec<(String, u32)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = Vec::new();
    for (name, root) in rows {
        let cols: Vec<String> = conn
            .prepare(&format!("PRAGMA table_info(\"{name}\")"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        // The tables the fast path is used on: events with a start column.
        if cols.iter().any(|c| c == "start") {
            out.push(Table {
                name,
                root,
                columns: cols.len(),
            });
        }
    }
    out
}

/// What SQLite reads: every column as the profile model reads integers.
/// On an error, the rows read before it come with it.
type Rows = Vec<Vec<i64>>;

fn sqlite_rows(path: &Path, t: &Table) -> Result<Rows, (Rows, String)> {
    let mut read = Vec::new();
    sqlite_rows_into(path, t, &mut read).map_err(|e| (std::mem::take(&mut read), e))?;
    Ok(read)
}

fn sqlite_rows_into(path: &Path, t: &Table, out: &mut Vec<Vec<i64>>) -> Result<(), String> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM \"{}\" ORDER BY rowid", t.name))
        .map_err(|e| e.to_string())?;
    let mut rows = stmt.raw_query();
    loop {
        match rows.next() {
            Ok(Some(r)) => out.push(
                (0..t.columns)
                    .map(|i| match r.get_ref(i) {
                        Ok(ValueRef::Integer(v)) => v,
                        Ok(ValueRef::Real(f)) => f as i64,
                        _ => 0,
                    })
                    .collect(),
            ),
            Ok(None) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn fast_rows(path: &Path, t: &Table, threads: usize) -> Result<Vec<Vec<i64>>, String> {
    let cols: Vec<usize> = (0..t.columns).collect();
    fastscan::scan(
        path,
        t.root,
        &cols,
        threads,
        Vec::new,
        |a: &mut Vec<Vec<i64>>, v| a.push(v.to_vec()),
    )
    .map(|parts| parts.into_iter().flatten().collect())
    .map_err(|e| e.0)
}

/// The kinds of damage, each at a seeded place.
fn mutate(good: &[u8], page: usize, kind: usize, rng: &mut Rng) -> (Vec<u8>, &'static str) {
    let mut bad = good.to_vec();
    let pages = good.len() / page;
    let pick_page = |rng: &mut Rng| 1 + rng.below(pages.saturating_sub(1)); // never page 0 (the header)
    match kind {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let i = 100 + rng.below(bad.len() - 100);
                bad[i] ^= 1 << rng.below(8);
            }
            (bad, "flipped bits")
        }
        1 => {
            for _ in 0..1 + rng.below(64) {
                let i = 100 + rng.below(bad.len() - 100);
                bad[i] = rng.next() as u8;
            }
            (bad, "random bytes")
        }
        2 => {
            let keep = 1 + rng.below(pages - 1);
            bad.truncate(keep * page);
            (bad, "truncated at a page")
        }
        3 => {
            let cut = 100 + rng.below(bad.len() - 100);
            bad.truncate(cut);
            (bad, "truncated mid-page")
        }
        4 => {
            let (a, b) = (pick_page(rng), pick_page(rng));
            if a != b {
                let (lo, hi) = (a.min(b), a.max(b));
                let (left, right) = bad.split_at_mut(hi * page);
                left[lo * page..(lo + 1) * page].swap_with_slice(&mut right[..page]);
            }
            (bad, "swapped pages")
        }
        5 => {
            let p = pick_page(rng);
            const TYPES: [u8; 6] = [0x02, 0x05, 0x0a, 0x0d, 0x00, 0xff];
            bad[p * page] = TYPES[rng.below(TYPES.len())];
            (bad, "wrong page type")
        }
        6 => {
            // An interior page whose right-most child is itself (a b-tree loop),
            // or any page whose first word (an overflow page's next pointer) is itself.
            let p = pick_page(rng);
            let me = (p as u32 + 1).to_be_bytes();
            if bad[p * page] == 0x05 {
                bad[p * page + 8..p * page + 12].copy_from_slice(&me);
            } else {
                bad[p * page..p * page + 4].copy_from_slice(&me);
            }
            (bad, "loop to itself")
        }
        7 => {
            // Every interior page's right child points at the root's first page: loops everywhere.
            let target = (1 + rng.below(pages) as u32).to_be_bytes();
            for p in 1..pages {
                if bad[p * page] == 0x05 && rng.below(2) == 0 {
                    bad[p * page + 8..p * page + 12].copy_from_slice(&target);
                }
            }
            (bad, "interior pointers redirected")
        }
        8 => {
            // A cell pointer or cell count that lies.
            let p = pick_page(rng);
            let at = p * page + 3 + rng.below(6);
            bad[at] = rng.next() as u8;
            (bad, "page header field")
        }
        _ => {
            // The database header: page size, page count, reserved bytes.
            const FIELDS: [usize; 5] = [16, 17, 20, 28, 31];
            let f = FIELDS[rng.below(FIELDS.len())];
            bad[f] = rng.next() as u8;
            (bad, "database header")
        }
    }
}

/// Run `f` with a time bound; a hang fails the test instead of stalling it.
fn bounded<T: Send + 'static>(
    limit: Duration,
    what: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {limit:?} (a hang)"),
    }
}

fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0)
        / 1024
}

#[derive(Default, Debug, Clone)]
struct Tally {
    cases: usize,
    same_answer: usize,
    fast_gave_up: usize,
    both_refused: usize,
    sqlite_refused_fast_read: usize,
}

#[test]
fn mutated_exports_read_like_sqlite_or_fail_cleanly() {
    count_panics();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut tally = Tally::default();
    let mut by_kind: std::collections::BTreeMap<&'static str, Tally> = Default::default();
    let mut rng = Rng(0x5EED_0013_C0FF_EE01);
    for (name, cases) in [("mock.sqlite", 1200), ("train_good.sqlite", 800)] {
        let good = std::fs::read(data(name)).unwrap();
        let page = u16::from_be_bytes([good[16], good[17]]) as usize;
        let tables = event_tables(&data(name));
        assert!(!tables.is_empty(), "{name}");
        for case in 0..cases {
            let kind = case % 10;
            let (bad, what) = mutate(&good, page, kind, &mut rng);
            let path = dir.path().join(format!("case-{case}.sqlite"));
            std::fs::write(&path, &bad).unwrap();
            let t = &tables[case % tables.len()];
            let threads = 1 + case % 2;
            let label = format!("{name} case {case} ({what}) table {}", t.name);
            let (p2, t2) = (
                path.clone(),
                Table {
                    name: t.name.clone(),
                    root: t.root,
                    columns: t.columns,
                },
            );
            let (fast, slow) = bounded(Duration::from_secs(20), label.clone(), move || {
                (fast_rows(&p2, &t2, threads), sqlite_rows(&p2, &t2))
            });
            for t in [&mut tally, by_kind.entry(what).or_default()] {
                t.cases += 1;
                match (&fast, &slow) {
                    (Ok(f), Ok(s)) => {
                        assert!(
                            f == s,
                            "{label}: the fast path read {} rows that differ from SQLite's {}",
                            f.len(),
                            s.len()
                        );
                        t.same_answer += 1;
                    }
                    (Err(_), Ok(_)) => t.fast_gave_up += 1,
                    (Err(_), Err(_)) => t.both_refused += 1,
                    // SQLite stopped at damage the fast path does not read (a
                    // text column's overflow chain, the schema page, free-block
                    // lists): every row SQLite did read must match.
                    (Ok(f), Err((s, _))) => {
                        assert!(
                            f.len() >= s.len() && f[..s.len()] == s[..],
                            "{label}: the fast path disagrees with the {} rows SQLite read before its error",
                            s.len()
                        );
                        t.sqlite_refused_fast_read += 1;
                    }
                }
            }
            let _ = std::fs::remove_file(&path);
        }
    }
    eprintln!(
        "{tally:?} in {:?}, peak RSS {} MiB",
        started.elapsed(),
        peak_rss_mib()
    );
    for (k, t) in &by_kind {
        eprintln!("  {k}: {t:?}");
    }
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "panics while reading damaged files"
    );
    assert!(tally.cases >= 2000);
    assert!(
        tally.same_answer > 100 && tally.fast_gave_up + tally.both_refused > 100,
        "{tally:?}"
    );
    assert!(
        peak_rss_mib() < 1024,
        "memory grew to {} MiB",
        peak_rss_mib()
    );
}

#[test]
fn mutated_exports_through_the_profile_model_answer_or_fail_cleanly() {
    // The whole reader (header check, schema discovery, fast path with SQL
    // fallback, the summary report) on damaged files: an answer or a
    // ProfileError, never a panic or a hang.
    count_panics();
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(data("mock.sqlite")).unwrap();
    let page = u16::from_be_bytes([good[16], good[17]]) as usize;
    let mut rng = Rng(0xC0DE_0013_0000_0002);
    let (mut answered, mut refused) = (0, 0);
    for case in 0..120 {
        let (bad, what) = mutate(&good, page, case % 10, &mut rng);
        let path = dir.path().join(format!("m{case}.sqlite"));
        std::fs::write(&path, &bad).unwrap();
        let p2 = path.clone();
        let ok = bounded(
            Duration::from_secs(30),
            format!("model case {case} ({what})"),
            move || {
                let p = aisp_profile::open(&p2).map_err(|e| e.to_string())?;
                let scope = p.resolve(&Default::default()).map_err(|e| e.to_string())?;
                aisp_profile::summary::summary(&p, &scope, &Default::default())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        );
        match ok {
            Ok(()) => answered += 1,
            Err(_) => refused += 1,
        }
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
    assert!(
        answered > 0 && refused > 0,
        "answered {answered}, refused {refused}"
    );
}

fn xz_text(name: &str) -> String {
    let bytes = std::fs::read(data(name)).unwrap();
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn mutated_kineto_traces_and_ncu_pages_parse_or_fail_cleanly() {
    count_panics();
    let started = Instant::now();
    let mut rng = Rng(0xFEED_0013_0000_0003);
    let trace = xz_text("capture/train_good.kineto.json.xz");
    let raw = std::fs::read_to_string(data("capture/train_good.ncu-raw.csv")).unwrap();
    let details = std::fs::read_to_string(data("capture/train_good.ncu-details.csv")).unwrap();
    let mutate_text = |text: &str, rng: &mut Rng| -> String {
        let mut b = text.as_bytes().to_vec();
        match rng.below(4) {
            0 => {
                for _ in 0..1 + rng.below(16) {
                    let i = rng.below(b.len());
                    b[i] = b"{}[]\",:0123456789.e-x \n\\"[rng.below(24)];
                }
            }
            1 => b.truncate(rng.below(b.len())),
            2 => {
                // A duplicated slice: deep nesting and repeated keys.
                let a = rng.below(b.len());
                let len = rng.below(4096).min(b.len() - a);
                let chunk = b[a..a + len].to_vec();
                let at = rng.below(b.len());
                b.splice(at..at, chunk);
            }
            _ => {
                let i = rng.below(b.len());
                b.insert(i, 0xff);
            }
        }
        String::from_utf8_lossy(&b).into_owned()
    };
    let (mut ok, mut err) = (0, 0);
    for case in 0..80 {
        let text = mutate_text(&trace, &mut rng);
        let r = bounded(
            Duration::from_secs(20),
            format!("kineto case {case}"),
            move || aisp_profile::kineto::parse(Path::new("t.json"), &text).map(|t| t.events),
        );
        if r.is_ok() { ok += 1 } else { err += 1 }
    }
    for case in 0..80 {
        let (a, b) = (mutate_text(&raw, &mut rng), mutate_text(&details, &mut rng));
        let r = bounded(
            Duration::from_secs(20),
            format!("ncu case {case}"),
            move || aisp_profile::ncu::summarize(&[&a, &b], 20).map(|s| s.kernel_count),
        );
        if r.is_ok() { ok += 1 } else { err += 1 }
    }
    // Deep nesting is refused by serde_json's recursion limit, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(aisp_profile::kineto::parse(Path::new("deep.json"), &deep).is_err());
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
    eprintln!(
        "kineto/ncu: {ok} parsed, {err} refused in {:?}",
        started.elapsed()
    );
}
