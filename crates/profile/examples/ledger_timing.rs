//! Where the step ledger's time goes on one export (wall time of each stage, in the order a session meets them).
//!
//!     cargo run --release -p aisp-profile --example ledger_timing -- EXPORT.sqlite
use std::time::Instant;

use aisp_profile::{Scope, ledger, rules, summary};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: ledger_timing EXPORT.sqlite");
    let t = Instant::now();
    let p = aisp_profile::open(std::path::Path::new(&path)).expect("open");
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
    lap("rules::run (builds again)", &mut t);
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
