//! Where the step ledger's time goes on one export (wall time of each stage, in the order a session meets them).
//!
//!     cargo run --release -p aisp-profile --example ledger_timing -- EXPORT.sqlite
//!
//! Opened with a table cache, as a server opens exports: `ledger::build` is the fresh build (nothing kept yet),
//! `rules::run` then finds the ledger kept; `prefetch + rules::run` is a fresh open of another export handle
//! whose ledger a background thread builds while this one waits in `rules::run`.
use std::sync::Arc;
use std::time::Instant;

use aisp_profile::loaded::TableCache;
use aisp_profile::{OpenOptions, Scope, ledger, rules, summary};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: ledger_timing EXPORT.sqlite");
    let open = |cache: &Arc<TableCache>| {
        let options = OpenOptions {
            tables: Some(cache.clone()),
            ..Default::default()
        };
        aisp_profile::open_with(std::path::Path::new(&path), &options).expect("open")
    };
    let cache = Arc::new(TableCache::new(4 << 30));
    let t = Instant::now();
    let p = open(&cache);
    let scope = p.resolve(&Scope::default()).expect("scope");
    let lap = |what: &str, t: &mut Instant| {
        eprintln!("{what:<28} {:>8.1} ms", t.elapsed().as_secs_f64() * 1e3);
        *t = Instant::now();
    };
    let mut t = t;
    p.kernels().expect("kernels");
    p.api().expect("api");
    lap("open + kernels + api", &mut t);
    let ops = ledger::device_ops(&p, &scope).expect("ops");
    lap("device_ops", &mut t);
    summary::summary(&p, &scope, &Default::default()).expect("summary");
    lap("summary (device windows)", &mut t);
    for d in ops.iter() {
        ledger::device_steps(&p, d, None).expect("steps");
    }
    lap("device_steps (again)", &mut t);
    let l = ledger::build(&p, &scope, None).expect("ledger");
    lap("ledger::build", &mut t);
    let r = rules::run(&p, &scope).expect("rules");
    lap("rules::run (ledger kept)", &mut t);
    // The same export under a cache that keeps its tables but not yet its ledger.
    let fresh = Arc::new(TableCache::new(4 << 30));
    let q = open(&fresh);
    q.kernels().expect("kernels");
    q.api().expect("api");
    summary::summary(&q, &scope, &Default::default()).expect("summary");
    let mut t = Instant::now();
    let handle = ledger::prefetch(&q).expect("a prefetch starts");
    rules::run(&q, &scope).expect("rules");
    lap("prefetch + rules::run", &mut t);
    handle.join().expect("prefetch thread");
    // A digest of the whole ledger (every step's columns and idle pieces), to check that a faster build gives
    // the same answer.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&l).expect("json").hash(&mut h);
    eprintln!(
        "{} devices, {} findings, ledger digest {:016x}",
        l.devices.len(),
        r.findings.len(),
        h.finish()
    );
}
